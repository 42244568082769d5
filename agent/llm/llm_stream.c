/*
 * One streamed model reply, accumulated into a provider-neutral result (see
 * include/kagent/llm/llm_stream.h and docs/llm-streams.md). Each wire format has
 * its own event handler below; they share the buffers, the tool-call table and
 * the error path. Tool-call arguments arrive as JSON text in fragments, so they
 * are only parsed once the stream has ended. Reasoning state the provider wants
 * back (Responses' reasoning items, Anthropic's signed thinking blocks) is kept
 * in parts, turned into the result's provider_state at the end.
 */
#include "kagent/llm/llm_stream.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/llm/provider.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct llm_stream__call {
	struct kagent_buffer id;
	struct kagent_buffer name;
	struct kagent_buffer arguments;
	/* Chat Completions' tool_calls[].index, Responses' output_index or Anthropic's
	 * content block index: how later fragments find their call. -1 when none. */
	long long index;
	/* Responses' item id (fc_...), which differs from the call id (call_...). */
	char *item_id;
	/* Anthropic's content_block_start input, used when no partial_json follows. */
	char *initial_input;
};

/* One piece of the reply's provider state (see provider_state in llm_stream.h). */
struct llm_stream__state_part {
	/* Responses' output_index or Anthropic's content block index; -1 when none came. */
	long long index;
	/* Responses: the reasoning item, whole. */
	json_t *item;
	/* Anthropic: a thinking block's text and signature, or (redacted set) a
	 * redacted_thinking block's data in text. */
	int redacted;
	struct kagent_buffer text;
	struct kagent_buffer signature;
};

struct kagent_llm_stream {
	enum kagent_llm_format format;
	int done;
	/* Chat Completions: a finish_reason arrived (some servers omit [DONE]). */
	int saw_finish;
	struct kagent_buffer text;
	struct kagent_buffer reasoning;
	struct llm_stream__call *calls;
	size_t call_count;
	struct llm_stream__state_part *parts; /* in output order */
	size_t part_count;
	size_t state_bytes; /* counted against KAGENT_LLM_STREAM_STATE_CAP */
	char *finish_reason;
	char *response_id;
	char *model;
	struct kagent_llm_usage usage;
	/* Anthropic reports cache reads and writes apart from input_tokens. */
	long long cache_read_tokens;
	long long cache_creation_tokens;
	long long plain_input_tokens;
	enum kagent_llm_error error;
	int error_number;
	char *error_type;
	char *error_message;
};

/* Sets the stream's one error; later events and finish report the same. */
static int
llm_stream__fail(struct kagent_llm_stream *stream, enum kagent_llm_error error, int error_number,
		 const char *type, char *message)
{
	stream->error = error;
	stream->error_number = error_number;
	free(stream->error_type);
	stream->error_type = kagent_strdup(type != NULL ? type : "");
	free(stream->error_message);
	stream->error_message = message;
	stream->done = 1;
	return error_number;
}

static int
llm_stream__append(struct kagent_llm_stream *stream, struct kagent_buffer *buffer,
		   const char *bytes, size_t size, size_t cap, const char *what)
{
	if (buffer->length + size > cap)
		return llm_stream__fail(
		    stream, KAGENT_LLM_ERROR_TOO_LARGE, -EMSGSIZE, NULL,
		    kagent_asprintf("the model's %s is longer than %zu bytes", what, cap));
	kagent_buffer_append(buffer, bytes, size);
	return 0;
}

static int
llm_stream__set(struct kagent_llm_stream *stream, struct kagent_buffer *buffer, const char *string,
		size_t cap, const char *what)
{
	buffer->length = 0;
	if (buffer->data != NULL)
		buffer->data[0] = '\0';
	return llm_stream__append(stream, buffer, string, strlen(string), cap, what);
}

/* A copy of a peer's short string, cut at the name cap (kagent_strndup copies exactly n bytes). */
static char *
llm_stream__strdup_capped(const char *string)
{
	return kagent_strndup(string, strnlen(string, KAGENT_LLM_STREAM_NAME_CAP));
}

static const char *
llm_stream__string_member(const json_t *object, const char *key)
{
	const char *value = json_string_value(json_object_get(object, key));

	return value;
}

/* Fills a missing identifier (response id, model) from the first event that has it. */
static void
llm_stream__set_once(char **field, const char *value)
{
	if (*field == NULL && value != NULL && strlen(value) <= KAGENT_LLM_STREAM_NAME_CAP)
		*field = kagent_strdup(value);
}

static int
llm_stream__provider_error(struct kagent_llm_stream *stream, const json_t *error)
{
	const char *type = NULL, *message = NULL;
	enum kagent_llm_error kind = KAGENT_LLM_ERROR_PROVIDER;
	int error_number = -EREMOTEIO;

	if (json_is_object(error)) {
		type = llm_stream__string_member(error, "type");
		if (type == NULL || strcmp(type, "error") == 0)
			type = llm_stream__string_member(error, "code");
		message = llm_stream__string_member(error, "message");
	} else if (json_is_string(error)) {
		message = json_string_value(error);
	}
	if (type != NULL && strcmp(type, "overloaded_error") == 0) {
		kind = KAGENT_LLM_ERROR_OVERLOADED;
		error_number = -EBUSY;
	}
	return llm_stream__fail(
	    stream, kind, error_number, type,
	    kagent_asprintf("the provider reported an error in the stream: %s%s%.4096s",
			    type != NULL ? type : "", type != NULL && message != NULL ? ": " : "",
			    message != NULL ? message : (type ? "" : "(no message)")));
}

