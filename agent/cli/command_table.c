/*
 * The table of kagent subcommands and the lookup the CLI uses. It stands apart from command.c
 * (what every command shares) so that the commands and the table do not depend on each other.
 */
#include "kagent/cli/command_table.h"

#include <stddef.h>
#include <string.h>

/* One command per line. */
/* clang-format off */
const struct kagent_command *const kagent_command_table[] = {
	&kagent_command_optimize,
	&kagent_command_model,
	&kagent_command_eval,
	&kagent_command_profile,
	&kagent_command_verify,
#ifdef KAGENT_HAVE_NVRTC
	&kagent_command_compile,
#endif
	&kagent_command_gpu,
	&kagent_command_trace,
	&kagent_command_watch,
	&kagent_command_export,
	&kagent_command_replay,
	&kagent_command_batch,
	&kagent_command_status,
	&kagent_command_cancel,
	&kagent_command_report,
	&kagent_command_worker,
	&kagent_command_daemon,
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
