/*
 * One optimization run as a state machine on the libuv loop (see
 * include/kagent/session/session.h). A turn is: the model's reply (llm_client.c), then
 * each tool call in order (tools/), then the stop rules; each step is scheduled
 * from the loop, never called recursively, so a run of any length keeps a
 * flat stack and the caller's callbacks never run inside kagent's own.
 *
 * Every step is written to the trace first (trace.c) and then shown to the
 * observer, so the trace is the single account of the run and --resume can
 * rebuild the conversation from it (session_create.c).
 */
#include "kagent/session/session.h"
#include "session_internal.h"

#include "kagent/base/alloc.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/base/fileio.h"
#include "kagent/llm/llm_client.h"
#include "kagent/base/log.h"
#include "kagent/model_tools/tool.h"
#include "kagent/records/trace.h"
#include "kagent/base/units.h"
#include "kagent/records/variant_repository.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* A model reply without a tool call is nudged once; the second in a row ends the run. */
#define SESSION_REPLIES_WITHOUT_TOOLS_CAP 2

static void session__step(uv_timer_t *timer);
static void session__conclude(struct kagent_session *session, const char *reason, char *detail);

/* Writes a trace record and shows it to the observer; fields are taken over. */
void
kagent_session_record(struct kagent_session *session, const char *type, json_t *fields)
{
	if (fields == NULL)
		fields = json_object();
	json_object_set_new(fields, "type", json_string(type));
	if (session->turn > 0 && json_object_get(fields, "turn") == NULL)
		json_object_set_new(fields, "turn", json_integer(session->turn));
	if (session->observer != NULL)
		session->observer(fields, session->observer_data);
	if (kagent_trace_write(session->trace, type, fields) < 0 && !session->trace_failed) {
		session->trace_failed = 1;
		kagent_log(KAGENT_LOG_ERROR, "cannot write the trace %s: the run goes on",
			   session->trace_path);
	}
}

static double
session__now(void)
{
	return (double)uv_hrtime() / 1e9;
}

double
kagent_session_wall_seconds(const struct kagent_session *session)
{
	return session->totals.wall_seconds_before + (session__now() - session->started);
}

/* Schedules the next step from the loop; at most one is pending. */
void
kagent_session_schedule(struct kagent_session *session, enum kagent_session_step step)
{
	session->next_step = step;
	uv_timer_start(&session->step_timer, session__step, 0, 0);
}

void
kagent_session_add_message(struct kagent_session *session, json_t *message)
{
	json_array_append_new(session->messages, message);
}

/* A message from kagent to the model: in the conversation and in the trace. */
static void
session__tell_model(struct kagent_session *session, const char *text)
{
	kagent_session_add_message(session,
				   json_pack("{s:s, s:s}", "role", "user", "content", text));
	kagent_session_record(session, "message",
			      json_pack("{s:s, s:s}", "role", "user", "content", text));
}

static json_t *
session__totals_json(const struct kagent_session *session)
{
	return json_pack("{s:I, s:I, s:I, s:f, s:f, s:f}", "turns", (json_int_t)session->turn,
			 "input_tokens", (json_int_t)session->totals.input_tokens, "output_tokens",
			 (json_int_t)session->totals.output_tokens, "cost", session->totals.cost,
			 "wall_seconds", kagent_session_wall_seconds(session), "gpu_seconds",
			 session->totals.gpu_seconds);
}

static json_t *
session__limits_json(const struct kagent_session *session)
{
	const struct kagent_budget_config *budget = &session->config->budget;

	return json_pack("{s:I, s:I, s:f, s:f, s:f}", "max_turns", (json_int_t)budget->max_turns,
			 "max_tokens", (json_int_t)budget->max_tokens, "max_cost", budget->max_cost,
			 "max_wall_seconds", budget->max_wall_seconds, "max_gpu_seconds",
			 budget->max_gpu_seconds);
}

static json_t *
session__best_json(const struct kagent_session *session)
{
	if (session->best == NULL)
		return json_null();
	return json_pack("{s:s, s:f}", "variant", session->best->id, "speedup",
			 session->best_speedup);
}

char *
kagent_session_budget_line(const struct kagent_session *session)
{
	const struct kagent_budget_config *budget = &session->config->budget;
	char wall[32], wall_limit[32], turns[64], cost[64], time_text[96], best[96];
	char *line;

	kagent_units_format_duration(wall, sizeof wall, kagent_session_wall_seconds(session));
	kagent_units_format_duration(wall_limit, sizeof wall_limit, budget->max_wall_seconds);

	if (budget->max_turns > 0)
		snprintf(turns, sizeof turns, "turn %lld of %lld", session->turn,
			 budget->max_turns);
	else
		snprintf(turns, sizeof turns, "turn %lld", session->turn);
	if (budget->max_cost > 0)
		snprintf(cost, sizeof cost, ", $%.2f of $%.2f", session->totals.cost,
			 budget->max_cost);
	else
		cost[0] = '\0';
	if (budget->max_wall_seconds > 0)
		snprintf(time_text, sizeof time_text, ", %s of %s", wall, wall_limit);
	else
		snprintf(time_text, sizeof time_text, ", %s", wall);
	if (session->best != NULL)
		snprintf(best, sizeof best, "; best so far %s at %.2fx", session->best->id,
			 session->best_speedup);
	else
		snprintf(best, sizeof best, "; no confirmed best yet");
	line = kagent_asprintf("(budget: %s%s%s, GPU %.0f s%s)\n", turns, cost, time_text,
			       session->totals.gpu_seconds, best);
	return line;
}

