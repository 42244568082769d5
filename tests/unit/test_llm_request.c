/*
 * Tests of the request builder: the same conversation (a user message, an
 * assistant message with two tool calls, their two results, a user text) in
 * each wire format, compared with the JSON the provider documents; the errors;
 * the headers with and without a key; URL joining; the assistant message made
 * from a streamed reply, and its provider state (reasoning items, thinking
 * blocks) sent back to its own format only; the items of the message list, written once.
 * Every body is read as it would be sent, a few bytes at a time.
 */
#include "kagent/llm/llm_request.h"

#include "kagent/base/alloc.h"
#include "test.h"

/* JSON written with ' for " so the expected bodies stay readable (no text here has a '). */
static json_t *
json_from(const char *text)
{
	char *copy = kagent_strdup(text);
	json_error_t error;
	json_t *value;

	for (char *p = copy; *p != '\0'; p++)
		if (*p == '\'')
			*p = '"';
	value = json_loads(copy, 0, &error);
	if (value == NULL)
		fprintf(stderr, "bad test JSON: %s at %d: %s\n", error.text, error.position, copy);
	CHECK(value != NULL);
	free(copy);
	return value;
}

static void
check_json(json_t *actual, const char *expected_text)
{
	json_t *expected = json_from(expected_text);

	CHECK(actual != NULL);
	if (!json_equal(actual, expected)) {
		char *actual_dump = json_dumps(actual, JSON_INDENT(1) | JSON_SORT_KEYS);
		char *expected_dump = json_dumps(expected, JSON_INDENT(1) | JSON_SORT_KEYS);

		fprintf(stderr, "actual:\n%s\nexpected:\n%s\n", actual_dump, expected_dump);
		free(actual_dump);
		free(expected_dump);
		CHECK(!"the JSON differs");
	}
	json_decref(expected);
}

/* A request as these tests write it: the conversation as a JSON array of neutral messages. */
struct neutral_request {
	const struct kagent_provider_config *provider;
	const char *system;
	const json_t *messages;
	const json_t *tools;
};

/*
 * The body built for a request, as sent: its messages added one by one to a conversation in the
 * provider's format (an error there stays with the conversation, for the build to report), the
 * text read a few bytes at a time and parsed, and checked against kagent_llm_body_json. NULL
 * with *error set when the body cannot be built.
 */
static json_t *
request_body(const struct neutral_request *request, char **error)
{
	struct kagent_llm_conversation *conversation =
	    kagent_llm_conversation_create(request->provider->format, request->system);
	struct kagent_llm_request built = {
	    .provider = request->provider, .conversation = conversation, .tools = request->tools};
	struct kagent_llm_body *body = NULL;
	json_t *parsed = NULL, *json;
	const json_t *message;
	char *text, *cause = NULL;
	size_t index, length, offset = 0, copied;

	json_array_foreach(request->messages, index, message)
	{
		if (kagent_llm_conversation_add(conversation, message, &cause) < 0)
			CHECK(cause != NULL);
		free(cause);
		cause = NULL;
	}
	if (kagent_llm_body_build(&built, &body, error) < 0)
		goto out;
	length = kagent_llm_body_length(body);
	text = kagent_malloc(length + 1);
	/* 7 bytes at a time, as a transfer reads it, then once more from the start (a rewind). */
	while ((copied = kagent_llm_body_read(body, offset, text + offset,
					      length - offset < 7 ? length - offset : 7)) > 0)
		offset += copied;
	CHECK_INT(offset, length);
	CHECK_INT(kagent_llm_body_read(body, 0, text, length), length);
	/* Back to the middle after the end, and nothing past the end. */
	{
		char middle[16];
		size_t count = kagent_llm_body_read(body, length / 2, middle, sizeof middle);

		CHECK(count > 0 && memcmp(middle, text + length / 2, count) == 0);
		CHECK_INT(kagent_llm_body_read(body, length, middle, sizeof middle), 0);
	}
	parsed = json_loadb(text, length, 0, NULL);
	CHECK(parsed != NULL);
	json = kagent_llm_body_json(body, 0);
	CHECK(json_equal(parsed, json));
	json_decref(json);
	free(text);
out:
	kagent_llm_body_free(body);
	kagent_llm_conversation_free(conversation);
	return parsed;
}

