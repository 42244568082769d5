/*
 * kagentd's reward service (docs/reward-service.md): POST /v1/evaluations judges a list of
 * candidates against one problem, as `kagent eval --json` would, and GET /v1/evaluations/{id}
 * reads them back. Evaluations are held in the daemon's memory, never in the store: a finished
 * request is kept EVALUATIONS_RETAIN_SECONDS (at most EVALUATIONS_RETAIN_REQUESTS of them),
 * and a restart forgets them all.
 *
 * Throughput: each slot (GPU) has `lanes` evaluation lanes, each with a warm worker of its own
 * (torch imported once) and a sandbox uid of its own (kagent_evaluation_options.sandbox_lane),
 * so the loading, compiling and correctness trials of several candidates overlap on one GPU
 * while the GPU's timing lock keeps their timed calls apart (sandbox/runner/kagent_runner/
 * gpu_lock.py). Every slot takes from one queue, oldest first. Baselines are measured once per
 * problem and GPU: until the baseline cache holds them, a problem's evaluations on a GPU run
 * one at a time (a "gate"), so that the first correct one measures them and the others read
 * them from the cache; after EVALUATIONS_GATE_TRIES evaluations without baselines (candidates
 * that all fail before timing) the gate opens anyway. While evaluations run on a GPU, its
 * utilisation is sampled from nvidia-smi every second for the health report and the answers.
 */
#include "evaluations.h"

#include "daemon_log.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/base/sha256.h"
#include "kagent/daemon/http_server.h"
#include "kagent/daemon/store.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/evaluator/verdict.h"
#include "kagent/session/warm_worker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* Candidates in one request, and sources (problem or candidate) in bytes, at most. */
#define EVALUATIONS_CANDIDATE_CAP 512
#define EVALUATIONS_SOURCE_CAP (1024 * 1024)
/* Evaluations waiting at most, over all requests: beyond, 503. */
#define EVALUATIONS_QUEUE_CAP 16384
#define EVALUATIONS_RETAIN_SECONDS 3600
#define EVALUATIONS_RETAIN_REQUESTS 1024
/* Problems whose gate state is remembered; beyond, all are forgotten (one more probe each). */
#define EVALUATIONS_GATE_CAP 4096
#define EVALUATIONS_GATE_TRIES 2
#define EVALUATIONS_SAMPLE_MS 1000
#define EVALUATIONS_UTILISATION_GPU_CAP 64

enum evaluations__state { EVALUATIONS_PENDING, EVALUATIONS_RUNNING, EVALUATIONS_DONE };

static const char *const evaluations__state_names[] = {"pending", "running", "done"};

struct evaluations__group;

/* One candidate of a request. */
struct evaluations__job {
	struct evaluations__group *group;
	struct evaluations__job *next_pending;
	size_t index;
	char *candidate_path;
	enum evaluations__state state;
	json_t *result; /* the verdict or the error object, once done */
	int slot;	/* where it ran, -1 before */
	int crowded;	/* another evaluation ran on its GPU meanwhile */
	int alone;	/* again after an error beside others: nothing else on its GPU */
};

/* One POST: the problem, the options and the candidates. */
struct evaluations__group {
	struct kagent_daemon_evaluations *owner;
	struct evaluations__group *next;
	char id[24];
	char *folder; /* the daemon's copies of the sources */
	char *problem_path;
	char problem_sha256[KAGENT_SHA256_HEX_SIZE];
	json_t *body;
	struct kagent_evaluation_options options; /* problem and candidate paths left out */
	int gpu;				  /* the GPU asked for, -1: any */
	int is_async;				  /* answered 202 at once */
	int discarded; /* a synchronous client left: its pending candidates are dropped */
	struct kagent_http_request *request; /* the waiting client (synchronous) */
	size_t count, done;
	struct evaluations__job *jobs;
	uint64_t created_ms, finished_ms;
	/* the utilisation sums and counts per slot when the request was made */
	double *utilisation_sum;
	long *utilisation_count;
};

/* One evaluation at a time, on one GPU, through one warm worker. */
struct evaluations__lane {
	struct kagent_daemon_evaluations *owner;
	size_t slot;
	int lane;
	struct kagent_warm_worker worker;
	struct evaluations__job *job;
};

struct kagent_daemon_evaluations {
	struct kagent_daemon_evaluations_options options;
	int lanes_per_slot;
	struct evaluations__lane *lanes; /* slot_count * lanes_per_slot, once used */
	size_t lane_count;
	int lanes_open;			   /* warm workers whose handles are not closed yet */
	struct evaluations__group *groups; /* newest first */
	struct evaluations__job *pending_head, *pending_tail;
	size_t pending, running, finished;
	json_t *gates;	      /* "sha256/slot" -> {"probing", "ready", "tries"} */
	size_t *slot_running; /* evaluations running per slot */
	int *slot_alone;      /* a slot running an evaluation alone takes no other */
	uint64_t counter;
	/* utilisation sampling: one nvidia-smi at a time, on the thread pool */
	uv_timer_t sampler;
	int sampler_open, sampling, stopping;
	int preparing;		 /* requests whose sources are being written on the pool */
	double *utilisation_sum; /* per slot, over the samples taken while evaluations ran */
	long *utilisation_count;
	double *utilisation_last;
	int utilisation_available; /* -1 unknown, 0 no, 1 yes */
	char *utilisation_note;
};

static uint64_t
evaluations__now_ms(void)
{
	return uv_hrtime() / 1000000;
}

/* Tells the owner once a stop has finished (kagent_daemon_evaluations_stopped). */
static void
evaluations__notify(struct kagent_daemon_evaluations *service)
{
	if (kagent_daemon_evaluations_stopped(service) && service->options.stopped != NULL)
		service->options.stopped(service->options.data);
}

