/* Unit tests for tools/evaluator/verdict.c: every status, every named check, and garbage results.
 */
#include "kagent/cuda/cuda_driver.h"
#include "kagent/evaluator/verdict.h"
#include "test.h"

#include <errno.h>
#include <math.h>

/* A correct CUDA result, which each test bends into the case it checks. */
static const char base_result[] =
    "{\"type\": \"result\", \"id\": \"t\", \"wall_seconds\": 2.4,"
    " \"judge_process\": {\"exit_code\": 0, \"signal\": null, \"stderr\": \"\"},"
    " \"candidate_process\": {\"exit_code\": 0, \"signal\": null, \"killed_for_timeout\": false,"
    "   \"stdout\": \"hi\\n\", \"stderr\": \"\", \"stdout_bytes\": 3, \"stderr_bytes\": 0},"
    " \"judge\": {\"problem_error\": null, \"phase\": \"done\", \"candidate_error\": null,"
    "   \"environment\": {\"device\": \"cuda\", \"gpu\": \"NVIDIA H100 80GB HBM3\","
    "     \"compute_capability\": \"9.0\", \"torch\": \"2.11.0\", \"triton\": \"3.6.0\","
    "     \"cuda_runtime\": \"13.0\", \"python\": \"3.12.3\","
    "     \"device_queues\": 1,"
    "     \"clocks\": {\"sm_mhz\": 1980, \"memory_mhz\": 2619, \"sm_max_mhz\": \"fast\"}},"
    "   \"trials\": ["
    "     {\"seed\": 101, \"distribution\": \"problem\", \"passed\": true,"
    "      \"inputs_unchanged\": true, \"reason\": null, \"outputs\": ["
    "       {\"path\": \"output[0]\", \"kind\": \"tensor\", \"dtype\": \"float32\","
    "        \"shape\": [16, 16], \"candidate_dtype\": \"float32\", \"candidate_shape\": [16, 16],"
    "        \"max_abs\": 0.0, \"max_rel\": 0.0, \"norm_rel\": 0.0, \"mismatch_fraction\": 0.0,"
    "        \"first_mismatch\": null, \"nonfinite\": 0, \"passed\": true, \"reason\": null}]},"
    "     {\"seed\": 102, \"distribution\": \"problem\", \"passed\": true,"
    "      \"inputs_unchanged\": true, \"reason\": null, \"outputs\": ["
    "       {\"path\": \"output[0]\", \"kind\": \"tensor\", \"dtype\": \"float32\","
    "        \"shape\": [16, 16], \"candidate_dtype\": \"float32\", \"candidate_shape\": [16, 16],"
    "        \"max_abs\": 0.0, \"max_rel\": 0.0, \"norm_rel\": 0.0, \"mismatch_fraction\": 0.0,"
    "        \"first_mismatch\": null, \"nonfinite\": 0, \"passed\": true, \"reason\": null}]},"
    "     {\"seed\": 201, \"distribution\": \"signed\", \"passed\": true,"
    "      \"inputs_unchanged\": true, \"reason\": null, \"outputs\": []}],"
    "   \"signed_skipped\": null,"
    "   \"degenerate\": {\"constant_output\": false, \"zeros_pass\": false, \"identity_pass\": "
    "false},"
    "   \"timing\": {\"method\": \"judge wall clock\", \"order\": \"interleaved\","
    "     \"null_overhead_ms\": 0.012,"
    "     \"candidate\": {\"device\": {\"calls\": 40, \"median_ms\": 2.0, \"min_ms\": 1.9,"
    "       \"max_ms\": 2.2, \"p10_ms\": 1.9, \"p90_ms\": 2.1, \"mean_ms\": 2.0, \"stdev_ms\": "
    "0.05},"
    "       \"wall\": {\"calls\": 40, \"median_ms\": 2.5, \"min_ms\": 2.4, \"max_ms\": 2.7,"
    "       \"p10_ms\": 2.4, \"p90_ms\": 2.6, \"mean_ms\": 2.5, \"stdev_ms\": 0.05}},"
    "     \"device_note\": null, \"boundary\": {\"sync\": \"per call\"},"
    "     \"verified_calls\": 5, \"verification_failures\": 0},"
    "   \"baselines\": {\"eager\": {\"device\": {\"calls\": 40, \"median_ms\": 3.0},"
    "       \"wall\": {\"calls\": 40, \"median_ms\": 3.5}},"
    "     \"compile\": {\"device\": {\"calls\": 40, \"median_ms\": 4.0},"
    "       \"wall\": {\"calls\": 40, \"median_ms\": 4.5}}, \"compile_error\": null,"
    "     \"bandwidth_bytes_per_second\": 3.2e12, \"measured\": true},"
    "   \"kernels\": {\"own_ms\": 1.9, \"total_ms\": 2.0, \"own_share\": 0.95,"
    "     \"own_names\": [\"relu_kernel\"], \"launches\": [{\"name\": \"relu_kernel\","
    "     \"count\": 1, \"ms\": 1.9, \"own\": true}]},"
    "   \"tamper\": [],"
    "   \"timing_window\": {\"device\": \"cuda\", \"gpu_index\": 1, \"start_unix\": 100.5,"
    "     \"end_unix\": 101.25},"
    "   \"roofline\": {\"bytes\": 2048, \"floor_ms\": 1.0}}}";

static json_t *
load(const char *text)
{
	json_error_t error;
	json_t *value = json_loads(text, JSON_DECODE_ANY, &error);

	if (value == NULL)
		fprintf(stderr, "fixture: %s at %d\n", error.text, error.position);
	CHECK(value != NULL);
	return value;
}

static json_t *
judge_of(json_t *result)
{
	return json_object_get(result, "judge");
}

static json_t *
output_of(json_t *result, size_t trial)
{
	json_t *trials = json_object_get(judge_of(result), "trials");

	return json_array_get(json_object_get(json_array_get(trials, trial), "outputs"), 0);
}

/* One arm's summary in one basis of a result: arm_of(result, "eager", "wall"). */
static json_t *
arm_of(json_t *result, const char *arm, const char *basis)
{
	json_t *judge = judge_of(result);
	json_t *pair =
	    json_object_get(strcmp(arm, "candidate") == 0 ? json_object_get(judge, "timing")
							  : json_object_get(judge, "baselines"),
			    arm);

	return json_object_get(pair, basis);
}

static void
fail_trial(json_t *result, size_t trial)
{
	json_t *trials = json_object_get(judge_of(result), "trials");

	json_object_set_new(json_array_get(trials, trial), "passed", json_false());
}

/* Builds a verdict on a device in a basis, under a credit threshold (0: the default). */
static json_t *
build_in(json_t *result, double credit_threshold, enum kagent_verdict_basis basis,
	 const char *device)
{
	struct kagent_gpu_info gpu = {.index = 0, .device_count = 1};
	struct kagent_verdict_input in = {
	    .result = result,
	    .problem_path = "/p.py",
	    .problem_sha256 = "aa",
	    .candidate_path = "/c.py",
	    .candidate_sha256 = "bb",
	    .backend = "triton",
	    .device = device,
	    .gpu = &gpu,
	    .wall_seconds = 3.5,
	    .credit_threshold = credit_threshold,
	    .basis = basis,
	};
	json_t *verdict = NULL;
	char *cause = NULL;
	int error;

	snprintf(gpu.driver, sizeof gpu.driver, "13.0");
	error = kagent_verdict_build(&in, &verdict, &cause);
	if (error != 0)
		fprintf(stderr, "build failed: %s\n", cause);
	CHECK_INT(error, 0);
	CHECK(verdict != NULL);
	return verdict;
}

/* Builds a verdict under a credit threshold (0: the default); expects success. */
static json_t *
build_with_threshold(json_t *result, double credit_threshold)
{
	return build_in(result, credit_threshold, KAGENT_VERDICT_BASIS_DEVICE, "cuda");
}

/* Builds a verdict; expects success. */
static json_t *
build(json_t *result)
{
	return build_with_threshold(result, 0);
}

