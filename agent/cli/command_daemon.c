/*
 * `kagent daemon`: kagentd in the foreground (docs/daemon.md). Reads its options, the token
 * and the GPUs, then hands over to kagent_daemon_run (agent/daemon/daemon.c), which serves the
 * API and runs the queued sessions until SIGTERM or SIGINT. Logs go to stderr, one line per
 * event, for journald (config/kagentd.service).
 */
#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/cli/command.h"
#include "kagent/cuda/cuda_driver.h"
#include "kagent/daemon/daemon.h"
#include "kagent/daemon/daemon_routes.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/records/config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A token file is a line, not a document. */
#define DAEMON_TOKEN_CAP 4096
/* Sessions per slot (GPU) when --max-sessions is not given: one's model turn overlaps the
 * other's evaluation. */
#define DAEMON_SESSIONS_PER_SLOT 2
#define DAEMON_GPU_CAP 64
/* Evaluation lanes per GPU when --evaluation-lanes is not given (docs/reward-service.md): four
 * candidates load, compile and run their trials while one is timed; on the CPU two. */
#define DAEMON_EVALUATION_LANES_GPU 4
#define DAEMON_EVALUATION_LANES_CPU 2

enum {
	DAEMON_OPTION_SOCKET,
	DAEMON_OPTION_LISTEN,
	DAEMON_OPTION_TOKEN_FILE,
	DAEMON_OPTION_STORE,
	DAEMON_OPTION_DEVICE,
	DAEMON_OPTION_GPUS,
	DAEMON_OPTION_MAX_SESSIONS,
	DAEMON_OPTION_CONFIG,
	DAEMON_OPTION_EVALUATION_LANES,
	DAEMON_OPTION_LEASE,
	DAEMON_OPTION_PREPARE_CANDIDATES,
};

/* clang-format off */
static const struct kagent_command_option command_daemon__options[] = {
	[DAEMON_OPTION_SOCKET] = {"socket", 0, "PATH", "the Unix socket to serve the API on",
		"$KAGENT_DAEMON_SOCKET, else $XDG_RUNTIME_DIR/kagent/kagentd.sock, else "
		"/tmp/kagent-$UID/kagentd.sock", NULL},
	[DAEMON_OPTION_LISTEN] = {"listen", 0, "HOST:PORT",
		"also serve TCP there, behind the bearer token of --token-file", NULL, NULL},
	[DAEMON_OPTION_TOKEN_FILE] = {"token-file", 0, "FILE",
		"the bearer token (16 characters or more) TCP clients must send", NULL, NULL},
	[DAEMON_OPTION_STORE] = {"store", 0, "URL",
		"the store of batches and sessions: sqlite:PATH, or postgresql://... for a queue "
		"shared by several machines",
		"$KAGENT_STORE, else sqlite:$XDG_STATE_HOME/kagent/kagent.db, else "
		"sqlite:~/.local/state/kagent/kagent.db", NULL},
	[DAEMON_OPTION_DEVICE] = {"device", 0, "cuda|cpu", "where candidates run", "cuda", NULL},
	[DAEMON_OPTION_GPUS] = {"gpus", 0, "0,1,...", "the GPUs to run sessions on",
		"every GPU the driver shows", NULL},
	[DAEMON_OPTION_MAX_SESSIONS] = {"max-sessions", 0, "N", "sessions running at once at most",
		"2 per GPU; 2 on the CPU", NULL},
	[DAEMON_OPTION_CONFIG] = {"config", 0, "FILE",
		"the config file, as kagent optimize reads it (SIGHUP reloads it)",
		"$KAGENT_CONFIG, else ./kagent.yaml", NULL},
	[DAEMON_OPTION_EVALUATION_LANES] = {"evaluation-lanes", 0, "N",
		"evaluations of POST /v1/evaluations at once per GPU, 1 to 64, each with a warm "
		"worker; their timed calls never overlap", "4 per GPU; 2 on the CPU", NULL},
	[DAEMON_OPTION_LEASE] = {"lease", 0, "SECONDS",
		"how long a claimed session stays this daemon's without a heartbeat; after that "
		"another daemon takes it over", "30", NULL},
	[DAEMON_OPTION_PREPARE_CANDIDATES] = {"prepare-candidates", 0, NULL,
		"each lane's worker makes the next candidate's sandboxed process, CUDA context "
		"included, during the current evaluation (one more context per lane)",
		"a new process per evaluation, made when it comes", NULL},
	{0},
};
/* clang-format on */
#define DAEMON_OPTION_COUNT (sizeof command_daemon__options / sizeof command_daemon__options[0] - 1)