/* The first budget that is spent, as a stop reason, or NULL. */
static const char *
session__budget_spent(const struct kagent_session *session, char **detail)
{
	const struct kagent_budget_config *budget = &session->config->budget;
	long long tokens = session->totals.input_tokens + session->totals.output_tokens;

	if (budget->max_turns > 0 && session->turn >= budget->max_turns) {
		*detail = kagent_asprintf("%lld turns of %lld", session->turn, budget->max_turns);
		return "budget_turns";
	}
	if (budget->max_tokens > 0 && tokens >= budget->max_tokens) {
		*detail = kagent_asprintf("%lld tokens of %lld", tokens, budget->max_tokens);
		return "budget_tokens";
	}
	if (budget->max_cost > 0 && session->totals.cost >= budget->max_cost) {
		*detail = kagent_asprintf("$%.4f of $%.2f", session->totals.cost, budget->max_cost);
		return "budget_cost";
	}
	if (budget->max_wall_seconds > 0 &&
	    kagent_session_wall_seconds(session) >= budget->max_wall_seconds) {
		*detail = kagent_asprintf("%.0f s of %.0f s", kagent_session_wall_seconds(session),
					  budget->max_wall_seconds);
		return "budget_wall";
	}
	if (budget->max_gpu_seconds > 0 && session->totals.gpu_seconds >= budget->max_gpu_seconds) {
		*detail = kagent_asprintf("%.0f GPU seconds of %.0f", session->totals.gpu_seconds,
					  budget->max_gpu_seconds);
		return "budget_gpu";
	}
	return NULL;
}

/* ---- variants ---- */

const char *
kagent_session_run_id(const struct kagent_session *session)
{
	return session->run_id;
}

const char *
kagent_session_trace_path(const struct kagent_session *session)
{
	return session->trace_path;
}

uv_loop_t *
kagent_session_loop(const struct kagent_session *session)
{
	return session->loop;
}

const struct kagent_config *
kagent_session_config(const struct kagent_session *session)
{
	return session->config;
}

const char *
kagent_session_problem_source(const struct kagent_session *session)
{
	return session->problem_source;
}

const char *
kagent_session_problem_name(const struct kagent_session *session)
{
	return session->problem_name;
}

struct kagent_variant *
kagent_session_find_variant(struct kagent_session *session, const char *name)
{
	char *end;
	long number;

	if (name == NULL || session->variant_count == 0)
		return NULL;
	if (strcmp(name, "latest") == 0)
		return session->variants[session->variant_count - 1];
	if (name[0] == 'v' || name[0] == 'V')
		name++;
	number = strtol(name, &end, 10);
	if (end == name || *end != '\0' || number < 1 || (size_t)number > session->variant_count)
		return NULL;
	return session->variants[number - 1];
}

struct kagent_variant *
kagent_session_previous_variant(struct kagent_session *session,
				const struct kagent_variant *variant)
{
	return variant->number > 1 ? session->variants[variant->number - 2] : NULL;
}

/* Appends a variant whose source is already on disk at path (new or resumed). */
struct kagent_variant *
kagent_session_append_variant(struct kagent_session *session, char *source, char *path,
			      const char *note, int turn)
{
	struct kagent_variant *variant = kagent_calloc(1, sizeof *variant);

	session->variants = kagent_realloc(session->variants, (session->variant_count + 1) *
								  sizeof *session->variants);
	session->variants[session->variant_count++] = variant;
	variant->number = (int)session->variant_count;
	variant->id = kagent_asprintf("v%d", variant->number);
	variant->turn = turn;
	variant->source = source;
	variant->path = path;
	variant->note = kagent_strdup(note != NULL ? note : "");
	return variant;
}

struct kagent_variant *
kagent_session_add_variant(struct kagent_session *session, const char *source, const char *note,
			   char **error)
{
	char *path;
	size_t length = source != NULL ? strlen(source) : 0;

	if (length == 0) {
		*error = kagent_strdup("the source is empty: pass the whole Python file");
		return NULL;
	}
	if (length > KAGENT_SESSION_VARIANT_CAP) {
		*error = kagent_asprintf("the source is %zu bytes; the limit is %zu", length,
					 KAGENT_SESSION_VARIANT_CAP);
		return NULL;
	}
	if (strstr(source, "ModelNew") == NULL) {
		*error = kagent_strdup("the source defines no class ModelNew: write the whole "
				       "Python file, with ModelNew and its kernels");
		return NULL;
	}
	path =
	    kagent_asprintf("%s/v%zu.py", session->variants_directory, session->variant_count + 1);
	if (kagent_fileio_write_atomic(path, source, length, error) < 0) {
		free(path);
		return NULL;
	}
	return kagent_session_append_variant(session, kagent_strdup(source), path, note,
					     (int)session->turn);
}

static void
session__variant_free(struct kagent_variant *variant)
{
	free(variant->id);
	free(variant->source);
	free(variant->path);
	free(variant->note);
	json_decref(variant->verdict);
	free(variant->commit_id);
	free(variant);
}

/* ---- evaluations ---- */

static double
session__timing_number(const json_t *verdict, const char *key)
{
	const json_t *value = json_object_get(json_object_get(verdict, "timing"), key);

	return json_is_number(value) ? json_number_value(value) : 0.0;
}