/* Builds a verdict; expects failure with a cause containing the text. */
static void
build_fails(const json_t *result, int expected, const char *text)
{
	struct kagent_verdict_input in = {.result = result, .device = "cpu"};
	json_t *verdict = NULL;
	char *cause = NULL;

	CHECK_INT(kagent_verdict_build(&in, &verdict, &cause), expected);
	CHECK(verdict == NULL);
	CHECK_CONTAINS(cause, text);
	free(cause);
}

static const char *
status_of(const json_t *verdict)
{
	return json_string_value(json_object_get(verdict, "status"));
}

static const char *
reason_of(const json_t *verdict)
{
	return json_string_value(json_object_get(verdict, "reason"));
}

/* The detail of a named violation, or NULL when the check did not fail. */
static const char *
violation(const json_t *verdict, const char *check)
{
	const json_t *item;
	size_t index;

	json_array_foreach(json_object_get(verdict, "violations"), index, item)
	{
		if (strcmp(json_string_value(json_object_get(item, "check")), check) == 0)
			return json_string_value(json_object_get(item, "detail"));
	}
	return NULL;
}

static void
test_status_names(void)
{
	CHECK_STRING(kagent_verdict_status_name(KAGENT_VERDICT_CORRECT), "correct");
	CHECK_STRING(kagent_verdict_status_name(KAGENT_VERDICT_COMPILE_ERROR), "compile_error");
	CHECK_STRING(kagent_verdict_status_name(KAGENT_VERDICT_STATUS_COUNT), "unknown");
	CHECK_INT(kagent_verdict_status_from_name("runtime_error"), KAGENT_VERDICT_RUNTIME_ERROR);
	CHECK_INT(kagent_verdict_status_from_name("nope"), -EINVAL);
	CHECK_INT(kagent_verdict_status_from_name(NULL), -EINVAL);
}

static void
test_correct(void)
{
	json_t *result = load(base_result), *verdict = build(result);
	json_t *timing = json_object_get(verdict, "timing");

	CHECK_STRING(status_of(verdict), "correct");
	CHECK_CONTAINS(reason_of(verdict), "all 3 trials passed");
	CHECK_CONTAINS(reason_of(verdict), "1.50x");
	CHECK_STRING(json_string_value(json_object_get(verdict, "schema")), "kagent.verdict/1");
	CHECK(json_real_value(json_object_get(timing, "speedup_vs_eager")) == 1.5);
	CHECK(json_real_value(json_object_get(timing, "speedup_vs_compile")) == 2.0);
	CHECK(json_is_false(json_object_get(timing, "baselines_cached")));
	/* the judge's order of the arms passes through (docs/verdict.md) */
	CHECK_STRING(json_string_value(json_object_get(timing, "order")), "interleaved");
	{
		/* and when it held the device's timing lock alone, for kagentd's log */
		const json_t *window = json_object_get(verdict, "timing_window");

		CHECK_INT(json_integer_value(json_object_get(window, "gpu_index")), 1);
		CHECK(json_real_value(json_object_get(window, "start_unix")) == 100.5);
		CHECK(json_real_value(json_object_get(window, "end_unix")) == 101.25);
	}
	CHECK_INT(json_array_size(json_object_get(verdict, "violations")), 0);
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 0);
	CHECK_INT(json_array_size(json_object_get(verdict, "trials")), 3);
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(verdict, "environment"), "driver")),
	    "13.0");
	CHECK_INT(json_integer_value(
		      json_object_get(json_object_get(verdict, "environment"), "device_queues")),
		  1);
	{
		/* the judge's clocks pass through; a value that is no integer becomes null */
		const json_t *clocks =
		    json_object_get(json_object_get(verdict, "environment"), "clocks");

		CHECK_INT(json_integer_value(json_object_get(clocks, "sm_mhz")), 1980);
		CHECK_INT(json_integer_value(json_object_get(clocks, "memory_mhz")), 2619);
		CHECK(json_is_null(json_object_get(clocks, "sm_max_mhz")));
		CHECK(json_is_null(json_object_get(clocks, "memory_max_mhz")));
	}
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(verdict, "candidate"), "backend")),
	    "triton");
	CHECK_STRING(json_string_value(
			 json_object_get(json_object_get(verdict, "candidate_output"), "stdout")),
		     "hi\n");
	CHECK_INT(kagent_verdict_exit_status(verdict), 0);
	json_decref(verdict);
	json_decref(result);
}

static void
test_speedup_null_without_compile(void)
{
	json_t *result = load(base_result), *verdict;

	json_object_set_new(json_object_get(judge_of(result), "baselines"), "compile", json_null());
	json_object_set_new(json_object_get(judge_of(result), "baselines"), "measured",
			    json_false());
	verdict = build(result);
	CHECK(json_is_null(
	    json_object_get(json_object_get(verdict, "timing"), "speedup_vs_compile")));
	CHECK(
	    json_is_true(json_object_get(json_object_get(verdict, "timing"), "baselines_cached")));
	json_decref(verdict);
	json_decref(result);
}

/* The torch.compile baseline abandoned past its cap: eager's speedup stands, compile's is null,
 * and the verdict says why; a compile that failed on its own says so differently. */
static void
test_compile_abandoned(void)
{
	json_t *result = load(base_result), *verdict, *timing, *baselines;

	baselines = json_object_get(judge_of(result), "baselines");
	json_object_set_new(baselines, "compile", json_null());
	json_object_set_new(baselines, "compile_error",
			    json_string("torch.compile baseline exceeded 60 s (the cap on waiting "
					"for it: evaluation.compile_timeout_seconds, "
					"--compile-timeout)"));
	json_object_set_new(baselines, "compile_timeout_seconds", json_integer(60));
	verdict = build(result);
	timing = json_object_get(verdict, "timing");
	CHECK_STRING(status_of(verdict), "correct");
	CHECK(fabs(json_number_value(json_object_get(timing, "speedup_vs_eager")) - 1.5) < 1e-9);
	CHECK(json_is_null(json_object_get(timing, "speedup_vs_compile")));
	CHECK(json_is_null(json_object_get(timing, "compile")));
	CHECK_CONTAINS(json_string_value(json_object_get(timing, "compile_note")),
		       "torch.compile baseline exceeded 60 s");
	CHECK_CONTAINS(json_string_value(json_array_get(json_object_get(verdict, "warnings"), 0)),
		       "the torch.compile baseline was abandoned: torch.compile baseline exceeded "
		       "60 s");
	json_decref(verdict);
	/* failed on its own (no cap in the baselines) */
	json_object_del(baselines, "compile_timeout_seconds");
	json_object_set_new(baselines, "compile_error", json_string("BackendCompilerFailed: x"));
	verdict = build(result);
	CHECK_STRING(json_string_value(json_array_get(json_object_get(verdict, "warnings"), 0)),
		     "the torch.compile baseline failed: BackendCompilerFailed: x");
	json_decref(verdict);
	/* measured: no note */
	json_decref(result);
	result = load(base_result);
	verdict = build(result);
	CHECK(json_is_null(json_object_get(json_object_get(verdict, "timing"), "compile_note")));
	json_decref(verdict);
	json_decref(result);
}

static void
test_output_mismatch(void)
{
	json_t *result = load(base_result), *verdict, *output = output_of(result, 1);

	fail_trial(result, 1);
	json_object_set_new(output, "passed", json_false());
	json_object_set_new(output, "mismatch_fraction", json_real(0.375));
	json_object_set_new(output, "norm_rel", json_real(1.0));
	json_object_set_new(output, "first_mismatch", json_pack("[i, i]", 0, 3));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "incorrect");
	CHECK_STRING(reason_of(verdict),
		     "output[0] mismatches in trial 2 (seed 102): 37.5% of elements outside "
		     "tolerance, norm-relative error 1.0 > 0.002; first mismatch at [0, 3]");
	CHECK(violation(verdict, "output_mismatch") != NULL);
	CHECK_INT(kagent_verdict_exit_status(verdict), 1);
	json_decref(verdict);
	json_decref(result);
}

static void
test_nonfinite(void)
{
	json_t *result = load(base_result), *verdict, *output = output_of(result, 0);

	fail_trial(result, 0);
	json_object_set_new(output, "passed", json_false());
	json_object_set_new(output, "nonfinite", json_integer(12));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "incorrect");
	CHECK_CONTAINS(violation(verdict, "nonfinite_output"), "12 NaN or Inf");
	json_decref(verdict);
	json_decref(result);
}

