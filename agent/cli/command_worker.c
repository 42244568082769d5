/*
 * `kagent worker`: runs the Python worker in socket mode in the foreground, so that
 * later `kagent eval` calls skip importing torch. It execs Python: the worker's
 * signals and exit status are the command's own. A socket path that would go wrong
 * there is refused first, with the fix; `kagent optimize` starts it with --parent,
 * so that it never outlives the run.
 */
#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/cuda/gpu_node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	COMMAND_WORKER_SOCKET,
	COMMAND_WORKER_GPU,
	COMMAND_WORKER_PARENT,
	COMMAND_WORKER_PREPARE_CANDIDATES,
};

/* clang-format off */
static const struct kagent_command_option command_worker__options[] = {
	[COMMAND_WORKER_SOCKET] = {"socket", 0, "PATH", "the Unix socket to serve on",
		"$KAGENT_WORKER_SOCKET, else one in $XDG_RUNTIME_DIR", NULL},
	[COMMAND_WORKER_GPU] = {"gpu", 0, "N", "the only GPU the worker sees (as device 0)",
		"all of them", NULL},
	[COMMAND_WORKER_PARENT] = {"parent", 0, "PID", "stop when process PID, which started the "
		"worker, ends (kagent optimize passes its own)", "run until killed", NULL},
	[COMMAND_WORKER_PREPARE_CANDIDATES] = {"prepare-candidates", 0, NULL, "make each "
		"evaluation's sandboxed candidate process, CUDA context included, during the "
		"evaluation before (for a worker that serves many; holds one more context)",
		"a new process per evaluation, made when it comes", NULL},
	{0},
};
/* clang-format on */

/* The value of --gpu (least 0) or --parent (least 1); else -1, after saying what is wrong. */
static long
command_worker__number(const char *text, long least, const char *problem)
{
	char *end;
	long value = strtol(text, &end, 10);

	if (*end == '\0' && end != text && value >= least)
		return value;
	fprintf(stderr, "kagent worker: %s\n", problem);
	kagent_command_print_usage(&kagent_command_worker);
	return -1;
}

/*
 * Refuses a socket path that would go wrong in the worker: a folder, a file that is not a
 * socket (the worker would replace it), a socket another worker serves on, or a folder that
 * does not exist. Only kagent's own folder is created, never one the user named.
 */
static int
command_worker__check_socket(const char *path, char **cause)
{
	char *folder = kagent_strdup(path), *own = NULL, *slash = strrchr(folder, '/');
	struct stat info;
	int status = 0;

	if (lstat(path, &info) == 0) {
		if (S_ISDIR(info.st_mode)) {
			status = -EISDIR;
			*cause = kagent_asprintf("%s is a folder; name the socket inside it, "
						 "e.g. --socket %s/worker.sock",
						 path, path);
		} else if (!S_ISSOCK(info.st_mode)) {
			status = -EEXIST;
			*cause = kagent_asprintf("%s exists and is not a socket; remove it or "
						 "name another path",
						 path);
		} else if (kagent_paths_socket_listening(path)) {
			status = -EADDRINUSE;
			*cause = kagent_asprintf("a worker already serves on %s; stop it first "
						 "or name another path",
						 path);
		}
		/* Else a dead worker's socket, which the worker replaces. */
		goto out;
	}
	if (slash == NULL)
		goto out;
	slash[slash == folder] = '\0'; /* "/w.sock" lies in "/" */
	kagent_paths_socket_dir(&own, cause);
	if (strcmp(folder, own) == 0) {
		/* The socket lets anyone who can reach it run code: keep its folder private. */
		status = kagent_fileio_make_directories(folder, 0700, cause);
	} else if (stat(folder, &info) != 0 || !S_ISDIR(info.st_mode)) {
		status = -ENOENT;
		*cause = kagent_asprintf("no folder %s for the socket %s; create it first "
					 "(mkdir -p %s) or name another path",
					 folder, path, folder);
	}
out:
	free(own);
	free(folder);
	return status;
}

/*
 * Names the worker's GPU to CUDA by its UUID, read from the driver's /proc folder, and tells
 * the runner its device node (KAGENT_WORKER_GPU_NODE): the sandbox lets the candidate open
 * that GPU's node only, and a UUID still names the GPU when the others cannot be opened,
 * where an index would count only the GPUs left (docs/sandbox.md, "Other GPUs of the host").
 * entry is an index in PCI order (nvidia-smi's, which CUDA_DEVICE_ORDER=PCI_BUS_ID makes
 * CUDA's too) or a UUID. Where the driver's folder says nothing (no GPU, a MIG instance),
 * or its /dev node is not that GPU's (a container's own numbering), CUDA gets the entry as it
 * is and the candidate may open every GPU's node, as before.
 */
