/*
 * Unit tests for the batch report (agent/daemon/report.c): rows from sessions' final
 * summaries, and the arithmetic of the correct rate, fast_p and the geometric means on
 * hand-made batches, with the edge cases (nothing correct, a level of one problem, a fast
 * result that is not credited, a compile speedup not measured), and the CSV text.
 */
#include "kagent/daemon/report.h"

#include "test.h"

#include <errno.h>
#include <math.h>

/* A session as the store returns it, with a final summary (NULL status: no confirmation). */
static json_t *
session(const char *id, int level, const char *state, const char *status, double eager,
	double compile, int credited)
{
	json_t *result =
	    json_pack("{s:s, s:{s:i, s:i, s:i, s:f, s:f, s:f}}", "stop_reason", "model_finished",
		      "totals", "turns", 7, "input_tokens", 1000, "output_tokens", 250, "cost", 0.5,
		      "wall_seconds", 60.0, "gpu_seconds", 12.5);

	if (status != NULL) {
		json_t *confirmation = json_pack("{s:s, s:s, s:b}", "status", status, "reason",
						 "checked", "credited", credited);

		json_object_set_new(confirmation, "speedup_vs_eager",
				    eager >= 0 ? json_real(eager) : json_null());
		json_object_set_new(confirmation, "speedup_vs_compile",
				    compile >= 0 ? json_real(compile) : json_null());
		json_object_set_new(result, "confirmation", confirmation);
	} else
		json_object_set_new(result, "confirmation", json_null());
	return json_pack("{s:s, s:s, s:o, s:s, s:o}", "id", id, "problem", id, "level",
			 level > 0 ? json_integer(level) : json_null(), "state", state, "result",
			 result);
}

static json_t *
batch_of(json_t *sessions)
{
	return json_pack("{s:s, s:o}", "id", "b-1", "sessions", sessions);
}

static json_t *
build(json_t *batch)
{
	json_t *report = NULL;
	char *cause = NULL;

	CHECK_INT(kagent_report_build(batch, &report, &cause), 0);
	CHECK(cause == NULL);
	json_decref(batch);
	return report;
}

static double
number(const json_t *object, const char *key)
{
	const json_t *value = json_object_get(object, key);

	CHECK(json_is_number(value));
	return json_number_value(value);
}

static int
near(double actual, double expected)
{
	return fabs(actual - expected) < 1e-9;
}

static const json_t *
overall(const json_t *report)
{
	return json_object_get(json_object_get(report, "summary"), "overall");
}

static const json_t *
level_group(const json_t *report, size_t index)
{
	return json_array_get(json_object_get(json_object_get(report, "summary"), "levels"), index);
}

