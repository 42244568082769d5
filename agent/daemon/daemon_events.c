/*
 * kagentd's event streams (docs/daemon-api.md): GET /v1/sessions/{id}/events replays a
 * session's trace and then follows it live; GET /v1/events streams the state of sessions and
 * batches as it changes.
 *
 * The trace file is the single source of a session's events: records are sent as written,
 * numbered and already redacted, never taken from the session before the trace writes them.
 * The clients of one session share a feed. A client first replays the file from its own
 * offset, on the thread pool, a bounded chunk at a time; once it has caught up with the feed it
 * is live, and gets the records the feed reads as the session writes them (one read and one
 * serialisation for all its clients). A client never gets more than its stream has room for:
 * a live one too slow for a record leaves the feed and replays from that record once its
 * stream has drained, so a slow client costs at most its stream's cap and misses nothing.
 * A client that leaves costs nothing further: its stream's on_close unlinks it.
 */
#include "daemon_internal.h"

#include "kagent/base/alloc.h"
#include "kagent/daemon/http_server.h"
#include "kagent/records/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one replay read hands a client at most; well under a stream's cap. */
#define EVENTS_REPLAY_BUDGET ((size_t)64 << 10)
/* What one read of the feed takes at most before it reads again. */
#define EVENTS_FEED_BUDGET ((size_t)1 << 20)
/* How often feeds whose session does not run here ask the store whether it started or ended
 * (a cancel of a queued session, another daemon on the same store). */
#define EVENTS_POLL_MS 1000
/* Events of /v1/events held for a client while its first snapshot is read; past this the
 * snapshot is read again instead. */
#define EVENTS_HELD_CAP 10000

enum events__phase {
	EVENTS_WAITING, /* the session has not started: no trace yet */
	EVENTS_RUNNING, /* it runs here: records may still come */
	EVENTS_ENDED,	/* it ended, or runs elsewhere: the trace is replayed, then "end" */
};

struct events__watcher {
	struct kagent_daemon_feed *feed;
	struct events__watcher *next;
	struct kagent_http_stream *stream; /* NULL once the client left */
	json_int_t seq;			   /* the last record sent */
	long long offset;		   /* where its replay reads on */
	int live;			   /* caught up: gets the feed's records */
	int reading;			   /* a replay read is in flight */
	int blocked;			   /* waits for its stream to drain */
	int pending;			   /* sent something since the last drain */
};

struct kagent_daemon_feed {
	struct kagent_daemon *daemon;
	struct kagent_daemon_feed *next;
	char *session_id;
	char *trace_path; /* NULL until the session has started */
	enum events__phase phase;
	char *end_state; /* "done", "failed", "cancelled", "running" (elsewhere) */
	struct events__watcher *watchers;
	long long offset;   /* live watchers have every record before this byte */
	int reading;	    /* the feed's read is in flight */
	int dirty;	    /* records were written since that read began */
	int checking;	    /* a store check is in flight */
	int seen_elsewhere; /* the store said "running" with a trace, not here */
};

/* A read of a trace on the thread pool, for a watcher's replay or for the feed. */
struct events__read {
	struct kagent_daemon_feed *feed;
	struct events__watcher *watcher; /* NULL: the feed's own read */
	char *session_id;
	char *path;
	long long offset, next_offset;
	json_int_t after; /* records up to this seq are skipped */
	size_t budget;
	json_t *lines;	    /* [[seq, text, end], ...] */
	int ended_at_start; /* the session had ended when the read began: it saw every record */
};

struct kagent_daemon_listener {
	struct kagent_daemon *daemon;
	struct kagent_daemon_listener *next;
	struct kagent_http_request *request; /* until the stream starts (NULL: the client left) */
	struct kagent_http_stream *stream;   /* NULL before the first snapshot, or once it left */
	char *batch;			     /* NULL: every batch */
	json_t *held;			     /* [[event, data], ...] while a snapshot is read */
	int snapshotting;		     /* a snapshot read is in flight */
	int blocked;			     /* a send did not fit: a snapshot follows the drain */
	int gone;			     /* the client left */
};

static void events__watcher_step(struct events__watcher *watcher);
static void events__feed_read(struct kagent_daemon_feed *feed);
static void events__listener_snapshot(struct kagent_daemon_listener *listener);
static void events__install(struct kagent_daemon *daemon);
static json_t *events__session_state(const struct kagent_daemon_session *ds, const char *state);

/* Store and file work of this module, counted so that the daemon exits only after it. */
static int
events__submit(struct kagent_daemon *daemon, kagent_store_work_function work,
	       kagent_store_after_function after, void *data)
{
	int status = kagent_store_submit(daemon->store, &daemon->loop, work, after, data);

	if (status == 0)
		daemon->events_jobs++;
	return status;
}

static void
events__job_done(struct kagent_daemon *daemon)
{
	daemon->events_jobs--;
	kagent_daemon_maybe_exit(daemon);
}

/* The bytes kagent_http_stream_send_text queues for an event. */
static size_t
events__size(const char *id, const char *event, size_t data_length)
{
	return (id != NULL ? strlen("id: \n") + strlen(id) : 0) + strlen("event: \n") +
	       strlen(event) + strlen("data: \n") + data_length + 1;
}