/* ---- retention ---- */

static void
evaluations__group_free(struct evaluations__group *group)
{
	for (size_t index = 0; index < group->count; index++) {
		free(group->jobs[index].candidate_path);
		json_decref(group->jobs[index].result);
	}
	if (group->folder != NULL)
		kagent_paths_remove_tree(group->folder, NULL);
	free(group->folder);
	free(group->problem_path);
	free(group->jobs);
	free(group->utilisation_sum);
	free(group->utilisation_count);
	json_decref(group->body);
	free(group);
}

/* Forgets finished requests past their time, and the oldest beyond the count. */
static void
evaluations__expire(struct kagent_daemon_evaluations *service)
{
	struct evaluations__group **link = &service->groups;
	uint64_t now = evaluations__now_ms();
	size_t kept = 0;

	while (*link != NULL) {
		struct evaluations__group *group = *link;
		int finished = group->done == group->count && group->request == NULL;

		if (finished && (kept >= EVALUATIONS_RETAIN_REQUESTS ||
				 now - group->finished_ms > EVALUATIONS_RETAIN_SECONDS * 1000ull)) {
			*link = group->next;
			evaluations__group_free(group);
			continue;
		}
		kept++;
		link = &group->next;
	}
}

/* ---- GPU utilisation ---- */

struct evaluations__sample {
	struct kagent_daemon_evaluations *service;
	double percent[EVALUATIONS_UTILISATION_GPU_CAP];
	int seen[EVALUATIONS_UTILISATION_GPU_CAP];
};

/* On the pool: "index, percent" lines from nvidia-smi. */
static int
evaluations__sample_work(struct kagent_store *store, void *data, char **cause)
{
	struct evaluations__sample *sample = data;
	char line[256];
	FILE *pipe;
	int lines = 0;

	(void)store;
	pipe = popen("nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits "
		     "2>/dev/null",
		     "r");
	if (pipe == NULL) {
		*cause = kagent_asprintf("cannot run nvidia-smi: %s", strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof line, pipe) != NULL) {
		int index;
		double percent;

		if (sscanf(line, "%d, %lf", &index, &percent) == 2 && index >= 0 &&
		    index < EVALUATIONS_UTILISATION_GPU_CAP) {
			sample->percent[index] = percent;
			sample->seen[index] = 1;
			lines++;
		}
	}
	if (pclose(pipe) != 0 || lines == 0) {
		*cause = kagent_strdup("nvidia-smi gave no utilisation");
		return -ENODEV;
	}
	return 0;
}

static void
evaluations__sampled(int status, const char *cause, void *data)
{
	struct evaluations__sample *sample = data;
	struct kagent_daemon_evaluations *service = sample->service;
	const struct kagent_daemon_evaluations_options *daemon = &service->options;

	service->sampling = 0;
	if (status < 0) {
		if (service->utilisation_available != 0)
			kagent_daemon_log("GPU utilisation not sampled: %s", cause);
		service->utilisation_available = 0;
		free(service->utilisation_note);
		service->utilisation_note = kagent_strdup(cause != NULL ? cause : "no nvidia-smi");
	} else {
		service->utilisation_available = 1;
		for (size_t slot = 0; slot < daemon->slot_count; slot++) {
			int gpu = daemon->slot_gpus[slot];

			if (gpu < 0 || gpu >= EVALUATIONS_UTILISATION_GPU_CAP || !sample->seen[gpu])
				continue;
			service->utilisation_last[slot] = sample->percent[gpu];
			service->utilisation_sum[slot] += sample->percent[gpu];
			service->utilisation_count[slot]++;
		}
	}
	free(sample);
	evaluations__notify(service);
}

static void
evaluations__sample(uv_timer_t *timer)
{
	struct kagent_daemon_evaluations *service = timer->data;
	struct evaluations__sample *sample;

	/* Only while something runs: an idle GPU says nothing about the service. */
	if (service->sampling || service->running == 0 || service->stopping ||
	    service->utilisation_available == 0)
		return;
	sample = kagent_calloc(1, sizeof *sample);
	sample->service = service;
	if (kagent_store_submit(service->options.store, service->options.loop,
				evaluations__sample_work, evaluations__sampled, sample) < 0) {
		free(sample);
		return;
	}
	service->sampling = 1;
}

/* {"available", "note", "gpus": [{"gpu", "percent_mean", "samples", "percent_last"}]}, the
 * means over the samples since sum/count (NULL: since the daemon started). */
static json_t *
evaluations__utilisation(struct kagent_daemon_evaluations *service, const double *sum,
			 const long *count)
{
	const struct kagent_daemon_evaluations_options *daemon = &service->options;
	json_t *gpus = json_array();

	if (strcmp(daemon->device, "cpu") == 0)
		return json_pack("{s:b, s:s, s:o}", "available", 0, "note",
				 "no GPU: the daemon runs on the CPU device", "gpus", gpus);
	for (size_t slot = 0; slot < daemon->slot_count; slot++) {
		long samples = service->utilisation_count[slot] - (count != NULL ? count[slot] : 0);
		double total = service->utilisation_sum[slot] - (sum != NULL ? sum[slot] : 0);

		json_array_append_new(
		    gpus, json_pack("{s:i, s:o, s:I, s:o}", "gpu", daemon->slot_gpus[slot],
				    "percent_mean",
				    samples > 0 ? json_real(total / (double)samples) : json_null(),
				    "samples", (json_int_t)samples, "percent_last",
				    service->utilisation_count[slot] > 0
					? json_real(service->utilisation_last[slot])
					: json_null()));
	}
	return json_pack(
	    "{s:b, s:s?, s:o}", "available", service->utilisation_available != 0, "note",
	    service->utilisation_available == 0 ? service->utilisation_note
	    : service->utilisation_available < 0
		? "sampled every second from nvidia-smi while evaluations run; none yet"
		: "sampled every second from nvidia-smi while evaluations run",
	    "gpus", gpus);
}

