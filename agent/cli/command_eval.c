/*
 * `kagent eval PROBLEM CANDIDATE`: one evaluation, printed as text or as one JSON object. Its
 * options and run are shared with `kagent profile` (command_eval.h): printed as exactly one
 * JSON object with --json, else by the command's renderer. When kagentd runs (its socket
 * answers, on the same device), `kagent eval` asks it (POST /v1/evaluations, then polls), so
 * that it shares the daemon's warm workers, cached baselines and timing lock; the verdict is
 * the same object. --no-daemon, --worker, --cold and --evidence evaluate here.
 */
#include "command_eval.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/log.h"
#include "kagent/base/paths.h"
#include "kagent/cli/command.h"
#include "kagent/daemon/daemon_client.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/evaluator/evidence.h"
#include "kagent/evaluator/verdict.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMMAND_EVAL_NO_GPU_HINT "to run the evaluation on the CPU instead, add --device cpu"
/* The daemon's caps a candidate; a larger one is evaluated here, which says why. */
#define COMMAND_EVAL_REMOTE_SOURCE_CAP (1024 * 1024)
#define COMMAND_EVAL_POLL_US 100000

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
	COMMAND_EVAL_COMPILE_TIMEOUT,
	COMMAND_EVAL_SPEEDUP_BASIS,
	COMMAND_EVAL_TRIALS,
	COMMAND_EVAL_SIGNED_TRIALS,
	COMMAND_EVAL_CALL_TIMEOUT,
	COMMAND_EVAL_DEVICE_QUEUES,
	COMMAND_EVAL_TIMING_PROCESSES,
	COMMAND_EVAL_GENERALISE,
	COMMAND_EVAL_EVIDENCE,
	COMMAND_EVAL_NO_DAEMON,
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
	[COMMAND_EVAL_COMPILE_TIMEOUT] = {"compile-timeout", 0, "SECONDS",
		"how long to wait for the torch.compile baseline (compiled beside the trials), "
		"1 to 240; past it the verdict goes without it and says why", "60", NULL},
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
	[COMMAND_EVAL_DEVICE_QUEUES] = {"device-queues", 0, "N",
		"hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) of each sandboxed child's CUDA "
		"context, every arm alike, 1 to 32: more let kernels of different streams "
		"overlap, fewer make contexts quicker to create on a busy host", "1", NULL},
	[COMMAND_EVAL_TIMING_PROCESSES] = {"timing-processes", 0, "N",
		"processes the eager arm and the candidate's are each timed in, 1 to 8 (on a GPU "
		"where the reference's call is under 0.1 ms): each process brings a state of its "
		"own to every call, so more of them make verdicts agree more closely", "4 on a GPU, "
		"1 on the CPU", NULL},
	[COMMAND_EVAL_GENERALISE] = {"generalise", 0, NULL,
		"also check correctness once with the problem's integer sizes halved and made "
		"odd (the verdict's generalisation)", NULL, NULL},
	[COMMAND_EVAL_EVIDENCE] = {"evidence", 0, "DIR",
		"also write an evidence bundle there (the verdict, raw samples, environment, "
		"seeds, the files); kagent verify DIR re-checks it", NULL, NULL},
	[COMMAND_EVAL_NO_DAEMON] = {"no-daemon", 0, NULL,
		"evaluate here even when kagentd runs (kagent eval asks a running daemon on the "
		"same device, at $KAGENT_DAEMON_SOCKET or its default socket; kagent profile never "
		"does)", NULL, NULL},
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

/* The options object of POST /v1/evaluations for these options (docs/reward-service.md). */
static json_t *
command_eval__remote_options(const struct kagent_evaluation_options *options)
{
	json_t *object =
	    json_pack("{s:s, s:s, s:b, s:b, s:b}", "device", options->device, "speedup_basis",
		      kagent_verdict_basis_name(options->speedup_basis), "no_compile_baseline",
		      !options->measure_compile, "no_cache", options->no_cache != 0, "generalise",
		      options->generalisation != 0);

	if (strcmp(options->device, "cpu") != 0)
		json_object_set_new(object, "gpu", json_integer(options->gpu_index));
	if (options->seed != 0)
		json_object_set_new(object, "seed", json_integer((json_int_t)options->seed));
	if (options->trials != 0)
		json_object_set_new(object, "trials", json_integer(options->trials));
	if (options->signed_trials != 0)
		json_object_set_new(
		    object, "signed_trials",
		    json_integer(options->signed_trials < 0 ? 0 : options->signed_trials));
	if (options->call_timeout_seconds != 0)
		json_object_set_new(object, "call_timeout",
				    json_integer(options->call_timeout_seconds));
	if (options->compile_timeout_seconds != 0)
		json_object_set_new(object, "compile_timeout",
				    json_integer(options->compile_timeout_seconds));
	if (options->device_queues != 0)
		json_object_set_new(object, "device_queues", json_integer(options->device_queues));
	if (options->timing_processes != 0)
		json_object_set_new(object, "timing_processes",
				    json_integer(options->timing_processes));
	return object;
}

/*
 * Asks a running kagentd for the evaluation. Returns 1 with *object_out (a verdict, or the
 * daemon's error object for this evaluation, with *status_out 0 or negative), or 0 when no
 * daemon can take it (none runs, another device, it refused the request): then the
 * evaluation runs here, and says the same things it would have without a daemon.
 */
