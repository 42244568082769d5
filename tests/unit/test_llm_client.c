/*
 * Tests of one model turn end to end against tests/fixtures/llm_server.py, a
 * scripted HTTP server: the three stream formats cut into small pieces, the
 * retries (429 with Retry-After, 500, a cut stream, an overload inside the
 * stream), the failures that are not retried (quota, a bad key, a broken
 * stream), cancellation, and what the server saw (path, key header, body).
 * Every test ends with the loop closed and no handle left.
 */
#include "kagent/llm/llm_client.h"

#include "kagent/base/alloc.h"
#include "llm_server.h"
#include "test.h"

/* JSON written with ' for " so the scripts stay readable (no text here has a '). */
static char *
quotes(const char *text)
{
	char *copy = kagent_strdup(text);

	for (char *p = copy; *p != '\0'; p++)
		if (*p == '\'')
			*p = '"';
	return copy;
}

static json_t *
json_from(const char *text)
{
	char *copy = quotes(text);
	json_error_t error;
	json_t *value = json_loads(copy, 0, &error);

	if (value == NULL)
		fprintf(stderr, "bad test JSON: %s at %d: %s\n", error.text, error.position, copy);
	CHECK(value != NULL);
	free(copy);
	return value;
}

/* ---- The scripted server ---- */

static void
server_start(struct kagent_test_llm_server *server, const char *script)
{
	char *script_text = quotes(script);

	kagent_test_llm_server_start(server, script_text);
	free(script_text);
}

/* ---- One call on a fresh loop ---- */

struct run {
	struct kagent_llm_call *call;
	struct kagent_llm_call_outcome *outcome;
	int callbacks;
	int attempts_seen;
	int events_seen;
	int retries_seen;
	long retry_status;
	enum kagent_http_failure retry_failure;
	uint64_t retry_delay_ms;
	int cancel_on_retry;
	uv_timer_t cancel_timer;
	int keep_body; /* keep the first attempt's body as JSON in body */
	json_t *body;
};

static void
on_attempt(int attempt, const char *url, const struct kagent_llm_body *body, void *data)
{
	struct run *run = data;
	json_t *json = kagent_llm_body_json(body, 0);

	CHECK_INT(attempt, run->attempts_seen + 1);
	CHECK(url != NULL && json_is_object(json));
	CHECK_INT(json_array_size(json_object_get(json, "messages")) +
		      json_array_size(json_object_get(json, "input")),
		  kagent_llm_body_item_count(body));
	if (run->keep_body && attempt == 1)
		run->body = json_incref(json);
	json_decref(json);
	run->attempts_seen = attempt;
}

static void
on_event(int attempt, const char *name, const char *event_data, size_t length, void *data)
{
	struct run *run = data;

	CHECK(name != NULL && event_data != NULL && strlen(event_data) == length);
	run->events_seen++;
}

static void
on_retry(int attempt, const struct kagent_http_result *result,
	 const struct kagent_retry_decision *decision, void *data)
{
	struct run *run = data;

	CHECK(decision->retry);
	CHECK(decision->reason != NULL);
	run->retries_seen++;
	run->retry_status = result->status;
	run->retry_failure = result->failure;
	run->retry_delay_ms = decision->delay_ms;
	if (run->cancel_on_retry)
		kagent_llm_call_cancel(run->call);
}

static void
on_done(struct kagent_llm_call_outcome *outcome, void *data)
{
	struct run *run = data;

	run->callbacks++;
	run->outcome = outcome;
}

static void
cancel_now(uv_timer_t *timer)
{
	struct run *run = timer->data;

	kagent_llm_call_cancel(run->call);
	uv_close((uv_handle_t *)timer, NULL);
}

static void
provider_init(struct kagent_provider_config *provider, enum kagent_llm_format format,
	      const struct kagent_test_llm_server *server, char *base_url)
{
	memset(provider, 0, sizeof *provider);
	snprintf(base_url, 64, "http://127.0.0.1:%d%s", server->port,
		 format == KAGENT_LLM_FORMAT_ANTHROPIC ? "" : "/v1");
	provider->format = format;
	provider->base_url = base_url;
	provider->model = "m-1";
	provider->api_key = "sk-test";
	provider->temperature = -1;
	provider->top_p = -1;
	provider->connect_timeout_ms = 5000;
	provider->stall_seconds = 10;
	provider->max_retries = 3;
	provider->input_price = 2;
	provider->cached_input_price = 0.5;
	provider->output_price = 8;
}

