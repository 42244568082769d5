/*
 * kagent: the command-line entry point. Parses global flags and dispatches to the command table;
 * `kagent help [COMMAND]` and the hidden `kagent completion bash|zsh` and `kagent man` (run by
 * the build to make what it installs) read the same table.
 */
#include "kagent/cli/command_reference.h"
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
		fprintf(stream, "  %-9s%s\n", (*entry)->name, (*entry)->help);
	fprintf(stream,
		"  help     show this text, or with a COMMAND its options\n"
		"  version  print the version\n\n"
		"'kagent help COMMAND' or 'kagent COMMAND --help' shows a command's options.\n");
}

/* `kagent help [COMMAND]`: the list, or one command's options; exit 2 for an unknown one. */
static int
main__help(int argc, char **argv)
{
	const struct kagent_command *command;

	if (argc < 2) {
		main__print_help(stdout);
		return 0;
	}
	command = kagent_command_find(argv[1]);
	if (command == NULL || argc > 2) {
		if (argc > 2)
			fprintf(stderr, "kagent help: give one command\n\n");
		else
			fprintf(stderr, "kagent help: unknown command '%s'\n\n", argv[1]);
		main__print_help(stderr);
		return 2;
	}
	kagent_command_print_help(command, stdout);
	return 0;
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
	if (strcmp(argv[index], "help") == 0)
		return main__help(argc - index, argv + index);
	if (strcmp(argv[index], "version") == 0) {
		printf("kagent %s\n", KAGENT_VERSION);
		return 0;
	}
	if (strcmp(argv[index], "completion") == 0) {
		if (argc - index == 2 &&
		    kagent_command_reference_completion(argv[index + 1], stdout) == 0)
			return 0;
		fprintf(stderr, "usage: kagent completion bash|zsh\n");
		return 2;
	}
	if (strcmp(argv[index], "man") == 0) {
		kagent_command_reference_man(KAGENT_VERSION, stdout);
		return 0;
	}
	command = kagent_command_find(argv[index]);
	if (command == NULL) {
		fprintf(stderr, "kagent: unknown command '%s' (try 'kagent help')\n", argv[index]);
		return 2;
	}
	return command->handler(argc - index, argv + index);
}
