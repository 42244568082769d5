/*
 * `kagent optimize PROBLEM.py`: the main job. Reads the config (file, SDK
 * environment variables, flags), checks the endpoint settings and the GPU
 * before any token is spent, then runs one session on a libuv loop with the
 * terminal view attached (the session checks the problem before its first
 * request; a problem refused there exits 2, as `kagent eval` does), and prints the final summary
 * (or one JSON object with --json). Ctrl-C, SIGTERM, SIGHUP and a closed stdout stop the run at
 * the next safe point, where the session stops its workers; --resume RUN-ID
 * continues it later.
 */
#include "command_optimize.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/records/config.h"
#include "kagent/cuda/cuda_driver.h"
#include "kagent/llm/http_client.h"
#include "kagent/session/session.h"
#include "kagent/cli/terminal_view.h"
#include "kagent/evaluator/verdict.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OPTIMIZE_EXIT_NOT_REACHED 1
/* How often stdout is checked for a reader that went away (kagent optimize | head -3). */
#define OPTIMIZE_STDOUT_CHECK_MS 250

/* Indexes into command_optimize__options, the cases of the parser's switch. */
enum {
	OPTIMIZE_OPTION_CONFIG,
	OPTIMIZE_OPTION_RESUME,
	OPTIMIZE_OPTION_JSON,
	OPTIMIZE_OPTION_VERBOSE,
	OPTIMIZE_OPTION_FIRST_KEY, /* from here on, each flag sets its config key */
};

/* A flag with a config key takes its help and default from the key (agent/records/config.c). */
/* clang-format off */
static const struct kagent_command_option command_optimize__options[] = {
	[OPTIMIZE_OPTION_CONFIG] = {"config", 0, "FILE", "the config file",
		"$KAGENT_CONFIG, else ./kagent.yaml", NULL},
	[OPTIMIZE_OPTION_RESUME] = {"resume", 0, "RUN-ID",
		"continue an interrupted run where it stopped", NULL, NULL},
	[OPTIMIZE_OPTION_JSON] = {"json", 0, NULL, "print the final summary as one JSON object "
		"(an error object on failure); the progress goes to stderr", NULL, NULL},
	[OPTIMIZE_OPTION_VERBOSE] = {"verbose", 0, NULL,
		"also show the model's text and the tool results", NULL, NULL},
	KAGENT_COMMAND_OPTIMIZE_SETTINGS(NULL), /* shared with kagent batch */
	{"device", 0, "cuda|cpu", NULL, NULL, "evaluation.device"},
	{"gpu", 0, "N", NULL, NULL, "evaluation.gpu"},
	{"worker", 0, "SOCKET", NULL, NULL, "evaluation.worker_socket"},
	{"output", 0, "DIR", NULL, NULL, "output_directory"},
	{"prompts", 0, "DIR", NULL, NULL, "prompts_directory"},
	{0},
};
/* clang-format on */
#define OPTIMIZE_OPTION_COUNT                                                                      \
	(sizeof command_optimize__options / sizeof command_optimize__options[0] - 1)

/* The signals that stop a run at its next safe point, and what the run says of each. */
static const struct {
	int number;
	const char *said;
} command_optimize__stop_signals[] = {
    {SIGINT, "interrupted"},
    {SIGTERM, "terminated (SIGTERM)"},
    {SIGHUP, "hung up (SIGHUP)"},
};
#define OPTIMIZE_STOP_SIGNAL_COUNT                                                                 \
	(sizeof command_optimize__stop_signals / sizeof command_optimize__stop_signals[0])

struct command_optimize__run {
	struct kagent_terminal_view *view;
	struct kagent_session *session;
	uv_signal_t signals[OPTIMIZE_STOP_SIGNAL_COUNT];
	uv_timer_t stdout_check;
	json_t *final;
	char *refusal; /* why the problem was refused before the first request */
	int exit_status;
	int stopped_by; /* the signal that stopped the run (SIGPIPE: stdout closed), or 0 */
};

static void
command_optimize__observe(const json_t *record, void *data)
{
	struct command_optimize__run *run = data;

	kagent_terminal_view_record(run->view, record);
}