static const char conversation[] =
    "[{'role':'user','content':'Make it fast.'},"
    " {'role':'assistant','content':'Looking.','reasoning':'plan',"
    "  'tool_calls':[{'id':'c1','name':'read_file','arguments':'{\\'path\\':\\'k.cu\\'}'},"
    "                {'id':'c2','name':'run','arguments':'not json'}]},"
    " {'role':'tool','tool_call_id':'c1','name':'read_file','content':'__global__'},"
    " {'role':'tool','tool_call_id':'c2','name':'run','content':'failed','is_error':true},"
    " {'role':'user','content':'Go on.'}]";

static const char tools[] =
    "[{'name':'read_file','description':'Reads a file.',"
    "  'parameters':{'type':'object','properties':{'path':{'type':'string'}}}},"
    " {'name':'run'}]";

static void
provider_init(struct kagent_provider_config *provider, enum kagent_llm_format format,
	      const char *base_url)
{
	memset(provider, 0, sizeof *provider);
	provider->format = format;
	provider->base_url = (char *)base_url;
	provider->model = "m-1";
	provider->temperature = -1;
	provider->top_p = -1;
}

/* The body for the shared conversation and tools; the caller releases it. */
static json_t *
build(const struct kagent_provider_config *provider)
{
	json_t *messages = json_from(conversation);
	json_t *tool_list = json_from(tools);
	struct neutral_request request = {
	    .provider = provider, .system = "Be brief.", .messages = messages, .tools = tool_list};
	char *error = NULL;
	json_t *body = request_body(&request, &error);

	if (body == NULL)
		fprintf(stderr, "error: %s\n", error);
	CHECK(body != NULL);
	CHECK(error == NULL);
	json_decref(messages);
	json_decref(tool_list);
	return body;
}

static void
test_chat_completions_body(void)
{
	struct kagent_provider_config provider;
	json_t *body;

	provider_init(&provider, KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, "http://h/v1");
	provider.temperature = 0.5;
	provider.max_output_tokens = 1000;
	provider.reasoning_effort = "high";
	body = build(&provider);
	check_json(
	    body,
	    "{'model':'m-1','stream':true,'stream_options':{'include_usage':true},"
	    " 'temperature':0.5,'max_completion_tokens':1000,'reasoning_effort':'high',"
	    " 'messages':["
	    "  {'role':'system','content':'Be brief.'},"
	    "  {'role':'user','content':'Make it fast.'},"
	    "  {'role':'assistant','content':'Looking.','tool_calls':["
	    "   {'id':'c1','type':'function','function':{'name':'read_file',"
	    "    'arguments':'{\\'path\\':\\'k.cu\\'}'}},"
	    "   {'id':'c2','type':'function','function':{'name':'run','arguments':'not json'}}]},"
	    "  {'role':'tool','tool_call_id':'c1','content':'__global__'},"
	    "  {'role':'tool','tool_call_id':'c2','content':'failed'},"
	    "  {'role':'user','content':'Go on.'}],"
	    " 'tools':["
	    "  {'type':'function','function':{'name':'read_file','description':'Reads a file.',"
	    "   'parameters':{'type':'object','properties':{'path':{'type':'string'}}}}},"
	    "  {'type':'function','function':{'name':'run','description':'',"
	    "   'parameters':{'type':'object','properties':{}}}}]}");
	json_decref(body);
}

static void
test_responses_body(void)
{
	struct kagent_provider_config provider;
	json_t *body;

	provider_init(&provider, KAGENT_LLM_FORMAT_RESPONSES, "http://h/v1");
	provider.top_p = 0.25;
	provider.max_output_tokens = 2000;
	provider.reasoning_effort = "low";
	body = build(&provider);
	check_json(
	    body,
	    "{'model':'m-1','instructions':'Be brief.','stream':true,'store':false,"
	    " 'top_p':0.25,'max_output_tokens':2000,'reasoning':{'effort':'low'},"
	    " 'include':['reasoning.encrypted_content'],"
	    " 'input':["
	    "  {'role':'user','content':'Make it fast.'},"
	    "  {'role':'assistant','content':'Looking.'},"
	    "  {'type':'function_call','call_id':'c1','name':'read_file',"
	    "   'arguments':'{\\'path\\':\\'k.cu\\'}'},"
	    "  {'type':'function_call','call_id':'c2','name':'run','arguments':'not json'},"
	    "  {'type':'function_call_output','call_id':'c1','output':'__global__'},"
	    "  {'type':'function_call_output','call_id':'c2','output':'failed'},"
	    "  {'role':'user','content':'Go on.'}],"
	    " 'tools':["
	    "  {'type':'function','name':'read_file','description':'Reads a file.','strict':false,"
	    "   'parameters':{'type':'object','properties':{'path':{'type':'string'}}}},"
	    "  {'type':'function','name':'run','description':'','strict':false,"
	    "   'parameters':{'type':'object','properties':{}}}]}");
	json_decref(body);
}

