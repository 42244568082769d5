/*
 * `kagent verify DIR`: re-runs the evaluation an evidence bundle (kagent eval --evidence DIR)
 * records, from the bundle's own files and seeds, on this machine, and prints then against
 * now. Exit status: 0 when verified (the status matches and, on the same GPU model, the
 * speedup's intervals overlap once widened to --interval-floor), 1 when not, 2 for a bundle that is
 * missing, not whole or changed, or an evaluation that reached no verdict.
 */
#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/evaluator/evidence.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Indexes into command_verify__options, the cases of the parser's switch. */
enum {
	COMMAND_VERIFY_JSON,
	COMMAND_VERIFY_GPU,
	COMMAND_VERIFY_WORKER,
	COMMAND_VERIFY_COLD,
	COMMAND_VERIFY_INTERVAL_FLOOR,
};

/* clang-format off */
static const struct kagent_command_option command_verify__options[] = {
	[COMMAND_VERIFY_JSON] = {"json", 0, NULL,
		"print the comparison and the new verdict as one JSON object", NULL, NULL},
	[COMMAND_VERIFY_GPU] = {"gpu", 0, "N", "the index of the GPU to use", "0", NULL},
	[COMMAND_VERIFY_WORKER] = {"worker", 0, "SOCKET",
		"the socket of a running kagent worker",
		"the default socket if a worker serves it, else a new worker", NULL},
	[COMMAND_VERIFY_COLD] = {"cold", 0, NULL, "never use a running worker: start a new one",
		NULL, NULL},
	[COMMAND_VERIFY_INTERVAL_FLOOR] = {"interval-floor", 0, "PERCENT",
		"the least half-width of a speedup's interval when then and now are compared, "
		"in percent of the speedup, 0 to 100 (0: the intervals as measured)", "2", NULL},
	{0},
};
/* clang-format on */

static int
command_verify__parse(int argc, char **argv, int json, struct kagent_evaluation_options *options,
		      double *interval_floor)
{
	struct kagent_command_parser parser;
	char *end, *message;
	long value;
	int option, status;

	kagent_command_parser_init(&parser, &kagent_command_verify);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case COMMAND_VERIFY_JSON:
			break;
		case COMMAND_VERIFY_GPU:
			value = strtol(optarg, &end, 10);
			if (*end != '\0' || end == optarg || value < 0 || value > INT_MAX)
				return kagent_command_fail(&kagent_command_verify, json, "usage",
							   "--gpu needs a GPU index");
			options->gpu_index = (int)value;
			break;
		case COMMAND_VERIFY_WORKER:
			options->worker_socket = optarg;
			break;
		case COMMAND_VERIFY_COLD:
			options->cold = 1;
			break;
		case COMMAND_VERIFY_INTERVAL_FLOOR:
			if (kagent_evidence_interval_floor_parse(optarg, interval_floor) < 0)
				return kagent_command_fail(
				    &kagent_command_verify, json, "usage",
				    "--interval-floor needs a percentage, 0 to 100");
			break;
		case KAGENT_COMMAND_HELP:
			kagent_command_print_help(&kagent_command_verify, stdout);
			return 0;
		default:
			message = kagent_asprintf(option == KAGENT_COMMAND_MISSING_VALUE
						      ? "%s needs a value"
						      : "unknown option %s",
						  argv[optind - 1]);
			status =
			    kagent_command_fail(&kagent_command_verify, json, "usage", message);
			free(message);
			return status;
		}
	}
	if (argc - optind != 1)
		return kagent_command_fail(&kagent_command_verify, json, "usage",
					   "give exactly one evidence folder");
	return -1; /* parsed: go on */
}

static int
command_verify__handler(int argc, char **argv)
{
	struct kagent_evaluation_options options = {.measure_compile = 1};
	struct kagent_evidence bundle;
	json_t *now = NULL, *comparison;
	char *cause = NULL;
	int json = 0, status, index, gpu_index, cold;
	double interval_floor = KAGENT_EVIDENCE_INTERVAL_FLOOR;
	const char *worker;

	for (index = 1; index < argc; index++) {
		if (strcmp(argv[index], "--json") == 0)
			json = 1;
	}
	status = command_verify__parse(argc, argv, json, &options, &interval_floor);
	if (status >= 0)
		return status;
	if (kagent_evidence_load(argv[optind], &bundle, &cause) < 0) {
		char *message = kagent_asprintf("not a usable evidence bundle: %s", cause);

		status = kagent_command_fail(&kagent_command_verify, json, "bundle", message);
		free(message);
		free(cause);
		return status;
	}
	/* this machine's choices stay; the rest is the bundle's */
	gpu_index = options.gpu_index;
	worker = options.worker_socket;
	cold = options.cold;
	kagent_evidence_options(&bundle, &options);
	options.gpu_index = gpu_index;
	options.worker_socket = worker;
	options.cold = cold;
	options.no_cache = 1; /* both arms measured now, here */
	if (kagent_evaluation_run_sync(&options, &now) != 0) {
		status = kagent_command_fail(&kagent_command_verify, json,
					     json_string_value(json_object_get(now, "error"))
						 ? json_string_value(json_object_get(now, "error"))
						 : "worker",
					     json_string_value(json_object_get(now, "message")));
		goto out;
	}
	comparison = kagent_evidence_compare(bundle.verdict, now, interval_floor);
	status = json_is_true(json_object_get(comparison, "verified")) ? 0 : 1;
	if (json) {
		json_object_set(comparison, "verdict", now);
		json_dumpf(comparison, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		kagent_evidence_render_comparison(comparison, stdout);
	}
	json_decref(comparison);
out:
	json_decref(now);
	kagent_evidence_free(&bundle);
	return status;
}

const struct kagent_command kagent_command_verify = {
    .name = "verify",
    .operands = "DIR",
    .help = "re-run an evidence bundle's evaluation here and compare; exit 0 when it holds",
    .options = command_verify__options,
    .handler = command_verify__handler,
};
