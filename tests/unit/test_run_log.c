/* Tests of a run read back from its trace: variants, sources, parents, conversations, the
 * problem found by its sha256, and traces that are not a run's. */
#include "kagent/records/run_log.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/base/sha256.h"
#include "kagent/records/trace.h"
#include "test.h"

#include <errno.h>
#include <sys/stat.h>

#define PROBLEM_SOURCE "class Model: pass\n"
#define SOURCE_ONE "class ModelNew: pass  # one\n"
#define SOURCE_TWO "class ModelNew: pass  # two\n"

/* A run's folder in a scratch directory: <directory>/relu/{traces,variants/run-1}. */
struct fixture {
	char *directory;
	char *problem;	  /* <directory>/problem.py */
	char *trace_path; /* <directory>/relu/traces/run-1.jsonl */
	struct kagent_trace *trace;
};

static void
fixture_open(struct fixture *fixture)
{
	char *cause = NULL, *folder;

	fixture->directory = kagent_test_make_directory();
	fixture->problem = kagent_test_write_file(fixture->directory, "problem.py", PROBLEM_SOURCE);
	fixture->trace_path = kagent_asprintf("%s/relu/traces/run-1.jsonl", fixture->directory);
	folder = kagent_asprintf("%s/relu/variants/run-1", fixture->directory);
	CHECK_INT(kagent_fileio_make_directories(folder, 0755, &cause), 0);
	free(folder);
	CHECK_INT(kagent_trace_open(fixture->trace_path, 0, &fixture->trace, &cause), 0);
}

static void
fixture_close(struct fixture *fixture)
{
	char *cause = NULL;

	kagent_trace_close(fixture->trace);
	CHECK_INT(kagent_paths_remove_tree(fixture->directory, &cause), 0);
	free(fixture->directory);
	free(fixture->problem);
	free(fixture->trace_path);
}

static void
write_start(struct fixture *fixture, const char *problem_path)
{
	char sha256[KAGENT_SHA256_HEX_SIZE];

	kagent_sha256_hex(PROBLEM_SOURCE, strlen(PROBLEM_SOURCE), sha256);
	kagent_trace_write(
	    fixture->trace, "run_start",
	    json_pack("{s:s, s:b, s:s, s:s, s:s, s:s, s:s, s:{s:{s:s, s:s}, s:{s:s}}}", "run_id",
		      "run-1", "resumed", 0, "problem", problem_path, "problem_name", "relu",
		      "problem_sha256", sha256, "kagent_version", "0.1.0", "system", "be fast",
		      "config", "provider", "model", "m-1", "api", "anthropic", "target",
		      "baseline", "eager"));
}

/* An assistant reply that evaluates source (NULL: the call's arguments carry no source). */
static void
write_turn(struct fixture *fixture, int turn, const char *text, const char *source)
{
	json_t *arguments = source != NULL ? json_pack("{s:s}", "source", source) : json_object();
	char *arguments_text = json_dumps(arguments, JSON_COMPACT);

	kagent_trace_write(fixture->trace, "reply",
			   json_pack("{s:{s:s, s:[{s:s, s:s, s:s}]}, s:i}", "message", "content",
				     text, "tool_calls", "id", "call-1", "name", "evaluate",
				     "arguments", arguments_text, "turn", turn));
	kagent_trace_write(fixture->trace, "tool_call",
			   json_pack("{s:s, s:s, s:s, s:i}", "id", "call-1", "name", "evaluate",
				     "arguments", arguments_text, "turn", turn));
	json_decref(arguments);
	free(arguments_text);
}

static void
write_verdict(struct fixture *fixture, const char *variant, const char *purpose, const char *source,
	      const char *status, int turn)
{
	char sha256[KAGENT_SHA256_HEX_SIZE];

	kagent_sha256_hex(source, strlen(source), sha256);
	/* the parent as the session names it (the earlier variant sharing the most lines) */
	kagent_trace_write(fixture->trace, "verdict",
			   json_pack("{s:s, s:s, s:s, s:{s:s, s:{s:s}}, s:i, s:s?}", "variant",
				     variant, "purpose", purpose, "status", status, "verdict",
				     "status", status, "candidate", "sha256", sha256, "turn", turn,
				     "parent", strcmp(variant, "v2") == 0 ? "v1" : NULL));
}

