/* Unit tests for evidence bundles (tools/evaluator/evidence.c): write, load, refuse a changed
 * bundle, and the comparison kagent verify prints. */
#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/sha256.h"
#include "kagent/evaluator/evidence.h"

#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PROBLEM_TEXT "class Model: pass\n"
#define CANDIDATE_TEXT "class ModelNew: pass\n"

/* A verdict as kagent eval builds one: status, a GPU, the eager speedup and its interval. */
static json_t *
verdict_at(const char *status, const char *gpu, double speedup, double low, double high)
{
	char problem[KAGENT_SHA256_HEX_SIZE], candidate[KAGENT_SHA256_HEX_SIZE];

	kagent_sha256_hex(PROBLEM_TEXT, strlen(PROBLEM_TEXT), problem);
	kagent_sha256_hex(CANDIDATE_TEXT, strlen(CANDIDATE_TEXT), candidate);
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}, s:[{s:i, s:s}], s:{s:s?}, "
			 "s:{s:f, s:[f, f], s:n, s:n, s:{s:i, s:s, s:[f]}}}",
			 "schema", "kagent.verdict/1", "status", status, "problem", "sha256",
			 problem, "candidate", "sha256", candidate, "backend", "triton", "trials",
			 "seed", 41, "distribution", "problem", "environment", "gpu", gpu, "timing",
			 "speedup_vs_eager", speedup, "speedup_vs_eager_ci95", low, high,
			 "speedup_vs_compile", "speedup_vs_compile_ci95", "candidate", "calls", 1,
			 "stop", "tight", "samples_ms", 1.0);
}

/* The same, with the speedup in the middle of its interval. */
static json_t *
verdict(const char *status, const char *gpu, double low, double high)
{
	return verdict_at(status, gpu, (low + high) / 2, low, high);
}

/* Writes the two sources into directory and returns options naming them. */
static struct kagent_evaluation_options
sources(const char *directory, char **problem, char **candidate)
{
	struct kagent_evaluation_options options = {.device = "cpu", .measure_compile = 1};
	char *cause = NULL;

	*problem = kagent_asprintf("%s/p.py", directory);
	*candidate = kagent_asprintf("%s/c.py", directory);
	CHECK_INT(kagent_fileio_write_atomic(*problem, PROBLEM_TEXT, strlen(PROBLEM_TEXT), &cause),
		  0);
	CHECK_INT(
	    kagent_fileio_write_atomic(*candidate, CANDIDATE_TEXT, strlen(CANDIDATE_TEXT), &cause),
	    0);
	options.problem_path = *problem;
	options.candidate_path = *candidate;
	return options;
}

static void
test_write_and_load(void)
{
	char *directory = kagent_test_make_directory(), *problem, *candidate, *cause = NULL;
	struct kagent_evaluation_options options = sources(directory, &problem, &candidate),
					 again = {0};
	char *bundle_path = kagent_asprintf("%s/bundle/deeper", directory);
	json_t *recorded = verdict("correct", "H100", 1.4, 1.6);
	struct kagent_evidence bundle;

	options.signed_trials = -1;
	options.speedup_basis = KAGENT_VERDICT_BASIS_WALL;
	json_object_set_new(json_object_get(recorded, "timing"), "basis", json_string("wall"));
	json_object_set_new(json_object_get(recorded, "timing"), "wall",
			    json_pack("{s:{s:i, s:s, s:[f]}}", "candidate", "calls", 1, "stop",
				      "wall-stop", "samples_ms", 1.0));
	CHECK_INT(kagent_evidence_write(bundle_path, recorded, &options, &cause), 0);
	CHECK_INT(kagent_evidence_load(bundle_path, &bundle, &cause), 0);
	CHECK(json_equal(bundle.verdict, recorded));
	CHECK_STRING(json_string_value(json_object_get(bundle.evidence, "schema")),
		     KAGENT_EVIDENCE_SCHEMA);
	CHECK_STRING(
	    json_string_value(json_object_get(
		json_object_get(json_object_get(bundle.evidence, "samples"), "candidate"), "stop")),
	    "tight");
	/* Both bases' samples per arm, null where the verdict has no such basis. */
	CHECK_STRING(json_string_value(json_object_get(
			 json_object_get(
			     json_object_get(json_object_get(bundle.evidence, "samples"), "wall"),
			     "candidate"),
			 "stop")),
		     "wall-stop");
	CHECK(json_is_null(json_object_get(json_object_get(bundle.evidence, "samples"), "device")));
	CHECK_STRING(json_string_value(
			 json_object_get(json_object_get(bundle.evidence, "samples"), "basis")),
		     "wall");
	CHECK_STRING(json_string_value(json_object_get(json_object_get(bundle.evidence, "options"),
						       "speedup_basis")),
		     "wall");
	kagent_evidence_options(&bundle, &again);
	CHECK_INT(again.speedup_basis, KAGENT_VERDICT_BASIS_WALL);
	CHECK_INT((int)again.seed, 41);
	CHECK_INT(again.trials, 3);
	CHECK_INT(again.signed_trials, -1);
	CHECK_STRING(again.device, "cpu");
	CHECK_CONTAINS(again.candidate_path, "/bundle/deeper/candidate.py");
	kagent_evidence_free(&bundle);
	json_decref(recorded);
	free(bundle_path);
	free(problem);
	free(candidate);
	free(directory);
}