/* Runs one call to its end; cancel_after_ms > 0 cancels it after that long. */
static void
run_call(const struct kagent_provider_config *provider, struct run *run, int cancel_after_ms)
{
	json_t *message = json_from("{'role':'user','content':'Make it fast.'}");
	json_t *tools = json_from("[{'name':'run','description':'Runs a command.'}]");
	struct kagent_llm_conversation *conversation =
	    kagent_llm_conversation_create(provider->format, "Be brief.");
	struct kagent_llm_request request = {
	    .provider = provider, .conversation = conversation, .tools = tools};
	struct kagent_llm_call_observer observer = {
	    .on_attempt = on_attempt, .on_event = on_event, .on_retry = on_retry, .data = run};
	struct kagent_http_client *client = NULL;
	char *error = NULL;
	uv_loop_t loop;

	CHECK_INT(kagent_llm_conversation_add(conversation, message, &error), 0);
	CHECK_INT(uv_loop_init(&loop), 0);
	CHECK_INT(kagent_http_client_create(&loop, &client, &error), 0);
	run->call = kagent_llm_call_start(client, &request, &observer, on_done, run, &error);
	if (run->call == NULL)
		fprintf(stderr, "start: %s\n", error);
	CHECK(run->call != NULL);
	/* The callback never runs from start. */
	CHECK_INT(run->callbacks, 0);
	if (cancel_after_ms > 0) {
		uv_timer_init(&loop, &run->cancel_timer);
		run->cancel_timer.data = run;
		uv_timer_start(&run->cancel_timer, cancel_now, (uint64_t)cancel_after_ms, 0);
	}
	while (run->callbacks == 0)
		CHECK(uv_run(&loop, UV_RUN_ONCE) != 0 || run->callbacks > 0);
	kagent_http_client_free(client);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(uv_loop_close(&loop), 0);
	CHECK_INT(run->callbacks, 1);
	CHECK(run->outcome != NULL);
	if (run->outcome->failure != KAGENT_LLM_CALL_OK)
		fprintf(stderr, "outcome: %s: %s\n",
			kagent_llm_call_failure_name(run->outcome->failure),
			run->outcome->error_message);
	kagent_llm_conversation_free(conversation);
	json_decref(message);
	json_decref(tools);
}

static int
close_to(double actual, double expected)
{
	return actual > expected - 1e-12 && actual < expected + 1e-12;
}

/* ---- The three formats, cut into pieces ---- */

static const char chat_stream[] =
    "[{'data':{'id':'chatcmpl-1','model':'m-1','choices':[{'index':0,'delta':"
    "  {'role':'assistant','content':'Hel'}}]}},"
    " {'data':{'choices':[{'index':0,'delta':{'content':'lo'}}]}},"
    " {'raw':': keep-alive\\n\\n'},"
    " {'data':{'choices':[{'index':0,'delta':{'tool_calls':[{'index':0,'id':'call_a',"
    "  'type':'function','function':{'name':'run','arguments':'{\\'cmd\\''}}]}}]}},"
    " {'data':{'choices':[{'index':0,'delta':{'tool_calls':[{'index':0,'function':"
    "  {'arguments':': \\'ls -l\\'}'}}]}}]}},"
    " {'data':{'choices':[{'index':0,'delta':{},'finish_reason':'tool_calls'}]}},"
    " {'data':{'choices':[],'usage':{'prompt_tokens':1000,'completion_tokens':200,"
    "  'prompt_tokens_details':{'cached_tokens':400}}}},"
    " {'data':'[DONE]'}]";

static void
check_tool_reply(const struct run *run, const char *text, const char *id)
{
	const struct kagent_llm_result *reply = run->outcome->reply;

	CHECK_INT(run->outcome->failure, KAGENT_LLM_CALL_OK);
	CHECK(run->outcome->error_message == NULL);
	CHECK_INT(run->outcome->http_status, 200);
	CHECK_INT(run->outcome->attempts, 1);
	CHECK(reply != NULL);
	CHECK_STRING(reply->text, text);
	CHECK_INT(reply->finish, KAGENT_LLM_FINISH_TOOL_CALLS);
	CHECK_INT(reply->tool_call_count, 1);
	CHECK_STRING(reply->tool_calls[0].id, id);
	CHECK_STRING(reply->tool_calls[0].name, "run");
	CHECK(reply->tool_calls[0].parse_error == NULL);
	CHECK_STRING(json_string_value(json_object_get(reply->tool_calls[0].arguments_json, "cmd")),
		     "ls -l");
	CHECK_INT(reply->usage.input_tokens, 1000);
	CHECK_INT(reply->usage.output_tokens, 200);
	CHECK_INT(reply->usage.cached_tokens, 400);
	/* (600 * 2 + 400 * 0.5 + 200 * 8) / 1e6 */
	CHECK(close_to(run->outcome->cost, 0.003));
	CHECK(run->outcome->seconds > 0);
}

