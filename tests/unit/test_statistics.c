/* Unit tests for tools/evaluator/statistics.c: medians and bootstrap intervals on known and
 * recorded vectors. */
#include "kagent/evaluator/statistics.h"
#include "test.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Per-call times (ms) of a kagent eval of tests/fixtures/candidates/relu_correct.py on the
 * CPU, the first 40 calls of each arm as the judge recorded them. */
static const double recorded_candidate[] = {
    0.2791, 0.2689, 0.2658, 0.2492, 0.2665, 0.2725, 0.2653, 0.2874, 0.2461, 0.2981,
    0.2788, 0.2487, 0.2659, 0.291,  0.2608, 0.3559, 0.3053, 0.3106, 0.2584, 0.3333,
    0.2721, 0.2657, 0.3023, 0.3385, 0.2953, 0.3598, 0.3213, 0.3048, 0.3488, 0.2887,
    0.2701, 0.2913, 0.3631, 0.2603, 0.2987, 0.2937, 0.2815, 0.3178, 0.3315, 0.2609};
static const double recorded_eager[] = {
    0.1759, 0.1478, 0.1356, 0.1484, 0.1152, 0.1959, 0.1667, 0.138,  0.152,  0.1468,
    0.1597, 0.1803, 0.1553, 0.1958, 0.1261, 0.1773, 0.1191, 0.1622, 0.1477, 0.1469,
    0.1423, 0.1055, 0.1781, 0.1642, 0.1423, 0.1614, 0.1585, 0.168,  0.1497, 0.1292,
    0.213,  0.1498, 0.1901, 0.1699, 0.1525, 0.1671, 0.1736, 0.1749, 0.1786, 0.1508};
#define RECORDED_COUNT (sizeof recorded_candidate / sizeof recorded_candidate[0])

/* count values as one group: an arm timed in one process. */
#define ONE(values_, count_) (&(struct kagent_samples){.values = (values_), .count = (count_)})

/* count noisy timings around center: center * (1 + up to 20%), from a fixed LCG. */
static double *
noisy(size_t count, double center, uint64_t seed)
{
	double *values = malloc(count * sizeof *values);
	size_t index;

	for (index = 0; index < count; index++) {
		seed = seed * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
		values[index] = center * (1.0 + 0.2 * (double)(seed >> 11) / 9007199254740992.0);
	}
	return values;
}

static void
test_median(void)
{
	const double odd[] = {3.0, 1.0, 2.0}, even[] = {4.0, 1.0, 3.0, 2.0}, nan_value[] = {NAN};
	double median = 0;

	CHECK_INT(kagent_statistics_median(ONE(odd, 3), &median), 0);
	CHECK(median == 2.0);
	CHECK_INT(kagent_statistics_median(ONE(even, 4), &median), 0);
	CHECK(median == 2.5);
	CHECK_INT(kagent_statistics_median(ONE(odd, 1), &median), 0);
	CHECK(median == 3.0);
	CHECK_INT(kagent_statistics_median(ONE(recorded_candidate, RECORDED_COUNT), &median), 0);
	CHECK(median == (0.2874 + 0.2887) / 2);
	CHECK_INT(kagent_statistics_median(ONE(odd, 0), &median), -EINVAL);
	CHECK_INT(kagent_statistics_median(ONE(NULL, 3), &median), -EINVAL);
	CHECK_INT(kagent_statistics_median(ONE(nan_value, 1), &median), -EINVAL);
}

static void
test_interval_contains_median(void)
{
	struct kagent_interval interval;
	double median = 0;

	CHECK_INT(kagent_statistics_median(ONE(recorded_candidate, RECORDED_COUNT), &median), 0);
	CHECK_INT(
	    kagent_statistics_median_interval(ONE(recorded_candidate, RECORDED_COUNT), &interval),
	    0);
	CHECK(interval.low < median && median < interval.high);
	/* Inside the recorded range, and not the whole of it. */
	CHECK(interval.low > 0.2461 && interval.high < 0.3631);
	CHECK(interval.high - interval.low < 0.05);
}