/* ---- feeds ---- */

static struct kagent_daemon_feed *
events__feed_find(struct kagent_daemon *daemon, const char *session_id)
{
	struct kagent_daemon_feed *feed;

	for (feed = daemon->feeds; feed != NULL; feed = feed->next) {
		if (strcmp(feed->session_id, session_id) == 0)
			return feed;
	}
	return NULL;
}

/* Whether a watcher of the feed is live (a feed no one follows reads nothing). */
static int
events__feed_followed(const struct kagent_daemon_feed *feed)
{
	const struct events__watcher *watcher;

	for (watcher = feed->watchers; watcher != NULL; watcher = watcher->next) {
		if (watcher->live && watcher->stream != NULL)
			return 1;
	}
	return 0;
}

/* Frees the feed once nothing refers to it: no watcher, no read, no check in flight. */
static void
events__feed_release(struct kagent_daemon_feed *feed)
{
	struct kagent_daemon *daemon = feed->daemon;
	struct kagent_daemon_session *ds;
	struct kagent_daemon_feed **link;

	if (feed->watchers != NULL || feed->reading || feed->checking)
		return;
	for (link = &daemon->feeds; *link != NULL; link = &(*link)->next) {
		if (*link == feed) {
			*link = feed->next;
			break;
		}
	}
	ds = kagent_daemon_find(daemon, feed->session_id);
	if (ds != NULL && ds->feed == feed)
		ds->feed = NULL;
	free(feed->session_id);
	free(feed->trace_path);
	free(feed->end_state);
	free(feed);
}

static void
events__watcher_free(struct events__watcher *watcher)
{
	struct kagent_daemon_feed *feed = watcher->feed;
	struct events__watcher **link;

	for (link = &feed->watchers; *link != NULL; link = &(*link)->next) {
		if (*link == watcher) {
			*link = watcher->next;
			break;
		}
	}
	free(watcher);
	events__feed_release(feed);
}

/* Sends "end" with the session's state and closes the stream; waits for room if need be. */
static void
events__watcher_end(struct events__watcher *watcher)
{
	const char *state = watcher->feed->end_state != NULL ? watcher->feed->end_state : "unknown";
	json_t *data = json_pack("{s:s}", "state", state);
	char *text = json_dumps(data, JSON_COMPACT);

	json_decref(data);
	if (events__size(NULL, "end", strlen(text)) > kagent_http_stream_room(watcher->stream)) {
		/* After the drain, a replay from where it is finds nothing more, then ends. */
		watcher->live = 0;
		watcher->blocked = 1;
		free(text);
		return;
	}
	kagent_http_stream_send_text(watcher->stream, NULL, "end", text);
	free(text);
	kagent_http_stream_close(watcher->stream);
	watcher->stream = NULL;
	events__watcher_free(watcher);
}

/*
 * Sends the record of one line ([seq, text, end]) to the watcher if its stream has room.
 * Returns 1 when sent or already had, 0 when it did not fit (nothing sent).
 */
static int
events__watcher_offer(struct events__watcher *watcher, const json_t *line)
{
	json_int_t seq = json_integer_value(json_array_get(line, 0));
	const char *text = json_string_value(json_array_get(line, 1));
	long long end = json_integer_value(json_array_get(line, 2));
	char id[24];

	if (seq <= watcher->seq) {
		if (end > watcher->offset)
			watcher->offset = end;
		return 1;
	}
	snprintf(id, sizeof id, "%" JSON_INTEGER_FORMAT, seq);
	if (events__size(id, "record", strlen(text)) > kagent_http_stream_room(watcher->stream)) {
		if (watcher->pending)
			return 0;
		/* Alone over the cap of an empty stream: it can never be sent. Skipped, said once,
		 * rather than retried forever. */
		kagent_daemon_log("session %s: record %s is larger than a stream's cap; skipped",
				  watcher->feed->session_id, id);
	} else {
		kagent_http_stream_send_text(watcher->stream, id, "record", text);
		watcher->pending = 1;
	}
	watcher->seq = seq;
	watcher->offset = end;
	return 1;
}

static int
events__collect(const struct kagent_trace_line *line, void *data)
{
	struct events__read *read = data;
	json_int_t seq = json_integer_value(json_object_get(line->record, "seq"));

	if (seq > read->after)
		json_array_append_new(read->lines, json_pack("[I, s%, I]", seq, line->text,
							     line->length, (json_int_t)line->end));
	return 0;
}

/*
 * The store's copy of the trace (once a turn, without stream records: docs/store.md) stands in
 * for a file this machine does not have: a session another daemon ran or runs on a shared
 * store. Records after read->after, up to the budget; offsets stay where they were.
 */
static int
events__read_store(struct kagent_store *store, struct events__read *read, char **cause)
{
	json_t *records = NULL, *record;
	size_t index, taken = 0;
	int status = kagent_store_trace_read(store, read->session_id, &records, cause);

	json_array_foreach(records, index, record)
	{
		json_int_t seq = json_integer_value(json_object_get(record, "seq"));
		char *text;

		if (seq <= read->after || taken >= read->budget)
			continue;
		text = json_dumps(record, JSON_COMPACT | JSON_PRESERVE_ORDER);
		taken += strlen(text);
		json_array_append_new(read->lines,
				      json_pack("[I, s, I]", seq, text, (json_int_t)read->offset));
		free(text);
	}
	/* Short of the budget: the replay has it all. */
	read->next_offset = read->offset + (taken >= read->budget ? (long long)taken : 0);
	json_decref(records);
	return status;
}

