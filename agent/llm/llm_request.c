/*
 * The request for one model turn in each wire format (see include/kagent/llm/llm_request.h).
 * Every message of the neutral conversation is read and checked once (role, fields,
 * tool-call ids) when it is added, then written in the format's own shape as compact JSON
 * text, the items of the body's message list; a body is a sequence of pieces of text around
 * them, read in place. Nothing here does I/O.
 */
#include "kagent/llm/llm_request.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ANTHROPIC_VERSION "2023-06-01"
/* FNV-1a, 64 bits. */
#define LLM_REQUEST_HASH_BASIS 0xcbf29ce484222325ULL
#define LLM_REQUEST_HASH_PRIME 0x100000001b3ULL
/* The start of an Anthropic user message whose content blocks are added one at a time. */
#define LLM_REQUEST_USER_START "{\"role\":\"user\",\"content\":["
#define LLM_REQUEST_USER_END "]}"

enum llm_request__role {
	LLM_REQUEST_USER,
	LLM_REQUEST_ASSISTANT,
	LLM_REQUEST_TOOL,
};

/* One neutral message, checked; the pointers borrow from the message. */
struct llm_request__message {
	enum llm_request__role role;
	const char *content;	  /* NULL: an assistant message with no text */
	const json_t *tool_calls; /* assistant: an array (possibly empty), else NULL */
	/* assistant: provider_state's items or blocks for this format, else NULL */
	const json_t *provider_parts;
	const char *tool_call_id; /* tool */
	int is_error;		  /* tool */
};

/* One item of the body's message list, as compact JSON text. */
struct llm_request__item {
	char *text;
	size_t length;
	uint64_t hash;
	/* An Anthropic user message: where its tool_result blocks end in text, for the next one
	 * (they come before any text block). */
	size_t results_end;
};

struct kagent_llm_conversation {
	enum kagent_llm_format format;
	/* ,"instructions":"..." (Responses) or ,"system":"..." (Anthropic); "" otherwise (Chat
	 * Completions carries the system prompt as its first item). */
	char *system_field;
	const char *system_key; /* "instructions" or "system"; NULL when system_field is "" */
	struct llm_request__item *items;
	size_t item_count, item_capacity;
	/* Hashes of the tool-call ids so far: a tool result must answer one of them. */
	uint64_t *call_ids;
	size_t call_id_count, call_id_capacity;
	size_t message_count; /* neutral messages added, for the errors' "messages[N]" */
	int last_is_user;     /* Anthropic: user content joins the last item */
	char *error;	      /* the first message the format could not carry */
};

/* The tool definitions in one format, for every conversation offered the same definitions. */
struct llm_request__tools {
	int references;
	json_t *source; /* the neutral definitions they were made from (a reference) */
	enum kagent_llm_format format;
	json_t *wire;  /* the format's "tools" array, for the traces */
	char *field;   /* ,"tools":[...] as sent */
	size_t length; /* of field */
};

struct kagent_llm_body {
	const struct kagent_llm_conversation *conversation;
	struct llm_request__tools *tools; /* a reference, or NULL: no tools */
	char *head;			  /* {"model":"...",... without its closing brace */
	size_t head_length;
	const char *list_open; /* ,"messages":[ or ,"input":[ */
	size_t length;
	/* Where the last read ended: the piece, and the body offset that piece starts at. */
	size_t cursor_piece, cursor_offset;
};

/* The definitions last made in each format, handed out again while the same (shared) neutral
 * definitions are offered. Used from one loop only, as the sessions are. */
static struct llm_request__tools *llm_request__tools_cache[KAGENT_LLM_FORMAT_ANTHROPIC + 1];

static uint64_t
llm_request__hash(const char *text, size_t length)
{
	uint64_t hash = LLM_REQUEST_HASH_BASIS;

	for (size_t i = 0; i < length; i++)
		hash = (hash ^ (unsigned char)text[i]) * LLM_REQUEST_HASH_PRIME;
	return hash;
}

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

