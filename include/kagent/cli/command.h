/*
 * A command: every `kagent NAME` subcommand is one struct in one file
 * (agent/cli/command_NAME.c), collected in kagent_command_table (command_table.h).
 */
#ifndef KAGENT_COMMAND_H
#define KAGENT_COMMAND_H

struct kagent_command {
	const char *name;
	const char *usage; /* arguments after the name, for `kagent help` */
	const char *help;  /* one line */
	/* argv[0] is the command name. Returns the process exit status. */
	int (*handler)(int argc, char **argv);
};

/* Each defined in its own file. */
extern const struct kagent_command kagent_command_eval;
extern const struct kagent_command kagent_command_gpu;
extern const struct kagent_command kagent_command_optimize;
extern const struct kagent_command kagent_command_profile;
extern const struct kagent_command kagent_command_trace;
extern const struct kagent_command kagent_command_worker;
/* Built only where NVRTC was found (KAGENT_HAVE_NVRTC). */
extern const struct kagent_command kagent_command_compile;

void kagent_command_print_usage(const struct kagent_command *command);

#endif