static void
test_mixed_batch(void)
{
	/* Level 1: 3x/2.5x credited, 1.5x/0.8x credited, incorrect, failed.
	 * Level 2: 4x/1.2x credited. */
	json_t *report = build(batch_of(json_pack(
	    "[o, o, o, o, o]", session("a", 1, "done", "correct", 3.0, 2.5, 1),
	    session("b", 1, "done", "correct", 1.5, 0.8, 1),
	    session("c", 1, "done", "incorrect", 0, 0, 0), session("d", 1, "failed", NULL, 0, 0, 0),
	    session("e", 2, "done", "correct", 4.0, 1.2, 1))));
	const json_t *all = overall(report), *one = level_group(report, 0),
		     *two = level_group(report, 1), *row;

	CHECK_INT(json_array_size(json_object_get(report, "rows")), 5);
	row = json_array_get(json_object_get(report, "rows"), 0);
	CHECK_STRING(json_string_value(json_object_get(row, "status")), "correct");
	CHECK(json_is_true(json_object_get(row, "correct")));
	CHECK_INT(json_integer_value(json_object_get(row, "turns")), 7);
	CHECK_INT(json_integer_value(json_object_get(row, "tokens")), 1250);
	CHECK(near(number(row, "cost"), 0.5));
	CHECK(near(number(row, "gpu_seconds"), 12.5));
	CHECK(near(number(row, "wall_seconds"), 60.0));
	row = json_array_get(json_object_get(report, "rows"), 3);
	CHECK_STRING(json_string_value(json_object_get(row, "status")), "failed");
	CHECK(json_is_false(json_object_get(row, "correct")));
	CHECK(json_is_null(json_object_get(row, "speedup_vs_eager")));

	CHECK_INT(json_integer_value(json_object_get(all, "problems")), 5);
	CHECK_INT(json_integer_value(json_object_get(all, "correct")), 3);
	CHECK(near(number(all, "correct_rate"), 0.6));
	CHECK(near(number(all, "fast_0_eager"), 0.6));
	CHECK(near(number(all, "fast_1_eager"), 0.6));
	CHECK(near(number(all, "fast_2_eager"), 0.4));
	CHECK(near(number(all, "fast_0_compile"), 0.6));
	CHECK(near(number(all, "fast_1_compile"), 0.4));
	CHECK(near(number(all, "fast_2_compile"), 0.2));
	CHECK(near(number(all, "geomean_eager"), cbrt(3.0 * 1.5 * 4.0)));
	CHECK(near(number(all, "geomean_compile"), cbrt(2.5 * 0.8 * 1.2)));

	CHECK_INT(json_integer_value(json_object_get(one, "level")), 1);
	CHECK_INT(json_integer_value(json_object_get(one, "problems")), 4);
	CHECK(near(number(one, "correct_rate"), 0.5));
	CHECK(near(number(one, "fast_1_compile"), 0.25));
	CHECK(near(number(one, "geomean_eager"), sqrt(3.0 * 1.5)));
	/* A level of one problem. */
	CHECK_INT(json_integer_value(json_object_get(two, "level")), 2);
	CHECK_INT(json_integer_value(json_object_get(two, "problems")), 1);
	CHECK(near(number(two, "correct_rate"), 1.0));
	CHECK(near(number(two, "fast_2_eager"), 1.0));
	CHECK(near(number(two, "fast_2_compile"), 0.0));
	CHECK(near(number(two, "geomean_compile"), 1.2));
	CHECK(level_group(report, 2) == NULL);
	json_decref(report);
}

static void
test_nothing_correct(void)
{
	json_t *report =
	    build(batch_of(json_pack("[o, o]", session("a", 1, "done", "incorrect", 0, 0, 0),
				     session("b", 1, "cancelled", NULL, 0, 0, 0))));
	const json_t *all = overall(report);

	CHECK_INT(json_integer_value(json_object_get(all, "correct")), 0);
	CHECK(near(number(all, "correct_rate"), 0.0));
	CHECK(near(number(all, "fast_0_eager"), 0.0));
	CHECK(json_is_null(json_object_get(all, "geomean_eager")));
	CHECK(json_is_null(json_object_get(all, "geomean_compile")));
	CHECK_STRING(json_string_value(json_object_get(
			 json_array_get(json_object_get(report, "rows"), 1), "status")),
		     "cancelled");
	json_decref(report);

	/* An empty batch divides by nothing. */
	report = build(batch_of(json_array()));
	CHECK_INT(json_integer_value(json_object_get(overall(report), "problems")), 0);
	CHECK(near(number(overall(report), "correct_rate"), 0.0));
	CHECK_INT(json_array_size(json_object_get(json_object_get(report, "summary"), "levels")),
		  0);
	json_decref(report);
}

/* A correct 5x that is not credited: correct, never fast, out of the geometric mean. */
static void
test_uncredited_fast_result(void)
{
	json_t *report =
	    build(batch_of(json_pack("[o, o]", session("a", 1, "done", "correct", 5.0, 4.0, 0),
				     session("b", 1, "done", "correct", 2.0, 1.5, 1))));
	const json_t *all = overall(report), *row;

	row = json_array_get(json_object_get(report, "rows"), 0);
	CHECK(json_is_true(json_object_get(row, "correct")));
	CHECK(json_is_false(json_object_get(row, "credited")));
	CHECK(near(number(row, "speedup_vs_eager"), 5.0)); /* still reported */
	CHECK_INT(json_integer_value(json_object_get(all, "correct")), 2);
	CHECK_INT(json_integer_value(json_object_get(all, "credited")), 1);
	CHECK(near(number(all, "correct_rate"), 1.0));
	CHECK(near(number(all, "fast_0_eager"), 0.5));
	CHECK(near(number(all, "fast_1_eager"), 0.5));
	CHECK(near(number(all, "fast_2_eager"), 0.0)); /* 2.0 is not above 2 */
	CHECK(near(number(all, "geomean_eager"), 2.0));
	CHECK(near(number(all, "geomean_compile"), 1.5));
	json_decref(report);
}

