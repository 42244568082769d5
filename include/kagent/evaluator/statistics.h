/*
 * Numbers people can check (docs/verdict.md): the median of per-call timing samples (of an arm
 * timed in several processes, the mean of theirs) and percentile-bootstrap 95% confidence
 * intervals (over the processes too), for one arm's median and for the ratio of two arms'
 * medians (a speedup). The bootstrap draws from a generator with a fixed seed, so the same
 * samples always give the same interval, and its work is bounded: KAGENT_STATISTICS_RESAMPLES
 * resamples of at most KAGENT_STATISTICS_SAMPLE_CAP samples each.
 */
#ifndef KAGENT_STATISTICS_H
#define KAGENT_STATISTICS_H

#include <stddef.h>

#define KAGENT_STATISTICS_RESAMPLES 2000
/* The most samples one vector may hold; callers keep the first ones. */
#define KAGENT_STATISTICS_SAMPLE_CAP 4096
/* The most groups (processes) one arm's samples may come in. */
#define KAGENT_STATISTICS_GROUP_CAP 16

struct kagent_interval {
	double low, high;
};

/*
 * One arm's per-call samples: count values, in groups of group_counts[0], group_counts[1], ...
 * (groups of them, adding up to count: the processes the arm was timed in, each one's calls
 * together), or one group when group_counts is NULL. Borrowed.
 */
struct kagent_samples {
	const double *values;
	size_t count;
	const size_t *group_counts;
	size_t groups;
};

/* The median: each group's (the mean of its middle two, or within its clock tick where the
 * middle is tied: statistics.c), and of several groups their mean. Returns 0, or -EINVAL when
 * a group is empty or over the cap, a value is not finite, or the groups do not add up. */
int kagent_statistics_median(const struct kagent_samples *samples, double *median);
/* The bootstrap 95% interval of the median: of one group its values drawn again; of several,
 * the groups drawn again and each drawn group's values within it, each resample's distance
 * from the median widened by sqrt(groups / (groups - 1)) (statistics.c). Returns 0 or -EINVAL
 * as the median. */
int kagent_statistics_median_interval(const struct kagent_samples *samples,
				      struct kagent_interval *interval);
/*
 * The bootstrap 95% interval of median(numerator) / median(denominator), resampling both.
 * Returns 0, or -EINVAL when either is refused as by the median, or a denominator value is not
 * positive.
 */
int kagent_statistics_ratio_interval(const struct kagent_samples *numerator,
				     const struct kagent_samples *denominator,
				     struct kagent_interval *interval);

#endif
