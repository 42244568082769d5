/* What every command shares: the usage line. */
#include "kagent/cli/command.h"

#include <stdio.h>

void
kagent_command_print_usage(const struct kagent_command *command)
{
	fprintf(stderr, "usage: kagent %s %s\n", command->name, command->usage);
}
