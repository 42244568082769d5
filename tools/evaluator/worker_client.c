/*
 * The worker protocol client (see include/kagent/evaluator/worker_client.h). Every libuv handle
 * lives inside struct kagent_worker_client; the struct is freed only in the close
 * callback of its last handle, so a user callback may close the worker at any
 * point without the code that called it touching freed memory.
 */
#include "kagent/evaluator/worker_client.h"
#include "kagent/base/alloc.h"
#include "kagent/base/log.h"
#include "kagent/base/paths.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

#define WORKER_HELLO_TIMEOUT_MS 180000
#define WORKER_TERM_AFTER_MS 5000
#define WORKER_KILL_AFTER_MS 10000
/* After the process exits, how long to wait for the rest of its output. */
#define WORKER_DRAIN_MS 1000
/* How long to wait before connecting again to a worker whose listen backlog was full. */
#define WORKER_CONNECT_RETRY_MS 20
#define WORKER_READ_CHUNK 65536
#define WORKER_QUOTE_CAP 200

enum worker_client__state {
	WORKER_HELLO,	/* waiting for the hello */
	WORKER_READY,	/* idle */
	WORKER_BUSY,	/* a request is outstanding */
	WORKER_FAILED,	/* unusable; waiting for close */
	WORKER_CLOSING, /* kagent_worker_client_close was called */
};

/* What the timer is counting down to. */
enum worker_client__timer_purpose {
	WORKER_TIMER_NONE,
	WORKER_TIMER_DEADLINE, /* hello or response */
	WORKER_TIMER_CONNECT,  /* connect to the worker's socket (again, after a full backlog) */
	WORKER_TIMER_DRAIN,    /* process exited; give its pipes a moment */
	WORKER_TIMER_TERM,     /* closing: SIGTERM next */
	WORKER_TIMER_KILL,     /* closing: SIGKILL next */
};

struct kagent_worker_client {
	uv_loop_t *loop;
	enum worker_client__state state;
	int spawned;
	char
	    *description; /* "worker (python3, pid 12)" or "worker at /run/...sock", for messages */

	uv_process_t process;
	uv_pipe_t input;  /* we write requests here (stdin, or the socket) */
	uv_pipe_t output; /* we read responses here (stdout, or the same socket) */
	uv_pipe_t errors; /* the spawned worker's stderr */
	uv_timer_t timer;
	char *socket_path;	/* a worker we connect to: for connecting again */
	uint64_t connect_until; /* loop time (ms) the hello is due by */
	enum worker_client__timer_purpose timer_purpose;
	int open_handles;
	int input_open, output_open, errors_open, process_open;

	int exited;
	int64_t exit_status;
	int term_signal;
	int output_eof, errors_eof;

	char *line;
	size_t line_used, line_capacity, line_scanned;

	char stderr_tail[KAGENT_WORKER_CLIENT_STDERR_CAP];
	size_t stderr_used;
	int echo_stderr;

	json_t *hello;
	char *failure; /* why the worker became unusable */
	unsigned hello_timeout_ms, term_after_ms, kill_after_ms;
	uint64_t deadline_ms;

	kagent_worker_client_ready_cb ready;
	void *ready_data;
	kagent_worker_client_response_cb response;
	void *response_data;
	kagent_worker_client_close_cb closed;
	void *closed_data;
};

struct worker_client__write {
	uv_write_t request;
	char *text;
};

static void worker_client__fail(kagent_worker_client_t *worker, int status, const char *message);
static void worker_client__connect_socket(kagent_worker_client_t *worker);

static void
worker_client__handle_closed(uv_handle_t *handle)
{
	kagent_worker_client_t *worker = handle->data;

	if (--worker->open_handles > 0)
		return;
	if (worker->closed != NULL)
		worker->closed(worker->closed_data);
	json_decref(worker->hello);
	free(worker->socket_path);
	free(worker->failure);
	free(worker->line);
	free(worker->description);
	free(worker);
}

static void
worker_client__close_handle(kagent_worker_client_t *worker, uv_handle_t *handle, int *open)
{
	if (!*open)
		return;
	*open = 0;
	uv_close(handle, worker_client__handle_closed);
}

