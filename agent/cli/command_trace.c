/* `kagent trace FILE`: a run's trace as the lines `kagent optimize` shows, or its records as JSON;
 * with --follow, also the records a running writer appends, until its final record or Ctrl-C.
 */
#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/evaluator/verdict.h"
#include "kagent/cli/terminal_view.h"
#include "kagent/records/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* How often --follow looks for more: a person watching does not tell 200 ms from at once. */
#define COMMAND_TRACE_FOLLOW_MS 200

enum {
	COMMAND_TRACE_VERBOSE,
	COMMAND_TRACE_JSON,
	COMMAND_TRACE_FOLLOW,
};

/* clang-format off */
static const struct kagent_command_option command_trace__options[] = {
	[COMMAND_TRACE_VERBOSE] = {"verbose", 'v', NULL,
		"also show the model's text, the tool results and the summary", NULL, NULL},
	[COMMAND_TRACE_JSON] = {"json", 0, NULL, "print the records as written, one JSON object "
		"a line (one error object on failure)", NULL, NULL},
	[COMMAND_TRACE_FOLLOW] = {"follow", 'f', NULL, "keep showing the records appended to the "
		"file, until the run's final record or Ctrl-C", NULL, NULL},
	{0},
};
/* clang-format on */

/* The records read so far (an empty trace is an error), and where they are shown. */
struct command_trace__reading {
	struct kagent_terminal_view *view; /* NULL: only count (the check before --json) */
	size_t records;
};

static int
command_trace__count(const json_t *record, void *data)
{
	struct command_trace__reading *reading = data;

	reading->records++;
	if (reading->view != NULL)
		kagent_terminal_view_record(reading->view, record);
	return 0;
}
static int
command_trace__print_json(const json_t *record, void *data)
{
	(void)data;
	json_dumpf(record, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	return 0;
}

/* --follow: each complete line as it comes; the run's final record ends the following. */
struct command_trace__following {
	struct kagent_terminal_view *view; /* NULL with --json */
	int final;
};

static int
command_trace__follow_line(const struct kagent_trace_line *line, void *data)
{
	struct command_trace__following *following = data;
	const char *type = json_string_value(json_object_get(line->record, "type"));

	if (following->view != NULL)
		kagent_terminal_view_record(following->view, line->record);
	else
		printf("%.*s\n", (int)line->length, line->text);
	following->final = type != NULL && strcmp(type, "final") == 0;
	return following->final;
}

/* Reads what is there, then what comes, until the final record, Ctrl-C or an error. */
static int
command_trace__follow(const char *path, struct kagent_terminal_view *view, char **cause)
{
	const volatile sig_atomic_t *interrupted = kagent_command_catch_interrupt();
	struct command_trace__following following = {.view = view};
	struct timespec pause = {0, COMMAND_TRACE_FOLLOW_MS * 1000000L};
	long long offset = 0;
	struct stat info;
	int result;

	while (!*interrupted) {
		result = kagent_trace_read_from(path, offset, 0, command_trace__follow_line,
						&following, &offset, cause);
		fflush(stdout);
		if (result < 0 || following.final)
			return result < 0 ? result : 0;
		/* A shorter file is another file (a new run under that name): following it on
		 * from here would show nonsense. */
		if (stat(path, &info) == 0 && info.st_size < offset) {
			*cause = kagent_asprintf("%s became shorter: the trace was replaced", path);
			return -ESTALE;
		}
		nanosleep(&pause, NULL);
	}
	return 0;
}

static int
command_trace__handler(int argc, char **argv)
{
	struct kagent_command_parser parser;
	struct kagent_terminal_view_options options = {.live = 0, .verbose = 0};
	struct command_trace__reading reading = {0};
	char *cause = NULL, *message = NULL;
	int json = 0, follow = 0, option, truncated = 0, result, status = 0;

	for (option = 1; option < argc; option++)
		json = json || strcmp(argv[option], "--json") == 0;
	kagent_command_parser_init(&parser, &kagent_command_trace);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case COMMAND_TRACE_VERBOSE:
			options.verbose = 1;
			break;
		case COMMAND_TRACE_JSON:
			break;
		case COMMAND_TRACE_FOLLOW:
			follow = 1;
			break;
		case KAGENT_COMMAND_HELP:
			kagent_command_print_help(&kagent_command_trace, stdout);
			return 0;
		default:
			message = kagent_asprintf("unknown option %s", argv[optind - 1]);
			status = kagent_command_fail(&kagent_command_trace, json, "usage", message);
			goto out;
		}
	}
	if (optind != argc - 1) {
		status = kagent_command_fail(&kagent_command_trace, json, "usage",
					     "give exactly one trace file");
		goto out;
	}
	if (follow) {
		/* Records as they come: an empty file is a run that has not written yet. */
		options.live = 1;
		if (!json)
			reading.view = kagent_terminal_view_create(stdout, &options);
		result = command_trace__follow(argv[optind], reading.view, &cause);
		if (reading.view != NULL)
			kagent_terminal_view_finish(reading.view);
		fflush(stdout);
		if (result < 0)
			status = kagent_command_fail(&kagent_command_trace, json, "trace", cause);
		goto out;
	}
	/* With --json, check the whole file first: a reader of JSON lines wants all of them or
	 * none. An empty file (a run that never started, a wrong path) is an error, not a run. */
	if (!json)
		reading.view = kagent_terminal_view_create(stdout, &options);
	result =
	    kagent_trace_read(argv[optind], command_trace__count, &reading, &truncated, &cause);
	if (reading.view != NULL)
		kagent_terminal_view_finish(reading.view);
	if (result == 0 && reading.records == 0) {
		message = kagent_asprintf("%s holds no records: not the trace of a started run",
					  argv[optind]);
		status = kagent_command_fail(&kagent_command_trace, json, "empty", message);
		goto out;
	}
	if (result == 0 && json)
		result = kagent_trace_read(argv[optind], command_trace__print_json, NULL,
					   &truncated, &cause);
	fflush(stdout);
	if (result != 0) {
		status = kagent_command_fail(&kagent_command_trace, json, "trace",
					     cause != NULL ? cause : "cannot read the trace");
		goto out;
	}
	if (truncated)
		fprintf(stderr,
			"kagent trace: %s: trace ends in a cut line: the run was killed "
			"while writing\n",
			argv[optind]);
out:
	kagent_terminal_view_free(reading.view);
	free(message);
	free(cause);
	return status;
}

const struct kagent_command kagent_command_trace = {
    .name = "trace",
    .operands = "FILE",
    .help = "show a run's trace (JSONL) as readable lines, or its records with --json",
    .options = command_trace__options,
    .handler = command_trace__handler,
};