/* No confirmed best, but a variant evaluated (the final record's "evaluated"): a correct
 * uncredited one reads as correct with its measured speedups; a rejected one as rejected;
 * none at all as no_variant. */
static void
test_unconfirmed_runs(void)
{
	json_t *correct = session("a", 1, "done", NULL, 0, 0, 0);
	json_t *rejected = session("b", 1, "done", NULL, 0, 0, 0);
	json_t *report;
	const json_t *rows, *row;

	json_object_set_new(json_object_get(correct, "result"), "evaluated",
			    json_pack("{s:s, s:s, s:f, s:f, s:b}", "variant", "v1", "status",
				      "correct", "speedup_vs_eager", 0.98, "speedup_vs_compile",
				      0.44, "credited", 0));
	json_object_set_new(json_object_get(rejected, "result"), "evaluated",
			    json_pack("{s:s, s:s, s:n, s:n, s:b}", "variant", "v1", "status",
				      "rejected", "speedup_vs_eager", "speedup_vs_compile",
				      "credited", 0));
	report = build(batch_of(
	    json_pack("[o, o, o]", correct, rejected, session("c", 1, "done", NULL, 0, 0, 0))));
	rows = json_object_get(report, "rows");
	row = json_array_get(rows, 0);
	CHECK_STRING(json_string_value(json_object_get(row, "status")), "correct");
	CHECK(json_is_true(json_object_get(row, "correct")));
	CHECK(json_is_false(json_object_get(row, "credited")));
	CHECK(near(number(row, "speedup_vs_eager"), 0.98));
	CHECK(near(number(row, "speedup_vs_compile"), 0.44));
	row = json_array_get(rows, 1);
	CHECK_STRING(json_string_value(json_object_get(row, "status")), "rejected");
	CHECK(json_is_null(json_object_get(row, "speedup_vs_eager")));
	CHECK_STRING(json_string_value(json_object_get(json_array_get(rows, 2), "status")),
		     "no_variant");
	CHECK_INT(json_integer_value(json_object_get(overall(report), "correct")), 1);
	CHECK_INT(json_integer_value(json_object_get(overall(report), "credited")), 0);
	CHECK(json_is_null(json_object_get(overall(report), "geomean_eager")));
	json_decref(report);
}

/* No torch.compile speedup (the baseline failed): fast against eager only. Problems without a
 * level come last; a confirmation without "credited" predates the rule and counts. */
static void
test_missing_compile_and_level(void)
{
	json_t *old = session("b", 0, "done", "correct", 3.0, 3.0, 1), *report;
	const json_t *all;

	json_object_del(json_object_get(json_object_get(old, "result"), "confirmation"),
			"credited");
	report = build(
	    batch_of(json_pack("[o, o]", session("a", 3, "done", "correct", 1.5, -1, 1), old)));
	all = overall(report);
	CHECK(near(number(all, "fast_1_eager"), 1.0));
	CHECK(near(number(all, "fast_0_compile"), 0.5));
	CHECK(near(number(all, "geomean_compile"), 3.0));
	CHECK_INT(json_integer_value(json_object_get(level_group(report, 0), "level")), 3);
	CHECK(json_is_null(json_object_get(level_group(report, 1), "level")));
	CHECK(json_is_true(
	    json_object_get(json_array_get(json_object_get(report, "rows"), 1), "credited")));
	json_decref(report);
}