/* Takes the next tool-call slot, or fails once the reply has too many. */
static int
llm_stream__new_call(struct kagent_llm_stream *stream, long long index,
		     struct llm_stream__call **call_out)
{
	struct llm_stream__call *call;

	if (stream->call_count >= KAGENT_LLM_STREAM_TOOL_CALL_CAP)
		return llm_stream__fail(
		    stream, KAGENT_LLM_ERROR_TOO_LARGE, -EMSGSIZE, NULL,
		    kagent_asprintf("the model made more than %d tool calls in one reply",
				    KAGENT_LLM_STREAM_TOOL_CALL_CAP));
	stream->calls = kagent_realloc(stream->calls, (stream->call_count + 1) * sizeof *call);
	call = &stream->calls[stream->call_count++];
	memset(call, 0, sizeof *call);
	call->index = index;
	*call_out = call;
	return 0;
}

static struct llm_stream__call *
llm_stream__find_call_by_id(struct kagent_llm_stream *stream, const char *id)
{
	for (size_t i = stream->call_count; i > 0; i--)
		if (strcmp(kagent_buffer_string(&stream->calls[i - 1].id), id) == 0)
			return &stream->calls[i - 1];
	return NULL;
}

/* The latest call with this index: a server may reuse an index for a new id. */
static struct llm_stream__call *
llm_stream__find_call_by_index(struct kagent_llm_stream *stream, long long index)
{
	for (size_t i = stream->call_count; i > 0; i--)
		if (stream->calls[i - 1].index == index)
			return &stream->calls[i - 1];
	return NULL;
}

static struct llm_stream__call *
llm_stream__find_call_by_item(struct kagent_llm_stream *stream, const char *item_id)
{
	for (size_t i = stream->call_count; i > 0; i--)
		if (stream->calls[i - 1].item_id != NULL &&
		    strcmp(stream->calls[i - 1].item_id, item_id) == 0)
			return &stream->calls[i - 1];
	return NULL;
}

/* Counts size more bytes of provider state, or fails once the reply has too many. */
static int
llm_stream__charge_state(struct kagent_llm_stream *stream, size_t size)
{
	if (size > KAGENT_LLM_STREAM_STATE_CAP - stream->state_bytes)
		return llm_stream__fail(
		    stream, KAGENT_LLM_ERROR_TOO_LARGE, -EMSGSIZE, NULL,
		    kagent_asprintf("the model's reasoning state (reasoning items, "
				    "thinking blocks) is larger than %zu bytes",
				    KAGENT_LLM_STREAM_STATE_CAP));
	stream->state_bytes += size;
	return 0;
}

static int
llm_stream__append_state(struct kagent_llm_stream *stream, struct kagent_buffer *buffer,
			 const json_t *value)
{
	int result;

	if (!json_is_string(value))
		return 0;
	if ((result = llm_stream__charge_state(stream, json_string_length(value))) == 0)
		kagent_buffer_append(buffer, json_string_value(value), json_string_length(value));
	return result;
}

/* Takes a state slot for index, placed after every part with an index not above it. */
static int
llm_stream__new_state_part(struct kagent_llm_stream *stream, long long index,
			   struct llm_stream__state_part **part_out)
{
	size_t position = stream->part_count;

	if (stream->part_count >= KAGENT_LLM_STREAM_STATE_PART_CAP)
		return llm_stream__fail(
		    stream, KAGENT_LLM_ERROR_TOO_LARGE, -EMSGSIZE, NULL,
		    kagent_asprintf("the model sent more than %d reasoning items or "
				    "thinking blocks in one reply",
				    KAGENT_LLM_STREAM_STATE_PART_CAP));
	stream->parts =
	    kagent_realloc(stream->parts, (stream->part_count + 1) * sizeof *stream->parts);
	while (index >= 0 && position > 0 && stream->parts[position - 1].index > index)
		position--;
	memmove(&stream->parts[position + 1], &stream->parts[position],
		(stream->part_count - position) * sizeof *stream->parts);
	stream->part_count++;
	memset(&stream->parts[position], 0, sizeof *stream->parts);
	stream->parts[position].index = index;
	*part_out = &stream->parts[position];
	return 0;
}

/* Arguments given as a JSON value rather than as text (lenient servers). */
static int
llm_stream__append_arguments(struct kagent_llm_stream *stream, struct llm_stream__call *call,
			     const json_t *arguments)
{
	const char *text = json_string_value(arguments);
	char *dumped = NULL;
	int result = 0;

	if (text == NULL && arguments != NULL && !json_is_null(arguments)) {
		dumped = json_dumps(arguments, JSON_COMPACT | JSON_ENCODE_ANY);
		text = dumped;
	}
	if (text != NULL)
		result = llm_stream__append(stream, &call->arguments, text, strlen(text),
					    KAGENT_LLM_STREAM_ARGUMENTS_CAP, "tool-call arguments");
	free(dumped);
	return result;
}

static int
llm_stream__append_text(struct kagent_llm_stream *stream, struct kagent_buffer *buffer,
			const json_t *value, const char *what)
{
	const char *text = json_string_value(value);

	if (text == NULL)
		return 0;
	return llm_stream__append(stream, buffer, text, json_string_length(value),
				  KAGENT_LLM_STREAM_TEXT_CAP, what);
}

