/*
 * One evaluation, or one check of a problem (see include/kagent/evaluator/evaluation.h): both
 * go the same way (files, GPU, job folder, worker, request, answer) and differ only in the
 * request sent and how its answer is read. The order of the checks is deliberate: everything
 * that can fail without Python (files, GPU) is checked before a worker is started, so a user
 * without a GPU hears so in milliseconds rather than after torch has imported.
 */
#include "kagent/evaluator/evaluation.h"
#include "kagent/base/fileio.h"
#include "kagent/base/alloc.h"
#include "kagent/evaluator/baseline_cache.h"
#include "kagent/cuda/cuda_driver.h"
#include "kagent/base/log.h"
#include "kagent/base/paths.h"
#include "kagent/base/sha256.h"
#include "kagent/evaluator/tolerance.h"
#include "kagent/evaluator/verdict.h"
#include "kagent/evaluator/worker_client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* A candidate larger than this is not source a person or a model wrote. */
#define EVALUATION_SOURCE_CAP (4 * 1024 * 1024)
#define EVALUATION_WALL_SECONDS 300
/* The worker's own wall limit plus this much before kagent gives up on it. */
#define EVALUATION_GRACE_SECONDS 60

struct evaluation__state {
	uv_loop_t *loop;
	uv_timer_t defer; /* delivers early errors from the loop, not from start */
	kagent_evaluation_callback callback;
	void *data;
	struct kagent_evaluation_options options;
	int check_only; /* a check_problem request: no candidate, no baselines */
	char *problem_path, *candidate_path, *device, *worker_socket;
	char problem_sha256[KAGENT_SHA256_HEX_SIZE];
	char candidate_sha256[KAGENT_SHA256_HEX_SIZE];
	const char *backend;
	struct kagent_gpu_info gpu;
	int have_gpu;
	char *cache_dir;
	char *sandbox_cache_dir;
	/* The job folder (0711): copies of the problem and the candidate that the
	 * sandbox uid can read but not change, scratch/ (the candidate's only writable
	 * folder) and judge/ (the judge's home). */
	char *job_dir;
	char *cache_key;
	json_t *cached_baselines;
	kagent_worker_client_t *worker;
	int tried_default_socket;
	uint64_t started_ns;
	json_t *outcome; /* the verdict or error object to deliver */
	int outcome_status;
	int delivered;
};

const char *
kagent_evaluation_detect_backend(const char *source)
{
	if (source == NULL)
		return "unknown";
	if (strstr(source, "import triton") != NULL || strstr(source, "@triton.jit") != NULL ||
	    strstr(source, "from triton") != NULL)
		return "triton";
	if (strstr(source, "load_inline") != NULL || strstr(source, "cpp_extension") != NULL ||
	    strstr(source, "kagent_runner.cuda") != NULL ||
	    strstr(source, "from kagent_runner import cuda") != NULL)
		return "cuda";
	return "unknown";
}

static void
evaluation__free(struct evaluation__state *state)
{
	if (state->job_dir != NULL)
		kagent_paths_remove_tree(state->job_dir, NULL);
	free(state->job_dir);
	free(state->sandbox_cache_dir);
	free(state->problem_path);
	free(state->candidate_path);
	free(state->device);
	free(state->worker_socket);
	free(state->cache_dir);
	free(state->cache_key);
	json_decref(state->cached_baselines);
	json_decref(state->outcome);
	free(state);
}

static void
evaluation__timer_closed(uv_handle_t *handle)
{
	evaluation__free(handle->data);
}

/* The worker is gone: deliver, then let the timer's close callback free everything. */
static void
evaluation__finish(struct evaluation__state *state)
{
	if (!state->delivered) {
		state->delivered = 1;
		state->callback(state->outcome_status, state->outcome, state->data);
	}
	uv_close((uv_handle_t *)&state->defer, evaluation__timer_closed);
}

static void
evaluation__worker_closed(void *data)
{
	evaluation__finish(data);
}

/* Records the outcome (first one wins) and closes the worker, if any. */
static void
evaluation__end(struct evaluation__state *state, int status, json_t *outcome)
{
	if (state->outcome == NULL) {
		state->outcome = outcome;
		state->outcome_status = status;
	} else {
		json_decref(outcome);
	}
	if (state->worker != NULL) {
		kagent_worker_client_t *worker = state->worker;

		state->worker = NULL;
		kagent_worker_client_close(worker, evaluation__worker_closed, state);
		return;
	}
	evaluation__finish(state);
}