static int
command_eval__remote(const struct kagent_evaluation_options *options, json_t **object_out,
		     int *status_out)
{
	char *socket_path = NULL, *cause = NULL, *source = NULL, *path = NULL, *problem = NULL;
	json_t *reply = NULL, *body = NULL;
	const char *id;
	struct stat info;
	size_t size = 0;
	long status = 0;
	int used = 0;

	if (kagent_paths_daemon_socket(&socket_path, &cause) < 0 || stat(socket_path, &info) != 0 ||
	    !S_ISSOCK(info.st_mode))
		goto out;
	if (kagent_daemon_client_request(socket_path, NULL, "GET", "/v1/health", NULL, &status,
					 &reply, &cause) < 0 ||
	    status != 200 || !json_is_string(json_object_get(reply, "device")) ||
	    strcmp(json_string_value(json_object_get(reply, "device")), options->device) != 0)
		goto out;
	json_decref(reply);
	reply = NULL;
	/* The daemon reads the problem itself (an absolute path, as for a batch); the candidate
	 * goes as its text. */
	problem = realpath(options->problem_path, NULL);
	if (problem == NULL ||
	    kagent_fileio_read(options->candidate_path, COMMAND_EVAL_REMOTE_SOURCE_CAP, &source,
			       &size, &cause) < 0 ||
	    size >= COMMAND_EVAL_REMOTE_SOURCE_CAP || strlen(source) != size)
		goto out;
	body = json_pack("{s:s, s:[s%], s:o, s:b}", "problem_path", problem, "candidates", source,
			 size, "options", command_eval__remote_options(options), "async", 1);
	if (kagent_daemon_client_request(socket_path, NULL, "POST", "/v1/evaluations", body,
					 &status, &reply, &cause) < 0 ||
	    status != 202 ||
	    (id = json_string_value(json_array_get(json_object_get(reply, "ids"), 0))) == NULL)
		goto out;
	kagent_log(KAGENT_LOG_INFO, "evaluating through kagentd at %s as %s", socket_path, id);
	path = kagent_asprintf("/v1/evaluations/%s", id);
	/* From here the daemon has the evaluation: its failures are this evaluation's. */
	used = 1;
	for (;;) {
		json_t *answer = NULL;
		const char *state;

		if (kagent_daemon_client_request(socket_path, NULL, "GET", path, NULL, &status,
						 &answer, &cause) < 0 ||
		    status != 200) {
			*object_out = kagent_verdict_error_json(
			    "daemon", cause != NULL ? cause : "kagentd lost the evaluation");
			*status_out = -EPROTO;
			json_decref(answer);
			break;
		}
		state = json_string_value(json_object_get(answer, "state"));
		if (state != NULL && strcmp(state, "done") == 0) {
			char *candidate = realpath(options->candidate_path, NULL);

			*object_out = json_deep_copy(json_object_get(answer, "verdict"));
			/* an error object has "error" where a verdict has "status" */
			*status_out = json_object_get(*object_out, "error") != NULL ? -EPROTO : 0;
			/* the file named here, not the daemon's copy of its text */
			if (candidate != NULL &&
			    json_is_object(json_object_get(*object_out, "candidate")))
				json_object_set_new(json_object_get(*object_out, "candidate"),
						    "path", json_string(candidate));
			free(candidate);
			json_decref(answer);
			break;
		}
		json_decref(answer);
		usleep(COMMAND_EVAL_POLL_US);
	}
out:
	if (!used && cause != NULL)
		kagent_log(KAGENT_LOG_INFO, "evaluating here, not through kagentd: %s", cause);
	free(cause);
	free(socket_path);
	free(source);
	free(problem);
	free(path);
	json_decref(body);
	json_decref(reply);
	return used;
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
	int json = 0, option, status, index, local = profile_reference;

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
			local = 1;
			break;
		case COMMAND_EVAL_COLD:
			options.cold = 1;
			local = 1;
			break;
		case COMMAND_EVAL_NO_DAEMON:
			local = 1;
			break;
		case COMMAND_EVAL_NO_CACHE:
			options.no_cache = 1;
			break;
		case COMMAND_EVAL_NO_COMPILE:
			options.measure_compile = 0;
			break;
		case COMMAND_EVAL_COMPILE_TIMEOUT:
			if (!command_eval__parse_number(optarg, 1, &number) ||
			    number > KAGENT_EVALUATION_COMPILE_TIMEOUT_MAX)
				return kagent_command_fail(
				    command, json, "usage",
				    "--compile-timeout needs seconds, 1 to 240");
			options.compile_timeout_seconds = (int)number;
			break;
		case COMMAND_EVAL_DEVICE_QUEUES:
			if (!command_eval__parse_number(optarg, 1, &number) ||
			    number > KAGENT_EVALUATION_DEVICE_QUEUES_MAX)
				return kagent_command_fail(
				    command, json, "usage",
				    "--device-queues needs a number, 1 to 32");
			options.device_queues = (int)number;
			break;
		case COMMAND_EVAL_TIMING_PROCESSES:
			if (!command_eval__parse_number(optarg, 1, &number) ||
			    number > KAGENT_EVALUATION_TIMING_PROCESSES_MAX)
				return kagent_command_fail(
				    command, json, "usage",
				    "--timing-processes needs a number, 1 to 8");
			options.timing_processes = (int)number;
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
			local = 1; /* the bundle's files are read here */
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

	if (local || !command_eval__remote(&options, &object, &status))
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