/* ---- answers ---- */

static json_t *
evaluations__job_id(const struct evaluations__job *job)
{
	return json_sprintf("%s-%zu", job->group->id, job->index);
}

static const char *
evaluations__group_state(const struct evaluations__group *group)
{
	size_t index;

	if (group->done == group->count)
		return "done";
	for (index = 0; index < group->count; index++) {
		if (group->jobs[index].state != EVALUATIONS_PENDING)
			return "running";
	}
	return "pending";
}

/* The whole request: ids, verdicts (null until done), states, utilisation. */
static json_t *
evaluations__group_json(struct evaluations__group *group)
{
	json_t *ids = json_array(), *verdicts = json_array(), *states = json_array();
	uint64_t end = group->done == group->count ? group->finished_ms : evaluations__now_ms();

	for (size_t index = 0; index < group->count; index++) {
		const struct evaluations__job *job = &group->jobs[index];

		json_array_append_new(ids, evaluations__job_id(job));
		json_array_append_new(states, json_string(evaluations__state_names[job->state]));
		json_array_append(verdicts, job->result != NULL ? job->result : json_null());
	}
	return json_pack("{s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:f, s:o}", "id", group->id, "state",
			 evaluations__group_state(group), "count", (json_int_t)group->count, "done",
			 (json_int_t)group->done, "ids", ids, "states", states, "verdicts",
			 verdicts, "seconds", (double)(end - group->created_ms) / 1000.0,
			 "gpu_utilization",
			 evaluations__utilisation(group->owner, group->utilisation_sum,
						  group->utilisation_count));
}

static json_t *
evaluations__job_json(struct evaluations__job *job)
{
	const struct kagent_daemon_evaluations_options *daemon = &job->group->owner->options;
	json_t *gpu = job->slot >= 0 && strcmp(daemon->device, "cpu") != 0
			  ? json_integer(daemon->slot_gpus[job->slot])
			  : json_null();

	return json_pack("{s:o, s:s, s:s, s:I, s:o, s:O?}", "id", evaluations__job_id(job), "state",
			 evaluations__state_names[job->state], "request", job->group->id, "index",
			 (json_int_t)job->index, "gpu", gpu, "verdict", job->result);
}

static void
evaluations__client_gone(struct kagent_http_request *request, void *data)
{
	struct evaluations__group *group = data;

	(void)request;
	group->request = NULL;
	/* Nobody will read the rest of a synchronous request: its pending candidates go. */
	group->discarded = 1;
	kagent_daemon_log("evaluations %s: the client left; %zu of %zu done, the rest dropped",
			  group->id, group->done, group->count);
}

/* ---- the queue ---- */

static void evaluations__pump(struct kagent_daemon_evaluations *service);

static void
evaluations__finish_job(struct evaluations__job *job, json_t *result)
{
	struct evaluations__group *group = job->group;
	struct kagent_daemon_evaluations *service = group->owner;

	job->state = EVALUATIONS_DONE;
	job->result = result;
	group->done++;
	service->finished++;
	if (group->done < group->count)
		return;
	group->finished_ms = evaluations__now_ms();
	/* Every evaluation copied its files into a job folder of its own when it started. */
	if (group->folder != NULL)
		kagent_paths_remove_tree(group->folder, NULL);
	free(group->folder);
	group->folder = NULL;
	kagent_daemon_log("evaluations %s: %zu done in %.1f s", group->id, group->count,
			  (double)(group->finished_ms - group->created_ms) / 1000.0);
	if (group->request != NULL) {
		struct kagent_http_request *request = group->request;

		group->request = NULL;
		kagent_http_reply_json(request, 200, evaluations__group_json(group));
	}
}

/* The gate's key: the problem on this slot's GPU, as the baseline cache keys it. */
static char *
evaluations__gate_key(const struct evaluations__group *group, size_t slot)
{
	return kagent_asprintf("%s/%zu/%d", group->problem_sha256, slot,
			       group->options.measure_compile);
}

/* May job start on slot? It may when the problem's baselines are cached there (or cannot be),
 * or when no other evaluation of the problem measures them now (it becomes the probe). */
static int
evaluations__gate_allows(struct kagent_daemon_evaluations *service, struct evaluations__job *job,
			 size_t slot, int take)
{
	char *key;
	json_t *gate;
	int allowed;

	if (job->group->options.no_cache)
		return 1;
	key = evaluations__gate_key(job->group, slot);
	gate = json_object_get(service->gates, key);
	if (gate == NULL) {
		if (json_object_size(service->gates) >= EVALUATIONS_GATE_CAP)
			json_object_clear(service->gates);
		gate = json_pack("{s:b, s:b, s:i}", "probing", 0, "ready", 0, "tries", 0);
		json_object_set_new(service->gates, key, gate);
	}
	allowed = json_is_true(json_object_get(gate, "ready")) ||
		  json_integer_value(json_object_get(gate, "tries")) >= EVALUATIONS_GATE_TRIES ||
		  !json_is_true(json_object_get(gate, "probing"));
	if (allowed && take && !json_is_true(json_object_get(gate, "ready")))
		json_object_set_new(gate, "probing", json_true());
	free(key);
	return allowed;
}

