/*
 * What daemon.c (the loop, the sessions, the signals) shares with daemon_routes.c (the API's
 * handlers). Private to agent/daemon/.
 */
#ifndef KAGENT_DAEMON_INTERNAL_H
#define KAGENT_DAEMON_INTERNAL_H

#include "daemon_log.h"
#include "evaluations.h"
#include "kagent/daemon/daemon.h"
#include "kagent/daemon/scheduler.h"
#include "kagent/daemon/store.h"
#include "kagent/llm/http_client.h"
#include "kagent/records/config.h"
#include "kagent/session/session.h"

#include <jansson.h>
#include <uv.h>

#define DAEMON_SIGNAL_COUNT 3

struct kagent_http_request;
struct kagent_daemon;
struct kagent_daemon_session;
struct kagent_daemon_feed;
struct kagent_daemon_listener;

/*
 * What the event streams (daemon_events.c) hear of sessions. They sit above this file (they
 * use the daemon's sessions), so daemon.c calls them only through these pointers, which
 * their first client installs: before it there is nothing to tell.
 */
struct kagent_daemon_observers {
	/* A session's observer saw a record; its trace write follows at once. */
	void (*record)(struct kagent_daemon_session *ds, const json_t *record);
	/* A session started here, with its trace. */
	void (*session_started)(struct kagent_daemon_session *ds);
	/* A session of this daemon ended as state, in the store. */
	void (*session_ended)(struct kagent_daemon_session *ds, const char *state);
	/* The loop is ending: close the handles (idempotent). */
	void (*close)(struct kagent_daemon *daemon);
};

/* One claimed session of this daemon, from its claim until its end is in the store. */
struct kagent_daemon_session {
	struct kagent_daemon *daemon;
	struct kagent_daemon_session *next;
	struct kagent_store_claim *claim;
	struct kagent_session *session; /* NULL until created */
	struct kagent_config config;	/* its own: the daemon's, the batch's settings, its GPU */
	int config_ready;
	size_t slot;
	int started;	 /* kagent_session_start was called */
	int cancelled;	 /* a DELETE asked for it: it ends as cancelled */
	json_t *live;	 /* {turn, tokens, cost, best} from its trace records */
	json_t *summary; /* the final record, once done */
	enum kagent_store_session_state state; /* how it ends in the store */
	int finish;			       /* 0: left running for the next daemon's recovery */
	struct kagent_daemon_feed *feed;       /* its SSE clients' (daemon_events.c), or NULL */
	int taken_over;	     /* its lease ran out and another daemon holds it: not ours to end */
	int lost;	     /* the heartbeat found it held by another daemon: stopped here */
	uint64_t claimed_at; /* uv_now when its claim came back */
	/* Its trace, copied to the store as it grows (daemon.c's trace groups): the file, the
	 * bytes already copied, in the group being written, waiting for the next group (linked
	 * through trace_next), and its end waiting for the group being written. */
	char *trace_path;
	long long trace_offset;
	int trace_syncing;
	int trace_queued;
	struct kagent_daemon_session *trace_next;
	int end_waiting;
};

struct kagent_daemon {
	uv_loop_t loop;
	const struct kagent_daemon_options *options;
	struct kagent_store *store;
	struct kagent_http_server *server;
	struct kagent_http_client *http;
	struct kagent_config config; /* the file's (SIGHUP reloads it) and the environment */
	struct kagent_scheduler scheduler;
	char **slot_names; /* the store's gpu column: "0", "1", ... or "cpu" */
	int *slot_gpus;
	struct kagent_daemon_session *sessions;
	/* Ids a cancel named while their claim was still on its way here (an object as a set). */
	json_t *cancel_requests;
	uv_signal_t signals[DAEMON_SIGNAL_COUNT];
	int signals_open;
	/* Renews this daemon's leases every third of the lease, and looks for sessions whose
	 * daemon died (their leases run out silently, so nobody announces them). */
	uv_timer_t heartbeat;
	int heartbeat_open;
	int heartbeat_in_flight;
	int stopping;
	int server_open;
	int jobs; /* store jobs in flight for the daemon itself */
	/* The store's count of queued sessions as GET /v1/health last read it (daemon_routes.c):
	 * known, when (uv_now), a read in flight. */
	json_int_t queued_count;
	int queued_known;
	uint64_t queued_read_at;
	int queued_refreshing;
	/* The sessions whose traces wait for the next copy, and a copy being written. */
	struct kagent_daemon_session *trace_waiting;
	int trace_copying;
	/* The event streams (daemon_events.c): the feeds of sessions with SSE clients, the
	 * clients of /v1/events, their jobs in flight, and two timers: the tick that reads what
	 * sessions wrote, and the poll of feeds whose session does not run here. */
	const struct kagent_daemon_observers *observers; /* NULL until the first stream */
	struct kagent_daemon_feed *feeds;
	struct kagent_daemon_listener *listeners;
	int events_jobs;
	json_t *events_batches; /* id -> the batch event last sent to every client */
	uv_timer_t events_tick;
	uv_timer_t events_poll;
	int events_open;
	struct kagent_daemon_evaluations *evaluations;
};

/* The session of this daemon with that run id, or NULL. */
struct kagent_daemon_session *kagent_daemon_find(struct kagent_daemon *daemon, const char *id);
/* Interrupts the session id where it runs here (it ends as cancelled), or remembers the id for
 * when its claim arrives. */
void kagent_daemon_cancel(struct kagent_daemon *daemon, const char *id);
/* A new batch: claim again. */
void kagent_daemon_wake(struct kagent_daemon *daemon);
/* Checks a batch's settings against the daemon's config: every key known, every value valid. */
int kagent_daemon_check_settings(const struct kagent_daemon *daemon, const json_t *settings,
				 char **cause);
/* Exits the loop once the daemon is stopping and nothing is left in flight. */
void kagent_daemon_maybe_exit(struct kagent_daemon *daemon);

/* ---- the event streams (daemon_events.c) ---- */

/* GET /v1/sessions/{id}/events and GET /v1/events (the route table's handlers). */
void kagent_daemon_events_serve_session(struct kagent_http_request *request, void *data);
void kagent_daemon_events_serve_all(struct kagent_http_request *request, void *data);
/* The store changed sessions outside this daemon's own sessions (a batch queued, queued
 * sessions cancelled): /v1/events clients get the batch (of batch_id, or of session_id's). */
void kagent_daemon_events_changed(struct kagent_daemon *daemon, const char *batch_id,
				  const char *session_id);

/* Applies settings to config (kagent_config_set for each); -EINVAL with *cause. */
int kagent_daemon_apply_settings(struct kagent_config *config, const json_t *settings,
				 char **cause);

#endif