static void
test_anthropic_body(void)
{
	struct kagent_provider_config provider;
	json_t *body;

	provider_init(&provider, KAGENT_LLM_FORMAT_ANTHROPIC, "https://api.anthropic.com");
	provider.temperature = 1;
	provider.thinking_budget_tokens = 4096;
	body = build(&provider);
	check_json(
	    body,
	    "{'model':'m-1','system':'Be brief.','max_tokens':16384,'stream':true,"
	    " 'temperature':1.0,'thinking':{'type':'enabled','budget_tokens':4096},"
	    " 'messages':["
	    "  {'role':'user','content':[{'type':'text','text':'Make it fast.'}]},"
	    "  {'role':'assistant','content':["
	    "   {'type':'text','text':'Looking.'},"
	    "   {'type':'tool_use','id':'c1','name':'read_file','input':{'path':'k.cu'}},"
	    "   {'type':'tool_use','id':'c2','name':'run','input':{}}]},"
	    "  {'role':'user','content':["
	    "   {'type':'tool_result','tool_use_id':'c1','content':'__global__','is_error':false},"
	    "   {'type':'tool_result','tool_use_id':'c2','content':'failed','is_error':true},"
	    "   {'type':'text','text':'Go on.'}]}],"
	    " 'tools':["
	    "  {'name':'read_file','description':'Reads a file.',"
	    "   'input_schema':{'type':'object','properties':{'path':{'type':'string'}}}},"
	    "  {'name':'run','description':'','input_schema':{'type':'object','properties':{}}}]}");
	json_decref(body);
}

/* Nothing optional is sent when nothing is configured; no tools, no system prompt. */
static void
test_defaults_send_nothing_optional(void)
{
	static const enum kagent_llm_format formats[] = {KAGENT_LLM_FORMAT_CHAT_COMPLETIONS,
							 KAGENT_LLM_FORMAT_RESPONSES,
							 KAGENT_LLM_FORMAT_ANTHROPIC};
	static const char *const expected[] = {
	    "{'model':'m-1','stream':true,'stream_options':{'include_usage':true},"
	    " 'messages':[{'role':'user','content':'Hi'}]}",
	    "{'model':'m-1','stream':true,'store':false,'input':[{'role':'user','content':'Hi'}]}",
	    "{'model':'m-1','stream':true,'max_tokens':16384,"
	    " 'messages':[{'role':'user','content':[{'type':'text','text':'Hi'}]}]}",
	};
	json_t *messages = json_from("[{'role':'user','content':'Hi'}]");

	for (size_t i = 0; i < 3; i++) {
		struct kagent_provider_config provider;
		struct neutral_request request = {.provider = &provider, .messages = messages};
		char *error = NULL;
		json_t *body;

		provider_init(&provider, formats[i], "http://h");
		body = request_body(&request, &error);
		check_json(body, expected[i]);
		json_decref(body);
	}
	json_decref(messages);
}

/* An assistant message with neither text nor calls is dropped for Anthropic, and the user
 * messages around it merge; a user text before tool results stays after them. */
static void
test_anthropic_merges_user_turns(void)
{
	struct kagent_provider_config provider;
	json_t *messages = json_from(
	    "[{'role':'user','content':'A'},{'role':'assistant','content':''},"
	    " {'role':'user','content':'B'},"
	    " {'role':'assistant','tool_calls':[{'id':'t1','name':'run','arguments':'[1]'}]},"
	    " {'role':'user','content':'C'},{'role':'tool','tool_call_id':'t1','content':'ok'}]");
	struct neutral_request request = {.provider = &provider, .messages = messages};
	char *error = NULL;
	json_t *body;

	provider_init(&provider, KAGENT_LLM_FORMAT_ANTHROPIC, "http://h");
	body = request_body(&request, &error);
	CHECK(body != NULL);
	check_json(json_object_get(body, "messages"),
		   "[{'role':'user','content':[{'type':'text','text':'A'},"
		   "  {'type':'text','text':'B'}]},"
		   " {'role':'assistant','content':[{'type':'tool_use','id':'t1','name':'run',"
		   "  'input':{}}]},"
		   " {'role':'user','content':[{'type':'tool_result','tool_use_id':'t1',"
		   "  'content':'ok','is_error':false},{'type':'text','text':'C'}]}]");
	json_decref(body);
	json_decref(messages);
}