static int
llm_request__call_known(const struct kagent_llm_conversation *conversation, const char *id)
{
	uint64_t hash = llm_request__hash(id, strlen(id));

	for (size_t i = 0; i < conversation->call_id_count; i++) {
		if (conversation->call_ids[i] == hash)
			return 1;
	}
	return 0;
}

/* Checks an assistant message's tool calls. */
static int
llm_request__read_tool_calls(const json_t *tool_calls, size_t index, char **cause)
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
	}
	return 0;
}

/* Records the ids of a checked assistant message's tool calls, for the results that follow. */
static void
llm_request__remember_calls(struct kagent_llm_conversation *conversation, const json_t *tool_calls)
{
	const json_t *call;
	size_t i;

	json_array_foreach(tool_calls, i, call)
	{
		const json_t *id = json_object_get(call, "id");

		if (conversation->call_id_count == conversation->call_id_capacity) {
			conversation->call_id_capacity = 2 * conversation->call_id_capacity + 4;
			conversation->call_ids = kagent_realloc(conversation->call_ids,
								conversation->call_id_capacity *
								    sizeof *conversation->call_ids);
		}
		conversation->call_ids[conversation->call_id_count++] =
		    llm_request__hash(json_string_value(id), json_string_length(id));
	}
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

/* Reads and checks the conversation's next message; tool results must answer an earlier call.
 */
static int
llm_request__read_message(const struct kagent_llm_conversation *conversation, const json_t *message,
			  struct llm_request__message *out, char **cause)
{
	size_t index = conversation->message_count;
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
			if (llm_request__read_tool_calls(tool_calls, index, cause) < 0)
				goto out;
			out->tool_calls = tool_calls;
		}
		if (provider_state != NULL &&
		    llm_request__read_provider_state(provider_state, index, conversation->format,
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
		if (!llm_request__call_known(conversation, out->tool_call_id)) {
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

/* ---- The items ---- */

static struct llm_request__item *
llm_request__new_item(struct kagent_llm_conversation *conversation)
{
	struct llm_request__item *item;

	if (conversation->item_count == conversation->item_capacity) {
		conversation->item_capacity = 2 * conversation->item_capacity + 8;
		conversation->items = kagent_realloc(
		    conversation->items, conversation->item_capacity * sizeof *conversation->items);
	}
	item = &conversation->items[conversation->item_count++];
	memset(item, 0, sizeof *item);
	return item;
}

/* Writes value (stolen) once, as the list's next item. */
static void
llm_request__add_item(struct kagent_llm_conversation *conversation, json_t *value)
{
	struct llm_request__item *item = llm_request__new_item(conversation);

	item->text = json_dumps(value, JSON_COMPACT);
	item->length = strlen(item->text);
	item->hash = llm_request__hash(item->text, item->length);
	json_decref(value);
	conversation->last_is_user = 0;
}

/* Puts before and then after at position of the item's text. */
static void
llm_request__insert(struct llm_request__item *item, size_t position, const char *before,
		    const char *after)
{
	size_t before_length = strlen(before), after_length = strlen(after);
	size_t added = before_length + after_length;

	item->text = kagent_realloc(item->text, item->length + added + 1);
	memmove(item->text + position + added, item->text + position, item->length - position + 1);
	memcpy(item->text + position, before, before_length);
	memcpy(item->text + position + before_length, after, after_length);
	item->length += added;
	item->hash = llm_request__hash(item->text, item->length);
}

/* Adds a content block (stolen) to the last item when it is the user's, else to a new user
 * message: Anthropic wants roles to alternate, so tool results and a following text share one.
 * tool_result blocks must come before any text in their message. */
static void
llm_request__anthropic_user_block(struct kagent_llm_conversation *conversation, json_t *block,
				  int is_result)
{
	size_t start = strlen(LLM_REQUEST_USER_START);
	char *text = json_dumps(block, JSON_COMPACT);
	struct llm_request__item *item;
	int empty;

	json_decref(block);
	if (!conversation->last_is_user) {
		item = llm_request__new_item(conversation);
		item->text = kagent_strdup(LLM_REQUEST_USER_START LLM_REQUEST_USER_END);
		item->length = strlen(item->text);
		item->results_end = start;
		conversation->last_is_user = 1;
	}
	item = &conversation->items[conversation->item_count - 1];
	empty = item->length == start + strlen(LLM_REQUEST_USER_END);
	if (!is_result) {
		llm_request__insert(item, item->length - strlen(LLM_REQUEST_USER_END),
				    empty ? "" : ",", text);
	} else if (empty || item->results_end > start) {
		llm_request__insert(item, item->results_end, empty ? "" : ",", text);
		item->results_end += (empty ? 0 : 1) + strlen(text);
	} else {
		/* Only text blocks so far: this one goes first. */
		llm_request__insert(item, start, text, ",");
		item->results_end += strlen(text);
	}
	free(text);
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
llm_request__responses_add(struct kagent_llm_conversation *conversation,
			   const struct llm_request__message *message)
{
	const json_t *call, *item;
	size_t i;

	switch (message->role) {
	case LLM_REQUEST_USER:
		llm_request__add_item(conversation, json_pack("{s:s, s:s}", "role", "user",
							      "content", message->content));
		return;
	case LLM_REQUEST_TOOL:
		llm_request__add_item(conversation,
				      json_pack("{s:s, s:s, s:s}", "type", "function_call_output",
						"call_id", message->tool_call_id, "output",
						message->content));
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
			llm_request__add_item(conversation, json_incref((json_t *)item));
	}
	if (message->content != NULL && message->content[0] != '\0')
		llm_request__add_item(conversation, json_pack("{s:s, s:s}", "role", "assistant",
							      "content", message->content));
	json_array_foreach(message->tool_calls, i, call)
	{
		llm_request__add_item(conversation,
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
llm_request__anthropic_add(struct kagent_llm_conversation *conversation,
			   const struct llm_request__message *message)
{
	json_t *blocks;
	const json_t *call, *part;
	size_t i;

	switch (message->role) {
	case LLM_REQUEST_USER:
		/* Anthropic refuses empty text blocks. */
		if (message->content[0] != '\0')
			llm_request__anthropic_user_block(
			    conversation,
			    json_pack("{s:s, s:s}", "type", "text", "text", message->content), 0);
		return;
	case LLM_REQUEST_TOOL:
		llm_request__anthropic_user_block(
		    conversation,
		    json_pack("{s:s, s:s, s:s, s:b}", "type", "tool_result", "tool_use_id",
			      message->tool_call_id, "content", message->content, "is_error",
			      message->is_error),
		    1);
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
	llm_request__add_item(conversation,
			      json_pack("{s:s, s:o}", "role", "assistant", "content", blocks));
}

static json_t *
llm_request__anthropic_tool(const json_t *tool)
{
	return json_pack("{s:O, s:O, s:O}", "name", json_object_get(tool, "name"), "description",
			 json_object_get(tool, "description"), "input_schema",
			 json_object_get(tool, "parameters"));
}

/* ---- The conversation ---- */

/* The system prompt as a JSON string, or NULL when it is not valid UTF-8. */
static char *
llm_request__string_text(const char *text)
{
	json_t *string = json_string(text);
	char *dumped = string != NULL ? json_dumps(string, JSON_ENCODE_ANY) : NULL;

	json_decref(string);
	return dumped;
}

struct kagent_llm_conversation *
kagent_llm_conversation_create(enum kagent_llm_format format, const char *system)
{
	struct kagent_llm_conversation *conversation = kagent_calloc(1, sizeof *conversation);
	char *text;

	conversation->format = format;
	conversation->system_field = kagent_strdup("");
	if (system == NULL || system[0] == '\0')
		return conversation;
	/* JSON strings must be UTF-8; the system prompt comes from files, not from JSON. */
	if ((text = llm_request__string_text(system)) == NULL) {
		conversation->error = kagent_strdup("the system prompt is not valid UTF-8");
		return conversation;
	}
	switch (format) {
	case KAGENT_LLM_FORMAT_CHAT_COMPLETIONS:
		llm_request__add_item(conversation,
				      json_pack("{s:s, s:s}", "role", "system", "content", system));
		break;
	case KAGENT_LLM_FORMAT_RESPONSES:
	case KAGENT_LLM_FORMAT_ANTHROPIC:
		conversation->system_key =
		    format == KAGENT_LLM_FORMAT_RESPONSES ? "instructions" : "system";
		free(conversation->system_field);
		conversation->system_field =
		    kagent_asprintf(",\"%s\":%s", conversation->system_key, text);
		break;
	}
	free(text);
	return conversation;
}

void
kagent_llm_conversation_free(struct kagent_llm_conversation *conversation)
{
	if (conversation == NULL)
		return;
	for (size_t i = 0; i < conversation->item_count; i++)
		free(conversation->items[i].text);
	free(conversation->items);
	free(conversation->call_ids);
	free(conversation->system_field);
	free(conversation->error);
	free(conversation);
}

int
kagent_llm_conversation_add(struct kagent_llm_conversation *conversation, const json_t *message,
			    char **cause)
{
	struct llm_request__message checked;

	if (conversation->error != NULL) {
		*cause = kagent_strdup(conversation->error);
		return -EINVAL;
	}
	if (llm_request__read_message(conversation, message, &checked, cause) < 0) {
		conversation->error = kagent_strdup(*cause);
		return -EINVAL;
	}
	conversation->message_count++;
	if (checked.tool_calls != NULL)
		llm_request__remember_calls(conversation, checked.tool_calls);
	switch (conversation->format) {
	case KAGENT_LLM_FORMAT_CHAT_COMPLETIONS:
		llm_request__add_item(conversation, llm_request__chat_message(&checked));
		break;
	case KAGENT_LLM_FORMAT_RESPONSES:
		llm_request__responses_add(conversation, &checked);
		break;
	case KAGENT_LLM_FORMAT_ANTHROPIC:
		llm_request__anthropic_add(conversation, &checked);
		break;
	}
	return 0;
}

/* ---- The tools ---- */

static void
llm_request__tools_release(struct llm_request__tools *tools)
{
	if (tools == NULL || --tools->references > 0)
		return;
	json_decref(tools->source);
	json_decref(tools->wire);
	free(tools->field);
	free(tools);
}

/* The tools in format, checked, a missing description or schema filled in; NULL with *cause set
 * when one is malformed. */
static json_t *
llm_request__wire_tools(const json_t *tools, enum kagent_llm_format format, char **cause)
{
	json_t *wire = json_array(), *checked;
	const json_t *tool;
	size_t i;

	if (!json_is_array(tools)) {
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
		checked = json_pack("{s:O, s:O*, s:O*}", "name", json_object_get(tool, "name"),
				    "description", description, "parameters", parameters);
		if (description == NULL)
			json_object_set_new(checked, "description", json_string(""));
		if (parameters == NULL)
			json_object_set_new(
			    checked, "parameters",
			    json_pack("{s:s, s:{}}", "type", "object", "properties"));
		json_array_append_new(wire, format == KAGENT_LLM_FORMAT_CHAT_COMPLETIONS
						? llm_request__chat_tool(checked)
					    : format == KAGENT_LLM_FORMAT_RESPONSES
						? llm_request__responses_tool(checked)
						: llm_request__anthropic_tool(checked));
		json_decref(checked);
	}
	return wire;
failed:
	json_decref(wire);
	return NULL;
}

/* A reference to the tools in format (NULL for none), or -EINVAL with *cause set. */
static int
llm_request__tools_get(const json_t *tools, enum kagent_llm_format format,
		       struct llm_request__tools **tools_out, char **cause)
{
	struct llm_request__tools *cached = llm_request__tools_cache[format], *made;
	json_t *wire;
	char *text;

	*tools_out = NULL;
	if (tools == NULL || (json_is_array(tools) && json_array_size(tools) == 0))
		return 0;
	if (cached != NULL && cached->source == tools) {
		cached->references++;
		*tools_out = cached;
		return 0;
	}
	if ((wire = llm_request__wire_tools(tools, format, cause)) == NULL)
		return -EINVAL;
	made = kagent_calloc(1, sizeof *made);
	made->references = 2; /* the cache's and the caller's */
	made->source = json_incref((json_t *)tools);
	made->format = format;
	made->wire = wire;
	text = json_dumps(wire, JSON_COMPACT);
	made->field = kagent_asprintf(",\"tools\":%s", text);
	made->length = strlen(made->field);
	free(text);
	llm_request__tools_release(cached);
	llm_request__tools_cache[format] = made;
	*tools_out = made;
	return 0;
}

/* ---- The body ---- */

/* temperature and top_p, each only when configured (a negative value means unset). */
static void
llm_request__set_sampling(json_t *body, const struct kagent_provider_config *provider)
{
	if (provider->temperature >= 0)
		json_object_set_new(body, "temperature", json_real(provider->temperature));
	if (provider->top_p >= 0)
		json_object_set_new(body, "top_p", json_real(provider->top_p));
}

/* The body's members other than the system prompt, the message list and the tools; NULL when
 * the model's name or the reasoning effort is not valid UTF-8. */
static json_t *
llm_request__head(const struct kagent_provider_config *provider)
{
	json_t *body = json_pack("{s:s}", "model", provider->model);

	if (body == NULL)
		return NULL;
	switch (provider->format) {
	case KAGENT_LLM_FORMAT_CHAT_COMPLETIONS:
		json_object_set_new(body, "stream", json_true());
		json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1));
		if (provider->max_output_tokens > 0)
			json_object_set_new(body, "max_completion_tokens",
					    json_integer(provider->max_output_tokens));
		if (provider->reasoning_effort != NULL &&
		    json_object_set_new(body, "reasoning_effort",
					json_string(provider->reasoning_effort)) < 0)
			goto failed;
		break;
	case KAGENT_LLM_FORMAT_RESPONSES:
		json_object_set_new(body, "stream", json_true());
		/* Nothing is kept on the provider's side: each request carries the whole turn. */
		json_object_set_new(body, "store", json_false());
		if (provider->max_output_tokens > 0)
			json_object_set_new(body, "max_output_tokens",
					    json_integer(provider->max_output_tokens));
		/* A reasoning model: its reasoning items come back encrypted, for the next
		 * request to carry (see llm_request__responses_add). */
		if (provider->reasoning_effort != NULL) {
			if (json_object_set_new(
				body, "reasoning",
				json_pack("{s:s}", "effort", provider->reasoning_effort)) < 0)
				goto failed;
			json_object_set_new(body, "include",
					    json_pack("[s]", "reasoning.encrypted_content"));
		}
		break;
	case KAGENT_LLM_FORMAT_ANTHROPIC:
		json_object_set_new(body, "max_tokens",
				    json_integer(provider->max_output_tokens > 0
						     ? provider->max_output_tokens
						     : KAGENT_PROVIDER_ANTHROPIC_MAX_TOKENS));
		json_object_set_new(body, "stream", json_true());
		if (provider->thinking_budget_tokens > 0)
			json_object_set_new(
			    body, "thinking",
			    json_pack("{s:s, s:I}", "type", "enabled", "budget_tokens",
				      (json_int_t)provider->thinking_budget_tokens));
		break;
	}
	llm_request__set_sampling(body, provider);
	return body;
failed:
	json_decref(body);
	return NULL;
}

int
kagent_llm_body_build(const struct kagent_llm_request *request, struct kagent_llm_body **body_out,
		      char **cause)
{
	const struct kagent_provider_config *provider = request->provider;
	const struct kagent_llm_conversation *conversation = request->conversation;
	struct kagent_llm_body *body = kagent_calloc(1, sizeof *body);
	json_t *head = NULL;
	int status = -EINVAL;

	*body_out = NULL;
	body->conversation = conversation;
	if (provider->model == NULL || provider->model[0] == '\0') {
		*cause = kagent_strdup("no model is configured (set provider.model)");
		goto out;
	}
	if (conversation->format != provider->format) {
		*cause = kagent_asprintf("the conversation is written for %s, the endpoint is %s",
					 kagent_llm_format_name(conversation->format),
					 kagent_llm_format_name(provider->format));
		goto out;
	}
	if ((head = llm_request__head(provider)) == NULL) {
		*cause = kagent_strdup("the model name or the reasoning effort is not valid UTF-8");
		goto out;
	}
	if (conversation->error != NULL) {
		*cause = kagent_strdup(conversation->error);
		goto out;
	}
	if ((status =
		 llm_request__tools_get(request->tools, provider->format, &body->tools, cause)) < 0)
		goto out;
	body->head = json_dumps(head, JSON_COMPACT);
	body->head_length = strlen(body->head) - 1; /* without its closing brace */
	body->list_open =
	    provider->format == KAGENT_LLM_FORMAT_RESPONSES ? ",\"input\":[" : ",\"messages\":[";
	body->length = body->head_length + strlen(conversation->system_field) +
		       strlen(body->list_open) + strlen("]}") +
		       (body->tools != NULL ? body->tools->length : 0);
	for (size_t i = 0; i < conversation->item_count; i++)
		body->length += (i > 0 ? 1 : 0) + conversation->items[i].length;
	*body_out = body;
	body = NULL;
	status = 0;
out:
	json_decref(head);
	kagent_llm_body_free(body);
	return status;
}

void
kagent_llm_body_free(struct kagent_llm_body *body)
{
	if (body == NULL)
		return;
	llm_request__tools_release(body->tools);
	free(body->head);
	free(body);
}

size_t
kagent_llm_body_length(const struct kagent_llm_body *body)
{
	return body->length;
}

/*
 * Piece number index of the body: its head, the system prompt's member, the list's opening,
 * for each item a separator (none before the first) and the item, the list's end, the tools'
 * member, the closing brace. Returns 0 past the last one.
 */
static int
llm_request__piece(const struct kagent_llm_body *body, size_t index, const char **bytes_out,
		   size_t *length_out)
{
	const struct kagent_llm_conversation *conversation = body->conversation;
	size_t items = 2 * conversation->item_count;
	const struct llm_request__item *item;
	const char *bytes;

	if (index == 0) {
		*bytes_out = body->head;
		*length_out = body->head_length;
		return 1;
	}
	if (index < 3) {
		bytes = index == 1 ? conversation->system_field : body->list_open;
	} else if (index - 3 < items) {
		index -= 3;
		item = &conversation->items[index / 2];
		if (index % 2 == 1) {
			*bytes_out = item->text;
			*length_out = item->length;
			return 1;
		}
		bytes = index > 0 ? "," : "";
	} else {
		index -= 3 + items;
		if (index > 2)
			return 0;
		if (index == 1 && body->tools != NULL) {
			*bytes_out = body->tools->field;
			*length_out = body->tools->length;
			return 1;
		}
		bytes = index == 0 ? "]" : index == 1 ? "" : "}";
	}
	*bytes_out = bytes;
	*length_out = strlen(bytes);
	return 1;
}

size_t
kagent_llm_body_read(struct kagent_llm_body *body, size_t offset, char *buffer, size_t size)
{
	size_t copied = 0, length, skip, count;
	const char *bytes;

	if (offset < body->cursor_offset) {
		body->cursor_piece = 0;
		body->cursor_offset = 0;
	}
	while (copied < size && llm_request__piece(body, body->cursor_piece, &bytes, &length)) {
		if (offset + copied >= body->cursor_offset + length) {
			body->cursor_offset += length;
			body->cursor_piece++;
			continue;
		}
		skip = offset + copied - body->cursor_offset;
		count = length - skip < size - copied ? length - skip : size - copied;
		memcpy(buffer + copied, bytes + skip, count);
		copied += count;
	}
	return copied;
}

size_t
kagent_llm_body_item_count(const struct kagent_llm_body *body)
{
	return body->conversation->item_count;
}

uint64_t
kagent_llm_body_item_hash(const struct kagent_llm_body *body, size_t index)
{
	return body->conversation->items[index].hash;
}

/* The four hex digits at text as a number, or -1. */
static long
llm_request__hex4(const char *text)
{
	long value = 0;

	for (int i = 0; i < 4; i++) {
		char digit = text[i];

		if (digit >= '0' && digit <= '9')
			value = value * 16 + (digit - '0');
		else if ((digit | 0x20) >= 'a' && (digit | 0x20) <= 'f')
			value = value * 16 + ((digit | 0x20) - 'a' + 10);
		else
			return -1;
	}
	return value;
}

/* Appends code point as UTF-8. */
static void
llm_request__append_utf8(struct kagent_buffer *out, long code)
{
	char bytes[4];
	size_t size;

	if (code < 0x80) {
		bytes[0] = (char)code;
		size = 1;
	} else if (code < 0x800) {
		bytes[0] = (char)(0xc0 | code >> 6);
		bytes[1] = (char)(0x80 | (code & 0x3f));
		size = 2;
	} else if (code < 0x10000) {
		bytes[0] = (char)(0xe0 | code >> 12);
		bytes[1] = (char)(0x80 | (code >> 6 & 0x3f));
		bytes[2] = (char)(0x80 | (code & 0x3f));
		size = 3;
	} else {
		bytes[0] = (char)(0xf0 | code >> 18);
		bytes[1] = (char)(0x80 | (code >> 12 & 0x3f));
		bytes[2] = (char)(0x80 | (code >> 6 & 0x3f));
		bytes[3] = (char)(0x80 | (code & 0x3f));
		size = 4;
	}
	kagent_buffer_append(out, bytes, size);
}

/* The text of a JSON string literal that json_dumps wrote (literal starts at its quote), into
 * out. */
static void
llm_request__unescape(const char *literal, struct kagent_buffer *out)
{
	const char *at = literal + 1, *run;
	long code, low;

	kagent_buffer_append(out, "", 0);
	while (*at != '"' && *at != '\0') {
		for (run = at; *at != '"' && *at != '\\' && *at != '\0'; at++)
			;
		kagent_buffer_append(out, run, (size_t)(at - run));
		if (*at != '\\')
			break;
		switch (at[1]) {
		case 'b':
			kagent_buffer_append(out, "\b", 1);
			break;
		case 'f':
			kagent_buffer_append(out, "\f", 1);
			break;
		case 'n':
			kagent_buffer_append(out, "\n", 1);
			break;
		case 'r':
			kagent_buffer_append(out, "\r", 1);
			break;
		case 't':
			kagent_buffer_append(out, "\t", 1);
			break;
		case 'u':
			if ((code = llm_request__hex4(at + 2)) < 0) {
				kagent_buffer_append(out, "?", 1);
				break;
			}
			at += 4;
			/* A surrogate pair: one code point. */
			if (code >= 0xd800 && code < 0xdc00 && at[2] == '\\' && at[3] == 'u' &&
			    (low = llm_request__hex4(at + 4)) >= 0xdc00 && low < 0xe000) {
				code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
				at += 6;
			}
			llm_request__append_utf8(out, code);
			break;
		default: /* \" \\ \/ */
			kagent_buffer_append(out, at + 1, 1);
			break;
		}
		at += 2;
	}
}

json_t *
kagent_llm_body_json(const struct kagent_llm_body *body, size_t first)
{
	const struct kagent_llm_conversation *conversation = body->conversation;
	struct kagent_buffer text = {0};
	json_t *value;

	kagent_buffer_append(&text, body->head, body->head_length);
	kagent_buffer_append_string(&text, body->list_open);
	for (size_t i = first; i < conversation->item_count; i++) {
		if (i > first)
			kagent_buffer_append_string(&text, ",");
		kagent_buffer_append(&text, conversation->items[i].text,
				     conversation->items[i].length);
	}
	kagent_buffer_append_string(&text, "]}");
	value = json_loadb(text.data, text.length, 0, NULL);
	kagent_buffer_free(&text);
	/* The system prompt read back without jansson's parser, which takes longer over its
	 * tens of KB than everything else here. */
	if (value != NULL && conversation->system_key != NULL) {
		const char *literal = conversation->system_field +
				      strlen(conversation->system_key) + strlen(",\"\":");

		llm_request__unescape(literal, &text);
		json_object_set_new(value, conversation->system_key,
				    json_stringn(text.data, text.length));
		kagent_buffer_free(&text);
	}
	/* The tools as one shared value, not parsed again for every request. */
	if (value != NULL && body->tools != NULL)
		json_object_set(value, "tools", body->tools->wire);
	return value;
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
