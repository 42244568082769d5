/* The profile view of a verdict (see include/kagent/evaluator/profile.h). */
#include "kagent/evaluator/profile.h"

#include "kagent/evaluator/verdict.h"

#include <string.h>

static double
profile__number(const json_t *object, const char *key)
{
	const json_t *value = json_object_get(object, key);

	return json_is_number(value) ? json_number_value(value) : 0.0;
}

static void
profile__kernels(FILE *stream, const char *who, const json_t *kernels, int detailed)
{
	const json_t *launches = json_object_get(kernels, "launches"), *launch;
	size_t index;
	long long calls = 0;

	if (!json_is_array(launches)) {
		fprintf(stream, "  %-10s no kernel trace was recorded\n", who);
		return;
	}
	json_array_foreach(launches, index, launch) calls +=
	    json_integer_value(json_object_get(launch, "count"));
	fprintf(stream, "  %-10s %.4f ms of GPU time in %lld launch%s of %zu kernel%s\n", who,
		profile__number(kernels, "total_ms"), calls, calls == 1 ? "" : "es",
		json_array_size(launches), json_array_size(launches) == 1 ? "" : "s");
	json_array_foreach(launches, index, launch)
	{
		const json_t *grid = json_object_get(launch, "grid");
		const json_t *block = json_object_get(launch, "block");

		if (index == 8) {
			fprintf(stream, "             ... %zu more\n",
				json_array_size(launches) - 8);
			break;
		}
		fprintf(stream, "    %9.4f ms %5lld x", profile__number(launch, "ms"),
			(long long)json_integer_value(json_object_get(launch, "count")));
		if (detailed && json_is_array(grid) && json_is_array(block))
			fprintf(
			    stream, "  %3lld regs %6lld B smem  grid %lldx%lldx%lld block %lld",
			    (long long)json_integer_value(json_object_get(launch, "registers")),
			    (long long)json_integer_value(json_object_get(launch, "shared_bytes")),
			    (long long)json_integer_value(json_array_get(grid, 0)),
			    (long long)json_integer_value(json_array_get(grid, 1)),
			    (long long)json_integer_value(json_array_get(grid, 2)),
			    (long long)json_integer_value(json_array_get(block, 0)));
		fprintf(stream, "  %s%s\n", json_string_value(json_object_get(launch, "name")),
			json_is_true(json_object_get(launch, "own")) ? "  [own]" : "");
	}
}

static void
profile__compute(FILE *stream, const json_t *compute, double candidate_ms)
{
	const json_t *flops = json_object_get(compute, "flops");
	double floor_ms = profile__number(compute, "floor_ms");

	if (!json_is_integer(flops)) {
		fprintf(stream, "compute bound: not derived (%s)\n",
			json_is_string(json_object_get(compute, "error"))
			    ? json_string_value(json_object_get(compute, "error"))
			    : "no FLOP count was taken");
		return;
	}
	if (json_integer_value(flops) == 0) {
		fprintf(stream, "compute bound: no matrix products, convolutions or attention: "
				"the problem is bound by memory\n");
		return;
	}
	fprintf(stream, "compute bound: %.4g GFLOP (matrix products and the like)",
		(double)json_integer_value(flops) / 1e9);
	if (floor_ms > 0 && candidate_ms > 0)
		fprintf(stream,
			", %.4f ms at the measured %.1f TFLOP/s (%s); the candidate runs at %.0f%% "
			"of that bound\n",
			floor_ms, profile__number(compute, "peak_flops_per_second") / 1e12,
			json_string_value(json_object_get(compute, "dtype"))
			    ? json_string_value(json_object_get(compute, "dtype"))
			    : "?",
			100.0 * floor_ms / candidate_ms);
	else
		fprintf(stream, "; no peak rate was measured on this device\n");
}

/* What a kernel's two throughputs say, when they say something plain. */
static const char *
profile__bound(double dram, double sm)
{
	if (dram >= 60 && dram >= sm)
		return "  (DRAM-bound)";
	if (sm >= 60)
		return "  (SM-bound)";
	if (dram < 30 && sm < 30)
		return "  (latency-bound: neither DRAM nor SM is busy)";
	return "";
}