/* Closes every handle except the process while it still runs (its exit is still awaited). */
static void
worker_client__close_all(kagent_worker_client_t *worker)
{
	int timer_open = !uv_is_closing((uv_handle_t *)&worker->timer);

	worker_client__close_handle(worker, (uv_handle_t *)&worker->input, &worker->input_open);
	worker_client__close_handle(worker, (uv_handle_t *)&worker->output, &worker->output_open);
	worker_client__close_handle(worker, (uv_handle_t *)&worker->errors, &worker->errors_open);
	worker_client__close_handle(worker, (uv_handle_t *)&worker->process, &worker->process_open);
	worker_client__close_handle(worker, (uv_handle_t *)&worker->timer, &timer_open);
}

static void worker_client__start_timer(kagent_worker_client_t *worker,
				       enum worker_client__timer_purpose purpose, uint64_t ms);

/* The last non-empty line of the worker's stderr, usually the exception that ended it. */
static char *
worker_client__stderr_last_line(const kagent_worker_client_t *worker)
{
	const char *start = worker->stderr_tail, *end = start + worker->stderr_used, *line;

	while (end > start && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		end--;
	line = end;
	while (line > start && line[-1] != '\n')
		line--;
	if (end == line)
		return NULL;
	return kagent_strndup(line, (size_t)(end - line) > 1000 ? 1000 : (size_t)(end - line));
}

static void
worker_client__kill(kagent_worker_client_t *worker, int signal_number)
{
	if (worker->spawned && worker->process_open && !worker->exited)
		uv_process_kill(&worker->process, signal_number);
}

/* Reports a spawned worker's death once its exit status and its output are both in. */
static void
worker_client__check_death(kagent_worker_client_t *worker, int drained)
{
	char *last, *message;

	if (!worker->exited || worker->state == WORKER_FAILED || worker->state == WORKER_CLOSING)
		return;
	if (!drained && !(worker->output_eof && worker->errors_eof))
		return;
	last = worker_client__stderr_last_line(worker);
	if (worker->term_signal != 0)
		message = kagent_asprintf(
		    "%s was killed by signal %d (SIG%s)%s%s", worker->description,
		    worker->term_signal,
		    sigabbrev_np(worker->term_signal) ? sigabbrev_np(worker->term_signal) : "?",
		    last ? ": " : "", last ? last : "");
	else
		message = kagent_asprintf("%s exited with status %lld%s%s%s", worker->description,
					  (long long)worker->exit_status,
					  worker->state == WORKER_READY ? "" : " before answering",
					  last ? ": " : "", last ? last : "");
	worker_client__fail(worker, -EPIPE, message);
	free(last);
	free(message);
}

/*
 * Marks the worker unusable and tells whoever waits. A spawned worker that broke the
 * protocol or missed its deadline is killed: its answer can no longer be trusted.
 */
static void
worker_client__fail(kagent_worker_client_t *worker, int status, const char *message)
{
	enum worker_client__state previous = worker->state;

	if (previous == WORKER_FAILED || previous == WORKER_CLOSING)
		return;
	worker->state = WORKER_FAILED;
	free(worker->failure);
	worker->failure = kagent_strdup(message);
	kagent_log(KAGENT_LOG_INFO, "%s", message);
	uv_timer_stop(&worker->timer);
	worker->timer_purpose = WORKER_TIMER_NONE;
	worker_client__kill(worker, SIGKILL);
	if (previous == WORKER_HELLO && worker->ready != NULL)
		worker->ready(worker, status, NULL, message, worker->ready_data);
	else if (previous == WORKER_BUSY && worker->response != NULL)
		worker->response(worker, status, NULL, message, worker->response_data);
}

/* A quote of a peer's line for a message: the start of it, printable. */
static char *
worker_client__quote(const char *line, size_t length)
{
	size_t index, take = length > WORKER_QUOTE_CAP ? WORKER_QUOTE_CAP : length;
	char *copy = kagent_strndup(line, take);

	for (index = 0; index < take; index++) {
		if ((unsigned char)copy[index] < 0x20)
			copy[index] = ' ';
	}
	return copy;
}

static void
worker_client__handle_hello(kagent_worker_client_t *worker, json_t *value, const char *line,
			    size_t length)
{
	const json_t *protocol = json_object_get(value, "protocol");
	const char *type = json_string_value(json_object_get(value, "type"));
	char *message = NULL, *quote;

	if (type == NULL || strcmp(type, "hello") != 0) {
		quote = worker_client__quote(line, length);
		message = kagent_asprintf("%s did not start with a hello: %s", worker->description,
					  quote);
		free(quote);
	} else if (!json_is_integer(protocol) ||
		   json_integer_value(protocol) != KAGENT_WORKER_PROTOCOL) {
		message = kagent_asprintf(
		    "%s speaks protocol %lld; this kagent speaks %d", worker->description,
		    json_is_integer(protocol) ? (long long)json_integer_value(protocol) : -1LL,
		    KAGENT_WORKER_PROTOCOL);
	}
	if (message != NULL) {
		worker_client__fail(worker, -EPROTO, message);
		free(message);
		return;
	}
	worker->hello = json_incref(value);
	worker->state = WORKER_READY;
	uv_timer_stop(&worker->timer);
	worker->timer_purpose = WORKER_TIMER_NONE;
	if (worker->ready != NULL)
		worker->ready(worker, 0, worker->hello, NULL, worker->ready_data);
}

static void
worker_client__handle_line(kagent_worker_client_t *worker, const char *line, size_t length)
{
	json_error_t error;
	json_t *value;
	char *quote, *message;

	if (length == 0)
		return;
	value = json_loadb(line, length, JSON_REJECT_DUPLICATES, &error);
	if (!json_is_object(value)) {
		quote = worker_client__quote(line, length);
		message = kagent_asprintf("%s sent a line that is not a JSON object: %s",
					  worker->description, quote);
		worker_client__fail(worker, -EPROTO, message);
		free(quote);
		free(message);
		goto out;
	}
	if (worker->state == WORKER_HELLO) {
		worker_client__handle_hello(worker, value, line, length);
		goto out;
	}
	if (worker->state != WORKER_BUSY) {
		kagent_log(KAGENT_LOG_WARNING, "%s sent a line nobody asked for; ignored",
			   worker->description);
		goto out;
	}
	worker->state = WORKER_READY;
	uv_timer_stop(&worker->timer);
	worker->timer_purpose = WORKER_TIMER_NONE;
	worker->response(worker, 0, value, NULL, worker->response_data);
out:
	json_decref(value);
}

static void
worker_client__alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer)
{
	kagent_worker_client_t *worker = handle->data;
	size_t wanted = worker->line_used + WORKER_READ_CHUNK;

	/* One byte past the cap is enough to see that a line is too long. */
	if (wanted > KAGENT_WORKER_CLIENT_LINE_CAP + 1)
		wanted = KAGENT_WORKER_CLIENT_LINE_CAP + 1;
	if (wanted > worker->line_capacity) {
		worker->line = kagent_realloc(worker->line, wanted);
		worker->line_capacity = wanted;
	}
	*buffer = uv_buf_init(worker->line + worker->line_used,
			      (unsigned)(worker->line_capacity - worker->line_used));
}