static void
test_chat_completions_tool_call(void)
{
	char *script = kagent_asprintf("[{'chunk_bytes':7,'expect':{'path':'/v1/chat/completions',"
				       "  'headers':{'authorization':'Bearer sk-test'}},'sse':%s}]",
				       chat_stream);
	struct kagent_provider_config provider;
	struct run run = {.keep_body = 1};
	struct kagent_test_llm_server server;
	char base_url[64];
	json_t *log, *entry;

	server_start(&server, script);
	provider_init(&provider, KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, &server, base_url);
	run_call(&provider, &run, 0);
	check_tool_reply(&run, "Hello", "call_a");
	CHECK_INT(run.attempts_seen, 1);
	CHECK_INT(run.events_seen, 7);
	CHECK_INT(run.retries_seen, 0);

	log = kagent_test_llm_server_log(&server);
	CHECK_INT(json_array_size(log), 1);
	entry = json_array_get(log, 0);
	CHECK_STRING(json_string_value(json_object_get(entry, "path")), "/v1/chat/completions");
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(entry, "headers"), "authorization")),
	    "Bearer sk-test");
	CHECK_STRING(json_string_value(json_object_get(json_object_get(entry, "body"), "model")),
		     "m-1");
	CHECK(json_is_true(json_object_get(json_object_get(entry, "body"), "stream")));
	/* What the server read is the body the observer saw. */
	CHECK(json_equal(json_object_get(entry, "body"), run.body));
	json_decref(run.body);
	json_decref(log);
	kagent_llm_call_outcome_free(run.outcome);
	kagent_test_llm_server_stop(&server);
	free(script);
}

static void
test_responses_tool_call(void)
{
	static const char script[] =
	    "[{'chunk_bytes':5,'expect':{'path':'/v1/responses',"
	    "  'headers':{'authorization':'Bearer sk-test'}},'sse':["
	    " {'event':'response.created','data':{'type':'response.created',"
	    "  'response':{'id':'resp_1','model':'m-1'}}},"
	    " {'event':'response.output_text.delta','data':{'type':'response.output_text.delta',"
	    "  'output_index':0,'delta':'Hi'}},"
	    " {'event':'response.output_item.added','data':{'type':'response.output_item.added',"
	    "  'output_index':1,'item':{'type':'function_call','id':'fc_1','call_id':'call_r',"
	    "  'name':'run','arguments':''}}},"
	    " {'event':'response.function_call_arguments.delta','data':{'type':"
	    "  'response.function_call_arguments.delta','item_id':'fc_1','output_index':1,"
	    "  'delta':'{\\'cmd\\': \\'ls'}},"
	    " {'event':'response.function_call_arguments.delta','data':{'type':"
	    "  'response.function_call_arguments.delta','item_id':'fc_1','output_index':1,"
	    "  'delta':' -l\\'}'}},"
	    " {'event':'response.completed','data':{'type':'response.completed','response':"
	    "  {'id':'resp_1','status':'completed','usage':{'input_tokens':1000,"
	    "  'input_tokens_details':{'cached_tokens':400},'output_tokens':200}}}}]}]";
	struct kagent_provider_config provider;
	struct run run = {0};
	struct kagent_test_llm_server server;
	char base_url[64];

	server_start(&server, script);
	provider_init(&provider, KAGENT_LLM_FORMAT_RESPONSES, &server, base_url);
	run_call(&provider, &run, 0);
	check_tool_reply(&run, "Hi", "call_r");
	CHECK_INT(run.events_seen, 6);
	kagent_llm_call_outcome_free(run.outcome);
	kagent_test_llm_server_stop(&server);
}

