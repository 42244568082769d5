/*
 * The commands' helpers written in Python (kagent report --plot, kagent export --format
 * parquet): a script of the runner's package (sandbox/runner/kagent_runner/) run in the
 * runner's Python, outside the sandbox, with its input on stdin. The C side has no plotting
 * or Parquet library; the runner's Python is the one kagent already depends on.
 */
#ifndef KAGENT_RUNNER_SCRIPT_H
#define KAGENT_RUNNER_SCRIPT_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* What a script exits with when a module it needs cannot be imported. */
#define KAGENT_RUNNER_SCRIPT_EXIT_MISSING_MODULE 3

/* A running script. */
struct kagent_runner_script {
	pid_t child;
	FILE *input;  /* its stdin; SIGPIPE is ignored until it is finished */
	char *python; /* the interpreter, for messages */
	void (*old_pipe)(int);
};

/*
 * Starts kagent_runner/NAME with arguments (NULL-terminated, may be NULL); the caller writes
 * its stdin to script->input. Its stdout goes to stderr, which stays the command's. Returns 0,
 * or a negative errno with *cause when it could not be started.
 */
int kagent_runner_script_start(struct kagent_runner_script *script, const char *name,
			       const char *const *arguments, char **cause);
/* Ends its stdin (with kill, first kills it with SIGKILL), waits, frees script: returns its
 * exit status (128 + the signal that killed it). */
int kagent_runner_script_finish(struct kagent_runner_script *script, int kill);

/*
 * Runs kagent_runner/NAME with arguments and input on its stdin, to its end. Returns 0 with
 * *exit_status_out set, or a negative errno with *cause when it could not be started.
 * *python_out (may be NULL) is the interpreter, for messages; the caller frees it.
 */
int kagent_runner_script_run(const char *name, const char *const *arguments, const char *input,
			     size_t length, int *exit_status_out, char **python_out, char **cause);

#endif