static int
events__read_work(struct kagent_store *store, void *data, char **cause)
{
	struct events__read *read = data;
	int status = kagent_trace_read_from(read->path, read->offset, read->budget, events__collect,
					    read, &read->next_offset, cause);

	if (status == -ENOENT && read->watcher != NULL && read->ended_at_start) {
		free(*cause);
		*cause = NULL;
		status = events__read_store(store, read, cause);
	}
	return status;
}

static struct events__read *
events__read_new(struct kagent_daemon_feed *feed, struct events__watcher *watcher, long long offset,
		 json_int_t after, size_t budget)
{
	struct events__read *read = kagent_calloc(1, sizeof *read);

	read->feed = feed;
	read->watcher = watcher;
	read->session_id = kagent_strdup(feed->session_id);
	read->path = kagent_strdup(feed->trace_path);
	read->offset = offset;
	read->next_offset = offset;
	read->after = after;
	read->budget = budget;
	read->lines = json_array();
	read->ended_at_start = feed->phase == EVENTS_ENDED;
	return read;
}

static void
events__read_free(struct events__read *read)
{
	free(read->session_id);
	free(read->path);
	json_decref(read->lines);
	free(read);
}

/* A replay read came back: send what fits, then read on, go live, end, or wait for room. */
static void
events__replayed(int status, const char *cause, void *data)
{
	struct events__read *read = data;
	struct events__watcher *watcher = read->watcher;
	struct kagent_daemon_feed *feed = watcher->feed;
	struct kagent_daemon *daemon = feed->daemon;
	int whole = read->next_offset - read->offset < (long long)read->budget;
	const json_t *line;
	size_t index;

	watcher->reading = 0;
	if (watcher->stream == NULL) {
		events__watcher_free(watcher);
		goto out;
	}
	if (status < 0) {
		/* A trace that cannot be read has nothing more to give: end with what was sent. */
		kagent_daemon_log("session %s: cannot replay its trace: %s", feed->session_id,
				  cause);
		events__watcher_end(watcher);
		goto out;
	}
	json_array_foreach(read->lines, index, line)
	{
		if (!events__watcher_offer(watcher, line)) {
			watcher->blocked = 1;
			goto out;
		}
	}
	watcher->offset = read->next_offset;
	if (!whole)
		events__watcher_step(watcher);
	else if (feed->phase == EVENTS_ENDED && read->ended_at_start)
		events__watcher_end(watcher);
	else if (feed->phase == EVENTS_RUNNING && watcher->offset >= feed->offset) {
		/* Caught up. A feed no one follows yet starts where this one is, so that its next
		 * read does not go over what the replay just sent. */
		if (!events__feed_followed(feed) && !feed->reading)
			feed->offset = watcher->offset;
		watcher->live = 1;
		/* Records may have come since its last read: the feed reads them. */
		if (feed->dirty && !feed->reading) {
			feed->dirty = 0;
			events__feed_read(feed);
		}
	} else
		events__watcher_step(watcher);
out:
	events__read_free(read);
	events__job_done(daemon);
}

/* Reads the next chunk of the watcher's replay, unless it waits for something. */
static void
events__watcher_step(struct events__watcher *watcher)
{
	struct kagent_daemon_feed *feed = watcher->feed;
	struct events__read *read;

	if (watcher->stream == NULL || watcher->reading || watcher->blocked || watcher->live)
		return;
	if (feed->trace_path == NULL) {
		/* Never started: it ends with nothing to replay, or waits for its start. */
		if (feed->phase == EVENTS_ENDED)
			events__watcher_end(watcher);
		return;
	}
	read = events__read_new(feed, watcher, watcher->offset, watcher->seq, EVENTS_REPLAY_BUDGET);
	if (events__submit(feed->daemon, events__read_work, events__replayed, read) < 0) {
		kagent_daemon_log("session %s: the thread pool refused a replay", feed->session_id);
		events__read_free(read);
		kagent_http_stream_close(watcher->stream);
		watcher->stream = NULL;
		events__watcher_free(watcher);
		return;
	}
	watcher->reading = 1;
}

