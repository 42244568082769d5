/*
 * The command table: every `kagent NAME` subcommand, collected in kagent_command_table
 * (agent/cli/command_table.c). The CLI dispatch and `kagent help` both read it.
 */
#ifndef KAGENT_COMMAND_TABLE_H
#define KAGENT_COMMAND_TABLE_H

#include "kagent/cli/command.h"

/* NULL-terminated. */
extern const struct kagent_command *const kagent_command_table[];

const struct kagent_command *kagent_command_find(const char *name);

#endif
