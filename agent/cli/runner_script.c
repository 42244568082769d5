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

int
kagent_runner_script_start(struct kagent_runner_script *script, const char *name,
			   const char *const *arguments, char **cause)
{
	char *runner = NULL, *path = NULL;
	const char *argv[RUNNER_SCRIPT_MAX_ARGUMENTS + 3];
	int pipe_fds[2] = {-1, -1}, status;
	size_t count = 0, index;

	memset(script, 0, sizeof *script);
	if ((status = kagent_paths_python(&script->python, cause)) < 0 ||
	    (status = kagent_paths_runner_dir(&runner, cause)) < 0)
		goto out;
	path = kagent_asprintf("%s/kagent_runner/%s", runner, name);
	argv[count++] = script->python;
	argv[count++] = path;
	for (index = 0;
	     arguments != NULL && arguments[index] != NULL && index < RUNNER_SCRIPT_MAX_ARGUMENTS;
	     index++)
		argv[count++] = arguments[index];
	argv[count] = NULL;
	if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
		status = -errno;
		*cause = kagent_asprintf("cannot start %s: %s", script->python, strerror(errno));
		goto out;
	}
	fflush(stdout);
	fflush(stderr);
	script->child = fork();
	if (script->child < 0) {
		status = -errno;
		*cause = kagent_asprintf("cannot fork: %s", strerror(errno));
		goto out;
	}
	if (script->child == 0) {
		dup2(pipe_fds[0], STDIN_FILENO);
		/* stdout carries the command's own output (one JSON object with --json). */
		dup2(STDERR_FILENO, STDOUT_FILENO);
		/* a bare name (KAGENT_PYTHON=python3) is looked up on PATH */
		execvp(script->python, (char *const *)argv);
		fprintf(stderr, "kagent: cannot run %s: %s\n", script->python, strerror(errno));
		_exit(127);
	}
	close(pipe_fds[0]);
	pipe_fds[0] = -1;
	script->input = fdopen(pipe_fds[1], "w");
	if (script->input == NULL) {
		status = -errno;
		*cause = kagent_asprintf("cannot write to %s: %s", script->python, strerror(errno));
		kill(script->child, SIGKILL);
		close(pipe_fds[1]);
		pipe_fds[1] = -1;
		while (waitpid(script->child, NULL, 0) < 0 && errno == EINTR)
			continue;
		goto out;
	}
	pipe_fds[1] = -1;
	/* A script that dies before reading all of its input must not kill this process. */
	script->old_pipe = signal(SIGPIPE, SIG_IGN);
out:
	if (pipe_fds[0] >= 0)
		close(pipe_fds[0]);
	if (pipe_fds[1] >= 0)
		close(pipe_fds[1]);
	if (status < 0) {
		free(script->python);
		script->python = NULL;
	}
	free(runner);
	free(path);
	return status;
}

int
kagent_runner_script_finish(struct kagent_runner_script *script, int kill_first)
{
	int wait_status = 0;

	if (kill_first)
		kill(script->child, SIGKILL);
	fclose(script->input); /* a write error (the script left early) shows in its status */
	while (waitpid(script->child, &wait_status, 0) < 0 && errno == EINTR)
		continue;
	signal(SIGPIPE, script->old_pipe);
	free(script->python);
	memset(script, 0, sizeof *script);
	return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

int
kagent_runner_script_run(const char *name, const char *const *arguments, const char *input,
			 size_t length, int *exit_status_out, char **python_out, char **cause)
{
	struct kagent_runner_script script;
	int status = kagent_runner_script_start(&script, name, arguments, cause);

	if (status < 0)
		return status;
	fwrite(input, 1, length, script.input);
	if (python_out != NULL)
		*python_out = kagent_strdup(script.python);
	*exit_status_out = kagent_runner_script_finish(&script, 0);
	return 0;
}
