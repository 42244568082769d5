/*
 * Medians and percentile-bootstrap confidence intervals of timing samples (see
 * include/kagent/evaluator/statistics.h). A resample's median is found without
 * sorting it: the values are sorted once, a resample is a count of draws per
 * rank, and a walk over the counts finds the middle rank, so each resample
 * costs time linear in the sample count whatever the values are.
 *
 * Where the middle value is tied (device times are whole ticks of a 32 ns clock: a 3 us
 * kernel takes 3 or 4 values), the median is interpolated within its tick, as the median of
 * grouped data: the tie's class runs from halfway to the value below to halfway to the one
 * above, and the median lies in it as far as the share of the middle that falls in it. A
 * plain median of tied values jumps a whole tick (1% of a 3 us kernel) when a verdict's mix
 * of ticks moves a little; this one moves with the mix.
 *
 * An arm timed in several processes has its samples in groups, one a process: its median is
 * the mean of the groups' medians (each process brings a state of its own to all its calls,
 * so each is one draw of that state and weighs alike). A resample draws as many processes
 * again, with replacement, and each drawn process's calls within it (the two-stage bootstrap
 * of clustered data): a verdict's interval then holds the luck of its processes' states, which
 * the calls of those same processes cannot show, and which moves a 4 MB kernel's verdicts by
 * 1-2.5% (docs/benchmarks.md, session 18). Drawing K processes again from K sees only
 * (K - 1) / K of their variance; each resample's distance from the median is widened by
 * sqrt(K / (K - 1)) to make up for it.
 */
#include "kagent/evaluator/statistics.h"
#include "kagent/base/alloc.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The bootstrap's fixed seed: the same samples always give the same interval. */
#define STATISTICS_SEED UINT64_C(0x6b6167656e74)
/* The two tails a 95% interval leaves out. */
#define STATISTICS_LOW_QUANTILE 0.025
#define STATISTICS_HIGH_QUANTILE 0.975

/* Values this close are one reading of the clock (3 ns in milliseconds, every sample's unit):
 * a tick's times differ by the nanosecond their conversion rounds. */
#define STATISTICS_TIE 3e-6

/* One sample vector, sorted, grouped into ties, with the scratch its resamples count draws
 * in. */
struct statistics__vector {
	double *sorted;
	size_t count;
	uint32_t *draws; /* per rank: how many times this resample drew it */
	size_t *tie;	 /* per rank: its tie, in the order of values */
	double *low;	 /* per tie: where its class begins (halfway to the tie below) */
	double *high;	 /* per tie: where its class ends (halfway to the tie above) */
	uint32_t *tie_draws;
	size_t ties;
};