double
kagent_session_speedup(const struct kagent_session *session, const json_t *verdict)
{
	const char *status = json_string_value(json_object_get(verdict, "status"));
	double eager = session__timing_number(verdict, "speedup_vs_eager");
	double compile = session__timing_number(verdict, "speedup_vs_compile");

	if (status == NULL || strcmp(status, "correct") != 0)
		return 0.0;
	switch (session->config->target.baseline) {
	case KAGENT_TARGET_EAGER:
		return eager;
	case KAGENT_TARGET_COMPILE:
		return compile > 0 ? compile : eager;
	case KAGENT_TARGET_BEST:
	default:
		/* Against the faster baseline the speedup is the smaller of the two. */
		return compile > 0 && compile < eager ? compile : eager;
	}
}

/* Remembers every seed a verdict used, so confirmations can pick unseen ones. */
static void
session__remember_seeds(struct kagent_session *session, const json_t *verdict)
{
	const json_t *trial;
	size_t index;

	json_array_foreach(json_object_get(verdict, "trials"), index, trial)
	{
		json_t *seed = json_object_get(trial, "seed");

		if (json_is_integer(seed))
			json_array_append(session->seen_seeds, seed);
	}
}

/* A seed base whose next few seeds no evaluation of this run has used. */
static uint64_t
session__unseen_seed(const struct kagent_session *session)
{
	for (;;) {
		uint64_t seed = 0;
		const json_t *item;
		size_t index;
		int clash = 0;

		if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
			seed = (uint64_t)time(NULL) * 2654435761u;
		/* Positive and far from overflow, as the runner's generators want it. */
		seed = (seed >> 2) % ((uint64_t)1 << 52) + 1;
		json_array_foreach(session->seen_seeds, index, item)
		{
			uint64_t seen = (uint64_t)json_integer_value(item);

			if (seen >= seed && seen < seed + 64)
				clash = 1;
		}
		if (!clash)
			return seed;
	}
}

struct session_evaluation {
	struct kagent_session *session;
	struct kagent_variant *variant;
	enum kagent_session_evaluation purpose;
	kagent_session_evaluation_callback callback;
	void *data;
	double started;
};

static const char *
session__purpose_name(enum kagent_session_evaluation purpose)
{
	switch (purpose) {
	case KAGENT_SESSION_PROFILE:
		return "profile";
	case KAGENT_SESSION_CONFIRM:
		return "confirm";
	case KAGENT_SESSION_FINAL:
		return "final";
	case KAGENT_SESSION_EVALUATE:
	default:
		return "evaluate";
	}
}

static char *
session__trailer_number(double value)
{
	return kagent_asprintf("%.4g", value);
}

/* Commits an evaluated variant with its verdict in the trailers. */
static void
session__commit_variant(struct kagent_session *session, struct kagent_variant *variant,
			const json_t *verdict)
{
	const json_t *environment = json_object_get(verdict, "environment");
	const json_t *first_trial = json_array_get(json_object_get(verdict, "trials"), 0);
	const char *status = json_string_value(json_object_get(verdict, "status"));
	const char *gpu = json_string_value(json_object_get(environment, "gpu"));
	char *subject, *eager, *compile, *milliseconds, *turn, *seed, *commit_id = NULL;
	char *error = NULL, *branch;

	eager = session__trailer_number(session__timing_number(verdict, "speedup_vs_eager"));
	compile = session__trailer_number(session__timing_number(verdict, "speedup_vs_compile"));
	milliseconds = session__trailer_number(json_number_value(json_object_get(
	    json_object_get(json_object_get(verdict, "timing"), "candidate"), "median_ms")));
	turn = kagent_asprintf("%d", variant->turn);
	seed = kagent_asprintf("%lld",
			       (long long)json_integer_value(json_object_get(first_trial, "seed")));
	subject = kagent_asprintf("%s: %s, %.2fx", variant->id, status ? status : "unknown",
				  variant->speedup);
	{
		const struct kagent_trailer trailers[] = {
		    {"Kagent-Run", session->run_id},
		    {"Kagent-Variant", variant->id},
		    {"Kagent-Turn", turn},
		    {"Kagent-Status", status ? status : "unknown"},
		    {"Kagent-Speedup-Eager", eager},
		    {"Kagent-Speedup-Compile", compile},
		    {"Kagent-Candidate-Ms", milliseconds},
		    {"Kagent-Seed", seed},
		    {"Kagent-GPU", gpu != NULL ? gpu : "none"},
		};

		if (kagent_variant_repository_commit(
			session->repository, session->run_id, "candidate.py", variant->source,
			subject, variant->note[0] != '\0' ? variant->note : NULL, trailers,
			sizeof trailers / sizeof trailers[0], &commit_id, &error) < 0) {
			kagent_log(KAGENT_LOG_ERROR, "commit of %s failed: %s", variant->id, error);
			free(error);
		} else {
			branch = kagent_asprintf("runs/%s", session->run_id);
			free(variant->commit_id);
			variant->commit_id = commit_id;
			kagent_session_record(session, "commit",
					      json_pack("{s:s, s:s, s:s}", "variant", variant->id,
							"commit", commit_id, "branch", branch));
			free(branch);
		}
	}
	free(subject);
	free(eager);
	free(compile);
	free(milliseconds);
	free(turn);
	free(seed);
}