static void
evaluation__fail(struct evaluation__state *state, int status, const char *kind, const char *message)
{
	kagent_log(KAGENT_LOG_INFO, "%s: %s", kind, message);
	evaluation__end(state, status, kagent_verdict_error_json(kind, message));
}

static void
evaluation__deferred_failure(uv_timer_t *timer)
{
	struct evaluation__state *state = timer->data;

	evaluation__end(state, state->outcome_status, NULL);
}

/* An error found before the loop ran: keep it and deliver it from the loop. */
static void
evaluation__fail_early(struct evaluation__state *state, int status, const char *kind,
		       const char *message)
{
	state->outcome = kagent_verdict_error_json(kind, message);
	state->outcome_status = status;
	uv_timer_start(&state->defer, evaluation__deferred_failure, 0, 0);
}

/*
 * When the worker runs as root, the judge and the candidate child of GPU N run as uid
 * EVALUATION_SANDBOX_UID_BASE + N: a uid nothing else uses, shared by the two because CUDA IPC
 * works only between processes of one uid (the candidate's Landlock domain still keeps it
 * from tracing or signalling the judge), and its own per GPU because the worker ends every
 * process of that uid after each evaluation.
 */
#define EVALUATION_SANDBOX_UID_BASE 2147400000
/* Lane L of GPU N runs as BASE + L * STRIDE + N (lane 0 as before): GPU indexes stay below
 * the stride, and the last lane's uid stays below INT32_MAX. */
#define EVALUATION_SANDBOX_LANE_STRIDE 256

/* The evaluation's lane; one outside 1 ... KAGENT_EVALUATION_LANE_CAP - 1 runs as lane 0. */
static int
evaluation__lane(const struct kagent_evaluation_options *options)
{
	return options->sandbox_lane > 0 && options->sandbox_lane < KAGENT_EVALUATION_LANE_CAP
		   ? options->sandbox_lane
		   : 0;
}

/* A folder of the sandbox cache for this evaluation's sandbox uid (its lane and GPU): name,
 * name-laneL, name-gpuN or name-laneL-gpuN. The worker gives the folder to that uid, so two
 * uids never share one: the compile baseline of GPU 0's sessions failed with "permission
 * denied" in the folder GPU 1's had taken. */
static char *
evaluation__uid_folder(const struct evaluation__state *state, const char *name)
{
	int lane = evaluation__lane(&state->options), gpu = state->options.gpu_index;
	char lane_part[32] = "", gpu_part[32] = "";

	if (lane > 0)
		snprintf(lane_part, sizeof lane_part, "-lane%d", lane);
	if (gpu > 0)
		snprintf(gpu_part, sizeof gpu_part, "-gpu%d", gpu);
	return kagent_asprintf("%s/%s%s%s", state->sandbox_cache_dir, name, lane_part, gpu_part);
}

static json_t *
evaluation__seeds(uint64_t base, int count)
{
	json_t *seeds = json_array();
	int index;

	for (index = 0; index < count; index++)
		json_array_append_new(seeds, json_integer((json_int_t)(base + (uint64_t)index)));
	return seeds;
}

/* The first round's size (warmup, min, max, target seconds), then the adaptive rounds' stop:
 * a median's 95% interval within 2% either side, then on towards 0.5% while the arm has used
 * less than 0.3 s, 2 s or 1000 calls per arm (docs/verdict.md); an arm in several processes
 * only where the reference's call is under 0.1 ms. */
static json_t *
evaluation__timing_options(void)
{
	return json_pack("{s:i, s:i, s:i, s:f, s:i, s:f, s:f, s:f, s:f, s:i, s:f}", "warmup_calls",
			 3, "min_calls", 10, "max_calls", 100, "target_seconds", 0.1,
			 "verify_calls", 5, "target_relative_ci", 0.02, "fine_relative_ci", 0.005,
			 "tighten_seconds", 0.3, "max_seconds", 2.0, "call_cap", 1000,
			 "processes_below_ms", 0.1);
}