static const char anthropic_stream[] =
    "[{'event':'message_start','data':{'type':'message_start','message':{'id':'msg_1',"
    "  'model':'m-1','usage':{'input_tokens':600,'cache_read_input_tokens':400,"
    "  'output_tokens':1}}}},"
    " {'event':'content_block_start','data':{'type':'content_block_start','index':0,"
    "  'content_block':{'type':'text','text':''}}},"
    " {'event':'content_block_delta','data':{'type':'content_block_delta','index':0,"
    "  'delta':{'type':'text_delta','text':'On it'}}},"
    " {'event':'content_block_start','data':{'type':'content_block_start','index':1,"
    "  'content_block':{'type':'tool_use','id':'toolu_1','name':'run','input':{}}}},"
    " {'event':'content_block_delta','data':{'type':'content_block_delta','index':1,"
    "  'delta':{'type':'input_json_delta','partial_json':'{\\'cmd\\': \\'l'}}},"
    " {'event':'content_block_delta','data':{'type':'content_block_delta','index':1,"
    "  'delta':{'type':'input_json_delta','partial_json':'s -l\\'}'}}},"
    " {'event':'content_block_stop','data':{'type':'content_block_stop','index':1}},"
    " {'event':'message_delta','data':{'type':'message_delta','delta':"
    "  {'stop_reason':'tool_use'},'usage':{'output_tokens':200}}},"
    " {'event':'message_stop','data':{'type':'message_stop'}}]";

static void
test_anthropic_tool_call(void)
{
	char *script = kagent_asprintf(
	    "[{'chunk_bytes':3,'expect':{'path':'/v1/messages',"
	    "  'headers':{'x-api-key':'sk-test','anthropic-version':'2023-06-01'}},'sse':%s}]",
	    anthropic_stream);
	struct kagent_provider_config provider;
	struct run run = {0};
	struct kagent_test_llm_server server;
	char base_url[64];
	json_t *log;

	server_start(&server, script);
	provider_init(&provider, KAGENT_LLM_FORMAT_ANTHROPIC, &server, base_url);
	run_call(&provider, &run, 0);
	check_tool_reply(&run, "On it", "toolu_1");
	CHECK_INT(run.events_seen, 9);
	log = kagent_test_llm_server_log(&server);
	CHECK(json_object_get(json_object_get(json_array_get(log, 0), "headers"),
			      "authorization") == NULL);
	json_decref(log);
	kagent_llm_call_outcome_free(run.outcome);
	kagent_test_llm_server_stop(&server);
	free(script);
}

/* ---- Retries ---- */

static const char short_reply[] =
    "[{'data':{'choices':[{'index':0,'delta':{'content':'whole'},'finish_reason':'stop'}]}},"
    " {'data':'[DONE]'}]";

/* The script with its "REPLY", if any, replaced by short_reply. */
static char *
with_reply(const char *script)
{
	const char *at = strstr(script, "REPLY");

	if (at == NULL)
		return kagent_strdup(script);
	return kagent_asprintf("%.*s%s%s", (int)(at - script), script, short_reply, at + 5);
}

static struct run
run_chat_script(const char *script_template, int max_retries, int cancel_after_ms)
{
	char *script = with_reply(script_template);
	struct kagent_provider_config provider;
	struct run run = {0};
	struct kagent_test_llm_server server;
	char base_url[64];

	server_start(&server, script);
	provider_init(&provider, KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, &server, base_url);
	provider.max_retries = max_retries;
	run_call(&provider, &run, cancel_after_ms);
	kagent_test_llm_server_stop(&server);
	free(script);
	return run;
}

static void
test_rate_limited_then_success(void)
{
	struct run run = run_chat_script(
	    "[{'status':429,'headers':{'retry-after':'1'},"
	    "  'body':{'error':{'message':'Rate limit reached','type':'rate_limit_error'}}},"
	    " {'sse':REPLY}]",
	    3, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_OK);
	CHECK_INT(run.outcome->attempts, 2);
	CHECK_INT(run.attempts_seen, 2);
	CHECK_INT(run.retries_seen, 1);
	CHECK_INT(run.retry_status, 429);
	CHECK_INT(run.retry_delay_ms, 1000);
	CHECK(run.outcome->seconds >= 1.0);
	CHECK_STRING(run.outcome->reply->text, "whole");
	kagent_llm_call_outcome_free(run.outcome);
}

