/*
 * One optimization run as a state machine on the libuv loop (see
 * include/kagent/session/session.h). Before the first turn the problem is checked on the
 * run's worker; no request goes out until it passes. A turn is: the model's reply (llm_client.c),
 * then each tool call in order (agent/model_tools, given the session's tool host), then the stop
 * rules; each step is scheduled from the loop, never called recursively, so a run of any length
 * keeps a flat stack and the caller's callbacks never run inside kagent's own. The run's variants,
 * their commits and the best ref are agent/records/variants.c's.
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
#include "kagent/base/sha256.h"
#include "kagent/model_tools/tool_table.h"
#include "kagent/records/otlp_exporter.h"
#include "kagent/records/trace.h"
#include "kagent/records/variants.h"
#include "kagent/base/units.h"
#include "kagent/records/variant_repository.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A model reply without a tool call is nudged once; the second in a row ends the run. */
#define SESSION_REPLIES_WITHOUT_TOOLS_CAP 2

static void session__step(uv_timer_t *timer);
static void session__conclude(struct kagent_session *session, const char *reason, char *detail);

/* Writes a trace record and shows it to the observer and the span exporter; fields are taken
 * over. */
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
	if (session->exporter != NULL)
		kagent_otlp_exporter_record(session->exporter, fields);
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

static double
session__wall_seconds(const struct kagent_session *session)
{
	return session->totals.wall_seconds_before + (session__now() - session->started);
}

/* Schedules the next step from the loop; at most one is pending. */
static void
session__schedule(struct kagent_session *session, enum kagent_session_step step)
{
	session->next_step = step;
	uv_timer_start(&session->step_timer, session__step, 0, 0);
}

void
kagent_session_add_message(struct kagent_session *session, json_t *message)
{
	char *cause = NULL;

	/* An error stays with the conversation and fails the next request, which reports it. */
	kagent_llm_conversation_add(session->conversation, message, &cause);
	free(cause);
	json_decref(message);
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
			 "wall_seconds", session__wall_seconds(session), "gpu_seconds",
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
	const struct kagent_variant *best = kagent_variants_best(session->variants);

	if (best == NULL)
		return json_null();
	return json_pack("{s:s, s:f}", "variant", best->id, "speedup",
			 kagent_variants_best_speedup(session->variants));
}