/* The feed's read came back: every live watcher gets the new records that fit. */
static void
events__feed_got(int status, const char *cause, void *data)
{
	struct events__read *read = data;
	struct kagent_daemon_feed *feed = read->feed;
	struct kagent_daemon *daemon = feed->daemon;
	struct events__watcher *watcher, *next;
	const json_t *line;
	size_t index;
	int whole = read->next_offset - read->offset < (long long)read->budget;

	/* feed->reading stays set until the end: ending watchers must not free the feed. */
	if (status < 0) {
		kagent_daemon_log("session %s: cannot follow its trace: %s", feed->session_id,
				  cause);
		whole = 1;
	} else
		feed->offset = read->next_offset;
	for (watcher = feed->watchers; watcher != NULL; watcher = watcher->next) {
		if (!watcher->live || watcher->stream == NULL)
			continue;
		json_array_foreach(read->lines, index, line)
		{
			if (!events__watcher_offer(watcher, line)) {
				/* Too slow for this one: it replays from here once drained. */
				watcher->live = 0;
				watcher->blocked = 1;
				break;
			}
		}
	}
	if (feed->phase == EVENTS_ENDED && read->ended_at_start && whole) {
		for (watcher = feed->watchers; watcher != NULL; watcher = next) {
			next = watcher->next;
			if (watcher->live && watcher->stream != NULL)
				events__watcher_end(watcher);
		}
	}
	feed->reading = 0;
	if (!whole || feed->dirty || (feed->phase == EVENTS_ENDED && !read->ended_at_start)) {
		feed->dirty = 0;
		events__feed_read(feed);
	}
	events__read_free(read);
	events__feed_release(feed);
	events__job_done(daemon);
}

static void
events__feed_read(struct kagent_daemon_feed *feed)
{
	struct events__read *read;

	if (feed->trace_path == NULL)
		return;
	if (feed->reading || !events__feed_followed(feed)) {
		/* Read once it is over, or once a watcher catches up. */
		feed->dirty = 1;
		return;
	}
	read = events__read_new(feed, NULL, feed->offset, 0, EVENTS_FEED_BUDGET);
	if (events__submit(feed->daemon, events__read_work, events__feed_got, read) < 0) {
		kagent_daemon_log("session %s: the thread pool refused a read of its trace",
				  feed->session_id);
		events__read_free(read);
		return;
	}
	feed->reading = 1;
}

/* Records were written since the last tick: the feeds marked dirty read them now. */
static void
events__tick(uv_timer_t *timer)
{
	struct kagent_daemon *daemon = timer->data;
	struct kagent_daemon_feed *feed;

	for (feed = daemon->feeds; feed != NULL; feed = feed->next) {
		if (feed->dirty && !feed->reading && events__feed_followed(feed)) {
			feed->dirty = 0;
			events__feed_read(feed);
		}
	}
}

/* The session ended (or runs elsewhere): replays finish, live watchers get the rest, then
 * every one gets "end". */
static void
events__feed_end(struct kagent_daemon_feed *feed, const char *state)
{
	struct events__watcher *watcher, *next;

	if (feed->phase == EVENTS_ENDED)
		return;
	feed->phase = EVENTS_ENDED;
	free(feed->end_state);
	feed->end_state = kagent_strdup(state);
	if (feed->trace_path != NULL) {
		events__feed_read(feed);
		return;
	}
	for (watcher = feed->watchers; watcher != NULL; watcher = next) {
		next = watcher->next;
		events__watcher_step(watcher);
	}
}

/* The session started here: its watchers replay its trace from the start. */
static void
events__feed_start(struct kagent_daemon_feed *feed, const char *trace_path)
{
	struct events__watcher *watcher, *next;

	if (feed->phase != EVENTS_WAITING)
		return;
	feed->phase = EVENTS_RUNNING;
	feed->trace_path = kagent_strdup(trace_path);
	for (watcher = feed->watchers; watcher != NULL; watcher = next) {
		next = watcher->next;
		events__watcher_step(watcher);
	}
}

/* ---- feeds waiting on a session that does not run here ---- */

struct events__check {
	struct kagent_daemon_feed *feed;
	char *session_id;
	json_t *session;
};

static int
events__check_work(struct kagent_store *store, void *data, char **cause)
{
	struct events__check *check = data;

	return kagent_store_session_get(store, check->session_id, &check->session, cause);
}

/* What the store says of a session that does not run here, applied to its feed. */
static void
events__feed_apply(struct kagent_daemon_feed *feed, const json_t *session)
{
	const char *state = json_string_value(json_object_get(session, "state"));
	const char *trace_path = json_string_value(json_object_get(session, "trace_path"));

	if (state == NULL || strcmp(state, "queued") == 0 ||
	    kagent_daemon_find(feed->daemon, feed->session_id) != NULL)
		return;
	if (strcmp(state, "running") == 0 && trace_path == NULL)
		return; /* claimed, not started yet */
	/* Running with a trace but not here: another daemon's, or this daemon's claim of a
	 * resumed session on its way to the loop. Only a second look a poll later tells. */
	if (strcmp(state, "running") == 0 && !feed->seen_elsewhere++)
		return;
	if (trace_path != NULL && feed->trace_path == NULL)
		feed->trace_path = kagent_strdup(trace_path);
	/* Finished, or running in another daemon: its trace as it is now, then "end". */
	events__feed_end(feed, state);
}

static void
events__checked(int status, const char *cause, void *data)
{
	struct events__check *check = data;
	struct kagent_daemon_feed *feed = check->feed;
	struct kagent_daemon *daemon = feed->daemon;

	/* feed->checking stays set until the end: ending watchers must not free the feed. */
	if (status == 0)
		events__feed_apply(feed, check->session);
	else if (status != -ENOENT)
		kagent_daemon_log("session %s: %s", feed->session_id, cause);
	json_decref(check->session);
	free(check->session_id);
	free(check);
	feed->checking = 0;
	events__feed_release(feed);
	events__job_done(daemon);
}