/* A probe ended: ready when its verdict has timed baselines, else one more try. */
static void
evaluations__gate_update(struct kagent_daemon_evaluations *service, struct evaluations__job *job,
			 size_t slot, const json_t *result)
{
	char *key = evaluations__gate_key(job->group, slot);
	json_t *gate = json_object_get(service->gates, key);
	const json_t *timing = json_object_get(result, "timing");

	free(key);
	if (gate == NULL || json_is_true(json_object_get(gate, "ready")))
		return;
	json_object_set_new(gate, "probing", json_false());
	if (json_is_object(json_object_get(timing, "eager")))
		json_object_set_new(gate, "ready", json_true());
	else
		json_object_set_new(
		    gate, "tries",
		    json_integer(json_integer_value(json_object_get(gate, "tries")) + 1));
}

/*
 * Whether an evaluation that ended in an error (no verdict) beside other evaluations on its
 * GPU is worth one more try alone: the lanes of a GPU share its memory, so a problem that
 * fits alone may not fit beside others (three of 64 evaluations at 12 lanes on an H100,
 * docs/benchmarks.md), and a worker may fail the same way. A verdict is never tried again,
 * nor a problem that cannot be used for any other reason.
 */
static int
evaluations__worth_another_try(const struct evaluations__job *job, const json_t *result)
{
	const char *kind = json_string_value(json_object_get(result, "error"));
	const char *message = json_string_value(json_object_get(result, "message"));

	if (!job->crowded || job->alone || kind == NULL || job->group->discarded)
		return 0;
	if (strcmp(kind, "worker") == 0)
		return 1;
	return strcmp(kind, "problem") == 0 && message != NULL && strcasestr(message, "memory");
}

/* First in the queue: it takes the next slot that has nothing else running. */
static void
evaluations__queue_first(struct kagent_daemon_evaluations *service, struct evaluations__job *job)
{
	job->next_pending = service->pending_head;
	service->pending_head = job;
	if (service->pending_tail == NULL)
		service->pending_tail = job;
	service->pending++;
}

static void
evaluations__evaluated(int status, const json_t *object, void *data)
{
	struct evaluations__lane *lane = data;
	struct kagent_daemon_evaluations *service = lane->owner;
	struct evaluations__job *job = lane->job;

	lane->job = NULL;
	service->running--;
	service->slot_running[lane->slot]--;
	service->slot_alone[lane->slot] = 0;
	if (evaluations__worth_another_try(job, object)) {
		kagent_daemon_log("evaluations %s: candidate %zu ended in an error beside other "
				  "evaluations on GPU %d (%s); evaluating it again alone",
				  job->group->id, job->index,
				  service->options.slot_gpus[lane->slot],
				  json_string_value(json_object_get(object, "message")));
		job->state = EVALUATIONS_PENDING;
		job->alone = 1;
		job->crowded = 0;
		evaluations__queue_first(service, job);
	} else {
		char who[96];

		snprintf(who, sizeof who, "evaluations %s, candidate %zu", job->group->id,
			 job->index);
		kagent_daemon_log_timing_window(object, who);
		evaluations__finish_job(job, json_incref((json_t *)object));
	}
	evaluations__gate_update(service, job, lane->slot, object);
	evaluations__expire(service);
	evaluations__pump(service);
	evaluations__notify(service);
}

/* The lane's worker is ready (or gone: then the evaluation starts a worker of its own). */
static void
evaluations__run(void *data)
{
	struct evaluations__lane *lane = data;
	struct evaluations__job *job = lane->job;
	const struct kagent_daemon_evaluations_options *daemon = &lane->owner->options;
	struct kagent_evaluation_options options = job->group->options;

	if (lane->owner->stopping) {
		/* its worker was stopped while it started: no worker of its own now */
		json_t *error =
		    kagent_verdict_error_json("cancelled", "the daemon is shutting down");

		evaluations__evaluated(-ECANCELED, error, lane);
		json_decref(error);
		return;
	}
	options.problem_path = job->group->problem_path;
	options.candidate_path = job->candidate_path;
	options.gpu_index = daemon->slot_gpus[lane->slot];
	options.sandbox_lane = lane->lane;
	options.worker_socket = kagent_warm_worker_socket(&lane->worker);
	/* Without the lane's worker, a worker of its own, never one on the default socket. */
	options.cold = options.worker_socket == NULL;
	kagent_evaluation_start(daemon->loop, &options, evaluations__evaluated, lane);
}

static void
evaluations__lane_closed(void *data)
{
	struct evaluations__lane *lane = data;
	struct kagent_daemon_evaluations *service = lane->owner;

	service->lanes_open--;
	evaluations__notify(service);
}

/* The lanes and their warm workers, at the first request (a daemon that serves only
 * sessions never starts them). */
static void
evaluations__open_lanes(struct kagent_daemon_evaluations *service)
{
	const struct kagent_daemon_evaluations_options *daemon = &service->options;
	size_t slots = daemon->slot_count, index;
	const char *socket_path = daemon->socket_path;
	const char *slash = strrchr(socket_path, '/');

	if (service->lanes != NULL)
		return;
	service->lane_count = slots * (size_t)service->lanes_per_slot;
	service->lanes = kagent_calloc(service->lane_count, sizeof *service->lanes);
	for (index = 0; index < service->lane_count; index++) {
		struct evaluations__lane *lane = &service->lanes[index];
		char *run_id, *log_path;

		/* Lane-major: the first lane of every GPU fills before any GPU's second. */
		lane->owner = service;
		lane->slot = index % slots;
		lane->lane = (int)(index / slots);
		run_id = kagent_asprintf("kagentd-%d-lane-%zu-%d", (int)getpid(), lane->slot,
					 lane->lane);
		log_path =
		    kagent_asprintf("%.*s/%s.log", slash != NULL ? (int)(slash - socket_path) : 1,
				    slash != NULL ? socket_path : ".", run_id);
		kagent_warm_worker_init(&lane->worker, daemon->loop);
		service->lanes_open++;
		/* A lane's worker serves its slot's GPU alone (kagent worker --gpu), as a
		 * session's does: its candidates' CUDA starts on that GPU only and may open that
		 * GPU's device node only, which is also what lets the host start contexts on
		 * several GPUs at once (docs/benchmarks.md, issue 16, section 7). */
		if (daemon->worker_executable != NULL)
			kagent_warm_worker_start(&lane->worker, daemon->worker_executable, run_id,
						 strcmp(daemon->device, "cuda") == 0
						     ? daemon->slot_gpus[lane->slot]
						     : -1,
						 daemon->prepare_candidates, log_path);
		free(run_id);
		free(log_path);
	}
	kagent_daemon_log("evaluations: %zu lane%s (%d per slot), each with a warm worker",
			  service->lane_count, service->lane_count == 1 ? "" : "s",
			  service->lanes_per_slot);
}