static void
test_interval_narrows(void)
{
	double *few = noisy(20, 1.0, 7), *many = noisy(2000, 1.0, 7);
	struct kagent_interval narrow, wide;

	CHECK_INT(kagent_statistics_median_interval(ONE(few, 20), &wide), 0);
	CHECK_INT(kagent_statistics_median_interval(ONE(many, 2000), &narrow), 0);
	CHECK(wide.high - wide.low > 2 * (narrow.high - narrow.low));
	/* The true median of the noise is 1.1. */
	CHECK(narrow.low < 1.1 && 1.1 < narrow.high);
	free(few);
	free(many);
}

/* count samples of a 32 ns clock (in ms): `below` at 3.264 us, the rest at 3.296 us, every
 * third a nanosecond off, as CUPTI's ticks convert. */
static double *
ticks(size_t count, size_t below)
{
	double *values = malloc(count * sizeof *values);
	size_t index;

	for (index = 0; index < count; index++)
		values[index] = (index < below ? 0.003264 : 0.003296) + (index % 3 == 0 ? 1e-6 : 0);
	return values;
}

static void
test_ticks_interpolate(void)
{
	double *half = ticks(20, 10), *more = ticks(20, 11), *most = ticks(20, 12);
	double *mix49 = ticks(100, 49), *mix51 = ticks(100, 51);
	double at_half = 0, at_more = 0, at_most = 0, median49 = 0, median51 = 0;
	struct kagent_interval interval;

	/* Half the calls on each tick: halfway between them, as the plain median. */
	CHECK_INT(kagent_statistics_median(ONE(half, 20), &at_half), 0);
	CHECK(fabs(at_half - 0.003280) < 1e-6);
	/* One call more on the lower tick moves the median a little down, not a whole tick. */
	CHECK_INT(kagent_statistics_median(ONE(more, 20), &at_more), 0);
	CHECK_INT(kagent_statistics_median(ONE(most, 20), &at_most), 0);
	CHECK(at_most < at_more && at_more < at_half);
	CHECK(fabs(at_more - (0.003280 - 0.000032 / 11)) < 1e-6); /* a nanosecond: the jitter */
	CHECK(at_most > 0.003264);
	/* Two verdicts whose mix differs by 2%: a plain median would be a tick (1%) apart. */
	CHECK_INT(kagent_statistics_median(ONE(mix49, 100), &median49), 0);
	CHECK_INT(kagent_statistics_median(ONE(mix51, 100), &median51), 0);
	CHECK(median49 > median51 && (median49 - median51) / median51 < 0.001);
	CHECK_INT(kagent_statistics_median_interval(ONE(mix51, 100), &interval), 0);
	CHECK(interval.low <= median51 && median51 <= interval.high);
	CHECK(interval.high - interval.low < 0.000032);
	free(half);
	free(more);
	free(most);
	free(mix49);
	free(mix51);
}

/* Calls that agree within 0.4% around center, as one process's calls of a short kernel do. */
static void
steady(double *values, size_t count, double center)
{
	size_t index;

	for (index = 0; index < count; index++)
		values[index] = center * (1.0 + 0.001 * (double)(index % 5));
}

/* An arm of three processes, one of them in a state 6% slower (session 17's machine B): the
 * calls of each process agree, so an interval of the calls alone would be a tenth of a
 * percent wide and hold only this verdict's draw of states; drawing the processes again
 * holds a verdict whose processes were all fast, or two of them slow. */
