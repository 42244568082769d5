/*
 * The session's state, shared by agent/session/session.c (the turns) and
 * agent/session/session_create.c (setup and --resume). Nothing else includes this.
 */
#ifndef KAGENT_SESSION_INTERNAL_H
#define KAGENT_SESSION_INTERNAL_H

#include "kagent/session/session.h"
#include "kagent/model_tools/tool_table.h"
#include "kagent/session/warm_worker.h"

#include <stdint.h>

struct kagent_llm_call;
struct kagent_llm_conversation;
struct kagent_otlp_exporter;
struct kagent_trace;
struct kagent_variant_repository;
struct kagent_variants;

enum kagent_session_step {
	KAGENT_SESSION_STEP_NEXT_TURN,
	KAGENT_SESSION_STEP_TOOL,
	KAGENT_SESSION_STEP_TURN_END,
	KAGENT_SESSION_STEP_TARGET_REACHED,
};

struct kagent_session_totals {
	long long input_tokens;
	long long output_tokens;
	double cost;
	double gpu_seconds;
	double wall_seconds_before; /* spent by earlier processes of a resumed run */
};

struct kagent_session {
	uv_loop_t *loop;
	struct kagent_http_client *http;
	const struct kagent_config *config;
	void (*observer)(const json_t *record, void *data);
	void (*done)(struct kagent_session *session, int status, const json_t *summary, void *data);
	void *observer_data;

	char *problem_path;	 /* as the user gave it */
	char *problem_copy_path; /* the problem.py of the worktree, what evaluations read */
	char *problem_source;
	char *problem_name;
	char *run_id;
	char *gpu_name;
	char *worker_executable;
	int resumed;

	struct kagent_variant_repository *repository;
	char *worktree;
	struct kagent_trace *trace;
	char *trace_path;
	int trace_failed;
	struct kagent_otlp_exporter *exporter; /* telemetry.otlp_endpoint's, or NULL */
	char *prompts_directory;
	/* Until the run_start record and the first message carry them (the conversation holds
	 * the system prompt in its wire form). */
	char *system_prompt;
	char *problem_prompt;
	json_t *tools;
	struct kagent_llm_conversation *conversation;
	/* A hash of each item of the message list of the last request traced, for the next one
	 * (the list itself would keep a second copy of the conversation). */
	uint64_t *recorded_hashes;
	size_t recorded_count;
	/* The tool definitions of the last request traced (the shared wire value): a later
	 * request that sends the same names them instead of repeating them. */
	json_t *recorded_tools;

	struct kagent_variants *variants;
	struct kagent_variant *target_variant; /* reached the target; confirmed at turn end */
	struct kagent_variant *final_variant;

	long long turn;
	struct kagent_session_totals totals;
	double started;
	double check_started; /* when the problem check began */

	uv_timer_t step_timer;
	struct kagent_warm_worker worker;
	int handles_open; /* the step timer and the worker: freed when both have closed */
	enum kagent_session_step next_step;
	struct kagent_llm_call *llm_call;
	json_t *reply_message;
	size_t next_tool;
	json_t *pending_call;
	json_t *tool_arguments;
	struct kagent_tool_host tool_host; /* what the tools see of the session */
	struct kagent_tool_call tool_call;
	double tool_started;
	double tool_gpu_before;
	int replies_without_tools;
	int finish_requested;
	char *finish_summary;
	int interrupted;
	char *evaluator_failure;
	char *stop_reason;
	char *stop_detail;
	int state_done;
};

void kagent_session_record(struct kagent_session *session, const char *type, json_t *fields);
/* Adds a message (stolen) in the neutral form of kagent/llm/llm_request.h to the conversation.
 * One it cannot carry fails the next request, with the reason. */
void kagent_session_add_message(struct kagent_session *session, json_t *message);
/*
 * Runs an evaluation of the variant (session_data: the session), accounts its GPU time and
 * traces its verdict; a kagent_variants_evaluate_function, for the variants and the tools.
 */
void kagent_session_evaluate(void *session_data, struct kagent_variant *variant,
			     enum kagent_variants_purpose purpose,
			     kagent_variants_verdict_callback callback, void *data);

#endif
