/*
 * `kagent watch ID`: follows a session or a batch of kagentd live, over the daemon's event
 * streams (docs/daemon-api.md). A session's id: the terminal view `kagent optimize` prints,
 * rendered from the session's trace records as the daemon streams them, until the session
 * ends. A batch's id (b-...): one line per session, redrawn in place on a terminal (a line per
 * change otherwise), until the batch ends. Ctrl-C detaches; nothing is stopped.
 */
#include "daemon_call.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/cli/command.h"
#include "kagent/cli/terminal_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

enum {
	COMMAND_WATCH_SOCKET,
	COMMAND_WATCH_TOKEN_FILE,
	COMMAND_WATCH_VERBOSE,
	COMMAND_WATCH_JSON,
};

/* clang-format off */
static const struct kagent_command_option command_watch__options[] = {
	KAGENT_DAEMON_CALL_TARGET_OPTIONS,
	[COMMAND_WATCH_VERBOSE] = {"verbose", 'v', NULL,
		"also show the model's text, the tool results and the summary", NULL, NULL},
	[COMMAND_WATCH_JSON] = {"json", 0, NULL, "print the events' data as they come, one JSON "
		"object a line (an error object on failure)", NULL, NULL},
	{0},
};
/* clang-format on */

/* The batch's sessions in the order they came, and how the lines were last drawn. */
struct command_watch__batch {
	json_t *sessions; /* [session event data, ...] */
	json_t *index;	  /* id -> position in sessions */
	json_t *state;	  /* the last batch event's data, or NULL */
	int terminal;	  /* redraw in place */
	int drawn;	  /* lines drawn last time (to move back over) */
};

struct command_watch__reading {
	struct kagent_daemon_call *call;
	struct kagent_terminal_view *view; /* a session's */
	struct command_watch__batch batch;
	int is_batch;
	char *end_state; /* how it ended, once it did */
};

static const char *
command_watch__text(const json_t *object, const char *key)
{
	const char *text = json_string_value(json_object_get(object, key));

	return text != NULL ? text : "-";
}

/* "relu  running  cpu  turn 2  $0.0031  best v3 2.10x" */
static void
command_watch__session_line(const json_t *session, struct kagent_buffer *line)
{
	const json_t *best = json_object_get(session, "best");
	char speedup[32];

	kagent_buffer_appendf(
	    line, "%-30s %-24s %-9s %-4s turn %-3lld $%.4f", command_watch__text(session, "id"),
	    command_watch__text(session, "problem"), command_watch__text(session, "state"),
	    command_watch__text(session, "gpu"),
	    (long long)json_integer_value(json_object_get(session, "turns")),
	    json_number_value(json_object_get(session, "cost")));
	if (json_is_object(best)) {
		kagent_daemon_call_format_speedup(speedup, sizeof speedup,
						  json_object_get(best, "speedup"));
		kagent_buffer_appendf(line, "  best %s %s", command_watch__text(best, "variant"),
				      speedup);
	}
}

static void
command_watch__batch_line(const json_t *batch, struct kagent_buffer *line)
{
	const json_t *counts = json_object_get(batch, "counts");

	kagent_buffer_appendf(
	    line, "batch %s %s: %lld queued, %lld running, %lld done, %lld failed, %lld cancelled",
	    command_watch__text(batch, "id"), command_watch__text(batch, "state"),
	    (long long)json_integer_value(json_object_get(counts, "queued")),
	    (long long)json_integer_value(json_object_get(counts, "running")),
	    (long long)json_integer_value(json_object_get(counts, "done")),
	    (long long)json_integer_value(json_object_get(counts, "failed")),
	    (long long)json_integer_value(json_object_get(counts, "cancelled")));
}

/* On a terminal: every line again, over the last drawing, as many as the window holds. */
static void
command_watch__redraw(struct command_watch__batch *batch)
{
	struct kagent_buffer line = {0};
	struct winsize size;
	size_t rows = 0, columns = 0, shown, index;
	const json_t *session;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0) {
		rows = size.ws_row;
		columns = size.ws_col;
	}
	if (batch->drawn > 0)
		printf("\033[%dA", batch->drawn);
	batch->drawn = 0;
	/* The batch's line, then the sessions that fit; a drawing taller than the window could
	 * not be moved back over. */
	shown = json_array_size(batch->sessions);
	if (rows > 2 && shown > rows - 2)
		shown = rows - 2;
	for (index = 0; index <= shown; index++) {
		kagent_buffer_set(&line, "", 0);
		if (index == 0 && batch->state != NULL)
			command_watch__batch_line(batch->state, &line);
		else if (index == 0)
			kagent_buffer_append_string(&line, "batch: waiting for its state");
		else {
			session = json_array_get(batch->sessions, index - 1);
			command_watch__session_line(session, &line);
		}
		if (columns > 1 && line.length >= columns)
			line.length = columns - 1;
		printf("\r\033[2K%.*s\n", (int)line.length, line.data != NULL ? line.data : "");
		batch->drawn++;
	}
	if (shown < json_array_size(batch->sessions)) {
		printf("\r\033[2K(%zu more sessions: see kagent status %s)\n",
		       json_array_size(batch->sessions) - shown,
		       command_watch__text(batch->state, "id"));
		batch->drawn++;
	}
	fflush(stdout);
	kagent_buffer_free(&line);
}

