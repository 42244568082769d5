/*
 * The request for one model turn in each wire format (see include/kagent/llm/llm_request.h).
 * Every message of the neutral conversation is read and checked once (role, fields,
 * tool-call ids), then written in the format's own shape. Nothing here does I/O.
 */
#include "kagent/llm/llm_request.h"

#include "kagent/base/alloc.h"

#include <stdlib.h>
#include <string.h>

#define ANTHROPIC_VERSION "2023-06-01"

enum llm_request__role {
	LLM_REQUEST_USER,
	LLM_REQUEST_ASSISTANT,
	LLM_REQUEST_TOOL,
};

/* One neutral message, checked; the pointers borrow from the conversation. */
struct llm_request__message {
	enum llm_request__role role;
	const char *content;	  /* NULL: an assistant message with no text */
	const json_t *tool_calls; /* assistant: an array (possibly empty), else NULL */
	/* assistant: provider_state's items or blocks for this format, else NULL */
	const json_t *provider_parts;
	const char *tool_call_id; /* tool */
	int is_error;		  /* tool */
};

/* A tool call's arguments text; "{}" when the message has none. */
static const char *
llm_request__arguments(const json_t *call)
{
	const char *arguments = json_string_value(json_object_get(call, "arguments"));

	return arguments != NULL ? arguments : "{}";
}

static int
llm_request__nonempty_string(const json_t *value)
{
	return json_is_string(value) && json_string_length(value) > 0;
}

/* Checks an assistant message's tool calls and records their ids in known_ids. */
static int
llm_request__read_tool_calls(const json_t *tool_calls, size_t index, json_t *known_ids,
			     char **cause)
{
	const json_t *call;
	size_t i;

	if (!json_is_array(tool_calls)) {
		*cause = kagent_asprintf("messages[%zu]: \"tool_calls\" is not an array", index);
		return -1;
	}
	json_array_foreach(tool_calls, i, call)
	{
		const json_t *arguments = json_object_get(call, "arguments");

		if (!llm_request__nonempty_string(json_object_get(call, "id")) ||
		    !llm_request__nonempty_string(json_object_get(call, "name"))) {
			*cause = kagent_asprintf("messages[%zu].tool_calls[%zu]: a tool call needs "
						 "a non-empty \"id\" and \"name\"",
						 index, i);
			return -1;
		}
		if (arguments != NULL && !json_is_string(arguments)) {
			*cause = kagent_asprintf("messages[%zu].tool_calls[%zu]: \"arguments\" "
						 "must be the JSON text, as a string",
						 index, i);
			return -1;
		}
		json_object_set_new(known_ids, json_string_value(json_object_get(call, "id")),
				    json_true());
	}
	return 0;
}

/* Checks an assistant message's provider_state and finds what it carries back to the request's
 * format: Responses items or Anthropic blocks. State of another format means nothing there. */
static int
llm_request__read_provider_state(const json_t *state, size_t index, enum kagent_llm_format format,
				 const json_t **parts_out, char **cause)
{
	const char *state_format = json_string_value(json_object_get(state, "format"));
	const char *key = format == KAGENT_LLM_FORMAT_RESPONSES	  ? "items"
			  : format == KAGENT_LLM_FORMAT_ANTHROPIC ? "blocks"
								  : NULL;
	const json_t *parts, *part;
	size_t i;

	*parts_out = NULL;
	if (!json_is_object(state) || state_format == NULL) {
		*cause = kagent_asprintf("messages[%zu]: \"provider_state\" must be an object "
					 "with a string \"format\"",
					 index);
		return -1;
	}
	if (key == NULL || strcmp(state_format, kagent_llm_format_name(format)) != 0)
		return 0;
	parts = json_object_get(state, key);
	json_array_foreach(parts, i, part)
	{
		if (!json_is_string(json_object_get(part, "type")))
			break;
	}
	if (!json_is_array(parts) || i < json_array_size(parts)) {
		*cause = kagent_asprintf("messages[%zu]: \"provider_state\" of format %s needs "
					 "\"%s\", an array of objects with a \"type\"",
					 index, state_format, key);
		return -1;
	}
	*parts_out = parts;
	return 0;
}