static void
test_csv(void)
{
	json_t *sessions = json_pack("[o, o]", session("a", 1, "done", "correct", 2.0, 1.0, 1),
				     session("b,\"x\"", 2, "failed", NULL, 0, 0, 0));
	json_t *report = build(batch_of(sessions));
	char *rows = kagent_report_rows_csv(report), *summary = kagent_report_summary_csv(report);

	CHECK_CONTAINS(rows, "problem,level,session,state,status,correct,credited,"
			     "speedup_vs_eager,speedup_vs_compile,turns,input_tokens,"
			     "output_tokens,tokens,cost,gpu_seconds,wall_seconds,gpu_name\n");
	CHECK_CONTAINS(rows, "\na,1,a,done,correct,true,true,2,1,7,1000,250,1250,0.5,12.5,60,\n");
	/* Quoted where it holds a comma or a quote; null speedups are empty fields. */
	CHECK_CONTAINS(rows, "\n\"b,\"\"x\"\"\",2,\"b,\"\"x\"\"\",failed,failed,false,false,,,7,");
	CHECK_CONTAINS(summary, "level,problems,correct,correct_rate,credited,fast_0_eager,");
	CHECK_CONTAINS(summary, "\nall,2,1,0.5,1,0.5,0.5,0,0.5,0,0,2,1\n");
	CHECK_CONTAINS(summary, "\n1,1,1,1,1,1,1,0,1,0,0,2,1\n");
	CHECK_CONTAINS(summary, "\n2,1,0,0,0,0,0,0,0,0,0,,\n");
	free(rows);
	free(summary);
	json_decref(report);
}

static void
test_refuses_a_batch_without_sessions(void)
{
	json_t *report = NULL, *batch = json_pack("{s:s}", "id", "b-1");
	char *cause = NULL;

	CHECK_INT(kagent_report_build(batch, &report, &cause), -EINVAL);
	CHECK(report == NULL);
	CHECK_CONTAINS(cause, "no sessions");
	free(cause);
	json_decref(batch);
}

/* Sessions of one batch measured on two GPU models (two daemons): the report names both and
 * says they are mixed; one model, or none known (the CPU), is not mixed. */
static void
test_gpu_names(void)
{
	json_t *first = session("a", 1, "done", "correct", 2.0, 1.0, 1),
	       *second = session("b", 1, "done", "correct", 3.0, 1.5, 1),
	       *third = session("c", 1, "failed", NULL, 0, 0, 0), *report, *summary;

	json_object_set_new(first, "gpu_name", json_string("NVIDIA H100 80GB HBM3"));
	json_object_set_new(second, "gpu_name", json_string("NVIDIA H200"));
	json_object_set_new(third, "gpu_name", json_string("NVIDIA H100 80GB HBM3"));
	report = build(batch_of(json_pack("[O, O, O]", first, second, third)));
	summary = json_object_get(report, "summary");
	CHECK(json_is_true(json_object_get(summary, "mixed_gpus")));
	CHECK_INT(json_array_size(json_object_get(summary, "gpu_names")), 2);
	CHECK_STRING(json_string_value(json_array_get(json_object_get(summary, "gpu_names"), 0)),
		     "NVIDIA H100 80GB HBM3");
	CHECK_STRING(json_string_value(json_array_get(json_object_get(summary, "gpu_names"), 1)),
		     "NVIDIA H200");
	CHECK_STRING(json_string_value(json_object_get(
			 json_array_get(json_object_get(report, "rows"), 1), "gpu_name")),
		     "NVIDIA H200");
	json_decref(report);
	json_object_set_new(second, "gpu_name", json_string("NVIDIA H100 80GB HBM3"));
	json_object_del(third, "gpu_name");
	report = build(batch_of(json_pack("[O, O, O]", first, second, third)));
	summary = json_object_get(report, "summary");
	CHECK(json_is_false(json_object_get(summary, "mixed_gpus")));
	CHECK_INT(json_array_size(json_object_get(summary, "gpu_names")), 1);
	CHECK(json_is_null(
	    json_object_get(json_array_get(json_object_get(report, "rows"), 2), "gpu_name")));
	json_decref(report);
	json_decref(first);
	json_decref(second);
	json_decref(third);
}

static const struct kagent_test tests[] = {
    {"gpu_names", test_gpu_names},
    {"mixed_batch", test_mixed_batch},
    {"nothing_correct", test_nothing_correct},
    {"uncredited_fast_result", test_uncredited_fast_result},
    {"missing_compile_and_level", test_missing_compile_and_level},
    {"unconfirmed_runs", test_unconfirmed_runs},
    {"csv", test_csv},
    {"refuses_a_batch_without_sessions", test_refuses_a_batch_without_sessions},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
