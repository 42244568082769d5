/*
 * `kagent optimize PROBLEM.py`: the main job. Reads the config (file, SDK
 * environment variables, flags), checks the endpoint settings and the GPU
 * before any token is spent, then runs one session on a libuv loop with the
 * terminal view attached, and prints the final summary (or one JSON object
 * with --json). Ctrl-C stops the run at the next safe point; --resume RUN-ID
 * continues it later.
 */
#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/records/config.h"
#include "kagent/cuda/cuda_driver.h"
#include "kagent/llm/http_client.h"
#include "kagent/session/session.h"
#include "kagent/cli/terminal_view.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OPTIMIZE_EXIT_NOT_REACHED 1
#define OPTIMIZE_EXIT_ERROR 2

/* Flags that set one config key each: one table serves parsing and the usage text. */
struct command_optimize__flag {
	const char *name;
	const char *config_key;
};

/* clang-format off */
static const struct command_optimize__flag command_optimize__flags[] = {
	{"base-url", "provider.base_url"},
	{"model", "provider.model"},
	{"api", "provider.api"},
	{"target", "target.speedup"},
	{"against", "target.baseline"},
	{"max-turns", "budget.max_turns"},
	{"max-tokens", "budget.max_tokens"},
	{"max-cost", "budget.max_cost"},
	{"max-seconds", "budget.max_wall_seconds"},
	{"max-gpu-seconds", "budget.max_gpu_seconds"},
	{"device", "evaluation.device"},
	{"gpu", "evaluation.gpu"},
	{"worker", "evaluation.worker_socket"},
	{"output", "output_directory"},
	{"prompts", "prompts_directory"},
};
/* clang-format on */
#define OPTIMIZE_FLAG_COUNT (sizeof command_optimize__flags / sizeof command_optimize__flags[0])

enum {
	OPTIMIZE_OPTION_CONFIG = 256,
	OPTIMIZE_OPTION_RESUME,
	OPTIMIZE_OPTION_JSON,
	OPTIMIZE_OPTION_VERBOSE,
	OPTIMIZE_OPTION_HELP,
	OPTIMIZE_OPTION_FLAG, /* + index into command_optimize__flags */
};

struct command_optimize__run {
	struct kagent_terminal_view *view;
	struct kagent_session *session;
	uv_signal_t interrupt;
	json_t *final;
	int exit_status;
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

	run->final = json_incref((json_t *)summary);
	if (reason != NULL &&
	    (strcmp(reason, "llm_error") == 0 || strcmp(reason, "evaluator_error") == 0)) {
		/* The live view shortens lines; the reason to act on is printed whole. */
		fprintf(stderr, "kagent optimize: %s\n",
			json_string_value(json_object_get(summary, "stop_detail")));
		run->exit_status = OPTIMIZE_EXIT_ERROR;
	} else if (status == 0 && json_is_true(json_object_get(summary, "target_reached")))
		run->exit_status = 0;
	else if (status == 0 && kagent_session_config(session)->target.speedup <= 0)
		run->exit_status = 0;
	else
		run->exit_status = OPTIMIZE_EXIT_NOT_REACHED;
	uv_close((uv_handle_t *)&run->interrupt, NULL);
}

static void
command_optimize__interrupted(uv_signal_t *handle, int signal_number)
{
	struct command_optimize__run *run = handle->data;

	fprintf(stderr,
		"\nkagent optimize: stopping after the current step (the run can be "
		"resumed with --resume %s)\n",
		kagent_session_run_id(run->session));
	kagent_session_interrupt(run->session);
}