static void
test_server_error_then_success(void)
{
	struct run run = run_chat_script(
	    "[{'status':500,'body':{'error':{'message':'boom'}}},{'sse':REPLY}]", 3, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_OK);
	CHECK_INT(run.outcome->attempts, 2);
	CHECK_INT(run.retries_seen, 1);
	CHECK_INT(run.retry_status, 500);
	kagent_llm_call_outcome_free(run.outcome);
}

/* The first stream breaks off after its first event; the reply holds only the second
 * attempt's text, because each attempt starts a fresh stream. */
static void
test_cut_stream_then_success(void)
{
	struct run run = run_chat_script(
	    "[{'cut_after':1,'sse':[{'data':{'choices':[{'index':0,'delta':{'content':'part'}}]}},"
	    "  {'data':{'choices':[{'index':0,'delta':{'content':'ial'}}]}}]},"
	    " {'sse':REPLY}]",
	    3, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_OK);
	CHECK_INT(run.outcome->attempts, 2);
	CHECK_INT(run.retries_seen, 1);
	CHECK_INT(run.events_seen, 3);
	CHECK_STRING(run.outcome->reply->text, "whole");
	kagent_llm_call_outcome_free(run.outcome);
}

/* A stream that ends cleanly without its terminal event is retried as a cut one. */
static void
test_truncated_stream_then_success(void)
{
	struct run run = run_chat_script(
	    "[{'sse':[{'data':{'choices':[{'index':0,'delta':{'content':'part'}}]}}]},"
	    " {'sse':REPLY}]",
	    3, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_OK);
	CHECK_INT(run.outcome->attempts, 2);
	CHECK_INT(run.retry_failure, KAGENT_HTTP_CUT);
	CHECK_STRING(run.outcome->reply->text, "whole");
	kagent_llm_call_outcome_free(run.outcome);
}

static void
test_overloaded_in_stream_then_success(void)
{
	char *script = kagent_asprintf(
	    "[{'sse':[{'event':'message_start','data':{'type':'message_start','message':"
	    "  {'id':'msg_0','usage':{'input_tokens':5,'output_tokens':1}}}},"
	    "  {'event':'error','data':{'type':'error','error':{'type':'overloaded_error',"
	    "  'message':'Overloaded'}}}]},"
	    " {'sse':%s}]",
	    anthropic_stream);
	struct kagent_provider_config provider;
	struct run run = {0};
	struct kagent_test_llm_server server;
	char base_url[64];

	server_start(&server, script);
	provider_init(&provider, KAGENT_LLM_FORMAT_ANTHROPIC, &server, base_url);
	run_call(&provider, &run, 0);
	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_OK);
	CHECK_INT(run.outcome->attempts, 2);
	CHECK_INT(run.retries_seen, 1);
	CHECK_INT(run.retry_status, 529);
	CHECK_STRING(run.outcome->reply->tool_calls[0].id, "toolu_1");
	kagent_llm_call_outcome_free(run.outcome);
	kagent_test_llm_server_stop(&server);
	free(script);
}

static void
test_retries_spent(void)
{
	struct run run =
	    run_chat_script("[{'status':503,'body':{'error':{'message':'busy'}}},"
			    " {'status':503,'body':{'error':{'message':'still busy'}}},"
			    " {'sse':REPLY}]",
			    1, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_EXHAUSTED);
	CHECK_INT(run.outcome->attempts, 2);
	CHECK_INT(run.outcome->http_status, 503);
	CHECK(run.outcome->reply == NULL);
	CHECK_CONTAINS(run.outcome->error_message, "HTTP 503: still busy");
	CHECK_CONTAINS(run.outcome->error_message, "gave up after 2 attempts");
	kagent_llm_call_outcome_free(run.outcome);
}

/* ---- Failures that are not retried ---- */

static void
test_quota_not_retried(void)
{
	struct run run = run_chat_script(
	    "[{'status':429,'body':{'error':{'message':'You exceeded your current quota',"
	    "  'type':'insufficient_quota','code':'insufficient_quota'}}},{'sse':REPLY}]",
	    3, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_QUOTA);
	CHECK_INT(run.outcome->attempts, 1);
	CHECK_INT(run.retries_seen, 0);
	CHECK_INT(run.outcome->http_status, 429);
	CHECK_CONTAINS(run.outcome->error_message, "You exceeded your current quota");
	kagent_llm_call_outcome_free(run.outcome);
}

