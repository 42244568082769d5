/*
 * Medians and percentile-bootstrap confidence intervals of timing samples (see
 * include/kagent/evaluator/statistics.h). A resample's median is found without
 * sorting it: the values are sorted once, a resample is a count of draws per
 * rank, and a walk over the counts finds the middle rank, so each resample
 * costs time linear in the sample count whatever the values are.
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

/* One sample vector, sorted, with the scratch its resamples count draws in. */
struct statistics__vector {
	double *sorted;
	size_t count;
	uint32_t *draws; /* per rank: how many times this resample drew it */
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
	return 0;
}

static void
statistics__vector_free(struct statistics__vector *vector)
{
	free(vector->sorted);
	free(vector->draws);
}

static double
statistics__sorted_median(const double *sorted, size_t count)
{
	return count % 2 ? sorted[count / 2] : (sorted[count / 2 - 1] + sorted[count / 2]) / 2;
}

/* The median of one resample with replacement: count draws, then the middle rank(s). */
static double
statistics__resample_median(struct statistics__vector *vector, uint64_t *state)
{
	size_t count = vector->count, index, seen = 0, before;
	size_t lower = (count - 1) / 2, upper = count / 2;
	double low = 0;

	memset(vector->draws, 0, count * sizeof *vector->draws);
	/* The modulo's bias is below count / 2^64: nothing a 95% interval can show. */
	for (index = 0; index < count; index++)
		vector->draws[statistics__next(state) % count]++;
	for (index = 0; index < count; index++) {
		before = seen;
		seen += vector->draws[index];
		if (before <= lower && seen > lower)
			low = vector->sorted[index];
		if (seen > upper)
			return (low + vector->sorted[index]) / 2;
	}
	return low; /* not reached: the draws add up to count > upper */
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

/*
 * The percentile bootstrap of median(first) / median(second), or of median(first) alone when
 * second is NULL.
 */
static void
statistics__bootstrap(struct statistics__vector *first, struct statistics__vector *second,
		      struct kagent_interval *interval)
{
	double *estimates = kagent_malloc(KAGENT_STATISTICS_RESAMPLES * sizeof *estimates);
	uint64_t state = STATISTICS_SEED;
	size_t index;

	for (index = 0; index < KAGENT_STATISTICS_RESAMPLES; index++) {
		estimates[index] = statistics__resample_median(first, &state);
		if (second != NULL)
			estimates[index] /= statistics__resample_median(second, &state);
	}
	qsort(estimates, KAGENT_STATISTICS_RESAMPLES, sizeof *estimates, statistics__compare);
	interval->low =
	    statistics__quantile(estimates, KAGENT_STATISTICS_RESAMPLES, STATISTICS_LOW_QUANTILE);
	interval->high =
	    statistics__quantile(estimates, KAGENT_STATISTICS_RESAMPLES, STATISTICS_HIGH_QUANTILE);
	free(estimates);
}

int
kagent_statistics_median(const double *values, size_t count, double *median)
{
	struct statistics__vector vector;
	int status = statistics__vector_init(&vector, values, count);

	if (status == 0)
		*median = statistics__sorted_median(vector.sorted, vector.count);
	statistics__vector_free(&vector);
	return status;
}

int
kagent_statistics_median_interval(const double *values, size_t count,
				  struct kagent_interval *interval)
{
	struct statistics__vector vector;
	int status = statistics__vector_init(&vector, values, count);

	if (status == 0)
		statistics__bootstrap(&vector, NULL, interval);
	statistics__vector_free(&vector);
	return status;
}

int
kagent_statistics_ratio_interval(const double *numerator, size_t numerator_count,
				 const double *denominator, size_t denominator_count,
				 struct kagent_interval *interval)
{
	struct statistics__vector top, bottom;
	int status = statistics__vector_init(&top, numerator, numerator_count);

	if (statistics__vector_init(&bottom, denominator, denominator_count) < 0 ||
	    bottom.sorted[0] <= 0)
		status = -EINVAL;
	if (status == 0)
		statistics__bootstrap(&top, &bottom, interval);
	statistics__vector_free(&top);
	statistics__vector_free(&bottom);
	return status;
}
