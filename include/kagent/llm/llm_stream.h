/*
 * Accumulates one streamed model reply into a provider-neutral result: text,
 * reasoning, tool calls, finish reason, token usage, and the reasoning state the
 * provider wants back in the next request. It knows three wire
 * formats (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages) and
 * takes their server-sent events one at a time, as agent/llm/sse.c delivers them;
 * it does no I/O, so the HTTP half can be tested apart. docs/llm-streams.md
 * describes the formats and the result.
 */
#ifndef KAGENT_LLM_STREAM_H
#define KAGENT_LLM_STREAM_H

#include <jansson.h>
#include <stddef.h>

#include "kagent/llm/provider.h"
#include "kagent/llm/sse.h"

/* Caps on what the model (the peer) controls. */
#define KAGENT_LLM_STREAM_TEXT_CAP ((size_t)16 << 20)	  /* text, and reasoning, each */
#define KAGENT_LLM_STREAM_ARGUMENTS_CAP ((size_t)8 << 20) /* one tool call's arguments */
#define KAGENT_LLM_STREAM_TOOL_CALL_CAP 256		  /* tool calls in one reply */
#define KAGENT_LLM_STREAM_NAME_CAP 1024			  /* a tool call's id or name */
/* The provider state of one reply (see provider_state below): its bytes, and its pieces. */
#define KAGENT_LLM_STREAM_STATE_CAP ((size_t)16 << 20)
#define KAGENT_LLM_STREAM_STATE_PART_CAP 256

enum kagent_llm_error {
	KAGENT_LLM_ERROR_NONE,
	/* The provider reported an error inside the stream (HTTP status was 200). */
	KAGENT_LLM_ERROR_PROVIDER,
	/* The provider is overloaded (Anthropic overloaded_error): worth a retry. */
	KAGENT_LLM_ERROR_OVERLOADED,
	/* An event was not the JSON the format promises. */
	KAGENT_LLM_ERROR_PROTOCOL,
	/* A cap was passed (text, arguments, number of tool calls, provider state). */
	KAGENT_LLM_ERROR_TOO_LARGE,
	/* The stream ended before its terminal event. */
	KAGENT_LLM_ERROR_TRUNCATED,
};

/* Why the model stopped, normalized; the provider's own word is in finish_reason. */
enum kagent_llm_finish {
	KAGENT_LLM_FINISH_UNKNOWN,
	KAGENT_LLM_FINISH_STOP,
	KAGENT_LLM_FINISH_TOOL_CALLS,
	KAGENT_LLM_FINISH_LENGTH,
	KAGENT_LLM_FINISH_CONTENT_FILTER,
};

struct kagent_llm_tool_call {
	char *id;   /* "" when the provider gave none */
	char *name; /* "" when the provider gave none */
	/* The arguments as one JSON text, as received ("{}" when the model sent none). */
	char *arguments;
	/* The parsed arguments (a JSON object), or NULL when parse_error is set. */
	json_t *arguments_json;
	/* Why the arguments are unusable, worded for the model; NULL when they parsed. */
	char *parse_error;
};

struct kagent_llm_usage {
	/* -1 when the provider did not say. input counts cached tokens too, in every format. */
	long long input_tokens;
	long long output_tokens;
	long long cached_tokens;
};

struct kagent_llm_result {
	enum kagent_llm_format format;
	char *text;	 /* never NULL */
	char *reasoning; /* never NULL; "" when the model gave none */
	struct kagent_llm_tool_call *tool_calls;
	size_t tool_call_count;
	enum kagent_llm_finish finish;
	char *finish_reason; /* the provider's word; "" when none came */
	struct kagent_llm_usage usage;
	char *response_id; /* "" when none came */
	char *model;	   /* "" when none came */
	/*
	 * What the provider needs back, unchanged, to keep the model's reasoning across turns;
	 * NULL when the reply had none. Responses: {"format": "responses", "items": [...]}, each
	 * reasoning output item whole as output_item.done gave it (id, summary,
	 * encrypted_content...), in output order. Anthropic: {"format": "anthropic", "blocks":
	 * [...]}, the thinking blocks ({"type": "thinking", "thinking", "signature"}) and
	 * redacted_thinking blocks ({"type": "redacted_thinking", "data"}) in block order.
	 * kagent_llm_request_assistant_message keeps it in the neutral message.
	 */
	json_t *provider_state;
	enum kagent_llm_error error;
	char *error_type;    /* the provider's error type or code; "" otherwise */
	char *error_message; /* NULL when error is KAGENT_LLM_ERROR_NONE */
};

struct kagent_llm_stream;

struct kagent_llm_stream *kagent_llm_stream_create(enum kagent_llm_format format);
/*
 * Takes one server-sent event (name as sent; NULL means "message"). Returns 0,
 * or once the stream has failed a negative errno: -EREMOTEIO (provider error),
 * -EBUSY (overloaded), -EBADMSG (protocol), -EMSGSIZE (a cap); *cause says why.
 * Events after the terminal one are ignored.
 */
int kagent_llm_stream_event(struct kagent_llm_stream *stream, const char *name, const char *data,
			    size_t length, char **cause);
/* The same, shaped as an SSE callback: pass the stream as the parser's argument. */
int kagent_llm_stream_on_sse_event(void *stream, const struct kagent_sse_event *event,
				   char **cause);
/* 1 once the format's terminal event (or an error) has arrived. */
int kagent_llm_stream_is_done(const struct kagent_llm_stream *stream);
/*
 * Ends the stream: parses each tool call's arguments and hands the result over
 * in *result_out, always, even on failure (a partial reply with its error set).
 * Returns 0, -EPIPE when the terminal event never came (KAGENT_LLM_ERROR_TRUNCATED),
 * or the error the stream already had. Malformed tool-call arguments are not a
 * failure: that call gets a parse_error. Call it once.
 */
int kagent_llm_stream_finish(struct kagent_llm_stream *stream,
			     struct kagent_llm_result **result_out, char **cause);
void kagent_llm_stream_free(struct kagent_llm_stream *stream);
void kagent_llm_result_free(struct kagent_llm_result *result);

const char *kagent_llm_error_name(enum kagent_llm_error error);
const char *kagent_llm_finish_name(enum kagent_llm_finish finish);

#endif
