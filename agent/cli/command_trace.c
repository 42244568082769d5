/* `kagent trace FILE`: a run's trace as the lines `kagent optimize` shows, or its records as JSON.
 */
#include "kagent/cli/command.h"
#include "kagent/cli/terminal_view.h"
#include "kagent/records/trace.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static int
command_trace__check(const json_t *record, void *data)
{
	(void)record;
	(void)data;
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
command_trace__render(const json_t *record, void *view)
{
	kagent_terminal_view_record(view, record);
	return 0;
}

static int
command_trace__handler(int argc, char **argv)
{
	static const struct option long_options[] = {
	    {"verbose", no_argument, NULL, 'v'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct kagent_terminal_view_options options = {.live = 0, .verbose = 0};
	struct kagent_terminal_view *view = NULL;
	char *error = NULL;
	int json = 0, option, truncated = 0, result, status = 0;

	optind = 1;
	opterr = 0;
	while ((option = getopt_long(argc, argv, "vh", long_options, NULL)) != -1) {
		switch (option) {
		case 'v':
			options.verbose = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			kagent_command_print_usage(&kagent_command_trace);
			return 0;
		default:
			fprintf(stderr, "kagent trace: unknown option\n");
			kagent_command_print_usage(&kagent_command_trace);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "kagent trace: give exactly one trace file\n");
		kagent_command_print_usage(&kagent_command_trace);
		return 2;
	}
	if (json) {
		/* Check the whole file first: a reader of JSON lines wants all of them or none. */
		result =
		    kagent_trace_read(argv[optind], command_trace__check, NULL, &truncated, &error);
		if (result == 0)
			result = kagent_trace_read(argv[optind], command_trace__print_json, NULL,
						   &truncated, &error);
	} else {
		view = kagent_terminal_view_create(stdout, &options);
		result = kagent_trace_read(argv[optind], command_trace__render, view, &truncated,
					   &error);
		kagent_terminal_view_finish(view);
	}
	fflush(stdout);
	if (result != 0) {
		fprintf(stderr, "kagent trace: %s\n",
			error != NULL ? error : "cannot read the trace");
		status = 2;
		goto out;
	}
	if (truncated)
		fprintf(stderr,
			"kagent trace: %s: trace ends in a cut line: the run was killed "
			"while writing\n",
			argv[optind]);
out:
	kagent_terminal_view_free(view);
	free(error);
	return status;
}

const struct kagent_command kagent_command_trace = {
    .name = "trace",
    .usage = "FILE [--verbose] [--json]",
    .help = "show a run's trace (JSONL) as readable lines, or its records with --json",
    .handler = command_trace__handler,
};
