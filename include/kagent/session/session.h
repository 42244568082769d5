/*
 * One optimization run as a state machine on the libuv loop: check that the
 * problem loads and makes its inputs (before any token is spent), ask the model,
 * run the tools it calls, account the budget, stop on a rule, confirm the best
 * variant on unseen seeds in a fresh process, announce it. Nothing here blocks
 * and nothing is global, so one process can drive many sessions at once.
 * Every step is a trace record (docs/traces.md), and the observer sees the
 * same records as they are written (the terminal view renders them).
 *
 * The tools (agent/model_tools) act on the run through the host the session
 * gives them (struct kagent_tool_host): the run's variants
 * (agent/records/variants.c), evaluations, the budget and finishing.
 */
#ifndef KAGENT_SESSION_H
#define KAGENT_SESSION_H

#include <jansson.h>
#include <uv.h>

#include "kagent/records/config.h"
#include "kagent/llm/http_client.h"

struct kagent_session;

struct kagent_session_options {
	uv_loop_t *loop;
	struct kagent_http_client *http; /* shared by the sessions of a process */
	const struct kagent_config *config;
	const char *problem_path;
	const char *run_id; /* NULL: a new id from the time and random bits */
	int resume;	    /* continue run_id from its trace and git history */
	/* With resume: the run's trace records kept elsewhere (kagentd's store; borrowed, may be
	 * NULL), from which the trace, variants and branches are rebuilt where the run's trace
	 * is not on this machine; none at all (an empty array): the run starts afresh here
	 * under its id. */
	const json_t *trace_records;
	const char *gpu_name; /* for the prompt; NULL when unknown */
	/* The kagent binary whose `kagent worker` keeps torch warm for the run's evaluations;
	 * NULL: each evaluation starts a worker of its own. */
	const char *worker_executable;
	/* Called with every trace record as it is written (borrowed), e.g. for the terminal view.
	 */
	void (*observer)(const json_t *record, void *data);
	/* Called once when the run ends; the summary is the `final` record's fields (borrowed). */
	void (*done)(struct kagent_session *session, int status, const json_t *summary, void *data);
	void *data;
};

/*
 * Creates the session: repository, worktree, trace, prompts, and (with resume)
 * the conversation rebuilt from the trace. Returns 0 or a negative errno with
 * *cause set (bad problem file, bad run id, unreadable trace, prompts missing).
 */
int kagent_session_create(const struct kagent_session_options *options,
			  struct kagent_session **session_out, char **cause);
/*
 * Checks the problem on the run's worker (kagent_evaluation_check_problem), then starts the loop
 * of turns; done runs later, from the loop. A problem that cannot be used ends the run before
 * its first request, with stop reason "bad_problem" (a failed check for another reason:
 * "evaluator_error").
 */
void kagent_session_start(struct kagent_session *session);
/* Stops at the next safe point (stop reason "interrupted"): cancels the model call in flight. */
void kagent_session_interrupt(struct kagent_session *session);
/* After done. */
void kagent_session_free(struct kagent_session *session);

const char *kagent_session_run_id(const struct kagent_session *session);
const char *kagent_session_trace_path(const struct kagent_session *session);
const struct kagent_config *kagent_session_config(const struct kagent_session *session);

#endif