static long long
llm_stream__tokens(const json_t *object, const char *key, long long previous)
{
	const json_t *value = json_object_get(object, key);

	return json_is_integer(value) ? (long long)json_integer_value(value) : previous;
}

/* ---- OpenAI Chat Completions ---- */

static int
llm_stream__chat_tool_call(struct kagent_llm_stream *stream, const json_t *fragment)
{
	const json_t *index_value = json_object_get(fragment, "index");
	const json_t *function = json_object_get(fragment, "function");
	const char *id = llm_stream__string_member(fragment, "id");
	const char *name = llm_stream__string_member(function, "name");
	int has_index = json_is_integer(index_value);
	long long index = has_index ? (long long)json_integer_value(index_value) : -1;
	struct llm_stream__call *call = NULL;
	int result = 0;

	if (id != NULL && id[0] == '\0')
		id = NULL;
	/* A known id wins: some servers repeat it on every fragment. */
	if (id != NULL)
		call = llm_stream__find_call_by_id(stream, id);
	if (call == NULL && has_index) {
		call = llm_stream__find_call_by_index(stream, index);
		/* The same index with another id is a new call (servers that always send 0). */
		if (call != NULL && id != NULL && call->id.length > 0)
			call = NULL;
	}
	/* No index and no id: a continuation of the latest call, or the first call. */
	if (call == NULL && !has_index && id == NULL && stream->call_count > 0)
		call = &stream->calls[stream->call_count - 1];
	if (call == NULL && (result = llm_stream__new_call(stream, index, &call)) < 0)
		goto out;
	if (id != NULL && call->id.length == 0 &&
	    (result = llm_stream__set(stream, &call->id, id, KAGENT_LLM_STREAM_NAME_CAP,
				      "tool-call id")) < 0)
		goto out;
	if (name != NULL && name[0] != '\0' &&
	    strcmp(kagent_buffer_string(&call->name), name) != 0) {
		/* Names come whole in practice; a differing one is appended, like arguments. */
		result = llm_stream__append(stream, &call->name, name, strlen(name),
					    KAGENT_LLM_STREAM_NAME_CAP, "tool name");
		if (result < 0)
			goto out;
	}
	result = llm_stream__append_arguments(stream, call, json_object_get(function, "arguments"));
out:
	return result;
}

static int
llm_stream__chat_event(struct kagent_llm_stream *stream, const json_t *chunk)
{
	const json_t *choices = json_object_get(chunk, "choices");
	const json_t *usage = json_object_get(chunk, "usage");
	const json_t *choice;
	size_t i;
	int result = 0;

	llm_stream__set_once(&stream->response_id, llm_stream__string_member(chunk, "id"));
	llm_stream__set_once(&stream->model, llm_stream__string_member(chunk, "model"));
	json_array_foreach(choices, i, choice)
	{
		const json_t *delta = json_object_get(choice, "delta");
		const json_t *index = json_object_get(choice, "index");
		const json_t *tool_calls = json_object_get(delta, "tool_calls");
		const json_t *fragment;
		const char *finish = llm_stream__string_member(choice, "finish_reason");
		size_t j;

		/* The agent asks for one choice (n=1); others would be alternatives, not parts. */
		if (json_is_integer(index) && json_integer_value(index) != 0)
			continue;
		if ((result = llm_stream__append_text(
			 stream, &stream->text, json_object_get(delta, "content"), "text")) < 0 ||
		    (result = llm_stream__append_text(stream, &stream->reasoning,
						      json_object_get(delta, "reasoning_content"),
						      "reasoning")) < 0 ||
		    (result = llm_stream__append_text(stream, &stream->reasoning,
						      json_object_get(delta, "reasoning"),
						      "reasoning")) < 0)
			goto out;
		if (json_is_object(tool_calls)) {
			/* Lenient: a single call not wrapped in an array. */
			if ((result = llm_stream__chat_tool_call(stream, tool_calls)) < 0)
				goto out;
		}
		json_array_foreach(tool_calls, j, fragment)
		{
			if ((result = llm_stream__chat_tool_call(stream, fragment)) < 0)
				goto out;
		}
		if (finish != NULL) {
			free(stream->finish_reason);
			stream->finish_reason = llm_stream__strdup_capped(finish);
			stream->saw_finish = 1;
		}
	}
	if (json_is_object(usage)) {
		const json_t *details = json_object_get(usage, "prompt_tokens_details");

		stream->usage.input_tokens =
		    llm_stream__tokens(usage, "prompt_tokens", stream->usage.input_tokens);
		stream->usage.output_tokens =
		    llm_stream__tokens(usage, "completion_tokens", stream->usage.output_tokens);
		stream->usage.cached_tokens =
		    llm_stream__tokens(details, "cached_tokens", stream->usage.cached_tokens);
	}
out:
	return result;
}

/* ---- OpenAI Responses ---- */

static int
llm_stream__responses_call_for(struct kagent_llm_stream *stream, const json_t *event,
			       const char *item_id, struct llm_stream__call **call_out)
{
	const json_t *output_index = json_object_get(event, "output_index");
	long long index = json_is_integer(output_index) ? json_integer_value(output_index) : -1;
	struct llm_stream__call *call = NULL;
	int result = 0;

	if (item_id != NULL)
		call = llm_stream__find_call_by_item(stream, item_id);
	if (call == NULL && index >= 0)
		call = llm_stream__find_call_by_index(stream, index);
	if (call == NULL) {
		/* A delta before its output_item.added: keep it rather than lose arguments. */
		if ((result = llm_stream__new_call(stream, index, &call)) < 0)
			goto out;
		if (item_id != NULL)
			call->item_id = llm_stream__strdup_capped(item_id);
	}
	*call_out = call;
out:
	return result;
}