static void
check_body_error(enum kagent_llm_format format, const char *messages_text, const char *needle)
{
	struct kagent_provider_config provider;
	json_t *messages = json_from(messages_text);
	struct neutral_request request = {.provider = &provider, .messages = messages};
	char *error = NULL;

	provider_init(&provider, format, "http://h");
	CHECK(request_body(&request, &error) == NULL);
	CHECK_CONTAINS(error, needle);
	free(error);
	json_decref(messages);
}

static void
test_errors_name_the_message(void)
{
	for (int format = 0; format <= KAGENT_LLM_FORMAT_ANTHROPIC; format++) {
		check_body_error(format, "[{'role':'user','content':'a'},{'role':'system'}]",
				 "messages[1]: unknown role \"system\"");
		check_body_error(format,
				 "[{'role':'assistant','tool_calls':[{'id':'x','name':'n'}]},"
				 " {'role':'tool','tool_call_id':'y','content':'r'}]",
				 "messages[1]: tool result for \"y\", which no earlier");
		/* The result comes before its call. */
		check_body_error(format,
				 "[{'role':'tool','tool_call_id':'x','content':'r'},"
				 " {'role':'assistant','tool_calls':[{'id':'x','name':'n'}]}]",
				 "messages[0]: tool result for \"x\"");
		check_body_error(format, "[{'role':'user'}]", "messages[0]: a user message needs");
		check_body_error(format, "[{'role':'user','content':'a'},{'role':'tool'}]",
				 "messages[1]: a tool message needs");
		check_body_error(format, "[{'role':'assistant','tool_calls':[{'id':'x'}]}]",
				 "messages[0].tool_calls[0]: a tool call needs");
		check_body_error(format, "[{'role':'assistant','tool_calls':[{'name':'n'}]}]",
				 "messages[0].tool_calls[0]: a tool call needs");
		check_body_error(format, "[{'role':'assistant','content':3}]",
				 "messages[0]: an assistant message's \"content\"");
		check_body_error(format, "[1]", "messages[0]: not an object");
	}
}

static void
test_errors_model_and_tools(void)
{
	struct kagent_provider_config provider;
	json_t *messages = json_from("[{'role':'user','content':'a'}]");
	json_t *bad_tools = json_from("[{'name':'ok'},{'description':'no name'}]");
	struct neutral_request request = {.provider = &provider, .messages = messages};
	char *error = NULL;

	provider_init(&provider, KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, "http://h");
	provider.model = NULL;
	CHECK(request_body(&request, &error) == NULL);
	CHECK_CONTAINS(error, "provider.model");
	free(error);
	error = NULL;

	provider.model = "m";
	request.tools = bad_tools;
	CHECK(request_body(&request, &error) == NULL);
	CHECK_CONTAINS(error, "tools[1]");
	free(error);
	error = NULL;

	request.tools = NULL;
	request.system = "bad \xff byte";
	CHECK(request_body(&request, &error) == NULL);
	CHECK_CONTAINS(error, "UTF-8");
	free(error);
	json_decref(messages);
	json_decref(bad_tools);
}

static void
check_url(enum kagent_llm_format format, const char *base_url, const char *expected)
{
	struct kagent_provider_config provider;
	char *url;

	provider_init(&provider, format, base_url);
	url = kagent_llm_request_url(&provider);
	CHECK_STRING(url, expected);
	free(url);
}