/* A library beside the sandbox library (libkagent-trace.so, libkagent-cuda.so), when built. */
static json_t *
evaluation__sibling_library(const char *sandbox_library, const char *name)
{
	const char *slash = sandbox_library != NULL ? strrchr(sandbox_library, '/') : NULL;
	json_t *value = json_null();
	char *path;

	if (slash == NULL)
		return value;
	path = kagent_asprintf("%.*s/%s", (int)(slash - sandbox_library), sandbox_library, name);
	if (access(path, R_OK) == 0) {
		json_decref(value);
		value = json_string(path);
	}
	free(path);
	return value;
}

/* A string, or null when there is none: the key stays, since the runner reads every one. */
static json_t *
evaluation__string_or_null(const char *value)
{
	return value != NULL ? json_string(value) : json_null();
}

/* The cap on waiting for the torch.compile baseline, in seconds (a larger one would outlast
 * the evaluation's wall time). */
static int
evaluation__compile_timeout(const struct kagent_evaluation_options *options)
{
	if (options->compile_timeout_seconds <= 0)
		return KAGENT_EVALUATION_COMPILE_TIMEOUT_SECONDS;
	return options->compile_timeout_seconds < KAGENT_EVALUATION_COMPILE_TIMEOUT_MAX
		   ? options->compile_timeout_seconds
		   : KAGENT_EVALUATION_COMPILE_TIMEOUT_MAX;
}

/* The hardware queues every sandboxed child's context gets (the request's limits, and the
 * cached baselines' key: baselines timed with other queues are not this evaluation's arms). */
static int
evaluation__device_queues(const struct kagent_evaluation_options *options)
{
	if (options->device_queues > 0 &&
	    options->device_queues <= KAGENT_EVALUATION_DEVICE_QUEUES_MAX)
		return options->device_queues;
	return KAGENT_EVALUATION_DEVICE_QUEUES;
}

/* The processes the eager arm and the candidate's are each timed in (the request's
 * timing.processes; the worker and the judge may use fewer: docs/verdict.md, "Processes per
 * arm"). Not in the cached baselines' key: more processes measure the same arm, closer. */
static int
evaluation__timing_processes(const struct kagent_evaluation_options *options, const char *device)
{
	if (options->timing_processes > 0 &&
	    options->timing_processes <= KAGENT_EVALUATION_TIMING_PROCESSES_MAX)
		return options->timing_processes;
	return strcmp(device, "cpu") == 0 ? 1 : KAGENT_EVALUATION_TIMING_PROCESSES;
}

/* The request's "limits": what the worker and the sandbox allow the candidate. */
static json_t *
evaluation__limits(const struct kagent_evaluation_options *options)
{
	int call_timeout = options->call_timeout_seconds;
	json_t *limits = json_object();

	json_object_set_new(limits, "wall_seconds", json_integer(EVALUATION_WALL_SECONDS));
	json_object_set_new(limits, "first_call_seconds",
			    json_integer(call_timeout > 0 ? call_timeout : 120));
	json_object_set_new(limits, "call_seconds",
			    json_integer(call_timeout > 0 ? call_timeout : 20));
	json_object_set_new(limits, "compile_seconds",
			    json_integer(evaluation__compile_timeout(options)));
	json_object_set_new(limits, "device_queues",
			    json_integer(evaluation__device_queues(options)));
	json_object_set_new(limits, "cpu_seconds", json_integer(600));
	json_object_set_new(limits, "max_processes", json_integer(256));
	json_object_set_new(limits, "output_bytes", json_integer(65536));
	return limits;
}

/* Fresh seeds per run unless the options fix them, so a candidate cannot learn its inputs. */
static uint64_t
evaluation__seed_base(const struct kagent_evaluation_options *options)
{
	uint32_t random_value = 0;

	if (options->seed != 0)
		return options->seed;
	if (getrandom(&random_value, sizeof random_value, 0) != sizeof random_value)
		random_value = (uint32_t)uv_hrtime();
	return 1 + random_value % 1000000000u;
}

