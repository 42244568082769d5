/*
 * The command-line side of an evaluation, shared by `kagent eval` and `kagent profile`:
 * option parsing, the run, and printing (one JSON object with --json, else the command's
 * text renderer). Exit status: 0 for a correct verdict, 1 for another, 2 for an error.
 */
#ifndef KAGENT_COMMAND_EVAL_H
#define KAGENT_COMMAND_EVAL_H

#include "kagent/cli/command.h"

#include <jansson.h>
#include <stdio.h>

#define KAGENT_COMMAND_EVAL_OPERANDS "PROBLEM.py CANDIDATE.py"

/* The options both commands take, for their struct kagent_command. */
extern const struct kagent_command_option kagent_command_eval_options[];

typedef void (*kagent_command_eval_render)(const json_t *verdict, FILE *stream);

int kagent_command_eval_run(int argc, char **argv, const struct kagent_command *command,
			    int profile_reference, kagent_command_eval_render render);

#endif