/* Reads and checks message number index; tool results must answer an earlier call. */
static int
llm_request__read_message(const json_t *message, size_t index, enum kagent_llm_format format,
			  json_t *known_ids, struct llm_request__message *out, char **cause)
{
	const char *role = json_string_value(json_object_get(message, "role"));
	const json_t *content = json_object_get(message, "content");
	const json_t *tool_calls = json_object_get(message, "tool_calls");
	const json_t *provider_state = json_object_get(message, "provider_state");
	int result = -1;

	memset(out, 0, sizeof *out);
	if (!json_is_object(message) || role == NULL) {
		*cause = kagent_asprintf("messages[%zu]: not an object with a \"role\"", index);
		goto out;
	}
	out->content = json_string_value(content);
	if (strcmp(role, "user") == 0) {
		out->role = LLM_REQUEST_USER;
		if (out->content == NULL) {
			*cause = kagent_asprintf("messages[%zu]: a user message needs a string "
						 "\"content\"",
						 index);
			goto out;
		}
	} else if (strcmp(role, "assistant") == 0) {
		out->role = LLM_REQUEST_ASSISTANT;
		if (content != NULL && !json_is_null(content) && out->content == NULL) {
			*cause = kagent_asprintf("messages[%zu]: an assistant message's "
						 "\"content\" must be a string or null",
						 index);
			goto out;
		}
		if (tool_calls != NULL) {
			if (llm_request__read_tool_calls(tool_calls, index, known_ids, cause) < 0)
				goto out;
			out->tool_calls = tool_calls;
		}
		if (provider_state != NULL &&
		    llm_request__read_provider_state(provider_state, index, format,
						     &out->provider_parts, cause) < 0)
			goto out;
	} else if (strcmp(role, "tool") == 0) {
		out->role = LLM_REQUEST_TOOL;
		out->tool_call_id = json_string_value(json_object_get(message, "tool_call_id"));
		out->is_error = json_is_true(json_object_get(message, "is_error"));
		if (out->tool_call_id == NULL || out->content == NULL) {
			*cause = kagent_asprintf("messages[%zu]: a tool message needs a string "
						 "\"tool_call_id\" and \"content\"",
						 index);
			goto out;
		}
		if (json_object_get(known_ids, out->tool_call_id) == NULL) {
			*cause = kagent_asprintf("messages[%zu]: tool result for \"%.200s\", which "
						 "no earlier assistant message called",
						 index, out->tool_call_id);
			goto out;
		}
	} else {
		*cause = kagent_asprintf("messages[%zu]: unknown role \"%.64s\" (expected user, "
					 "assistant or tool)",
					 index, role);
		goto out;
	}
	result = 0;
out:
	return result;
}

/* ---- OpenAI Chat Completions ---- */

static json_t *
llm_request__chat_message(const struct llm_request__message *message)
{
	const json_t *call;
	json_t *calls;
	size_t i;

	switch (message->role) {
	case LLM_REQUEST_USER:
		return json_pack("{s:s, s:s}", "role", "user", "content", message->content);
	case LLM_REQUEST_TOOL:
		return json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id",
				 message->tool_call_id, "content", message->content);
	case LLM_REQUEST_ASSISTANT:
		break;
	}
	if (json_array_size(message->tool_calls) == 0)
		return json_pack("{s:s, s:s}", "role", "assistant", "content",
				 message->content != NULL ? message->content : "");
	calls = json_array();
	json_array_foreach(message->tool_calls, i, call)
	{
		json_array_append_new(calls,
				      json_pack("{s:O, s:s, s:{s:O, s:s}}", "id",
						json_object_get(call, "id"), "type", "function",
						"function", "name", json_object_get(call, "name"),
						"arguments", llm_request__arguments(call)));
	}
	/* Text next to tool calls is optional there; null is what the SDKs send for none. */
	return json_pack("{s:s, s:o, s:o}", "role", "assistant", "content",
			 message->content != NULL && message->content[0] != '\0'
			     ? json_string(message->content)
			     : json_null(),
			 "tool_calls", calls);
}