static void
session__evaluated(int status, const json_t *object, void *data)
{
	struct session_evaluation *evaluation = data;
	struct kagent_session *session = evaluation->session;
	struct kagent_variant *variant = evaluation->variant;
	double seconds = session__now() - evaluation->started;

	session->totals.gpu_seconds += seconds;
	if (status == 0) {
		double speedup = kagent_session_speedup(session, object);

		session__remember_seeds(session, object);
		kagent_session_record(
		    session, "verdict",
		    json_pack(
			"{s:s, s:s, s:O, s:O, s:f, s:f, s:f, s:f, s:O}", "variant", variant->id,
			"purpose", session__purpose_name(evaluation->purpose), "status",
			json_object_get(object, "status"), "reason",
			json_object_get(object, "reason"), "speedup", speedup, "speedup_vs_eager",
			session__timing_number(object, "speedup_vs_eager"), "speedup_vs_compile",
			session__timing_number(object, "speedup_vs_compile"), "candidate_ms",
			json_number_value(json_object_get(
			    json_object_get(json_object_get(object, "timing"), "candidate"),
			    "median_ms")),
			"verdict", object));
		if (evaluation->purpose == KAGENT_SESSION_EVALUATE) {
			json_decref(variant->verdict);
			variant->verdict = json_incref((json_t *)object);
			variant->speedup = speedup;
			session__commit_variant(session, variant, object);
			if (session->config->target.speedup > 0 &&
			    speedup >= session->config->target.speedup &&
			    (session->target_variant == NULL ||
			     speedup > session->target_variant->speedup))
				session->target_variant = variant;
		}
	} else {
		const char *kind = json_string_value(json_object_get(object, "error"));

		kagent_session_record(
		    session, "verdict",
		    json_pack("{s:s, s:s, s:s, s:O}", "variant", variant->id, "purpose",
			      session__purpose_name(evaluation->purpose), "status", "error",
			      "reason", json_object_get(object, "message")));
		/* Without a GPU or a worker no later evaluation can work either. */
		if (kind != NULL && (strcmp(kind, "no_gpu") == 0 || strcmp(kind, "worker") == 0) &&
		    session->evaluator_failure == NULL)
			session->evaluator_failure = kagent_strdup(
			    json_string_value(json_object_get(object, "message"))
				? json_string_value(json_object_get(object, "message"))
				: kind);
	}
	evaluation->callback(status, object, evaluation->data);
	free(evaluation);
}

/* Starts an evaluation once the session's worker is ready (or known to be gone). */
static void
session__evaluation_run(void *data)
{
	struct session_evaluation *evaluation = data;
	struct kagent_session *session = evaluation->session;
	const struct kagent_evaluation_config *evaluation_config = &session->config->evaluation;
	struct kagent_evaluation_options options = {
	    .problem_path = session->problem_copy_path,
	    .candidate_path = evaluation->variant->path,
	    .device = evaluation_config->device,
	    .gpu_index = evaluation_config->gpu_index,
	    .worker_socket = evaluation_config->worker_socket != NULL
				 ? evaluation_config->worker_socket
				 : kagent_warm_worker_socket(session),
	    .measure_compile = evaluation_config->measure_compile,
	    .call_timeout_seconds = evaluation_config->call_timeout_seconds,
	    .profile_reference = evaluation->purpose == KAGENT_SESSION_PROFILE,
	};

	if (evaluation->purpose == KAGENT_SESSION_CONFIRM ||
	    evaluation->purpose == KAGENT_SESSION_FINAL)
		options.seed = session__unseen_seed(session);
	/* The final check runs in a fresh worker process: nothing the candidate left behind in a
	 * warm one can help it. */
	options.cold = evaluation->purpose == KAGENT_SESSION_FINAL;
	evaluation->started = session__now();
	kagent_evaluation_start(session->loop, &options, session__evaluated, evaluation);
}

void
kagent_session_evaluate(struct kagent_session *session, struct kagent_variant *variant,
			enum kagent_session_evaluation purpose,
			kagent_session_evaluation_callback callback, void *data)
{
	struct session_evaluation *evaluation = kagent_calloc(1, sizeof *evaluation);

	evaluation->session = session;
	evaluation->variant = variant;
	evaluation->purpose = purpose;
	evaluation->callback = callback;
	evaluation->data = data;
	if (purpose != KAGENT_SESSION_FINAL &&
	    kagent_warm_worker_wait(session, session__evaluation_run, evaluation))
		return;
	session__evaluation_run(evaluation);
}

/* ---- the best ref ---- */

/* Writes the best variant's source beside the worktree's files as best.py. */
static char *
session__write_best_file(struct kagent_session *session, const struct kagent_variant *variant)
{
	char *path = kagent_asprintf("%s/best.py", session->worktree), *error = NULL;

	if (kagent_fileio_write_atomic(path, variant->source, strlen(variant->source), &error) <
	    0) {
		kagent_log(KAGENT_LOG_ERROR, "%s", error);
		free(error);
	}
	return path;
}

struct session_promotion {
	struct kagent_session *session;
	struct kagent_variant *variant;
	kagent_session_promote_callback callback;
	void *data;
};