static void
test_url_joining(void)
{
	struct kagent_provider_config provider;

	check_url(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, "https://api.openai.com/v1",
		  "https://api.openai.com/v1/chat/completions");
	check_url(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, "http://localhost:8000/v1//",
		  "http://localhost:8000/v1/chat/completions");
	check_url(KAGENT_LLM_FORMAT_RESPONSES, "https://api.openai.com/v1/",
		  "https://api.openai.com/v1/responses");
	check_url(KAGENT_LLM_FORMAT_ANTHROPIC, "https://api.anthropic.com",
		  "https://api.anthropic.com/v1/messages");
	check_url(KAGENT_LLM_FORMAT_ANTHROPIC, "https://api.anthropic.com/",
		  "https://api.anthropic.com/v1/messages");
	check_url(KAGENT_LLM_FORMAT_ANTHROPIC, "http://proxy/anthropic/v1/",
		  "http://proxy/anthropic/v1/messages");
	check_url(KAGENT_LLM_FORMAT_ANTHROPIC, "http://proxy/v10", "http://proxy/v10/v1/messages");
	provider_init(&provider, KAGENT_LLM_FORMAT_RESPONSES, NULL);
	CHECK(kagent_llm_request_url(&provider) == NULL);
}

static char *
joined_headers(const struct kagent_provider_config *provider)
{
	char **headers = kagent_llm_request_headers(provider);
	char *joined = kagent_strdup("");

	for (size_t i = 0; headers[i] != NULL; i++) {
		char *next = kagent_asprintf("%s%s\n", joined, headers[i]);

		free(joined);
		joined = next;
	}
	kagent_llm_request_headers_free(headers);
	return joined;
}

static void
test_headers(void)
{
	struct kagent_provider_config provider;
	char *joined;

	provider_init(&provider, KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, "http://h");
	provider.api_key = "sk-123";
	joined = joined_headers(&provider);
	CHECK_STRING(joined, "Content-Type: application/json\nAccept: text/event-stream\n"
			     "Authorization: Bearer sk-123\n");
	free(joined);

	provider.format = KAGENT_LLM_FORMAT_RESPONSES;
	provider.api_key = "";
	joined = joined_headers(&provider);
	CHECK_STRING(joined, "Content-Type: application/json\nAccept: text/event-stream\n");
	free(joined);

	provider.format = KAGENT_LLM_FORMAT_ANTHROPIC;
	provider.api_key = "ant-key";
	joined = joined_headers(&provider);
	CHECK_STRING(joined, "Content-Type: application/json\nAccept: text/event-stream\n"
			     "anthropic-version: 2023-06-01\nx-api-key: ant-key\n");
	free(joined);

	provider.api_key = NULL;
	joined = joined_headers(&provider);
	CHECK_STRING(joined, "Content-Type: application/json\nAccept: text/event-stream\n"
			     "anthropic-version: 2023-06-01\n");
	free(joined);
}

/* A reply turned into the neutral assistant message, which then goes back into a request. */
static void
test_assistant_message_from_reply(void)
{
	struct kagent_llm_tool_call calls[2] = {
	    {.id = "c1", .name = "read_file", .arguments = "{\"path\":\"a\"}"},
	    {.id = "c2", .name = "run", .arguments = "{\"cmd\":", .parse_error = "not valid JSON"},
	};
	struct kagent_llm_result reply = {
	    .text = "", .reasoning = "because", .tool_calls = calls, .tool_call_count = 2};
	struct kagent_llm_result plain = {.text = "Done.", .reasoning = ""};
	struct kagent_provider_config provider;
	json_t *message = kagent_llm_request_assistant_message(&reply);
	json_t *messages = json_array();
	struct neutral_request request = {.provider = &provider, .messages = messages};
	char *error = NULL;
	json_t *body;

	check_json(message, "{'role':'assistant','content':'','reasoning':'because','tool_calls':["
			    " {'id':'c1','name':'read_file','arguments':'{\\'path\\':\\'a\\'}'},"
			    " {'id':'c2','name':'run','arguments':'{\\'cmd\\':'}]}");
	json_array_append_new(messages, json_from("{'role':'user','content':'go'}"));
	json_array_append_new(messages, message);
	json_array_append_new(messages,
			      json_from("{'role':'tool','tool_call_id':'c2','content':'bad'}"));
	provider_init(&provider, KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, "http://h");
	body = request_body(&request, &error);
	check_json(json_array_get(json_object_get(body, "messages"), 1),
		   "{'role':'assistant','content':null,'tool_calls':["
		   " {'id':'c1','type':'function','function':{'name':'read_file',"
		   "  'arguments':'{\\'path\\':\\'a\\'}'}},"
		   " {'id':'c2','type':'function','function':{'name':'run',"
		   "  'arguments':'{\\'cmd\\':'}}]}");
	json_decref(body);
	json_decref(messages);

	message = kagent_llm_request_assistant_message(&plain);
	check_json(message, "{'role':'assistant','content':'Done.'}");
	json_decref(message);
}