static json_t *
llm_request__chat_tool(const json_t *tool)
{
	return json_pack("{s:s, s:{s:O, s:O, s:O}}", "type", "function", "function", "name",
			 json_object_get(tool, "name"), "description",
			 json_object_get(tool, "description"), "parameters",
			 json_object_get(tool, "parameters"));
}

/* ---- OpenAI Responses ---- */

static void
llm_request__responses_append_items(json_t *input, const struct llm_request__message *message)
{
	const json_t *call, *item;
	size_t i;

	switch (message->role) {
	case LLM_REQUEST_USER:
		json_array_append_new(
		    input, json_pack("{s:s, s:s}", "role", "user", "content", message->content));
		return;
	case LLM_REQUEST_TOOL:
		json_array_append_new(
		    input, json_pack("{s:s, s:s, s:s}", "type", "function_call_output", "call_id",
				     message->tool_call_id, "output", message->content));
		return;
	case LLM_REQUEST_ASSISTANT:
		break;
	}
	/* The turn's reasoning first, where the model put it. With store false a reasoning item
	 * without its encrypted_content would name an item the server did not keep (a 404). */
	json_array_foreach(message->provider_parts, i, item)
	{
		if (strcmp(json_string_value(json_object_get(item, "type")), "reasoning") != 0 ||
		    json_is_string(json_object_get(item, "encrypted_content")))
			json_array_append(input, (json_t *)item);
	}
	if (message->content != NULL && message->content[0] != '\0')
		json_array_append_new(input, json_pack("{s:s, s:s}", "role", "assistant", "content",
						       message->content));
	json_array_foreach(message->tool_calls, i, call)
	{
		json_array_append_new(input,
				      json_pack("{s:s, s:O, s:O, s:s}", "type", "function_call",
						"call_id", json_object_get(call, "id"), "name",
						json_object_get(call, "name"), "arguments",
						llm_request__arguments(call)));
	}
}

static json_t *
llm_request__responses_tool(const json_t *tool)
{
	/* strict defaults to true there, which refuses schemas with optional properties. */
	return json_pack("{s:s, s:O, s:O, s:O, s:b}", "type", "function", "name",
			 json_object_get(tool, "name"), "description",
			 json_object_get(tool, "description"), "parameters",
			 json_object_get(tool, "parameters"), "strict", 0);
}

/* ---- Anthropic Messages ---- */

/* The content blocks of the last message when it is the user's, else of a new user message:
 * Anthropic wants roles to alternate, so tool results and a following text share one. */
static json_t *
llm_request__anthropic_user_blocks(json_t *messages)
{
	size_t count = json_array_size(messages);
	json_t *last = count > 0 ? json_array_get(messages, count - 1) : NULL;
	json_t *blocks;

	if (last != NULL && strcmp(json_string_value(json_object_get(last, "role")), "user") == 0)
		return json_object_get(last, "content");
	blocks = json_array();
	json_array_append_new(messages, json_pack("{s:s, s:o}", "role", "user", "content", blocks));
	return blocks;
}

/* Parsed arguments for tool_use.input, which must be an object: {} when they are not one. */
static json_t *
llm_request__anthropic_input(const json_t *call)
{
	json_t *input = json_loads(llm_request__arguments(call), 0, NULL);

	if (!json_is_object(input)) {
		json_decref(input);
		input = json_object();
	}
	return input;
}