static void
test_dtype_and_shape(void)
{
	json_t *result = load(base_result), *verdict;

	fail_trial(result, 0);
	json_object_set_new(output_of(result, 0), "passed", json_false());
	json_object_set_new(output_of(result, 0), "candidate_dtype", json_string("float16"));
	fail_trial(result, 1);
	json_object_set_new(output_of(result, 1), "passed", json_false());
	json_object_set_new(output_of(result, 1), "candidate_shape", json_pack("[i]", 256));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "incorrect");
	CHECK_STRING(violation(verdict, "dtype_mismatch"),
		     "output[0] has dtype float16 in trial 1 (seed 101), the reference float32");
	CHECK_STRING(violation(verdict, "shape_mismatch"),
		     "output[0] has shape [256] in trial 2 (seed 102), the reference [16, 16]");
	CHECK_CONTAINS(reason_of(verdict), "dtype float16");
	json_decref(verdict);
	json_decref(result);
}

static void
test_structure(void)
{
	json_t *result = load(base_result), *verdict;
	json_t *trial = json_array_get(json_object_get(judge_of(result), "trials"), 2);

	/* A failed trial with no failing output: the output count is wrong. */
	json_object_set_new(trial, "passed", json_false());
	json_object_set_new(trial, "reason",
			    json_string("candidate returned 2 outputs, the reference 1"));
	fail_trial(result, 0);
	json_object_set_new(output_of(result, 0), "passed", json_false());
	json_object_set_new(output_of(result, 0), "reason",
			    json_string("output[0] is missing: expected a tensor"));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "incorrect");
	CHECK_CONTAINS(reason_of(verdict), "output[0] in trial 1 (seed 101): output[0] is missing");
	CHECK(violation(verdict, "output_structure") != NULL);
	json_decref(verdict);
	/* The signed trial alone. */
	json_object_set_new(json_array_get(json_object_get(judge_of(result), "trials"), 0),
			    "passed", json_true());
	verdict = build(result);
	CHECK_CONTAINS(reason_of(verdict), "trial 3 (seed 201, signed inputs) failed: candidate "
					   "returned 2 outputs");
	json_decref(verdict);
	json_decref(result);
}

static void
test_input_mutation(void)
{
	json_t *result = load(base_result), *verdict;
	json_t *trial = json_array_get(json_object_get(judge_of(result), "trials"), 0);

	json_object_set_new(trial, "passed", json_false());
	json_object_set_new(trial, "inputs_unchanged", json_false());
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "incorrect");
	CHECK_STRING(reason_of(verdict), "the candidate changed its inputs in trial 1 (seed 101)");
	CHECK(violation(verdict, "input_mutation") != NULL);
	json_decref(verdict);
	json_decref(result);
}

static void
test_timed_output_mismatch(void)
{
	json_t *result = load(base_result), *verdict;

	json_object_set_new(json_object_get(judge_of(result), "timing"), "verification_failures",
			    json_integer(2));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "rejected");
	CHECK_CONTAINS(reason_of(verdict), "2 of 5 verified calls");
	CHECK(violation(verdict, "timed_output_mismatch") != NULL);
	json_decref(verdict);
	json_decref(result);
}

static void
test_timer_tampering(void)
{
	json_t *result = load(base_result), *verdict, *output = output_of(result, 0);

	/* Tampering outranks a failed trial and a crash (step 3). */
	fail_trial(result, 0);
	json_object_set_new(output, "passed", json_false());
	json_object_set_new(json_object_get(result, "candidate_process"), "signal",
			    json_integer(11));
	json_object_set_new(judge_of(result), "tamper",
			    json_pack("[s]", "torch.cuda.synchronize was replaced"));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "rejected");
	CHECK_CONTAINS(reason_of(verdict), "torch.cuda.synchronize was replaced");
	CHECK(violation(verdict, "timer_tampering") != NULL);
	CHECK(violation(verdict, "output_mismatch") != NULL);
	json_decref(verdict);
	json_decref(result);
}

static void
test_no_own_kernel(void)
{
	json_t *result = load(base_result), *verdict;

	json_object_set_new(judge_of(result), "kernels",
			    load("{\"own_ms\": 0, \"total_ms\": 3.1, \"own_share\": 0,"
				 " \"own_names\": [], \"launches\": [{\"name\": "
				 "\"at::native::vectorized_elementwise_kernel\", \"count\": 1,"
				 " \"ms\": 3.1, \"own\": false}]}"));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "rejected");
	CHECK_STRING(reason_of(verdict),
		     "forward launched no kernel of its own: all 3.1 ms of GPU time was in torch "
		     "kernels (at::native::vectorized_elementwise_kernel)");
	CHECK(violation(verdict, "no_own_kernel") != NULL);
	json_decref(verdict);
	json_decref(result);
}

static void
test_below_roofline(void)
{
	json_t *result = load(base_result), *verdict;

	json_object_set_new(json_object_get(judge_of(result), "roofline"), "floor_ms",
			    json_real(4.02));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "rejected");
	CHECK_CONTAINS(reason_of(verdict), "below the roofline floor of 4.02 ms");
	CHECK(violation(verdict, "below_roofline") != NULL);
	json_decref(verdict);
	json_decref(result);
}

/* sol_fraction: the higher of the roofline's and the compute floor over the median (2 ms). */
static void
test_sol_fraction(void)
{
	json_t *result = load(base_result), *verdict = build(result);

	CHECK(json_real_value(
		  json_object_get(json_object_get(verdict, "timing"), "sol_fraction")) == 0.5);
	json_decref(verdict);
	json_object_set_new(judge_of(result), "compute", json_pack("{s:f}", "floor_ms", 1.5));
	verdict = build(result);
	CHECK(json_real_value(
		  json_object_get(json_object_get(verdict, "timing"), "sol_fraction")) == 0.75);
	json_decref(verdict);
	json_object_set_new(judge_of(result), "roofline", json_null());
	json_object_set_new(judge_of(result), "compute", json_pack("{s:s}", "error", "no flops"));
	verdict = build(result);
	CHECK(json_is_null(json_object_get(json_object_get(verdict, "timing"), "sol_fraction")));
	json_decref(verdict);
	json_decref(result);
}

static void
test_cpu_skips_gpu_checks(void)
{
	json_t *result = load(base_result), *verdict;

	json_object_set_new(json_object_get(judge_of(result), "environment"), "device",
			    json_string("cpu"));
	json_object_set_new(judge_of(result), "kernels", json_null());
	json_object_set_new(judge_of(result), "roofline", json_null());
	json_object_set_new(judge_of(result), "timing_window", json_string("not an object"));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "correct");
	CHECK(json_is_null(json_object_get(verdict, "kernels")));
	CHECK(json_is_null(json_object_get(verdict, "timing_window")));
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 0);
	json_decref(verdict);
	json_decref(result);
}

/* A kernel profile of one forward: own_ms of the candidate's kernels in total_ms. */
static json_t *
profile_of(double own_ms, double total_ms)
{
	return json_pack("{s:f, s:f, s:f, s:[s], s:[]}", "own_ms", own_ms, "total_ms", total_ms,
			 "own_share", own_ms / total_ms, "own_names", "own_kernel", "launches");
}

static int
credited(const json_t *credit)
{
	return json_is_true(json_object_get(credit, "credited"));
}