/* The keys both requests of docs/worker-protocol.md carry; id is taken over. */
static json_t *
evaluation__request_base(struct evaluation__state *state, const char *type, json_t *id,
			 json_t *seeds)
{
	const struct kagent_evaluation_options *options = &state->options;
	char *judge_cache =
	    state->sandbox_cache_dir != NULL ? evaluation__uid_folder(state, "judge") : NULL;
	json_t *request = json_object();
	int lane = evaluation__lane(options);

	json_object_set_new(request, "type", json_string(type));
	json_object_set_new(request, "id", id);
	json_object_set_new(request, "problem_path", json_sprintf("%s/problem.py", state->job_dir));
	json_object_set_new(request, "device", json_string(state->device));
	json_object_set_new(request, "gpu_index", json_integer(options->gpu_index));
	json_object_set_new(request, "seeds", seeds);
	json_object_set_new(request, "limits", evaluation__limits(options));
	json_object_set_new(request, "scratch_directory",
			    json_sprintf("%s/scratch", state->job_dir));
	json_object_set_new(request, "judge_cache_directory",
			    evaluation__string_or_null(judge_cache));
	json_object_set_new(request, "sandbox_uid",
			    json_integer(EVALUATION_SANDBOX_UID_BASE +
					 lane * EVALUATION_SANDBOX_LANE_STRIDE +
					 options->gpu_index));
	json_object_set_new(request, "judge_directory", json_sprintf("%s/judge", state->job_dir));
	/* One per device, whatever the lane or the process: kagent eval, sessions and
	 * kagentd's lanes never time at once on one GPU (docs/worker-protocol.md). */
	if (state->sandbox_cache_dir == NULL)
		json_object_set_new(request, "timing_lock", json_null());
	else if (strcmp(state->device, "cpu") == 0)
		json_object_set_new(request, "timing_lock",
				    json_sprintf("%s/timing-cpu.lock", state->sandbox_cache_dir));
	else
		json_object_set_new(request, "timing_lock",
				    json_sprintf("%s/timing-gpu%d.lock", state->sandbox_cache_dir,
						 options->gpu_index));
	free(judge_cache);
	return request;
}

/* The "check_problem" request: the problem's Model and inputs from the first seed. */
static json_t *
evaluation__check_request(struct evaluation__state *state)
{
	json_t *request = evaluation__request_base(
	    state, "check_problem", json_sprintf("check-%.16s", state->problem_sha256),
	    evaluation__seeds(evaluation__seed_base(&state->options), 1));

	if (state->options.model_analysis != NULL)
		json_object_set(request, "model_analysis", (json_t *)state->options.model_analysis);
	return request;
}

/* The "evaluate" request, one key at a time. */
static json_t *
evaluation__request(struct evaluation__state *state)
{
	const struct kagent_evaluation_options *options = &state->options;
	uint64_t base = evaluation__seed_base(options);
	int trials = options->trials > 0 ? options->trials : 3;
	int signed_trials = options->signed_trials == 0	 ? 2
			    : options->signed_trials < 0 ? 0
							 : options->signed_trials;
	char *sandbox_library = NULL, *cause = NULL, *candidate_cache = NULL;
	json_t *timing;
	json_t *request = evaluation__request_base(
	    state, "evaluate",
	    json_sprintf("%.16s-%llu", state->candidate_sha256, (unsigned long long)base),
	    evaluation__seeds(base, trials));

	kagent_paths_sandbox_library(&sandbox_library, &cause);
	free(cause);
	if (state->sandbox_cache_dir != NULL) {
		char *candidates = evaluation__uid_folder(state, "candidates");

		candidate_cache = kagent_asprintf("%s/%s", candidates, state->candidate_sha256);
		free(candidates);
	}
	json_object_set_new(request, "candidate_path",
			    json_sprintf("%s/candidate.py", state->job_dir));
	json_object_set_new(request, "signed_seeds",
			    evaluation__seeds(base + 100000, signed_trials));
	json_object_set_new(request, "tolerances", kagent_tolerance_table_to_json());
	timing = evaluation__timing_options();
	/* Sent, not in the cache key: the judge measures both bases whichever one is asked for. */
	json_object_set_new(timing, "basis",
			    json_string(kagent_verdict_basis_name(options->speedup_basis)));
	json_object_set_new(timing, "processes",
			    json_integer(evaluation__timing_processes(options, state->device)));
	json_object_set_new(request, "timing", timing);
	json_object_set_new(request, "baselines",
			    state->cached_baselines != NULL ? json_incref(state->cached_baselines)
							    : json_null());
	json_object_set_new(request, "measure_compile",
			    json_boolean(options->measure_compile != 0));
	json_object_set_new(request, "cache_directory",
			    evaluation__string_or_null(candidate_cache));
	json_object_set_new(request, "sandbox_library",
			    evaluation__string_or_null(sandbox_library));
	json_object_set_new(request, "trace_library",
			    evaluation__sibling_library(sandbox_library, "libkagent-trace.so"));
	json_object_set_new(request, "cuda_library",
			    evaluation__sibling_library(sandbox_library, "libkagent-cuda.so"));
	json_object_set_new(request, "profile_reference",
			    json_boolean(options->profile_reference != 0));
	json_object_set_new(request, "generalisation", json_boolean(options->generalisation != 0));
	free(candidate_cache);
	free(sandbox_library);
	return request;
}