/* splitmix64: small, fast and good enough to pick ranks; the state is the caller's. */
static uint64_t
statistics__next(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static int
statistics__compare(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The ties of the sorted values and each one's class. A class's bounds are halfway to its
 * neighbours, a tie at an end mirrors its one neighbour, and a single tie has no width. */
static void
statistics__group(struct statistics__vector *vector)
{
	size_t count = vector->count, index, tie = 0, first = 0;
	double *center = kagent_malloc(count * sizeof *center);

	vector->tie = kagent_malloc(count * sizeof *vector->tie);
	vector->low = kagent_malloc(count * sizeof *vector->low);
	vector->high = kagent_malloc(count * sizeof *vector->high);
	vector->tie_draws = kagent_calloc(count, sizeof *vector->tie_draws);
	for (index = 0; index < count; index++) {
		if (index > 0 &&
		    vector->sorted[index] - vector->sorted[index - 1] > STATISTICS_TIE) {
			center[tie] = (vector->sorted[first] + vector->sorted[index - 1]) / 2;
			tie++;
			first = index;
		}
		vector->tie[index] = tie;
	}
	center[tie] = (vector->sorted[first] + vector->sorted[count - 1]) / 2;
	vector->ties = tie + 1;
	for (tie = 0; tie < vector->ties; tie++) {
		vector->low[tie] = tie > 0 ? (center[tie - 1] + center[tie]) / 2 : center[tie];
		vector->high[tie] =
		    tie + 1 < vector->ties ? (center[tie] + center[tie + 1]) / 2 : center[tie];
		if (tie == 0 && vector->ties > 1)
			vector->low[tie] = center[tie] - (vector->high[tie] - center[tie]);
		if (tie + 1 == vector->ties && vector->ties > 1)
			vector->high[tie] = center[tie] + (center[tie] - vector->low[tie]);
	}
	free(center);
}

/* Copies and sorts values; -EINVAL for an empty or oversized vector or a value not finite. */
static int
statistics__vector_init(struct statistics__vector *vector, const double *values, size_t count)
{
	size_t index;

	memset(vector, 0, sizeof *vector);
	if (values == NULL || count == 0 || count > KAGENT_STATISTICS_SAMPLE_CAP)
		return -EINVAL;
	for (index = 0; index < count; index++) {
		if (!isfinite(values[index]))
			return -EINVAL;
	}
	vector->sorted = kagent_malloc(count * sizeof *vector->sorted);
	memcpy(vector->sorted, values, count * sizeof *vector->sorted);
	qsort(vector->sorted, count, sizeof *vector->sorted, statistics__compare);
	vector->count = count;
	vector->draws = kagent_calloc(count, sizeof *vector->draws);
	statistics__group(vector);
	return 0;
}

static void
statistics__vector_free(struct statistics__vector *vector)
{
	free(vector->sorted);
	free(vector->draws);
	free(vector->tie);
	free(vector->low);
	free(vector->high);
	free(vector->tie_draws);
}

/*
 * The median of the sorted values drawn draws[rank] times each (count draws in all): the mean
 * of the middle two draws, or, where the middle falls in a tie drawn twice or more, the point
 * of its class as far in as the middle's share of the tie (statistics.c's header).
 */
static double
statistics__median_of_draws(struct statistics__vector *vector, const uint32_t *draws)
{
	size_t count = vector->count, index, seen = 0, before, tie;
	size_t lower = (count - 1) / 2, upper = count / 2;
	double low = 0, high = 0, half = (double)count / 2, below = 0;
	int found = 0;

	memset(vector->tie_draws, 0, vector->ties * sizeof *vector->tie_draws);
	for (index = 0; index < count; index++) {
		before = seen;
		seen += draws[index];
		vector->tie_draws[vector->tie[index]] += draws[index];
		if (before <= lower && seen > lower)
			low = vector->sorted[index];
		if (!found && seen > upper) {
			high = vector->sorted[index];
			found = 1;
		}
	}
	for (tie = 0; tie < vector->ties; tie++) {
		double drawn = vector->tie_draws[tie];

		if (below + drawn >= half) {
			if (drawn < 2)
				break;
			/* from the class's end, so that a middle at the tie's last draw is exactly
			 * halfway to the next tie: the plain median of two ties */
			return vector->high[tie] - (vector->high[tie] - vector->low[tie]) *
						       (1 - (half - below) / drawn);
		}
		below += drawn;
	}
	return (low + high) / 2;
}

/* The median of one resample with replacement: count draws per rank, then their median. */
static double
statistics__resample_median(struct statistics__vector *vector, uint64_t *state)
{
	size_t count = vector->count, index;

	memset(vector->draws, 0, count * sizeof *vector->draws);
	/* The modulo's bias is below count / 2^64: nothing a 95% interval can show. */
	for (index = 0; index < count; index++)
		vector->draws[statistics__next(state) % count]++;
	return statistics__median_of_draws(vector, vector->draws);
}

/* The linearly interpolated quantile of sorted values (R's type 7). */
static double
statistics__quantile(const double *sorted, size_t count, double fraction)
{
	double position = fraction * (double)(count - 1);
	size_t below = (size_t)position;

	if (below + 1 >= count)
		return sorted[count - 1];
	return sorted[below] + (position - (double)below) * (sorted[below + 1] - sorted[below]);
}

/* One arm's samples as the statistics see them: a sorted vector per group (process), and
 * the mean of their medians. */
struct statistics__set {
	struct statistics__vector *groups;
	size_t count;
	double median;
};

static void
statistics__set_free(struct statistics__set *set)
{
	size_t index;

	for (index = 0; index < set->count; index++)
		statistics__vector_free(&set->groups[index]);
	free(set->groups);
	memset(set, 0, sizeof *set);
}

/* The mean of the groups' medians: each process weighs alike, whatever its calls. Computed
 * once, by set_init. */
static double
statistics__set_median(struct statistics__set *set)
{
	double sum = 0;
	size_t index, rank;

	for (index = 0; index < set->count; index++) {
		struct statistics__vector *vector = &set->groups[index];

		for (rank = 0; rank < vector->count; rank++)
			vector->draws[rank] = 1;
		sum += statistics__median_of_draws(vector, vector->draws);
	}
	return sum / (double)set->count;
}

/* The groups of samples; -EINVAL as the vector's, or for groups that do not add up to the
 * samples, hold none, or are more than KAGENT_STATISTICS_GROUP_CAP. */
static int
statistics__set_init(struct statistics__set *set, const struct kagent_samples *samples)
{
	size_t groups = samples != NULL && samples->group_counts != NULL ? samples->groups : 1;
	size_t index, start = 0, size;
	int status = 0;

	memset(set, 0, sizeof *set);
	if (samples == NULL || groups == 0 || groups > KAGENT_STATISTICS_GROUP_CAP)
		return -EINVAL;
	set->groups = kagent_calloc(groups, sizeof *set->groups);
	set->count = groups;
	for (index = 0; index < groups && status == 0; index++) {
		size =
		    samples->group_counts != NULL ? samples->group_counts[index] : samples->count;
		if (size > samples->count - start)
			status = -EINVAL;
		else
			status = statistics__vector_init(
			    &set->groups[index], samples->values ? samples->values + start : NULL,
			    size);
		start += size;
	}
	if (status == 0 && start != samples->count)
		status = -EINVAL;
	if (status < 0)
		statistics__set_free(set);
	else
		set->median = statistics__set_median(set);
	return status;
}

/* The same of one resample: of one group, its calls drawn again; of K groups, K groups drawn
 * again with replacement and each one's calls within it, the result's distance from the
 * median widened by sqrt(K / (K - 1)) (the header). */
static double
statistics__set_resample(struct statistics__set *set, uint64_t *state)
{
	double sum = 0, count = (double)set->count;
	size_t index;

	if (set->count == 1)
		return statistics__resample_median(&set->groups[0], state);
	for (index = 0; index < set->count; index++)
		sum += statistics__resample_median(
		    &set->groups[statistics__next(state) % set->count], state);
	return set->median + sqrt(count / (count - 1)) * (sum / count - set->median);
}

/*
 * The percentile bootstrap of median(first) / median(second), or of median(first) alone when
 * second is NULL.
 */
static void
statistics__bootstrap(struct statistics__set *first, struct statistics__set *second,
		      struct kagent_interval *interval)
{
	double *estimates = kagent_malloc(KAGENT_STATISTICS_RESAMPLES * sizeof *estimates);
	uint64_t state = STATISTICS_SEED;
	size_t index;

	for (index = 0; index < KAGENT_STATISTICS_RESAMPLES; index++) {
		estimates[index] = statistics__set_resample(first, &state);
		if (second != NULL)
			estimates[index] /= statistics__set_resample(second, &state);
	}
	qsort(estimates, KAGENT_STATISTICS_RESAMPLES, sizeof *estimates, statistics__compare);
	interval->low =
	    statistics__quantile(estimates, KAGENT_STATISTICS_RESAMPLES, STATISTICS_LOW_QUANTILE);
	interval->high =
	    statistics__quantile(estimates, KAGENT_STATISTICS_RESAMPLES, STATISTICS_HIGH_QUANTILE);
	free(estimates);
}

int
kagent_statistics_median(const struct kagent_samples *samples, double *median)
{
	struct statistics__set set;
	int status = statistics__set_init(&set, samples);

	if (status == 0)
		*median = set.median;
	statistics__set_free(&set);
	return status;
}

int
kagent_statistics_median_interval(const struct kagent_samples *samples,
				  struct kagent_interval *interval)
{
	struct statistics__set set;
	int status = statistics__set_init(&set, samples);

	if (status == 0)
		statistics__bootstrap(&set, NULL, interval);
	statistics__set_free(&set);
	return status;
}

int
kagent_statistics_ratio_interval(const struct kagent_samples *numerator,
				 const struct kagent_samples *denominator,
				 struct kagent_interval *interval)
{
	struct statistics__set top, bottom;
	int status = statistics__set_init(&top, numerator);
	size_t index;

	if (statistics__set_init(&bottom, denominator) < 0)
		status = -EINVAL;
	for (index = 0; status == 0 && index < bottom.count; index++) {
		if (bottom.groups[index].sorted[0] <= 0)
			status = -EINVAL;
	}
	if (status == 0)
		statistics__bootstrap(&top, &bottom, interval);
	statistics__set_free(&top);
	statistics__set_free(&bottom);
	return status;
}
