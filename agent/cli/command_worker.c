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
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
command_worker__handler(int argc, char **argv)
{
	static const struct option long_options[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"gpu", required_argument, NULL, 'g'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	char *socket_path = NULL, *folder = NULL, *python = NULL, *runner = NULL;
	char *python_path = NULL, *cause = NULL, *slash, *end;
	const char *old_path = getenv("PYTHONPATH");
	int option, status = 2;
	long gpu = -1;

	optind = 1;
	opterr = 0;
	while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (option) {
		case 's':
			free(socket_path);
			socket_path = kagent_strdup(optarg);
			break;
		case 'g':
			gpu = strtol(optarg, &end, 10);
			if (*end != '\0' || gpu < 0) {
				kagent_command_print_usage(&kagent_command_worker);
				goto out;
			}
			break;
		case 'h':
			kagent_command_print_usage(&kagent_command_worker);
			status = 0;
			goto out;
		default:
			fprintf(stderr, "kagent worker: unknown option\n");
			kagent_command_print_usage(&kagent_command_worker);
			goto out;
		}
	}
	if (optind != argc) {
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
    .usage = "[--socket PATH] [--gpu N]",
    .help = "run a warm evaluation worker on a Unix socket until killed",
    .handler = command_worker__handler,
};
