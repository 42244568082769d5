/*
 * The warm worker of a session (agent/session/warm_worker.c): one `kagent
 * worker` process for the run's evaluations, with its own libuv handles, which
 * it closes itself when its owner lets it go. kagentd's evaluation lanes keep
 * one each as well.
 */
#ifndef KAGENT_WARM_WORKER_H
#define KAGENT_WARM_WORKER_H

#include <uv.h>

enum kagent_warm_worker_state {
	KAGENT_WARM_WORKER_GONE, /* none: evaluations start their own */
	KAGENT_WARM_WORKER_STARTING,
	KAGENT_WARM_WORKER_READY,
	KAGENT_WARM_WORKER_STOPPING,
};

struct kagent_warm_worker {
	enum kagent_warm_worker_state state;
	uv_loop_t *loop;
	uv_process_t process;
	uv_timer_t poll_timer;
	int handles_open; /* the poll timer, and the process once spawned */
	char *socket_path;
	char *log_path;
	long polls;
	void *pending; /* an evaluation waiting for the socket */
	void (*on_ready)(void *data);
	void (*closed)(void *data); /* set by kagent_warm_worker_close */
	void *closed_data;
};

/* Readies a worker on loop, gone until started. */
void kagent_warm_worker_init(struct kagent_warm_worker *worker, uv_loop_t *loop);
/* Starts `executable worker` for run_id on GPU gpu_index (the only GPU it sees, as device 0;
 * -1: every GPU, as device indexes go), with --prepare-candidates when prepare_candidates,
 * its output going to log_path. Failure only costs speed. */
void kagent_warm_worker_start(struct kagent_warm_worker *worker, const char *executable,
			      const char *run_id, int gpu_index, int prepare_candidates,
			      const char *log_path);
/* 1 when the worker is still starting: on_ready(data) runs once it is ready or gone. */
int kagent_warm_worker_wait(struct kagent_warm_worker *worker, void (*on_ready)(void *data),
			    void *data);
/* The worker's socket when it is ready, else NULL. */
const char *kagent_warm_worker_socket(const struct kagent_warm_worker *worker);
void kagent_warm_worker_stop(struct kagent_warm_worker *worker);
/* Stops the worker and closes its handles; closed(data) runs once they all have, and only
 * then may the worker's memory go. */
void kagent_warm_worker_close(struct kagent_warm_worker *worker, void (*closed)(void *data),
			      void *data);

#endif