static void
test_credit_rule(void)
{
	json_t *profile, *credit;

	/* At the threshold counts; just under does not; the default is 5%. */
	profile = profile_of(0.05, 1.0);
	credit = kagent_verdict_credit(profile, 0, NAN);
	CHECK(credited(credit));
	CHECK(json_real_value(json_object_get(credit, "threshold")) == 0.05);
	CHECK(json_real_value(json_object_get(credit, "own_share")) == 0.05);
	CHECK(json_real_value(json_object_get(credit, "library_share")) == 0.95);
	CHECK(json_real_value(json_object_get(credit, "library_ms")) == 0.95);
	json_decref(credit);
	json_decref(profile);
	profile = profile_of(0.0499, 1.0);
	credit = kagent_verdict_credit(profile, 0, NAN);
	CHECK(!credited(credit));
	CHECK_CONTAINS(json_string_value(json_object_get(credit, "reason")),
		       "own kernels ran 4.99% of the GPU time, under the 5% threshold");
	json_decref(credit);
	/* A threshold of the caller's. */
	credit = kagent_verdict_credit(profile, 0.04, NAN);
	CHECK(credited(credit));
	json_decref(credit);
	json_decref(profile);
	profile = profile_of(0.9, 1.0);
	credit = kagent_verdict_credit(profile, 0, NAN);
	CHECK(credited(credit));
	CHECK_CONTAINS(json_string_value(json_object_get(credit, "reason")),
		       "own kernels ran 90% of the GPU time, at least the 5% threshold");
	json_decref(credit);
	credit = kagent_verdict_credit(profile, 0.95, NAN);
	CHECK(!credited(credit));
	json_decref(credit);
	json_decref(profile);
	/* The profile comes from the candidate's process: more own time than total is capped. */
	profile = profile_of(7.0, 1.0);
	credit = kagent_verdict_credit(profile, 0, NAN);
	CHECK(json_real_value(json_object_get(credit, "own_share")) == 1.0);
	CHECK(json_real_value(json_object_get(credit, "library_ms")) == 0.0);
	json_decref(credit);
	json_decref(profile);
	/* No profile, or one without times: not measured, and credited. */
	credit = kagent_verdict_credit(NULL, 0, NAN);
	CHECK(credited(credit));
	CHECK(json_is_null(json_object_get(credit, "own_share")));
	CHECK_CONTAINS(json_string_value(json_object_get(credit, "reason")), "share not measured");
	json_decref(credit);
	profile = load("{\"own_ms\": \"a lot\", \"total_ms\": 0}");
	credit = kagent_verdict_credit(profile, 0, NAN);
	CHECK(credited(credit));
	CHECK(json_is_null(json_object_get(credit, "library_share")));
	json_decref(credit);
	json_decref(profile);
}

/* The level2 pattern: cuDNN's convolution and the candidate's fused epilogue, own about 20%. */
static void
test_credit_level2_pattern(void)
{
	json_t *result = load(base_result), *verdict, *credit;

	json_object_set_new(judge_of(result), "kernels", profile_of(0.4, 2.0));
	verdict = build(result);
	credit = json_object_get(verdict, "credit");
	CHECK_STRING(status_of(verdict), "correct");
	CHECK(credited(credit));
	CHECK(json_real_value(json_object_get(credit, "own_share")) == 0.2);
	CHECK_STRING(reason_of(verdict), "all 3 trials passed; 1.50x the speed of eager PyTorch");
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 0);
	json_decref(verdict);
	/* A stricter threshold of the caller's takes its credit away. */
	verdict = build_with_threshold(result, 0.25);
	CHECK(!credited(json_object_get(verdict, "credit")));
	CHECK(json_real_value(json_object_get(json_object_get(verdict, "credit"), "threshold")) ==
	      0.25);
	json_decref(verdict);
	json_decref(result);
}

/* The SDPA pattern: an empty kernel of its own, torch's attention for the work (0.015%). */
static void
test_credit_library_pattern(void)
{
	json_t *result = load(base_result), *verdict, *credit;
	char *text = NULL;
	size_t size = 0;
	FILE *stream;

	json_object_set_new(judge_of(result), "kernels", profile_of(0.0003, 2.0));
	verdict = build(result);
	credit = json_object_get(verdict, "credit");
	/* Correct all the same, and its speedup reported. */
	CHECK_STRING(status_of(verdict), "correct");
	CHECK(json_real_value(
		  json_object_get(json_object_get(verdict, "timing"), "speedup_vs_eager")) == 1.5);
	CHECK(!credited(credit));
	CHECK(fabs(json_real_value(json_object_get(credit, "own_share")) - 0.00015) < 1e-12);
	CHECK_CONTAINS(reason_of(verdict), "1.50x the speed of eager PyTorch, not credited: own "
					   "kernels ran 0.015% of the GPU time, under the 5% "
					   "threshold");
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 1);
	CHECK_CONTAINS(json_string_value(json_array_get(json_object_get(verdict, "warnings"), 0)),
		       "counts toward no best variant, target or report");
	stream = open_memstream(&text, &size);
	kagent_verdict_render_text(verdict, stream);
	fclose(stream);
	CHECK_CONTAINS(text, "credit     not credited: own kernels ran 0.015% of the GPU time");
	free(text);
	json_decref(verdict);
	json_decref(result);
}

static void
test_credit_not_measured(void)
{
	json_t *result = load(base_result), *verdict, *credit;

	/* On the CPU a profile, if any, is not the candidate's GPU time. */
	json_object_set_new(json_object_get(judge_of(result), "environment"), "device",
			    json_string("cpu"));
	verdict = build(result);
	credit = json_object_get(verdict, "credit");
	CHECK(credited(credit));
	CHECK(json_is_null(json_object_get(credit, "own_share")));
	CHECK_CONTAINS(json_string_value(json_object_get(credit, "reason")), "share not measured");
	json_decref(verdict);
	json_decref(result);
}

/* Sets an arm's samples_ms to count values from first, stepping by step. */
static void
set_samples(json_t *summary, size_t count, double first, double step)
{
	json_t *samples = json_array();
	size_t index;

	for (index = 0; index < count; index++)
		json_array_append_new(samples, json_real(first + step * (double)(index % 7)));
	json_object_set_new(summary, "samples_ms", samples);
}

/* The candidate's median from samples in two processes' groups: 10 calls at 1.0 ms, 30 at
 * 2.0 ms, grouped as process_calls says (text: a JSON array, or NULL for none). */
static double
median_in_processes(const char *process_calls)
{
	json_t *result = load(base_result), *verdict,
	       *summary = arm_of(result, "candidate", "device");
	json_t *samples = json_array();
	double median;
	int index;

	for (index = 0; index < 40; index++)
		json_array_append_new(samples, json_real(index < 10 ? 1.0 : 2.0));
	json_object_set_new(summary, "samples_ms", samples);
	if (process_calls != NULL)
		json_object_set_new(summary, "process_calls", load(process_calls));
	verdict = build(result);
	median = json_real_value(json_object_get(
	    json_object_get(json_object_get(verdict, "timing"), "candidate"), "median_ms"));
	json_decref(verdict);
	json_decref(result);
	return median;
}

static void
test_median_of_processes(void)
{
	/* The pooled calls' median: a third into the class of the tie at 2.0 (1.5 to 2.5). */
	double pooled = 2.5 - 1.0 * (1 - 10.0 / 30);

	/* Each process weighs alike: the mean of their medians, not the pooled calls' median. */
	CHECK(median_in_processes("[10, 30]") == 1.5);
	CHECK(fabs(median_in_processes(NULL) - pooled) < 1e-12);
	/* Counts that do not add up to the samples, or are not counts: one group. */
	CHECK(fabs(median_in_processes("[10, 20]") - pooled) < 1e-12);
	CHECK(fabs(median_in_processes("[10, \"30\"]") - pooled) < 1e-12);
	CHECK(fabs(median_in_processes("[40]") - pooled) < 1e-12);
}