static void
worker_client__on_output(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buffer)
{
	kagent_worker_client_t *worker = stream->data;
	char *message;

	if (nread == 0)
		return;
	if (nread < 0) {
		uv_read_stop(stream);
		worker->output_eof = 1;
		if (worker->spawned) {
			worker_client__check_death(worker, 0);
			return;
		}
		message =
		    nread == UV_EOF
			? kagent_asprintf("%s closed the connection%s", worker->description,
					  worker->state == WORKER_BUSY ? " before answering" : "")
			: kagent_asprintf("cannot read from %s: %s", worker->description,
					  uv_strerror((int)nread));
		worker_client__fail(worker, -EPIPE, message);
		free(message);
		return;
	}
	if (worker->state == WORKER_FAILED || worker->state == WORKER_CLOSING) {
		worker->line_used = 0; /* draining a dying worker */
		worker->line_scanned = 0;
		return;
	}
	worker->line_used += (size_t)nread;
	for (;;) {
		char *newline = memchr(worker->line + worker->line_scanned, '\n',
				       worker->line_used - worker->line_scanned);
		size_t length;

		if (newline == NULL) {
			worker->line_scanned = worker->line_used;
			break;
		}
		length = (size_t)(newline - worker->line);
		worker_client__handle_line(worker, worker->line, length);
		memmove(worker->line, newline + 1, worker->line_used - length - 1);
		worker->line_used -= length + 1;
		worker->line_scanned = 0;
		if (worker->state == WORKER_FAILED || worker->state == WORKER_CLOSING) {
			worker->line_used = 0;
			return;
		}
	}
	if (worker->line_used > KAGENT_WORKER_CLIENT_LINE_CAP) {
		message = kagent_asprintf("%s sent a line longer than %u MiB", worker->description,
					  KAGENT_WORKER_CLIENT_LINE_CAP / (1024 * 1024));
		worker->line_used = 0;
		worker->line_scanned = 0;
		worker_client__fail(worker, -EMSGSIZE, message);
		free(message);
	}
}

