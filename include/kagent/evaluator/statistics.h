/*
 * Numbers people can check (docs/verdict.md): the median of per-call timing
 * samples and percentile-bootstrap 95% confidence intervals, for one arm's
 * median and for the ratio of two arms' medians (a speedup). The bootstrap
 * draws from a generator with a fixed seed, so the same samples always give
 * the same interval, and its work is bounded: KAGENT_STATISTICS_RESAMPLES
 * resamples of at most KAGENT_STATISTICS_SAMPLE_CAP samples each.
 */
#ifndef KAGENT_STATISTICS_H
#define KAGENT_STATISTICS_H

#include <stddef.h>

#define KAGENT_STATISTICS_RESAMPLES 2000
/* The most samples one vector may hold; callers keep the first ones. */
#define KAGENT_STATISTICS_SAMPLE_CAP 4096

struct kagent_interval {
	double low, high;
};

/* The median of count finite values (the mean of the middle two when count is even). Returns
 * 0, or -EINVAL when count is 0, over the cap, or a value is not finite. */
int kagent_statistics_median(const double *values, size_t count, double *median);
/* The bootstrap 95% interval of the median of values. Returns 0 or -EINVAL as the median. */
int kagent_statistics_median_interval(const double *values, size_t count,
				      struct kagent_interval *interval);
/*
 * The bootstrap 95% interval of median(numerator) / median(denominator), resampling both
 * vectors. Returns 0, or -EINVAL when either vector is refused as by the median, or a
 * denominator value is not positive.
 */
int kagent_statistics_ratio_interval(const double *numerator, size_t numerator_count,
				     const double *denominator, size_t denominator_count,
				     struct kagent_interval *interval);

#endif