static void
command_worker__name_gpu(const char *entry)
{
	struct kagent_gpu_node node;
	char *cause = NULL;

	setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
	if (kagent_gpu_node_find(KAGENT_GPU_NODE_PROC_DIRECTORY, entry, &node, &cause) == 0 &&
	    kagent_gpu_node_check("/dev", &node, &cause) == 0) {
		setenv("CUDA_VISIBLE_DEVICES", node.uuid, 1);
		setenv("KAGENT_WORKER_GPU_NODE", node.name, 1);
		return;
	}
	if (access(KAGENT_GPU_NODE_PROC_DIRECTORY, F_OK) == 0)
		fprintf(stderr,
			"kagent worker: GPU %s's device node is unknown (%s): its candidates may "
			"open every GPU's\n",
			entry, cause);
	free(cause);
	setenv("CUDA_VISIBLE_DEVICES", entry, 1);
	unsetenv("KAGENT_WORKER_GPU_NODE");
}

static int
command_worker__handler(int argc, char **argv)
{
	struct kagent_command_parser parser;
	char *socket_path = NULL, *python = NULL, *runner = NULL;
	char *python_path = NULL, *cause = NULL, *bytecode = NULL;
	const char *old_path = getenv("PYTHONPATH");
	int option, status = 2, prepare_candidates = 0;
	long gpu = -1, parent = -1;

	kagent_command_parser_init(&parser, &kagent_command_worker);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case COMMAND_WORKER_SOCKET:
			free(socket_path);
			socket_path = kagent_strdup(optarg);
			break;
		case COMMAND_WORKER_GPU:
			gpu = command_worker__number(optarg, 0, "--gpu needs a GPU index");
			if (gpu < 0)
				goto out;
			break;
		case COMMAND_WORKER_PARENT:
			parent = command_worker__number(optarg, 1, "--parent needs a process id");
			if (parent < 0)
				goto out;
			break;
		case COMMAND_WORKER_PREPARE_CANDIDATES:
			prepare_candidates = 1;
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
	if (command_worker__check_socket(socket_path, &cause) != 0 ||
	    kagent_paths_python(&python, &cause) != 0 ||
	    kagent_paths_runner_dir(&runner, &cause) != 0) {
		fprintf(stderr, "kagent worker: %s\n", cause);
		goto out;
	}
	if (parent > 0) {
		/* Ends with the process that started it, even one killed with kill -9; SIGTERM lets
		 * the worker end its candidates' processes and remove its socket. The setting
		 * survives exec; the parent may have died before it took effect. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != (pid_t)parent) {
			fprintf(stderr, "kagent worker: process %ld, which started it, is gone\n",
				parent);
			status = 1;
			goto out;
		}
	}
	python_path = old_path != NULL && old_path[0] != '\0'
			  ? kagent_asprintf("%s:%s", runner, old_path)
			  : kagent_strdup(runner);
	setenv("PYTHONPATH", python_path, 1);
	setenv("PYTHONUNBUFFERED", "1", 1);
	/* Without it the worker only goes without a bytecode cache (bytecode.py). */
	if (kagent_paths_bytecode_dir(&bytecode, NULL) == 0)
		setenv("KAGENT_BYTECODE_DIR", bytecode, 1);
	if (gpu >= 0) {
		const char *visible = getenv("CUDA_VISIBLE_DEVICES");
		char number[32], *list = NULL, *entry = NULL, *rest = NULL;

		/* The worker serves one GPU; it sees it as device 0. GPU numbers count the
		 * devices this process sees: under a CUDA_VISIBLE_DEVICES of its own (a Slurm
		 * job's, docs/deploy.md) number N is that list's Nth entry, not physical N. */
		snprintf(number, sizeof number, "%ld", gpu);
		if (visible != NULL && visible[0] != '\0') {
			list = kagent_strdup(visible);
			entry = strtok_r(list, ",", &rest);
			for (long index = 0; entry != NULL && index < gpu; index++)
				entry = strtok_r(NULL, ",", &rest);
		}
		command_worker__name_gpu(entry != NULL ? entry : number);
		/* Requests still name GPU N (its timing lock, sandbox uid and timing window are
		 * N's): the runner maps N to its device 0 and refuses any other (worker.py). */
		setenv("KAGENT_WORKER_GPU", number, 1);
		free(list);
	}
	/* The runner reads it (worker.py, prepared.py). */
	if (prepare_candidates)
		setenv("KAGENT_WORKER_PREPARE", "1", 1);
	else
		unsetenv("KAGENT_WORKER_PREPARE");
	fprintf(stderr, "kagent worker: serving on %s\n", socket_path);
	execlp(python, python, "-m", "kagent_runner.worker", "--socket", socket_path, (char *)NULL);
	fprintf(stderr, "kagent worker: cannot run %s: %s\n", python, strerror(errno));
	status = errno == ENOENT ? 127 : 126;
out:
	free(cause);
	free(bytecode);
	free(python_path);
	free(runner);
	free(python);
	free(socket_path);
	return status;
}

const struct kagent_command kagent_command_worker = {
    .name = "worker",
    .help = "run a warm evaluation worker on a Unix socket until killed",
    .options = command_worker__options,
    .handler = command_worker__handler,
};