/* Moves best to variant after a confirmation; returns 0 or a negative errno with *error. */
static int
session__move_best(struct kagent_session *session, struct kagent_variant *variant, double speedup,
		   char **error)
{
	int status = kagent_variant_repository_move_best(session->repository, session->run_id,
							 variant->commit_id, error);
	json_t *previous = session->best != NULL ? json_real(session->best_speedup) : json_null();

	if (status < 0) {
		json_decref(previous);
		return status;
	}
	session->best = variant;
	session->best_speedup = speedup;
	free(session__write_best_file(session, variant));
	kagent_session_record(
	    session, "best",
	    json_pack("{s:s, s:s, s:f, s:s, s:o}", "variant", variant->id, "commit",
		      variant->commit_id, "speedup", speedup, "baseline",
		      kagent_target_baseline_name(session->config->target.baseline), "previous",
		      previous));
	return 0;
}

static void
session__confirmed(int status, const json_t *verdict, void *data)
{
	struct session_promotion *promotion = data;
	struct kagent_session *session = promotion->session;
	struct kagent_variant *variant = promotion->variant;
	double speedup = status == 0 ? kagent_session_speedup(session, verdict) : 0.0;
	char *message, *error = NULL;
	int moved = 0;

	if (status < 0)
		message = kagent_asprintf("%s could not be confirmed: %s", variant->id,
					  json_string_value(json_object_get(verdict, "message")));
	else if (speedup <= 0)
		message = kagent_asprintf("%s failed on unseen seeds: %s: %s; best not moved",
					  variant->id,
					  json_string_value(json_object_get(verdict, "status")),
					  json_string_value(json_object_get(verdict, "reason")));
	else if (session->best != NULL && speedup <= session->best_speedup)
		message =
		    kagent_asprintf("%s confirmed at %.2fx, not faster than the best %s at "
				    "%.2fx; best not moved",
				    variant->id, speedup, session->best->id, session->best_speedup);
	else if (session__move_best(session, variant, speedup, &error) < 0)
		message = kagent_asprintf("%s confirmed at %.2fx, but the best ref could not "
					  "move: %s",
					  variant->id, speedup, error);
	else {
		moved = 1;
		message = kagent_asprintf("%s confirmed on unseen seeds at %.2fx: best/%s now "
					  "points at it",
					  variant->id, speedup, session->run_id);
	}
	free(error);
	promotion->callback(moved, message, promotion->data);
	free(message);
	free(promotion);
}

void
kagent_session_promote(struct kagent_session *session, struct kagent_variant *variant,
		       const char *message, kagent_session_promote_callback callback, void *data)
{
	struct session_promotion *promotion;
	char *text;

	if (variant->verdict == NULL || variant->speedup <= 0 || variant->commit_id == NULL) {
		text = kagent_asprintf("%s cannot become the best: only a correct, evaluated "
				       "variant can (its status: %s)",
				       variant->id,
				       variant->verdict != NULL ? json_string_value(json_object_get(
								      variant->verdict, "status"))
								: "not evaluated");
		callback(0, text, data);
		free(text);
		return;
	}
	promotion = kagent_calloc(1, sizeof *promotion);
	promotion->session = session;
	promotion->variant = variant;
	promotion->callback = callback;
	promotion->data = data;
	if (message != NULL && message[0] != '\0')
		kagent_log(KAGENT_LOG_INFO, "promote %s: %s", variant->id, message);
	kagent_session_evaluate(session, variant, KAGENT_SESSION_CONFIRM, session__confirmed,
				promotion);
}

void
kagent_session_request_finish(struct kagent_session *session, const char *summary)
{
	session->finish_requested = 1;
	free(session->finish_summary);
	session->finish_summary = kagent_strdup(summary != NULL ? summary : "");
}

/* ---- turns ---- */

static void
session__llm_attempt(int attempt, const char *url, const json_t *body, void *data)
{
	struct kagent_session *session = data;

	kagent_session_record(
	    session, "request",
	    json_pack("{s:i, s:s, s:O}", "attempt", attempt, "url", url, "body", body));
}

static void
session__llm_event(int attempt, const char *name, const char *event_data, size_t length, void *data)
{
	struct kagent_session *session = data;

	kagent_session_record(session, "stream",
			      json_pack("{s:i, s:s, s:s%}", "attempt", attempt, "event",
					name != NULL ? name : "message", "data", event_data,
					length));
}

static void
session__llm_retry(int attempt, const struct kagent_http_result *result,
		   const struct kagent_retry_decision *decision, void *data)
{
	struct kagent_session *session = data;

	kagent_session_record(
	    session, "retry",
	    json_pack("{s:i, s:I, s:s, s:s, s:I, s:s?}", "attempt", attempt, "status",
		      (json_int_t)result->status, "failure",
		      kagent_http_failure_name(result->failure), "reason", decision->reason,
		      "delay_ms", (json_int_t)decision->delay_ms, "error", result->error_message));
}

/* What to tell the user when the endpoint refuses: which setting to change. */
static char *
session__llm_failure_advice(const struct kagent_session *session,
			    const struct kagent_llm_call_outcome *outcome)
{
	const struct kagent_provider_config *provider = &session->config->provider;
	const char *key = provider->api_key_env != NULL ? provider->api_key_env : "the API key";

	switch (outcome->failure) {
	case KAGENT_LLM_CALL_AUTHENTICATION:
		return kagent_asprintf("%s: the endpoint %s refused the key; set %s to a valid "
				       "key (or name another variable in provider.api_key_env)",
				       outcome->error_message, provider->base_url, key);
	case KAGENT_LLM_CALL_NOT_FOUND:
		return kagent_asprintf("%s: check provider.base_url (%s), provider.api (%s) and "
				       "provider.model (%s), or pass --base-url and --model",
				       outcome->error_message, provider->base_url,
				       kagent_llm_format_name(provider->format), provider->model);
	case KAGENT_LLM_CALL_QUOTA:
		return kagent_asprintf("%s: the account's quota is spent; add credit or use "
				       "another key or endpoint",
				       outcome->error_message);
	default:
		return kagent_strdup(outcome->error_message != NULL ? outcome->error_message
								    : "the model call failed");
	}
}

