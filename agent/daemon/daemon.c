/*
 * kagentd's loop (include/kagent/daemon/daemon.h, docs/daemon.md): the store, the server,
 * the signals, and the life of each session from its claim to its end in the store.
 *
 * Every store call goes through kagent_store_submit (the thread pool), so the loop never waits
 * on the disk or the database server. A heartbeat renews the leases of this daemon's sessions;
 * each session's trace is copied to the store as it grows, so another machine could pick up
 * its account. The exception is the session's own setup: kagent_session_create opens the
 * problem's repository and worktree and the trace synchronously on the loop, as it does in
 * `kagent optimize`; it is short and happens once per session.
 */
#include "daemon_internal.h"

#include "kagent/base/alloc.h"
#include "kagent/records/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* One copy of a trace to the store reads at most this much: more than the longest record
 * (records/trace.c's line cap), so a copy always makes progress. */
#define DAEMON_TRACE_COPY_CAP ((size_t)80 << 20)
/* A group of copies reads no more sessions once it holds this much (the first always goes):
 * after a restart every resumed session's first copy reads its whole trace. The others wait
 * for the next group. */
#define DAEMON_TRACE_GROUP_CAP ((size_t)64 << 20)

/* The largest request body: POST /v1/evaluations with many candidates (it caps each source and
 * the count itself); every other route's body is small. */
#define DAEMON_BODY_CAP (64u * 1024 * 1024)

static const int daemon__signal_numbers[DAEMON_SIGNAL_COUNT] = {SIGTERM, SIGINT, SIGHUP};

/* The batch settings the API accepts and the config keys they set (docs/daemon-api.md). */
static const struct {
	const char *setting;
	const char *key;
} daemon__settings[] = {
    {"model", "provider.model"},
    {"base_url", "provider.base_url"},
    {"api", "provider.api"},
    {"target", "target.speedup"},
    {"against", "target.baseline"},
    {"max_turns", "budget.max_turns"},
    {"max_tokens", "budget.max_tokens"},
    {"max_cost", "budget.max_cost"},
    {"max_seconds", "budget.max_wall_seconds"},
    {"max_gpu_seconds", "budget.max_gpu_seconds"},
    {"speedup_basis", "evaluation.speedup_basis"},
};
#define DAEMON_SETTING_COUNT (sizeof daemon__settings / sizeof daemon__settings[0])

const char *
kagent_daemon_setting_key(const char *setting)
{
	for (size_t index = 0; index < DAEMON_SETTING_COUNT; index++) {
		if (strcmp(daemon__settings[index].setting, setting) == 0)
			return daemon__settings[index].key;
	}
	return NULL;
}

int
kagent_daemon_apply_settings(struct kagent_config *config, const json_t *settings, char **cause)
{
	const char *name;
	json_t *value;
	char *text;
	int status;

	if (settings == NULL || json_is_null(settings))
		return 0;
	if (!json_is_object(settings)) {
		*cause = kagent_strdup("settings must be an object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)settings, name, value)
	{
		const char *key = kagent_daemon_setting_key(name);

		if (key == NULL) {
			*cause = kagent_asprintf("unknown setting \"%s\"", name);
			return -EINVAL;
		}
		/* The flag's text form, so a setting is checked exactly as the flag would be. */
		if (json_is_string(value))
			text = kagent_strdup(json_string_value(value));
		else if (json_is_integer(value))
			text = kagent_asprintf("%lld", (long long)json_integer_value(value));
		else if (json_is_real(value))
			text = kagent_asprintf("%.17g", json_real_value(value));
		else if (json_is_null(value))
			text = kagent_strdup("");
		else {
			*cause =
			    kagent_asprintf("setting \"%s\": expected a string or a number", name);
			return -EINVAL;
		}
		status = kagent_config_set(config, key, text, cause);
		free(text);
		if (status < 0) {
			char *with_name = kagent_asprintf("setting \"%s\": %s", name, *cause);

			free(*cause);
			*cause = with_name;
			return status;
		}
	}
	return 0;
}

int
kagent_daemon_check_settings(const struct kagent_daemon *daemon, const json_t *settings,
			     char **cause)
{
	struct kagent_config config;
	int status;

	kagent_config_copy(&config, &daemon->config);
	status = kagent_daemon_apply_settings(&config, settings, cause);
	if (status == 0)
		status = kagent_config_validate(&config, cause);
	kagent_config_clear(&config);
	return status;
}

/* ---- the config ---- */

/* The file (if any), then the SDK environment variables, as `kagent optimize` reads them. */
static int
daemon__load_config(const char *path, struct kagent_config *config, char **cause)
{
	int status = 0;

	kagent_config_init(config);
	if (path != NULL && (status = kagent_config_load_file(config, path, cause)) < 0)
		goto out;
	kagent_config_apply_environment(config);
out:
	if (status < 0)
		kagent_config_clear(config);
	return status;
}

/* SIGHUP: a config that does not load leaves the one in use as it was. */
static void
daemon__reload(struct kagent_daemon *daemon)
{
	struct kagent_config config;
	char *cause = NULL;

	if (daemon->options->config_path == NULL) {
		kagent_daemon_log("SIGHUP: no config file to reload");
		return;
	}
	if (daemon__load_config(daemon->options->config_path, &config, &cause) < 0) {
		kagent_daemon_log("SIGHUP: keeping the config in use: %s", cause);
		free(cause);
		return;
	}
	kagent_config_clear(&daemon->config);
	daemon->config = config;
	kagent_daemon_log("SIGHUP: reloaded %s; sessions started from now on use it",
			  daemon->options->config_path);
}

/* ---- store jobs of the daemon's own ---- */

static int
daemon__submit(struct kagent_daemon *daemon, kagent_store_work_function work,
	       kagent_store_after_function after, void *data)
{
	int status = kagent_store_submit(daemon->store, &daemon->loop, work, after, data);

	if (status == 0)
		daemon->jobs++;
	return status;
}

/* ---- the end of a session ---- */

static void
daemon__session_free(struct kagent_daemon_session *ds)
{
	struct kagent_daemon *daemon = ds->daemon;
	struct kagent_daemon_session **link;

	for (link = &daemon->sessions; *link != NULL; link = &(*link)->next) {
		if (*link == ds) {
			*link = ds->next;
			break;
		}
	}
	if (ds->session != NULL)
		kagent_session_free(ds->session);
	if (ds->config_ready)
		kagent_config_clear(&ds->config);
	kagent_store_claim_free(ds->claim);
	json_decref(ds->live);
	json_decref(ds->summary);
	free(ds->trace_path);
	free(ds);
}

/* ---- the trace, copied to the store ---- */

/* One session's part of a copy: the complete lines its trace gained, read on the pool. */
struct daemon__trace_chunk {
	struct kagent_daemon_session *ds;
	char *data; /* the bytes read, each copied line ended by a NUL where its newline was */
	struct kagent_store_trace_line *lines;
	size_t line_count;
	long long consumed; /* up to the end of the last complete line */
	int status;	    /* of its copy, and why it failed */
	char *cause;
	int deferred; /* not read: the group was full; it waits for the next */
};

/*
 * On the pool: the trace's complete lines past trace_offset, but for stream records. Only
 * one copy per session runs at a time, so trace_offset is this copy's alone while it runs. A
 * line a killed writer cut has no newline yet and waits for the next copy.
 */
static void
daemon__trace_read(struct daemon__trace_chunk *chunk)
{
	struct kagent_daemon_session *ds = chunk->ds;
	struct stat info;
	char *line, *newline;
	size_t size, done = 0, capacity = 0;
	ssize_t got;
	int fd;

	if (ds->trace_path == NULL)
		return;
	fd = open(ds->trace_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* nothing written yet */
	if (fstat(fd, &info) != 0 || info.st_size <= ds->trace_offset)
		goto out;
	size = (size_t)(info.st_size - ds->trace_offset);
	if (size > DAEMON_TRACE_COPY_CAP)
		size = DAEMON_TRACE_COPY_CAP;
	chunk->data = kagent_malloc(size);
	while (done < size) {
		got = pread(fd, chunk->data + done, size - done,
			    (off_t)(ds->trace_offset + (long long)done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		done += (size_t)got;
	}
	for (line = chunk->data;
	     (newline = memchr(line, '\n', done - (size_t)(line - chunk->data))) != NULL;
	     line = newline + 1) {
		size_t length = (size_t)(newline - line);
		long long seq;

		/* Stream records stay in the file only (docs/store.md); cut ones are written again.
		 */
		if ((seq = kagent_trace_line_seq(line, length)) == 0)
			continue;
		*newline = '\0';
		if (chunk->line_count == capacity) {
			capacity = capacity == 0 ? 16 : capacity * 2;
			chunk->lines =
			    kagent_realloc(chunk->lines, capacity * sizeof *chunk->lines);
		}
		chunk->lines[chunk->line_count++] = (struct kagent_store_trace_line){
		    .session_id = ds->claim->session_id, .seq = seq, .text = line};
	}
	chunk->consumed = (long long)(line - chunk->data);
out:
	close(fd);
}

static void
daemon__trace_chunk_clear(struct daemon__trace_chunk *chunk)
{
	free(chunk->data);
	free(chunk->lines);
	free(chunk->cause);
}

/* On the pool: one session's new lines to the store, in a transaction of their own. */
static int
daemon__trace_copy(struct kagent_store *store, struct kagent_daemon_session *ds, char **cause)
{
	struct daemon__trace_chunk chunk = {.ds = ds};
	int status;

	daemon__trace_read(&chunk);
	status = kagent_store_trace_append_lines(store, chunk.lines, chunk.line_count, NULL, cause);
	if (status == 0)
		ds->trace_offset += chunk.consumed;
	daemon__trace_chunk_clear(&chunk);
	return status;
}

/*
 * The sessions whose turns ended while the previous group was being written, copied as one
 * group: one transaction for all of them (a group commit), so the store's cost per turn
 * falls as the load grows, and one job on the thread pool at a time, so the copies never
 * fill the pool's queue ahead of the API's reads.
 */
struct daemon__trace_group {
	struct kagent_daemon *daemon;
	struct daemon__trace_chunk *chunks;
	size_t count;
};

/* On the pool. A group the store refuses (a session's row gone) is tried again session by
 * session, so that one session's failure holds no other back. */
static int
daemon__trace_group_work(struct kagent_store *store, void *data, char **cause)
{
	struct daemon__trace_group *group = data;
	struct kagent_store_trace_line *lines;
	size_t count = 0, held = 0, index;
	char *group_cause = NULL;

	(void)cause;
	for (index = 0; index < group->count; index++) {
		if (held >= DAEMON_TRACE_GROUP_CAP) {
			group->chunks[index].deferred = 1;
			continue;
		}
		daemon__trace_read(&group->chunks[index]);
		count += group->chunks[index].line_count;
		held += (size_t)group->chunks[index].consumed;
	}
	lines = kagent_calloc(count + 1, sizeof *lines);
	count = 0;
	for (index = 0; index < group->count; index++) {
		memcpy(lines + count, group->chunks[index].lines,
		       group->chunks[index].line_count * sizeof *lines);
		count += group->chunks[index].line_count;
	}
	if (kagent_store_trace_append_lines(store, lines, count, NULL, &group_cause) < 0) {
		free(group_cause);
		for (index = 0; index < group->count; index++) {
			struct daemon__trace_chunk *chunk = &group->chunks[index];

			chunk->status = kagent_store_trace_append_lines(
			    store, chunk->lines, chunk->line_count, NULL, &chunk->cause);
		}
	}
	for (index = 0; index < group->count; index++) {
		if (group->chunks[index].status == 0)
			group->chunks[index].ds->trace_offset += group->chunks[index].consumed;
	}
	free(lines);
	return 0;
}

static void daemon__end(struct kagent_daemon_session *ds);
static void daemon__trace_group_start(struct kagent_daemon *daemon);
static void daemon__trace_enqueue(struct kagent_daemon_session *ds);

static void
daemon__trace_group_done(int status, const char *cause, void *data)
{
	struct daemon__trace_group *group = data;
	struct kagent_daemon *daemon = group->daemon;

	(void)status;
	(void)cause;
	daemon->jobs--;
	daemon->trace_copying = 0;
	for (size_t index = 0; index < group->count; index++) {
		struct daemon__trace_chunk *chunk = &group->chunks[index];
		struct kagent_daemon_session *ds = chunk->ds;

		ds->trace_syncing = 0;
		if (chunk->status < 0)
			kagent_daemon_log(
			    "session %s: copying its trace to the store: %s (tried again at its "
			    "next turn)",
			    ds->claim->session_id, chunk->cause);
		daemon__trace_chunk_clear(chunk);
		if (ds->end_waiting) {
			ds->end_waiting = 0;
			daemon__end(ds);
		} else if (chunk->deferred) {
			daemon__trace_enqueue(ds);
		}
	}
	free(group->chunks);
	free(group);
	daemon__trace_group_start(daemon);
}

/* Copies the sessions waiting, unless a group is being written (its end starts the next). */
static void
daemon__trace_group_start(struct kagent_daemon *daemon)
{
	struct daemon__trace_group *group;
	struct kagent_daemon_session *ds;
	size_t count = 0;

	if (daemon->trace_copying || daemon->trace_waiting == NULL)
		return;
	for (ds = daemon->trace_waiting; ds != NULL; ds = ds->trace_next)
		count++;
	group = kagent_calloc(1, sizeof *group);
	group->daemon = daemon;
	group->chunks = kagent_calloc(count, sizeof *group->chunks);
	while ((ds = daemon->trace_waiting) != NULL) {
		daemon->trace_waiting = ds->trace_next;
		ds->trace_next = NULL;
		ds->trace_queued = 0;
		ds->trace_syncing = 1;
		group->chunks[group->count++].ds = ds;
	}
	if (daemon__submit(daemon, daemon__trace_group_work, daemon__trace_group_done, group) ==
	    0) {
		daemon->trace_copying = 1;
		return;
	}
	/* The pool refused: the copies wait for the next turn, or the session's end. */
	for (size_t index = 0; index < group->count; index++)
		group->chunks[index].ds->trace_syncing = 0;
	free(group->chunks);
	free(group);
}

/* The session waits for the next group (once, however many turns end first). */
static void
daemon__trace_enqueue(struct kagent_daemon_session *ds)
{
	struct kagent_daemon *daemon = ds->daemon;

	if (ds->trace_path == NULL || ds->end_waiting || ds->trace_queued)
		return;
	ds->trace_queued = 1;
	ds->trace_next = daemon->trace_waiting;
	daemon->trace_waiting = ds;
}

/* A turn ended: the session's copy goes with the next group, started now if none is being
 * written. */
static void
daemon__trace_sync(struct kagent_daemon_session *ds)
{
	daemon__trace_enqueue(ds);
	daemon__trace_group_start(ds->daemon);
}

/* The session's end copies the rest itself: it leaves the group waiting. */
static void
daemon__trace_unqueue(struct kagent_daemon_session *ds)
{
	struct kagent_daemon_session **link;

	if (!ds->trace_queued)
		return;
	for (link = &ds->daemon->trace_waiting; *link != NULL; link = &(*link)->trace_next) {
		if (*link == ds) {
			*link = ds->trace_next;
			break;
		}
	}
	ds->trace_next = NULL;
	ds->trace_queued = 0;
}

/* On the pool: the rest of the trace, then the session's end and its best variant, written
 * once. */
static int
daemon__finish_work(struct kagent_store *store, void *data, char **cause)
{
	struct kagent_daemon_session *ds = data;
	const json_t *summary = ds->summary;
	const json_t *confirmation = json_object_get(summary, "confirmation");
	const char *variant = json_string_value(json_object_get(summary, "variant"));
	const char *commit = json_string_value(json_object_get(summary, "commit"));
	char *copy_cause = NULL;
	int status;

	/* A trace the store could not take is logged, not fatal: the end matters more. */
	if (daemon__trace_copy(store, ds, &copy_cause) < 0) {
		kagent_daemon_log("session %s: copying its trace to the store: %s",
				  ds->claim->session_id, copy_cause);
		free(copy_cause);
	}
	if (!ds->finish)
		return 0;
	status =
	    kagent_store_session_finish(store, ds->claim->session_id, ds->state, summary, cause);
	/* Finished already (by an earlier daemon): nothing to write twice. Taken over by
	 * another daemon after this one's lease ran out: its end is that daemon's to write. */
	if (status == -EALREADY || status == -ESTALE) {
		ds->taken_over = status == -ESTALE;
		free(*cause);
		*cause = NULL;
		return 0;
	}
	if (status < 0 || variant == NULL || !json_is_true(json_object_get(summary, "confirmed")))
		return status;
	/* The summary names one variant, the confirmed best: it goes to the store with its
	 * re-check on unseen seeds as its verdict. */
	struct kagent_store_variant record = {
	    .session_id = ds->claim->session_id,
	    .variant_id = variant,
	    .verdict = confirmation,
	    .speedup_vs_eager =
		json_number_value(json_object_get(confirmation, "speedup_vs_eager")),
	    .speedup_vs_compile =
		json_number_value(json_object_get(confirmation, "speedup_vs_compile")),
	    .credited = json_is_true(json_object_get(confirmation, "credited")),
	};
	if ((status = kagent_store_variant_record(store, &record, NULL, cause)) < 0)
		return status;
	if (commit != NULL)
		status = kagent_store_variant_commit(store, ds->claim->session_id, variant, commit,
						     NULL, cause);
	return status;
}

static void
daemon__finished(int status, const char *cause, void *data)
{
	struct kagent_daemon_session *ds = data;
	struct kagent_daemon *daemon = ds->daemon;
	const char *reason = json_string_value(json_object_get(ds->summary, "stop_reason"));
	const char *detail = json_string_value(json_object_get(ds->summary, "stop_detail"));

	daemon->jobs--;
	if (ds->finish && daemon->observers != NULL)
		daemon->observers->session_ended(ds, kagent_store_session_state_name(ds->state));
	if (status < 0)
		kagent_daemon_log("session %s: could not record its end: %s", ds->claim->session_id,
				  cause);
	else if (ds->taken_over || ds->lost)
		kagent_daemon_log("session %s: another daemon took it over after this one's lease "
				  "ran out; its end is that daemon's to write",
				  ds->claim->session_id);
	else if (ds->finish)
		kagent_daemon_log("session %s %s (%s%s%s)", ds->claim->session_id,
				  kagent_store_session_state_name(ds->state),
				  reason != NULL ? reason : "no stop reason",
				  detail != NULL && detail[0] != '\0' ? ": " : "",
				  detail != NULL ? detail : "");
	else
		kagent_daemon_log("session %s stopped for the shutdown; the next daemon resumes it",
				  ds->claim->session_id);
	kagent_scheduler_release(&daemon->scheduler, ds->slot);
	daemon__session_free(ds);
	kagent_daemon_maybe_exit(daemon);
}

/* Writes the end (or, with finish 0, nothing) and frees the session once that is done; a copy
 * of its trace in flight finishes first. */
static void
daemon__end(struct kagent_daemon_session *ds)
{
	daemon__trace_unqueue(ds);
	if (ds->trace_syncing) {
		ds->end_waiting = 1;
		return;
	}
	if (daemon__submit(ds->daemon, daemon__finish_work, daemon__finished, ds) < 0) {
		kagent_daemon_log("session %s: the thread pool refused its end",
				  ds->claim->session_id);
		kagent_scheduler_release(&ds->daemon->scheduler, ds->slot);
		daemon__session_free(ds);
	}
}

/* A session that could not run at all: failed, with why, in the shape of a final record. */
static void
daemon__fail(struct kagent_daemon_session *ds, const char *reason, const char *detail)
{
	ds->summary = json_pack("{s:s, s:s, s:s, s:b, s:b, s:n}", "stop_reason", reason,
				"stop_detail", detail, "run_id", ds->claim->session_id, "confirmed",
				0, "target_reached", 0, "confirmation");
	ds->state = ds->cancelled ? KAGENT_STORE_CANCELLED : KAGENT_STORE_FAILED;
	ds->finish = 1;
	daemon__end(ds);
}

static void
daemon__session_done(struct kagent_session *session, int status, const json_t *summary, void *data)
{
	struct kagent_daemon_session *ds = data;
	const char *reason = json_string_value(json_object_get(summary, "stop_reason"));

	(void)session;
	(void)status;
	ds->summary = json_deep_copy(summary);
	ds->finish = 1;
	if (reason != NULL && strcmp(reason, "interrupted") == 0) {
		if (ds->cancelled)
			ds->state = KAGENT_STORE_CANCELLED;
		else
			ds->finish = 0; /* the shutdown's: left running for recovery */
	} else if (reason != NULL &&
		   (strcmp(reason, "bad_problem") == 0 || strcmp(reason, "llm_error") == 0 ||
		    strcmp(reason, "evaluator_error") == 0)) {
		ds->state = KAGENT_STORE_FAILED;
	} else {
		ds->state = KAGENT_STORE_DONE;
	}
	/* Not freed here: the session is still inside its own call; the store job defers it. */
	daemon__end(ds);
}

/* The live view of GET /v1/sessions/ID: the turn, tokens, cost and best so far. */
static void
daemon__observe(const json_t *record, void *data)
{
	struct kagent_daemon_session *ds = data;
	const char *type = json_string_value(json_object_get(record, "type"));
	const json_t *turn = json_object_get(record, "turn");

	/* Once a turn, not per record: a streamed reply writes a record per event, and the copy is
	 * a transaction on a store that many daemons share. The end copies the rest. */
	if (type != NULL && strcmp(type, "turn_end") == 0)
		daemon__trace_sync(ds);
	if (json_is_integer(turn))
		json_object_set(ds->live, "turn", (json_t *)turn);
	if (type == NULL) {
		if (ds->daemon->observers != NULL)
			ds->daemon->observers->record(ds, record);
		return;
	}
	if (strcmp(type, "turn_end") == 0) {
		const json_t *totals = json_object_get(record, "totals");
		const json_t *best = json_object_get(record, "best");

		json_object_set_new(
		    ds->live, "tokens",
		    json_integer(json_integer_value(json_object_get(totals, "input_tokens")) +
				 json_integer_value(json_object_get(totals, "output_tokens"))));
		json_object_set(ds->live, "cost", json_object_get(totals, "cost"));
		if (best != NULL)
			json_object_set(ds->live, "best", (json_t *)best);
	} else if (strcmp(type, "verdict") == 0) {
		const char *variant = json_string_value(json_object_get(record, "variant"));
		const char *purpose = json_string_value(json_object_get(record, "purpose"));
		char who[160];

		snprintf(who, sizeof who, "session %s, %s %s", ds->claim->session_id,
			 variant != NULL ? variant : "a variant",
			 purpose != NULL ? purpose : "evaluated");
		kagent_daemon_log_timing_window(json_object_get(record, "verdict"), who);
	} else if (strcmp(type, "best") == 0) {
		json_object_set_new(ds->live, "best",
				    json_pack("{s:O?, s:O?}", "variant",
					      json_object_get(record, "variant"), "speedup",
					      json_object_get(record, "speedup")));
	}
	if (ds->daemon->observers != NULL)
		ds->daemon->observers->record(ds, record);
}

/* ---- the start of a session ---- */

static int
daemon__set_trace_work(struct kagent_store *store, void *data, char **cause)
{
	struct kagent_daemon_session *ds = data;

	return kagent_store_session_set_trace(store, ds->claim->session_id,
					      kagent_session_trace_path(ds->session), cause);
}

/* Runs only once the store knows where the trace is: from then on a crash resumes it. */
static void
daemon__trace_set(int status, const char *cause, void *data)
{
	struct kagent_daemon_session *ds = data;
	struct kagent_daemon *daemon = ds->daemon;

	daemon->jobs--;
	if (status < 0) {
		kagent_daemon_log("session %s: %s", ds->claim->session_id, cause);
		daemon__fail(ds, "store_error", cause);
		return;
	}
	if (daemon->stopping) {
		/* Never started: nothing to stop, and recovery resumes it from its empty trace. */
		ds->finish = 0;
		daemon__end(ds);
		return;
	}
	ds->trace_path = kagent_strdup(kagent_session_trace_path(ds->session));
	kagent_daemon_log(
	    "session %s started on %s%s (batch %s, %s, attempt %d%s)", ds->claim->session_id,
	    strcmp(daemon->options->device, "cpu") == 0 ? "the CPU" : "GPU ",
	    strcmp(daemon->options->device, "cpu") == 0 ? "" : daemon->slot_names[ds->slot],
	    ds->claim->batch_id, ds->claim->problem, ds->claim->attempt,
	    ds->claim->resume ? ", resumed" : "");
	ds->started = 1;
	if (daemon->observers != NULL)
		daemon->observers->session_started(ds);
	kagent_session_start(ds->session);
	if (ds->cancelled)
		kagent_session_interrupt(ds->session);
}

/* trace_records: a resumed session's records in the store, to rebuild its run where its files
 * are on another machine (borrowed; NULL when none). */
static void
daemon__begin(struct kagent_daemon_session *ds, const json_t *trace_records)
{
	struct kagent_daemon *daemon = ds->daemon;
	struct kagent_store_claim *claim = ds->claim;
	struct kagent_session_options options;
	char *cause = NULL, gpu[16];
	int status;

	if (ds->cancelled) {
		daemon__fail(ds, "interrupted", "cancelled before it started");
		return;
	}
	kagent_config_copy(&ds->config, &daemon->config);
	ds->config_ready = 1;
	snprintf(gpu, sizeof gpu, "%d", daemon->slot_gpus[ds->slot]);
	if ((status = kagent_daemon_apply_settings(&ds->config, claim->settings, &cause)) < 0 ||
	    (status = kagent_config_set(&ds->config, "evaluation.device", daemon->options->device,
					&cause)) < 0 ||
	    (status = kagent_config_set(&ds->config, "evaluation.gpu", gpu, &cause)) < 0 ||
	    (status = kagent_config_validate(&ds->config, &cause)) < 0) {
		daemon__fail(ds, "config_error", cause);
		free(cause);
		return;
	}
	options = (struct kagent_session_options){
	    .loop = &daemon->loop,
	    .http = daemon->http,
	    .config = &ds->config,
	    .problem_path = claim->problem_path,
	    .run_id = claim->session_id,
	    .resume = claim->resume,
	    .trace_records = trace_records,
	    .gpu_name = daemon->options->gpu_name,
	    .worker_executable = daemon->options->worker_executable,
	    .observer = daemon__observe,
	    .done = daemon__session_done,
	    .data = ds,
	};
	status = kagent_session_create(&options, &ds->session, &cause);
	/* Claimed before, but killed before the store learnt where its trace was: the run may
	 * exist already under this id, so it is continued rather than begun twice. */
	if (status < 0 && !claim->resume && claim->attempt > 1) {
		free(cause);
		cause = NULL;
		options.resume = 1;
		status = kagent_session_create(&options, &ds->session, &cause);
	}
	if (status < 0) {
		kagent_daemon_log("session %s (%s) cannot run: %s", claim->session_id,
				  claim->problem_path, cause);
		daemon__fail(ds, "bad_problem", cause);
		free(cause);
		return;
	}
	if (daemon__submit(daemon, daemon__set_trace_work, daemon__trace_set, ds) < 0)
		daemon__fail(ds, "store_error", "the thread pool refused a job");
}

/* ---- claims ---- */

struct daemon__claim_job {
	struct kagent_daemon *daemon;
	size_t slot;
	struct kagent_store_claim *claim;
	json_t *trace_records; /* a resumed session's, for a run whose files are elsewhere */
	/* uv_hrtime (any thread): submitted on the loop, begun and ended on a pool thread. The
	 * claim's log line splits its latency into the pool's queue, the store (the lock on the
	 * daemon's one connection included) and the wait for the loop (docs/store.md). */
	uint64_t submitted, begun, ended;
};

static int
daemon__claim_work(struct kagent_store *store, void *data, char **cause)
{
	struct daemon__claim_job *job = data;
	char *read_cause = NULL;
	int status;

	job->begun = uv_hrtime();
	status = kagent_store_session_claim(store, job->daemon->slot_names[job->slot], &job->claim,
					    cause);
	/* Read here, on the pool; the session rebuilds its run from them only where its files
	 * are missing. Without them it resumes from its files, or says they are missing. */
	if (status == 0 && job->claim != NULL && job->claim->resume &&
	    kagent_store_trace_read(store, job->claim->session_id, &job->trace_records,
				    &read_cause) < 0) {
		kagent_daemon_log("session %s: reading its trace from the store: %s",
				  job->claim->session_id, read_cause);
		free(read_cause);
	}
	job->ended = uv_hrtime();
	return status;
}

static void
daemon__claimed(int status, const char *cause, void *data)
{
	struct daemon__claim_job *job = data;
	struct kagent_daemon *daemon = job->daemon;
	struct kagent_daemon_session *ds;
	uint64_t now = uv_hrtime();

	daemon->jobs--;
	if (status < 0 || job->claim == NULL) {
		if (status < 0)
			kagent_daemon_log("claim: %s", cause);
		kagent_scheduler_claimed(&daemon->scheduler, job->slot, 0);
		free(job);
		kagent_daemon_maybe_exit(daemon);
		return;
	}
	kagent_daemon_log("session %s claimed in %.1f ms (%.1f queued on the pool, %.1f in the "
			  "store, %.1f waiting for the loop)",
			  job->claim->session_id, (double)(now - job->submitted) / 1e6,
			  (double)(job->begun - job->submitted) / 1e6,
			  (double)(job->ended - job->begun) / 1e6,
			  (double)(now - job->ended) / 1e6);
	ds = kagent_calloc(1, sizeof *ds);
	ds->daemon = daemon;
	ds->claim = job->claim;
	ds->slot = job->slot;
	ds->claimed_at = uv_now(&daemon->loop);
	ds->live = json_pack("{s:n, s:i, s:f, s:n}", "turn", "tokens", 0, "cost", 0.0, "best");
	ds->next = daemon->sessions;
	daemon->sessions = ds;
	if (json_object_get(daemon->cancel_requests, ds->claim->session_id) != NULL) {
		json_object_del(daemon->cancel_requests, ds->claim->session_id);
		ds->cancelled = 1;
	}
	/* Count it before the next claim is asked for, then set it up. */
	kagent_scheduler_claimed(&daemon->scheduler, ds->slot, 1);
	if (daemon->stopping) {
		/* Claimed as the shutdown began: it stays running in the store for recovery. */
		ds->finish = 0;
		daemon__end(ds);
		json_decref(job->trace_records);
		free(job);
		return;
	}
	daemon__begin(ds, job->trace_records);
	json_decref(job->trace_records);
	free(job);
}

static void
daemon__claim(size_t slot, void *data)
{
	struct kagent_daemon *daemon = data;
	struct daemon__claim_job *job = kagent_calloc(1, sizeof *job);

	job->daemon = daemon;
	job->slot = slot;
	job->submitted = uv_hrtime();
	if (daemon__submit(daemon, daemon__claim_work, daemon__claimed, job) < 0) {
		kagent_daemon_log("claim: the thread pool refused a job");
		free(job);
		kagent_scheduler_claimed(&daemon->scheduler, slot, 0);
	}
}

struct kagent_daemon_session *
kagent_daemon_find(struct kagent_daemon *daemon, const char *id)
{
	struct kagent_daemon_session *ds;

	for (ds = daemon->sessions; ds != NULL; ds = ds->next) {
		if (strcmp(ds->claim->session_id, id) == 0)
			return ds;
	}
	return NULL;
}

void
kagent_daemon_cancel(struct kagent_daemon *daemon, const char *id)
{
	struct kagent_daemon_session *ds = kagent_daemon_find(daemon, id);

	if (ds == NULL) {
		/* Running in the store but not here yet: its claim is on its way back. */
		json_object_set_new(daemon->cancel_requests, id, json_true());
		return;
	}
	if (ds->cancelled)
		return;
	ds->cancelled = 1;
	kagent_daemon_log("session %s: cancel asked, stopping at its next safe point", id);
	if (ds->started)
		kagent_session_interrupt(ds->session);
}

void
kagent_daemon_wake(struct kagent_daemon *daemon)
{
	kagent_scheduler_wake(&daemon->scheduler);
}

/* ---- leases and wake-ups ---- */

struct daemon__heartbeat_job {
	struct kagent_daemon *daemon;
	uint64_t submitted; /* uv_now: sessions claimed since are not in its answer */
	json_t *held;
	json_t *cancelled;
};

static int
daemon__heartbeat_work(struct kagent_store *store, void *data, char **cause)
{
	struct daemon__heartbeat_job *job = data;

	return kagent_store_heartbeat(store, &job->held, &job->cancelled, cause);
}

static void
daemon__heartbeat_done(int status, const char *cause, void *data)
{
	struct daemon__heartbeat_job *job = data;
	struct kagent_daemon *daemon = job->daemon;
	struct kagent_daemon_session *ds;
	json_t *id, *held = json_object();
	size_t index;

	daemon->jobs--;
	daemon->heartbeat_in_flight = 0;
	if (status < 0)
		kagent_daemon_log("heartbeat: %s (if this lasts longer than the lease, other "
				  "daemons take this one's sessions over)",
				  cause);
	/* Cancels asked through another daemon's API. */
	json_array_foreach(job->cancelled, index, id)
	{
		ds = kagent_daemon_find(daemon, json_string_value(id));
		if (ds != NULL && !ds->cancelled)
			kagent_daemon_cancel(daemon, json_string_value(id));
	}
	/* Running here, claimed before this heartbeat, yet not held: another daemon took it over
	 * while this one could not renew (a partition longer than the lease). Two daemons must
	 * never run one session: it stops here, and its end is the other's to write. */
	/* The held ids as a set: a search of the list for each of a thousand sessions was a
	 * million comparisons on the loop. */
	json_array_foreach(job->held, index, id)
	    json_object_set(held, json_string_value(id), json_true());
	for (ds = daemon->sessions; status == 0 && ds != NULL; ds = ds->next) {
		if (!ds->started || ds->summary != NULL || ds->lost ||
		    ds->claimed_at >= job->submitted ||
		    json_object_get(held, ds->claim->session_id) != NULL)
			continue;
		ds->lost = 1;
		kagent_daemon_log(
		    "session %s: this daemon's lease on it ran out and another daemon "
		    "holds it now; stopping it here",
		    ds->claim->session_id);
		kagent_session_interrupt(ds->session);
	}
	json_decref(held);
	json_decref(job->held);
	json_decref(job->cancelled);
	free(job);
	kagent_daemon_maybe_exit(daemon);
}

static void
daemon__heartbeat(uv_timer_t *timer)
{
	struct kagent_daemon *daemon = timer->data;

	if (!daemon->heartbeat_in_flight) {
		struct daemon__heartbeat_job *job = kagent_calloc(1, sizeof *job);

		job->daemon = daemon;
		job->submitted = uv_now(&daemon->loop);
		if (daemon__submit(daemon, daemon__heartbeat_work, daemon__heartbeat_done, job) ==
		    0)
			daemon->heartbeat_in_flight = 1;
		else
			free(job);
	}
	/* A dead daemon's sessions become claimable when their leases run out, which nobody
	 * announces: an idle daemon looks again on each beat. */
	kagent_scheduler_wake(&daemon->scheduler);
}

/* Another daemon queued work (PostgreSQL's NOTIFY). */
static void
daemon__store_woken(void *data)
{
	struct kagent_daemon *daemon = data;

	kagent_scheduler_wake(&daemon->scheduler);
}

/* ---- start and stop ---- */

/* Descriptors the daemon asks for: each event-stream client (kagent watch, a viewer's page)
 * holds a socket, and a shell's soft limit (1,024) would refuse the thousandth. */
#define DAEMON_FILE_LIMIT 65536

static void
daemon__raise_file_limit(void)
{
	struct rlimit limit;

	if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= DAEMON_FILE_LIMIT)
		return;
	limit.rlim_cur = limit.rlim_max < DAEMON_FILE_LIMIT ? limit.rlim_max : DAEMON_FILE_LIMIT;
	setrlimit(RLIMIT_NOFILE, &limit);
}

static void
daemon__server_closed(void *data)
{
	struct kagent_daemon *daemon = data;

	daemon->server = NULL;
	kagent_daemon_maybe_exit(daemon);
}

/* Everything has stopped: close what keeps the loop running, so uv_run returns. */
void
kagent_daemon_maybe_exit(struct kagent_daemon *daemon)
{
	if (!daemon->stopping || daemon->sessions != NULL || daemon->jobs > 0 ||
	    daemon->events_jobs > 0 || daemon->server != NULL || !daemon->signals_open ||
	    (daemon->evaluations != NULL &&
	     !kagent_daemon_evaluations_stopped(daemon->evaluations)))
		return;
	if (daemon->observers != NULL)
		daemon->observers->close(daemon);
	for (size_t index = 0; index < DAEMON_SIGNAL_COUNT; index++)
		uv_close((uv_handle_t *)&daemon->signals[index], NULL);
	daemon->signals_open = 0;
	if (daemon->heartbeat_open) {
		uv_close((uv_handle_t *)&daemon->heartbeat, NULL);
		daemon->heartbeat_open = 0;
	}
	kagent_store_listen_stop(daemon->store);
	kagent_daemon_log("all sessions stopped; exiting");
}

static void
daemon__evaluations_stopped(void *data)
{
	kagent_daemon_maybe_exit(data);
}

static void
daemon__stop(struct kagent_daemon *daemon, const char *why)
{
	struct kagent_daemon_session *ds;
	int running = 0;

	if (daemon->stopping)
		return;
	daemon->stopping = 1;
	kagent_scheduler_stop(&daemon->scheduler);
	for (ds = daemon->sessions; ds != NULL; ds = ds->next) {
		if (ds->started && ds->summary == NULL) {
			kagent_session_interrupt(ds->session);
			running++;
		}
	}
	kagent_daemon_log("%s: stopping; %d running session%s stop at their next safe point and "
			  "stay resumable",
			  why, running, running == 1 ? "" : "s");
	if (daemon->server != NULL)
		kagent_http_server_close(daemon->server, daemon__server_closed, daemon);
	if (daemon->evaluations != NULL)
		kagent_daemon_evaluations_stop(daemon->evaluations);
	kagent_daemon_maybe_exit(daemon);
}

static void
daemon__signalled(uv_signal_t *handle, int number)
{
	struct kagent_daemon *daemon = handle->data;

	if (number == SIGHUP)
		daemon__reload(daemon);
	else
		daemon__stop(daemon, number == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void
daemon__slots(struct kagent_daemon *daemon)
{
	const struct kagent_daemon_options *options = daemon->options;
	size_t count =
	    strcmp(options->device, "cpu") == 0 || options->gpu_count == 0 ? 1 : options->gpu_count;

	daemon->slot_names = kagent_calloc(count, sizeof *daemon->slot_names);
	daemon->slot_gpus = kagent_calloc(count, sizeof *daemon->slot_gpus);
	for (size_t slot = 0; slot < count; slot++) {
		if (strcmp(options->device, "cpu") == 0) {
			daemon->slot_names[slot] = kagent_strdup("cpu");
			continue;
		}
		daemon->slot_gpus[slot] = options->gpu_count > 0 ? options->gpus[slot] : 0;
		daemon->slot_names[slot] = kagent_asprintf("%d", daemon->slot_gpus[slot]);
	}
	kagent_scheduler_init(&daemon->scheduler, count, options->max_sessions, daemon__claim,
			      daemon);
}

int
kagent_daemon_run(const struct kagent_daemon_options *options, char **cause)
{
	struct kagent_daemon *daemon = kagent_calloc(1, sizeof *daemon);
	struct kagent_http_server_options server_options = {0};
	int status, recovered = 0, loop_open = 0, config_loaded = 0;

	daemon->options = options;
	daemon->cancel_requests = json_object();
	daemon__raise_file_limit();
	if ((status = daemon__load_config(options->config_path, &daemon->config, cause)) < 0)
		goto out;
	config_loaded = 1;
	if ((status = kagent_store_open(options->store_url, &daemon->store, cause)) < 0)
		goto out;
	if (options->lease_seconds > 0 &&
	    (status = kagent_store_set_lease(daemon->store, options->lease_seconds, cause)) < 0)
		goto out;
	kagent_store_set_gpu_name(daemon->store, options->gpu_name);
	/* Once, before any claim: what a killed daemon left running goes back to the queue.
	 * Called directly: the loop serves nothing yet, so there is no one to keep waiting. */
	if ((status = kagent_store_recover(daemon->store, &recovered, cause)) < 0)
		goto out;
	uv_loop_init(&daemon->loop);
	loop_open = 1;
	if ((status = kagent_http_client_create(&daemon->loop, &daemon->http, cause)) < 0)
		goto out;
	server_options = (struct kagent_http_server_options){
	    .socket_path = options->socket_path,
	    .tcp_address = options->tcp_address,
	    .token = options->token,
	    .routes = options->routes,
	    .handler_data = daemon,
	    /* POST /v1/evaluations carries many candidates' sources (caps of its own) */
	    .body_cap = DAEMON_BODY_CAP,
	};
	if ((status = kagent_http_server_start(&daemon->loop, &server_options, &daemon->server,
					       cause)) < 0)
		goto out;
	/* Last of what can fail: nothing after it needs undoing on the loop. */
	if ((status = kagent_store_listen(daemon->store, &daemon->loop, daemon__store_woken, daemon,
					  cause)) < 0)
		goto out;
	for (size_t index = 0; index < DAEMON_SIGNAL_COUNT; index++) {
		uv_signal_init(&daemon->loop, &daemon->signals[index]);
		daemon->signals[index].data = daemon;
		uv_signal_start(&daemon->signals[index], daemon__signalled,
				daemon__signal_numbers[index]);
	}
	daemon->signals_open = 1;
	daemon__slots(daemon);
	{
		struct kagent_daemon_evaluations_options evaluations = {
		    .loop = &daemon->loop,
		    .store = daemon->store,
		    .device = options->device,
		    .socket_path = options->socket_path,
		    .worker_executable = options->worker_executable,
		    .slot_gpus = daemon->slot_gpus,
		    .slot_count = daemon->scheduler.slot_count,
		    .lanes_per_slot = options->evaluation_lanes,
		    .prepare_candidates = options->prepare_candidates,
		    .stopped = daemon__evaluations_stopped,
		    .data = daemon,
		};

		daemon->evaluations = kagent_daemon_evaluations_create(&evaluations);
	}
	uv_timer_init(&daemon->loop, &daemon->heartbeat);
	daemon->heartbeat.data = daemon;
	daemon->heartbeat_open = 1;
	{
		uint64_t beat = (uint64_t)(kagent_store_lease(daemon->store) * 1000.0 / 3.0);

		uv_timer_start(&daemon->heartbeat, daemon__heartbeat, beat, beat);
	}

	kagent_daemon_log("listening on %s%s%s; store %s (%s, lease %g s), daemon %s; %s, %zu "
			  "slot%s, at most %d session%s; %d recovered",
			  options->socket_path, options->tcp_address != NULL ? " and " : "",
			  options->tcp_address != NULL ? options->tcp_address : "",
			  kagent_store_name(daemon->store), kagent_store_backend(daemon->store),
			  kagent_store_lease(daemon->store), kagent_store_identity(daemon->store),
			  options->device, daemon->scheduler.slot_count,
			  daemon->scheduler.slot_count == 1 ? "" : "s", options->max_sessions,
			  options->max_sessions == 1 ? "" : "s", recovered);
	kagent_scheduler_pump(&daemon->scheduler);
	uv_run(&daemon->loop, UV_RUN_DEFAULT);
	status = 0;
out:
	if (daemon->server != NULL) {
		kagent_http_server_close(daemon->server, NULL, NULL);
		daemon->server = NULL;
	}
	if (daemon->http != NULL)
		kagent_http_client_free(daemon->http);
	if (loop_open && daemon->observers != NULL)
		daemon->observers->close(daemon);
	if (loop_open) {
		uv_run(&daemon->loop, UV_RUN_DEFAULT);
		if (uv_loop_close(&daemon->loop) != 0)
			kagent_daemon_log("a handle was left open at exit");
	}
	if (daemon->store != NULL)
		kagent_store_close(daemon->store);
	if (config_loaded)
		kagent_config_clear(&daemon->config);
	if (daemon->slot_names != NULL) {
		for (size_t slot = 0; slot < daemon->scheduler.slot_count; slot++)
			free(daemon->slot_names[slot]);
		kagent_scheduler_clear(&daemon->scheduler);
	}
	kagent_daemon_evaluations_free(daemon->evaluations);
	free(daemon->slot_names);
	free(daemon->slot_gpus);
	json_decref(daemon->cancel_requests);
	free(daemon);
	return status;
}