static void
test_samples_and_intervals(void)
{
	json_t *result = load(base_result), *verdict, *timing, *candidate, *eager, *interval;

	set_samples(arm_of(result, "candidate", "device"), 40, 1.7, 0.1);
	set_samples(arm_of(result, "eager", "device"), 5000, 2.7, 0.1);
	json_object_set_new(arm_of(result, "compile", "device"), "samples_ms",
			    load("[4.0, \"fast\", 4.1]"));
	verdict = build(result);
	timing = json_object_get(verdict, "timing");
	candidate = json_object_get(timing, "candidate");
	eager = json_object_get(timing, "eager");
	/* The median from the samples (1.7 to 2.3 in steps of 0.1, each 5 or 6 times): the
	 * middle is the 2nd of the six 2.0s, so a third into 2.0's class (1.95 to 2.05). */
	CHECK(fabs(json_real_value(json_object_get(candidate, "median_ms")) - (1.95 + 0.1 / 3)) <
	      1e-12);
	CHECK(json_real_value(json_object_get(candidate, "p90_ms")) == 2.1);
	CHECK_INT(json_array_size(json_object_get(candidate, "samples_ms")), 40);
	interval = json_object_get(candidate, "ci95_ms");
	CHECK_INT(json_array_size(interval), 2);
	CHECK(json_real_value(json_array_get(interval, 0)) <= 2.0 &&
	      json_real_value(json_array_get(interval, 1)) >= 2.0);
	/* Capped: the first 4096 calls. */
	CHECK_INT(json_array_size(json_object_get(eager, "samples_ms")), 4096);
	CHECK_INT(json_integer_value(json_object_get(eager, "calls")), 40);
	interval = json_object_get(timing, "speedup_vs_eager_ci95");
	CHECK_INT(json_array_size(interval), 2);
	CHECK(json_real_value(json_array_get(interval, 0)) <=
	      json_real_value(json_object_get(timing, "speedup_vs_eager")));
	CHECK(json_real_value(json_array_get(interval, 1)) >=
	      json_real_value(json_object_get(timing, "speedup_vs_eager")));
	/* Garbage samples are dropped whole: the judge's median stays, with no interval. */
	CHECK(json_is_null(json_object_get(json_object_get(timing, "compile"), "samples_ms")));
	CHECK(json_is_null(json_object_get(json_object_get(timing, "compile"), "ci95_ms")));
	CHECK(fabs(json_real_value(json_object_get(timing, "speedup_vs_compile")) -
		   4.0 / (1.95 + 0.1 / 3)) < 1e-12); /* its 4.0 over the candidate's median */
	CHECK(json_is_null(json_object_get(timing, "speedup_vs_compile_ci95")));
	json_decref(verdict);
	json_decref(result);
	/* Without samples (an older cache, another judge), no intervals. */
	result = load(base_result);
	verdict = build(result);
	timing = json_object_get(verdict, "timing");
	CHECK(json_is_null(json_object_get(json_object_get(timing, "candidate"), "ci95_ms")));
	CHECK(json_is_null(json_object_get(timing, "speedup_vs_eager_ci95")));
	CHECK(json_real_value(json_object_get(json_object_get(timing, "candidate"), "median_ms")) ==
	      2.0);
	json_decref(verdict);
	json_decref(result);
}

/* timing[basis][key] (basis NULL: the top level) as a number; NAN when it is not one. */
static double
timing_number(const json_t *verdict, const char *basis, const char *key)
{
	const json_t *timing = json_object_get(verdict, "timing");
	const json_t *value = json_object_get(basis ? json_object_get(timing, basis) : timing, key);

	return json_is_number(value) ? json_number_value(value) : NAN;
}

static const char *
timing_string(const json_t *verdict, const char *key)
{
	return json_string_value(json_object_get(json_object_get(verdict, "timing"), key));
}

static int
near(double value, double expected)
{
	return fabs(value - expected) < 1e-9;
}

/* The default basis: device time at the top level, both bases beside it. */
static void
test_basis_device(void)
{
	json_t *result = load(base_result), *verdict = build(result);
	const json_t *timing = json_object_get(verdict, "timing");

	CHECK_STRING(timing_string(verdict, "basis"), "device");
	CHECK(json_is_null(json_object_get(timing, "basis_note")));
	CHECK(json_is_null(json_object_get(timing, "device_note")));
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(timing, "boundary"), "sync")),
	    "per call");
	CHECK(near(timing_number(verdict, NULL, "speedup_vs_eager"), 1.5));
	CHECK(near(timing_number(verdict, NULL, "speedup_vs_compile"), 2.0));
	CHECK(near(timing_number(verdict, "device", "speedup_vs_eager"), 1.5));
	CHECK(near(timing_number(verdict, "wall", "speedup_vs_eager"), 3.5 / 2.5));
	CHECK(near(timing_number(verdict, "wall", "speedup_vs_compile"), 4.5 / 2.5));
	CHECK(json_object_get(json_object_get(timing, "wall"), "speedup_vs_eager_ci95") != NULL);
	CHECK(json_object_get(json_object_get(timing, "wall"), "sol_fraction") == NULL);
	/* The top level is the device object's numbers, and sol_fraction its candidate's. */
	CHECK(json_equal(json_object_get(timing, "candidate"),
			 json_object_get(json_object_get(timing, "device"), "candidate")));
	CHECK(near(timing_number(verdict, NULL, "sol_fraction"), 0.5));
	CHECK(
	    near(json_number_value(json_object_get(json_object_get(timing, "eager"), "median_ms")),
		 3.0));
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 0);
	json_decref(verdict);
	json_decref(result);
}

static void
test_basis_wall(void)
{
	json_t *result = load(base_result);
	json_t *verdict = build_in(result, 0, KAGENT_VERDICT_BASIS_WALL, "cuda");
	const json_t *timing = json_object_get(verdict, "timing");

	CHECK_STRING(timing_string(verdict, "basis"), "wall");
	CHECK(json_is_null(json_object_get(timing, "basis_note")));
	CHECK(near(timing_number(verdict, NULL, "speedup_vs_eager"), 1.4));
	CHECK(near(timing_number(verdict, NULL, "speedup_vs_compile"), 1.8));
	CHECK(near(timing_number(verdict, "device", "speedup_vs_eager"), 1.5));
	CHECK(near(timing_number(verdict, NULL, "sol_fraction"), 1.0 / 2.5));
	CHECK_CONTAINS(reason_of(verdict), "1.40x");
	/* own_saved_ms in the wall basis: eager 3.5 less the forward's 2.0 ms of kernels. */
	CHECK(near(
	    json_number_value(json_object_get(json_object_get(verdict, "credit"), "own_saved_ms")),
	    1.5));
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 0);
	json_decref(verdict);
	json_decref(result);
}

/* Device time asked for, but the judge has none for an arm: all of it in wall, said twice. */
static void
test_basis_fallback(void)
{
	json_t *result = load(base_result), *verdict;
	json_t *timing = json_object_get(judge_of(result), "timing");
	const json_t *warnings;

	json_object_set_new(json_object_get(timing, "candidate"), "device", json_null());
	json_object_set_new(timing, "device_note", json_string("CUPTI unavailable: no libcupti"));
	verdict = build(result);
	CHECK_STRING(timing_string(verdict, "basis"), "wall");
	CHECK_CONTAINS(timing_string(verdict, "basis_note"),
		       "the candidate arm (CUPTI unavailable");
	CHECK_CONTAINS(timing_string(verdict, "basis_note"), "speedups are in wall time");
	CHECK_STRING(timing_string(verdict, "device_note"), "CUPTI unavailable: no libcupti");
	CHECK(near(timing_number(verdict, NULL, "speedup_vs_eager"), 1.4));
	/* The baselines' device numbers stay under device; with no candidate, no speedup. */
	CHECK(json_is_object(json_object_get(json_object_get(verdict, "timing"), "device")));
	CHECK(isnan(timing_number(verdict, "device", "speedup_vs_eager")));
	warnings = json_object_get(verdict, "warnings");
	CHECK_INT(json_array_size(warnings), 1);
	CHECK_STRING(json_string_value(json_array_get(warnings, 0)),
		     timing_string(verdict, "basis_note"));
	CHECK_STRING(status_of(verdict), "correct");
	json_decref(verdict);
	/* No device time at all: device is null, and a missing baseline is named too. */
	json_object_set_new(
	    json_object_get(json_object_get(judge_of(result), "baselines"), "eager"), "device",
	    json_null());
	json_object_set_new(
	    json_object_get(json_object_get(judge_of(result), "baselines"), "compile"), "device",
	    json_null());
	verdict = build(result);
	CHECK_CONTAINS(timing_string(verdict, "basis_note"), "the candidate, eager, compile arms");
	CHECK(json_is_null(json_object_get(json_object_get(verdict, "timing"), "device")));
	json_decref(verdict);
	/* On the CPU there is never device time: the note, but no warning. */
	json_object_set_new(json_object_get(judge_of(result), "environment"), "device",
			    json_string("cpu"));
	json_object_set_new(judge_of(result), "kernels", json_null());
	json_object_set_new(judge_of(result), "roofline", json_null());
	verdict = build_in(result, 0, KAGENT_VERDICT_BASIS_DEVICE, "cpu");
	CHECK_STRING(timing_string(verdict, "basis"), "wall");
	CHECK(timing_string(verdict, "basis_note") != NULL);
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 0);
	json_decref(verdict);
	json_decref(result);
}