/* The conversation after a reply with provider state: the user's request, the reply, its result. */
static json_t *
conversation_after(const struct kagent_llm_result *reply)
{
	json_t *messages = json_array();

	json_array_append_new(messages, json_from("{'role':'user','content':'Make it fast.'}"));
	json_array_append_new(messages, kagent_llm_request_assistant_message(reply));
	json_array_append_new(messages,
			      json_from("{'role':'tool','tool_call_id':'c1','content':'code'}"));
	return messages;
}

/* The body for messages in provider's format; the caller releases it. */
static json_t *
body_for(const struct kagent_provider_config *provider, const json_t *messages)
{
	struct neutral_request request = {.provider = provider, .messages = messages};
	char *error = NULL;
	json_t *body = request_body(&request, &error);

	if (body == NULL)
		fprintf(stderr, "error: %s\n", error);
	CHECK(body != NULL);
	return body;
}

/* Formats other than the state's send the same body as for the conversation without it. */
static void
check_state_ignored(enum kagent_llm_format format, const json_t *messages)
{
	struct kagent_provider_config provider;
	json_t *stripped = json_deep_copy(messages);
	json_t *with, *without;

	CHECK_INT(json_object_del(json_array_get(stripped, 1), "provider_state"), 0);
	provider_init(&provider, format, "http://h");
	provider.reasoning_effort = "high";
	with = body_for(&provider, messages);
	without = body_for(&provider, stripped);
	if (!json_equal(with, without)) {
		char *dump = json_dumps(with, JSON_INDENT(1) | JSON_SORT_KEYS);

		fprintf(stderr, "provider_state changed the body:\n%s\n", dump);
		free(dump);
	}
	CHECK(json_equal(with, without));
	json_decref(with);
	json_decref(without);
	json_decref(stripped);
}

/* Responses: the reply's reasoning items go back before its text and calls, in order; "include"
 * asks for them only from a reasoning model. */
static void
test_responses_reasoning_round_trip(void)
{
	struct kagent_llm_tool_call calls[1] = {
	    {.id = "c1", .name = "read_file", .arguments = "{}"},
	};
	json_t *state = json_from(
	    "{'format':'responses','items':["
	    " {'type':'reasoning','id':'rs_1','summary':[{'type':'summary_text','text':'Plan.'}],"
	    "  'encrypted_content':'gAAAAB1'},"
	    " {'type':'reasoning','id':'rs_2','summary':[]},"
	    " {'type':'reasoning','id':'rs_3','summary':[],'encrypted_content':'gAAAAB3'}]}");
	struct kagent_llm_result reply = {.text = "Reading.",
					  .reasoning = "Plan.",
					  .tool_calls = calls,
					  .tool_call_count = 1,
					  .provider_state = state};
	struct kagent_provider_config provider;
	json_t *messages = conversation_after(&reply);
	json_t *body;

	/* The neutral message holds the state unchanged (the trace and --resume keep it). */
	CHECK(json_equal(json_object_get(json_array_get(messages, 1), "provider_state"), state));
	provider_init(&provider, KAGENT_LLM_FORMAT_RESPONSES, "http://h");
	provider.reasoning_effort = "medium";
	body = body_for(&provider, messages);
	check_json(json_object_get(body, "include"), "['reasoning.encrypted_content']");
	/* rs_2 has no encrypted_content: with store false its id alone names nothing. */
	check_json(
	    json_object_get(body, "input"),
	    "[{'role':'user','content':'Make it fast.'},"
	    " {'type':'reasoning','id':'rs_1','summary':[{'type':'summary_text','text':'Plan.'}],"
	    "  'encrypted_content':'gAAAAB1'},"
	    " {'type':'reasoning','id':'rs_3','summary':[],'encrypted_content':'gAAAAB3'},"
	    " {'role':'assistant','content':'Reading.'},"
	    " {'type':'function_call','call_id':'c1','name':'read_file','arguments':'{}'},"
	    " {'type':'function_call_output','call_id':'c1','output':'code'}]");
	json_decref(body);

	/* No reasoning effort: not a reasoning model as far as kagent knows, no "include". */
	provider.reasoning_effort = NULL;
	body = body_for(&provider, messages);
	CHECK(json_object_get(body, "include") == NULL);
	json_decref(body);

	check_state_ignored(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, messages);
	check_state_ignored(KAGENT_LLM_FORMAT_ANTHROPIC, messages);
	json_decref(messages);
	json_decref(state);
}