static void
test_unauthorized(void)
{
	struct run run = run_chat_script(
	    "[{'status':401,'body':{'error':{'message':'Incorrect API key provided',"
	    "  'type':'invalid_request_error'}}},{'sse':REPLY}]",
	    3, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_AUTHENTICATION);
	CHECK_INT(run.outcome->attempts, 1);
	CHECK_INT(run.outcome->http_status, 401);
	CHECK_CONTAINS(run.outcome->error_message, "HTTP 401: Incorrect API key provided");
	kagent_llm_call_outcome_free(run.outcome);
}

/* Anthropic's error shape, and a body that is not JSON. */
static void
test_not_found_and_bad_request(void)
{
	struct run run = run_chat_script(
	    "[{'status':404,'body':{'type':'error','error':{'type':'not_found_error',"
	    "  'message':'model: m-1'}}}]",
	    3, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_NOT_FOUND);
	CHECK_CONTAINS(run.outcome->error_message, "HTTP 404: model: m-1");
	kagent_llm_call_outcome_free(run.outcome);

	run = run_chat_script("[{'status':400,'body':'bad\\nrequest \\u00e9'}]", 3, 0);
	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_BAD_REQUEST);
	CHECK_CONTAINS(run.outcome->error_message, "HTTP 400: bad request \xc3\xa9");
	kagent_llm_call_outcome_free(run.outcome);
}

static void
test_broken_stream_not_retried(void)
{
	struct run run =
	    run_chat_script("[{'sse':[{'data':{'choices':[{'index':0,'delta':{'content':'a'}}]}},"
			    "  {'data':'not json'}]},{'sse':REPLY}]",
			    3, 0);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_STREAM);
	CHECK_INT(run.outcome->attempts, 1);
	CHECK_CONTAINS(run.outcome->error_message, "not a JSON object");
	kagent_llm_call_outcome_free(run.outcome);

	run = run_chat_script("[{'body':{'choices':[]}},{'sse':REPLY}]", 3, 0);
	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_STREAM);
	CHECK_INT(run.outcome->attempts, 1);
	CHECK_CONTAINS(run.outcome->error_message, "application/json");
	kagent_llm_call_outcome_free(run.outcome);
}

/* Malformed arguments are the model's mistake, not a failed call; a missing id is made up. */
static void
test_malformed_arguments_and_missing_id(void)
{
	struct run run = run_chat_script(
	    "[{'chunk_bytes':4,'sse':["
	    "  {'data':{'choices':[{'index':0,'delta':{'tool_calls':[{'index':0,'id':'c1',"
	    "   'function':{'name':'run','arguments':'{\\'cmd\\': '}}]}}]}},"
	    "  {'data':{'choices':[{'index':0,'delta':{'tool_calls':[{'index':1,"
	    "   'function':{'name':'run','arguments':'{}'}}]}}]}},"
	    "  {'data':{'choices':[{'index':0,'delta':{},'finish_reason':'tool_calls'}]}},"
	    "  {'data':'[DONE]'}]}]",
	    3, 0);
	const struct kagent_llm_result *reply = run.outcome->reply;
	json_t *message;

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_OK);
	CHECK_INT(reply->tool_call_count, 2);
	CHECK(reply->tool_calls[0].parse_error != NULL);
	CHECK(reply->tool_calls[0].arguments_json == NULL);
	CHECK_STRING(reply->tool_calls[0].arguments, "{\"cmd\": ");
	CHECK(reply->tool_calls[1].parse_error == NULL);
	CHECK(strncmp(reply->tool_calls[1].id, "call_", 5) == 0);
	/* Usage never came: no cost. */
	CHECK_INT(reply->usage.input_tokens, -1);
	CHECK(run.outcome->cost == 0);
	message = kagent_llm_request_assistant_message(reply);
	CHECK_STRING(json_string_value(json_object_get(
			 json_array_get(json_object_get(message, "tool_calls"), 1), "id")),
		     reply->tool_calls[1].id);
	json_decref(message);
	kagent_llm_call_outcome_free(run.outcome);
}

/* ---- Cancellation ---- */

static void
test_cancel_in_flight(void)
{
	struct run run = run_chat_script("[{'delay_ms':5000,'sse':REPLY}]", 3, 100);

	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_CANCELLED);
	CHECK(run.outcome->seconds < 4);
	CHECK(run.outcome->reply == NULL);
	kagent_llm_call_outcome_free(run.outcome);
}

