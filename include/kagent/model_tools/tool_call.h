/*
 * A tool the model calls and one call of it: name, a JSON schema of the parameters, and a
 * handler that starts the work and completes the call once, possibly later from the loop,
 * with one text result for the model and one JSON object for the trace
 * (agent/model_tools/tool_call.c checks and ends each call). One file per tool
 * (agent/model_tools/tool_NAME.c), collected in the table of tool_table.h. The descriptions
 * the model reads are prompts/tools/NAME.md.
 *
 * A tool knows the run it serves only through the host its call carries
 * (struct kagent_tool_host), which the run's owner (the session) fills.
 */
#ifndef KAGENT_TOOL_CALL_H
#define KAGENT_TOOL_CALL_H

#include <jansson.h>
#include <stdio.h>
#include <uv.h>

#include "kagent/records/variants.h"

/*
 * What the tools may use of the run: its loop, its problem, its variants, and
 * the functions below, each called with data. Everything is borrowed and
 * outlives the calls.
 */
struct kagent_tool_host {
	uv_loop_t *loop;
	const char *problem_name;
	const char *problem_source;
	struct kagent_variants *variants;
	/* The turn in progress, for the variants a tool adds. */
	int (*turn)(void *data);
	/* Evaluates a variant; the GPU time is accounted and the verdict traced. */
	kagent_variants_evaluate_function evaluate;
	/* A one-line budget reminder for tool results ("turn 3 of 40, $0.12 of $5.00, 2m of 60m").
	 */
	char *(*budget_line)(void *data);
	/* The model asked to end the run with this summary. */
	void (*request_finish)(void *data, const char *summary);
	void *data;
};

struct kagent_tool_call;

typedef void (*kagent_tool_done)(struct kagent_tool_call *call, void *data);

struct kagent_tool {
	const char *name;
	const char *parameters; /* a JSON schema, as text */
	/* Starts the call; it must end with kagent_tool_call_finish, now or later. */
	void (*run)(struct kagent_tool_call *call);
};

struct kagent_tool_call {
	const struct kagent_tool_host *host;
	const struct kagent_tool *tool;
	const char *id;
	const json_t *arguments; /* a JSON object, checked against required properties */
	/* Filled by kagent_tool_call_finish. */
	int is_error;
	char *content; /* the text the model reads */
	kagent_tool_done done;
	void *data;
	void *state; /* the tool's own, freed by the tool before finishing */
};

/*
 * Runs one call the model made: unknown tools, unparsable arguments and
 * missing or mistyped required arguments finish at once with an error the
 * model can correct. done runs exactly once.
 */
void kagent_tool_call_start(struct kagent_tool_call *call);
/* Ends a call with the text for the model (taken over). */
void kagent_tool_call_finish(struct kagent_tool_call *call, int is_error, char *content);

/* A verdict rendered by one of the text renderers (verdict.h, profile.h), as a new string. */
char *kagent_tool_render_verdict(void (*render)(const json_t *verdict, FILE *stream),
				 const json_t *verdict);
/* Argument helpers for handlers: a string argument, or NULL when absent. */
const char *kagent_tool_string_argument(const struct kagent_tool_call *call, const char *name);

#endif