/* Takes the first waiting job that may run on lane (its GPU, its problem's gate), or NULL. */
static struct evaluations__job *
evaluations__take(struct kagent_daemon_evaluations *service, const struct evaluations__lane *lane)
{
	struct evaluations__job **link = &service->pending_head, *job, *previous = NULL;
	int gpu = service->options.slot_gpus[lane->slot];

	if (service->slot_alone[lane->slot])
		return NULL;
	for (; (job = *link) != NULL; previous = job, link = &job->next_pending) {
		int wanted = job->group->gpu;

		/* a dropped one is taken to be ended, whatever its GPU */
		if (job->group->discarded)
			break;
		if (wanted >= 0 && wanted != gpu)
			continue;
		/* one to evaluate alone waits for an idle slot, and holds back those behind it
		 * on every slot it could run on, or it would never find one idle */
		if (job->alone) {
			if (service->slot_running[lane->slot] == 0)
				break;
			return NULL;
		}
		if (evaluations__gate_allows(service, job, lane->slot, 1))
			break;
	}
	if (job == NULL)
		return NULL;
	*link = job->next_pending;
	if (service->pending_tail == job)
		service->pending_tail = previous;
	job->next_pending = NULL;
	service->pending--;
	return job;
}

/* job starts on slot: it and whatever runs there already share the GPU from now. */
static void
evaluations__crowd(struct kagent_daemon_evaluations *service, size_t slot,
		   struct evaluations__job *job)
{
	size_t index;

	service->slot_running[slot]++;
	service->slot_alone[slot] = job->alone;
	if (service->slot_running[slot] < 2)
		return;
	for (index = 0; index < service->lane_count; index++) {
		struct evaluations__lane *lane = &service->lanes[index];

		if (lane->slot == slot && lane->job != NULL)
			lane->job->crowded = 1;
	}
}

static void
evaluations__pump(struct kagent_daemon_evaluations *service)
{
	size_t index = 0;

	if (service->stopping || service->lanes == NULL)
		return;
	while (index < service->lane_count && service->pending > 0) {
		struct evaluations__lane *lane = &service->lanes[index];
		struct evaluations__job *job =
		    lane->job == NULL ? evaluations__take(service, lane) : NULL;

		if (job == NULL) {
			index++;
			continue;
		}
		if (job->group->discarded) {
			/* the same lane looks again */
			evaluations__finish_job(job, kagent_verdict_error_json(
							 "cancelled", "the client left before this "
								      "candidate was evaluated"));
			continue;
		}
		job->state = EVALUATIONS_RUNNING;
		job->slot = (int)lane->slot;
		lane->job = job;
		service->running++;
		evaluations__crowd(service, lane->slot, job);
		if (!kagent_warm_worker_wait(&lane->worker, evaluations__run, lane))
			evaluations__run(lane);
		index++;
	}
	/* A request whose every pending candidate was dropped may be over now. */
	evaluations__expire(service);
}

/* ---- POST /v1/evaluations ---- */

