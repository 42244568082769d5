/*
 * Recomputes saved verdicts' device-time speedups over eager, their 95% intervals and each
 * arm's per-process medians with statistics.c, for bench/interval_coverage.py and
 * bench/process_counts.py (docs/benchmarks.md, verdict v2 (a), session 18): the samples and
 * their processes (process_calls) are in every verdict, so anyone can check what the intervals
 * hold. One JSON line per file:
 *
 *   verdict_intervals VERDICT.json...
 *   {"file": ..., "saved": speedup as saved, "speedup": ..., "low": ..., "high": ...,
 *    "processes": the candidate's, "eager_medians": [one a process], "candidate_medians": [...]}
 *   or {"file": ..., "error": why}
 */
#include "kagent/evaluator/statistics.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* One arm's device samples as statistics.c reads them, in the caller's arrays. */
struct intervals__arm {
	double values[KAGENT_STATISTICS_SAMPLE_CAP];
	size_t groups[KAGENT_STATISTICS_GROUP_CAP];
	struct kagent_samples samples;
};

/* Fills arm from a verdict's timing.device summary; 0, or -1 where it has no usable samples. */
static int
intervals__read_arm(struct intervals__arm *arm, const json_t *summary)
{
	const json_t *values = json_object_get(summary, "samples_ms");
	const json_t *calls = json_object_get(summary, "process_calls");
	size_t index, count = json_array_size(values);

	if (count == 0 || count > KAGENT_STATISTICS_SAMPLE_CAP)
		return -1;
	for (index = 0; index < count; index++)
		arm->values[index] = json_number_value(json_array_get(values, index));
	arm->samples = (struct kagent_samples){.values = arm->values, .count = count};
	if (json_array_size(calls) > 1 && json_array_size(calls) <= KAGENT_STATISTICS_GROUP_CAP) {
		for (index = 0; index < json_array_size(calls); index++)
			arm->groups[index] =
			    (size_t)json_integer_value(json_array_get(calls, index));
		arm->samples.group_counts = arm->groups;
		arm->samples.groups = json_array_size(calls);
	}
	return 0;
}

/* The median of each of an arm's processes (of one process, the arm's), as a JSON list. */
static json_t *
intervals__process_medians(const struct intervals__arm *arm)
{
	size_t index, start = 0, groups = arm->samples.groups ? arm->samples.groups : 1;
	json_t *medians = json_array();

	for (index = 0; index < groups; index++) {
		size_t count = arm->samples.groups ? arm->groups[index] : arm->samples.count;
		struct kagent_samples one = {.values = arm->values + start, .count = count};
		double median;

		if (start + count <= arm->samples.count &&
		    kagent_statistics_median(&one, &median) == 0)
			json_array_append_new(medians, json_real(median));
		start += count;
	}
	return medians;
}

/* One verdict file's line; the arms are the caller's scratch. */
static json_t *
intervals__verdict(const char *path, struct intervals__arm *eager, struct intervals__arm *own)
{
	json_error_t error;
	json_t *verdict = json_load_file(path, 0, &error), *line;
	const json_t *device = json_object_get(json_object_get(verdict, "timing"), "device");
	struct kagent_interval interval;
	double eager_ms, own_ms;

	if (verdict == NULL)
		return json_pack("{s:s, s:s}", "file", path, "error", error.text);
	if (intervals__read_arm(eager, json_object_get(device, "eager")) < 0 ||
	    intervals__read_arm(own, json_object_get(device, "candidate")) < 0 ||
	    kagent_statistics_median(&eager->samples, &eager_ms) < 0 ||
	    kagent_statistics_median(&own->samples, &own_ms) < 0 || own_ms <= 0 ||
	    kagent_statistics_ratio_interval(&eager->samples, &own->samples, &interval) < 0)
		line = json_pack("{s:s, s:s}", "file", path, "error",
				 "no device samples of both arms that statistics.c accepts");
	else
		line = json_pack("{s:s, s:o, s:f, s:f, s:f, s:i, s:o, s:o}", "file", path, "saved",
				 json_deep_copy(json_object_get(device, "speedup_vs_eager")),
				 "speedup", eager_ms / own_ms, "low", interval.low, "high",
				 interval.high, "processes",
				 (int)(own->samples.groups ? own->samples.groups : 1),
				 "eager_medians", intervals__process_medians(eager),
				 "candidate_medians", intervals__process_medians(own));
	json_decref(verdict);
	return line;
}

int
main(int argc, char **argv)
{
	static struct intervals__arm eager, own;
	int index;

	if (argc < 2) {
		fprintf(stderr, "usage: verdict_intervals VERDICT.json...\n");
		return 2;
	}
	for (index = 1; index < argc; index++) {
		json_t *line = intervals__verdict(argv[index], &eager, &own);

		json_dumpf(line, stdout, JSON_COMPACT);
		fputc('\n', stdout);
		json_decref(line);
	}
	return 0;
}