static void
profile__counters_side(FILE *stream, const char *who, const json_t *counters)
{
	const json_t *kernels = json_object_get(counters, "kernels"), *kernel;
	const char *error = json_string_value(json_object_get(counters, "error"));
	json_int_t uncounted = json_integer_value(json_object_get(counters, "uncounted"));
	size_t index;

	if (!json_is_array(kernels)) {
		fprintf(stream, "  %-10s not collected: %s\n", who,
			error != NULL ? error : "no counters pass was run");
		return;
	}
	if (json_array_size(kernels) == 0)
		fprintf(stream, "  %-10s no kernel was counted\n", who);
	json_array_foreach(kernels, index, kernel)
	{
		double dram = profile__number(kernel, "dram_percent");
		double sm = profile__number(kernel, "sm_percent");
		const char *name = json_string_value(json_object_get(kernel, "name"));

		if (index == 4) {
			fprintf(stream, "             ... %zu more\n",
				json_array_size(kernels) - 4);
			break;
		}
		fprintf(stream, "  %-10s DRAM %3.0f%%  SM %3.0f%%  %s%s%s\n", index == 0 ? who : "",
			dram, sm, name != NULL ? name : "?",
			json_is_true(json_object_get(kernel, "own")) ? "  [own]" : "",
			profile__bound(dram, sm));
	}
	if (uncounted > 0)
		fprintf(stream, "             %lld later launches were not counted\n",
			(long long)uncounted);
}

static void
profile__counters(FILE *stream, const json_t *verdict)
{
	const json_t *candidate = json_object_get(verdict, "counters");
	const json_t *reference = json_object_get(verdict, "reference_counters");
	const char *candidate_error = json_string_value(json_object_get(candidate, "error"));
	const char *reference_error = json_string_value(json_object_get(reference, "error"));

	if (!json_is_object(candidate) && !json_is_object(reference)) {
		fprintf(stream, "hardware counters: not collected (no counters pass was run)\n");
		return;
	}
	/* one reason for both, as when the machine does not permit profiling */
	if (candidate_error != NULL &&
	    (!json_is_object(reference) ||
	     (reference_error != NULL && strcmp(candidate_error, reference_error) == 0))) {
		fprintf(stream, "hardware counters: not collected: %s\n", candidate_error);
		return;
	}
	fprintf(stream, "hardware counters (one more forward, every kernel replayed; %% of peak "
			"sustained throughput):\n");
	profile__counters_side(stream, "reference", reference);
	profile__counters_side(stream, "candidate", candidate);
}

const char *
kagent_profile_first_target(const json_t *verdict, double *share_out)
{
	const json_t *kernels = json_object_get(verdict, "kernels");
	const json_t *first = json_array_get(json_object_get(kernels, "launches"), 0);
	double total = profile__number(kernels, "total_ms");

	/* launches come longest first */
	if (!json_is_object(first) || total <= 0)
		return NULL;
	if (share_out != NULL)
		*share_out = profile__number(first, "ms") / total;
	return json_string_value(json_object_get(first, "name"));
}

void
kagent_profile_render_text(const json_t *verdict, FILE *stream)
{
	const json_t *timing = json_object_get(verdict, "timing");
	const json_t *roofline = json_object_get(verdict, "roofline");
	double candidate_ms = profile__number(json_object_get(timing, "candidate"), "median_ms");
	double eager_ms = profile__number(json_object_get(timing, "eager"), "median_ms");
	double floor_ms = profile__number(roofline, "floor_ms"), share = 0;
	const char *target;

	fprintf(stream, "%s: %s\n", json_string_value(json_object_get(verdict, "status")),
		json_string_value(json_object_get(verdict, "reason")));
	fprintf(stream, "where the time goes (one forward each):\n");
	profile__kernels(stream, "reference", json_object_get(verdict, "reference_kernels"), 0);
	profile__kernels(stream, "candidate", json_object_get(verdict, "kernels"), 1);
	if (candidate_ms > 0)
		fprintf(stream, "  timed: candidate %.4f ms per call, eager %.4f ms (%.2fx)\n",
			candidate_ms, eager_ms, eager_ms > 0 ? eager_ms / candidate_ms : 0.0);
	if (floor_ms > 0 && candidate_ms > 0)
		fprintf(stream,
			"memory bound: at least %.3g GB in and out, %.4f ms at the measured %.2f "
			"TB/s; the candidate runs at %.0f%% of that bound\n",
			profile__number(roofline, "bytes") / 1e9, floor_ms,
			profile__number(roofline, "bandwidth_bytes_per_second") / 1e12,
			100.0 * floor_ms / candidate_ms);
	else
		fprintf(stream, "memory bound: not known (no roofline was measured)\n");
	profile__compute(stream, json_object_get(verdict, "compute"), candidate_ms);
	target = kagent_profile_first_target(verdict, &share);
	if (target != NULL)
		fprintf(stream, "attack first: %s (%.0f%% of the candidate's GPU time)\n", target,
			100.0 * share);
	profile__counters(stream, verdict);
}