static void
llm_request__anthropic_append(json_t *messages, const struct llm_request__message *message)
{
	json_t *blocks, *block;
	const json_t *call, *part;
	size_t i, first_other;

	switch (message->role) {
	case LLM_REQUEST_USER:
		/* Anthropic refuses empty text blocks. */
		if (message->content[0] != '\0')
			json_array_append_new(
			    llm_request__anthropic_user_blocks(messages),
			    json_pack("{s:s, s:s}", "type", "text", "text", message->content));
		return;
	case LLM_REQUEST_TOOL:
		blocks = llm_request__anthropic_user_blocks(messages);
		/* tool_result blocks must come before any text in their message. */
		first_other = 0;
		json_array_foreach(blocks, i, block)
		{
			if (strcmp(json_string_value(json_object_get(block, "type")),
				   "tool_result") == 0)
				first_other = i + 1;
		}
		json_array_insert_new(blocks, first_other,
				      json_pack("{s:s, s:s, s:s, s:b}", "type", "tool_result",
						"tool_use_id", message->tool_call_id, "content",
						message->content, "is_error", message->is_error));
		return;
	case LLM_REQUEST_ASSISTANT:
		break;
	}
	blocks = json_array();
	if (message->content != NULL && message->content[0] != '\0')
		json_array_append_new(
		    blocks, json_pack("{s:s, s:s}", "type", "text", "text", message->content));
	json_array_foreach(message->tool_calls, i, call)
	{
		json_array_append_new(blocks, json_pack("{s:s, s:O, s:O, s:o}", "type", "tool_use",
							"id", json_object_get(call, "id"), "name",
							json_object_get(call, "name"), "input",
							llm_request__anthropic_input(call)));
	}
	/* An assistant turn with nothing in it cannot be sent (empty content is refused);
	 * dropping it lets the user messages around it merge, keeping the roles alternating.
	 * Its thinking alone would not matter: only a tool-using turn's thinking is read. */
	if (json_array_size(blocks) == 0) {
		json_decref(blocks);
		return;
	}
	/* Thinking and redacted_thinking blocks go back unchanged, before the rest. */
	json_array_foreach(message->provider_parts, i, part)
	{
		json_array_insert(blocks, i, (json_t *)part);
	}
	json_array_append_new(messages,
			      json_pack("{s:s, s:o}", "role", "assistant", "content", blocks));
}

static json_t *
llm_request__anthropic_tool(const json_t *tool)
{
	return json_pack("{s:O, s:O, s:O}", "name", json_object_get(tool, "name"), "description",
			 json_object_get(tool, "description"), "input_schema",
			 json_object_get(tool, "parameters"));
}

/* ---- The body ---- */

/* Checks the tools and fills a missing description or schema, so each format can copy them. */
static json_t *
llm_request__read_tools(const json_t *tools, char **cause)
{
	json_t *checked = json_array();
	const json_t *tool;
	size_t i;

	if (tools != NULL && !json_is_array(tools)) {
		*cause = kagent_strdup("the tools are not a JSON array");
		goto failed;
	}
	json_array_foreach(tools, i, tool)
	{
		json_t *description = json_object_get(tool, "description");
		json_t *parameters = json_object_get(tool, "parameters");

		if (!llm_request__nonempty_string(json_object_get(tool, "name")) ||
		    (description != NULL && !json_is_string(description)) ||
		    (parameters != NULL && !json_is_object(parameters))) {
			*cause = kagent_asprintf("tools[%zu]: a tool needs a \"name\", a string "
						 "\"description\" and an object \"parameters\"",
						 i);
			goto failed;
		}
		json_array_append_new(
		    checked, json_pack("{s:O, s:O*, s:O*}", "name", json_object_get(tool, "name"),
				       "description", description, "parameters", parameters));
		if (description == NULL)
			json_object_set_new(json_array_get(checked, i), "description",
					    json_string(""));
		if (parameters == NULL)
			json_object_set_new(
			    json_array_get(checked, i), "parameters",
			    json_pack("{s:s, s:{}}", "type", "object", "properties"));
	}
	return checked;
failed:
	json_decref(checked);
	return NULL;
}

/* NULL counts as valid (not sent). */
static int
llm_request__is_utf8(const char *text)
{
	json_t *string = text != NULL ? json_string(text) : NULL;

	json_decref(string);
	return text == NULL || string != NULL;
}

/* temperature and top_p, each only when configured (a negative value means unset). */
static void
llm_request__set_sampling(json_t *body, const struct kagent_provider_config *provider)
{
	if (provider->temperature >= 0)
		json_object_set_new(body, "temperature", json_real(provider->temperature));
	if (provider->top_p >= 0)
		json_object_set_new(body, "top_p", json_real(provider->top_p));
}