static void
worker_client__stderr_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer)
{
	static char scratch[4096];

	/* One loop thread: a static buffer consumed at once in worker_client__on_errors is safe. */
	*buffer = uv_buf_init(scratch, sizeof scratch);
}

static void
worker_client__on_errors(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buffer)
{
	kagent_worker_client_t *worker = stream->data;
	size_t length, keep;

	if (nread < 0) {
		uv_read_stop(stream);
		worker->errors_eof = 1;
		worker_client__check_death(worker, 0);
		return;
	}
	length = (size_t)nread;
	if (worker->echo_stderr)
		fwrite(buffer->base, 1, length, stderr);
	/* Keep the tail: drop the oldest bytes to make room. */
	if (length >= sizeof worker->stderr_tail) {
		memcpy(worker->stderr_tail, buffer->base + length - sizeof worker->stderr_tail,
		       sizeof worker->stderr_tail);
		worker->stderr_used = sizeof worker->stderr_tail;
		return;
	}
	if (worker->stderr_used + length > sizeof worker->stderr_tail) {
		keep = sizeof worker->stderr_tail - length;
		memmove(worker->stderr_tail, worker->stderr_tail + worker->stderr_used - keep,
			keep);
		worker->stderr_used = keep;
	}
	memcpy(worker->stderr_tail + worker->stderr_used, buffer->base, length);
	worker->stderr_used += length;
}

static void
worker_client__on_exit(uv_process_t *process, int64_t exit_status, int term_signal)
{
	kagent_worker_client_t *worker = process->data;

	worker->exited = 1;
	worker->exit_status = exit_status;
	worker->term_signal = term_signal;
	if (worker->state == WORKER_CLOSING) {
		worker_client__close_all(worker);
		return;
	}
	if (worker->state == WORKER_FAILED)
		return;
	worker_client__start_timer(worker, WORKER_TIMER_DRAIN, WORKER_DRAIN_MS);
	worker_client__check_death(worker, 0);
}

static void
worker_client__on_timer(uv_timer_t *timer)
{
	kagent_worker_client_t *worker = timer->data;
	enum worker_client__timer_purpose purpose = worker->timer_purpose;
	char *message;

	worker->timer_purpose = WORKER_TIMER_NONE;
	switch (purpose) {
	case WORKER_TIMER_DEADLINE:
		message =
		    worker->state == WORKER_HELLO
			? kagent_asprintf("%s sent no hello within %.0f s", worker->description,
					  worker->hello_timeout_ms / 1000.0)
			: kagent_asprintf("%s did not answer within %.0f s", worker->description,
					  worker->deadline_ms / 1000.0);
		worker_client__fail(worker, -ETIMEDOUT, message);
		free(message);
		break;
	case WORKER_TIMER_CONNECT:
		worker_client__connect_socket(worker);
		break;
	case WORKER_TIMER_DRAIN:
		worker_client__check_death(worker, 1);
		break;
	case WORKER_TIMER_TERM:
		worker_client__kill(worker, SIGTERM);
		worker_client__start_timer(worker, WORKER_TIMER_KILL,
					   worker->kill_after_ms > worker->term_after_ms
					       ? worker->kill_after_ms - worker->term_after_ms
					       : 1);
		break;
	case WORKER_TIMER_KILL:
		worker_client__kill(worker, SIGKILL);
		break;
	case WORKER_TIMER_NONE:
		break;
	}
}

static void
worker_client__start_timer(kagent_worker_client_t *worker,
			   enum worker_client__timer_purpose purpose, uint64_t ms)
{
	if (uv_is_closing((uv_handle_t *)&worker->timer))
		return;
	worker->timer_purpose = purpose;
	uv_timer_start(&worker->timer, worker_client__on_timer, ms, 0);
}