/*
 * Reads a problem_check answer: 0, or a negative errno with *kind and *cause: -EINVAL and
 * "problem" when the problem cannot be used (worded as a verdict's problem error), -EPROTO
 * and "worker" when the worker could not tell.
 */
static int
evaluation__check_outcome(const json_t *response, const char **kind, char **cause)
{
	const char *type = json_string_value(json_object_get(response, "type"));
	const char *problem_error = json_string_value(json_object_get(response, "problem_error"));
	const char *internal_error = json_string_value(json_object_get(response, "internal_error"));

	*kind = "worker";
	if (type != NULL && strcmp(type, "error") == 0) {
		const char *message = json_string_value(json_object_get(response, "message"));

		*cause = kagent_asprintf("the worker reported an error: %s",
					 message != NULL ? message : "(no message)");
		return -EPROTO;
	}
	if (type == NULL || strcmp(type, "problem_check") != 0) {
		*cause = kagent_asprintf("the worker answered the problem check with a message of "
					 "type %s",
					 type != NULL ? type : "(none)");
		return -EPROTO;
	}
	if (problem_error != NULL) {
		*kind = "problem";
		*cause = kagent_asprintf("the problem cannot be used: %.*s",
					 (int)strcspn(problem_error, "\n"), problem_error);
		return -EINVAL;
	}
	if (internal_error != NULL) {
		*cause = kagent_asprintf("the problem check failed: %.*s",
					 (int)strcspn(internal_error, "\n"), internal_error);
		return -EPROTO;
	}
	return 0;
}

static void
evaluation__on_checked(kagent_worker_client_t *worker, int status, const json_t *response,
		       const char *message, void *data)
{
	struct evaluation__state *state = data;
	const char *kind = "worker";
	char *cause = NULL;

	if (status != 0) {
		evaluation__fail(state, status, kind, message);
		return;
	}
	status = evaluation__check_outcome(response, &kind, &cause);
	if (status != 0) {
		evaluation__fail(state, status, kind, cause);
		free(cause);
		return;
	}
	evaluation__end(state, 0, json_incref((json_t *)response));
}

static void
evaluation__on_response(kagent_worker_client_t *worker, int status, const json_t *response,
			const char *message, void *data)
{
	struct evaluation__state *state = data;
	struct kagent_verdict_input in = {
	    .result = response,
	    .hello = kagent_worker_client_hello(worker),
	    .problem_path = state->problem_path,
	    .problem_sha256 = state->problem_sha256,
	    .candidate_path = state->candidate_path,
	    .candidate_sha256 = state->candidate_sha256,
	    .backend = state->backend,
	    .device = state->device,
	    .gpu = state->have_gpu ? &state->gpu : NULL,
	    .baselines_cached = state->cached_baselines != NULL,
	    .credit_threshold = state->options.credit_threshold,
	    .basis = state->options.speedup_basis,
	};
	const json_t *baselines;
	json_t *verdict = NULL;
	char *cause = NULL;
	int error;

	if (status != 0) {
		evaluation__fail(state, status, "worker", message);
		return;
	}
	in.wall_seconds = (double)(uv_hrtime() - state->started_ns) / 1e9;
	error = kagent_verdict_build(&in, &verdict, &cause);
	if (error != 0) {
		evaluation__fail(state, error, error == -EINVAL ? "problem" : "worker", cause);
		free(cause);
		return;
	}
	baselines = json_object_get(json_object_get(response, "judge"), "baselines");
	if (!state->options.no_cache && state->cache_key != NULL && json_is_object(baselines) &&
	    json_is_true(json_object_get(baselines, "measured"))) {
		if (kagent_baseline_cache_store(state->cache_dir, state->cache_key, baselines,
						&cause) != 0) {
			kagent_log(KAGENT_LOG_WARNING, "baselines not cached: %s", cause);
			free(cause);
		}
	}
	evaluation__end(state, 0, verdict);
}