static json_t *
llm_request__start_body(const struct kagent_llm_request *request)
{
	const struct kagent_provider_config *provider = request->provider;
	const char *system = request->system != NULL ? request->system : "";
	json_t *body = json_pack("{s:s}", "model", provider->model);

	switch (provider->format) {
	case KAGENT_LLM_FORMAT_CHAT_COMPLETIONS:
		json_object_set_new(body, "messages", json_array());
		if (system[0] != '\0')
			json_array_append_new(
			    json_object_get(body, "messages"),
			    json_pack("{s:s, s:s}", "role", "system", "content", system));
		json_object_set_new(body, "stream", json_true());
		json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1));
		if (provider->max_output_tokens > 0)
			json_object_set_new(body, "max_completion_tokens",
					    json_integer(provider->max_output_tokens));
		if (provider->reasoning_effort != NULL)
			json_object_set_new(body, "reasoning_effort",
					    json_string(provider->reasoning_effort));
		break;
	case KAGENT_LLM_FORMAT_RESPONSES:
		if (system[0] != '\0')
			json_object_set_new(body, "instructions", json_string(system));
		json_object_set_new(body, "input", json_array());
		json_object_set_new(body, "stream", json_true());
		/* Nothing is kept on the provider's side: each request carries the whole turn. */
		json_object_set_new(body, "store", json_false());
		if (provider->max_output_tokens > 0)
			json_object_set_new(body, "max_output_tokens",
					    json_integer(provider->max_output_tokens));
		/* A reasoning model: its reasoning items come back encrypted, for the next
		 * request to carry (see llm_request__responses_append_items). */
		if (provider->reasoning_effort != NULL) {
			json_object_set_new(
			    body, "reasoning",
			    json_pack("{s:s}", "effort", provider->reasoning_effort));
			json_object_set_new(body, "include",
					    json_pack("[s]", "reasoning.encrypted_content"));
		}
		break;
	case KAGENT_LLM_FORMAT_ANTHROPIC:
		if (system[0] != '\0')
			json_object_set_new(body, "system", json_string(system));
		json_object_set_new(body, "max_tokens",
				    json_integer(provider->max_output_tokens > 0
						     ? provider->max_output_tokens
						     : KAGENT_PROVIDER_ANTHROPIC_MAX_TOKENS));
		json_object_set_new(body, "stream", json_true());
		json_object_set_new(body, "messages", json_array());
		if (provider->thinking_budget_tokens > 0)
			json_object_set_new(
			    body, "thinking",
			    json_pack("{s:s, s:I}", "type", "enabled", "budget_tokens",
				      (json_int_t)provider->thinking_budget_tokens));
		break;
	}
	llm_request__set_sampling(body, provider);
	return body;
}

json_t *
kagent_llm_request_body(const struct kagent_llm_request *request, char **cause)
{
	const struct kagent_provider_config *provider = request->provider;
	json_t *known_ids = json_object();
	json_t *body = NULL, *tools = NULL, *list, *tool;
	const json_t *message;
	struct llm_request__message checked;
	size_t i;

	if (provider->model == NULL || provider->model[0] == '\0') {
		*cause = kagent_strdup("no model is configured (set provider.model)");
		goto failed;
	}
	/* JSON strings must be UTF-8; these come from files, not from JSON. */
	if (!llm_request__is_utf8(provider->model) || !llm_request__is_utf8(request->system) ||
	    !llm_request__is_utf8(provider->reasoning_effort)) {
		*cause = kagent_strdup("the model name, the reasoning effort or the system prompt "
				       "is not valid UTF-8");
		goto failed;
	}
	if (!json_is_array(request->messages)) {
		*cause = kagent_strdup("the conversation is not a JSON array of messages");
		goto failed;
	}
	if ((tools = llm_request__read_tools(request->tools, cause)) == NULL)
		goto failed;
	body = llm_request__start_body(request);
	list = json_object_get(body, provider->format == KAGENT_LLM_FORMAT_RESPONSES ? "input"
										     : "messages");
	json_array_foreach(request->messages, i, message)
	{
		if (llm_request__read_message(message, i, provider->format, known_ids, &checked,
					      cause) < 0)
			goto failed;
		switch (provider->format) {
		case KAGENT_LLM_FORMAT_CHAT_COMPLETIONS:
			json_array_append_new(list, llm_request__chat_message(&checked));
			break;
		case KAGENT_LLM_FORMAT_RESPONSES:
			llm_request__responses_append_items(list, &checked);
			break;
		case KAGENT_LLM_FORMAT_ANTHROPIC:
			llm_request__anthropic_append(list, &checked);
			break;
		}
	}
	if (json_array_size(tools) > 0) {
		list = json_array();
		json_array_foreach(tools, i, tool)
		{
			json_array_append_new(list,
					      provider->format == KAGENT_LLM_FORMAT_CHAT_COMPLETIONS
						  ? llm_request__chat_tool(tool)
					      : provider->format == KAGENT_LLM_FORMAT_RESPONSES
						  ? llm_request__responses_tool(tool)
						  : llm_request__anthropic_tool(tool));
		}
		json_object_set_new(body, "tools", list);
	}
	json_decref(tools);
	json_decref(known_ids);
	return body;
failed:
	json_decref(body);
	json_decref(tools);
	json_decref(known_ids);
	return NULL;
}

