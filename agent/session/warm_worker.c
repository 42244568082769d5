/*
 * The warm worker a session keeps for its evaluations: `kagent worker` on a
 * socket of the run's own, started with the session so that torch is imported
 * while the model writes its first reply, and stopped when the run concludes
 * (the final check runs in a fresh process anyway, and the GPU memory is
 * better given back). It dies with this process, however that ends (`kagent
 * worker --parent`); its socket is removed when it exits, or by the next run
 * when both were killed. Until the socket appears, an evaluation waits; if the
 * worker cannot start, evaluations fall back to a worker of their own, as
 * `kagent eval` does. Its output goes to a log beside the trace, not into the
 * terminal view.
 */
#include "kagent/session/warm_worker.h"

#include "kagent/base/alloc.h"
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

/* The close callback of the worker's handles: the owner hears when the last has closed. */
static void
warm_worker__handle_closed(uv_handle_t *handle)
{
	struct kagent_warm_worker *worker = handle->data;

	if (--worker->handles_open > 0)
		return;
	free(worker->socket_path);
	free(worker->log_path);
	worker->closed(worker->closed_data);
}

static void
warm_worker__release_pending(struct kagent_warm_worker *worker)
{
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
	struct kagent_warm_worker *worker = process->data;

	if (worker->state != KAGENT_WARM_WORKER_STOPPING)
		kagent_log(KAGENT_LOG_ERROR,
			   "the session's worker exited (status %lld, signal %d); see %s",
			   (long long)exit_status, term_signal, worker->log_path);
	worker->state = KAGENT_WARM_WORKER_GONE;
	/* The name is this run's own: whatever is left there is a dead worker's. */
	unlink(worker->socket_path);
	uv_close((uv_handle_t *)process, warm_worker__handle_closed);
	warm_worker__release_pending(worker);
}

static void
warm_worker__poll(uv_timer_t *timer)
{
	struct kagent_warm_worker *worker = timer->data;

	if (access(worker->socket_path, F_OK) == 0) {
		worker->state = KAGENT_WARM_WORKER_READY;
		warm_worker__release_pending(worker);
		return;
	}
	if (++worker->polls * WARM_WORKER_POLL_MS >= WARM_WORKER_START_SECONDS * 1000) {
		kagent_log(KAGENT_LOG_ERROR, "the session's worker did not start; see %s",
			   worker->log_path);
		kagent_warm_worker_stop(worker);
		warm_worker__release_pending(worker);
	}
}

void
kagent_warm_worker_init(struct kagent_warm_worker *worker, uv_loop_t *loop)
{
	worker->state = KAGENT_WARM_WORKER_GONE;
	worker->loop = loop;
	uv_timer_init(loop, &worker->poll_timer);
	worker->poll_timer.data = worker;
	worker->handles_open = 1;
}

void
kagent_warm_worker_start(struct kagent_warm_worker *worker, const char *executable,
			 const char *run_id, int gpu_index, int prepare_candidates,
			 const char *log_path)
{
	char gpu[16], parent[16], *cause = NULL;
	uv_process_options_t options = {0};
	uv_stdio_container_t stdio[3];
	int log_fd, status;

	worker->log_path = kagent_strdup(log_path);
	if (kagent_paths_session_socket(run_id, &worker->socket_path, &cause) < 0)
		goto fail;
	unlink(worker->socket_path);
	log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log_fd < 0) {
		cause = kagent_asprintf("%s: %s", log_path, strerror(errno));
		goto fail;
	}
	snprintf(gpu, sizeof gpu, "%d", gpu_index);
	/* The worker ends when this process does, even by kill -9 (kagent worker --parent). */
	snprintf(parent, sizeof parent, "%d", (int)getpid());
	{
		char *arguments[10] = {"kagent",   "worker", "--socket", worker->socket_path,
				       "--parent", parent,   NULL};
		size_t count = 6;

		if (prepare_candidates)
			arguments[count++] = "--prepare-candidates";
		if (gpu_index >= 0) {
			arguments[count++] = "--gpu";
			arguments[count++] = gpu;
		}

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
		worker->process.data = worker;
		status = uv_spawn(worker->loop, &worker->process, &options);
	}
	close(log_fd);
	if (status < 0) {
		cause = kagent_asprintf("cannot start a worker: %s", uv_strerror(status));
		/* A failed uv_spawn still initialised the handle, which must be closed. */
		worker->handles_open++;
		uv_close((uv_handle_t *)&worker->process, warm_worker__handle_closed);
		goto fail;
	}
	worker->handles_open++;
	worker->state = KAGENT_WARM_WORKER_STARTING;
	uv_timer_start(&worker->poll_timer, warm_worker__poll, WARM_WORKER_POLL_MS,
		       WARM_WORKER_POLL_MS);
	return;
fail:
	kagent_log(KAGENT_LOG_ERROR, "evaluations will start their own workers: %s", cause);
	free(cause);
	worker->state = KAGENT_WARM_WORKER_GONE;
}

int
kagent_warm_worker_wait(struct kagent_warm_worker *worker, void (*on_ready)(void *data), void *data)
{
	if (worker->state != KAGENT_WARM_WORKER_STARTING)
		return 0;
	/* Evaluations of a session run one at a time. */
	worker->pending = data;
	worker->on_ready = on_ready;
	return 1;
}

const char *
kagent_warm_worker_socket(const struct kagent_warm_worker *worker)
{
	return worker->state == KAGENT_WARM_WORKER_READY ? worker->socket_path : NULL;
}

void
kagent_warm_worker_stop(struct kagent_warm_worker *worker)
{
	if (worker->state != KAGENT_WARM_WORKER_STARTING &&
	    worker->state != KAGENT_WARM_WORKER_READY)
		return;
	worker->state = KAGENT_WARM_WORKER_STOPPING;
	uv_timer_stop(&worker->poll_timer);
	uv_process_kill(&worker->process, SIGTERM);
}

void
kagent_warm_worker_close(struct kagent_warm_worker *worker, void (*closed)(void *data), void *data)
{
	worker->closed = closed;
	worker->closed_data = data;
	/* A worker still running is told to stop; its handle closes when it has exited. */
	kagent_warm_worker_stop(worker);
	uv_close((uv_handle_t *)&worker->poll_timer, warm_worker__handle_closed);
}