static void
test_variants(void)
{
	struct fixture fixture;
	struct kagent_run_log *log = NULL;
	const struct kagent_run_variant *one, *two;
	char *cause = NULL, *path;

	fixture_open(&fixture);
	write_start(&fixture, fixture.problem);
	kagent_trace_write(fixture.trace, "message",
			   json_pack("{s:s, s:s}", "role", "user", "content", "the problem"));
	write_turn(&fixture, 1, "first", SOURCE_ONE);
	write_verdict(&fixture, "v1", "evaluate", SOURCE_ONE, "correct", 1);
	kagent_trace_write(fixture.trace, "commit",
			   json_pack("{s:s, s:s}", "variant", "v1", "commit", "abc123"));
	kagent_trace_write(fixture.trace, "tool_result",
			   json_pack("{s:s, s:s, s:b, s:s}", "id", "call-1", "name", "evaluate",
				     "is_error", 0, "content", "v1 correct"));
	/* v2's source is not in the call: it is found in the run's variant file */
	write_turn(&fixture, 2, "second", NULL);
	path = kagent_test_write_file(fixture.directory, "relu/variants/run-1/v2.py", SOURCE_TWO);
	free(path);
	write_verdict(&fixture, "v2", "evaluate", SOURCE_TWO, "incorrect", 2);
	/* a confirmation and a verdict written again (a resumed run) are no new variants */
	write_verdict(&fixture, "v1", "confirm", SOURCE_ONE, "incorrect", 2);
	write_verdict(&fixture, "v2", "evaluate", SOURCE_TWO, "correct", 2);
	kagent_trace_write(fixture.trace, "best", json_pack("{s:s}", "variant", "v1"));
	/* the final record names the announced variant; a best record says more */
	kagent_trace_write(fixture.trace, "final", json_pack("{s:s}", "variant", "v2"));

	CHECK_INT(kagent_run_log_read(fixture.trace_path, &log, &cause), 0);
	CHECK_STRING(log->run_id, "run-1");
	CHECK_STRING(log->problem_name, "relu");
	CHECK_STRING(log->problem_source, PROBLEM_SOURCE);
	CHECK_STRING(log->problem_path, fixture.problem);
	CHECK_STRING(log->model, "m-1");
	CHECK_STRING(log->provider, "anthropic");
	CHECK_INT(log->baseline, KAGENT_TARGET_EAGER);
	CHECK_STRING(log->best, "v1");
	CHECK_INT(log->count, 2);
	one = kagent_run_log_find(log, "v1");
	two = kagent_run_log_find(log, "v2");
	CHECK(one == &log->variants[0] && two == &log->variants[1]);
	CHECK(kagent_run_log_find(log, "v3") == NULL);
	CHECK_STRING(one->source, SOURCE_ONE);
	CHECK_STRING(two->source, SOURCE_TWO);
	CHECK(one->parent == NULL);
	CHECK_STRING(two->parent, "v1");
	CHECK_STRING(one->commit, "abc123");
	CHECK(two->commit == NULL);
	CHECK_INT(one->turn, 1);
	CHECK_STRING(json_string_value(json_object_get(two->verdict, "status")), "incorrect");
	/* v1: system, user, assistant; v2 also v1's tool result and its own reply */
	CHECK_INT(json_array_size(one->messages), 3);
	CHECK_INT(json_array_size(two->messages), 5);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(one->messages, 0), "role")),
		     "system");
	CHECK_STRING(
	    json_string_value(json_object_get(json_array_get(two->messages, 3), "tool_call_id")),
	    "call-1");
	CHECK_STRING(
	    json_string_value(json_object_get(json_array_get(two->messages, 4), "content")),
	    "second");
	/* every key present, so a columnar file sees one shape */
	CHECK(json_object_size(json_array_get(one->messages, 0)) == 6);
	CHECK(json_is_null(json_object_get(json_array_get(one->messages, 0), "tool_calls")));
	kagent_run_log_free(log);
	fixture_close(&fixture);
}