/* The host's budget_line: a budget reminder for tool results. */
static char *
session__budget_line(void *data)
{
	const struct kagent_session *session = data;
	const struct kagent_budget_config *budget = &session->config->budget;
	const struct kagent_variant *best_variant = kagent_variants_best(session->variants);
	char wall[32], wall_limit[32], turns[64], cost[64], time_text[96], best[96];
	char *line;

	kagent_units_format_duration(wall, sizeof wall, session__wall_seconds(session));
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
	if (best_variant != NULL)
		snprintf(best, sizeof best, "; best so far %s at %.2fx", best_variant->id,
			 kagent_variants_best_speedup(session->variants));
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
	    session__wall_seconds(session) >= budget->max_wall_seconds) {
		*detail = kagent_asprintf("%.0f s of %.0f s", session__wall_seconds(session),
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

/* ---- for the session's owner ---- */

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

const struct kagent_config *
kagent_session_config(const struct kagent_session *session)
{
	return session->config;
}

/* ---- evaluations ---- */

struct session__evaluation {
	struct kagent_session *session;
	struct kagent_variant *variant;
	enum kagent_variants_purpose purpose;
	kagent_variants_verdict_callback callback;
	void *data;
	double started;
};

static void
session__evaluated(int status, const json_t *object, void *data)
{
	struct session__evaluation *evaluation = data;
	struct kagent_session *session = evaluation->session;
	struct kagent_variant *variant = evaluation->variant;
	double seconds = session__now() - evaluation->started;

	session->totals.gpu_seconds += seconds;
	kagent_variants_take_verdict(session->variants, variant, evaluation->purpose, status,
				     object);
	if (status == 0) {
		if (evaluation->purpose == KAGENT_VARIANTS_EVALUATE &&
		    session->config->target.speedup > 0 &&
		    variant->speedup >= session->config->target.speedup &&
		    (session->target_variant == NULL ||
		     variant->speedup > session->target_variant->speedup))
			session->target_variant = variant;
	} else {
		const char *kind = json_string_value(json_object_get(object, "error"));

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

/* What the run's evaluations and its problem check share: the problem, device and worker. */
static struct kagent_evaluation_options
session__evaluation_options(const struct kagent_session *session)
{
	const struct kagent_evaluation_config *evaluation_config = &session->config->evaluation;

	return (struct kagent_evaluation_options){
	    .problem_path = session->problem_copy_path,
	    .device = evaluation_config->device,
	    .gpu_index = evaluation_config->gpu_index,
	    .worker_socket = evaluation_config->worker_socket != NULL
				 ? evaluation_config->worker_socket
				 : kagent_warm_worker_socket(&session->worker),
	    .measure_compile = evaluation_config->measure_compile,
	    .call_timeout_seconds = evaluation_config->call_timeout_seconds,
	    .compile_timeout_seconds = evaluation_config->compile_timeout_seconds,
	    .device_queues = evaluation_config->device_queues,
	    .timing_processes = evaluation_config->timing_processes,
	    .credit_threshold = evaluation_config->credit_threshold,
	    .speedup_basis = evaluation_config->speedup_basis,
	};
}

/* Starts an evaluation once the session's worker is ready (or known to be gone). */
static void
session__evaluation_run(void *data)
{
	struct session__evaluation *evaluation = data;
	struct kagent_session *session = evaluation->session;
	struct kagent_evaluation_options options = session__evaluation_options(session);

	options.candidate_path = evaluation->variant->path;
	options.profile_reference = evaluation->purpose == KAGENT_VARIANTS_PROFILE;
	if (evaluation->purpose == KAGENT_VARIANTS_CONFIRM ||
	    evaluation->purpose == KAGENT_VARIANTS_FINAL)
		options.seed = kagent_variants_unseen_seed(session->variants);
	/* The final check runs in a fresh worker process: nothing the candidate left behind in a
	 * warm one can help it. */
	options.cold = evaluation->purpose == KAGENT_VARIANTS_FINAL;
	options.generalisation = evaluation->purpose == KAGENT_VARIANTS_FINAL;
	evaluation->started = session__now();
	kagent_evaluation_start(session->loop, &options, session__evaluated, evaluation);
}

void
kagent_session_evaluate(void *session_data, struct kagent_variant *variant,
			enum kagent_variants_purpose purpose,
			kagent_variants_verdict_callback callback, void *data)
{
	struct kagent_session *session = session_data;
	struct session__evaluation *evaluation = kagent_calloc(1, sizeof *evaluation);

	evaluation->session = session;
	evaluation->variant = variant;
	evaluation->purpose = purpose;
	evaluation->callback = callback;
	evaluation->data = data;
	if (purpose != KAGENT_VARIANTS_FINAL &&
	    kagent_warm_worker_wait(&session->worker, session__evaluation_run, evaluation))
		return;
	session__evaluation_run(evaluation);
}

/* ---- the tools' host ---- */

/* The host's turn: the turn in progress. */
static int
session__turn(void *data)
{
	const struct kagent_session *session = data;

	return (int)session->turn;
}

/* The host's request_finish: the model asked to end the run with this summary. */
static void
session__request_finish(void *data, const char *summary)
{
	struct kagent_session *session = data;

	session->finish_requested = 1;
	free(session->finish_summary);
	session->finish_summary = kagent_strdup(summary != NULL ? summary : "");
}

/* What the tools see of the session (struct kagent_tool_host). */
static void
session__host_init(struct kagent_session *session)
{
	session->tool_host = (struct kagent_tool_host){
	    .loop = session->loop,
	    .problem_name = session->problem_name,
	    .problem_source = session->problem_source,
	    .variants = session->variants,
	    .turn = session__turn,
	    .evaluate = kagent_session_evaluate,
	    .budget_line = session__budget_line,
	    .request_finish = session__request_finish,
	    .data = session,
	};
}

/* ---- turns ---- */

/*
 * A request record carries the body as sent, but its message list ("messages", or the
 * Responses API's "input") only from where it differs from the previous request's: "earlier"
 * says how many items the previous request record's list (as rebuilt) shares with it. A
 * conversation grows every turn, so whole bodies made a trace grow with the square of its
 * turns (and its redaction and writing cost the daemon CPU in proportion). The tool
 * definitions, the same every turn, are left out where the previous request record has them
 * ("tools_earlier"): writing them again made the request record a sixth of the daemon's CPU.
 */
static json_t *
session__request_fields(struct kagent_session *session, int attempt, const char *url,
			const struct kagent_llm_body *body)
{
	size_t earlier = 0, index, count = kagent_llm_body_item_count(body);
	uint64_t *hashes = kagent_calloc(count > 0 ? count : 1, sizeof *hashes);
	json_t *recorded, *tools, *fields;
	int tools_earlier = 0;

	for (index = 0; index < count; index++)
		hashes[index] = kagent_llm_body_item_hash(body, index);
	while (earlier < count && earlier < session->recorded_count &&
	       hashes[earlier] == session->recorded_hashes[earlier])
		earlier++;
	free(session->recorded_hashes);
	session->recorded_hashes = hashes;
	session->recorded_count = count;
	recorded = kagent_llm_body_json(body, earlier);
	tools = recorded != NULL ? json_object_get(recorded, "tools") : NULL;
	if (tools != NULL && session->recorded_tools != NULL &&
	    (tools == session->recorded_tools || json_equal(tools, session->recorded_tools))) {
		tools_earlier = 1;
		json_object_del(recorded, "tools");
	} else {
		json_decref(session->recorded_tools);
		session->recorded_tools = json_incref(tools);
	}
	fields = json_pack("{s:i, s:s, s:o?, s:I}", "attempt", attempt, "url", url, "body",
			   recorded, "earlier", (json_int_t)earlier);
	if (tools_earlier)
		json_object_set_new(fields, "tools_earlier", json_true());
	return fields;
}

static void
session__llm_attempt(int attempt, const char *url, const struct kagent_llm_body *body, void *data)
{
	struct kagent_session *session = data;

	kagent_session_record(session, "request",
			      session__request_fields(session, attempt, url, body));
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
	session__schedule(session, KAGENT_SESSION_STEP_TOOL);
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
		session__schedule(session, KAGENT_SESSION_STEP_TURN_END);
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
	call->host = &session->tool_host;
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
		session__schedule(session, KAGENT_SESSION_STEP_TURN_END);
		return;
	}
	session->replies_without_tools = 0;
	session__schedule(session, KAGENT_SESSION_STEP_TOOL);
}

static void
session__ask_model(struct kagent_session *session)
{
	struct kagent_llm_request request = {
	    .provider = &session->config->provider,
	    .conversation = session->conversation,
	    .tools = session->tools,
	};
	struct kagent_llm_call_observer observer = {
	    .on_attempt = session__llm_attempt,
	    .on_event = session__llm_event,
	    .on_retry = session__llm_retry,
	    .data = session,
	};
	char *cause = NULL;

	session->turn++;
	session->llm_call = kagent_llm_call_start(session->http, &request, &observer,
						  session__llm_done, session, &cause);
	if (session->llm_call == NULL) {
		kagent_session_record(session, "llm_error",
				      json_pack("{s:s, s:i, s:s}", "failure", "request",
						"http_status", 0, "message", cause));
		session__conclude(session, "llm_error", cause);
	}
}

static void
session__target_confirmed(int moved, const char *message, void *data)
{
	struct kagent_session *session = data;
	struct kagent_variant *variant = session->target_variant;

	session->target_variant = NULL;
	if (moved &&
	    kagent_variants_best_speedup(session->variants) >= session->config->target.speedup) {
		session__schedule(session, KAGENT_SESSION_STEP_TARGET_REACHED);
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
	session__schedule(session, KAGENT_SESSION_STEP_NEXT_TURN);
}

static void
session__turn_end(struct kagent_session *session)
{
	kagent_session_record(session, "turn_end",
			      json_pack("{s:o, s:o, s:o}", "totals", session__totals_json(session),
					"limits", session__limits_json(session), "best",
					session__best_json(session)));
	if (session->target_variant != NULL && !session->interrupted) {
		kagent_variants_promote(session->variants, session->target_variant,
					"reached the target", session__target_confirmed, session);
		return;
	}
	session__schedule(session, KAGENT_SESSION_STEP_NEXT_TURN);
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

/* A number of object, or JSON null (borrowed) when it is missing or not a number. */
static json_t *
session__number_or_null(const json_t *object, const char *key)
{
	json_t *value = json_object_get(object, key);

	return json_is_number(value) ? value : json_null();
}

/* The best variant as evaluated (kagent_variants_best_evaluated), for reports of runs that
 * confirmed nothing: its verdict's status, reason and measured speedups, and credit. */
static json_t *
session__evaluated_json(struct kagent_session *session)
{
	const struct kagent_variant *variant = kagent_variants_best_evaluated(session->variants);
	const json_t *timing;

	if (variant == NULL)
		return json_null();
	timing = json_object_get(variant->verdict, "timing");
	return json_pack("{s:s, s:O?, s:O?, s:O, s:O, s:b}", "variant", variant->id, "status",
			 json_object_get(variant->verdict, "status"), "reason",
			 json_object_get(variant->verdict, "reason"), "speedup_vs_eager",
			 session__number_or_null(timing, "speedup_vs_eager"), "speedup_vs_compile",
			 session__number_or_null(timing, "speedup_vs_compile"), "credited",
			 !json_is_false(json_object_get(json_object_get(variant->verdict, "credit"),
							"credited")));
}

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
	if (confirmation != NULL) {
		const json_t *timing = json_object_get(confirmation, "timing");
		json_t *confirmation_json = json_pack(
		    "{s:O, s:O, s:f, s:O?}", "status", json_object_get(confirmation, "status"),
		    "reason", json_object_get(confirmation, "reason"), "speedup",
		    kagent_variants_speedup(session->variants, confirmation), "generalisation",
		    json_object_get(confirmation, "generalisation"));

		/* Both baselines and the credit rule's answer, for reports over many runs (the
		 * daemon's batch report): fast_p is counted against each baseline. */
		json_object_set_new(
		    confirmation_json, "speedup_vs_eager",
		    json_incref(session__number_or_null(timing, "speedup_vs_eager")));
		json_object_set_new(
		    confirmation_json, "speedup_vs_compile",
		    json_incref(session__number_or_null(timing, "speedup_vs_compile")));
		json_object_set_new(confirmation_json, "credited",
				    json_boolean(!json_is_false(json_object_get(
					json_object_get(confirmation, "credit"), "credited"))));
		json_object_set_new(final, "confirmation", confirmation_json);
	} else
		json_object_set_new(final, "confirmation", json_null());
	json_object_set_new(final, "evaluated", session__evaluated_json(session));
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
	double speedup = status == 0 ? kagent_variants_speedup(session->variants, verdict) : 0.0;
	char *cause = NULL, *path = NULL;
	int confirmed = speedup > 0;

	if (confirmed && kagent_variants_best(session->variants) != variant &&
	    kagent_variants_move_best(session->variants, variant, speedup, &cause) < 0) {
		kagent_log(KAGENT_LOG_ERROR, "%s", cause);
		free(cause);
	}
	if (confirmed)
		path = kagent_asprintf("%s/best.py", session->worktree);
	session__announce(session, variant, status == 0 ? verdict : NULL, confirmed, path);
}

static void
session__conclude(struct kagent_session *session, const char *reason, char *detail)
{
	struct kagent_variant *variant;

	kagent_warm_worker_stop(&session->worker);
	free(session->stop_reason);
	session->stop_reason = kagent_strdup(reason);
	kagent_session_record(
	    session, "stop",
	    json_pack("{s:s, s:s}", "reason", reason, "detail", detail != NULL ? detail : ""));
	free(session->stop_detail);
	session->stop_detail = detail;
	variant = kagent_variants_final_candidate(session->variants);
	/* Interrupted or without an evaluator, the best so far stands as it was confirmed. */
	if (variant == NULL || session->interrupted || session->evaluator_failure != NULL) {
		int confirmed =
		    variant != NULL && variant == kagent_variants_best(session->variants);

		session__announce(session, variant, NULL, confirmed,
				  confirmed ? kagent_asprintf("%s/best.py", session->worktree)
					    : NULL);
		return;
	}
	session->final_variant = variant;
	kagent_session_evaluate(session, variant, KAGENT_VARIANTS_FINAL, session__final_checked,
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
		char *detail = kagent_asprintf("%s confirmed at %.2fx, target %.2fx",
					       kagent_variants_best(session->variants)->id,
					       kagent_variants_best_speedup(session->variants),
					       session->config->target.speedup);

		session__conclude(session, "target_reached", detail);
		break;
	}
	}
}

/* The fields of the run_start record. */
static json_t *
session__run_start_fields(const struct kagent_session *session)
{
	char hex[KAGENT_SHA256_HEX_SIZE];

	kagent_sha256_hex(session->problem_source, strlen(session->problem_source), hex);
	return json_pack(
	    "{s:s, s:b, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:O}", "run_id", session->run_id,
	    "resumed", session->resumed, "problem", session->problem_path, "problem_name",
	    session->problem_name, "problem_sha256", hex, "repository",
	    kagent_variant_repository_directory(session->repository), "worktree", session->worktree,
	    "kagent_version", KAGENT_VERSION, "config", kagent_config_to_json(session->config),
	    "system", session->system_prompt, "tools", session->tools);
}

/* ---- the problem check ---- */

/*
 * The check's answer. Only a problem that loads, builds and makes its inputs is sent to the
 * model; otherwise the run ends before its first request, and without a final check, since no
 * evaluation could work either.
 */
static void
session__problem_checked(int status, const json_t *object, void *data)
{
	struct kagent_session *session = data;
	const char *kind = json_string_value(json_object_get(object, "error"));
	const char *message = json_string_value(json_object_get(object, "message"));
	int bad_problem = kind != NULL && strcmp(kind, "problem") == 0;
	double seconds = session__now() - session->check_started;

	if (status == 0) {
		kagent_session_record(session, "problem_check",
				      json_pack("{s:s, s:f}", "status", "ok", "seconds", seconds));
		if (!session->resumed)
			session__tell_model(session, session->problem_prompt);
		free(session->problem_prompt);
		session->problem_prompt = NULL;
		session__schedule(session, KAGENT_SESSION_STEP_NEXT_TURN);
		return;
	}
	if (message == NULL)
		message = "the problem check failed";
	kagent_session_record(session, "problem_check",
			      json_pack("{s:s, s:s, s:s, s:f}", "status",
					bad_problem ? "bad_problem" : "error", "error",
					kind != NULL ? kind : "worker", "message", message,
					"seconds", seconds));
	session->evaluator_failure = kagent_strdup(message);
	session__conclude(session, bad_problem ? "bad_problem" : "evaluator_error",
			  kagent_strdup(message));
}

/* Checks the problem once the session's worker is ready (or known to be gone). */
static void
session__check_problem(void *data)
{
	struct kagent_session *session = data;
	struct kagent_evaluation_options options = session__evaluation_options(session);

	session->check_started = session__now();
	kagent_evaluation_check_problem(session->loop, &options, session__problem_checked, session);
}

void
kagent_session_start(struct kagent_session *session)
{
	session__host_init(session);
	session->started = session__now();
	if (session->config->evaluation.worker_socket == NULL &&
	    session->worker_executable != NULL) {
		char *log_path = kagent_asprintf(
		    "%.*s.worker.log", (int)(strlen(session->trace_path) - strlen(".jsonl")),
		    session->trace_path);

		/* One evaluation at a time on an otherwise idle host: the next candidate's
		 * process, made during this evaluation, saves the judge its wait for the
		 * candidate's sandbox and CUDA context (docs/worker-protocol.md). */
		kagent_warm_worker_start(&session->worker, session->worker_executable,
					 session->run_id, session->config->evaluation.gpu_index, 1,
					 log_path);
		free(log_path);
	}
	kagent_session_record(session, "run_start", session__run_start_fields(session));
	free(session->system_prompt);
	session->system_prompt = NULL;
	/* No request before the problem is known to work: the check waits for the worker. */
	if (!kagent_warm_worker_wait(&session->worker, session__check_problem, session))
		session__check_problem(session);
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

/* Frees the session once the last of its handles has closed. */
static void
session__release(void *data)
{
	struct kagent_session *session = data;

	if (--session->handles_open > 0)
		return;

	kagent_variants_free(session->variants);
	kagent_llm_conversation_free(session->conversation);
	free(session->recorded_hashes);
	json_decref(session->recorded_tools);
	json_decref(session->tools);
	json_decref(session->reply_message);
	json_decref(session->pending_call);
	json_decref(session->tool_arguments);
	/* Before the trace closes: the last spans are redacted with it. */
	kagent_otlp_exporter_finish(session->exporter);
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
	free(session->trace_path);
	free(session->prompts_directory);
	free(session->system_prompt);
	free(session->problem_prompt);
	free(session->finish_summary);
	free(session->stop_reason);
	free(session->stop_detail);
	free(session->evaluator_failure);
	free(session);
}

static void
session__handle_closed(uv_handle_t *handle)
{
	session__release(handle->data);
}

void
kagent_session_free(struct kagent_session *session)
{
	if (session == NULL)
		return;
	uv_close((uv_handle_t *)&session->step_timer, session__handle_closed);
	kagent_warm_worker_close(&session->worker, session__release, session);
}