static void
test_cancel_while_waiting_to_retry(void)
{
	struct run run;

	memset(&run, 0, sizeof run);
	run.cancel_on_retry = 1;
	{
		char *script = with_reply(
		    "[{'status':429,'headers':{'retry-after':'30'},'body':{'error':{'message':"
		    "'slow down'}}},{'sse':REPLY}]");
		struct kagent_provider_config provider;
		struct kagent_test_llm_server server;
		char base_url[64];

		server_start(&server, script);
		provider_init(&provider, KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, &server, base_url);
		run_call(&provider, &run, 0);
		kagent_test_llm_server_stop(&server);
		free(script);
	}
	CHECK_INT(run.retries_seen, 1);
	CHECK_INT(run.outcome->failure, KAGENT_LLM_CALL_CANCELLED);
	CHECK_INT(run.outcome->attempts, 1);
	CHECK(run.outcome->seconds < 10);
	kagent_llm_call_outcome_free(run.outcome);
}

static void
test_cost(void)
{
	struct kagent_provider_config provider = {
	    .input_price = 3, .cached_input_price = 0.3, .output_price = 15};
	struct kagent_llm_usage usage = {
	    .input_tokens = 2000000, .output_tokens = 100000, .cached_tokens = 1000000};
	struct kagent_llm_usage unknown = {
	    .input_tokens = -1, .output_tokens = 10, .cached_tokens = -1};

	CHECK(close_to(kagent_llm_cost(&provider, &usage), 3 + 0.3 + 1.5));
	CHECK(close_to(kagent_llm_cost(&provider, &unknown), 10 * 15 / 1e6));
	CHECK_STRING(kagent_llm_call_failure_name(KAGENT_LLM_CALL_QUOTA), "quota");
}

static void
test_start_errors(void)
{
	struct kagent_provider_config provider = {.format = KAGENT_LLM_FORMAT_RESPONSES,
						  .model = "m"};
	json_t *message = json_from("{'role':'robot','content':'x'}");
	struct kagent_llm_conversation *conversation =
	    kagent_llm_conversation_create(provider.format, NULL);
	struct kagent_llm_request request = {.provider = &provider, .conversation = conversation};
	struct kagent_http_client *client = NULL;
	struct run run = {0};
	char *error = NULL;
	uv_loop_t loop;

	CHECK(kagent_llm_conversation_add(conversation, message, &error) < 0);
	CHECK_CONTAINS(error, "messages[0]: unknown role");
	free(error);
	error = NULL;
	CHECK_INT(uv_loop_init(&loop), 0);
	CHECK_INT(kagent_http_client_create(&loop, &client, &error), 0);
	CHECK(kagent_llm_call_start(client, &request, NULL, on_done, &run, &error) == NULL);
	CHECK_CONTAINS(error, "provider.base_url");
	free(error);
	error = NULL;
	provider.base_url = "http://127.0.0.1:9/v1";
	CHECK(kagent_llm_call_start(client, &request, NULL, on_done, &run, &error) == NULL);
	CHECK_CONTAINS(error, "messages[0]: unknown role");
	free(error);
	kagent_http_client_free(client);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(uv_loop_close(&loop), 0);
	CHECK_INT(run.callbacks, 0);
	kagent_llm_conversation_free(conversation);
	json_decref(message);
}

static const struct kagent_test tests[] = {
    {"chat_completions_tool_call", test_chat_completions_tool_call},
    {"responses_tool_call", test_responses_tool_call},
    {"anthropic_tool_call", test_anthropic_tool_call},
    {"rate_limited_then_success", test_rate_limited_then_success},
    {"server_error_then_success", test_server_error_then_success},
    {"cut_stream_then_success", test_cut_stream_then_success},
    {"truncated_stream_then_success", test_truncated_stream_then_success},
    {"overloaded_in_stream_then_success", test_overloaded_in_stream_then_success},
    {"retries_spent", test_retries_spent},
    {"quota_not_retried", test_quota_not_retried},
    {"unauthorized", test_unauthorized},
    {"not_found_and_bad_request", test_not_found_and_bad_request},
    {"broken_stream_not_retried", test_broken_stream_not_retried},
    {"malformed_arguments_and_missing_id", test_malformed_arguments_and_missing_id},
    {"cancel_in_flight", test_cancel_in_flight},
    {"cancel_while_waiting_to_retry", test_cancel_while_waiting_to_retry},
    {"cost", test_cost},
    {"start_errors", test_start_errors},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