static void
session__tool_done(struct kagent_tool_call *call, void *data)
{
	struct kagent_session *session = data;
	const char *name = call->tool != NULL
			       ? call->tool->name
			       : json_string_value(json_object_get(session->pending_call, "name"));
	double seconds = session__now() - session->tool_started;

	kagent_session_record(session, "tool_result",
			      json_pack("{s:s, s:s, s:b, s:s, s:f, s:f}", "id", call->id, "name",
					name, "is_error", call->is_error, "content", call->content,
					"seconds", seconds, "gpu_seconds",
					session->totals.gpu_seconds - session->tool_gpu_before));
	kagent_session_add_message(session,
				   json_pack("{s:s, s:s, s:s, s:s, s:b}", "role", "tool",
					     "tool_call_id", call->id, "name", name, "content",
					     call->content, "is_error", call->is_error));
	free(call->content);
	call->content = NULL;
	json_decref(session->pending_call);
	session->pending_call = NULL;
	session->next_tool++;
	kagent_session_schedule(session, KAGENT_SESSION_STEP_TOOL);
}

static void
session__run_next_tool(struct kagent_session *session)
{
	const json_t *calls = json_object_get(session->reply_message, "tool_calls");
	const json_t *call_json = json_array_get(calls, session->next_tool);
	struct kagent_tool_call *call = &session->tool_call;
	const char *arguments_text;
	json_error_t json_error;

	if (call_json == NULL) {
		kagent_session_schedule(session, KAGENT_SESSION_STEP_TURN_END);
		return;
	}
	session->pending_call = json_incref((json_t *)call_json);
	arguments_text = json_string_value(json_object_get(call_json, "arguments"));
	kagent_session_record(session, "tool_call",
			      json_pack("{s:O, s:O, s:s}", "id", json_object_get(call_json, "id"),
					"name", json_object_get(call_json, "name"), "arguments",
					arguments_text != NULL ? arguments_text : ""));
	json_decref(session->tool_arguments);
	session->tool_arguments =
	    json_loads(arguments_text != NULL ? arguments_text : "", JSON_DECODE_ANY, &json_error);
	memset(call, 0, sizeof *call);
	call->session = session;
	call->id = json_string_value(json_object_get(call_json, "id"));
	call->tool = kagent_tool_find(json_string_value(json_object_get(call_json, "name")));
	call->arguments = session->tool_arguments;
	call->done = session__tool_done;
	call->data = session;
	session->tool_started = session__now();
	session->tool_gpu_before = session->totals.gpu_seconds;
	if (session->tool_arguments == NULL) {
		kagent_tool_call_finish(
		    call, 1,
		    kagent_asprintf("the arguments are not valid JSON (%s at character %d); "
				    "send them again as one JSON object",
				    json_error.text, json_error.position));
		return;
	}
	if (call->tool == NULL) {
		kagent_tool_call_finish(
		    call, 1,
		    kagent_asprintf("there is no tool \"%s\"; use one of the tools offered",
				    json_string_value(json_object_get(call_json, "name"))));
		return;
	}
	kagent_tool_call_start(call);
}

static void
session__llm_done(struct kagent_llm_call_outcome *outcome, void *data)
{
	struct kagent_session *session = data;
	const struct kagent_llm_result *reply = outcome->reply;
	json_t *message;

	session->llm_call = NULL;
	if (outcome->failure != KAGENT_LLM_CALL_OK) {
		char *advice = session__llm_failure_advice(session, outcome);

		kagent_session_record(session, "llm_error",
				      json_pack("{s:s, s:I, s:s}", "failure",
						kagent_llm_call_failure_name(outcome->failure),
						"http_status", (json_int_t)outcome->http_status,
						"message", advice));
		session__conclude(session,
				  outcome->failure == KAGENT_LLM_CALL_CANCELLED ? "interrupted"
										: "llm_error",
				  advice);
		kagent_llm_call_outcome_free(outcome);
		return;
	}
	message = kagent_llm_request_assistant_message(reply);
	session->totals.input_tokens +=
	    reply->usage.input_tokens > 0 ? reply->usage.input_tokens : 0;
	session->totals.output_tokens +=
	    reply->usage.output_tokens > 0 ? reply->usage.output_tokens : 0;
	session->totals.cost += outcome->cost;
	kagent_session_record(
	    session, "reply",
	    json_pack("{s:O, s:{s:I, s:I, s:I}, s:f, s:s, s:f, s:i}", "message", message, "usage",
		      "input_tokens", (json_int_t)reply->usage.input_tokens, "output_tokens",
		      (json_int_t)reply->usage.output_tokens, "cached_tokens",
		      (json_int_t)reply->usage.cached_tokens, "cost", outcome->cost, "finish",
		      kagent_llm_finish_name(reply->finish), "seconds", outcome->seconds,
		      "attempts", outcome->attempts));
	kagent_session_add_message(session, json_incref(message));
	json_decref(session->reply_message);
	session->reply_message = message;
	session->next_tool = 0;
	kagent_llm_call_outcome_free(outcome);
	if (json_array_size(json_object_get(message, "tool_calls")) == 0) {
		session->replies_without_tools++;
		if (session->replies_without_tools < SESSION_REPLIES_WITHOUT_TOOLS_CAP)
			session__tell_model(session,
					    "Act through the tools: evaluate a candidate, or call "
					    "finish with a summary when you are done.");
		else
			session->finish_requested = 1;
		kagent_session_schedule(session, KAGENT_SESSION_STEP_TURN_END);
		return;
	}
	session->replies_without_tools = 0;
	kagent_session_schedule(session, KAGENT_SESSION_STEP_TOOL);
}