/* The token: the file's first line, without surrounding blanks. */
static int
command_daemon__read_token(const char *path, char **token_out, char **cause)
{
	char *data = NULL, *start, *end;
	size_t size;
	int status = kagent_fileio_read(path, DAEMON_TOKEN_CAP, &data, &size, cause);

	if (status < 0)
		return status;
	for (start = data; *start != '\0' && isspace((unsigned char)*start); start++)
		continue;
	for (end = start; *end != '\0' && *end != '\n' && *end != '\r'; end++)
		continue;
	while (end > start && isspace((unsigned char)end[-1]))
		end--;
	*token_out = kagent_strndup(start, (size_t)(end - start));
	free(data);
	return 0;
}

/* "0,2,3" into gpus; -1 on anything else. */
static int
command_daemon__parse_gpus(const char *text, int *gpus, size_t *count)
{
	const char *at = text;
	char *end;

	*count = 0;
	while (*at != '\0') {
		long value = strtol(at, &end, 10);

		if (end == at || value < 0 || value > 1023 || *count == DAEMON_GPU_CAP ||
		    (*end != ',' && *end != '\0'))
			return -1;
		gpus[(*count)++] = (int)value;
		at = *end == ',' ? end + 1 : end;
	}
	return *count > 0 ? 0 : -1;
}

/* The GPUs asked for (or all the driver shows), each probed: a daemon that cannot evaluate
 * should say so at start, not in every session. */
static int
command_daemon__probe_gpus(const char *asked, int *gpus, size_t *count, char *name,
			   size_t name_size, char **cause)
{
	struct kagent_gpu_info info;
	char *detail = NULL;

	if (kagent_cuda_driver_probe(&info, 0, &detail) < 0) {
		*cause = kagent_asprintf("no GPU to evaluate candidates on: %s; to evaluate on the "
					 "CPU instead, add --device cpu",
					 detail);
		free(detail);
		return -1;
	}
	snprintf(name, name_size, "%s", info.name);
	if (asked == NULL) {
		*count = 0;
		for (int index = 0; index < info.device_count && index < DAEMON_GPU_CAP; index++)
			gpus[(*count)++] = index;
		return 0;
	}
	if (command_daemon__parse_gpus(asked, gpus, count) < 0) {
		*cause =
		    kagent_asprintf("--gpus: expected GPU indexes such as 0,1, got '%s'", asked);
		return -1;
	}
	for (size_t index = 0; index < *count; index++) {
		if (gpus[index] >= info.device_count) {
			*cause = kagent_asprintf("--gpus: there is no GPU %d (the driver shows %d)",
						 gpus[index], info.device_count);
			return -1;
		}
	}
	return 0;
}

