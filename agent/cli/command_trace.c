/* `kagent trace FILE`: a run's trace as the lines `kagent optimize` shows, or its records as JSON.
 */
#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/evaluator/verdict.h"
#include "kagent/cli/terminal_view.h"
#include "kagent/records/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	COMMAND_TRACE_VERBOSE,
	COMMAND_TRACE_JSON,
};

/* clang-format off */
static const struct kagent_command_option command_trace__options[] = {
	[COMMAND_TRACE_VERBOSE] = {"verbose", 'v', NULL,
		"also show the model's text, the tool results and the summary", NULL, NULL},
	[COMMAND_TRACE_JSON] = {"json", 0, NULL, "print the records as written, one JSON object "
		"a line (one error object on failure)", NULL, NULL},
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

static int
command_trace__handler(int argc, char **argv)
{
	struct kagent_command_parser parser;
	struct kagent_terminal_view_options options = {.live = 0, .verbose = 0};
	struct command_trace__reading reading = {0};
	char *cause = NULL, *message = NULL;
	int json = 0, option, truncated = 0, result, status = 0;

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