static void
events__poll(uv_timer_t *timer)
{
	struct kagent_daemon *daemon = timer->data;
	struct kagent_daemon_feed *feed;

	for (feed = daemon->feeds; feed != NULL; feed = feed->next) {
		struct events__check *check;

		if (feed->phase != EVENTS_WAITING || feed->checking ||
		    kagent_daemon_find(daemon, feed->session_id) != NULL)
			continue;
		check = kagent_calloc(1, sizeof *check);
		check->feed = feed;
		check->session_id = kagent_strdup(feed->session_id);
		if (events__submit(daemon, events__check_work, events__checked, check) < 0) {
			free(check->session_id);
			free(check);
			continue;
		}
		feed->checking = 1;
	}
}

/* ---- GET /v1/sessions/{id}/events ---- */

struct events__open {
	struct kagent_daemon *daemon;
	struct kagent_http_request *request; /* NULL once the client left */
	char *session_id;
	json_int_t after;
	json_t *session;
};

static void
events__open_gone(struct kagent_http_request *request, void *data)
{
	struct events__open *open = data;

	(void)request;
	open->request = NULL;
}

static int
events__open_work(struct kagent_store *store, void *data, char **cause)
{
	struct events__open *open = data;

	return kagent_store_session_get(store, open->session_id, &open->session, cause);
}

static void
events__watcher_closed(struct kagent_http_stream *stream, void *data)
{
	struct events__watcher *watcher = data;

	(void)stream;
	watcher->stream = NULL;
	if (!watcher->reading)
		events__watcher_free(watcher);
}

static void
events__watcher_drained(struct kagent_http_stream *stream, void *data)
{
	struct events__watcher *watcher = data;

	(void)stream;
	watcher->pending = 0;
	if (!watcher->blocked)
		return;
	watcher->blocked = 0;
	if (watcher->feed->phase == EVENTS_ENDED && watcher->feed->trace_path == NULL)
		events__watcher_end(watcher);
	else
		events__watcher_step(watcher);
}

/* The feed of a session, made on its first client from what the store and this daemon know. */
static struct kagent_daemon_feed *
events__feed_get(struct kagent_daemon *daemon, const char *session_id, const json_t *session)
{
	struct kagent_daemon_feed *feed = events__feed_find(daemon, session_id);
	struct kagent_daemon_session *ds;

	if (feed != NULL)
		return feed;
	feed = kagent_calloc(1, sizeof *feed);
	feed->daemon = daemon;
	feed->session_id = kagent_strdup(session_id);
	feed->phase = EVENTS_WAITING;
	feed->next = daemon->feeds;
	daemon->feeds = feed;
	ds = kagent_daemon_find(daemon, session_id);
	if (ds != NULL) {
		ds->feed = feed;
		if (ds->started)
			events__feed_start(feed, kagent_session_trace_path(ds->session));
		return feed;
	}
	events__feed_apply(feed, session);
	return feed;
}

static void
events__opened(int status, const char *cause, void *data)
{
	struct events__open *open = data;
	struct kagent_daemon *daemon = open->daemon;
	struct kagent_http_stream_callbacks callbacks = {
	    .on_close = events__watcher_closed,
	    .on_drain = events__watcher_drained,
	};
	struct kagent_daemon_feed *feed;
	struct events__watcher *watcher;

	if (open->request == NULL)
		goto out;
	if (status < 0) {
		kagent_http_reply_error(open->request, status == -ENOENT ? 404 : 500, "%s", cause);
		goto out;
	}
	feed = events__feed_get(daemon, open->session_id, open->session);
	watcher = kagent_calloc(1, sizeof *watcher);
	watcher->feed = feed;
	watcher->seq = open->after;
	watcher->next = feed->watchers;
	feed->watchers = watcher;
	callbacks.data = watcher;
	watcher->stream = kagent_http_stream_start(open->request, &callbacks);
	watcher->pending = 1; /* the head: its drain comes */
	events__watcher_step(watcher);
out:
	json_decref(open->session);
	free(open->session_id);
	free(open);
	events__job_done(daemon);
}

/* The seq to resume after: Last-Event-ID (a reconnecting EventSource) or ?after=SEQ. */
static int
events__after(struct kagent_http_request *request, json_int_t *after_out)
{
	const char *text = kagent_http_request_header(request, "last-event-id");
	char *end;
	long long value;

	if (text == NULL || text[0] == '\0')
		text = kagent_http_request_query(request, "after");
	*after_out = 0;
	if (text == NULL || text[0] == '\0')
		return 0;
	errno = 0;
	value = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0' || value < 0 || end == text)
		return -EINVAL;
	*after_out = (json_int_t)value;
	return 0;
}

void
kagent_daemon_events_serve_session(struct kagent_http_request *request, void *data)
{
	struct kagent_daemon *daemon = data;
	struct events__open *open;
	json_int_t after;

	events__install(daemon);
	if (events__after(request, &after) < 0) {
		kagent_http_reply_error(request, 400,
					"Last-Event-ID and ?after= take a record's seq: an integer "
					"from 0");
		return;
	}
	open = kagent_calloc(1, sizeof *open);
	open->daemon = daemon;
	open->request = request;
	open->session_id = kagent_strdup(kagent_http_request_parameter(request, "id"));
	open->after = after;
	if (events__submit(daemon, events__open_work, events__opened, open) < 0) {
		kagent_http_reply_error(request, 503, "the daemon cannot take work now");
		free(open->session_id);
		free(open);
		return;
	}
	kagent_http_request_set_on_gone(request, events__open_gone, open);
}

