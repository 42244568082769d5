/*
 * `kagent worker`: runs the Python worker in socket mode in the foreground, so that
 * later `kagent eval` calls skip importing torch. It execs Python: the worker's
 * signals and exit status are the command's own.
 */
#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	COMMAND_WORKER_SOCKET,
	COMMAND_WORKER_GPU,
};

/* clang-format off */
static const struct kagent_command_option command_worker__options[] = {
	[COMMAND_WORKER_SOCKET] = {"socket", 0, "PATH", "the Unix socket to serve on",
		"$KAGENT_WORKER_SOCKET, else one in $XDG_RUNTIME_DIR", NULL},
	[COMMAND_WORKER_GPU] = {"gpu", 0, "N", "the only GPU the worker sees (as device 0)",
		"all of them", NULL},
	{0},
};
/* clang-format on */

static int
command_worker__handler(int argc, char **argv)
{
	struct kagent_command_parser parser;
	char *socket_path = NULL, *folder = NULL, *python = NULL, *runner = NULL;
	char *python_path = NULL, *cause = NULL, *slash, *end;
	const char *old_path = getenv("PYTHONPATH");
	int option, status = 2;
	long gpu = -1;

	kagent_command_parser_init(&parser, &kagent_command_worker);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case COMMAND_WORKER_SOCKET:
			free(socket_path);
			socket_path = kagent_strdup(optarg);
			break;
		case COMMAND_WORKER_GPU:
			gpu = strtol(optarg, &end, 10);
			if (*end != '\0' || end == optarg || gpu < 0) {
				fprintf(stderr, "kagent worker: --gpu needs a GPU index\n");
				kagent_command_print_usage(&kagent_command_worker);
				goto out;
			}
			break;
		case KAGENT_COMMAND_HELP:
			kagent_command_print_help(&kagent_command_worker, stdout);
			status = 0;
			goto out;
		default:
			fprintf(stderr, "kagent worker: %s %s\n", argv[optind - 1],
				option == KAGENT_COMMAND_MISSING_VALUE
				    ? "needs a value"
				    : "is no option of kagent worker");
			kagent_command_print_usage(&kagent_command_worker);
			goto out;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "kagent worker: takes no operands\n");
		kagent_command_print_usage(&kagent_command_worker);
		goto out;
	}
	if (socket_path == NULL)
		kagent_paths_worker_socket(&socket_path, &cause);
	folder = kagent_strdup(socket_path);
	slash = strrchr(folder, '/');
	if (slash != NULL && slash != folder) {
		*slash = '\0';
		/* The socket lets anyone who can reach it run code: keep its folder private. */
		if (kagent_fileio_make_directories(folder, 0700, &cause) != 0) {
			fprintf(stderr, "kagent worker: %s\n", cause);
			goto out;
		}
	}
	if (kagent_paths_python(&python, &cause) != 0 ||
	    kagent_paths_runner_dir(&runner, &cause) != 0) {
		fprintf(stderr, "kagent worker: %s\n", cause);
		goto out;
	}
	python_path = old_path != NULL && old_path[0] != '\0'
			  ? kagent_asprintf("%s:%s", runner, old_path)
			  : kagent_strdup(runner);
	setenv("PYTHONPATH", python_path, 1);
	setenv("PYTHONUNBUFFERED", "1", 1);
	if (gpu >= 0) {
		char number[32];

		/* The worker serves one GPU; it sees it as device 0. */
		snprintf(number, sizeof number, "%ld", gpu);
		setenv("CUDA_VISIBLE_DEVICES", number, 1);
	}
	fprintf(stderr, "kagent worker: serving on %s\n", socket_path);
	execlp(python, python, "-m", "kagent_runner.worker", "--socket", socket_path, (char *)NULL);
	fprintf(stderr, "kagent worker: cannot run %s: %s\n", python, strerror(errno));
	status = errno == ENOENT ? 127 : 126;
out:
	free(cause);
	free(python_path);
	free(runner);
	free(python);
	free(folder);
	free(socket_path);
	return status;
}

const struct kagent_command kagent_command_worker = {
    .name = "worker",
    .help = "run a warm evaluation worker on a Unix socket until killed",
    .options = command_worker__options,
    .handler = command_worker__handler,
};