/* A finished reasoning item, kept whole: with store false, the next request must carry it
 * (its encrypted_content) back for the model to keep its reasoning. */
static int
llm_stream__responses_reasoning_item(struct kagent_llm_stream *stream, const json_t *event)
{
	json_t *item = json_object_get(event, "item");
	const json_t *output_index = json_object_get(event, "output_index");
	struct llm_stream__state_part *part;
	int result;

	if ((result = llm_stream__charge_state(stream, json_dumpb(item, NULL, 0, JSON_COMPACT))) <
		0 ||
	    (result = llm_stream__new_state_part(
		 stream, json_is_integer(output_index) ? json_integer_value(output_index) : -1,
		 &part)) < 0)
		return result;
	part->item = json_incref(item);
	return 0;
}

static int
llm_stream__responses_item(struct kagent_llm_stream *stream, const json_t *event, int done)
{
	const json_t *item = json_object_get(event, "item");
	const char *type = llm_stream__string_member(item, "type");
	const char *call_id = llm_stream__string_member(item, "call_id");
	const char *name = llm_stream__string_member(item, "name");
	const char *arguments = llm_stream__string_member(item, "arguments");
	struct llm_stream__call *call;
	int result = 0;

	if (type != NULL && strcmp(type, "reasoning") == 0 && done) {
		result = llm_stream__responses_reasoning_item(stream, event);
		goto out;
	}
	if (type == NULL || strcmp(type, "function_call") != 0)
		goto out;
	if ((result = llm_stream__responses_call_for(
		 stream, event, llm_stream__string_member(item, "id"), &call)) < 0)
		goto out;
	if (call_id != NULL && call->id.length == 0 &&
	    (result = llm_stream__set(stream, &call->id, call_id, KAGENT_LLM_STREAM_NAME_CAP,
				      "tool-call id")) < 0)
		goto out;
	if (name != NULL && call->name.length == 0 &&
	    (result = llm_stream__set(stream, &call->name, name, KAGENT_LLM_STREAM_NAME_CAP,
				      "tool name")) < 0)
		goto out;
	/* The item's arguments are the whole text when done; at "added" they are usually "". */
	if (arguments != NULL && (done || call->arguments.length == 0))
		result = llm_stream__set(stream, &call->arguments, arguments,
					 KAGENT_LLM_STREAM_ARGUMENTS_CAP, "tool-call arguments");
out:
	return result;
}

static void
llm_stream__responses_usage(struct kagent_llm_stream *stream, const json_t *response)
{
	const json_t *usage = json_object_get(response, "usage");
	const json_t *details = json_object_get(usage, "input_tokens_details");

	stream->usage.input_tokens =
	    llm_stream__tokens(usage, "input_tokens", stream->usage.input_tokens);
	stream->usage.output_tokens =
	    llm_stream__tokens(usage, "output_tokens", stream->usage.output_tokens);
	stream->usage.cached_tokens =
	    llm_stream__tokens(details, "cached_tokens", stream->usage.cached_tokens);
}

static int
llm_stream__responses_event(struct kagent_llm_stream *stream, const char *name, const json_t *event)
{
	const char *type = llm_stream__string_member(event, "type");
	const json_t *response = json_object_get(event, "response");
	struct llm_stream__call *call;
	int result = 0;

	if (type == NULL)
		type = name;
	llm_stream__set_once(&stream->response_id, llm_stream__string_member(response, "id"));
	llm_stream__set_once(&stream->model, llm_stream__string_member(response, "model"));
	if (strcmp(type, "response.output_text.delta") == 0) {
		result = llm_stream__append_text(stream, &stream->text,
						 json_object_get(event, "delta"), "text");
	} else if (strcmp(type, "response.reasoning_summary_text.delta") == 0 ||
		   strcmp(type, "response.reasoning_text.delta") == 0) {
		result = llm_stream__append_text(stream, &stream->reasoning,
						 json_object_get(event, "delta"), "reasoning");
	} else if (strcmp(type, "response.output_item.added") == 0) {
		result = llm_stream__responses_item(stream, event, 0);
	} else if (strcmp(type, "response.output_item.done") == 0) {
		result = llm_stream__responses_item(stream, event, 1);
	} else if (strcmp(type, "response.function_call_arguments.delta") == 0) {
		if ((result = llm_stream__responses_call_for(
			 stream, event, llm_stream__string_member(event, "item_id"), &call)) == 0)
			result = llm_stream__append_arguments(stream, call,
							      json_object_get(event, "delta"));
	} else if (strcmp(type, "response.function_call_arguments.done") == 0) {
		const char *arguments = llm_stream__string_member(event, "arguments");

		/* The whole text, authoritative over the deltas we joined. */
		if (arguments != NULL &&
		    (result = llm_stream__responses_call_for(
			 stream, event, llm_stream__string_member(event, "item_id"), &call)) == 0)
			result =
			    llm_stream__set(stream, &call->arguments, arguments,
					    KAGENT_LLM_STREAM_ARGUMENTS_CAP, "tool-call arguments");
	} else if (strcmp(type, "response.completed") == 0 ||
		   strcmp(type, "response.incomplete") == 0) {
		const char *reason = llm_stream__string_member(
		    json_object_get(response, "incomplete_details"), "reason");
		const char *status = llm_stream__string_member(response, "status");

		llm_stream__responses_usage(stream, response);
		free(stream->finish_reason);
		stream->finish_reason =
		    llm_stream__strdup_capped(reason != NULL   ? reason
					      : status != NULL ? status
							       : type + strlen("response."));
		stream->done = 1;
	} else if (strcmp(type, "response.failed") == 0) {
		llm_stream__responses_usage(stream, response);
		result = llm_stream__provider_error(stream, json_object_get(response, "error"));
	} else if (strcmp(type, "error") == 0) {
		const json_t *error = json_object_get(event, "error");

		result = llm_stream__provider_error(stream, error != NULL ? error : event);
	}
	return result;
}