static void
command_optimize__done(struct kagent_session *session, int status, const json_t *summary,
		       void *data)
{
	struct command_optimize__run *run = data;
	const char *reason = json_string_value(json_object_get(summary, "stop_reason"));
	size_t index;

	run->final = json_incref((json_t *)summary);
	if (reason != NULL && strcmp(reason, "bad_problem") == 0) {
		/* Refused as `kagent eval` refuses it: one error, no summary of a run never begun.
		 */
		run->refusal =
		    kagent_asprintf("%s (nothing was sent to the model)",
				    json_string_value(json_object_get(summary, "stop_detail")));
		run->exit_status = KAGENT_COMMAND_EXIT_ERROR;
	} else if (reason != NULL &&
		   (strcmp(reason, "llm_error") == 0 || strcmp(reason, "evaluator_error") == 0)) {
		/* The live view shortens lines; the reason to act on is printed whole. */
		fprintf(stderr, "kagent optimize: %s\n",
			json_string_value(json_object_get(summary, "stop_detail")));
		run->exit_status = KAGENT_COMMAND_EXIT_ERROR;
	} else if (status == 0 && json_is_true(json_object_get(summary, "target_reached")))
		run->exit_status = 0;
	else if (status == 0 && kagent_session_config(session)->target.speedup <= 0)
		run->exit_status = 0;
	else
		run->exit_status = OPTIMIZE_EXIT_NOT_REACHED;
	/* Stopped by a signal: 128 + its number, what a shell reports for a process it killed. */
	if (run->stopped_by != 0 && reason != NULL && strcmp(reason, "interrupted") == 0)
		run->exit_status = 128 + run->stopped_by;
	for (index = 0; index < OPTIMIZE_STOP_SIGNAL_COUNT; index++)
		uv_close((uv_handle_t *)&run->signals[index], NULL);
	uv_close((uv_handle_t *)&run->stdout_check, NULL);
}

static void
command_optimize__stop(struct command_optimize__run *run, int signal_number, const char *said)
{
	if (run->stopped_by != 0)
		return;
	run->stopped_by = signal_number;
	fprintf(stderr,
		"\nkagent optimize: %s, stopping after the current step (the run can be "
		"resumed with --resume %s)\n",
		said, kagent_session_run_id(run->session));
	kagent_session_interrupt(run->session);
}

static void
command_optimize__signalled(uv_signal_t *handle, int signal_number)
{
	size_t index;

	for (index = 0; command_optimize__stop_signals[index].number != signal_number; index++)
		continue;
	command_optimize__stop(handle->data, signal_number,
			       command_optimize__stop_signals[index].said);
}

/* A pipe whose reader has gone polls POLLERR (a terminal or socket: POLLHUP); writing to it
 * fails with EPIPE, SIGPIPE being ignored. Nobody reads the run any more: it stops. */
static void
command_optimize__check_stdout(uv_timer_t *timer)
{
	struct pollfd stdout_poll = {.fd = STDOUT_FILENO};

	if (poll(&stdout_poll, 1, 0) == 1 && (stdout_poll.revents & (POLLERR | POLLHUP)) != 0) {
		uv_timer_stop(timer);
		command_optimize__stop(timer->data, SIGPIPE, "stdout was closed");
	}
}

/* Stops the run at its next safe point on each of the stop signals and on a closed stdout. */
static void
command_optimize__watch(struct command_optimize__run *run, uv_loop_t *loop)
{
	struct sigaction action;
	size_t index;

	for (index = 0; index < OPTIMIZE_STOP_SIGNAL_COUNT; index++) {
		int number = command_optimize__stop_signals[index].number;

		uv_signal_init(loop, &run->signals[index]);
		run->signals[index].data = run;
		/* nohup ignores SIGHUP so that the run outlives the terminal: it stays ignored. */
		if (number == SIGHUP && sigaction(number, NULL, &action) == 0 &&
		    action.sa_handler == SIG_IGN)
			continue;
		uv_signal_start(&run->signals[index], command_optimize__signalled, number);
	}
	uv_timer_init(loop, &run->stdout_check);
	run->stdout_check.data = run;
	uv_timer_start(&run->stdout_check, command_optimize__check_stdout, OPTIMIZE_STDOUT_CHECK_MS,
		       OPTIMIZE_STDOUT_CHECK_MS);
}