static void
test_process_states(void)
{
	double values[90], median = 0, width;
	size_t thirds[] = {30, 30, 30};
	struct kagent_samples arm = {values, 90, thirds, 3};
	struct kagent_interval interval;

	steady(values, 30, 1.0);
	steady(values + 30, 30, 1.0);
	steady(values + 60, 30, 1.06);
	CHECK_INT(kagent_statistics_median(&arm, &median), 0);
	CHECK(fabs(median - 1.022) < 0.001);
	CHECK_INT(kagent_statistics_median_interval(&arm, &interval), 0);
	CHECK(interval.low < 1.0 && interval.high > 1.042);
	CHECK(interval.low > 0.99 && interval.high < 1.08);
	width = interval.high - interval.low;
	/* The same calls as one process: the calls' interval alone, a fraction as wide. */
	arm.group_counts = NULL;
	CHECK_INT(kagent_statistics_median_interval(&arm, &interval), 0);
	CHECK(interval.high - interval.low < width / 3);
}

static void
test_process_groups(void)
{
	double values[40], *fast = noisy(60, 1.0, 5), *slow = noisy(30, 1.06, 7), mixed[90];
	size_t halves[] = {10, 30}, wrong[] = {10, 20}, empty[] = {40, 0}, thirds[] = {30, 30, 30};
	size_t many[KAGENT_STATISTICS_GROUP_CAP + 1], index;
	struct kagent_samples two = {values, 40, halves, 2};
	struct kagent_interval interval;
	double median = 0;

	/* Two processes: ten calls at 1.0, thirty at 2.0. Each process weighs alike: 1.5, where
	 * the pooled calls' median would be 2.0. */
	for (index = 0; index < 40; index++)
		values[index] = index < 10 ? 1.0 : 2.0;
	CHECK_INT(kagent_statistics_median(&two, &median), 0);
	CHECK(median == 1.5);
	/* The processes drawn again (each one's calls agree): a quarter of the resamples draw
	 * the first twice, a quarter the second, the rest one of each, and each resample's
	 * distance from 1.5 is widened by sqrt(2 / 1), so the interval runs from 1.5 - 0.71 to
	 * 1.5 + 0.71: two processes that disagree this much say little about the arm. */
	CHECK_INT(kagent_statistics_median_interval(&two, &interval), 0);
	CHECK(fabs(interval.low - (1.5 - sqrt(0.5))) < 1e-12);
	CHECK(fabs(interval.high - (1.5 + sqrt(0.5))) < 1e-12);
	/* Groups that do not add up to the samples, an empty one, or too many: refused. */
	two.group_counts = wrong;
	CHECK_INT(kagent_statistics_median(&two, &median), -EINVAL);
	two.group_counts = empty;
	CHECK_INT(kagent_statistics_median(&two, &median), -EINVAL);
	for (index = 0; index <= KAGENT_STATISTICS_GROUP_CAP; index++)
		many[index] = index < KAGENT_STATISTICS_GROUP_CAP ? 2 : 8;
	two.group_counts = many;
	two.groups = KAGENT_STATISTICS_GROUP_CAP + 1;
	CHECK_INT(kagent_statistics_median(&two, &median), -EINVAL);
	/* Three processes of one arm, one in a slower state (6%): the speedup over an arm of one
	 * process is the mean state's, with an interval that holds it. */
	memcpy(mixed, fast, 60 * sizeof *mixed);
	memcpy(mixed + 60, slow, 30 * sizeof *mixed);
	{
		struct kagent_samples arm = {mixed, 90, thirds, 3}, one = {fast, 30, NULL, 0};
		double own = 0, base = 0;

		CHECK_INT(kagent_statistics_median(&arm, &own), 0);
		CHECK_INT(kagent_statistics_median(&one, &base), 0);
		CHECK(own > base * 1.015 && own < base * 1.025);
		CHECK_INT(kagent_statistics_ratio_interval(&arm, &one, &interval), 0);
		CHECK(interval.low < own / base && own / base < interval.high);
	}
	free(fast);
	free(slow);
}

static void
test_identical_samples(void)
{
	double same[50];
	struct kagent_interval interval;
	size_t index;

	for (index = 0; index < 50; index++)
		same[index] = 0.125;
	CHECK_INT(kagent_statistics_median_interval(ONE(same, 50), &interval), 0);
	CHECK(interval.low == 0.125 && interval.high == 0.125);
	CHECK_INT(kagent_statistics_ratio_interval(ONE(same, 50), ONE(same, 50), &interval), 0);
	CHECK(interval.low == 1.0 && interval.high == 1.0);
}