/* An older judge or cached baseline: bare summaries are the wall clock's. */
static void
test_basis_bare_summaries(void)
{
	json_t *result = load(base_result), *verdict;
	json_t *timing = json_object_get(judge_of(result), "timing");
	json_t *baselines = json_object_get(judge_of(result), "baselines");

	json_object_set_new(timing, "candidate", load("{\"calls\": 40, \"median_ms\": 2.0}"));
	json_object_set_new(baselines, "eager", load("{\"calls\": 40, \"median_ms\": 3.0}"));
	json_object_set_new(baselines, "compile", load("{\"samples_ms\": [4.0, 4.0, 4.0]}"));
	json_object_del(timing, "device_note");
	json_object_del(timing, "boundary");
	verdict = build_in(result, 0, KAGENT_VERDICT_BASIS_WALL, "cuda");
	CHECK_STRING(timing_string(verdict, "basis"), "wall");
	CHECK(near(timing_number(verdict, NULL, "speedup_vs_eager"), 1.5));
	CHECK(near(timing_number(verdict, NULL, "speedup_vs_compile"), 2.0));
	CHECK(json_is_null(json_object_get(json_object_get(verdict, "timing"), "device")));
	CHECK(json_is_null(json_object_get(json_object_get(verdict, "timing"), "boundary")));
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 0);
	json_decref(verdict);
	/* Asked for device, the same result falls back to wall and says why. */
	verdict = build(result);
	CHECK_STRING(timing_string(verdict, "basis"), "wall");
	CHECK_CONTAINS(timing_string(verdict, "basis_note"), "no reason given");
	CHECK(near(timing_number(verdict, NULL, "speedup_vs_eager"), 1.5));
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 1);
	json_decref(verdict);
	json_decref(result);
}

/* Malformed pairs: those arms are null in every basis; the verdict still builds. */
static void
test_basis_malformed(void)
{
	static const char *const pairs[] = {
	    "{\"device\": 3, \"wall\": \"x\"}",
	    "[1, 2]",
	    "\"fast\"",
	    "{}",
	    "{\"device\": [], \"wall\": null}",
	    "{\"wall\": {\"median_ms\": \"slow\"}}",
	    "{\"device\": {\"samples_ms\": [1, -2]}, \"wall\": {\"samples_ms\": {}}}"};
	size_t index;

	for (index = 0; index < sizeof pairs / sizeof *pairs; index++) {
		json_t *result = load(base_result), *verdict;
		const json_t *timing;

		json_object_set_new(json_object_get(judge_of(result), "timing"), "candidate",
				    load(pairs[index]));
		json_object_set_new(json_object_get(judge_of(result), "baselines"), "eager",
				    load(pairs[index]));
		json_object_set_new(json_object_get(judge_of(result), "timing"), "boundary",
				    json_string("not an object"));
		json_object_set_new(json_object_get(judge_of(result), "timing"), "device_note",
				    json_integer(7));
		verdict = build_in(
		    result, 0, index % 2 ? KAGENT_VERDICT_BASIS_WALL : KAGENT_VERDICT_BASIS_DEVICE,
		    "cuda");
		timing = json_object_get(verdict, "timing");
		CHECK(json_is_object(timing));
		CHECK(isnan(timing_number(verdict, NULL, "speedup_vs_eager")));
		CHECK(isnan(timing_number(verdict, "wall", "speedup_vs_eager")));
		CHECK(json_is_null(json_object_get(timing, "boundary")));
		CHECK(json_is_null(json_object_get(timing, "device_note")));
		CHECK(json_is_null(
			  json_object_get(json_object_get(verdict, "credit"), "own_saved_ms")) ||
		      index == 6);
		json_decref(verdict);
		json_decref(result);
	}
}

/* own_saved_ms = eager - library - own, in the verdict's basis; null when one is unknown. */
static void
test_own_saved(void)
{
	json_t *profile = profile_of(0.5, 2.0), *credit, *result, *verdict;

	credit = kagent_verdict_credit(profile, 0, 3.0);
	/* eager 3.0, library 1.5, own 0.5: the own kernels did 1.5 ms of eager's work in 0.5. */
	CHECK(near(json_number_value(json_object_get(credit, "own_saved_ms")), 1.0));
	CHECK(near(json_number_value(json_object_get(credit, "library_ms")), 1.5));
	json_decref(credit);
	credit = kagent_verdict_credit(profile, 0, 1.5);
	CHECK(near(json_number_value(json_object_get(credit, "own_saved_ms")), -0.5));
	json_decref(credit);
	credit = kagent_verdict_credit(profile, 0, NAN);
	CHECK(json_is_null(json_object_get(credit, "own_saved_ms")));
	json_decref(credit);
	credit = kagent_verdict_credit(NULL, 0, 3.0);
	CHECK(json_is_null(json_object_get(credit, "own_saved_ms")));
	json_decref(credit);
	json_decref(profile);
	/* In a build: device eager 3.0 less the forward's 2.0 ms of kernels. */
	result = load(base_result);
	verdict = build(result);
	CHECK(near(
	    json_number_value(json_object_get(json_object_get(verdict, "credit"), "own_saved_ms")),
	    1.0));
	json_decref(verdict);
	json_object_set_new(json_object_get(judge_of(result), "baselines"), "eager", json_null());
	verdict = build(result);
	CHECK(json_is_null(json_object_get(json_object_get(verdict, "credit"), "own_saved_ms")));
	json_decref(verdict);
	json_decref(result);
}

static void
test_basis_names(void)
{
	CHECK_STRING(kagent_verdict_basis_name(KAGENT_VERDICT_BASIS_DEVICE), "device");
	CHECK_STRING(kagent_verdict_basis_name(KAGENT_VERDICT_BASIS_WALL), "wall");
	CHECK_STRING(kagent_verdict_basis_name(KAGENT_VERDICT_BASIS_COUNT), "unknown");
	CHECK_INT(kagent_verdict_basis_from_name("wall"), KAGENT_VERDICT_BASIS_WALL);
	CHECK_INT(kagent_verdict_basis_from_name("cpu"), -EINVAL);
	CHECK_INT(kagent_verdict_basis_from_name(NULL), -EINVAL);
}

static void
set_error(json_t *result, const char *kind, const char *phase, const char *message)
{
	json_object_set_new(judge_of(result), "candidate_error",
			    json_pack("{s:s, s:s, s:s, s:s}", "kind", kind, "phase", phase,
				      "message", message, "traceback", "Traceback ..."));
	json_object_set_new(judge_of(result), "phase", json_string(phase));
}

static void
test_timeout(void)
{
	json_t *result = load(base_result), *verdict;

	set_error(result, "timeout", "timing", "a call did not finish within 20 s");
	/* Timeout outranks a compile error and tampering. */
	json_object_set_new(judge_of(result), "tamper", json_pack("[s]", "x"));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "timeout");
	CHECK_CONTAINS(reason_of(verdict), "during timing: a call did not finish within 20 s");
	json_decref(verdict);
	json_decref(result);

	result = load(base_result);
	json_object_set_new(json_object_get(result, "candidate_process"), "killed_for_timeout",
			    json_true());
	json_object_set_new(judge_of(result), "phase", json_string("trials"));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "timeout");
	CHECK_CONTAINS(reason_of(verdict), "exceeding its time limit during trials");
	json_decref(verdict);
	json_decref(result);
}

static void
test_compile_error(void)
{
	json_t *result = load(base_result), *verdict;

	set_error(result, "compile", "load",
		  "SyntaxError: invalid syntax (candidate.py, line 3)\n  x");
	json_object_set_new(json_object_get(result, "candidate_process"), "exit_code",
			    json_integer(1));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "compile_error");
	CHECK_STRING(reason_of(verdict), "candidate failed to compile or import: SyntaxError: "
					 "invalid syntax (candidate.py, line 3)");
	json_decref(verdict);
	json_decref(result);
}

