/*
 * `kagent cancel ID`: cancels a batch (b-...) or one session on kagentd. A batch's queued
 * sessions end at once and its running ones stop at their next safe point; cancelling what has
 * already finished is refused (409), said plainly, exit 1.
 */
#include "daemon_call.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
static const struct kagent_command_option command_cancel__options[] = {
	KAGENT_DAEMON_CALL_OPTIONS,
	{0},
};
/* clang-format on */

static int
command_cancel__handler(int argc, char **argv)
{
	struct kagent_daemon_call call;
	char *path = NULL, *refusal = NULL, *message = NULL;
	const char *id, *what;
	json_t *reply = NULL, *session;
	long http_status = 0;
	size_t index;
	int status;

	if (!kagent_daemon_call_parse(&call, &kagent_command_cancel, argc, argv, &status))
		return status;
	if (argc - call.first_operand != 1)
		return kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "usage",
					       "give one batch or session id");
	id = argv[call.first_operand];
	/* Batch ids are the store's "b-YYYYMMDD-...", never a run id (docs/store.md). */
	what = strncmp(id, "b-", 2) == 0 ? "batch" : "session";
	path = kagent_daemon_call_path(what[0] == 'b' ? "batches" : "sessions", id, "");
	status =
	    kagent_daemon_call_request(&call, "DELETE", path, NULL, &reply, &http_status, &refusal);
	if (status != 0 && refusal != NULL) {
		/* The daemon's own words follow: what it says of the state is the truth. */
		if (http_status == 409)
			message = kagent_asprintf("%s %s already finished (kagentd: %s)", what, id,
						  refusal);
		else
			message = kagent_strdup(refusal);
		kagent_daemon_call_fail(&call, status, kagent_daemon_call_error_kind(http_status),
					message);
		goto out;
	}
	if (status != 0)
		goto out;
	if (call.json) {
		kagent_daemon_call_print_json(reply);
		goto out;
	}
	printf("%s %s: %s", what, id,
	       json_is_string(json_object_get(reply, "state"))
		   ? json_string_value(json_object_get(reply, "state"))
		   : "cancelled");
	if (json_array_size(json_object_get(reply, "interrupted")) > 0) {
		size_t count = json_array_size(json_object_get(reply, "interrupted"));

		printf("; stopping %zu running session%s at %s next safe point:", count,
		       count == 1 ? "" : "s", count == 1 ? "its" : "their");
		json_array_foreach(json_object_get(reply, "interrupted"), index, session)
		    printf(" %s", json_string_value(session) ? json_string_value(session) : "?");
	}
	fputc('\n', stdout);
out:
	json_decref(reply);
	free(path);
	free(refusal);
	free(message);
	return status;
}

const struct kagent_command kagent_command_cancel = {
    .name = "cancel",
    .operands = "ID",
    .help = "cancel a batch (b-...) or one session on kagentd",
    .options = command_cancel__options,
    .handler = command_cancel__handler,
};
