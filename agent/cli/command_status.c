/*
 * `kagent status [ID]`: what kagentd is doing. Without an id, its health and its batches with
 * their progress; with a batch's id (b-...), the batch and one line per session; with a
 * session's id, that session: its state, attempt, and the live numbers while it runs (its
 * totals once it ended).
 */
#include "daemon_call.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
static const struct kagent_command_option command_status__options[] = {
	KAGENT_DAEMON_CALL_OPTIONS,
	{0},
};
/* clang-format on */

/* The counts a batch carries, in the order they are shown. */
static const char *const command_status__count_names[] = {"queued", "running", "done", "failed",
							  "cancelled"};
#define STATUS_COUNT_NAMES                                                                         \
	(sizeof command_status__count_names / sizeof *command_status__count_names)

static const char *
command_status__text(const json_t *object, const char *key)
{
	const char *text = json_string_value(json_object_get(object, key));

	return text != NULL ? text : "-";
}

/* "3 done, 1 running" (zero counts left out), or "no sessions". */
static void
command_status__print_counts(const json_t *counts, FILE *stream)
{
	size_t index;
	int printed = 0;

	for (index = 0; index < STATUS_COUNT_NAMES; index++) {
		json_int_t count =
		    json_integer_value(json_object_get(counts, command_status__count_names[index]));

		if (count == 0)
			continue;
		fprintf(stream, "%s%lld %s", printed ? ", " : "", (long long)count,
			command_status__count_names[index]);
		printed = 1;
	}
	if (!printed)
		fputs("no sessions", stream);
}

static int
command_status__daemon(struct kagent_daemon_call *call)
{
	json_t *health = NULL, *list = NULL, *batches, *batch;
	size_t index;
	int status;

	status = kagent_daemon_call_request(call, "GET", "/v1/health", NULL, &health, NULL, NULL);
	if (status != 0)
		goto out;
	status = kagent_daemon_call_request(call, "GET", "/v1/batches", NULL, &list, NULL, NULL);
	if (status != 0)
		goto out;
	batches = json_object_get(list, "batches");
	if (call->json) {
		json_t *object = json_pack("{s:O, s:O}", "health", health, "batches",
					   batches != NULL ? batches : json_null());

		kagent_daemon_call_print_json(object);
		json_decref(object);
		goto out;
	}
	printf("kagentd %s: %s, device %s, ", command_status__text(health, "version"),
	       command_status__text(health, "status"), command_status__text(health, "device"));
	if (json_array_size(json_object_get(health, "gpus")) > 0) {
		json_t *gpu;

		fputs("GPUs", stdout);
		json_array_foreach(json_object_get(health, "gpus"), index, gpu)
		    printf("%s%lld", index == 0 ? " " : ",", (long long)json_integer_value(gpu));
		fputs(", ", stdout);
	}
	printf("sessions: %lld running, %lld queued (at most %lld at once)\n",
	       (long long)json_integer_value(json_object_get(health, "sessions_running")),
	       (long long)json_integer_value(json_object_get(health, "sessions_queued")),
	       (long long)json_integer_value(json_object_get(health, "max_sessions")));
	if (json_array_size(batches) == 0) {
		printf("no batches\n");
		goto out;
	}
	printf("%-28s %-10s %-21s %s\n", "BATCH", "STATE", "CREATED", "PROGRESS");
	json_array_foreach(batches, index, batch)
	{
		printf("%-28s %-10s %-21s ", command_status__text(batch, "id"),
		       command_status__text(batch, "state"),
		       command_status__text(batch, "created_at"));
		command_status__print_counts(json_object_get(batch, "counts"), stdout);
		fputc('\n', stdout);
	}
out:
	json_decref(health);
	json_decref(list);
	return status;
}

/* The session's credited best speedup: the contract's best_speedup, else its result's. */
static const json_t *
command_status__best(const json_t *session)
{
	const json_t *best = json_object_get(session, "best_speedup");
	const json_t *confirmation =
	    json_object_get(json_object_get(session, "result"), "confirmation");

	if (best != NULL)
		return best;
	/* The result's speedup is 0 when not credited: show none rather than 0.00x. */
	if (!json_is_true(json_object_get(confirmation, "credited")))
		return NULL;
	return json_object_get(confirmation, "speedup");
}