static void
test_crashed(void)
{
	json_t *result = load(base_result), *verdict;

	set_error(result, "crash", "timing", "");
	json_object_set_new(json_object_get(result, "candidate_process"), "signal",
			    json_integer(9));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "crashed");
	CHECK_STRING(reason_of(verdict),
		     "candidate process was killed by signal 9 (SIGKILL) during timing");
	json_decref(verdict);
	json_decref(result);

	/* The worker kills the child once the judge is done: that signal is not a crash. */
	result = load(base_result);
	json_object_set_new(json_object_get(result, "candidate_process"), "signal",
			    json_integer(9));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "correct");
	json_decref(verdict);
	json_decref(result);

	result = load(base_result);
	set_error(result, "protocol", "trials", "sent a line that is not JSON");
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "crashed");
	CHECK_CONTAINS(reason_of(verdict), "broke the protocol");
	json_decref(verdict);
	json_decref(result);
}

static void
test_runtime_error(void)
{
	json_t *result = load(base_result), *verdict;

	set_error(result, "runtime", "trials", "RuntimeError: CUDA error: illegal memory access");
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "runtime_error");
	CHECK_STRING(reason_of(verdict), "candidate's forward raised during trials: RuntimeError: "
					 "CUDA error: illegal memory access");
	json_decref(verdict);
	json_decref(result);

	result = load(base_result);
	set_error(result, "oom", "trials", "CUDA out of memory");
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "runtime_error");
	CHECK_CONTAINS(reason_of(verdict), "ran out of device memory");
	json_decref(verdict);
	json_decref(result);

	result = load(base_result);
	set_error(result, "structure", "load", "candidate.py defines no class ModelNew");
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "runtime_error");
	CHECK_CONTAINS(reason_of(verdict), "no class ModelNew");
	json_decref(verdict);
	json_decref(result);
}

static void
test_warnings(void)
{
	json_t *result = load(base_result), *verdict, *warnings;

	json_object_set_new(judge_of(result), "degenerate",
			    json_pack("{s:b, s:b, s:b}", "constant_output", 1, "zeros_pass", 1,
				      "identity_pass", 0));
	json_object_set_new(judge_of(result), "signed_skipped",
			    json_string("the problem has integer inputs only"));
	verdict = build(result);
	warnings = json_object_get(verdict, "warnings");
	CHECK_INT(json_array_size(warnings), 3);
	CHECK_STRING(json_string_value(json_array_get(warnings, 1)),
		     "this problem is degenerate: returning zeros would pass its checks");
	CHECK_CONTAINS(json_string_value(json_array_get(warnings, 2)), "integer inputs only");
	CHECK(json_is_true(json_object_get(json_object_get(verdict, "degenerate"), "zeros_pass")));
	json_decref(verdict);
	json_decref(result);
}

/* CUPTI's kernel time against the clock: agreement is silent, both disagreements are named. */
static void
test_timing_cross_check(void)
{
	json_t *result = load(base_result), *verdict,
	       *kernels = json_object_get(judge_of(result), "kernels");

	verdict = build(result); /* kernels 2.0 ms, clock 2.0 ms per call */
	CHECK_INT(json_array_size(json_object_get(verdict, "warnings")), 0);
	json_decref(verdict);
	json_object_set_new(kernels, "total_ms", json_real(0.5));
	verdict = build(result);
	CHECK_CONTAINS(json_string_value(json_array_get(json_object_get(verdict, "warnings"), 0)),
		       "launch-bound");
	json_decref(verdict);
	json_object_set_new(kernels, "total_ms", json_real(6.0));
	verdict = build(result);
	CHECK_CONTAINS(json_string_value(json_array_get(json_object_get(verdict, "warnings"), 0)),
		       "the timings disagree");
	CHECK_STRING(json_string_value(json_object_get(verdict, "status")), "correct");
	json_decref(verdict);
	json_decref(result);
}

static void
test_garbage(void)
{
	json_t *result = load(base_result), *value;

	build_fails(NULL, -EPROTO, "not a JSON object");
	value = load("[1, 2]");
	build_fails(value, -EPROTO, "not a JSON object");
	json_decref(value);
	value = load("{\"type\": \"error\", \"message\": \"line is not JSON\"}");
	build_fails(value, -EPROTO, "the worker reported an error: line is not JSON");
	json_decref(value);
	value = load("{\"type\": 7}");
	build_fails(value, -EPROTO, "type (none)");
	json_decref(value);
	value = load("{\"type\": \"result\"}");
	build_fails(value, -EPROTO, "no judge object");
	json_decref(value);
	value = load("{\"type\": \"result\", \"judge\": null, \"judge_process\": {\"exit_code\": 1,"
		     " \"signal\": null, \"stderr\": \"Traceback\\nImportError: no torch\\n\"}}");
	build_fails(value, -EPROTO,
		    "the judge process exited with status 1: ImportError: no torch");
	json_decref(value);
	value = load("{\"type\": \"result\", \"judge\": \"oops\"}");
	build_fails(value, -EPROTO, "no judge object");
	json_decref(value);
	value = load("{\"type\": \"result\", \"judge\": {}}");
	build_fails(value, -EPROTO, "stopped in phase (unknown)");
	json_decref(value);
	value = load("{\"type\": \"result\", \"judge\": {\"phase\": \"done\", \"trials\": 5}}");
	build_fails(value, -EPROTO, "no correctness trial");
	json_decref(value);
	/* Wrong types everywhere inside: a verdict, never a crash. */
	json_object_set_new(judge_of(result), "timing", json_string("fast"));
	json_object_set_new(judge_of(result), "kernels", json_integer(3));
	json_object_set_new(judge_of(result), "tamper", json_string("no"));
	json_object_set_new(judge_of(result), "environment", json_array());
	json_object_set_new(result, "candidate_process", json_true());
	json_object_set_new(output_of(result, 0), "passed", json_false());
	json_object_set_new(output_of(result, 0), "path", json_integer(1));
	json_object_set_new(output_of(result, 0), "first_mismatch", json_string("x"));
	json_object_set_new(output_of(result, 0), "shape", json_string("x"));
	json_object_set_new(output_of(result, 0), "nonfinite", json_string("x"));
	fail_trial(result, 0);
	value = build(result);
	CHECK_STRING(status_of(value), "incorrect");
	CHECK_CONTAINS(reason_of(value), "an output mismatches in trial 1 (seed 101)");
	CHECK(json_is_null(json_object_get(value, "timing")) == 0);
	json_decref(value);
	/* A candidate_error of the wrong type is a runtime error with no message. */
	json_object_set_new(judge_of(result), "candidate_error", json_pack("{s:i}", "kind", 3));
	value = build(result);
	CHECK_STRING(status_of(value), "runtime_error");
	json_decref(value);
	json_decref(result);
}

static void
test_problem_error(void)
{
	json_t *result = load(base_result);

	json_object_set_new(judge_of(result), "problem_error",
			    json_string("problem.py defines no class Model"));
	build_fails(result, -EINVAL,
		    "the problem cannot be used: problem.py defines no class Model");
	json_decref(result);
}

/* A judge that failed, or a sandbox that could not be entered, says nothing about the candidate. */
static void
test_judge_failures(void)
{
	json_t *result = load(base_result);

	json_object_set_new(judge_of(result), "internal_error",
			    json_string("KeyError: 'trials'\nat judge.py:12"));
	build_fails(result, -EPROTO, "the judge failed: KeyError: 'trials'");
	json_object_del(judge_of(result), "internal_error");
	json_object_set_new(
	    judge_of(result), "candidate_error",
	    json_pack("{s:s, s:s}", "kind", "sandbox", "message", "landlock is not supported"));
	build_fails(result, -EPROTO,
		    "the candidate's sandbox could not be set up: landlock is not supported");
	json_decref(result);
}

static void
test_error_json(void)
{
	json_t *error = kagent_verdict_error_json("no_gpu", "no GPU here");

	CHECK_STRING(json_string_value(json_object_get(error, "schema")), "kagent.error/1");
	CHECK_STRING(json_string_value(json_object_get(error, "error")), "no_gpu");
	CHECK_STRING(json_string_value(json_object_get(error, "message")), "no GPU here");
	json_decref(error);
}