/* ---- Anthropic Messages ---- */

static void
llm_stream__anthropic_usage(struct kagent_llm_stream *stream, const json_t *usage)
{
	if (!json_is_object(usage))
		return;
	/* input_tokens excludes cache reads and writes there; the neutral count includes them. */
	stream->plain_input_tokens =
	    llm_stream__tokens(usage, "input_tokens", stream->plain_input_tokens);
	stream->cache_read_tokens =
	    llm_stream__tokens(usage, "cache_read_input_tokens", stream->cache_read_tokens);
	stream->cache_creation_tokens =
	    llm_stream__tokens(usage, "cache_creation_input_tokens", stream->cache_creation_tokens);
	stream->usage.output_tokens =
	    llm_stream__tokens(usage, "output_tokens", stream->usage.output_tokens);
	if (stream->plain_input_tokens >= 0)
		stream->usage.input_tokens =
		    stream->plain_input_tokens +
		    (stream->cache_read_tokens > 0 ? stream->cache_read_tokens : 0) +
		    (stream->cache_creation_tokens > 0 ? stream->cache_creation_tokens : 0);
	if (stream->cache_read_tokens >= 0)
		stream->usage.cached_tokens = stream->cache_read_tokens;
}

/* The thinking block at index; one is made for a delta whose block start never came. */
static int
llm_stream__anthropic_thinking_part(struct kagent_llm_stream *stream, const json_t *index,
				    struct llm_stream__state_part **part_out)
{
	long long position = json_is_integer(index) ? json_integer_value(index) : -1;

	for (size_t i = stream->part_count; i > 0; i--) {
		if (stream->parts[i - 1].index == position && !stream->parts[i - 1].redacted) {
			*part_out = &stream->parts[i - 1];
			return 0;
		}
	}
	return llm_stream__new_state_part(stream, position, part_out);
}

static int
llm_stream__anthropic_block_start(struct kagent_llm_stream *stream, const json_t *event)
{
	const json_t *block = json_object_get(event, "content_block");
	const json_t *index = json_object_get(event, "index");
	const json_t *input = json_object_get(block, "input");
	const json_t *thinking = json_object_get(block, "thinking");
	const char *type = llm_stream__string_member(block, "type");
	const char *id = llm_stream__string_member(block, "id");
	const char *name = llm_stream__string_member(block, "name");
	long long position = json_is_integer(index) ? json_integer_value(index) : -1;
	struct llm_stream__state_part *part;
	struct llm_stream__call *call;
	int result = 0;

	if (type == NULL)
		goto out;
	if (strcmp(type, "text") == 0) {
		result = llm_stream__append_text(stream, &stream->text,
						 json_object_get(block, "text"), "text");
	} else if (strcmp(type, "thinking") == 0) {
		/* Anthropic wants the block back unchanged, signature included, before the
		 * tool_use blocks of the turn. */
		result = llm_stream__append_text(stream, &stream->reasoning, thinking, "reasoning");
		if (result < 0 ||
		    (result = llm_stream__new_state_part(stream, position, &part)) < 0 ||
		    (result = llm_stream__append_state(stream, &part->text, thinking)) < 0)
			goto out;
		result = llm_stream__append_state(stream, &part->signature,
						  json_object_get(block, "signature"));
	} else if (strcmp(type, "redacted_thinking") == 0) {
		if ((result = llm_stream__new_state_part(stream, position, &part)) < 0)
			goto out;
		part->redacted = 1;
		result =
		    llm_stream__append_state(stream, &part->text, json_object_get(block, "data"));
	} else if (strcmp(type, "tool_use") == 0) {
		if ((result = llm_stream__new_call(stream, position, &call)) < 0)
			goto out;
		if (id != NULL &&
		    (result = llm_stream__set(stream, &call->id, id, KAGENT_LLM_STREAM_NAME_CAP,
					      "tool-call id")) < 0)
			goto out;
		if (name != NULL &&
		    (result = llm_stream__set(stream, &call->name, name, KAGENT_LLM_STREAM_NAME_CAP,
					      "tool name")) < 0)
			goto out;
		/* Usually {} with the real input streamed as partial_json; kept for when not. */
		if (json_is_object(input) && json_object_size(input) > 0)
			call->initial_input = json_dumps(input, JSON_COMPACT);
	}
out:
	return result;
}