static int
command_watch__batch_event(struct command_watch__reading *reading, const char *name, json_t *data)
{
	struct command_watch__batch *batch = &reading->batch;
	struct kagent_buffer line = {0};
	const char *id = json_string_value(json_object_get(data, "id"));
	const char *state = json_string_value(json_object_get(data, "state"));

	if (strcmp(name, "session") == 0 && id != NULL) {
		json_t *position = json_object_get(batch->index, id);

		if (position != NULL)
			json_array_set(batch->sessions, (size_t)json_integer_value(position), data);
		else {
			json_object_set_new(
			    batch->index, id,
			    json_integer((json_int_t)json_array_size(batch->sessions)));
			json_array_append(batch->sessions, data);
		}
		/* The first state comes as a burst of sessions and then the batch: draw once. */
		if (batch->terminal && batch->state != NULL)
			command_watch__redraw(batch);
		else if (!batch->terminal) {
			command_watch__session_line(data, &line);
			printf("%s\n", line.data);
		}
	} else if (strcmp(name, "batch") == 0) {
		json_decref(batch->state);
		batch->state = json_incref(data);
		if (batch->terminal)
			command_watch__redraw(batch);
		else {
			command_watch__batch_line(data, &line);
			printf("%s\n", line.data);
		}
		if (state != NULL &&
		    (strcmp(state, "done") == 0 || strcmp(state, "cancelled") == 0))
			reading->end_state = kagent_strdup(state);
	}
	fflush(stdout);
	kagent_buffer_free(&line);
	return reading->end_state != NULL;
}

static int
command_watch__event(const struct kagent_sse_event *event, void *data)
{
	struct command_watch__reading *reading = data;
	json_t *parsed = json_loadb(event->data, event->data_length, 0, NULL);
	int stop = 0;

	if (!json_is_object(parsed)) {
		/* Not kagentd's: ignore rather than stop watching (keep-alives carry no data). */
		json_decref(parsed);
		return 0;
	}
	if (reading->call->json) {
		json_dumpf(parsed, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		fflush(stdout);
	}
	if (reading->is_batch)
		stop = command_watch__batch_event(reading, event->name, parsed);
	else if (strcmp(event->name, "record") == 0 && reading->view != NULL)
		kagent_terminal_view_record(reading->view, parsed);
	else if (strcmp(event->name, "end") == 0) {
		reading->end_state = kagent_strdup(command_watch__text(parsed, "state"));
		stop = 1;
	}
	json_decref(parsed);
	return stop;
}

static int
command_watch__handler(int argc, char **argv)
{
	struct kagent_daemon_call call;
	struct kagent_terminal_view_options options = {.live = 1, .verbose = 0};
	struct command_watch__reading reading = {.call = &call};
	const volatile sig_atomic_t *interrupted;
	char *path = NULL;
	const char *id;
	int status;

	if (!kagent_daemon_call_parse(&call, &kagent_command_watch, argc, argv, &status))
		return status;
	if (call.first_operand != argc - 1) {
		return kagent_command_fail(
		    &kagent_command_watch, call.json, "usage",
		    "give exactly one id: a session's, or a batch's (b-...)");
	}
	id = argv[call.first_operand];
	options.verbose = call.values[COMMAND_WATCH_VERBOSE] != NULL;
	/* Batch ids are the store's "b-YYYYMMDD-..."; run ids start with their date. */
	reading.is_batch = strncmp(id, "b-", 2) == 0;
	if (reading.is_batch) {
		path = kagent_daemon_call_query_path("/v1/events", "batch", id);
		reading.batch.sessions = json_array();
		reading.batch.index = json_object();
		reading.batch.terminal = !call.json && isatty(STDOUT_FILENO);
	} else {
		path = kagent_daemon_call_path("sessions", id, "/events");
		if (!call.json)
			reading.view = kagent_terminal_view_create(stdout, &options);
	}
	interrupted = kagent_command_catch_interrupt();
	status =
	    kagent_daemon_call_stream(&call, path, command_watch__event, &reading, interrupted);
	if (reading.view != NULL)
		kagent_terminal_view_finish(reading.view);
	fflush(stdout);
	if (status != 0)
		goto out;
	if (reading.end_state != NULL)
		fprintf(stderr, "kagent watch: %s %s ended: %s\n",
			reading.is_batch ? "batch" : "session", id, reading.end_state);
	else if (*interrupted)
		fprintf(stderr, "kagent watch: detached; %s goes on in kagentd\n", id);
	else
		status = kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "daemon",
						 "kagentd closed the stream before the end (is it "
						 "stopping?)");
out:
	kagent_terminal_view_free(reading.view);
	json_decref(reading.batch.sessions);
	json_decref(reading.batch.index);
	json_decref(reading.batch.state);
	free(reading.end_state);
	free(path);
	return status;
}

const struct kagent_command kagent_command_watch = {
    .name = "watch",
    .operands = "ID",
    .help = "follow a session of kagentd live (the view optimize prints), or a batch's sessions",
    .options = command_watch__options,
    .handler = command_watch__handler,
};