static void
session__ask_model(struct kagent_session *session)
{
	struct kagent_llm_request request = {
	    .provider = &session->config->provider,
	    .system = session->system_prompt,
	    .messages = session->messages,
	    .tools = session->tools,
	};
	struct kagent_llm_call_observer observer = {
	    .on_attempt = session__llm_attempt,
	    .on_event = session__llm_event,
	    .on_retry = session__llm_retry,
	    .data = session,
	};
	char *error = NULL;

	session->turn++;
	session->llm_call = kagent_llm_call_start(session->http, &request, &observer,
						  session__llm_done, session, &error);
	if (session->llm_call == NULL) {
		kagent_session_record(session, "llm_error",
				      json_pack("{s:s, s:i, s:s}", "failure", "request",
						"http_status", 0, "message", error));
		session__conclude(session, "llm_error", error);
	}
}

static void
session__target_confirmed(int moved, const char *message, void *data)
{
	struct kagent_session *session = data;
	struct kagent_variant *variant = session->target_variant;

	session->target_variant = NULL;
	if (moved && session->best_speedup >= session->config->target.speedup) {
		kagent_session_schedule(session, KAGENT_SESSION_STEP_TARGET_REACHED);
		return;
	}
	{
		char *text = kagent_asprintf(
		    "%s reached the target %.2fx in its evaluation but not when re-checked on "
		    "unseen seeds: %s. Keep improving.",
		    variant->id, session->config->target.speedup, message);

		session__tell_model(session, text);
		free(text);
	}
	kagent_session_schedule(session, KAGENT_SESSION_STEP_NEXT_TURN);
}

static void
session__turn_end(struct kagent_session *session)
{
	kagent_session_record(session, "turn_end",
			      json_pack("{s:o, s:o, s:o}", "totals", session__totals_json(session),
					"limits", session__limits_json(session), "best",
					session__best_json(session)));
	if (session->target_variant != NULL && !session->interrupted) {
		kagent_session_promote(session, session->target_variant, "reached the target",
				       session__target_confirmed, session);
		return;
	}
	kagent_session_schedule(session, KAGENT_SESSION_STEP_NEXT_TURN);
}

static void
session__next_turn(struct kagent_session *session)
{
	const char *reason;
	char *detail = NULL;

	if (session->interrupted) {
		session__conclude(session, "interrupted", kagent_strdup("interrupted by the user"));
		return;
	}
	if (session->evaluator_failure != NULL) {
		session__conclude(session, "evaluator_error",
				  kagent_strdup(session->evaluator_failure));
		return;
	}
	if (session->finish_requested) {
		session__conclude(session, "model_finished",
				  kagent_strdup(session->finish_summary != NULL
						    ? session->finish_summary
						    : "the model stopped calling tools"));
		return;
	}
	reason = session__budget_spent(session, &detail);
	if (reason != NULL) {
		session__conclude(session, reason, detail);
		return;
	}
	session__ask_model(session);
}

/* ---- the end ---- */

static void
session__announce(struct kagent_session *session, struct kagent_variant *variant,
		  const json_t *confirmation, int confirmed, char *path)
{
	json_t *final =
	    json_pack("{s:s?, s:s?, s:s?, s:b, s:s, s:s, s:s, s:s?, s:o}", "variant",
		      variant != NULL ? variant->id : NULL, "commit",
		      variant != NULL ? variant->commit_id : NULL, "path", path, "confirmed",
		      confirmed, "stop_reason", session->stop_reason, "run_id", session->run_id,
		      "trace", session->trace_path, "summary", session->finish_summary, "totals",
		      session__totals_json(session));

	json_object_set_new(final, "worktree", json_string(session->worktree));
	json_object_set_new(final, "stop_detail",
			    json_string(session->stop_detail != NULL ? session->stop_detail : ""));
	json_object_set_new(final, "target_reached",
			    json_boolean(strcmp(session->stop_reason, "target_reached") == 0));
	if (confirmation != NULL)
		json_object_set_new(final, "confirmation",
				    json_pack("{s:O, s:O, s:f}", "status",
					      json_object_get(confirmation, "status"), "reason",
					      json_object_get(confirmation, "reason"), "speedup",
					      kagent_session_speedup(session, confirmation)));
	else
		json_object_set_new(final, "confirmation", json_null());
	kagent_session_record(session, "final", json_incref(final));
	free(path);
	session->state_done = 1;
	if (session->done != NULL)
		session->done(session, confirmed ? 0 : 1, final, session->observer_data);
	json_decref(final);
}