/* ---- GET /v1/events ---- */

/* The session as /v1/events shows it: the store's view, or this daemon's while it runs here. */
static json_t *
events__session_json(struct kagent_daemon *daemon, const json_t *stored)
{
	const char *id = json_string_value(json_object_get(stored, "id"));
	struct kagent_daemon_session *ds = id != NULL ? kagent_daemon_find(daemon, id) : NULL;
	const json_t *result = json_object_get(stored, "result");
	const json_t *totals = json_object_get(result, "totals");
	const json_t *variant = json_object_get(result, "variant");
	json_t *best = json_null();

	if (ds != NULL && ds->started)
		return events__session_state(ds, "running");
	if (json_is_string(variant))
		best =
		    json_pack("{s:O, s:O?}", "variant", variant, "speedup",
			      json_object_get(json_object_get(result, "confirmation"), "speedup"));
	return json_pack(
	    "{s:O?, s:O?, s:O?, s:O?, s:O?, s:o, s:I, s:f}", "id", json_object_get(stored, "id"),
	    "batch", json_object_get(stored, "batch_id"), "problem",
	    json_object_get(stored, "problem"), "state", json_object_get(stored, "state"), "gpu",
	    json_object_get(stored, "gpu"), "best", best, "turns",
	    (json_int_t)json_integer_value(json_object_get(totals, "turns")), "cost",
	    json_number_value(json_object_get(totals, "cost")));
}

/* A session of this daemon as /v1/events shows it, with the given state. */
static json_t *
events__session_state(const struct kagent_daemon_session *ds, const char *state)
{
	const json_t *best = json_object_get(ds->live, "best");

	return json_pack("{s:s, s:s, s:s?, s:s, s:s, s:O, s:I, s:f}", "id", ds->claim->session_id,
			 "batch", ds->claim->batch_id, "problem", ds->claim->problem, "state",
			 state, "gpu", ds->daemon->slot_names[ds->slot], "best",
			 best != NULL ? best : json_null(), "turns",
			 (json_int_t)json_integer_value(json_object_get(ds->live, "turn")), "cost",
			 json_number_value(json_object_get(ds->live, "cost")));
}

static json_t *
events__batch_json(const json_t *batch)
{
	return json_pack("{s:O?, s:O?, s:O?}", "id", json_object_get(batch, "id"), "state",
			 json_object_get(batch, "state"), "counts",
			 json_object_get(batch, "counts"));
}

static void
events__listener_free(struct kagent_daemon_listener *listener)
{
	struct kagent_daemon *daemon = listener->daemon;
	struct kagent_daemon_listener **link;

	for (link = &daemon->listeners; *link != NULL; link = &(*link)->next) {
		if (*link == listener) {
			*link = listener->next;
			break;
		}
	}
	json_decref(listener->held);
	free(listener->batch);
	free(listener);
}

/* Sends one event if it fits; otherwise the listener resyncs with a snapshot once drained. */
static void
events__listener_send(struct kagent_daemon_listener *listener, const char *event,
		      const json_t *data)
{
	char *text;

	if (listener->stream == NULL || listener->blocked)
		return;
	if (listener->snapshotting) {
		if (json_array_size(listener->held) < EVENTS_HELD_CAP)
			json_array_append_new(listener->held, json_pack("[s, O]", event, data));
		else
			listener->blocked = 1;
		return;
	}
	text = json_dumps(data, JSON_COMPACT);
	if (events__size(NULL, event, strlen(text)) > kagent_http_stream_room(listener->stream))
		listener->blocked = 1;
	else
		kagent_http_stream_send_text(listener->stream, NULL, event, text);
	free(text);
}

static void
events__publish(struct kagent_daemon *daemon, const char *batch_id, const char *event,
		const json_t *data)
{
	struct kagent_daemon_listener *listener;

	for (listener = daemon->listeners; listener != NULL; listener = listener->next) {
		if (listener->batch == NULL ||
		    (batch_id != NULL && strcmp(listener->batch, batch_id) == 0))
			events__listener_send(listener, event, data);
	}
}

/* Every session of each batch, then the batch itself. */
static void
events__send_batches(struct kagent_daemon *daemon, const json_t *batches,
		     struct kagent_daemon_listener *only)
{
	const json_t *batch, *session;
	size_t index, position;

	json_array_foreach(batches, index, batch)
	{
		const char *batch_id = json_string_value(json_object_get(batch, "id"));
		json_t *data;

		json_array_foreach(json_object_get(batch, "sessions"), position, session)
		{
			data = events__session_json(daemon, session);
			if (only != NULL)
				events__listener_send(only, "session", data);
			else
				events__publish(daemon, batch_id, "session", data);
			json_decref(data);
		}
		data = events__batch_json(batch);
		if (only != NULL)
			events__listener_send(only, "batch", data);
		else if (batch_id != NULL &&
			 !json_equal(json_object_get(daemon->events_batches, batch_id), data)) {
			/* Sessions starting together each ask for their batch: one event per
			 * change is enough. */
			events__publish(daemon, batch_id, "batch", data);
			json_object_set(daemon->events_batches, batch_id, data);
		}
		json_decref(data);
	}
}

