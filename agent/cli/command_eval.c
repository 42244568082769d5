/*
 * `kagent eval PROBLEM CANDIDATE`: one evaluation, printed as text or as one JSON object. Its
 * options and run are shared with `kagent profile` (command_eval.h): printed as exactly one
 * JSON object with --json, else by the command's renderer.
 */
#include "command_eval.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/evaluator/verdict.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMMAND_EVAL_EXIT_ERROR 2

enum {
	COMMAND_EVAL_OPTION_COLD = 256,
	COMMAND_EVAL_OPTION_NO_CACHE,
	COMMAND_EVAL_OPTION_NO_COMPILE,
	COMMAND_EVAL_OPTION_TRIALS,
	COMMAND_EVAL_OPTION_SIGNED_TRIALS,
	COMMAND_EVAL_OPTION_CALL_TIMEOUT,
};

/* A usage error: the message on stderr, and the error object too when --json was asked. */
static int
command_eval__usage_error(const struct kagent_command *command, int json, const char *message)
{
	fprintf(stderr, "kagent %s: %s\n", command->name, message);
	kagent_command_print_usage(command);
	if (json) {
		json_t *error = kagent_verdict_error_json("usage", message);

		json_dumpf(error, stdout, JSON_COMPACT);
		fputc('\n', stdout);
		json_decref(error);
	}
	return COMMAND_EVAL_EXIT_ERROR;
}

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
	static const struct option long_options[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"device", required_argument, NULL, 'd'},
	    {"gpu", required_argument, NULL, 'g'},
	    {"seed", required_argument, NULL, 's'},
	    {"worker", required_argument, NULL, 'w'},
	    {"cold", no_argument, NULL, COMMAND_EVAL_OPTION_COLD},
	    {"no-cache", no_argument, NULL, COMMAND_EVAL_OPTION_NO_CACHE},
	    {"no-compile-baseline", no_argument, NULL, COMMAND_EVAL_OPTION_NO_COMPILE},
	    {"trials", required_argument, NULL, COMMAND_EVAL_OPTION_TRIALS},
	    {"signed-trials", required_argument, NULL, COMMAND_EVAL_OPTION_SIGNED_TRIALS},
	    {"call-timeout", required_argument, NULL, COMMAND_EVAL_OPTION_CALL_TIMEOUT},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct kagent_evaluation_options options = {
	    .device = "cuda", .measure_compile = 1, .profile_reference = profile_reference};
	json_t *object = NULL;
	long long number;
	int json = 0, option, status, index;

	/* --json decides how errors are printed, so look for it before parsing anything else. */
	for (index = 1; index < argc; index++) {
		if (strcmp(argv[index], "--json") == 0)
			json = 1;
	}
	optind = 1;
	opterr = 0;
	while ((option = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
		switch (option) {
		case 'j':
			break;
		case 'd':
			options.device = optarg;
			break;
		case 'g':
			if (!command_eval__parse_number(optarg, 0, &number) || number > INT_MAX)
				return command_eval__usage_error(command, json,
								 "--gpu needs a GPU index");
			options.gpu_index = (int)number;
			break;
		case 's':
			if (!command_eval__parse_number(optarg, 1, &number))
				return command_eval__usage_error(command, json,
								 "--seed needs a positive number");
			options.seed = (uint64_t)number;
			break;
		case 'w':
			options.worker_socket = optarg;
			break;
		case COMMAND_EVAL_OPTION_COLD:
			options.cold = 1;
			break;
		case COMMAND_EVAL_OPTION_NO_CACHE:
			options.no_cache = 1;
			break;
		case COMMAND_EVAL_OPTION_NO_COMPILE:
			options.measure_compile = 0;
			break;
		case COMMAND_EVAL_OPTION_TRIALS:
			if (!command_eval__parse_number(optarg, 1, &number) || number > 1000)
				return command_eval__usage_error(command, json,
								 "--trials needs a number from 1");
			options.trials = (int)number;
			break;
		case COMMAND_EVAL_OPTION_SIGNED_TRIALS:
			if (!command_eval__parse_number(optarg, 0, &number) || number > 1000)
				return command_eval__usage_error(command, json,
								 "--signed-trials needs a number");
			options.signed_trials = number == 0 ? -1 : (int)number;
			break;
		case COMMAND_EVAL_OPTION_CALL_TIMEOUT:
			if (!command_eval__parse_number(optarg, 1, &number) || number > 3600)
				return command_eval__usage_error(
				    command, json, "--call-timeout needs seconds, 1 to 3600");
			options.call_timeout_seconds = (int)number;
			break;
		case 'h':
			kagent_command_print_usage(command);
			return 0;
		case ':':
			return command_eval__usage_error(command, json,
							 "an option is missing its value");
		default: {
			char *message = kagent_asprintf("unknown option %s", argv[optind - 1]);

			status = command_eval__usage_error(command, json, message);
			free(message);
			return status;
		}
		}
	}
	if (argc - optind != 2)
		return command_eval__usage_error(
		    command, json, "give exactly a problem file and a candidate file");
	if (strcmp(options.device, "cuda") != 0 && strcmp(options.device, "cpu") != 0)
		return command_eval__usage_error(command, json, "--device must be cuda or cpu");
	options.problem_path = argv[optind];
	options.candidate_path = argv[optind + 1];

	status = kagent_evaluation_run_sync(&options, &object);
	if (status != 0) {
		fprintf(stderr, "kagent %s: %s\n", command->name,
			json_string_value(json_object_get(object, "message")));
		if (json) {
			json_dumpf(object, stdout, JSON_COMPACT);
			fputc('\n', stdout);
		}
		json_decref(object);
		return COMMAND_EVAL_EXIT_ERROR;
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
    .usage = KAGENT_COMMAND_EVAL_USAGE,
    .help = "judge a candidate kernel against a problem; exit 0 only when correct",
    .handler = command_eval__handler,
};
