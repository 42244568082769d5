/*
 * One evaluation of a candidate against a problem, end to end: files, hashes,
 * GPU probe, a worker (running or spawned), the request, cached baselines, the
 * verdict; and the check of a problem before any candidate is asked for. The CLI, the
 * agent loop and the daemon all call this.
 */
#ifndef KAGENT_EVALUATION_H
#define KAGENT_EVALUATION_H

#include "kagent/evaluator/verdict.h"

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

struct kagent_evaluation_options {
	const char *problem_path;
	const char *candidate_path;
	const char *device; /* "cuda" (NULL means cuda) or "cpu" */
	int gpu_index;
	uint64_t seed;		   /* 0: a random base; else seeds are seed, seed+1, ... */
	int trials;		   /* 0: 3 on the problem's own inputs */
	int signed_trials;	   /* 0: 2 on signed inputs; -1: none */
	const char *worker_socket; /* a running worker; NULL: the default socket or a new one */
	int cold;		   /* never use a running worker: spawn one */
	int no_cache;		   /* neither read nor write cached baselines */
	int measure_compile;	   /* time torch.compile as a baseline */
	/* 0: KAGENT_EVALUATION_COMPILE_TIMEOUT_SECONDS; else how long the verdict waits for the
	 * torch.compile baseline before it goes without it (docs/verdict.md) */
	int compile_timeout_seconds;
	/* 0: 120 s for the first call (it may build the kernels), 20 s for later ones; else
	 * the limit for every call, after which the candidate counts as hung */
	int call_timeout_seconds;
	/* 0: KAGENT_EVALUATION_DEVICE_QUEUES; else the hardware queues
	 * (CUDA_DEVICE_MAX_CONNECTIONS) of every sandboxed child's CUDA context, up to
	 * KAGENT_EVALUATION_DEVICE_QUEUES_MAX */
	int device_queues;
	/* 0: KAGENT_EVALUATION_TIMING_PROCESSES on a GPU, 1 on the CPU; else the processes the
	 * eager arm and the candidate's are each timed in, up to
	 * KAGENT_EVALUATION_TIMING_PROCESSES_MAX (docs/verdict.md, "Processes per arm") */
	int timing_processes;
	int profile_reference;	 /* also trace the reference's kernels (kagent profile) */
	double credit_threshold; /* the credit rule's (docs/verdict.md); 0: 0.05 */
	/* the clock the verdict's speedups are read in; 0: device (docs/verdict.md) */
	enum kagent_verdict_basis speedup_basis;
	uint64_t worker_hello_timeout_ms; /* 0: the worker module's default */
	/* also check correctness once at other sizes (the verdict's generalisation) */
	int generalisation;
	/* 0, or the lane of a GPU that runs evaluations side by side (kagentd's evaluation
	 * lanes, below EVALUATION_LANE_CAP): a sandbox uid, a uid lock and judge caches of
	 * its own; the GPU's timing lock keeps the timed calls of all lanes apart */
	int sandbox_lane;
	/* check_problem only: also analyse the problem as a whole model (kagent model); the
	 * object is sent as the request's "model_analysis" (docs/worker-protocol.md) and the
	 * answer carries the analysis. Borrowed. */
	const json_t *model_analysis;
};

/* The default cap on waiting for the torch.compile baseline: a large model's compile can take
 * minutes (DenseNet121 on an H100: 164 s of a 194 s first evaluation). */
#define KAGENT_EVALUATION_COMPILE_TIMEOUT_SECONDS 60
/* The largest cap --compile-timeout and the configuration accept: an evaluation's wall time
 * (300 s) less room for the timing that follows. */
#define KAGENT_EVALUATION_COMPILE_TIMEOUT_MAX 240

/* One hardware queue per sandboxed child's CUDA context, for every arm alike. The driver makes
 * and tears down contexts under a lock of the whole host, and more queues make that longer:
 * on a 4x H200 host, 32 processes at once made and ended 3.4 contexts a second with CUDA's
 * default 8 queues and 5.5 with 1 (bench/driver_ops.py, docs/benchmarks.md), and every
 * evaluation makes one. Streams still work on one queue; only kernels of different streams
 * overlap less (docs/verdict.md, "Hardware queues"). */
#define KAGENT_EVALUATION_DEVICE_QUEUES 1
/* CUDA's own limit on CUDA_DEVICE_MAX_CONNECTIONS. */
#define KAGENT_EVALUATION_DEVICE_QUEUES_MAX 32

/* Processes per arm on a GPU, where calls are short: each process brings a state of its own
 * to every call (a few percent of a 4 MB ReLU's 2.5 us), so a verdict's speedup moved 3-4%
 * from one verdict to the next with one process an arm. Four: part of the spread moves whole
 * verdicts, which more processes do not average away, and six measured no closer than four
 * while the reward service judged 4 MB problems 38% slower than with three (docs/benchmarks.md,
 * verdict v2 (a), session 19). On the CPU one: the state is the device's. */
#define KAGENT_EVALUATION_TIMING_PROCESSES 4
/* The most the runner accepts: each process takes two descriptors to the kept judge. */
#define KAGENT_EVALUATION_TIMING_PROCESSES_MAX 8

/* Lanes per GPU at most: each takes a sandbox uid of its own. */
#define KAGENT_EVALUATION_LANE_CAP 64

/*
 * status 0: object is a verdict (docs/verdict.md); otherwise a negative errno and object is an
 * error object {"schema", "error", "message"}. object is borrowed: json_incref to keep it.
 */
typedef void (*kagent_evaluation_callback)(int status, const json_t *object, void *data);

/* Starts an evaluation; callback runs exactly once, from the loop, never from this call. */
void kagent_evaluation_start(uv_loop_t *loop, const struct kagent_evaluation_options *options,
			     kagent_evaluation_callback callback, void *data);
/*
 * Checks, before any candidate exists, that the problem can be used: the worker loads it,
 * builds Model from get_init_inputs(), makes inputs with get_inputs() and runs the reference
 * once, as the judge does (docs/worker-protocol.md, check_problem). The options are an
 * evaluation's; candidate_path and those about candidates are ignored. callback runs once,
 * from the loop: status 0 with the worker's problem_check answer, or a negative errno with an
 * error object, whose "error" is "problem" (status -EINVAL) when the problem cannot be used.
 */
void kagent_evaluation_check_problem(uv_loop_t *loop,
				     const struct kagent_evaluation_options *options,
				     kagent_evaluation_callback callback, void *data);
/* Runs an evaluation on a loop of its own. Returns 0 with a verdict in *object_out, or a
 * negative errno with an error object; the caller releases *object_out. */
int kagent_evaluation_run_sync(const struct kagent_evaluation_options *options,
			       json_t **object_out);
/* "triton", "cuda" or "unknown" from a candidate's source text. */
const char *kagent_evaluation_detect_backend(const char *source);

#endif