struct events__snapshot {
	struct kagent_daemon_listener *listener; /* NULL: published to every listener */
	struct kagent_daemon *daemon;
	char *batch;	  /* NULL: every batch */
	char *session_id; /* set: only this session's batch */
	int sessions;	  /* with each batch's sessions */
	json_t *batches;
};

static int
events__snapshot_work(struct kagent_store *store, void *data, char **cause)
{
	struct events__snapshot *snapshot = data;
	json_t *list = NULL, *batch = NULL, *session = NULL, *item;
	size_t index;
	int status = 0;

	snapshot->batches = json_array();
	if (snapshot->session_id != NULL) {
		if ((status = kagent_store_session_get(store, snapshot->session_id, &session,
						       cause)) < 0)
			return status;
		free(snapshot->batch);
		snapshot->batch =
		    kagent_strdup(json_string_value(json_object_get(session, "batch_id")));
		json_decref(session);
	}
	if (snapshot->batch != NULL) {
		if ((status = kagent_store_batch_get(store, snapshot->batch, &batch, cause)) < 0)
			return status;
		if (!snapshot->sessions)
			json_object_del(batch, "sessions");
		json_array_append_new(snapshot->batches, batch);
		return 0;
	}
	if ((status = kagent_store_batch_list(store, &list, cause)) < 0)
		return status;
	/* Oldest first, so that a client's list reads in the order the batches came. */
	for (index = json_array_size(list); index-- > 0 && status == 0;) {
		item = json_array_get(list, index);
		status = kagent_store_batch_get(
		    store, json_string_value(json_object_get(item, "id")), &batch, cause);
		if (status == 0)
			json_array_append_new(snapshot->batches, batch);
	}
	json_decref(list);
	return status;
}

static void
events__listener_closed(struct kagent_http_stream *stream, void *data)
{
	struct kagent_daemon_listener *listener = data;

	(void)stream;
	listener->stream = NULL;
	listener->gone = 1;
	if (!listener->snapshotting)
		events__listener_free(listener);
}

static void
events__listener_drained(struct kagent_http_stream *stream, void *data)
{
	struct kagent_daemon_listener *listener = data;

	(void)stream;
	if (listener->blocked && !listener->snapshotting)
		events__listener_snapshot(listener);
}

static void
events__listener_gone(struct kagent_http_request *request, void *data)
{
	struct kagent_daemon_listener *listener = data;

	(void)request;
	listener->request = NULL;
	listener->gone = 1;
}

static void
events__snapshot_free(struct events__snapshot *snapshot)
{
	json_decref(snapshot->batches);
	free(snapshot->batch);
	free(snapshot->session_id);
	free(snapshot);
}

static void
events__snapshot_got(int status, const char *cause, void *data)
{
	struct events__snapshot *snapshot = data;
	struct kagent_daemon_listener *listener = snapshot->listener;
	struct kagent_daemon *daemon = snapshot->daemon;
	struct kagent_http_stream_callbacks callbacks = {
	    .on_close = events__listener_closed,
	    .on_drain = events__listener_drained,
	};
	json_t *held, *item;
	size_t index;

	if (listener == NULL) {
		/* A change to publish: the batch (and its sessions) as they are now. */
		if (status == 0)
			events__send_batches(daemon, snapshot->batches, NULL);
		goto out;
	}
	listener->snapshotting = 0;
	if (listener->gone) {
		events__listener_free(listener);
		goto out;
	}
	if (status < 0) {
		if (listener->request != NULL)
			kagent_http_reply_error(listener->request, status == -ENOENT ? 404 : 500,
						"%s", cause);
		else
			kagent_http_stream_close(listener->stream);
		events__listener_free(listener);
		goto out;
	}
	if (listener->request != NULL) {
		callbacks.data = listener;
		listener->stream = kagent_http_stream_start(listener->request, &callbacks);
		listener->request = NULL;
	}
	listener->blocked = 0;
	held = listener->held;
	listener->held = json_array();
	events__send_batches(daemon, snapshot->batches, listener);
	json_array_foreach(held, index, item) events__listener_send(
	    listener, json_string_value(json_array_get(item, 0)), json_array_get(item, 1));
	json_decref(held);
out:
	events__snapshot_free(snapshot);
	events__job_done(daemon);
}

static int
events__snapshot_submit(struct kagent_daemon *daemon, struct kagent_daemon_listener *listener,
			const char *batch, const char *session_id, int sessions)
{
	struct events__snapshot *snapshot = kagent_calloc(1, sizeof *snapshot);

	snapshot->daemon = daemon;
	snapshot->listener = listener;
	snapshot->batch = batch != NULL ? kagent_strdup(batch) : NULL;
	snapshot->session_id = session_id != NULL ? kagent_strdup(session_id) : NULL;
	snapshot->sessions = sessions;
	if (events__submit(daemon, events__snapshot_work, events__snapshot_got, snapshot) < 0) {
		events__snapshot_free(snapshot);
		return -EAGAIN;
	}
	return 0;
}