static int
llm_stream__anthropic_block_delta(struct kagent_llm_stream *stream, const json_t *event)
{
	const json_t *delta = json_object_get(event, "delta");
	const json_t *index = json_object_get(event, "index");
	const json_t *thinking = json_object_get(delta, "thinking");
	const char *type = llm_stream__string_member(delta, "type");
	struct llm_stream__state_part *part;
	struct llm_stream__call *call;
	int result = 0;

	if (type == NULL)
		goto out;
	if (strcmp(type, "text_delta") == 0) {
		result = llm_stream__append_text(stream, &stream->text,
						 json_object_get(delta, "text"), "text");
	} else if (strcmp(type, "thinking_delta") == 0) {
		result = llm_stream__append_text(stream, &stream->reasoning, thinking, "reasoning");
		if (result < 0 ||
		    (result = llm_stream__anthropic_thinking_part(stream, index, &part)) < 0)
			goto out;
		result = llm_stream__append_state(stream, &part->text, thinking);
	} else if (strcmp(type, "signature_delta") == 0) {
		if ((result = llm_stream__anthropic_thinking_part(stream, index, &part)) < 0)
			goto out;
		result = llm_stream__append_state(stream, &part->signature,
						  json_object_get(delta, "signature"));
	} else if (strcmp(type, "input_json_delta") == 0) {
		call = json_is_integer(index)
			   ? llm_stream__find_call_by_index(stream, json_integer_value(index))
			   : NULL;
		if (call == NULL) {
			result =
			    llm_stream__fail(stream, KAGENT_LLM_ERROR_PROTOCOL, -EBADMSG, NULL,
					     kagent_strdup("input_json_delta for a content block "
							   "that is not a tool_use block"));
			goto out;
		}
		result = llm_stream__append_arguments(stream, call,
						      json_object_get(delta, "partial_json"));
	}
	/* Unknown deltas carry nothing the agent uses. */
out:
	return result;
}

static int
llm_stream__anthropic_event(struct kagent_llm_stream *stream, const char *name, const json_t *event)
{
	const char *type = llm_stream__string_member(event, "type");
	const json_t *message = json_object_get(event, "message");
	int result = 0;

	if (type == NULL)
		type = name;
	if (strcmp(type, "message_start") == 0) {
		llm_stream__set_once(&stream->response_id,
				     llm_stream__string_member(message, "id"));
		llm_stream__set_once(&stream->model, llm_stream__string_member(message, "model"));
		llm_stream__anthropic_usage(stream, json_object_get(message, "usage"));
	} else if (strcmp(type, "content_block_start") == 0) {
		result = llm_stream__anthropic_block_start(stream, event);
	} else if (strcmp(type, "content_block_delta") == 0) {
		result = llm_stream__anthropic_block_delta(stream, event);
	} else if (strcmp(type, "message_delta") == 0) {
		const char *stop =
		    llm_stream__string_member(json_object_get(event, "delta"), "stop_reason");

		if (stop != NULL) {
			free(stream->finish_reason);
			stream->finish_reason = llm_stream__strdup_capped(stop);
		}
		llm_stream__anthropic_usage(stream, json_object_get(event, "usage"));
	} else if (strcmp(type, "message_stop") == 0) {
		stream->done = 1;
	} else if (strcmp(type, "error") == 0) {
		result = llm_stream__provider_error(stream, json_object_get(event, "error"));
	}
	/* ping and content_block_stop need nothing. */
	return result;
}

/* ---- The stream ---- */

struct kagent_llm_stream *
kagent_llm_stream_create(enum kagent_llm_format format)
{
	struct kagent_llm_stream *stream = kagent_calloc(1, sizeof *stream);

	stream->format = format;
	stream->usage.input_tokens = -1;
	stream->usage.output_tokens = -1;
	stream->usage.cached_tokens = -1;
	stream->plain_input_tokens = -1;
	stream->cache_read_tokens = -1;
	stream->cache_creation_tokens = -1;
	return stream;
}

static void
llm_stream__call_release(struct llm_stream__call *call)
{
	kagent_buffer_free(&call->id);
	kagent_buffer_free(&call->name);
	kagent_buffer_free(&call->arguments);
	free(call->item_id);
	free(call->initial_input);
}

static void
llm_stream__state_part_release(struct llm_stream__state_part *part)
{
	json_decref(part->item);
	kagent_buffer_free(&part->text);
	kagent_buffer_free(&part->signature);
}

void
kagent_llm_stream_free(struct kagent_llm_stream *stream)
{
	if (stream == NULL)
		return;
	for (size_t i = 0; i < stream->call_count; i++)
		llm_stream__call_release(&stream->calls[i]);
	free(stream->calls);
	for (size_t i = 0; i < stream->part_count; i++)
		llm_stream__state_part_release(&stream->parts[i]);
	free(stream->parts);
	kagent_buffer_free(&stream->text);
	kagent_buffer_free(&stream->reasoning);
	free(stream->finish_reason);
	free(stream->response_id);
	free(stream->model);
	free(stream->error_type);
	free(stream->error_message);
	free(stream);
}

int
kagent_llm_stream_is_done(const struct kagent_llm_stream *stream)
{
	return stream->done;
}

