/*
 * A script of the runner's package run in the runner's Python with its input on stdin
 * (runner_script.h).
 */
#include "runner_script.h"

#include "kagent/base/alloc.h"
#include "kagent/base/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The arguments a script gets besides its name, at most. */
#define RUNNER_SCRIPT_MAX_ARGUMENTS 8

/* Writes all of input to fd; a reader that left (EPIPE) ends it early, which waitpid tells. */
static void
runner_script__write_all(int fd, const char *input, size_t length)
{
	size_t done = 0;

	while (done < length) {
		ssize_t written = write(fd, input + done, length - done);

		if (written < 0 && errno == EINTR)
			continue;
		if (written <= 0)
			return;
		done += (size_t)written;
	}
}

int
kagent_runner_script_run(const char *name, const char *const *arguments, const char *input,
			 size_t length, int *exit_status_out, char **python_out, char **cause)
{
	char *python = NULL, *runner = NULL, *script = NULL;
	const char *argv[RUNNER_SCRIPT_MAX_ARGUMENTS + 3];
	void (*old_pipe)(int);
	int pipe_fds[2] = {-1, -1}, wait_status = 0, status = 0;
	size_t count = 0, index;
	pid_t child;

	if ((status = kagent_paths_python(&python, cause)) < 0 ||
	    (status = kagent_paths_runner_dir(&runner, cause)) < 0)
		goto out;
	script = kagent_asprintf("%s/kagent_runner/%s", runner, name);
	argv[count++] = python;
	argv[count++] = script;
	for (index = 0;
	     arguments != NULL && arguments[index] != NULL && index < RUNNER_SCRIPT_MAX_ARGUMENTS;
	     index++)
		argv[count++] = arguments[index];
	argv[count] = NULL;
	if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
		status = -errno;
		*cause = kagent_asprintf("cannot start %s: %s", python, strerror(errno));
		goto out;
	}
	fflush(stdout);
	fflush(stderr);
	child = fork();
	if (child < 0) {
		status = -errno;
		*cause = kagent_asprintf("cannot fork: %s", strerror(errno));
		goto out;
	}
	if (child == 0) {
		dup2(pipe_fds[0], STDIN_FILENO);
		/* stdout carries the command's own output (one JSON object with --json). */
		dup2(STDERR_FILENO, STDOUT_FILENO);
		/* a bare name (KAGENT_PYTHON=python3) is looked up on PATH */
		execvp(python, (char *const *)argv);
		fprintf(stderr, "kagent: cannot run %s: %s\n", python, strerror(errno));
		_exit(127);
	}
	close(pipe_fds[0]);
	pipe_fds[0] = -1;
	/* A script that dies before reading all of its input must not kill this process. */
	old_pipe = signal(SIGPIPE, SIG_IGN);
	runner_script__write_all(pipe_fds[1], input, length);
	close(pipe_fds[1]);
	pipe_fds[1] = -1;
	while (waitpid(child, &wait_status, 0) < 0 && errno == EINTR)
		continue;
	signal(SIGPIPE, old_pipe);
	*exit_status_out =
	    WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
out:
	if (pipe_fds[0] >= 0)
		close(pipe_fds[0]);
	if (pipe_fds[1] >= 0)
		close(pipe_fds[1]);
	if (python_out != NULL && status == 0)
		*python_out = python;
	else
		free(python);
	free(runner);
	free(script);
	return status;
}
