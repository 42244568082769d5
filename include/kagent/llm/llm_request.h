/*
 * Builds the HTTP request for one model turn from kagent's provider-neutral
 * conversation, in each of the three wire formats (OpenAI Chat Completions,
 * OpenAI Responses, Anthropic Messages): URL, headers and JSON body, always
 * streamed. docs/llm-streams.md describes the formats.
 *
 * The conversation is held in the session's wire format as compact JSON text, each message
 * written once when it is added; a request's body is those texts with the system prompt and
 * the tool definitions (one text for all sessions with equal definitions) around them, read
 * in place when it is sent, so that a session waiting on its model holds no copy of its
 * conversation and no turn re-encodes the earlier ones.
 *
 * The conversation is a JSON array of messages, the same for every provider:
 *   {"role": "user", "content": "text"}
 *   {"role": "assistant", "content": "text", "reasoning": "text",
 *    "tool_calls": [{"id": "...", "name": "...", "arguments": "JSON text"}],
 *    "provider_state": {"format": "responses", "items": [...]}
 *                   or {"format": "anthropic", "blocks": [...]}}
 *   {"role": "tool", "tool_call_id": "...", "name": "...", "content": "text",
 *    "is_error": false}
 * provider_state is what the reply's provider needs back to keep the model's reasoning (see
 * struct kagent_llm_result); it is sent back only to that same format (reasoning items before
 * the turn's text and function calls, thinking blocks first in the turn's content) and
 * ignored by the others. The "reasoning" text is never sent back.
 * Tools are a JSON array of {"name", "description", "parameters" (a JSON schema)}.
 */
#ifndef KAGENT_LLM_REQUEST_H
#define KAGENT_LLM_REQUEST_H

#include <jansson.h>
#include <stdint.h>

#include "kagent/llm/provider.h"
#include "kagent/llm/llm_stream.h"

/* The system prompt and the messages, in one wire format. */
struct kagent_llm_conversation;

/* system may be NULL or empty (none). One that is not valid UTF-8 is the conversation's error
 * (see kagent_llm_conversation_add). */
struct kagent_llm_conversation *kagent_llm_conversation_create(enum kagent_llm_format format,
							       const char *system);
void kagent_llm_conversation_free(struct kagent_llm_conversation *conversation);
/*
 * Adds a message in the neutral form above, checked and written in the format's shape. A
 * message the format cannot carry (an unknown role, a tool result without its call) returns
 * -EINVAL with *cause set (naming it "messages[N]"), and the conversation keeps the first
 * such error: every body built from it fails with it, as the request it would have been.
 */
int kagent_llm_conversation_add(struct kagent_llm_conversation *conversation, const json_t *message,
				char **cause);

struct kagent_llm_request {
	const struct kagent_provider_config *provider;
	const struct kagent_llm_conversation *conversation; /* in the provider's format */
	const json_t *tools;				    /* may be NULL or empty */
};

/*
 * One request's JSON body. It reads the conversation in place: the conversation must not
 * change (nor be freed) while the body lives. Its members are in an order of their own, the
 * message list ("messages", or the Responses API's "input") and the tools last.
 */
struct kagent_llm_body;

/* The URL: base_url joined with /chat/completions, /responses or /v1/messages. The caller frees
 * it. */
char *kagent_llm_request_url(const struct kagent_provider_config *provider);
/*
 * The headers as NULL-terminated "Name: value" lines (content type, accept,
 * authorization or x-api-key with anthropic-version). Free with
 * kagent_llm_request_headers_free. The key appears only here.
 */
char **kagent_llm_request_headers(const struct kagent_provider_config *provider);
void kagent_llm_request_headers_free(char **headers);
/* The body, or an error (no model, bad tools, the conversation's error): returns 0 or -EINVAL
 * with *cause set. */
int kagent_llm_body_build(const struct kagent_llm_request *request,
			  struct kagent_llm_body **body_out, char **cause);
void kagent_llm_body_free(struct kagent_llm_body *body);
/* Its length in bytes, and up to size of its bytes from offset on (how many were copied). Reads
 * in order find their place at once. */
size_t kagent_llm_body_length(const struct kagent_llm_body *body);
size_t kagent_llm_body_read(struct kagent_llm_body *body, size_t offset, char *buffer, size_t size);
/* How many items its message list has, and a hash of item index's text (equal items hash
 * alike; different ones collide with a chance of about 2^-64). */
size_t kagent_llm_body_item_count(const struct kagent_llm_body *body);
uint64_t kagent_llm_body_item_hash(const struct kagent_llm_body *body, size_t index);
/* The body as JSON, with its message list from item first on (0: the whole body). The caller
 * releases it. */
json_t *kagent_llm_body_json(const struct kagent_llm_body *body, size_t first);
/* The assistant message in the neutral form above, from a finished reply. The caller releases it.
 */
json_t *kagent_llm_request_assistant_message(const struct kagent_llm_result *result);

#endif