int
kagent_llm_stream_event(struct kagent_llm_stream *stream, const char *name, const char *data,
			size_t length, char **cause)
{
	json_t *event = NULL;
	json_error_t json_error;
	int result = 0;

	if (stream->error != KAGENT_LLM_ERROR_NONE) {
		result = stream->error_number;
		*cause = kagent_strdup(stream->error_message);
		goto out;
	}
	if (stream->done)
		goto out;
	if (name == NULL)
		name = "message";
	if (stream->format == KAGENT_LLM_FORMAT_CHAT_COMPLETIONS && length == 6 &&
	    memcmp(data, "[DONE]", 6) == 0) {
		stream->done = 1;
		goto out;
	}
	/* Anthropic's ping events may carry no JSON worth failing over. */
	if (length == 0)
		goto out;
	event = json_loadb(data, length, JSON_DECODE_ANY, &json_error);
	if (!json_is_object(event)) {
		result = llm_stream__fail(
		    stream, KAGENT_LLM_ERROR_PROTOCOL, -EBADMSG, NULL,
		    kagent_asprintf("a \"%.64s\" event is not a JSON object: %s", name,
				    event == NULL ? json_error.text : "other JSON"));
		goto failed;
	}
	/* An error inside a 200 stream: {"error": ...} from OpenAI-compatible servers,
	 * {"type": "error", "error": ...} from Anthropic (and some proxies elsewhere). */
	if (!json_is_null(json_object_get(event, "error")) &&
	    json_object_get(event, "error") != NULL &&
	    (llm_stream__string_member(event, "type") == NULL ||
	     strcmp(llm_stream__string_member(event, "type"), "error") == 0)) {
		result = llm_stream__provider_error(stream, json_object_get(event, "error"));
		goto failed;
	}
	switch (stream->format) {
	case KAGENT_LLM_FORMAT_CHAT_COMPLETIONS:
		result = llm_stream__chat_event(stream, event);
		break;
	case KAGENT_LLM_FORMAT_RESPONSES:
		result = llm_stream__responses_event(stream, name, event);
		break;
	case KAGENT_LLM_FORMAT_ANTHROPIC:
		result = llm_stream__anthropic_event(stream, name, event);
		break;
	}
failed:
	if (result < 0)
		*cause = kagent_strdup(stream->error_message);
out:
	json_decref(event);
	return result;
}

int
kagent_llm_stream_on_sse_event(void *stream, const struct kagent_sse_event *event, char **cause)
{
	return kagent_llm_stream_event(stream, event->name, event->data, event->data_length, cause);
}

static enum kagent_llm_finish
llm_stream__normalize_finish(const struct kagent_llm_stream *stream)
{
	static const struct {
		const char *word;
		enum kagent_llm_finish finish;
	} words[] = {
	    {"stop", KAGENT_LLM_FINISH_STOP},
	    {"end_turn", KAGENT_LLM_FINISH_STOP},
	    {"stop_sequence", KAGENT_LLM_FINISH_STOP},
	    {"tool_calls", KAGENT_LLM_FINISH_TOOL_CALLS},
	    {"function_call", KAGENT_LLM_FINISH_TOOL_CALLS},
	    {"tool_use", KAGENT_LLM_FINISH_TOOL_CALLS},
	    {"length", KAGENT_LLM_FINISH_LENGTH},
	    {"max_tokens", KAGENT_LLM_FINISH_LENGTH},
	    {"max_output_tokens", KAGENT_LLM_FINISH_LENGTH},
	    {"content_filter", KAGENT_LLM_FINISH_CONTENT_FILTER},
	    {"refusal", KAGENT_LLM_FINISH_CONTENT_FILTER},
	};

	if (stream->finish_reason == NULL)
		return KAGENT_LLM_FINISH_UNKNOWN;
	/* Responses says only "completed": whether tools were called tells which. */
	if (strcmp(stream->finish_reason, "completed") == 0)
		return stream->call_count > 0 ? KAGENT_LLM_FINISH_TOOL_CALLS
					      : KAGENT_LLM_FINISH_STOP;
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		if (strcmp(stream->finish_reason, words[i].word) == 0)
			return words[i].finish;
	return KAGENT_LLM_FINISH_UNKNOWN;
}

/* Moves one call into the result and parses its arguments. */
static void
llm_stream__finish_call(struct llm_stream__call *call, struct kagent_llm_tool_call *out)
{
	json_error_t json_error;
	json_t *parsed;

	if (call->arguments.length == 0)
		kagent_buffer_append(
		    &call->arguments, call->initial_input != NULL ? call->initial_input : "{}",
		    strlen(call->initial_input != NULL ? call->initial_input : "{}"));
	out->id = kagent_buffer_take(&call->id);
	out->name = kagent_buffer_take(&call->name);
	out->arguments = kagent_buffer_take(&call->arguments);
	out->arguments_json = NULL;
	out->parse_error = NULL;
	parsed = json_loads(out->arguments, JSON_DECODE_ANY, &json_error);
	if (parsed == NULL) {
		/* Worded for the model, which gets it back as the tool's result. */
		out->parse_error =
		    kagent_asprintf("the arguments of the call to tool \"%s\" are not valid JSON "
				    "(%s, at character %d); send the call again with a JSON object",
				    out->name, json_error.text, json_error.position);
	} else if (!json_is_object(parsed)) {
		out->parse_error = kagent_asprintf(
		    "the arguments of the call to tool \"%s\" are not a JSON object; "
		    "send the call again with a JSON object",
		    out->name);
		json_decref(parsed);
	} else {
		out->arguments_json = parsed;
	}
	llm_stream__call_release(call);
}

static json_t *
llm_stream__buffer_json(const struct kagent_buffer *buffer)
{
	/* The bytes came from JSON strings, so they are UTF-8 (and may hold a NUL). */
	return json_stringn(kagent_buffer_string(buffer), buffer->length);
}