/* Reads the config file, then the flags, then the environment, as config.h orders them. */
static int
command_optimize__configure(struct kagent_config *config, const char *config_path,
			    char **flag_values, char **cause)
{
	char *default_path = NULL;
	size_t index;
	int status = 0;

	if (config_path == NULL)
		config_path = default_path = kagent_config_default_path();
	if (config_path != NULL &&
	    (status = kagent_config_load_file(config, config_path, cause)) < 0)
		goto out;
	for (index = OPTIMIZE_OPTION_FIRST_KEY; index < OPTIMIZE_OPTION_COUNT; index++) {
		if (flag_values[index] == NULL)
			continue;
		status = kagent_config_set(config, command_optimize__options[index].config_key,
					   flag_values[index], cause);
		if (status < 0) {
			char *with_flag = kagent_asprintf(
			    "--%s: %s", command_optimize__options[index].name, *cause);

			free(*cause);
			*cause = with_flag;
			goto out;
		}
	}
	kagent_config_apply_environment(config);
	status = kagent_config_validate(config, cause);
out:
	free(default_path);
	return status;
}

/* The GPU is checked before the first token is spent: without one no candidate can run. */
static int
command_optimize__check_gpu(const struct kagent_config *config, struct kagent_gpu_info *gpu,
			    char **cause)
{
	char *detail = NULL;

	if (strcmp(config->evaluation.device, "cuda") != 0)
		return 0;
	if (kagent_cuda_driver_probe(gpu, config->evaluation.gpu_index, &detail) < 0) {
		*cause = kagent_asprintf("no GPU to evaluate candidates on: %s (nothing was sent "
					 "to the model); to evaluate on the CPU instead, add "
					 "--device cpu",
					 detail);
		free(detail);
		return -1;
	}
	return 0;
}

static void
command_optimize__print_final(const json_t *final, FILE *stream)
{
	const char *path = json_string_value(json_object_get(final, "path"));
	const json_t *generalisation =
	    json_object_get(json_object_get(final, "confirmation"), "generalisation");

	if (path != NULL) {
		fprintf(stream, "best kernel: %s\n", path);
		/* The same variant shows several speedups above; say why they differ. */
		fprintf(stream,
			"speedups: each line timed the variant anew: 'evaluate' when the "
			"model tried it, 'confirm' on unseen seeds before it became the best, "
			"'final' on other unseen seeds in a fresh worker; they differ by timing "
			"noise, large on a CPU\n");
	} else
		fprintf(stream, "no correct variant was confirmed\n");
	if (json_is_false(json_object_get(generalisation, "generalises")) &&
	    json_is_string(json_object_get(generalisation, "reason")))
		fprintf(stream, "does not generalise: %s\n",
			json_string_value(json_object_get(generalisation, "reason")));
	fprintf(stream, "trace: %s\nworktree: %s\n",
		json_string_value(json_object_get(final, "trace")),
		json_string_value(json_object_get(final, "worktree")));
}