static void
test_problem_moved(void)
{
	struct fixture fixture;
	struct kagent_run_log *log = NULL;
	char *cause = NULL, *copy;

	/* The recorded path is gone; the run's worktree copy has the sha256. */
	fixture_open(&fixture);
	write_start(&fixture, "/nonexistent/problem.py");
	copy = kagent_asprintf("%s/relu/run-1", fixture.directory);
	CHECK_INT(kagent_fileio_make_directories(copy, 0755, &cause), 0);
	free(copy);
	copy = kagent_test_write_file(fixture.directory, "relu/run-1/problem.py", PROBLEM_SOURCE);
	CHECK_INT(kagent_run_log_read(fixture.trace_path, &log, &cause), 0);
	CHECK_STRING(log->problem_path, copy);
	CHECK_INT(log->count, 0);
	CHECK(log->best == NULL);
	kagent_run_log_free(log);
	/* An edited problem is not the run's. */
	free(kagent_test_write_file(fixture.directory, "relu/run-1/problem.py", "edited\n"));
	CHECK_INT(kagent_run_log_read(fixture.trace_path, &log, &cause), -ENOENT);
	CHECK(log == NULL);
	CHECK_CONTAINS(cause, "the problem of run run-1");
	free(cause);
	free(copy);
	fixture_close(&fixture);
}

static void
test_final_without_best(void)
{
	struct fixture fixture;
	struct kagent_run_log *log = NULL;
	char *cause = NULL;

	/* nothing confirmed: the best is the variant the run announced */
	fixture_open(&fixture);
	write_start(&fixture, fixture.problem);
	kagent_trace_write(fixture.trace, "final",
			   json_pack("{s:s, s:b}", "variant", "v3", "confirmed", 0));
	CHECK_INT(kagent_run_log_read(fixture.trace_path, &log, &cause), 0);
	CHECK_STRING(log->best, "v3");
	kagent_run_log_free(log);
	fixture_close(&fixture);
}

static void
test_source_missing(void)
{
	struct fixture fixture;
	struct kagent_run_log *log = NULL;
	char *cause = NULL;

	fixture_open(&fixture);
	write_start(&fixture, fixture.problem);
	write_turn(&fixture, 1, "first", NULL);
	write_verdict(&fixture, "v1", "evaluate", SOURCE_ONE, "correct", 1);
	CHECK_INT(kagent_run_log_read(fixture.trace_path, &log, &cause), -ENOENT);
	CHECK_CONTAINS(cause, "the source of v1");
	free(cause);
	fixture_close(&fixture);
}

static void
test_not_a_run(void)
{
	struct kagent_run_log *log = NULL;
	char *directory = kagent_test_make_directory(), *cause = NULL;
	char *empty = kagent_test_write_file(directory, "empty.jsonl", "");
	char *other = kagent_test_write_file(directory, "other.jsonl", "{\"type\": \"message\"}\n");
	char *garbage = kagent_test_write_file(directory, "garbage.jsonl", "not json\n{}\n");

	CHECK_INT(kagent_run_log_read(empty, &log, &cause), -EINVAL);
	CHECK_CONTAINS(cause, "not the trace of a run");
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_run_log_read(other, &log, &cause), -EINVAL);
	free(cause);
	cause = NULL;
	CHECK(kagent_run_log_read(garbage, &log, &cause) < 0);
	CHECK(cause != NULL);
	free(cause);
	cause = NULL;
	CHECK(kagent_run_log_read("/nonexistent/run.jsonl", &log, &cause) < 0);
	CHECK(log == NULL && cause != NULL);
	free(cause);
	free(empty);
	free(other);
	free(garbage);
	CHECK_INT(kagent_paths_remove_tree(directory, &cause), 0);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"variants", test_variants},
    {"problem_moved", test_problem_moved},
    {"final_without_best", test_final_without_best},
    {"source_missing", test_source_missing},
    {"not_a_run", test_not_a_run},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
