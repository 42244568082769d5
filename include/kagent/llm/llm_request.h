/*
 * Builds the HTTP request for one model turn from kagent's provider-neutral
 * conversation, in each of the three wire formats (OpenAI Chat Completions,
 * OpenAI Responses, Anthropic Messages): URL, headers and JSON body, always
 * streamed. docs/llm-streams.md describes the formats.
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

#include "kagent/llm/provider.h"
#include "kagent/llm/llm_stream.h"

struct kagent_llm_request {
	const struct kagent_provider_config *provider;
	const char *system;	/* the system prompt */
	const json_t *messages; /* the conversation, as above */
	const json_t *tools;	/* may be NULL or empty */
};

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
/*
 * The JSON body. A message the format cannot carry (an unknown role, a tool
 * result without its call) is an error: returns NULL with *cause set. The
 * caller releases the body.
 */
json_t *kagent_llm_request_body(const struct kagent_llm_request *request, char **cause);
/* The assistant message in the neutral form above, from a finished reply. The caller releases it.
 */
json_t *kagent_llm_request_assistant_message(const struct kagent_llm_result *result);

#endif
