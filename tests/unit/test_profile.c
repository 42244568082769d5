/* Tests of the profile view (tools/evaluator/profile.c) on hand-written verdicts. */
#include "kagent/evaluator/profile.h"

#include "test.h"

#include <jansson.h>
#include <stdlib.h>

static const char verdict_text[] =
    "{\"status\": \"correct\", \"reason\": \"all 5 trials passed\","
    " \"timing\": {\"candidate\": {\"median_ms\": 4.0}, \"eager\": {\"median_ms\": 6.0}},"
    " \"roofline\": {\"bytes\": 12000000000, \"bandwidth_bytes_per_second\": 3e12,"
    "   \"floor_ms\": 4.0},"
    " \"compute\": {\"flops\": 2000000000, \"peak_flops_per_second\": 5e13,"
    "   \"floor_ms\": 0.04, \"dtype\": \"float32\"},"
    " \"reference_kernels\": {\"total_ms\": 5.5, \"launches\": ["
    "   {\"name\": \"void at::native::vectorized_elementwise_kernel\", \"count\": 2,"
    "    \"ms\": 5.5, \"own\": false}]},"
    " \"kernels\": {\"total_ms\": 3.9, \"own_share\": 0.9, \"launches\": ["
    "   {\"name\": \"relu_kernel\", \"count\": 1, \"ms\": 3.5, \"own\": true,"
    "    \"grid\": [1024, 1, 1], \"block\": [128, 1, 1], \"registers\": 16,"
    "    \"shared_bytes\": 0},"
    "   {\"name\": \"void at::native::copy\", \"count\": 1, \"ms\": 0.4, \"own\": false}]},"
    " \"counters\": {\"uncounted\": 0, \"kernels\": ["
    "   {\"name\": \"relu_kernel\", \"count\": 1, \"ms\": 3.4, \"dram_percent\": 91.4,"
    "    \"sm_percent\": 12.2, \"own\": true},"
    "   {\"name\": \"void at::native::copy\", \"count\": 1, \"ms\": 0.4,"
    "    \"dram_percent\": 40.0, \"sm_percent\": 45.0, \"own\": false}]},"
    " \"reference_counters\": {\"uncounted\": 3, \"kernels\": ["
    "   {\"name\": \"void at::native::vectorized_elementwise_kernel\", \"count\": 2,"
    "    \"ms\": 5.4, \"dram_percent\": 9.0, \"sm_percent\": 4.6, \"own\": false}]}}";

static char *
render(const json_t *verdict)
{
	char *text = NULL;
	size_t size = 0;
	FILE *stream = open_memstream(&text, &size);

	CHECK(stream != NULL);
	kagent_profile_render_text(verdict, stream);
	CHECK(fclose(stream) == 0);
	return text;
}

static void
test_full_profile(void)
{
	json_t *verdict = json_loads(verdict_text, 0, NULL);
	char *text;
	double share = 0;

	CHECK(verdict != NULL);
	CHECK_STRING(kagent_profile_first_target(verdict, &share), "relu_kernel");
	CHECK(share > 0.89 && share < 0.9);
	text = render(verdict);
	CHECK_CONTAINS(text, "reference  5.5000 ms of GPU time in 2 launches of 1 kernel");
	CHECK_CONTAINS(text, "candidate  3.9000 ms of GPU time in 2 launches of 2 kernels");
	CHECK_CONTAINS(text, "16 regs");
	CHECK_CONTAINS(text, "relu_kernel  [own]");
	CHECK_CONTAINS(text, "(1.50x)");
	CHECK_CONTAINS(text, "runs at 100% of that bound");
	CHECK_CONTAINS(text, "attack first: relu_kernel (90%");
	CHECK_CONTAINS(text, "compute bound: 2 GFLOP");
	CHECK_CONTAINS(text, "50.0 TFLOP/s (float32); the candidate runs at 1% of that bound");
	CHECK_CONTAINS(text, "hardware counters (one more forward");
	CHECK_CONTAINS(text, "  candidate  DRAM  91%  SM  12%  relu_kernel  [own]  (DRAM-bound)\n");
	CHECK_CONTAINS(text, "             DRAM  40%  SM  45%  void at::native::copy\n");
	CHECK_CONTAINS(text,
		       "  reference  DRAM   9%  SM   5%  void at::native::vectorized_elementwise_"
		       "kernel  (latency-bound");
	CHECK_CONTAINS(text, "3 later launches were not counted");
	free(text);
	json_decref(verdict);
}

static void
test_counters_refused(void)
{
	static const char refused[] = "cuptiRangeProfilerEnable failed: "
				      "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (no permission)";
	json_t *verdict =
	    json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "status", "correct", "reason", "fast",
		      "counters", "error", refused, "reference_counters", "error", refused);
	char *text = render(verdict);

	CHECK_CONTAINS(text, "hardware counters: not collected: cuptiRangeProfilerEnable failed: "
			     "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
	free(text);
	json_decref(verdict);
	/* the candidate alone failed (a kernel that hangs when replayed): both sides are said */
	verdict = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:f, s:f}], s:i}}", "status",
			    "correct", "reason", "fast", "counters", "error", "timed out",
			    "reference_counters", "kernels", "name", "k", "dram_percent", 70.0,
			    "sm_percent", 20.0, "uncounted", 0);
	text = render(verdict);
	CHECK_CONTAINS(text, "  reference  DRAM  70%  SM  20%  k  (DRAM-bound)\n");
	CHECK_CONTAINS(text, "  candidate  not collected: timed out\n");
	free(text);
	json_decref(verdict);
}

static void
test_missing_parts_are_said(void)
{
	json_t *verdict = json_pack("{s:s, s:s}", "status", "incorrect", "reason", "mismatch");
	char *text = render(verdict);

	CHECK(kagent_profile_first_target(verdict, NULL) == NULL);
	CHECK_CONTAINS(text, "incorrect: mismatch");
	CHECK_CONTAINS(text, "reference  no kernel trace was recorded");
	CHECK_CONTAINS(text, "memory bound: not known");
	CHECK_CONTAINS(text, "compute bound: not derived (no FLOP count was taken)");
	CHECK_CONTAINS(text, "hardware counters: not collected (no counters pass was run)");
	free(text);
	json_decref(verdict);
}

static const struct kagent_test tests[] = {
    {"full_profile", test_full_profile},
    {"missing_parts_are_said", test_missing_parts_are_said},
    {"counters_refused", test_counters_refused},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