/* The parts as the result's provider_state (see llm_stream.h); NULL when there are none. */
static json_t *
llm_stream__take_provider_state(struct kagent_llm_stream *stream)
{
	json_t *list;

	if (stream->part_count == 0)
		return NULL;
	list = json_array();
	for (size_t i = 0; i < stream->part_count; i++) {
		struct llm_stream__state_part *part = &stream->parts[i];

		if (part->item != NULL)
			json_array_append(list, part->item);
		else if (part->redacted)
			json_array_append_new(
			    list, json_pack("{s:s, s:o}", "type", "redacted_thinking", "data",
					    llm_stream__buffer_json(&part->text)));
		else
			json_array_append_new(
			    list, json_pack("{s:s, s:o, s:o}", "type", "thinking", "thinking",
					    llm_stream__buffer_json(&part->text), "signature",
					    llm_stream__buffer_json(&part->signature)));
		llm_stream__state_part_release(part);
	}
	free(stream->parts);
	stream->parts = NULL;
	stream->part_count = 0;
	return json_pack("{s:s, s:o}", "format", kagent_llm_format_name(stream->format),
			 stream->format == KAGENT_LLM_FORMAT_RESPONSES ? "items" : "blocks", list);
}

int
kagent_llm_stream_finish(struct kagent_llm_stream *stream, struct kagent_llm_result **result_out,
			 char **cause)
{
	static const char *const terminal[] = {
	    [KAGENT_LLM_FORMAT_CHAT_COMPLETIONS] = "data: [DONE]",
	    [KAGENT_LLM_FORMAT_RESPONSES] = "response.completed",
	    [KAGENT_LLM_FORMAT_ANTHROPIC] = "message_stop",
	};
	struct kagent_llm_result *result = kagent_calloc(1, sizeof *result);
	int status = 0;

	/* Chat Completions servers that end after finish_reason without [DONE] are accepted. */
	if (!stream->done &&
	    !(stream->format == KAGENT_LLM_FORMAT_CHAT_COMPLETIONS && stream->saw_finish))
		llm_stream__fail(stream, KAGENT_LLM_ERROR_TRUNCATED, -EPIPE, NULL,
				 kagent_asprintf("the model's stream ended early, before %s",
						 terminal[stream->format]));
	if (stream->error != KAGENT_LLM_ERROR_NONE) {
		status = stream->error_number;
		*cause = kagent_strdup(stream->error_message);
	}
	result->format = stream->format;
	result->text = kagent_buffer_take(&stream->text);
	result->reasoning = kagent_buffer_take(&stream->reasoning);
	result->finish = llm_stream__normalize_finish(stream);
	result->finish_reason = kagent_strdup(stream->finish_reason ? stream->finish_reason : "");
	result->usage = stream->usage;
	result->response_id = kagent_strdup(stream->response_id ? stream->response_id : "");
	result->model = kagent_strdup(stream->model ? stream->model : "");
	result->provider_state = llm_stream__take_provider_state(stream);
	result->error = stream->error;
	result->error_type = kagent_strdup(stream->error_type ? stream->error_type : "");
	result->error_message = stream->error_message ? kagent_strdup(stream->error_message) : NULL;
	result->tool_call_count = stream->call_count;
	result->tool_calls = kagent_calloc(stream->call_count + 1, sizeof *result->tool_calls);
	for (size_t i = 0; i < stream->call_count; i++)
		llm_stream__finish_call(&stream->calls[i], &result->tool_calls[i]);
	free(stream->calls);
	stream->calls = NULL;
	stream->call_count = 0;
	*result_out = result;
	return status;
}

void
kagent_llm_result_free(struct kagent_llm_result *result)
{
	if (result == NULL)
		return;
	for (size_t i = 0; i < result->tool_call_count; i++) {
		free(result->tool_calls[i].id);
		free(result->tool_calls[i].name);
		free(result->tool_calls[i].arguments);
		free(result->tool_calls[i].parse_error);
		json_decref(result->tool_calls[i].arguments_json);
	}
	free(result->tool_calls);
	free(result->text);
	free(result->reasoning);
	free(result->finish_reason);
	free(result->response_id);
	free(result->model);
	json_decref(result->provider_state);
	free(result->error_type);
	free(result->error_message);
	free(result);
}

const char *
kagent_llm_error_name(enum kagent_llm_error error)
{
	switch (error) {
	case KAGENT_LLM_ERROR_NONE:
		return "none";
	case KAGENT_LLM_ERROR_PROVIDER:
		return "provider_error";
	case KAGENT_LLM_ERROR_OVERLOADED:
		return "overloaded";
	case KAGENT_LLM_ERROR_PROTOCOL:
		return "protocol_error";
	case KAGENT_LLM_ERROR_TOO_LARGE:
		return "too_large";
	case KAGENT_LLM_ERROR_TRUNCATED:
		return "truncated";
	}
	return "unknown";
}

const char *
kagent_llm_finish_name(enum kagent_llm_finish finish)
{
	switch (finish) {
	case KAGENT_LLM_FINISH_UNKNOWN:
		return "unknown";
	case KAGENT_LLM_FINISH_STOP:
		return "stop";
	case KAGENT_LLM_FINISH_TOOL_CALLS:
		return "tool_calls";
	case KAGENT_LLM_FINISH_LENGTH:
		return "length";
	case KAGENT_LLM_FINISH_CONTENT_FILTER:
		return "content_filter";
	}
	return "unknown";
}
