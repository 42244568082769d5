/*
 * kagentd's reward service (agent/daemon/evaluations.c, docs/reward-service.md): POST and
 * GET /v1/evaluations, evaluation lanes per GPU, held in memory. Private to agent/daemon/; it
 * knows nothing of the daemon (daemon.c creates it with what it needs and hears when it has
 * stopped), so that the two do not depend on each other.
 */
#ifndef KAGENT_DAEMON_EVALUATIONS_H
#define KAGENT_DAEMON_EVALUATIONS_H

#include "kagent/daemon/http_server.h"
#include "kagent/daemon/store.h"

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

struct kagent_daemon_evaluations;

struct kagent_daemon_evaluations_options {
	uv_loop_t *loop;
	struct kagent_store *store;    /* its thread pool runs the file work */
	const char *device;	       /* "cuda" or "cpu" */
	const char *socket_path;       /* the daemon's: the lanes' worker logs go beside it */
	const char *worker_executable; /* `kagent worker` for the lanes; NULL: none warm */
	const int *slot_gpus;	       /* the GPU of each slot (borrowed) */
	size_t slot_count;
	int lanes_per_slot;	     /* evaluations at once per slot; 0: 1 */
	int prepare_candidates;	     /* the lanes' workers run with --prepare-candidates */
	void (*stopped)(void *data); /* after kagent_daemon_evaluations_stop, once it is over */
	void *data;
};

struct kagent_daemon_evaluations *
kagent_daemon_evaluations_create(const struct kagent_daemon_evaluations_options *options);
/* {"lanes_per_gpu", "queued", "running", "finished", "gpu_utilization"} for GET /v1/health. */
json_t *kagent_daemon_evaluations_health(struct kagent_daemon_evaluations *service);
/* The routes' work: POST /v1/evaluations and GET /v1/evaluations/{id}. */
void kagent_daemon_evaluations_post(struct kagent_daemon_evaluations *service,
				    struct kagent_http_request *request);
void kagent_daemon_evaluations_get(struct kagent_daemon_evaluations *service,
				   struct kagent_http_request *request);
/* Drops what waits and stops the lanes' workers (what runs then ends as an error); stopped
 * runs once nothing runs and every handle is closed. */
void kagent_daemon_evaluations_stop(struct kagent_daemon_evaluations *service);
int kagent_daemon_evaluations_stopped(const struct kagent_daemon_evaluations *service);
void kagent_daemon_evaluations_free(struct kagent_daemon_evaluations *service);

#endif