/* Anthropic: the turn's thinking and redacted_thinking blocks go back first, unchanged. */
static void
test_anthropic_thinking_round_trip(void)
{
	struct kagent_llm_tool_call calls[1] = {
	    {.id = "c1", .name = "read_file", .arguments = "{\"path\":\"k.cu\"}"},
	};
	json_t *state =
	    json_from("{'format':'anthropic','blocks':["
		      " {'type':'thinking','thinking':'Read it.','signature':'EqQBCgIYAhIM'},"
		      " {'type':'redacted_thinking','data':'EmwKAhgBEgy3va'}]}");
	struct kagent_llm_result reply = {.text = "Let me look.",
					  .reasoning = "Read it.",
					  .tool_calls = calls,
					  .tool_call_count = 1,
					  .provider_state = state};
	struct kagent_provider_config provider;
	json_t *messages = conversation_after(&reply);
	json_t *body;

	provider_init(&provider, KAGENT_LLM_FORMAT_ANTHROPIC, "http://h");
	provider.thinking_budget_tokens = 2048;
	body = body_for(&provider, messages);
	check_json(json_object_get(body, "messages"),
		   "[{'role':'user','content':[{'type':'text','text':'Make it fast.'}]},"
		   " {'role':'assistant','content':["
		   "  {'type':'thinking','thinking':'Read it.','signature':'EqQBCgIYAhIM'},"
		   "  {'type':'redacted_thinking','data':'EmwKAhgBEgy3va'},"
		   "  {'type':'text','text':'Let me look.'},"
		   "  {'type':'tool_use','id':'c1','name':'read_file','input':{'path':'k.cu'}}]},"
		   " {'role':'user','content':[{'type':'tool_result','tool_use_id':'c1',"
		   "  'content':'code','is_error':false}]}]");
	json_decref(body);

	check_state_ignored(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, messages);
	check_state_ignored(KAGENT_LLM_FORMAT_RESPONSES, messages);
	json_decref(messages);
	json_decref(state);
}

static void
test_provider_state_errors(void)
{
	for (int format = 0; format <= KAGENT_LLM_FORMAT_ANTHROPIC; format++) {
		check_body_error(format, "[{'role':'assistant','content':'a','provider_state':3}]",
				 "messages[0]: \"provider_state\" must be an object");
		check_body_error(
		    format, "[{'role':'assistant','content':'a','provider_state':{'items':[]}}]",
		    "messages[0]: \"provider_state\" must be an object with a "
		    "string \"format\"");
	}
	check_body_error(
	    KAGENT_LLM_FORMAT_ANTHROPIC,
	    "[{'role':'assistant','content':'a',"
	    "  'provider_state':{'format':'anthropic','blocks':[{'type':'thinking'},3]}}]",
	    "messages[0]: \"provider_state\" of format anthropic needs \"blocks\", an "
	    "array of objects with a \"type\"");
	check_body_error(KAGENT_LLM_FORMAT_RESPONSES,
			 "[{'role':'assistant','content':'a',"
			 "  'provider_state':{'format':'responses'}}]",
			 "needs \"items\"");
}

/* The hashes of a body's items, and its JSON from item first on. */
static size_t
items_of(const struct kagent_provider_config *provider,
	 const struct kagent_llm_conversation *written, uint64_t *hashes, size_t first,
	 json_t **json_out)
{
	struct kagent_llm_request request = {.provider = provider, .conversation = written};
	struct kagent_llm_body *body = NULL;
	char *error = NULL;
	size_t count;

	CHECK_INT(kagent_llm_body_build(&request, &body, &error), 0);
	count = kagent_llm_body_item_count(body);
	for (size_t i = 0; i < count; i++)
		hashes[i] = kagent_llm_body_item_hash(body, i);
	*json_out = kagent_llm_body_json(body, first);
	kagent_llm_body_free(body);
	return count;
}

