/* The table of kagent subcommands and the lookup the CLI uses. */
#include "kagent/command.h"

#include <stdio.h>
#include <string.h>

const struct kagent_command *const kagent_command_table[] = {
    &kagent_command_eval,
#ifdef KAGENT_HAVE_NVRTC
    &kagent_command_compile,
#endif
    &kagent_command_gpu,     &kagent_command_worker, NULL,
};

const struct kagent_command *
kagent_command_find(const char *name)
{
	const struct kagent_command *const *entry;

	for (entry = kagent_command_table; *entry != NULL; entry++) {
		if (strcmp((*entry)->name, name) == 0)
			return *entry;
	}
	return NULL;
}

void
kagent_command_print_usage(const struct kagent_command *command)
{
	fprintf(stderr, "usage: kagent %s %s\n", command->name, command->usage);
}