static void
test_deterministic(void)
{
	struct kagent_interval first, second;

	CHECK_INT(kagent_statistics_median_interval(ONE(recorded_eager, RECORDED_COUNT), &first),
		  0);
	CHECK_INT(kagent_statistics_median_interval(ONE(recorded_eager, RECORDED_COUNT), &second),
		  0);
	CHECK(first.low == second.low && first.high == second.high);
	CHECK_INT(kagent_statistics_ratio_interval(ONE(recorded_eager, RECORDED_COUNT),
						   ONE(recorded_candidate, RECORDED_COUNT), &first),
		  0);
	CHECK_INT(kagent_statistics_ratio_interval(ONE(recorded_eager, RECORDED_COUNT),
						   ONE(recorded_candidate, RECORDED_COUNT),
						   &second),
		  0);
	CHECK(first.low == second.low && first.high == second.high);
}

static void
test_ratio(void)
{
	double *base = noisy(200, 2.0, 11), *candidate = noisy(200, 1.0, 13);
	struct kagent_interval interval;
	double eager = 0, own = 0, zero[] = {0.0, 1.0};

	/* The recorded speedup: eager over candidate, about 0.55x. */
	CHECK_INT(kagent_statistics_median(ONE(recorded_eager, RECORDED_COUNT), &eager), 0);
	CHECK_INT(kagent_statistics_median(ONE(recorded_candidate, RECORDED_COUNT), &own), 0);
	CHECK_INT(kagent_statistics_ratio_interval(ONE(recorded_eager, RECORDED_COUNT),
						   ONE(recorded_candidate, RECORDED_COUNT),
						   &interval),
		  0);
	CHECK(interval.low < eager / own && eager / own < interval.high);
	CHECK(interval.low > 0.45 && interval.high < 0.65);
	/* Twice as fast, from independent noise on both arms. */
	CHECK_INT(kagent_statistics_ratio_interval(ONE(base, 200), ONE(candidate, 200), &interval),
		  0);
	CHECK(interval.low < 2.0 && 2.0 < interval.high);
	/* A speedup needs a positive denominator, and both vectors. */
	CHECK_INT(kagent_statistics_ratio_interval(ONE(base, 200), ONE(zero, 2), &interval),
		  -EINVAL);
	CHECK_INT(kagent_statistics_ratio_interval(ONE(base, 0), ONE(candidate, 200), &interval),
		  -EINVAL);
	CHECK_INT(kagent_statistics_ratio_interval(ONE(base, 200), ONE(candidate, 0), &interval),
		  -EINVAL);
	free(base);
	free(candidate);
}

static void
test_bounded(void)
{
	double *values = noisy(KAGENT_STATISTICS_SAMPLE_CAP + 1, 1.0, 3);
	struct kagent_interval interval;

	/* The most samples: 2000 resamples of 4096 each stay well inside the test's time. */
	CHECK_INT(
	    kagent_statistics_median_interval(ONE(values, KAGENT_STATISTICS_SAMPLE_CAP), &interval),
	    0);
	CHECK_INT(kagent_statistics_median_interval(ONE(values, KAGENT_STATISTICS_SAMPLE_CAP + 1),
						    &interval),
		  -EINVAL);
	free(values);
}

static const struct kagent_test tests[] = {
    {"median", test_median},
    {"ticks_interpolate", test_ticks_interpolate},
    {"process_groups", test_process_groups},
    {"process_states", test_process_states},
    {"interval_contains_median", test_interval_contains_median},
    {"interval_narrows", test_interval_narrows},
    {"identical_samples", test_identical_samples},
    {"deterministic", test_deterministic},
    {"ratio", test_ratio},
    {"bounded", test_bounded},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