static void
test_changed_bundle(void)
{
	char *directory = kagent_test_make_directory(), *problem, *candidate, *cause = NULL;
	struct kagent_evaluation_options options = sources(directory, &problem, &candidate);
	char *bundle_path = kagent_asprintf("%s/bundle", directory);
	char *copy = kagent_asprintf("%s/candidate.py", bundle_path);
	json_t *recorded = verdict("correct", "H100", 1.4, 1.6);
	struct kagent_evidence bundle;

	CHECK_INT(kagent_evidence_write(bundle_path, recorded, &options, &cause), 0);
	CHECK_INT(kagent_fileio_write_atomic(copy, "x", 1, &cause), 0);
	CHECK_INT(kagent_evidence_load(bundle_path, &bundle, &cause), -EINVAL);
	CHECK_CONTAINS(cause, "does not match its sha256");
	free(cause);
	cause = NULL;
	/* a source edited between the verdict and the bundle is refused too */
	CHECK_INT(kagent_fileio_write_atomic(candidate, "y", 1, &cause), 0);
	CHECK_INT(kagent_evidence_write(bundle_path, recorded, &options, &cause), -ESTALE);
	CHECK_CONTAINS(cause, "changed since it was evaluated");
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_evidence_load(directory, &bundle, &cause), -ENOENT);
	free(cause);
	json_decref(recorded);
	free(copy);
	free(bundle_path);
	free(problem);
	free(candidate);
	free(directory);
}

/* verified: kagent_evidence_compare's verdict on then against now (both released). */
static int
verified_with_floor(json_t *then, json_t *now, double floor)
{
	json_t *comparison = kagent_evidence_compare(then, now, floor);
	int result = json_is_true(json_object_get(comparison, "verified"));

	json_decref(comparison);
	json_decref(then);
	json_decref(now);
	return result;
}

/* The same with the default floor. */
static int
verified(json_t *then, json_t *now)
{
	return verified_with_floor(then, now, KAGENT_EVIDENCE_INTERVAL_FLOOR);
}

static void
test_compare(void)
{
	json_t *then = verdict("correct", "H100", 1.4, 1.6),
	       *now = verdict("correct", "H100", 1.7, 1.9);
	json_t *comparison;
	char *text = NULL;
	size_t size = 0;
	FILE *stream;

	CHECK(verified(verdict("correct", "H100", 1.4, 1.6), verdict("correct", "H100", 1.5, 1.7)));
	CHECK(
	    !verified(verdict("correct", "H100", 1.4, 1.6), verdict("correct", "H100", 1.7, 1.9)));
	/* another GPU model, or the CPU: only the status counts */
	CHECK(verified(verdict("correct", "H100", 1.4, 1.6), verdict("correct", "H200", 2.0, 2.2)));
	CHECK(verified(verdict("correct", NULL, 1.4, 1.6), verdict("correct", NULL, 0.2, 0.3)));
	CHECK(!verified(verdict("correct", "H100", 1.4, 1.6),
			verdict("incorrect", "H100", 1.4, 1.6)));
	comparison = kagent_evidence_compare(then, now, KAGENT_EVIDENCE_INTERVAL_FLOOR);
	CHECK(json_is_false(
	    json_object_get(json_object_get(comparison, "speedup_vs_eager"), "overlap")));
	CHECK(json_is_null(
	    json_object_get(json_object_get(comparison, "speedup_vs_compile"), "overlap")));
	CHECK_CONTAINS(json_string_value(json_object_get(comparison, "reason")), "do not overlap");
	stream = open_memstream(&text, &size);
	kagent_evidence_render_comparison(comparison, stream);
	fclose(stream);
	CHECK_CONTAINS(text, "not verified: ");
	CHECK_CONTAINS(text,
		       "vs eager    then 1.50x [1.40, 1.60], now 1.80x [1.70, 1.90]: no overlap");
	free(text);
	json_decref(comparison);
	json_decref(then);
	json_decref(now);
}