/* The listener's state is the store's as of now; events from here on follow it. */
static void
events__listener_snapshot(struct kagent_daemon_listener *listener)
{
	/* What happens while it is read is held, and sent after it. */
	listener->blocked = 0;
	json_array_clear(listener->held);
	if (events__snapshot_submit(listener->daemon, listener, listener->batch, NULL, 1) < 0) {
		kagent_http_stream_close(listener->stream);
		listener->stream = NULL;
		events__listener_free(listener);
		return;
	}
	listener->snapshotting = 1;
}

void
kagent_daemon_events_serve_all(struct kagent_http_request *request, void *data)
{
	struct kagent_daemon *daemon = data;
	struct kagent_daemon_listener *listener = kagent_calloc(1, sizeof *listener);
	const char *batch = kagent_http_request_query(request, "batch");

	events__install(daemon);
	listener->daemon = daemon;
	listener->request = request;
	listener->batch = batch != NULL && batch[0] != '\0' ? kagent_strdup(batch) : NULL;
	listener->held = json_array();
	listener->next = daemon->listeners;
	daemon->listeners = listener;
	if (events__snapshot_submit(daemon, listener, listener->batch, NULL, 1) < 0) {
		kagent_http_reply_error(request, 503, "the daemon cannot take work now");
		events__listener_free(listener);
		return;
	}
	listener->snapshotting = 1;
	kagent_http_request_set_on_gone(request, events__listener_gone, listener);
}

/* ---- what the daemon tells this module ---- */

static void
events__init(struct kagent_daemon *daemon)
{
	uv_timer_init(&daemon->loop, &daemon->events_tick);
	daemon->events_tick.data = daemon;
	uv_timer_init(&daemon->loop, &daemon->events_poll);
	daemon->events_poll.data = daemon;
	uv_timer_start(&daemon->events_poll, events__poll, EVENTS_POLL_MS, EVENTS_POLL_MS);
	daemon->events_batches = json_object();
	daemon->events_open = 1;
}

static void
events__close(struct kagent_daemon *daemon)
{
	if (!daemon->events_open)
		return;
	uv_close((uv_handle_t *)&daemon->events_tick, NULL);
	uv_close((uv_handle_t *)&daemon->events_poll, NULL);
	json_decref(daemon->events_batches);
	daemon->events_batches = NULL;
	daemon->events_open = 0;
}

static void
events__record(struct kagent_daemon_session *ds, const json_t *record)
{
	struct kagent_daemon *daemon = ds->daemon;
	const char *type = json_string_value(json_object_get(record, "type"));

	if (ds->feed != NULL && daemon->events_open) {
		/* The observer runs just before the trace write: read it on the next tick. */
		ds->feed->dirty = 1;
		uv_timer_start(&daemon->events_tick, events__tick, 0, 0);
	}
	if (daemon->listeners != NULL && type != NULL &&
	    (strcmp(type, "turn_end") == 0 || strcmp(type, "best") == 0)) {
		json_t *data = events__session_state(ds, "running");

		events__publish(daemon, ds->claim->batch_id, "session", data);
		json_decref(data);
	}
}

static void
events__session_started(struct kagent_daemon_session *ds)
{
	struct kagent_daemon *daemon = ds->daemon;
	struct kagent_daemon_feed *feed = events__feed_find(daemon, ds->claim->session_id);

	if (feed != NULL) {
		ds->feed = feed;
		events__feed_start(feed, kagent_session_trace_path(ds->session));
	}
	if (daemon->listeners != NULL) {
		json_t *data = events__session_state(ds, "running");

		events__publish(daemon, ds->claim->batch_id, "session", data);
		json_decref(data);
		events__snapshot_submit(daemon, NULL, ds->claim->batch_id, NULL, 0);
	}
}

static void
events__session_ended(struct kagent_daemon_session *ds, const char *state)
{
	struct kagent_daemon *daemon = ds->daemon;
	struct kagent_daemon_feed *feed = events__feed_find(daemon, ds->claim->session_id);

	if (feed != NULL) {
		if (feed->trace_path == NULL && ds->session != NULL && ds->started)
			feed->trace_path = kagent_strdup(kagent_session_trace_path(ds->session));
		events__feed_end(feed, state);
	}
	if (daemon->listeners != NULL) {
		json_t *data = events__session_state(ds, state);

		events__publish(daemon, ds->claim->batch_id, "session", data);
		json_decref(data);
		events__snapshot_submit(daemon, NULL, ds->claim->batch_id, NULL, 0);
	}
}

static const struct kagent_daemon_observers events__observers = {
    .record = events__record,
    .session_started = events__session_started,
    .session_ended = events__session_ended,
    .close = events__close,
};

/* On the first stream: from now on the daemon tells this module of its sessions. */
static void
events__install(struct kagent_daemon *daemon)
{
	if (daemon->observers != NULL)
		return;
	events__init(daemon);
	daemon->observers = &events__observers;
}

void
kagent_daemon_events_changed(struct kagent_daemon *daemon, const char *batch_id,
			     const char *session_id)
{
	if (daemon->listeners != NULL)
		events__snapshot_submit(daemon, NULL, batch_id, session_id, 1);
}