static void evaluation__on_ready(kagent_worker_client_t *worker, int status, const json_t *hello,
				 const char *message, void *data);

static int
evaluation__spawn(struct evaluation__state *state, char **cause)
{
	struct kagent_worker_client_spawn_options options = {
	    .hello_timeout_ms = (unsigned)state->options.worker_hello_timeout_ms,
	    /* A one-shot worker has nothing to finish once it answered: SIGTERM at once spares
	     * the wait for Python's teardown of torch (the worker ends its children first). */
	    .term_after_ms = 1,
	    .echo_stderr = kagent_log_verbosity >= KAGENT_LOG_INFO,
	};

	return kagent_worker_client_spawn(state->loop, &options, evaluation__on_ready, state,
					  &state->worker, cause);
}

static void
evaluation__on_ready(kagent_worker_client_t *worker, int status, const json_t *hello,
		     const char *message, void *data)
{
	struct evaluation__state *state = data;
	struct kagent_baseline_key key = {0};
	json_t *request = NULL, *timing = NULL;
	char *cause = NULL;
	int error;

	if (status == -ECANCELED)
		return; /* we closed it */
	if (status != 0 && state->tried_default_socket) {
		/* Nobody answers on the default socket: start a worker of our own. */
		kagent_log(KAGENT_LOG_INFO, "no worker on the default socket (%s); spawning one",
			   message);
		state->tried_default_socket = 0;
		state->worker = NULL;
		kagent_worker_client_close(worker, NULL, NULL);
		error = evaluation__spawn(state, &cause);
		if (error != 0) {
			evaluation__fail(state, error, "worker", cause);
			free(cause);
		}
		return;
	}
	if (status != 0) {
		evaluation__fail(state, status, "worker", message);
		return;
	}
	if (state->cache_dir != NULL && !state->options.no_cache && !state->check_only) {
		timing = evaluation__timing_options();
		key.problem_sha256 = state->problem_sha256;
		key.device = state->device;
		key.gpu_name = state->have_gpu ? state->gpu.name : NULL;
		key.driver = state->have_gpu ? state->gpu.driver : NULL;
		key.torch = json_string_value(json_object_get(hello, "torch"));
		key.triton = json_string_value(json_object_get(hello, "triton"));
		key.cuda_runtime = json_string_value(json_object_get(hello, "cuda_runtime"));
		key.timing = timing;
		key.measure_compile = state->options.measure_compile;
		key.device_queues = evaluation__device_queues(&state->options);
		state->cache_key = kagent_baseline_cache_key(&key);
		kagent_baseline_cache_lookup(state->cache_dir, state->cache_key,
					     &state->cached_baselines);
		/* A compile abandoned at a smaller cap is tried again under this larger one. */
		if (kagent_baseline_cache_compile_retry(
			state->cached_baselines, evaluation__compile_timeout(&state->options))) {
			json_decref(state->cached_baselines);
			state->cached_baselines = NULL;
		}
	}
	request = state->check_only ? evaluation__check_request(state) : evaluation__request(state);
	error = kagent_worker_client_request(
	    worker, request, (uint64_t)(EVALUATION_WALL_SECONDS + EVALUATION_GRACE_SECONDS) * 1000,
	    state->check_only ? evaluation__on_checked : evaluation__on_response, state, &cause);
	if (error != 0) {
		evaluation__fail(state, error, "worker", cause);
		free(cause);
	}
	json_decref(request);
	json_decref(timing);
}

