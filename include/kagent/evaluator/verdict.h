/*
 * The verdict: what `kagent eval` concludes from a worker's `result`
 * (docs/worker-protocol.md), in the shape of docs/verdict.md. Building it is a
 * pure function of the result and its context, so every status and named check
 * is tested without torch or a GPU.
 */
#ifndef KAGENT_VERDICT_H
#define KAGENT_VERDICT_H

#include <jansson.h>
#include <stdio.h>

struct kagent_gpu_info;

#define KAGENT_VERDICT_SCHEMA "kagent.verdict/1"
#define KAGENT_ERROR_SCHEMA "kagent.error/1"
/* The share of device time a candidate's own kernels need for its speedup to be credited. */
#define KAGENT_VERDICT_CREDIT_THRESHOLD 0.05

/* In the order docs/verdict.md decides them (correct last). */
enum kagent_verdict_status {
	KAGENT_VERDICT_TIMEOUT,
	KAGENT_VERDICT_COMPILE_ERROR,
	KAGENT_VERDICT_REJECTED,
	KAGENT_VERDICT_CRASHED,
	KAGENT_VERDICT_RUNTIME_ERROR,
	KAGENT_VERDICT_INCORRECT,
	KAGENT_VERDICT_CORRECT,
	KAGENT_VERDICT_STATUS_COUNT,
};

/*
 * The clock a verdict's speedups are read in (docs/verdict.md, "Device time and wall time"):
 * device time is CUPTI's union of the kernels' and copies' intervals per call, wall time the
 * judge's clock around each call. The judge measures both; the verdict reports both and takes
 * its top-level numbers from one.
 */
enum kagent_verdict_basis {
	KAGENT_VERDICT_BASIS_DEVICE, /* the default: zero in an input means device */
	KAGENT_VERDICT_BASIS_WALL,
	KAGENT_VERDICT_BASIS_COUNT,
};

/* Indexed by enum kagent_verdict_basis, NULL-terminated (a config key's choices). */
extern const char *const kagent_verdict_basis_names[KAGENT_VERDICT_BASIS_COUNT + 1];

/* Indexed by enum kagent_verdict_status: "timeout", "compile_error", ... */
extern const char *const kagent_verdict_status_names[KAGENT_VERDICT_STATUS_COUNT];

struct kagent_verdict_input {
	const json_t *result; /* the worker's {"type": "result", ...} object */
	const json_t
	    *hello; /* the worker's hello (versions when the judge gave none); may be NULL */
	const char *problem_path;
	const char *problem_sha256;
	const char *candidate_path;
	const char *candidate_sha256;
	const char *backend;		   /* "triton", "cuda", "unknown" */
	const char *device;		   /* "cuda" or "cpu" */
	const struct kagent_gpu_info *gpu; /* NULL on the CPU */
	double wall_seconds;		   /* the whole evaluation as the caller saw it */
	int baselines_cached;		   /* the request carried cached baselines */
	/* the credit rule's threshold, 0 to 1; 0: KAGENT_VERDICT_CREDIT_THRESHOLD */
	double credit_threshold;
	/* the basis asked for; device falls back to wall where the judge measured no device time */
	enum kagent_verdict_basis basis;
};

/* Returns the status's name, or "unknown" for a value out of range. */
const char *kagent_verdict_status_name(enum kagent_verdict_status status);
/* Returns the status for a name, or -EINVAL. */
int kagent_verdict_status_from_name(const char *name);
/* "device" or "wall"; "unknown" for a value out of range. */
const char *kagent_verdict_basis_name(enum kagent_verdict_basis basis);
/* Returns the basis for a name, or -EINVAL. */
int kagent_verdict_basis_from_name(const char *name);
/*
 * Builds the verdict object. Returns 0 and a new reference in *verdict_out, or with
 * *cause: -EINVAL when the problem itself cannot be used (the judge's problem_error),
 * -EPROTO when the worker answered with an error or a malformed result, or the judge died.
 */
int kagent_verdict_build(const struct kagent_verdict_input *in, json_t **verdict_out, char **cause);
/*
 * The credit rule of docs/verdict.md on a judge's kernel profile (NULL or not an object when
 * none was recorded): {"own_share", "library_share", "own_ms", "library_ms", "own_saved_ms",
 * "credited", "threshold", "reason"}; a new reference. threshold 0 means
 * KAGENT_VERDICT_CREDIT_THRESHOLD. eager_ms is eager PyTorch's median in the verdict's basis,
 * NAN when unknown; own_saved_ms is eager_ms - library_ms - own_ms, null when any is unknown.
 */
json_t *kagent_verdict_credit(const json_t *kernels, double threshold, double eager_ms);
/*
 * The generalisation gate of docs/verdict.md on a judge's report (NULL or not an object when
 * it did not run): {"checked", "sizes", "generalises" (true, false, or null when not checked),
 * "reason", "trial"}; a new reference. A candidate that fails at the other sizes does not
 * generalise; its status is not changed by it.
 */
json_t *kagent_verdict_generalisation(const json_t *report);
/* 0 only for a correct verdict, else 1. */
int kagent_verdict_exit_status(const json_t *verdict);
/* {"schema": "kagent.error/1", "error": kind, "message": message}; a new reference. */
json_t *kagent_verdict_error_json(const char *kind, const char *message);
/* A short summary for a person: status, reason, timings, kernels, violations, warnings. */
void kagent_verdict_render_text(const json_t *verdict, FILE *stream);

#endif