static int
command_optimize__handler(int argc, char **argv)
{
	char *flag_values[OPTIMIZE_OPTION_COUNT] = {0};
	const char *config_path = NULL, *resume = NULL;
	struct kagent_command_parser parser;
	struct kagent_config config;
	struct kagent_gpu_info gpu = {0};
	struct kagent_http_client *http = NULL;
	struct kagent_terminal_view_options view_options = {0};
	struct command_optimize__run run = {.exit_status = KAGENT_COMMAND_EXIT_ERROR};
	struct kagent_session_options session_options = {0};
	uv_loop_t loop;
	char *error = NULL;
	int json = 0, option, status = KAGENT_COMMAND_EXIT_ERROR, loop_open = 0;

	kagent_config_init(&config);
	/* A closed stdout must not kill the run before it stops its workers (check_stdout). */
	signal(SIGPIPE, SIG_IGN);
	/* --json decides how errors are printed, so look for it before parsing anything else. */
	for (option = 1; option < argc; option++)
		json = json || strcmp(argv[option], "--json") == 0;
	kagent_command_parser_init(&parser, &kagent_command_optimize);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case OPTIMIZE_OPTION_CONFIG:
			config_path = optarg;
			break;
		case OPTIMIZE_OPTION_RESUME:
			resume = optarg;
			break;
		case OPTIMIZE_OPTION_JSON:
			break;
		case OPTIMIZE_OPTION_VERBOSE:
			view_options.verbose = 1;
			break;
		case KAGENT_COMMAND_HELP:
			kagent_command_print_help(&kagent_command_optimize, stdout);
			status = 0;
			goto out;
		case KAGENT_COMMAND_MISSING_VALUE:
		case KAGENT_COMMAND_UNKNOWN:
			error =
			    kagent_asprintf(option == KAGENT_COMMAND_UNKNOWN ? "unknown option %s"
									     : "%s needs a value",
					    argv[optind - 1]);
			status =
			    kagent_command_fail(&kagent_command_optimize, json, "usage", error);
			kagent_command_print_usage(&kagent_command_optimize);
			goto out;
		default:
			flag_values[option] = optarg;
		}
	}
	if (argc - optind != 1) {
		status = kagent_command_fail(&kagent_command_optimize, json, "usage",
					     "give exactly one problem file");
		kagent_command_print_usage(&kagent_command_optimize);
		goto out;
	}
	if (command_optimize__configure(&config, config_path, flag_values, &error) < 0) {
		status = kagent_command_fail(&kagent_command_optimize, json, "config", error);
		goto out;
	}
	if (command_optimize__check_gpu(&config, &gpu, &error) < 0) {
		status = kagent_command_fail(&kagent_command_optimize, json, "no_gpu", error);
		goto out;
	}
	uv_loop_init(&loop);
	loop_open = 1;
	if (kagent_http_client_create(&loop, &http, &error) < 0) {
		status = kagent_command_fail(&kagent_command_optimize, json, "http", error);
		goto out;
	}
	/* With --json, stdout carries one JSON object; the person watching reads stderr. */
	view_options.live = !json;
	run.view = kagent_terminal_view_create(json ? stderr : stdout, &view_options);
	session_options = (struct kagent_session_options){
	    .loop = &loop,
	    .http = http,
	    .config = &config,
	    .problem_path = argv[optind],
	    .run_id = resume,
	    .resume = resume != NULL,
	    .gpu_name = gpu.name[0] != '\0' ? gpu.name : NULL,
	    /* This binary, whatever its path: `kagent worker` is one of its commands. */
	    .worker_executable = "/proc/self/exe",
	    .observer = command_optimize__observe,
	    .done = command_optimize__done,
	    .data = &run,
	};
	if (kagent_session_create(&session_options, &run.session, &error) < 0) {
		status = kagent_command_fail(&kagent_command_optimize, json, "session", error);
		goto out;
	}
	command_optimize__watch(&run, &loop);
	kagent_session_start(run.session);
	uv_run(&loop, UV_RUN_DEFAULT);
	kagent_terminal_view_finish(run.view);
	status = run.exit_status;
	if (run.refusal != NULL) {
		kagent_command_fail(&kagent_command_optimize, json, "problem", run.refusal);
	} else if (run.final == NULL) {
		kagent_command_fail(&kagent_command_optimize, json, "session",
				    "the run ended without a summary");
	} else {
		if (json) {
			json_dumpf(run.final, stdout, JSON_COMPACT);
			fputc('\n', stdout);
		} else {
			command_optimize__print_final(run.final, stdout);
		}
	}
out:
	if (run.session != NULL)
		kagent_session_free(run.session);
	if (http != NULL)
		kagent_http_client_free(http);
	if (loop_open) {
		uv_run(&loop, UV_RUN_DEFAULT);
		if (uv_loop_close(&loop) != 0)
			fprintf(stderr, "kagent optimize: a handle was left open\n");
	}
	if (run.view != NULL)
		kagent_terminal_view_free(run.view);
	json_decref(run.final);
	free(run.refusal);
	kagent_config_clear(&config);
	free(error);
	return status;
}

const struct kagent_command kagent_command_optimize = {
    .name = "optimize",
    .operands = "PROBLEM.py",
    .help = "let a model write faster kernels for a PyTorch problem, verified by kagent eval",
    .options = command_optimize__options,
    .handler = command_optimize__handler,
};