/* The options object: kagent eval's flags (docs/reward-service.md). */
static int
evaluations__parse_options(const struct kagent_daemon_evaluations_options *daemon,
			   const json_t *options, struct evaluations__group *group, char **cause)
{
	const char *key;
	json_t *value;

	group->gpu = -1;
	group->options.device = daemon->device;
	group->options.measure_compile = 1;
	if (options == NULL)
		return 0;
	if (!json_is_object(options)) {
		*cause = kagent_strdup("\"options\" must be an object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)options, key, value)
	{
		json_int_t number = json_integer_value(value);

		if (strcmp(key, "trials") == 0 && json_is_integer(value) && number >= 1 &&
		    number <= 1000) {
			group->options.trials = (int)number;
		} else if (strcmp(key, "signed_trials") == 0 && json_is_integer(value) &&
			   number >= 0 && number <= 1000) {
			group->options.signed_trials = number == 0 ? -1 : (int)number;
		} else if (strcmp(key, "seed") == 0 && json_is_integer(value) && number >= 1) {
			group->options.seed = (uint64_t)number;
		} else if (strcmp(key, "call_timeout") == 0 && json_is_integer(value) &&
			   number >= 1 && number <= 3600) {
			group->options.call_timeout_seconds = (int)number;
		} else if (strcmp(key, "compile_timeout") == 0 && json_is_integer(value) &&
			   number >= 1 && number <= KAGENT_EVALUATION_COMPILE_TIMEOUT_MAX) {
			group->options.compile_timeout_seconds = (int)number;
		} else if (strcmp(key, "device_queues") == 0 && json_is_integer(value) &&
			   number >= 1 && number <= KAGENT_EVALUATION_DEVICE_QUEUES_MAX) {
			group->options.device_queues = (int)number;
		} else if (strcmp(key, "timing_processes") == 0 && json_is_integer(value) &&
			   number >= 1 && number <= KAGENT_EVALUATION_TIMING_PROCESSES_MAX) {
			group->options.timing_processes = (int)number;
		} else if (strcmp(key, "speedup_basis") == 0 && json_is_string(value) &&
			   kagent_verdict_basis_from_name(json_string_value(value)) >= 0) {
			group->options.speedup_basis =
			    kagent_verdict_basis_from_name(json_string_value(value));
		} else if (strcmp(key, "no_compile_baseline") == 0 && json_is_boolean(value)) {
			group->options.measure_compile = !json_is_true(value);
		} else if (strcmp(key, "no_cache") == 0 && json_is_boolean(value)) {
			group->options.no_cache = json_is_true(value);
		} else if (strcmp(key, "generalise") == 0 && json_is_boolean(value)) {
			group->options.generalisation = json_is_true(value);
		} else if (strcmp(key, "device") == 0 && json_is_string(value)) {
			if (strcmp(json_string_value(value), daemon->device) != 0) {
				*cause =
				    kagent_asprintf("this daemon evaluates on the %s device, not "
						    "%s",
						    daemon->device, json_string_value(value));
				return -EINVAL;
			}
		} else if (strcmp(key, "gpu") == 0 && json_is_integer(value)) {
			size_t slot;

			for (slot = 0; slot < daemon->slot_count; slot++) {
				if (strcmp(daemon->device, "cpu") != 0 &&
				    daemon->slot_gpus[slot] == number)
					break;
			}
			if (slot == daemon->slot_count) {
				*cause = kagent_asprintf("GPU %lld is not one of this daemon's",
							 (long long)number);
				return -EINVAL;
			}
			group->gpu = (int)number;
		} else {
			*cause = kagent_asprintf(
			    "option \"%s\" is unknown or its value is wrong (trials 1-1000, "
			    "signed_trials 0-1000, seed >= 1, call_timeout 1-3600, compile_timeout "
			    "1-240, device_queues 1-32, timing_processes 1-8, speedup_basis "
			    "device|wall, "
			    "no_compile_baseline, no_cache, "
			    "generalise: booleans, device, gpu)",
			    key);
			return -EINVAL;
		}
	}
	return 0;
}

/* Checks the body on the loop: shapes and caps. Returns 0 or an HTTP status with *cause. */
static int
evaluations__check_body(const json_t *body, char **cause)
{
	const json_t *candidates = json_object_get(body, "candidates");
	const json_t *source = json_object_get(body, "problem_source");
	const json_t *path = json_object_get(body, "problem_path");
	const json_t *is_async = json_object_get(body, "async");
	const char *key;
	json_t *value;
	size_t index;

	if (!json_is_object(body)) {
		*cause = kagent_strdup("the body must be a JSON object with \"problem_source\" or "
				       "\"problem_path\", and \"candidates\"");
		return 400;
	}
	json_object_foreach((json_t *)body, key, value)
	{
		if (strcmp(key, "problem_source") != 0 && strcmp(key, "problem_path") != 0 &&
		    strcmp(key, "candidates") != 0 && strcmp(key, "options") != 0 &&
		    strcmp(key, "async") != 0) {
			*cause = kagent_asprintf("unknown key \"%s\" (expected problem_source or "
						 "problem_path, candidates, options, async)",
						 key);
			return 400;
		}
	}
	if ((source == NULL) == (path == NULL)) {
		*cause = kagent_strdup("give either \"problem_source\" (the problem's text) or "
				       "\"problem_path\"");
		return 400;
	}
	if (source != NULL && !json_is_string(source)) {
		*cause = kagent_strdup("\"problem_source\" must be a string");
		return 400;
	}
	if (source != NULL && json_string_length(source) > EVALUATIONS_SOURCE_CAP) {
		*cause = kagent_asprintf("the problem's source is over %d bytes",
					 EVALUATIONS_SOURCE_CAP);
		return 413;
	}
	if (path != NULL && (!json_is_string(path) || json_string_value(path)[0] != '/')) {
		*cause = kagent_strdup("\"problem_path\" must be an absolute path (the daemon does "
				       "not know the client's folder)");
		return 400;
	}
	if (is_async != NULL && !json_is_boolean(is_async)) {
		*cause = kagent_strdup("\"async\" must be true or false");
		return 400;
	}
	if (!json_is_array(candidates) || json_array_size(candidates) == 0) {
		*cause = kagent_strdup("\"candidates\" must be a list of 1 or more sources");
		return 400;
	}
	if (json_array_size(candidates) > EVALUATIONS_CANDIDATE_CAP) {
		*cause = kagent_asprintf("%zu candidates; at most %d in one request",
					 json_array_size(candidates), EVALUATIONS_CANDIDATE_CAP);
		return 413;
	}
	json_array_foreach(candidates, index, value)
	{
		if (!json_is_string(value)) {
			*cause =
			    kagent_asprintf("candidate %zu is not a string (a candidate is its "
					    "source text)",
					    index);
			return 400;
		}
		if (json_string_length(value) > EVALUATIONS_SOURCE_CAP) {
			*cause = kagent_asprintf("candidate %zu is over %d bytes", index,
						 EVALUATIONS_SOURCE_CAP);
			return 413;
		}
	}
	return 0;
}

/* Writes one source into the group's folder. */
static int
evaluations__write_source(const char *folder, const char *name, const json_t *text, char **path_out,
			  char **cause)
{
	char *path = kagent_asprintf("%s/%s", folder, name);
	int status = kagent_fileio_write_atomic(path, json_string_value(text),
						json_string_length(text), cause);

	if (status < 0) {
		free(path);
		return status;
	}
	*path_out = path;
	return 0;
}

/* On the pool: the folder, the sources as files, the problem's hash. */
static int
evaluations__prepare_work(struct kagent_store *store, void *data, char **cause)
{
	struct evaluations__group *group = data;
	const json_t *body = group->body, *candidates = json_object_get(body, "candidates");
	const char *tmp = getenv("TMPDIR");
	const char *problem_path = json_string_value(json_object_get(body, "problem_path"));
	struct stat info;
	int status = 0;

	(void)store;
	group->folder = kagent_asprintf("%s/kagentd-evaluations-XXXXXX",
					tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
	if (mkdtemp(group->folder) == NULL) {
		status = -errno;
		*cause =
		    kagent_asprintf("cannot create a folder for the sources: %s", strerror(errno));
		free(group->folder);
		group->folder = NULL;
		return status;
	}
	if (problem_path != NULL) {
		if (stat(problem_path, &info) != 0 || !S_ISREG(info.st_mode)) {
			*cause = kagent_asprintf("no problem file at %s", problem_path);
			return -EINVAL;
		}
		group->problem_path = kagent_strdup(problem_path);
	} else if ((status = evaluations__write_source(group->folder, "problem.py",
						       json_object_get(body, "problem_source"),
						       &group->problem_path, cause)) < 0) {
		return status;
	}
	if ((status = kagent_sha256_file_hex(group->problem_path, group->problem_sha256, cause)) <
	    0)
		return status == -ENOENT ? -EINVAL : status;
	for (size_t index = 0; index < group->count && status == 0; index++) {
		char name[48];

		snprintf(name, sizeof name, "candidate-%zu.py", index);
		status = evaluations__write_source(group->folder, name,
						   json_array_get(candidates, index),
						   &group->jobs[index].candidate_path, cause);
	}
	return status;
}

static void
evaluations__prepared(int status, const char *cause, void *data)
{
	struct evaluations__group *group = data;
	struct kagent_daemon_evaluations *service = group->owner;
	const struct kagent_daemon_evaluations_options *daemon = &service->options;
	json_t *ids;

	json_decref(group->body);
	group->body = NULL;
	service->preparing--;
	if (status < 0 || service->stopping) {
		if (group->request != NULL)
			kagent_http_reply_error(group->request, status == -EINVAL ? 400 : 503, "%s",
						status < 0 ? cause : "the daemon is shutting down");
		evaluations__group_free(group);
		evaluations__notify(service);
		return;
	}
	group->created_ms = evaluations__now_ms();
	group->utilisation_sum = kagent_calloc(daemon->slot_count, sizeof(double));
	group->utilisation_count = kagent_calloc(daemon->slot_count, sizeof(long));
	memcpy(group->utilisation_sum, service->utilisation_sum,
	       daemon->slot_count * sizeof(double));
	memcpy(group->utilisation_count, service->utilisation_count,
	       daemon->slot_count * sizeof(long));
	group->next = service->groups;
	service->groups = group;
	for (size_t index = 0; index < group->count; index++) {
		struct evaluations__job *job = &group->jobs[index];

		if (service->pending_tail != NULL)
			service->pending_tail->next_pending = job;
		else
			service->pending_head = job;
		service->pending_tail = job;
		service->pending++;
	}
	kagent_daemon_log("evaluations %s: %zu candidate%s queued (%zu waiting in all)", group->id,
			  group->count, group->count == 1 ? "" : "s", service->pending);
	if (group->request != NULL && group->is_async) {
		ids = json_array();
		for (size_t index = 0; index < group->count; index++)
			json_array_append_new(ids, evaluations__job_id(&group->jobs[index]));
		kagent_http_reply_json(group->request, 202,
				       json_pack("{s:s, s:o}", "id", group->id, "ids", ids));
		group->request = NULL;
	} else if (group->request != NULL) {
		kagent_http_request_set_on_gone(group->request, evaluations__client_gone, group);
	}
	evaluations__open_lanes(service);
	evaluations__pump(service);
}

/* A client left while its sources were being written: answer nobody. */
static void
evaluations__left_early(struct kagent_http_request *request, void *data)
{
	struct evaluations__group *group = data;

	(void)request;
	group->request = NULL;
	group->discarded = !group->is_async;
}

void
kagent_daemon_evaluations_post(struct kagent_daemon_evaluations *service,
			       struct kagent_http_request *request)
{
	const struct kagent_daemon_evaluations_options *daemon = &service->options;
	json_t *body = kagent_http_request_json(request);
	struct evaluations__group *group;
	uint32_t random_value = 0;
	char *cause = NULL;
	int status;

	if (service->stopping) {
		kagent_http_reply_error(request, 503, "the daemon is shutting down");
		return;
	}
	if ((status = evaluations__check_body(body, &cause)) != 0) {
		kagent_http_reply_error(request, status, "%s", cause);
		free(cause);
		return;
	}
	if (service->pending + json_array_size(json_object_get(body, "candidates")) >
	    EVALUATIONS_QUEUE_CAP) {
		kagent_http_reply_error(
		    request, 503,
		    "%zu evaluations are waiting already (at most %d): try again "
		    "later",
		    service->pending, EVALUATIONS_QUEUE_CAP);
		return;
	}
	group = kagent_calloc(1, sizeof *group);
	group->owner = service;
	if (evaluations__parse_options(daemon, json_object_get(body, "options"), group, &cause) <
	    0) {
		kagent_http_reply_error(request, 400, "%s", cause);
		free(cause);
		free(group);
		return;
	}
	if (getrandom(&random_value, sizeof random_value, 0) != sizeof random_value)
		random_value = (uint32_t)uv_hrtime();
	snprintf(group->id, sizeof group->id, "ev%" PRIu64 "x%08" PRIx32, ++service->counter,
		 random_value);
	group->is_async = json_is_true(json_object_get(body, "async"));
	group->count = json_array_size(json_object_get(body, "candidates"));
	group->jobs = kagent_calloc(group->count, sizeof *group->jobs);
	for (size_t index = 0; index < group->count; index++) {
		group->jobs[index].group = group;
		group->jobs[index].index = index;
		group->jobs[index].slot = -1;
	}
	group->body = json_incref(body);
	group->request = request;
	status = kagent_store_submit(daemon->store, daemon->loop, evaluations__prepare_work,
				     evaluations__prepared, group);
	if (status < 0) {
		kagent_http_reply_error(request, 503, "the daemon cannot take work now: %s",
					uv_strerror(status));
		evaluations__group_free(group);
		return;
	}
	service->preparing++;
	kagent_http_request_set_on_gone(request, evaluations__left_early, group);
}

/* ---- GET /v1/evaluations/{id} ---- */

void
kagent_daemon_evaluations_get(struct kagent_daemon_evaluations *service,
			      struct kagent_http_request *request)
{
	const char *id = kagent_http_request_parameter(request, "id");
	struct evaluations__group *group;

	for (group = service->groups; group != NULL; group = group->next) {
		size_t length = strlen(group->id);
		char *end;
		unsigned long long index;

		if (strncmp(id, group->id, length) != 0)
			continue;
		if (id[length] == '\0') {
			kagent_http_reply_json(request, 200, evaluations__group_json(group));
			return;
		}
		if (id[length] != '-' || id[length + 1] < '0' || id[length + 1] > '9')
			continue;
		index = strtoull(id + length + 1, &end, 10);
		if (*end == '\0' && index < group->count) {
			kagent_http_reply_json(request, 200,
					       evaluations__job_json(&group->jobs[index]));
			return;
		}
	}
	kagent_http_reply_error(request, 404,
				"no evaluation %s here (finished ones are kept %d s; a restart "
				"forgets them)",
				id, EVALUATIONS_RETAIN_SECONDS);
}

/* ---- the daemon's side ---- */

struct kagent_daemon_evaluations *
kagent_daemon_evaluations_create(const struct kagent_daemon_evaluations_options *options)
{
	struct kagent_daemon_evaluations *service = kagent_calloc(1, sizeof *service);
	const struct kagent_daemon_evaluations_options *daemon = &service->options;
	size_t slots = options->slot_count;

	service->options = *options;
	service->lanes_per_slot = options->lanes_per_slot > 0 ? options->lanes_per_slot : 1;
	service->gates = json_object();
	service->utilisation_sum = kagent_calloc(slots, sizeof(double));
	service->utilisation_count = kagent_calloc(slots, sizeof(long));
	service->utilisation_last = kagent_calloc(slots, sizeof(double));
	service->slot_running = kagent_calloc(slots, sizeof *service->slot_running);
	service->slot_alone = kagent_calloc(slots, sizeof *service->slot_alone);
	service->utilisation_available = strcmp(daemon->device, "cpu") == 0 ? 0 : -1;
	service->utilisation_note = kagent_strdup("no GPU: the daemon runs on the CPU device");
	uv_timer_init(daemon->loop, &service->sampler);
	service->sampler.data = service;
	service->sampler_open = 1;
	if (service->utilisation_available != 0)
		uv_timer_start(&service->sampler, evaluations__sample, EVALUATIONS_SAMPLE_MS,
			       EVALUATIONS_SAMPLE_MS);
	return service;
}

json_t *
kagent_daemon_evaluations_health(struct kagent_daemon_evaluations *service)
{
	return json_pack("{s:i, s:I, s:I, s:I, s:o}", "lanes_per_gpu", service->lanes_per_slot,
			 "queued", (json_int_t)service->pending, "running",
			 (json_int_t)service->running, "finished", (json_int_t)service->finished,
			 "gpu_utilization", evaluations__utilisation(service, NULL, NULL));
}

static void
evaluations__sampler_closed(uv_handle_t *handle)
{
	struct kagent_daemon_evaluations *service = handle->data;

	service->sampler_open = 0;
	evaluations__notify(service);
}

void
kagent_daemon_evaluations_stop(struct kagent_daemon_evaluations *service)
{
	struct evaluations__job *job;

	if (service->stopping)
		return;
	service->stopping = 1;
	/* What waits is dropped; what runs ends with its worker, stopped here. */
	while ((job = service->pending_head) != NULL) {
		service->pending_head = job->next_pending;
		service->pending--;
		evaluations__finish_job(
		    job, kagent_verdict_error_json("cancelled", "the daemon is shutting down"));
	}
	service->pending_tail = NULL;
	for (size_t index = 0; index < service->lane_count; index++)
		kagent_warm_worker_close(&service->lanes[index].worker, evaluations__lane_closed,
					 &service->lanes[index]);
	uv_close((uv_handle_t *)&service->sampler, evaluations__sampler_closed);
}

int
kagent_daemon_evaluations_stopped(const struct kagent_daemon_evaluations *service)
{
	return service->stopping && service->running == 0 && service->lanes_open == 0 &&
	       !service->sampler_open && !service->sampling && service->preparing == 0;
}

void
kagent_daemon_evaluations_free(struct kagent_daemon_evaluations *service)
{
	struct evaluations__group *group;

	if (service == NULL)
		return;
	while ((group = service->groups) != NULL) {
		service->groups = group->next;
		evaluations__group_free(group);
	}
	json_decref(service->gates);
	free(service->lanes);
	free(service->utilisation_sum);
	free(service->utilisation_count);
	free(service->utilisation_last);
	free(service->utilisation_note);
	free(service->slot_running);
	free(service->slot_alone);
	free(service);
}
