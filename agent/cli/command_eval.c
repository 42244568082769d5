/*
 * `kagent eval PROBLEM CANDIDATE`: one evaluation, printed as text or as one JSON object. Its
 * options and run are shared with `kagent profile` (command_eval.h): printed as exactly one
 * JSON object with --json, else by the command's renderer.
 */
#include "command_eval.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/evaluator/evidence.h"
#include "kagent/evaluator/verdict.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMMAND_EVAL_NO_GPU_HINT "to run the evaluation on the CPU instead, add --device cpu"

/* Indexes into kagent_command_eval_options, the cases of the parser's switch. */
enum {
	COMMAND_EVAL_JSON,
	COMMAND_EVAL_DEVICE,
	COMMAND_EVAL_GPU,
	COMMAND_EVAL_SEED,
	COMMAND_EVAL_WORKER,
	COMMAND_EVAL_COLD,
	COMMAND_EVAL_NO_CACHE,
	COMMAND_EVAL_NO_COMPILE,
	COMMAND_EVAL_SPEEDUP_BASIS,
	COMMAND_EVAL_TRIALS,
	COMMAND_EVAL_SIGNED_TRIALS,
	COMMAND_EVAL_CALL_TIMEOUT,
	COMMAND_EVAL_GENERALISE,
	COMMAND_EVAL_EVIDENCE,
};

/* clang-format off */
const struct kagent_command_option kagent_command_eval_options[] = {
	[COMMAND_EVAL_JSON] = {"json", 0, NULL,
		"print the verdict as one JSON object (an error object on failure)", NULL, NULL},
	[COMMAND_EVAL_DEVICE] = {"device", 0, "cuda|cpu", "where the kernels run", "cuda", NULL},
	[COMMAND_EVAL_GPU] = {"gpu", 0, "N", "the index of the GPU to use", "0", NULL},
	[COMMAND_EVAL_SEED] = {"seed", 0, "N",
		"the first input seed; trials use N, N+1, ...", "random", NULL},
	[COMMAND_EVAL_WORKER] = {"worker", 0, "SOCKET",
		"the socket of a running kagent worker",
		"the default socket if a worker serves it, else a new worker",
		NULL},
	[COMMAND_EVAL_COLD] = {"cold", 0, NULL, "never use a running worker: start a new one",
		NULL, NULL},
	[COMMAND_EVAL_NO_CACHE] = {"no-cache", 0, NULL,
		"neither read nor write cached baseline timings", NULL, NULL},
	[COMMAND_EVAL_NO_COMPILE] = {"no-compile-baseline", 0, NULL,
		"do not time torch.compile as a baseline", NULL, NULL},
	[COMMAND_EVAL_SPEEDUP_BASIS] = {"speedup-basis", 0, "device|wall",
		"the clock speedups are read in: device (CUPTI's kernel and copy time per call; "
		"wall time where the judge measured none) or wall (the judge's clock around each "
		"call); the verdict reports both", "device", NULL},
	[COMMAND_EVAL_TRIALS] = {"trials", 0, "N",
		"correctness trials on the problem's own inputs, 1 to 1000", "3", NULL},
	[COMMAND_EVAL_SIGNED_TRIALS] = {"signed-trials", 0, "N",
		"extra trials on signed inputs, 0 (none) to 1000", "2", NULL},
	[COMMAND_EVAL_CALL_TIMEOUT] = {"call-timeout", 0, "SECONDS",
		"seconds one call of the candidate may take, 1 to 3600",
		"120 for the first call, 20 for later ones", NULL},
	[COMMAND_EVAL_GENERALISE] = {"generalise", 0, NULL,
		"also check correctness once with the problem's integer sizes halved and made "
		"odd (the verdict's generalisation)", NULL, NULL},
	[COMMAND_EVAL_EVIDENCE] = {"evidence", 0, "DIR",
		"also write an evidence bundle there (the verdict, raw samples, environment, "
		"seeds, the files); kagent verify DIR re-checks it", NULL, NULL},
	{0},
};
/* clang-format on */

static int
command_eval__parse_number(const char *text, long long minimum, long long *value)
{
	char *end;

	*value = strtoll(text, &end, 10);
	return *end == '\0' && end != text && *value >= minimum;
}