static kagent_worker_client_t *
worker_client__new(uv_loop_t *loop, kagent_worker_client_ready_cb ready, void *data,
		   unsigned hello_timeout_ms)
{
	kagent_worker_client_t *worker = kagent_calloc(1, sizeof *worker);

	worker->loop = loop;
	worker->state = WORKER_HELLO;
	worker->ready = ready;
	worker->ready_data = data;
	worker->hello_timeout_ms = hello_timeout_ms ? hello_timeout_ms : WORKER_HELLO_TIMEOUT_MS;
	worker->term_after_ms = WORKER_TERM_AFTER_MS;
	worker->kill_after_ms = WORKER_KILL_AFTER_MS;
	uv_timer_init(loop, &worker->timer);
	worker->timer.data = worker;
	worker->open_handles = 1;
	return worker;
}

/* environ plus PYTHONPATH (runner first) and PYTHONUNBUFFERED; the caller frees the array. */
static char **
worker_client__environment(const char *runner_dir)
{
	size_t count = 0, index, used = 0;
	const char *old_path = getenv("PYTHONPATH");
	char **environment, *bytecode = NULL;

	while (environ[count] != NULL)
		count++;
	environment = kagent_calloc(count + 4, sizeof *environment);
	for (index = 0; index < count; index++) {
		if (strncmp(environ[index], "PYTHONPATH=", 11) == 0 ||
		    strncmp(environ[index], "PYTHONUNBUFFERED=", 17) == 0 ||
		    strncmp(environ[index], "KAGENT_BYTECODE_DIR=", 20) == 0)
			continue;
		environment[used++] = kagent_strdup(environ[index]);
	}
	/* Without it the worker only goes without a bytecode cache (bytecode.py). */
	if (kagent_paths_bytecode_dir(&bytecode, NULL) == 0) {
		environment[used++] = kagent_asprintf("KAGENT_BYTECODE_DIR=%s", bytecode);
		free(bytecode);
	}
	if (old_path != NULL && old_path[0] != '\0')
		environment[used++] = kagent_asprintf("PYTHONPATH=%s:%s", runner_dir, old_path);
	else
		environment[used++] = kagent_asprintf("PYTHONPATH=%s", runner_dir);
	environment[used++] = kagent_strdup("PYTHONUNBUFFERED=1");
	environment[used] = NULL;
	return environment;
}

int
kagent_worker_client_spawn(uv_loop_t *loop,
			   const struct kagent_worker_client_spawn_options *options,
			   kagent_worker_client_ready_cb ready, void *data,
			   kagent_worker_client_t **out, char **cause)
{
	struct kagent_worker_client_spawn_options defaults = {0};
	kagent_worker_client_t *worker;
	uv_process_options_t process_options = {0};
	uv_stdio_container_t stdio[3];
	char *python = NULL, *runner_dir = NULL, **environment = NULL;
	char *arguments[7], parent[16];
	size_t index;
	int error = 0;

	*out = NULL;
	if (options == NULL)
		options = &defaults;
	if (options->python != NULL)
		python = kagent_strdup(options->python);
	else if ((error = kagent_paths_python(&python, cause)) != 0)
		goto out;
	if (options->runner_dir != NULL)
		runner_dir = kagent_strdup(options->runner_dir);
	else if ((error = kagent_paths_runner_dir(&runner_dir, cause)) != 0)
		goto out;

	worker = worker_client__new(loop, ready, data, options->hello_timeout_ms);
	worker->spawned = 1;
	worker->echo_stderr = options->echo_stderr;
	if (options->term_after_ms != 0)
		worker->term_after_ms = options->term_after_ms;
	if (options->kill_after_ms != 0)
		worker->kill_after_ms = options->kill_after_ms;
	uv_pipe_init(loop, &worker->input, 0);
	uv_pipe_init(loop, &worker->output, 0);
	uv_pipe_init(loop, &worker->errors, 0);
	worker->input.data = worker->output.data = worker->errors.data = worker;
	worker->process.data = worker;
	worker->input_open = worker->output_open = worker->errors_open = 1;
	worker->process_open = 1;
	worker->open_handles += 4;

	arguments[0] = python;
	arguments[1] = "-m";
	arguments[2] = "kagent_runner.worker";
	arguments[3] = "--stdio";
	/* The worker ends when this process does, even by kill -9: it is never left behind. */
	snprintf(parent, sizeof parent, "%d", (int)getpid());
	arguments[4] = "--parent";
	arguments[5] = parent;
	arguments[6] = NULL;
	environment = worker_client__environment(runner_dir);
	stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
	stdio[0].data.stream = (uv_stream_t *)&worker->input;
	stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	stdio[1].data.stream = (uv_stream_t *)&worker->output;
	stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	stdio[2].data.stream = (uv_stream_t *)&worker->errors;
	process_options.file = python;
	process_options.args = arguments;
	process_options.env = environment;
	process_options.stdio = stdio;
	process_options.stdio_count = 3;
	process_options.exit_cb = worker_client__on_exit;
	error = uv_spawn(loop, &worker->process, &process_options);
	if (error != 0) {
		*cause = kagent_asprintf("cannot start the worker (%s -m kagent_runner.worker): %s",
					 python, uv_strerror(error));
		error = error == UV_ENOENT ? -ENOENT : -ECHILD;
		worker->state = WORKER_FAILED;
		worker_client__close_all(worker);
		goto out;
	}
	worker->description = kagent_asprintf("worker (pid %d)", worker->process.pid);
	uv_read_start((uv_stream_t *)&worker->output, worker_client__alloc,
		      worker_client__on_output);
	uv_read_start((uv_stream_t *)&worker->errors, worker_client__stderr_alloc,
		      worker_client__on_errors);
	worker_client__start_timer(worker, WORKER_TIMER_DEADLINE, worker->hello_timeout_ms);
	*out = worker;
out:
	if (environment != NULL) {
		for (index = 0; environment[index] != NULL; index++)
			free(environment[index]);
		free(environment);
	}
	free(python);
	free(runner_dir);
	return error;
}