/* Resolves a path and reads its content (capped) when wanted; a message on failure. */
static int
evaluation__read_source(const char *path, const char *role, char **resolved, char **text,
			char **cause)
{
	char buffer[PATH_MAX];
	struct stat info;
	ssize_t got;
	size_t used = 0;
	int fd = -1, error = 0;

	*resolved = NULL;
	if (text != NULL)
		*text = NULL;
	if (realpath(path, buffer) == NULL || stat(buffer, &info) != 0) {
		error = -errno;
		*cause = kagent_asprintf("cannot read the %s %s: %s", role, path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(info.st_mode)) {
		error = -EINVAL;
		*cause = kagent_asprintf("the %s %s is not a regular file", role, path);
		goto out;
	}
	fd = open(buffer, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		error = -errno;
		*cause = kagent_asprintf("cannot read the %s %s: %s", role, path, strerror(errno));
		goto out;
	}
	*resolved = kagent_strdup(buffer);
	if (text == NULL)
		goto out;
	*text = kagent_malloc(EVALUATION_SOURCE_CAP + 1);
	while (used < EVALUATION_SOURCE_CAP &&
	       (got = read(fd, *text + used, EVALUATION_SOURCE_CAP - used)) > 0)
		used += (size_t)got;
	(*text)[used] = '\0';
out:
	if (fd >= 0)
		close(fd);
	return error;
}

/* Copies a file into the job folder, readable by the sandbox uid (mode 0644). */
static int
evaluation__copy_into_job(const char *from, const char *job_dir, const char *name, char **cause)
{
	char *data = NULL, *to = kagent_asprintf("%s/%s", job_dir, name);
	size_t size = 0;
	int error;

	error = kagent_fileio_read(from, EVALUATION_SOURCE_CAP, &data, &size, cause);
	if (error == 0)
		error = kagent_fileio_write_atomic(to, data, size, cause);
	if (error == 0 && chmod(to, 0644) != 0) {
		error = -errno;
		*cause = kagent_asprintf("cannot make %s readable: %s", to, strerror(errno));
	}
	free(data);
	free(to);
	return error;
}

/* The job folder: see struct evaluation__state. */
static int
evaluation__make_job(struct evaluation__state *state, const char *tmp, char **cause)
{
	static const char *const folders[] = {"scratch", "judge"};
	char *path;
	size_t index;
	int error = 0;

	state->job_dir = kagent_asprintf("%s/kagent-job-XXXXXX", tmp);
	if (mkdtemp(state->job_dir) == NULL || chmod(state->job_dir, 0711) != 0) {
		error = -errno;
		*cause = kagent_asprintf("cannot create a job folder %s: %s", state->job_dir,
					 strerror(errno));
		free(state->job_dir);
		state->job_dir = NULL;
		goto out;
	}
	for (index = 0; index < sizeof folders / sizeof folders[0]; index++) {
		path = kagent_asprintf("%s/%s", state->job_dir, folders[index]);
		if (mkdir(path, 0700) != 0) {
			error = -errno;
			*cause = kagent_asprintf("cannot create %s: %s", path, strerror(errno));
		}
		free(path);
		if (error != 0)
			goto out;
	}
	if ((error = evaluation__copy_into_job(state->problem_path, state->job_dir, "problem.py",
					       cause)) != 0)
		goto out;
	if (!state->check_only)
		error = evaluation__copy_into_job(state->candidate_path, state->job_dir,
						  "candidate.py", cause);
out:
	return error;
}

static int
evaluation__prepare(struct evaluation__state *state, const char **kind, char **cause)
{
	const struct kagent_evaluation_options *options = &state->options;
	const char *tmp = getenv("TMPDIR");
	char *source = NULL, *socket_path = NULL;
	struct stat info;
	int error = 0;

	*kind = "usage";
	if (options->problem_path == NULL ||
	    (options->candidate_path == NULL && !state->check_only)) {
		error = -EINVAL;
		*cause = kagent_strdup("a problem and a candidate file are both needed");
		goto out;
	}
	if (strcmp(state->device, "cuda") != 0 && strcmp(state->device, "cpu") != 0) {
		error = -EINVAL;
		*cause = kagent_asprintf("unknown device '%s' (use cuda or cpu)", state->device);
		goto out;
	}
	*kind = "io";
	error = evaluation__read_source(options->problem_path, "problem", &state->problem_path,
					NULL, cause);
	if (error != 0)
		goto out;
	if ((error = kagent_sha256_file_hex(state->problem_path, state->problem_sha256, cause)) !=
	    0)
		goto out;
	if (!state->check_only) {
		error = evaluation__read_source(options->candidate_path, "candidate",
						&state->candidate_path, &source, cause);
		if (error == 0)
			error = kagent_sha256_file_hex(state->candidate_path,
						       state->candidate_sha256, cause);
		if (error != 0)
			goto out;
		state->backend = kagent_evaluation_detect_backend(source);
	}
	if (strcmp(state->device, "cuda") == 0) {
		*kind = "no_gpu";
		if ((error = kagent_cuda_driver_probe(&state->gpu, options->gpu_index, cause)) != 0)
			goto out;
		state->have_gpu = 1;
	}
	*kind = "io";
	if (kagent_paths_cache_dir(&state->cache_dir, cause) != 0) {
		/* Without a cache the evaluation still works, only slower. */
		kagent_log(KAGENT_LOG_WARNING, "no cache: %s", *cause);
		free(*cause);
		*cause = NULL;
	}
	if (kagent_paths_sandbox_cache_dir(&state->sandbox_cache_dir, cause) != 0) {
		kagent_log(KAGENT_LOG_WARNING, "no cache for the sandbox: %s", *cause);
		free(*cause);
		*cause = NULL;
	}
	if ((error = evaluation__make_job(state, tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp",
					  cause)) != 0)
		goto out;
	*kind = "worker";
	state->started_ns = uv_hrtime();
	if (state->worker_socket != NULL) {
		error = kagent_worker_client_connect(
		    state->loop, state->worker_socket, (unsigned)options->worker_hello_timeout_ms,
		    evaluation__on_ready, state, &state->worker, cause);
		goto out;
	}
	if (!options->cold) {
		kagent_paths_worker_socket(&socket_path, cause);
		if (socket_path != NULL && stat(socket_path, &info) == 0 &&
		    S_ISSOCK(info.st_mode)) {
			state->tried_default_socket = 1;
			error = kagent_worker_client_connect(state->loop, socket_path, 10000,
							     evaluation__on_ready, state,
							     &state->worker, cause);
			goto out;
		}
	}
	error = evaluation__spawn(state, cause);
out:
	free(socket_path);
	free(source);
	return error;
}

static void
evaluation__begin(uv_loop_t *loop, const struct kagent_evaluation_options *options, int check_only,
		  kagent_evaluation_callback callback, void *data)
{
	struct evaluation__state *state = kagent_calloc(1, sizeof *state);
	const char *kind = "usage";
	char *cause = NULL;
	int error;

	state->loop = loop;
	state->check_only = check_only;
	state->callback = callback;
	state->data = data;
	state->options = *options;
	state->device = kagent_strdup(options->device ? options->device : "cuda");
	state->worker_socket =
	    options->worker_socket ? kagent_strdup(options->worker_socket) : NULL;
	state->options.device = state->device;
	state->options.worker_socket = state->worker_socket;
	uv_timer_init(loop, &state->defer);
	state->defer.data = state;
	error = evaluation__prepare(state, &kind, &cause);
	/* The caller's path strings need not outlive this call: only the resolved copies stay. */
	state->options.problem_path = NULL;
	state->options.candidate_path = NULL;
	if (error != 0) {
		evaluation__fail_early(state, error, kind, cause);
		free(cause);
	}
}

void
kagent_evaluation_start(uv_loop_t *loop, const struct kagent_evaluation_options *options,
			kagent_evaluation_callback callback, void *data)
{
	evaluation__begin(loop, options, 0, callback, data);
}

void
kagent_evaluation_check_problem(uv_loop_t *loop, const struct kagent_evaluation_options *options,
				kagent_evaluation_callback callback, void *data)
{
	evaluation__begin(loop, options, 1, callback, data);
}

struct evaluation__sync {
	json_t *object;
	int status;
};

static void
evaluation__sync_done(int status, const json_t *object, void *data)
{
	struct evaluation__sync *sync = data;

	sync->status = status;
	sync->object = json_incref((json_t *)object);
}

int
kagent_evaluation_run_sync(const struct kagent_evaluation_options *options, json_t **object_out)
{
	struct evaluation__sync sync = {NULL, -EINTR};
	uv_loop_t loop;
	int error;

	error = uv_loop_init(&loop);
	if (error != 0) {
		*object_out = kagent_verdict_error_json("io", uv_strerror(error));
		return -ENOMEM;
	}
	kagent_evaluation_start(&loop, options, evaluation__sync_done, &sync);
	uv_run(&loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&loop) != 0)
		kagent_log(KAGENT_LOG_ERROR, "the evaluation left handles open");
	if (sync.object == NULL)
		sync.object = kagent_verdict_error_json("worker", "the evaluation never finished");
	*object_out = sync.object;
	return sync.status;
}