#define SYSTEM "Be \"brief\" \\ /\n\t\r\b\f\x01\x1f caf\xc3\xa9 \xf0\x9f\x98\x80."

/* Items once written stay as they are (their hashes with them), except an Anthropic user
 * message that later user content joins; the JSON from an item on carries only the rest. */
static void
test_items_written_once(void)
{
	static const char *const messages[] = {
	    "{'role':'user','content':'A'}",
	    "{'role':'assistant','tool_calls':[{'id':'t1','name':'run','arguments':'{}'}]}",
	    "{'role':'tool','tool_call_id':'t1','content':'ok'}",
	    "{'role':'user','content':'B'}",
	};
	struct kagent_provider_config provider;
	struct kagent_llm_conversation *anthropic, *chat;
	uint64_t before[8], after[8];
	json_t *message, *json;
	char *error = NULL;

	provider_init(&provider, KAGENT_LLM_FORMAT_ANTHROPIC, "http://h");
	/* A system prompt with what JSON escapes: the trace's JSON reads it back whole. */
	anthropic = kagent_llm_conversation_create(KAGENT_LLM_FORMAT_ANTHROPIC, SYSTEM);
	for (size_t i = 0; i < 3; i++) {
		message = json_from(messages[i]);
		CHECK_INT(kagent_llm_conversation_add(anthropic, message, &error), 0);
		json_decref(message);
	}
	CHECK_INT(items_of(&provider, anthropic, before, 0, &json), 3);
	CHECK_STRING(json_string_value(json_object_get(json, "system")), SYSTEM);
	json_decref(json);
	message = json_from(messages[3]);
	CHECK_INT(kagent_llm_conversation_add(anthropic, message, &error), 0);
	json_decref(message);
	CHECK_INT(items_of(&provider, anthropic, after, 2, &json), 3);
	CHECK(after[0] == before[0] && after[1] == before[1]);
	CHECK(after[2] != before[2]);
	check_json(json_object_get(json, "messages"),
		   "[{'role':'user','content':[{'type':'tool_result','tool_use_id':'t1',"
		   "  'content':'ok','is_error':false},{'type':'text','text':'B'}]}]");
	json_decref(json);

	/* Chat Completions: the system prompt is the first item; each message adds one. */
	provider.format = KAGENT_LLM_FORMAT_CHAT_COMPLETIONS;
	chat = kagent_llm_conversation_create(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, "S");
	for (size_t i = 0; i < 4; i++) {
		message = json_from(messages[i]);
		CHECK_INT(kagent_llm_conversation_add(chat, message, &error), 0);
		json_decref(message);
		CHECK_INT(items_of(&provider, chat, after, i + 1, &json), i + 2);
		CHECK_INT(json_array_size(json_object_get(json, "messages")), 1);
		json_decref(json);
		if (i > 0)
			CHECK(after[i] == before[i]);
		memcpy(before, after, sizeof before);
	}
	/* A conversation written for another format is refused. */
	provider.format = KAGENT_LLM_FORMAT_RESPONSES;
	{
		struct kagent_llm_request request = {.provider = &provider, .conversation = chat};
		struct kagent_llm_body *body = NULL;

		CHECK(kagent_llm_body_build(&request, &body, &error) < 0);
		CHECK_CONTAINS(error, "written for chat_completions");
		free(error);
	}
	kagent_llm_conversation_free(anthropic);
	kagent_llm_conversation_free(chat);
}

static const struct kagent_test tests[] = {
    {"chat_completions_body", test_chat_completions_body},
    {"responses_body", test_responses_body},
    {"anthropic_body", test_anthropic_body},
    {"defaults_send_nothing_optional", test_defaults_send_nothing_optional},
    {"anthropic_merges_user_turns", test_anthropic_merges_user_turns},
    {"errors_name_the_message", test_errors_name_the_message},
    {"errors_model_and_tools", test_errors_model_and_tools},
    {"url_joining", test_url_joining},
    {"headers", test_headers},
    {"assistant_message_from_reply", test_assistant_message_from_reply},
    {"responses_reasoning_round_trip", test_responses_reasoning_round_trip},
    {"anthropic_thinking_round_trip", test_anthropic_thinking_round_trip},
    {"provider_state_errors", test_provider_state_errors},
    {"items_written_once", test_items_written_once},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
