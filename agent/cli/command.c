/* The table of kagent subcommands and the lookup the CLI uses. */
#include "kagent/cli/command.h"

#include <stdio.h>
#include <string.h>

/* One command per line. */
/* clang-format off */
const struct kagent_command *const kagent_command_table[] = {
	&kagent_command_optimize,
	&kagent_command_eval,
	&kagent_command_profile,
#ifdef KAGENT_HAVE_NVRTC
	&kagent_command_compile,
#endif
	&kagent_command_gpu,
	&kagent_command_trace,
	&kagent_command_worker,
	NULL,
};
/* clang-format on */

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
