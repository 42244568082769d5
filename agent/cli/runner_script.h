/*
 * The commands' helpers written in Python (kagent report --plot, kagent export --format
 * parquet): a script of the runner's package (sandbox/runner/kagent_runner/) run in the
 * runner's Python, outside the sandbox, with its input on stdin. The C side has no plotting
 * or Parquet library; the runner's Python is the one kagent already depends on.
 */
#ifndef KAGENT_RUNNER_SCRIPT_H
#define KAGENT_RUNNER_SCRIPT_H

#include <stddef.h>

/* What a script exits with when a module it needs cannot be imported. */
#define KAGENT_RUNNER_SCRIPT_EXIT_MISSING_MODULE 3

/*
 * Runs kagent_runner/NAME with arguments (NULL-terminated, may be NULL) and input on its
 * stdin; its stdout goes to stderr, which stays the command's. Returns 0 with
 * *exit_status_out set (the script's exit status, 128 + the signal that killed it), or a
 * negative errno with *cause when it could not be started. *python_out (may be NULL) is the
 * interpreter, for messages; the caller frees it.
 */
int kagent_runner_script_run(const char *name, const char *const *arguments, const char *input,
			     size_t length, int *exit_status_out, char **python_out, char **cause);

#endif
