/*
 * The client side of the worker protocol (docs/worker-protocol.md) on a libuv
 * loop: a Python worker spawned over stdio, or one already running on a Unix
 * socket. One request is outstanding at a time; every failure (the worker
 * exiting, a line that is not a JSON object, EOF, a deadline) reaches the
 * waiting callback as an error with a message a person can act on.
 */
#ifndef KAGENT_WORKER_CLIENT_H
#define KAGENT_WORKER_CLIENT_H

#include <jansson.h>
#include <uv.h>

#define KAGENT_WORKER_PROTOCOL 1
/* The longest line accepted from a worker. */
#define KAGENT_WORKER_CLIENT_LINE_CAP (64u * 1024 * 1024)
/* How much of a spawned worker's stderr is kept for error messages. */
#define KAGENT_WORKER_CLIENT_STDERR_CAP 16384

typedef struct kagent_worker_client kagent_worker_client_t;

/*
 * The hello arrived (status 0, hello is the worker's hello object, borrowed) or the worker
 * could not be reached (status a negative errno, message says why; the worker is unusable
 * and the caller must still close it).
 */
typedef void (*kagent_worker_client_ready_cb)(kagent_worker_client_t *worker, int status,
					      const json_t *hello, const char *message, void *data);
/* The next response (status 0, response borrowed: json_incref to keep) or an error as above. */
typedef void (*kagent_worker_client_response_cb)(kagent_worker_client_t *worker, int status,
						 const json_t *response, const char *message,
						 void *data);
/* The worker and all its handles are gone. */
typedef void (*kagent_worker_client_close_cb)(void *data);

struct kagent_worker_client_spawn_options {
	const char *python;	   /* NULL: kagent_paths_python */
	const char *runner_dir;	   /* NULL: kagent_paths_runner_dir; prepended to PYTHONPATH */
	unsigned hello_timeout_ms; /* 0: 180 s (importing torch can be slow on a cold disk) */
	unsigned term_after_ms;	   /* on close, SIGTERM this long after stdin closed; 0: 5 s */
	unsigned kill_after_ms;	   /* on close, SIGKILL this long after stdin closed; 0: 10 s */
	int echo_stderr;	   /* also copy the worker's stderr to ours */
};

/*
 * Starts `<python> -m kagent_runner.worker --stdio`. Returns 0 and *out, then calls ready once.
 * On a negative errno (with *cause) *out is NULL; handles already made are closed by the
 * loop, so the caller must still run it.
 */
int kagent_worker_client_spawn(uv_loop_t *loop,
			       const struct kagent_worker_client_spawn_options *options,
			       kagent_worker_client_ready_cb ready, void *data,
			       kagent_worker_client_t **out, char **cause);
/* Connects to a worker started with --socket PATH. Returns 0 and *out, then calls ready once. */
int kagent_worker_client_connect(uv_loop_t *loop, const char *socket_path,
				 unsigned hello_timeout_ms, kagent_worker_client_ready_cb ready,
				 void *data, kagent_worker_client_t **out, char **cause);
/*
 * Sends one request (a JSON object) and calls callback with the next response line, or an
 * error after deadline_ms (then a spawned worker is killed). Returns 0, or -EBUSY, -EPIPE or
 * -EINVAL with *cause (the callback is then never called).
 */
int kagent_worker_client_request(kagent_worker_client_t *worker, const json_t *request,
				 uint64_t deadline_ms, kagent_worker_client_response_cb callback,
				 void *data, char **cause);
/* The hello once ready, else NULL; borrowed. */
const json_t *kagent_worker_client_hello(const kagent_worker_client_t *worker);
/* The worker's process id (spawned) or 0. */
int kagent_worker_client_pid(const kagent_worker_client_t *worker);
/*
 * Closes the worker: an outstanding request fails with -ECANCELED first; a spawned worker gets
 * stdin closed, then SIGTERM and SIGKILL if it does not exit. callback (may be NULL) runs once
 * every handle is closed; the worker must not be used after this call.
 */
void kagent_worker_client_close(kagent_worker_client_t *worker,
				kagent_worker_client_close_cb callback, void *data);

#endif