static int
command_status__batch(struct kagent_daemon_call *call, const char *id)
{
	char *path = kagent_daemon_call_path("batches", id, "");
	json_t *batch = NULL, *session;
	const char *problem;
	size_t index;
	int status, width = 7;
	char speedup[32];

	status = kagent_daemon_call_request(call, "GET", path, NULL, &batch, NULL, NULL);
	if (status != 0)
		goto out;
	if (call->json) {
		kagent_daemon_call_print_json(batch);
		goto out;
	}
	printf("batch %s: %s, created %s; ", command_status__text(batch, "id"),
	       command_status__text(batch, "state"), command_status__text(batch, "created_at"));
	command_status__print_counts(json_object_get(batch, "counts"), stdout);
	fputc('\n', stdout);
	json_array_foreach(json_object_get(batch, "sessions"), index, session)
	{
		problem = command_status__text(session, "problem");
		if ((int)strlen(problem) > width)
			width = (int)strlen(problem);
	}
	printf("%-30s %-*s %-10s %s\n", "SESSION", width, "PROBLEM", "STATE", "BEST");
	json_array_foreach(json_object_get(batch, "sessions"), index, session)
	{
		kagent_daemon_call_format_speedup(speedup, sizeof speedup,
						  command_status__best(session));
		printf("%-30s %-*s %-10s %s\n", command_status__text(session, "id"), width,
		       command_status__text(session, "problem"),
		       command_status__text(session, "state"), speedup);
	}
out:
	json_decref(batch);
	free(path);
	return status;
}

/* One number of an object (digits after the point, then unit), or "-". */
static void
command_status__print_number(const char *label, const json_t *object, const char *key, int digits,
			     const char *unit)
{
	const json_t *value = json_object_get(object, key);

	printf("  %-9s", label);
	if (json_is_number(value))
		printf("%.*f%s", digits, json_number_value(value), unit);
	else
		fputs("-", stdout);
	fputc('\n', stdout);
}

static int
command_status__session(struct kagent_daemon_call *call, const char *id)
{
	char *path = kagent_daemon_call_path("sessions", id, "");
	const json_t *live, *totals, *attempt;
	json_t *session = NULL;
	char speedup[32];
	int status;

	status = kagent_daemon_call_request(call, "GET", path, NULL, &session, NULL, NULL);
	if (status != 0)
		goto out;
	if (call->json) {
		kagent_daemon_call_print_json(session);
		goto out;
	}
	/* The store names it "attempts"; the contract "attempt": either will do. */
	attempt = json_object_get(session, "attempt");
	if (attempt == NULL)
		attempt = json_object_get(session, "attempts");
	printf("session %s: %s, attempt %lld", command_status__text(session, "id"),
	       command_status__text(session, "state"), (long long)json_integer_value(attempt));
	if (json_is_string(json_object_get(session, "gpu")))
		printf(", GPU %s", json_string_value(json_object_get(session, "gpu")));
	printf("\n  problem  %s (%s)\n  batch    %s\n", command_status__text(session, "problem"),
	       command_status__text(session, "problem_path"),
	       command_status__text(session, "batch_id"));
	live = json_object_get(session, "live");
	totals = json_object_get(json_object_get(session, "result"), "totals");
	if (live != NULL) {
		printf("live:\n");
		command_status__print_number("turn", live, "turn", 0, "");
		command_status__print_number("tokens", live, "tokens", 0, "");
		command_status__print_number("cost", live, "cost", 4, " USD");
		kagent_daemon_call_format_speedup(speedup, sizeof speedup,
						  json_object_get(live, "best"));
		printf("  %-9s%s\n", "best", speedup);
	} else if (totals != NULL) {
		printf("totals:\n");
		command_status__print_number("turns", totals, "turns", 0, "");
		command_status__print_number("input", totals, "input_tokens", 0, " tokens");
		command_status__print_number("output", totals, "output_tokens", 0, " tokens");
		command_status__print_number("cost", totals, "cost", 4, " USD");
		command_status__print_number("GPU", totals, "gpu_seconds", 1, " s");
		command_status__print_number("wall", totals, "wall_seconds", 1, " s");
		kagent_daemon_call_format_speedup(speedup, sizeof speedup,
						  command_status__best(session));
		printf("  %-9s%s\n", "best", speedup);
	}
out:
	json_decref(session);
	free(path);
	return status;
}

static int
command_status__handler(int argc, char **argv)
{
	struct kagent_daemon_call call;
	const char *id;
	int status;

	if (!kagent_daemon_call_parse(&call, &kagent_command_status, argc, argv, &status))
		return status;
	if (argc - call.first_operand > 1)
		return kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "usage",
					       "give at most one batch or session id");
	if (argc == call.first_operand)
		return command_status__daemon(&call);
	id = argv[call.first_operand];
	/* Batch ids are the store's "b-YYYYMMDD-...", never a run id (docs/store.md). */
	if (strncmp(id, "b-", 2) == 0)
		return command_status__batch(&call, id);
	return command_status__session(&call, id);
}

const struct kagent_command kagent_command_status = {
    .name = "status",
    .operands = "[ID]",
    .help = "show kagentd's health and batches, one batch (b-...) or one session",
    .options = command_status__options,
    .handler = command_status__handler,
};