int
kagent_command_eval_run(int argc, char **argv, const struct kagent_command *command,
			int profile_reference, kagent_command_eval_render render)
{
	struct kagent_evaluation_options options = {
	    .device = "cuda", .measure_compile = 1, .profile_reference = profile_reference};
	struct kagent_command_parser parser;
	json_t *object = NULL;
	const char *evidence = NULL, *basis = "device";
	char *cause = NULL;
	long long number;
	int json = 0, option, status, index;

	/* --json decides how errors are printed, so look for it before parsing anything else. */
	for (index = 1; index < argc; index++) {
		if (strcmp(argv[index], "--json") == 0)
			json = 1;
	}
	kagent_command_parser_init(&parser, command);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case COMMAND_EVAL_JSON:
			break;
		case COMMAND_EVAL_DEVICE:
			options.device = optarg;
			break;
		case COMMAND_EVAL_GPU:
			if (!command_eval__parse_number(optarg, 0, &number) || number > INT_MAX)
				return kagent_command_fail(command, json, "usage",
							   "--gpu needs a GPU index");
			options.gpu_index = (int)number;
			break;
		case COMMAND_EVAL_SEED:
			if (!command_eval__parse_number(optarg, 1, &number))
				return kagent_command_fail(command, json, "usage",
							   "--seed needs a positive number");
			options.seed = (uint64_t)number;
			break;
		case COMMAND_EVAL_WORKER:
			options.worker_socket = optarg;
			break;
		case COMMAND_EVAL_COLD:
			options.cold = 1;
			break;
		case COMMAND_EVAL_NO_CACHE:
			options.no_cache = 1;
			break;
		case COMMAND_EVAL_NO_COMPILE:
			options.measure_compile = 0;
			break;
		case COMMAND_EVAL_SPEEDUP_BASIS:
			basis = optarg; /* checked after the loop, as --device */
			break;
		case COMMAND_EVAL_TRIALS:
			if (!command_eval__parse_number(optarg, 1, &number) || number > 1000)
				return kagent_command_fail(command, json, "usage",
							   "--trials needs a number from 1");
			options.trials = (int)number;
			break;
		case COMMAND_EVAL_SIGNED_TRIALS:
			if (!command_eval__parse_number(optarg, 0, &number) || number > 1000)
				return kagent_command_fail(command, json, "usage",
							   "--signed-trials needs a number");
			options.signed_trials = number == 0 ? -1 : (int)number;
			break;
		case COMMAND_EVAL_CALL_TIMEOUT:
			if (!command_eval__parse_number(optarg, 1, &number) || number > 3600)
				return kagent_command_fail(
				    command, json, "usage",
				    "--call-timeout needs seconds, 1 to 3600");
			options.call_timeout_seconds = (int)number;
			break;
		case COMMAND_EVAL_GENERALISE:
			options.generalisation = 1;
			break;
		case COMMAND_EVAL_EVIDENCE:
			evidence = optarg;
			break;
		case KAGENT_COMMAND_HELP:
			kagent_command_print_help(command, stdout);
			return 0;
		case KAGENT_COMMAND_MISSING_VALUE: {
			char *message = kagent_asprintf("%s needs a value", argv[optind - 1]);

			status = kagent_command_fail(command, json, "usage", message);
			free(message);
			return status;
		}
		default: {
			char *message = kagent_asprintf("unknown option %s", argv[optind - 1]);

			status = kagent_command_fail(command, json, "usage", message);
			free(message);
			return status;
		}
		}
	}
	if (argc - optind != 2)
		return kagent_command_fail(command, json, "usage",
					   "give exactly a problem file and a candidate file");
	if (strcmp(options.device, "cuda") != 0 && strcmp(options.device, "cpu") != 0)
		return kagent_command_fail(command, json, "usage", "--device must be cuda or cpu");
	if (kagent_verdict_basis_from_name(basis) < 0)
		return kagent_command_fail(command, json, "usage",
					   "--speedup-basis must be device or wall");
	options.speedup_basis = kagent_verdict_basis_from_name(basis);
	options.problem_path = argv[optind];
	options.candidate_path = argv[optind + 1];

	status = kagent_evaluation_run_sync(&options, &object);
	if (status != 0) {
		const char *kind = json_string_value(json_object_get(object, "error"));

		fprintf(stderr, "kagent %s: %s\n", command->name,
			json_string_value(json_object_get(object, "message")));
		if (kind != NULL && strcmp(kind, "no_gpu") == 0) {
			fputs(COMMAND_EVAL_NO_GPU_HINT "\n", stderr);
			json_object_set_new(object, "hint", json_string(COMMAND_EVAL_NO_GPU_HINT));
		}
		if (json) {
			json_dumpf(object, stdout, JSON_COMPACT);
			fputc('\n', stdout);
		}
		json_decref(object);
		return KAGENT_COMMAND_EXIT_ERROR;
	}
	if (evidence != NULL && kagent_evidence_write(evidence, object, &options, &cause) < 0) {
		status = kagent_command_fail(command, json, "io", cause);
		free(cause);
		json_decref(object);
		return status;
	}
	if (json) {
		json_dumpf(object, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		render(object, stdout);
	}
	status = kagent_verdict_exit_status(object);
	json_decref(object);
	return status;
}

static int
command_eval__handler(int argc, char **argv)
{
	return kagent_command_eval_run(argc, argv, &kagent_command_eval, 0,
				       kagent_verdict_render_text);
}

const struct kagent_command kagent_command_eval = {
    .name = "eval",
    .operands = KAGENT_COMMAND_EVAL_OPERANDS,
    .help = "judge a candidate kernel against a problem; exit 0 only when correct",
    .options = kagent_command_eval_options,
    .handler = command_eval__handler,
};
