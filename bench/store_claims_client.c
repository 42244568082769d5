/*
 * One stand-in daemon for bench/store_claims.py (docs/benchmarks.md, issue 14): a process
 * with its own store connection that does what kagentd does to the store for each session,
 * with a fake evaluator and model that take --work-ms: claim, record the trace path, append
 * trace records, record and commit the best variant, finish; a heartbeat every third of the
 * lease. Claims until the queue is empty, then prints one JSON line: its claims, each
 * claim's latency and each session's store time in milliseconds.
 *
 *   store_claims_client URL create COUNT         queue a batch of COUNT sessions
 *   store_claims_client URL run START [WORK_MS]  claim from START (epoch seconds) on
 */
#include "kagent/base/alloc.h"
#include "kagent/daemon/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What a session leaves in the store besides its claim and end: a few trace records. */
#define CLIENT_TRACE_RECORDS 6

static double
client__now(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void
client__sleep(double seconds)
{
	struct timespec pause;

	if (seconds <= 0)
		return;
	pause.tv_sec = (time_t)seconds;
	pause.tv_nsec = (long)((seconds - (double)pause.tv_sec) * 1e9);
	while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
		;
}

static int
client__create(struct kagent_store *store, long count, char **cause)
{
	struct kagent_store_problem *problems = kagent_calloc((size_t)count, sizeof *problems);
	char **paths = kagent_calloc((size_t)count, sizeof *paths), *batch_id = NULL;
	int status;

	for (long index = 0; index < count; index++) {
		paths[index] = kagent_asprintf("/bench/level1/%ld_problem.py", index + 1);
		problems[index] = (struct kagent_store_problem){.path = paths[index], .level = 1};
	}
	status = kagent_store_batch_create(store, NULL, problems, (size_t)count, &batch_id, cause);
	if (status == 0)
		printf("%s\n", batch_id);
	for (long index = 0; index < count; index++)
		free(paths[index]);
	free(paths);
	free(problems);
	free(batch_id);
	return status;
}

/* Everything but the claim that one session writes, after its (fake) work. */
static int
client__session(struct kagent_store *store, const struct kagent_store_claim *claim,
		double work_seconds, char **cause)
{
	json_t *records = json_array(), *verdict, *result;
	struct kagent_store_variant variant = {0};
	char *trace = kagent_asprintf("/bench/runs/traces/%s.jsonl", claim->session_id);
	int status;

	for (int seq = 1; seq <= CLIENT_TRACE_RECORDS; seq++)
		json_array_append_new(records,
				      json_pack("{s:i, s:s, s:i, s:s}", "seq", seq, "type",
						"turn_end", "turn", seq, "detail",
						"a record of a few hundred bytes, as most are"));
	verdict = json_pack("{s:s, s:f}", "status", "correct", "speedup_vs_eager", 1.7);
	result = json_pack("{s:s, s:b}", "stop_reason", "target_reached", "confirmed", 1);
	variant = (struct kagent_store_variant){.session_id = claim->session_id,
						.variant_id = "v1",
						.verdict = verdict,
						.speedup_vs_eager = 1.7,
						.speedup_vs_compile = 1.1,
						.credited = 1};
	if ((status = kagent_store_session_set_trace(store, claim->session_id, trace, cause)) < 0)
		goto out;
	client__sleep(work_seconds);
	if ((status = kagent_store_trace_append(store, claim->session_id, records, NULL, cause)) <
		0 ||
	    (status = kagent_store_variant_record(store, &variant, NULL, cause)) < 0 ||
	    (status = kagent_store_variant_commit(store, claim->session_id, "v1", "0123abcd", NULL,
						  cause)) < 0)
		goto out;
	status =
	    kagent_store_session_finish(store, claim->session_id, KAGENT_STORE_DONE, result, cause);
out:
	json_decref(records);
	json_decref(verdict);
	json_decref(result);
	free(trace);
	return status;
}

static int
client__run(struct kagent_store *store, double start, double work_seconds, char **cause)
{
	json_t *claims = json_array(), *sessions = json_array();
	double first = 0, last = 0, beat = client__now();
	int status = 0;

	client__sleep(start - client__now());
	for (;;) {
		struct kagent_store_claim *claim = NULL;
		double before = client__now(), after, done;

		if ((status = kagent_store_session_claim(store, "0", &claim, cause)) < 0)
			break;
		after = client__now();
		if (claim == NULL)
			break;
		if (first == 0)
			first = before;
		json_array_append_new(claims, json_real((after - before) * 1000.0));
		status = client__session(store, claim, work_seconds, cause);
		kagent_store_claim_free(claim);
		if (status < 0)
			break;
		done = client__now();
		last = done;
		json_array_append_new(sessions, json_real((done - after) * 1000.0));
		if (done - beat > kagent_store_lease(store) / 3) {
			if ((status = kagent_store_heartbeat(store, NULL, NULL, cause)) < 0)
				break;
			beat = done;
		}
	}
	if (status == 0) {
		json_t *line = json_pack("{s:I, s:f, s:f, s:o, s:o}", "claims",
					 (json_int_t)json_array_size(claims), "first", first,
					 "last", last, "claim_ms", claims, "session_ms", sessions);
		char *text = json_dumps(line, JSON_COMPACT);

		printf("%s\n", text);
		free(text);
		json_decref(line);
		return 0;
	}
	json_decref(claims);
	json_decref(sessions);
	return status;
}

int
main(int argc, char **argv)
{
	struct kagent_store *store = NULL;
	char *cause = NULL;
	int status;

	if (argc < 4 || (strcmp(argv[2], "create") != 0 && strcmp(argv[2], "run") != 0)) {
		fprintf(stderr, "usage: store_claims_client URL create COUNT\n"
				"       store_claims_client URL run START_EPOCH [WORK_MS]\n");
		return 2;
	}
	if ((status = kagent_store_open(argv[1], &store, &cause)) == 0) {
		if (strcmp(argv[2], "create") == 0)
			status = client__create(store, strtol(argv[3], NULL, 10), &cause);
		else
			status = client__run(store, strtod(argv[3], NULL),
					     argc > 4 ? strtod(argv[4], NULL) / 1000.0 : 0, &cause);
	}
	if (status < 0)
		fprintf(stderr, "store_claims_client: %s\n", cause);
	free(cause);
	kagent_store_close(store);
	return status < 0 ? 1 : 0;
}