static int
command_optimize__fail(const char *message)
{
	fprintf(stderr, "kagent optimize: %s\n", message);
	return OPTIMIZE_EXIT_ERROR;
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
	for (index = 0; index < OPTIMIZE_FLAG_COUNT; index++) {
		if (flag_values[index] == NULL)
			continue;
		status = kagent_config_set(config, command_optimize__flags[index].config_key,
					   flag_values[index], cause);
		if (status < 0) {
			char *with_flag = kagent_asprintf(
			    "--%s: %s", command_optimize__flags[index].name, *cause);

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
					 "to the model)",
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

	if (path != NULL)
		fprintf(stream, "best kernel: %s\n", path);
	else
		fprintf(stream, "no correct variant was confirmed\n");
	fprintf(stream, "trace: %s\nworktree: %s\n",
		json_string_value(json_object_get(final, "trace")),
		json_string_value(json_object_get(final, "worktree")));
}

static int
command_optimize__handler(int argc, char **argv)
{
	struct option long_options[OPTIMIZE_FLAG_COUNT + 6];
	char *flag_values[OPTIMIZE_FLAG_COUNT] = {0};
	const char *config_path = NULL, *resume = NULL;
	struct kagent_config config;
	struct kagent_gpu_info gpu = {0};
	struct kagent_http_client *http = NULL;
	struct kagent_terminal_view_options view_options = {0};
	struct command_optimize__run run = {.exit_status = OPTIMIZE_EXIT_ERROR};
	struct kagent_session_options session_options = {0};
	uv_loop_t loop;
	char *error = NULL;
	int json = 0, option, status = OPTIMIZE_EXIT_ERROR, loop_open = 0;
	size_t index;

	for (index = 0; index < OPTIMIZE_FLAG_COUNT; index++)
		long_options[index] =
		    (struct option){command_optimize__flags[index].name, required_argument, NULL,
				    OPTIMIZE_OPTION_FLAG + (int)index};
	long_options[index++] =
	    (struct option){"config", required_argument, NULL, OPTIMIZE_OPTION_CONFIG};
	long_options[index++] =
	    (struct option){"resume", required_argument, NULL, OPTIMIZE_OPTION_RESUME};
	long_options[index++] = (struct option){"json", no_argument, NULL, OPTIMIZE_OPTION_JSON};
	long_options[index++] =
	    (struct option){"verbose", no_argument, NULL, OPTIMIZE_OPTION_VERBOSE};
	long_options[index++] = (struct option){"help", no_argument, NULL, OPTIMIZE_OPTION_HELP};
	long_options[index] = (struct option){NULL, 0, NULL, 0};

	kagent_config_init(&config);
	optind = 1;
	opterr = 0;
	while ((option = getopt_long(argc, argv, ":", long_options, NULL)) != -1) {
		switch (option) {
		case OPTIMIZE_OPTION_CONFIG:
			config_path = optarg;
			break;
		case OPTIMIZE_OPTION_RESUME:
			resume = optarg;
			break;
		case OPTIMIZE_OPTION_JSON:
			json = 1;
			break;
		case OPTIMIZE_OPTION_VERBOSE:
			view_options.verbose = 1;
			break;
		case OPTIMIZE_OPTION_HELP:
			kagent_command_print_usage(&kagent_command_optimize);
			status = 0;
			goto out;
		case ':':
			status = command_optimize__fail("an option is missing its value");
			goto out;
		case '?':
			error = kagent_asprintf("unknown option %s", argv[optind - 1]);
			status = command_optimize__fail(error);
			kagent_command_print_usage(&kagent_command_optimize);
			goto out;
		default:
			flag_values[option - OPTIMIZE_OPTION_FLAG] = optarg;
		}
	}
	if (argc - optind != 1) {
		status = command_optimize__fail("give exactly one problem file");
		kagent_command_print_usage(&kagent_command_optimize);
		goto out;
	}
	if (command_optimize__configure(&config, config_path, flag_values, &error) < 0 ||
	    command_optimize__check_gpu(&config, &gpu, &error) < 0) {
		status = command_optimize__fail(error);
		goto out;
	}
	uv_loop_init(&loop);
	loop_open = 1;
	if (kagent_http_client_create(&loop, &http, &error) < 0) {
		status = command_optimize__fail(error);
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
		status = command_optimize__fail(error);
		goto out;
	}
	uv_signal_init(&loop, &run.interrupt);
	run.interrupt.data = &run;
	uv_signal_start(&run.interrupt, command_optimize__interrupted, SIGINT);
	kagent_session_start(run.session);
	uv_run(&loop, UV_RUN_DEFAULT);
	kagent_terminal_view_finish(run.view);
	status = run.exit_status;
	if (run.final != NULL) {
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
	kagent_config_clear(&config);
	free(error);
	return status;
}

const struct kagent_command kagent_command_optimize = {
    .name = "optimize",
    .usage = "PROBLEM.py [--config FILE] [--base-url URL] [--model NAME] "
	     "[--api chat_completions|responses|anthropic] [--target SPEEDUP] "
	     "[--against eager|compile|best] [--max-turns N] [--max-tokens N] [--max-cost USD] "
	     "[--max-seconds S] [--max-gpu-seconds S] [--device cuda|cpu] [--gpu N] "
	     "[--worker SOCKET] [--output DIR] [--prompts DIR] [--resume RUN-ID] [--json] "
	     "[--verbose]",
    .help = "let a model write faster kernels for a PyTorch problem, verified by kagent eval",
    .handler = command_optimize__handler,
};