static void
session__final_checked(int status, const json_t *verdict, void *data)
{
	struct kagent_session *session = data;
	struct kagent_variant *variant = session->final_variant;
	double speedup = status == 0 ? kagent_session_speedup(session, verdict) : 0.0;
	char *error = NULL, *path = NULL;
	int confirmed = speedup > 0;

	if (confirmed && session->best != variant &&
	    session__move_best(session, variant, speedup, &error) < 0) {
		kagent_log(KAGENT_LOG_ERROR, "%s", error);
		free(error);
	}
	if (confirmed)
		path = kagent_asprintf("%s/best.py", session->worktree);
	session__announce(session, variant, status == 0 ? verdict : NULL, confirmed, path);
}

/* The variant to announce: the best ref's, else the fastest correct evaluation. */
static struct kagent_variant *
session__final_candidate(struct kagent_session *session)
{
	struct kagent_variant *fastest = NULL;
	size_t index;

	if (session->best != NULL)
		return session->best;
	for (index = 0; index < session->variant_count; index++) {
		struct kagent_variant *variant = session->variants[index];

		if (variant->speedup > 0 && variant->commit_id != NULL &&
		    (fastest == NULL || variant->speedup > fastest->speedup))
			fastest = variant;
	}
	return fastest;
}

static void
session__conclude(struct kagent_session *session, const char *reason, char *detail)
{
	struct kagent_variant *variant;

	kagent_warm_worker_stop(session);
	free(session->stop_reason);
	session->stop_reason = kagent_strdup(reason);
	kagent_session_record(
	    session, "stop",
	    json_pack("{s:s, s:s}", "reason", reason, "detail", detail != NULL ? detail : ""));
	free(session->stop_detail);
	session->stop_detail = detail;
	variant = session__final_candidate(session);
	/* Interrupted or without an evaluator, the best so far stands as it was confirmed. */
	if (variant == NULL || session->interrupted || session->evaluator_failure != NULL) {
		session__announce(session, variant, NULL,
				  variant != NULL && variant == session->best,
				  variant != NULL && variant == session->best
				      ? kagent_asprintf("%s/best.py", session->worktree)
				      : NULL);
		return;
	}
	session->final_variant = variant;
	kagent_session_evaluate(session, variant, KAGENT_SESSION_FINAL, session__final_checked,
				session);
}

static void
session__step(uv_timer_t *timer)
{
	struct kagent_session *session = timer->data;

	switch (session->next_step) {
	case KAGENT_SESSION_STEP_NEXT_TURN:
		session__next_turn(session);
		break;
	case KAGENT_SESSION_STEP_TOOL:
		if (session->interrupted) {
			session__turn_end(session);
			break;
		}
		session__run_next_tool(session);
		break;
	case KAGENT_SESSION_STEP_TURN_END:
		session__turn_end(session);
		break;
	case KAGENT_SESSION_STEP_TARGET_REACHED: {
		char *detail =
		    kagent_asprintf("%s confirmed at %.2fx, target %.2fx", session->best->id,
				    session->best_speedup, session->config->target.speedup);

		session__conclude(session, "target_reached", detail);
		break;
	}
	}
}

void
kagent_session_start(struct kagent_session *session)
{
	session->started = session__now();
	if (session->config->evaluation.worker_socket == NULL &&
	    session->worker_executable != NULL) {
		char *log_path = kagent_asprintf(
		    "%.*s.worker.log", (int)(strlen(session->trace_path) - strlen(".jsonl")),
		    session->trace_path);

		kagent_warm_worker_start(session, log_path);
		free(log_path);
	}
	kagent_session_record(session, "run_start", kagent_session_run_start_fields(session));
	if (!session->resumed)
		session__tell_model(session, session->problem_prompt);
	kagent_session_schedule(session, KAGENT_SESSION_STEP_NEXT_TURN);
}

void
kagent_session_interrupt(struct kagent_session *session)
{
	if (session->interrupted || session->state_done)
		return;
	session->interrupted = 1;
	if (session->llm_call != NULL)
		kagent_llm_call_cancel(session->llm_call);
}

void
kagent_session_handle_closed(uv_handle_t *handle)
{
	struct kagent_session *session = handle->data;
	size_t index;

	if (--session->handles_open > 0)
		return;

	for (index = 0; index < session->variant_count; index++)
		session__variant_free(session->variants[index]);
	free(session->variants);
	json_decref(session->messages);
	json_decref(session->tools);
	json_decref(session->reply_message);
	json_decref(session->pending_call);
	json_decref(session->tool_arguments);
	json_decref(session->seen_seeds);
	if (session->trace != NULL)
		kagent_trace_close(session->trace);
	if (session->repository != NULL)
		kagent_variant_repository_close(session->repository);
	free(session->problem_path);
	free(session->problem_copy_path);
	free(session->problem_source);
	free(session->problem_name);
	free(session->run_id);
	free(session->gpu_name);
	free(session->worker_executable);
	free(session->worktree);
	free(session->variants_directory);
	free(session->trace_path);
	free(session->prompts_directory);
	free(session->system_prompt);
	free(session->problem_prompt);
	free(session->finish_summary);
	free(session->stop_reason);
	free(session->stop_detail);
	free(session->evaluator_failure);
	free(session->worker.socket_path);
	free(session->worker.log_path);
	free(session);
}

void
kagent_session_free(struct kagent_session *session)
{
	if (session == NULL)
		return;
	/* A worker still running is told to stop; its handle closes when it has exited. */
	kagent_warm_worker_stop(session);
	uv_close((uv_handle_t *)&session->step_timer, kagent_session_handle_closed);
	uv_close((uv_handle_t *)&session->worker.poll_timer, kagent_session_handle_closed);
}