/*
 * Connects the socket (a Unix socket connects at once, or fails), then waits for the hello. A
 * full listen backlog (many sessions sharing one worker, all starting together) is a moment's
 * wait, not a failure: EAGAIN connects again, until the hello is due. The socket is connected
 * by hand and handed to the pipe only once connected, because a libuv pipe whose connect
 * failed keeps its socket unopened for a second uv_pipe_connect.
 */
static void
worker_client__connect_socket(kagent_worker_client_t *worker)
{
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	uint64_t now = uv_now(worker->loop);
	int fd = -1, status;
	char *message;

	if (strlen(worker->socket_path) >= sizeof address.sun_path) {
		status = -ENAMETOOLONG;
		goto fail;
	}
	memcpy(address.sun_path, worker->socket_path, strlen(worker->socket_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
		status = -errno;
		goto fail;
	}
	if ((status = uv_pipe_open(&worker->output, fd)) < 0)
		goto fail;
	uv_read_start((uv_stream_t *)&worker->output, worker_client__alloc,
		      worker_client__on_output);
	worker_client__start_timer(worker, WORKER_TIMER_DEADLINE,
				   worker->connect_until > now ? worker->connect_until - now : 1);
	return;
fail:
	if (fd >= 0)
		close(fd);
	if (status == -EAGAIN && now + WORKER_CONNECT_RETRY_MS < worker->connect_until) {
		worker_client__start_timer(worker, WORKER_TIMER_CONNECT, WORKER_CONNECT_RETRY_MS);
		return;
	}
	message =
	    kagent_asprintf("cannot connect to %s: %s", worker->description, strerror(-status));
	worker_client__fail(worker, status == -ENOENT ? -ENOENT : -ECONNREFUSED, message);
	free(message);
}

int
kagent_worker_client_connect(uv_loop_t *loop, const char *socket_path, unsigned hello_timeout_ms,
			     kagent_worker_client_ready_cb ready, void *data,
			     kagent_worker_client_t **out, char **cause)
{
	kagent_worker_client_t *worker = worker_client__new(loop, ready, data, hello_timeout_ms);

	/* One socket for both directions: requests are written to output as well. */
	uv_pipe_init(loop, &worker->output, 0);
	worker->output.data = worker;
	worker->output_open = 1;
	worker->open_handles++;
	worker->description = kagent_asprintf("worker at %s", socket_path);
	worker->socket_path = kagent_strdup(socket_path);
	worker->connect_until = uv_now(loop) + worker->hello_timeout_ms;
	/* From the loop, so that a failure reaches ready after this returns. */
	worker_client__start_timer(worker, WORKER_TIMER_CONNECT, 0);
	*out = worker;
	return 0;
}

static void
worker_client__on_write(uv_write_t *request, int status)
{
	struct worker_client__write *write = request->data;
	kagent_worker_client_t *worker = write->request.handle->data;
	char *message;

	free(write->text);
	free(write);
	if (status == 0 || status == UV_ECANCELED)
		return;
	message =
	    kagent_asprintf("cannot send to %s: %s", worker->description, uv_strerror(status));
	/* A spawned worker that closed stdin has likely exited: let its exit explain why. */
	if (worker->spawned && !worker->exited)
		worker_client__fail(worker, -EPIPE, message);
	else if (!worker->spawned)
		worker_client__fail(worker, -EPIPE, message);
	free(message);
}

int
kagent_worker_client_request(kagent_worker_client_t *worker, const json_t *request,
			     uint64_t deadline_ms, kagent_worker_client_response_cb callback,
			     void *data, char **cause)
{
	struct worker_client__write *write = NULL;
	uv_stream_t *stream;
	uv_buf_t buffer;
	char *text = NULL;
	int error = 0;

	if (worker->state != WORKER_READY) {
		error = worker->state == WORKER_BUSY ? -EBUSY : -EPIPE;
		if (worker->failure != NULL)
			*cause = kagent_strdup(worker->failure);
		else
			*cause = kagent_asprintf("%s is %s", worker->description,
						 worker->state == WORKER_BUSY
						     ? "busy with another request"
						     : "not usable");
		goto out;
	}
	if (!json_is_object(request)) {
		error = -EINVAL;
		*cause = kagent_strdup("a worker request must be a JSON object");
		goto out;
	}
	text = json_dumps(request, JSON_COMPACT);
	if (text == NULL) {
		error = -EINVAL;
		*cause = kagent_strdup("the request cannot be written as JSON");
		goto out;
	}
	write = kagent_calloc(1, sizeof *write);
	write->text = kagent_asprintf("%s\n", text);
	write->request.data = write;
	buffer = uv_buf_init(write->text, (unsigned)strlen(write->text));
	stream = worker->spawned ? (uv_stream_t *)&worker->input : (uv_stream_t *)&worker->output;
	error = uv_write(&write->request, stream, &buffer, 1, worker_client__on_write);
	if (error != 0) {
		*cause = kagent_asprintf("cannot send to %s: %s", worker->description,
					 uv_strerror(error));
		error = -EPIPE;
		free(write->text);
		free(write);
		goto out;
	}
	worker->state = WORKER_BUSY;
	worker->response = callback;
	worker->response_data = data;
	worker->deadline_ms = deadline_ms;
	worker_client__start_timer(worker, WORKER_TIMER_DEADLINE, deadline_ms);
out:
	free(text);
	return error;
}

const json_t *
kagent_worker_client_hello(const kagent_worker_client_t *worker)
{
	return worker->hello;
}

int
kagent_worker_client_pid(const kagent_worker_client_t *worker)
{
	return worker->spawned && worker->process_open ? worker->process.pid : 0;
}

void
kagent_worker_client_close(kagent_worker_client_t *worker, kagent_worker_client_close_cb callback,
			   void *data)
{
	enum worker_client__state previous = worker->state;

	worker->state = WORKER_CLOSING;
	worker->closed = callback;
	worker->closed_data = data;
	uv_timer_stop(&worker->timer);
	worker->timer_purpose = WORKER_TIMER_NONE;
	if (previous == WORKER_BUSY && worker->response != NULL)
		worker->response(worker, -ECANCELED, NULL, "the worker was closed",
				 worker->response_data);
	else if (previous == WORKER_HELLO && worker->ready != NULL)
		worker->ready(worker, -ECANCELED, NULL, "the worker was closed",
			      worker->ready_data);
	if (!worker->spawned || worker->exited || !worker->process_open) {
		worker_client__close_all(worker);
		return;
	}
	/* Closing stdin asks the worker to finish; signals follow if it does not. */
	worker_client__close_handle(worker, (uv_handle_t *)&worker->input, &worker->input_open);
	worker_client__start_timer(worker, WORKER_TIMER_TERM, worker->term_after_ms);
}