static void
test_render_text(void)
{
	json_t *result = load(base_result), *verdict;
	char *text = NULL;
	size_t size = 0;
	FILE *stream = open_memstream(&text, &size);

	json_object_set_new(json_object_get(judge_of(result), "roofline"), "floor_ms",
			    json_real(4.02));
	json_object_set_new(judge_of(result), "degenerate", json_pack("{s:b}", "zeros_pass", 1));
	verdict = build(result);
	kagent_verdict_render_text(verdict, stream);
	fclose(stream);
	CHECK_CONTAINS(text, "rejected: measured 2.0 ms");
	CHECK_CONTAINS(text, "eager");
	CHECK_CONTAINS(text, "speedup 1.50x");
	CHECK_CONTAINS(text, "timing     device time\n");
	CHECK_CONTAINS(text, "  wall time: 1.40x eager, 1.80x compile\n");
	CHECK_CONTAINS(text, "95% of GPU time in own kernels");
	CHECK_CONTAINS(text, "violation  below_roofline");
	CHECK_CONTAINS(text, "warning    this problem is degenerate");
	free(text);
	json_decref(verdict);
	json_decref(result);
	/* Rendering garbage prints something and does not crash. */
	stream = open_memstream(&text, &size);
	verdict = load("{\"status\": 1, \"timing\": {\"candidate\": 2}, \"violations\": [1]}");
	kagent_verdict_render_text(verdict, stream);
	fclose(stream);
	CHECK_CONTAINS(text, "unknown");
	free(text);
	json_decref(verdict);
}

/* The judge's generalisation report for a base result, from a JSON text. */
static json_t *
generalisation_of(const char *report)
{
	json_t *result = load(base_result), *verdict, *outcome;

	json_object_set_new(judge_of(result), "generalisation", load(report));
	verdict = build(result);
	CHECK_STRING(status_of(verdict), "correct");
	outcome = json_incref(json_object_get(verdict, "generalisation"));
	json_decref(verdict);
	json_decref(result);
	return outcome;
}

static void
test_generalisation(void)
{
	json_t *result = load(base_result), *verdict = build(result), *outcome;
	char *text = NULL;
	size_t size = 0;
	FILE *stream;

	/* Not asked (or not reached): not checked, and nothing is rendered. */
	outcome = json_object_get(verdict, "generalisation");
	CHECK(json_is_false(json_object_get(outcome, "checked")));
	CHECK(json_is_null(json_object_get(outcome, "generalises")));
	CHECK_STRING(json_string_value(json_object_get(outcome, "reason")), "not checked");
	json_decref(verdict);
	json_decref(result);
	/* Correct at the other sizes. */
	outcome = generalisation_of(
	    "{\"sizes\": {\"batch_size\": [16, 9], \"dim\": [16384, 8193]}, \"skipped\": null,"
	    " \"candidate_error\": null, \"trial\": {\"seed\": 1, \"passed\": true}}");
	CHECK(json_is_true(json_object_get(outcome, "checked")));
	CHECK(json_is_true(json_object_get(outcome, "generalises")));
	CHECK_STRING(json_string_value(json_object_get(outcome, "reason")),
		     "correct at sizes batch_size 16 -> 9, dim 16384 -> 8193");
	CHECK_INT(json_integer_value(
		      json_array_get(json_object_get(json_object_get(outcome, "sizes"), "dim"), 1)),
		  8193);
	CHECK(json_is_object(json_object_get(outcome, "trial")));
	json_decref(outcome);
	/* A wrong output there: still correct at the problem's sizes, but does not generalise. */
	outcome = generalisation_of(
	    "{\"sizes\": {\"n\": [64, 33], \"bad\": \"x\"}, \"candidate_error\": null,"
	    " \"trial\": {\"passed\": false, \"reason\": \"output: shape [64], expected [33]\"}}");
	CHECK(json_is_true(json_object_get(outcome, "checked")));
	CHECK(json_is_false(json_object_get(outcome, "generalises")));
	CHECK_STRING(json_string_value(json_object_get(outcome, "reason")),
		     "at sizes n 64 -> 33 the output is wrong: output: shape [64], expected [33]");
	CHECK_INT(json_object_size(json_object_get(outcome, "sizes")), 1);
	json_decref(outcome);
	/* An exception there (a hard-coded reshape, a crash, a timeout): the same. */
	outcome = generalisation_of(
	    "{\"sizes\": {\"n\": [64, 33]}, \"trial\": null, \"candidate_error\":"
	    " {\"kind\": \"runtime\", \"message\": \"forward failed: bad shape\\nmore\"}}");
	CHECK(json_is_false(json_object_get(outcome, "generalises")));
	CHECK_STRING(
	    json_string_value(json_object_get(outcome, "reason")),
	    "at sizes n 64 -> 33 the candidate failed (runtime): forward failed: bad shape");
	CHECK(json_is_null(json_object_get(outcome, "trial")));
	json_decref(outcome);
	/* No sizes, or a problem that cannot run at other sizes: not checked, with the reason. */
	outcome = generalisation_of("{\"sizes\": {}, \"trial\": null, \"candidate_error\": null,"
				    " \"skipped\": \"the problem's input functions read no "
				    "integer size\"}");
	CHECK(json_is_false(json_object_get(outcome, "checked")));
	CHECK(json_is_null(json_object_get(outcome, "generalises")));
	CHECK_CONTAINS(json_string_value(json_object_get(outcome, "reason")), "no integer size");
	json_decref(outcome);
	/* A report with neither a trial nor an error proves nothing. */
	outcome = generalisation_of("{\"sizes\": {\"n\": [64, 33]}}");
	CHECK(json_is_false(json_object_get(outcome, "checked")));
	CHECK(json_is_null(json_object_get(outcome, "generalises")));
	json_decref(outcome);
	/* The text verdict says so. */
	result = load(base_result);
	json_object_set_new(judge_of(result), "generalisation",
			    load("{\"sizes\": {\"n\": [64, 33]}, \"candidate_error\":"
				 " {\"kind\": \"runtime\", \"message\": \"boom\"}}"));
	verdict = build(result);
	stream = open_memstream(&text, &size);
	kagent_verdict_render_text(verdict, stream);
	fclose(stream);
	CHECK_CONTAINS(text, "does not generalise: at sizes n 64 -> 33 the candidate failed");
	free(text);
	json_decref(verdict);
	json_decref(result);
}

static const struct kagent_test tests[] = {
    {"status_names", test_status_names},
    {"correct", test_correct},
    {"speedup_null_without_compile", test_speedup_null_without_compile},
    {"output_mismatch", test_output_mismatch},
    {"nonfinite", test_nonfinite},
    {"dtype_and_shape", test_dtype_and_shape},
    {"structure", test_structure},
    {"input_mutation", test_input_mutation},
    {"timed_output_mismatch", test_timed_output_mismatch},
    {"timer_tampering", test_timer_tampering},
    {"no_own_kernel", test_no_own_kernel},
    {"below_roofline", test_below_roofline},
    {"sol_fraction", test_sol_fraction},
    {"cpu_skips_gpu_checks", test_cpu_skips_gpu_checks},
    {"timeout", test_timeout},
    {"compile_error", test_compile_error},
    {"compile_abandoned", test_compile_abandoned},
    {"crashed", test_crashed},
    {"timing_cross_check", test_timing_cross_check},
    {"runtime_error", test_runtime_error},
    {"warnings", test_warnings},
    {"garbage", test_garbage},
    {"problem_error", test_problem_error},
    {"judge_failures", test_judge_failures},
    {"error_json", test_error_json},
    {"render_text", test_render_text},
    {"generalisation", test_generalisation},
    {"credit_rule", test_credit_rule},
    {"credit_level2_pattern", test_credit_level2_pattern},
    {"credit_library_pattern", test_credit_library_pattern},
    {"credit_not_measured", test_credit_not_measured},
    {"samples_and_intervals", test_samples_and_intervals},
    {"median_of_processes", test_median_of_processes},
    {"basis_device", test_basis_device},
    {"basis_wall", test_basis_wall},
    {"basis_fallback", test_basis_fallback},
    {"basis_bare_summaries", test_basis_bare_summaries},
    {"basis_malformed", test_basis_malformed},
    {"own_saved", test_own_saved},
    {"basis_names", test_basis_names},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