/* ---- URL, headers, the assistant message ---- */

char *
kagent_llm_request_url(const struct kagent_provider_config *provider)
{
	const char *base = provider->base_url;
	size_t length;

	if (base == NULL)
		return NULL;
	length = strlen(base);
	while (length > 0 && base[length - 1] == '/')
		length--;
	switch (provider->format) {
	case KAGENT_LLM_FORMAT_CHAT_COMPLETIONS:
		return kagent_asprintf("%.*s/chat/completions", (int)length, base);
	case KAGENT_LLM_FORMAT_RESPONSES:
		return kagent_asprintf("%.*s/responses", (int)length, base);
	case KAGENT_LLM_FORMAT_ANTHROPIC:
		/* The SDK's base URL has no /v1, but OpenAI-style ones written by hand do. */
		if (length >= 3 && memcmp(base + length - 3, "/v1", 3) == 0)
			return kagent_asprintf("%.*s/messages", (int)length, base);
		return kagent_asprintf("%.*s/v1/messages", (int)length, base);
	}
	return NULL;
}

char **
kagent_llm_request_headers(const struct kagent_provider_config *provider)
{
	char **headers = kagent_calloc(6, sizeof *headers);
	int has_key = provider->api_key != NULL && provider->api_key[0] != '\0';
	size_t count = 0;

	headers[count++] = kagent_strdup("Content-Type: application/json");
	headers[count++] = kagent_strdup("Accept: text/event-stream");
	if (provider->format == KAGENT_LLM_FORMAT_ANTHROPIC) {
		headers[count++] = kagent_strdup("anthropic-version: " ANTHROPIC_VERSION);
		if (has_key)
			headers[count++] = kagent_asprintf("x-api-key: %s", provider->api_key);
	} else if (has_key) {
		headers[count++] = kagent_asprintf("Authorization: Bearer %s", provider->api_key);
	}
	return headers;
}

void
kagent_llm_request_headers_free(char **headers)
{
	if (headers == NULL)
		return;
	for (size_t i = 0; headers[i] != NULL; i++) {
		/* One of them holds the key: leave no copy of it in freed memory. */
		explicit_bzero(headers[i], strlen(headers[i]));
		free(headers[i]);
	}
	free(headers);
}

json_t *
kagent_llm_request_assistant_message(const struct kagent_llm_result *result)
{
	json_t *message = json_pack("{s:s, s:s}", "role", "assistant", "content", result->text);
	json_t *calls;

	if (result->reasoning[0] != '\0')
		json_object_set_new(message, "reasoning", json_string(result->reasoning));
	if (result->provider_state != NULL)
		json_object_set(message, "provider_state", result->provider_state);
	if (result->tool_call_count == 0)
		return message;
	calls = json_array();
	for (size_t i = 0; i < result->tool_call_count; i++) {
		const struct kagent_llm_tool_call *call = &result->tool_calls[i];

		/* The text as received, even when it did not parse: the model sees what it sent. */
		json_array_append_new(calls, json_pack("{s:s, s:s, s:s}", "id", call->id, "name",
						       call->name, "arguments", call->arguments));
	}
	json_object_set_new(message, "tool_calls", calls);
	return message;
}
