/*
 * kagentd (docs/daemon.md): one libuv loop hosting the HTTP API (docs/daemon-api.md,
 * docs/openapi.yaml) and every optimization session, over the store's queue (docs/store.md).
 * At start it recovers the sessions a killed daemon left running, then the scheduler
 * (scheduler.h) claims queued sessions up to the limits, spread over the GPUs; each runs as
 * `kagent optimize` would (kagent_session_create + start), and its end is written to the store.
 *
 * SIGTERM and SIGINT stop it: no new claims, the server closes, running sessions stop at
 * their next safe point and stay resumable in the store (they are not finished there; the
 * next daemon's recovery resumes them); kagent_daemon_run returns once all have stopped.
 * SIGHUP reloads the config file: sessions started from then on use it.
 */
#ifndef KAGENT_DAEMON_DAEMON_H
#define KAGENT_DAEMON_DAEMON_H

#include "kagent/daemon/http_server.h"

#include <stddef.h>

struct kagent_daemon_options {
	const char *socket_path; /* the Unix socket (required) */
	const char *tcp_address; /* "HOST:PORT" or NULL; needs token */
	const char *token;	 /* the bearer token for TCP */
	const char *store_url;	 /* "sqlite:PATH" or "postgresql://..." */
	double lease_seconds;	 /* how long a claim holds without a heartbeat; 0: the store's */
	const char *device;	 /* "cuda" or "cpu" */
	const int *gpus;	 /* the GPU indexes to use (cuda); cpu: ignored, one slot */
	size_t gpu_count;
	const char *gpu_name;	 /* for the prompts; NULL when unknown */
	int max_sessions;	 /* sessions in flight at most, >= 1 */
	const char *config_path; /* the YAML config (as kagent optimize reads it), or NULL */
	/* The API (kagent_daemon_routes, daemon_routes.h): given by the caller, so that the
	 * routes, which call into the daemon, and the daemon do not depend on each other. */
	const struct kagent_http_route *routes;
	/* The kagent binary whose `kagent worker` keeps torch warm for a session. */
	const char *worker_executable;
	/* Evaluations of POST /v1/evaluations at once per slot (GPU), each with a warm worker
	 * (docs/reward-service.md); 0: 1. */
	int evaluation_lanes;
	/* the lanes' workers prepare each candidate's process (kagent worker
	 * --prepare-candidates) */
	int prepare_candidates;
};

/*
 * Runs the daemon until SIGTERM or SIGINT and all its sessions have stopped. Returns 0, or a
 * negative errno with *cause set when it could not start (store, config, socket).
 */
int kagent_daemon_run(const struct kagent_daemon_options *options, char **cause);

/*
 * The config keys a batch's "settings" may override (docs/daemon-api.md): "model" is
 * "provider.model", and so on. Returns the dotted key, or NULL for a setting not allowed.
 */
const char *kagent_daemon_setting_key(const char *setting);

#endif
