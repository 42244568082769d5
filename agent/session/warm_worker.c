/*
 * The warm worker a session keeps for its evaluations: `kagent worker` on a
 * socket of the run's own, started with the session so that torch is imported
 * while the model writes its first reply, and stopped when the run concludes
 * (the final check runs in a fresh process anyway, and the GPU memory is
 * better given back). Until the socket appears, an evaluation waits; if the
 * worker cannot start, evaluations fall back to a worker of their own, as
 * `kagent eval` does. Its output goes to a log beside the trace, not into the
 * terminal view.
 */
#include "session_internal.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/log.h"
#include "kagent/base/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Importing torch and initialising CUDA takes seconds; a worker silent this long is stuck. */
#define WARM_WORKER_START_SECONDS 300
#define WARM_WORKER_POLL_MS 100

static void
warm_worker__release_pending(struct kagent_session *session)
{
	struct kagent_warm_worker *worker = &session->worker;

	uv_timer_stop(&worker->poll_timer);
	if (worker->pending != NULL) {
		void *pending = worker->pending;

		worker->pending = NULL;
		worker->on_ready(pending);
	}
}

static void
warm_worker__exited(uv_process_t *process, int64_t exit_status, int term_signal)
{
	struct kagent_session *session = process->data;
	struct kagent_warm_worker *worker = &session->worker;

	if (worker->state != KAGENT_WARM_WORKER_STOPPING)
		kagent_log(KAGENT_LOG_ERROR,
			   "the session's worker exited (status %lld, signal %d); see %s",
			   (long long)exit_status, term_signal, worker->log_path);
	worker->state = KAGENT_WARM_WORKER_GONE;
	uv_close((uv_handle_t *)process, kagent_session_handle_closed);
	warm_worker__release_pending(session);
}

static void
warm_worker__poll(uv_timer_t *timer)
{
	struct kagent_session *session = timer->data;
	struct kagent_warm_worker *worker = &session->worker;

	if (access(worker->socket_path, F_OK) == 0) {
		worker->state = KAGENT_WARM_WORKER_READY;
		warm_worker__release_pending(session);
		return;
	}
	if (++worker->polls * WARM_WORKER_POLL_MS >= WARM_WORKER_START_SECONDS * 1000) {
		kagent_log(KAGENT_LOG_ERROR, "the session's worker did not start; see %s",
			   worker->log_path);
		kagent_warm_worker_stop(session);
		warm_worker__release_pending(session);
	}
}

/* A socket path short enough for sun_path: beside the default worker socket. */
static char *
warm_worker__socket_path(const struct kagent_session *session, char **error)
{
	char *default_socket = NULL, *slash, *path = NULL;

	if (kagent_paths_worker_socket(&default_socket, error) < 0)
		return NULL;
	slash = strrchr(default_socket, '/');
	if (slash != NULL)
		*slash = '\0';
	if (kagent_fileio_make_directories(default_socket, 0700, error) == 0)
		path = kagent_asprintf("%s/session-%s.sock", slash != NULL ? default_socket : ".",
				       session->run_id);
	free(default_socket);
	return path;
}

void
kagent_warm_worker_start(struct kagent_session *session, const char *log_path)
{
	struct kagent_warm_worker *worker = &session->worker;
	char gpu[16], *executable = NULL, *error = NULL;
	uv_process_options_t options = {0};
	uv_stdio_container_t stdio[3];
	int log_fd, status;

	worker->log_path = kagent_strdup(log_path);
	worker->socket_path = warm_worker__socket_path(session, &error);
	if (worker->socket_path == NULL)
		goto fail;
	unlink(worker->socket_path);
	log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log_fd < 0) {
		error = kagent_asprintf("%s: %s", log_path, strerror(errno));
		goto fail;
	}
	executable = kagent_strdup(session->worker_executable);
	snprintf(gpu, sizeof gpu, "%d", session->config->evaluation.gpu_index);
	{
		char *arguments[] = {"kagent", "worker", "--socket", worker->socket_path,
				     "--gpu",  gpu,	 NULL};

		stdio[0].flags = UV_IGNORE;
		stdio[1].flags = UV_INHERIT_FD;
		stdio[1].data.fd = log_fd;
		stdio[2].flags = UV_INHERIT_FD;
		stdio[2].data.fd = log_fd;
		options.file = executable;
		options.args = arguments;
		options.stdio = stdio;
		options.stdio_count = 3;
		options.exit_cb = warm_worker__exited;
		worker->process.data = session;
		status = uv_spawn(session->loop, &worker->process, &options);
	}
	close(log_fd);
	free(executable);
	if (status < 0) {
		error = kagent_asprintf("cannot start a worker: %s", uv_strerror(status));
		/* A failed uv_spawn still initialised the handle, which must be closed. */
		session->handles_open++;
		uv_close((uv_handle_t *)&worker->process, kagent_session_handle_closed);
		goto fail;
	}
	session->handles_open++;
	worker->state = KAGENT_WARM_WORKER_STARTING;
	uv_timer_start(&worker->poll_timer, warm_worker__poll, WARM_WORKER_POLL_MS,
		       WARM_WORKER_POLL_MS);
	return;
fail:
	kagent_log(KAGENT_LOG_ERROR, "evaluations will start their own workers: %s", error);
	free(error);
	worker->state = KAGENT_WARM_WORKER_GONE;
}

int
kagent_warm_worker_wait(struct kagent_session *session, void (*on_ready)(void *data), void *data)
{
	struct kagent_warm_worker *worker = &session->worker;

	if (worker->state != KAGENT_WARM_WORKER_STARTING)
		return 0;
	/* Evaluations of a session run one at a time. */
	worker->pending = data;
	worker->on_ready = on_ready;
	return 1;
}

const char *
kagent_warm_worker_socket(const struct kagent_session *session)
{
	return session->worker.state == KAGENT_WARM_WORKER_READY ? session->worker.socket_path
								 : NULL;
}

void
kagent_warm_worker_stop(struct kagent_session *session)
{
	struct kagent_warm_worker *worker = &session->worker;

	if (worker->state != KAGENT_WARM_WORKER_STARTING &&
	    worker->state != KAGENT_WARM_WORKER_READY)
		return;
	worker->state = KAGENT_WARM_WORKER_STOPPING;
	uv_timer_stop(&worker->poll_timer);
	uv_process_kill(&worker->process, SIGTERM);
}
