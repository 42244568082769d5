/*
 * The cache of baseline timings (eager PyTorch and torch.compile). Measuring
 * them costs more than judging most candidates, and they depend only on the
 * problem, the GPU and the software, so they are kept per key in
 * <cache>/baselines/<sha256 of key>.json as {"key": ..., "baselines": {...}}.
 */
#ifndef KAGENT_BASELINE_CACHE_H
#define KAGENT_BASELINE_CACHE_H

#include <jansson.h>

/* Everything the baselines depend on. NULL strings count as "none". */
struct kagent_baseline_key {
	const char *problem_sha256;
	const char *device;
	const char *gpu_name;
	const char *driver;
	const char *torch;
	const char *triton;
	const char *cuda_runtime;
	const json_t *timing; /* the request's timing options */
	int measure_compile;
	int device_queues; /* the hardware queues of the timed children's contexts */
};

/*
 * Which harness measured the judge's baselines, in every key: 2 since each arm is a {"device",
 * "wall"} pair of summaries; 3 since the L2 flush reads instead of writing (a cold call no
 * longer pays the write-back of the flush's dirty lines, so its time is shorter) and small
 * inputs move between pool regions; 4 since an arm may be timed in several processes (its
 * samples are theirs together). An entry of another harness is never reused.
 */
#define KAGENT_BASELINE_CACHE_HARNESS 4

/* A cache file larger than this is not a cache file kagent wrote. */
#define KAGENT_BASELINE_CACHE_FILE_CAP (1024 * 1024)

/* The key as a canonical string (compact JSON with sorted keys); the caller frees it. */
char *kagent_baseline_cache_key(const struct kagent_baseline_key *key);
/* The file for a key: <cache_dir>/baselines/<hex>.json; the caller frees it. */
char *kagent_baseline_cache_path(const char *cache_dir, const char *key);
/*
 * Returns 0 and in *baselines_out a new reference to the cached "baselines" object, or NULL
 * when nothing usable is cached (absent, unreadable, corrupt or another key's file: a cache
 * is never a reason to fail).
 */
int kagent_baseline_cache_lookup(const char *cache_dir, const char *key, json_t **baselines_out);
/*
 * Whether cached baselines should be measured again for a torch.compile cap of
 * compile_timeout_seconds: 1 when their compile baseline was abandoned at a smaller cap
 * ("compile_timeout_seconds" in the baselines), so that only a larger cap retries it; 0 for
 * any other entry (a compile that was measured or failed on its own is kept whatever the cap).
 */
int kagent_baseline_cache_compile_retry(const json_t *baselines, int compile_timeout_seconds);
/* Writes the entry atomically (temporary file and rename). 0 or a negative errno with *cause. */
int kagent_baseline_cache_store(const char *cache_dir, const char *key, const json_t *baselines,
				char **cause);

#endif