static int
command_daemon__handler(int argc, char **argv)
{
	const char *values[DAEMON_OPTION_COUNT] = {0};
	struct kagent_command_parser parser;
	struct kagent_daemon_options options = {0};
	char *socket_path = NULL, *store_url = NULL, *token = NULL, *config_path = NULL;
	char *error = NULL, *end, gpu_name[256] = "";
	int gpus[DAEMON_GPU_CAP], option, status = KAGENT_COMMAND_EXIT_ERROR;
	size_t gpu_count = 0;
	long max_sessions = 0, lanes = 0;
	double lease = 0;

	kagent_command_parser_init(&parser, &kagent_command_daemon);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case KAGENT_COMMAND_HELP:
			kagent_command_print_help(&kagent_command_daemon, stdout);
			status = 0;
			goto out;
		case KAGENT_COMMAND_MISSING_VALUE:
		case KAGENT_COMMAND_UNKNOWN:
			error =
			    kagent_asprintf(option == KAGENT_COMMAND_UNKNOWN ? "unknown option %s"
									     : "%s needs a value",
					    argv[optind - 1]);
			status = kagent_command_fail(&kagent_command_daemon, 0, "usage", error);
			goto out;
		case DAEMON_OPTION_PREPARE_CANDIDATES:
			options.prepare_candidates = 1;
			break;
		default:
			values[option] = optarg;
		}
	}
	if (optind != argc) {
		status = kagent_command_fail(&kagent_command_daemon, 0, "usage",
					     "kagent daemon takes no operands");
		goto out;
	}
	options.device =
	    values[DAEMON_OPTION_DEVICE] != NULL ? values[DAEMON_OPTION_DEVICE] : "cuda";
	if (strcmp(options.device, "cuda") != 0 && strcmp(options.device, "cpu") != 0) {
		status = kagent_command_fail(&kagent_command_daemon, 0, "usage",
					     "--device: expected cuda or cpu");
		goto out;
	}
	if (values[DAEMON_OPTION_LISTEN] != NULL && values[DAEMON_OPTION_TOKEN_FILE] == NULL) {
		status = kagent_command_fail(&kagent_command_daemon, 0, "usage",
					     "--listen needs --token-file FILE: TCP is served only "
					     "behind a bearer token");
		goto out;
	}
	if (values[DAEMON_OPTION_TOKEN_FILE] != NULL &&
	    command_daemon__read_token(values[DAEMON_OPTION_TOKEN_FILE], &token, &error) < 0) {
		status = kagent_command_fail(&kagent_command_daemon, 0, "token", error);
		goto out;
	}
	if (values[DAEMON_OPTION_MAX_SESSIONS] != NULL) {
		max_sessions = strtol(values[DAEMON_OPTION_MAX_SESSIONS], &end, 10);
		if (*end != '\0' || end == values[DAEMON_OPTION_MAX_SESSIONS] || max_sessions < 1 ||
		    max_sessions > 4096) {
			status = kagent_command_fail(&kagent_command_daemon, 0, "usage",
						     "--max-sessions: expected a number from 1");
			goto out;
		}
	}
	if (values[DAEMON_OPTION_EVALUATION_LANES] != NULL) {
		lanes = strtol(values[DAEMON_OPTION_EVALUATION_LANES], &end, 10);
		if (*end != '\0' || end == values[DAEMON_OPTION_EVALUATION_LANES] || lanes < 1 ||
		    lanes > KAGENT_EVALUATION_LANE_CAP) {
			status = kagent_command_fail(&kagent_command_daemon, 0, "usage",
						     "--evaluation-lanes: expected 1 to 64");
			goto out;
		}
	}
	if (values[DAEMON_OPTION_LEASE] != NULL) {
		lease = strtod(values[DAEMON_OPTION_LEASE], &end);
		if (*end != '\0' || end == values[DAEMON_OPTION_LEASE] || !(lease >= 1) ||
		    lease > 86400) {
			status = kagent_command_fail(&kagent_command_daemon, 0, "usage",
						     "--lease: expected 1 to 86400 seconds");
			goto out;
		}
	}
	if (strcmp(options.device, "cuda") == 0) {
		if (command_daemon__probe_gpus(values[DAEMON_OPTION_GPUS], gpus, &gpu_count,
					       gpu_name, sizeof gpu_name, &error) < 0) {
			status = kagent_command_fail(&kagent_command_daemon, 0, "no_gpu", error);
			goto out;
		}
	} else if (values[DAEMON_OPTION_GPUS] != NULL) {
		status = kagent_command_fail(&kagent_command_daemon, 0, "usage",
					     "--gpus goes with --device cuda");
		goto out;
	}
	if (values[DAEMON_OPTION_SOCKET] != NULL)
		socket_path = kagent_strdup(values[DAEMON_OPTION_SOCKET]);
	else
		kagent_paths_daemon_socket(&socket_path, &error);
	if (values[DAEMON_OPTION_STORE] != NULL)
		store_url = kagent_strdup(values[DAEMON_OPTION_STORE]);
	else
		kagent_paths_store_url(&store_url, NULL);
	config_path = values[DAEMON_OPTION_CONFIG] != NULL
			  ? kagent_strdup(values[DAEMON_OPTION_CONFIG])
			  : kagent_config_default_path();
	options.socket_path = socket_path;
	options.tcp_address = values[DAEMON_OPTION_LISTEN];
	options.token = token;
	options.store_url = store_url;
	options.lease_seconds = lease;
	options.gpus = gpus;
	options.gpu_count = gpu_count;
	options.gpu_name = gpu_name[0] != '\0' ? gpu_name : NULL;
	options.max_sessions =
	    max_sessions > 0 ? (int)max_sessions
			     : DAEMON_SESSIONS_PER_SLOT * (gpu_count > 0 ? (int)gpu_count : 1);
	options.evaluation_lanes = lanes > 0 ? (int)lanes
				   : strcmp(options.device, "cpu") == 0
				       ? DAEMON_EVALUATION_LANES_CPU
				       : DAEMON_EVALUATION_LANES_GPU;
	options.config_path = config_path;
	options.routes = kagent_daemon_routes;
	/* This binary, whatever its path: `kagent worker` is one of its commands. */
	options.worker_executable = "/proc/self/exe";
	if (kagent_daemon_run(&options, &error) < 0) {
		status = kagent_command_fail(&kagent_command_daemon, 0, "daemon", error);
		goto out;
	}
	status = 0;
out:
	free(socket_path);
	free(store_url);
	free(config_path);
	free(token);
	free(error);
	return status;
}

const struct kagent_command kagent_command_daemon = {
    .name = "daemon",
    .operands = NULL,
    .help = "run kagentd: the batch queue and its sessions, served over an HTTP API",
    .options = command_daemon__options,
    .handler = command_daemon__handler,
};