/*
 * The floor on the intervals' half-width, on the numbers LeNet5's replay recorded on an H100
 * (docs/benchmarks.md): 0.996x [0.9957, 0.9967] then, 0.998x [0.9975, 0.9980] now.
 */
static void
test_interval_floor(void)
{
	json_t *then = verdict_at("correct", "H100", 0.996, 0.9957, 0.9967);
	json_t *now = verdict_at("correct", "H100", 0.998, 0.9975, 0.9980);
	json_t *comparison;

	/* the intervals as measured do not overlap: 0.14% apart, each 0.1% wide */
	comparison = kagent_evidence_compare(then, now, 0);
	CHECK(json_is_false(json_object_get(comparison, "verified")));
	json_decref(comparison);
	/* widened to 2% of the speedup either side, they do */
	comparison = kagent_evidence_compare(then, now, KAGENT_EVIDENCE_INTERVAL_FLOOR);
	CHECK(json_is_true(json_object_get(comparison, "verified")));
	CHECK(json_is_true(
	    json_object_get(json_object_get(comparison, "speedup_vs_eager"), "overlap")));
	CHECK(json_number_value(json_object_get(comparison, "interval_floor")) == 0.02);
	/* the reported intervals stay the measured ones */
	CHECK(json_number_value(json_array_get(
		  json_object_get(json_object_get(comparison, "speedup_vs_eager"), "then_ci95"),
		  0)) == 0.9957);
	json_decref(comparison);
	/* 0.1% apart but 5% apart in speedup: the floor does not hide a real change */
	CHECK(!verified(verdict_at("correct", "H100", 1.00, 0.999, 1.001),
			verdict_at("correct", "H100", 1.05, 1.049, 1.051)));
	/* a floor of 3% takes in 5% (1.00 + 3% meets 1.05 - 3%) */
	CHECK(verified_with_floor(verdict_at("correct", "H100", 1.00, 0.999, 1.001),
				  verdict_at("correct", "H100", 1.05, 1.049, 1.051), 0.03));
	/* an interval wider than the floor keeps its own width */
	CHECK(verified(verdict_at("correct", "H100", 1.0, 0.8, 1.2),
		       verdict_at("correct", "H100", 1.3, 1.19, 1.4)));
	CHECK(!verified(verdict_at("correct", "H100", 1.0, 0.8, 1.2),
			verdict_at("correct", "H100", 1.3, 1.25, 1.4)));
	json_decref(then);
	json_decref(now);
}

static void
test_options_from_verdict(void)
{
	struct kagent_evaluation_options options = {.seed = 99, .device = "cuda"};
	json_t *recorded = json_pack(
	    "{s:[{s:s, s:i}, {s:s, s:i}, {s:s, s:i}, {s:s, s:i}], s:{s:s}, s:{s:s, s:i}}", "trials",
	    "distribution", "problem", "seed", 41, "distribution", "problem", "seed", 42,
	    "distribution", "signed", "seed", 43, "distribution", "problem", "seed", 44, "timing",
	    "basis", "wall", "environment", "device", "cpu", "device_queues", 4);

	kagent_evidence_options_from_verdict(recorded, &options);
	CHECK_INT(options.seed, 41);
	CHECK_INT(options.trials, 3);
	CHECK_INT(options.signed_trials, 1);
	CHECK_STRING(options.device, "cpu");
	CHECK_INT(options.speedup_basis, KAGENT_VERDICT_BASIS_WALL);
	CHECK_INT(options.device_queues, 4); /* re-timed as the children were made */
	json_decref(recorded);
	/* a verdict without trials (a compile error): fresh seeds, the defaults, on the GPU */
	recorded =
	    json_pack("{s:[], s:n, s:{s:s}}", "trials", "timing", "environment", "device", "cuda");
	kagent_evidence_options_from_verdict(recorded, &options);
	CHECK_INT(options.seed, 0);
	CHECK_INT(options.trials, 0);
	CHECK_INT(options.signed_trials, -1);
	CHECK_STRING(options.device, "cuda");
	CHECK_INT(options.speedup_basis, KAGENT_VERDICT_BASIS_DEVICE);
	CHECK_INT(options.device_queues, 0);
	json_decref(recorded);
}

static const struct kagent_test tests[] = {
    {"write_and_load", test_write_and_load},
    {"changed_bundle", test_changed_bundle},
    {"compare", test_compare},
    {"interval_floor", test_interval_floor},
    {"options_from_verdict", test_options_from_verdict},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
