/* kagent: the command-line entry point. Parses global flags and dispatches to the command table. */
#include "kagent/cli/command_table.h"
#include "kagent/base/log.h"

#include <stdio.h>
#include <string.h>

#ifndef KAGENT_VERSION
#define KAGENT_VERSION "unknown"
#endif

static void
main__print_help(FILE *stream)
{
	const struct kagent_command *const *entry;

	fprintf(stream, "kagent %s: an autonomous coding agent for GPU kernels\n\n",
		KAGENT_VERSION);
	fprintf(stream, "usage: kagent [-v] COMMAND [ARGUMENTS]\n\ncommands:\n");
	for (entry = kagent_command_table; *entry != NULL; entry++)
		fprintf(stream, "  %-8s %s\n           %s\n", (*entry)->name, (*entry)->usage,
			(*entry)->help);
	fprintf(stream, "  help     show this text\n  version  print the version\n");
}

int
main(int argc, char **argv)
{
	const struct kagent_command *command;
	int index = 1;

	while (index < argc && argv[index][0] == '-') {
		if (strcmp(argv[index], "-v") == 0)
			kagent_log_verbosity++;
		else if (strcmp(argv[index], "--version") == 0) {
			printf("kagent %s\n", KAGENT_VERSION);
			return 0;
		} else if (strcmp(argv[index], "-h") == 0 || strcmp(argv[index], "--help") == 0) {
			main__print_help(stdout);
			return 0;
		} else {
			fprintf(stderr, "kagent: unknown option %s\n", argv[index]);
			main__print_help(stderr);
			return 2;
		}
		index++;
	}
	if (index >= argc) {
		main__print_help(stderr);
		return 2;
	}
	if (strcmp(argv[index], "help") == 0) {
		main__print_help(stdout);
		return 0;
	}
	if (strcmp(argv[index], "version") == 0) {
		printf("kagent %s\n", KAGENT_VERSION);
		return 0;
	}
	command = kagent_command_find(argv[index]);
	if (command == NULL) {
		fprintf(stderr, "kagent: unknown command '%s' (try 'kagent help')\n", argv[index]);
		return 2;
	}
	return command->handler(argc - index, argv + index);
}
