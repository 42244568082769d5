/*
 * Unit tests for agent/records/otlp_spans.c: trace records in, OTLP JSON spans out, with ids
 * from a counter and times given, so every span is known exactly: which record opens and
 * ends each span, the GenAI attributes and their OTLP encodings, the kagent.* attributes of
 * variants and verdicts, failures, and the export request's shape.
 */
#include "kagent/records/otlp_spans.h"

#include "test.h"

#include <stdint.h>

/* Ids 01 02 03 ...: byte n of the stream is n, wrapping past 255 to 1 (never zero). */
static void
counting_random(void *bytes, size_t size, void *data)
{
	unsigned *next = data;

	for (size_t index = 0; index < size; index++) {
		((unsigned char *)bytes)[index] = (unsigned char)(*next % 255 + 1);
		(*next)++;
	}
}

/* All zeros first (invalid in OTLP, so drawn again), then the counter. */
static void
zeros_first_random(void *bytes, size_t size, void *data)
{
	unsigned *calls = data;

	if ((*calls)++ == 0) {
		memset(bytes, 0, size);
		return;
	}
	memset(bytes, 0xab, size);
}

static json_t *
record(const char *text)
{
	json_error_t error;
	json_t *value = json_loads(text, 0, &error);

	if (value == NULL)
		fprintf(stderr, "bad test record %s: %s\n", text, error.text);
	CHECK(value != NULL);
	return value;
}

/* Feeds one record (JSON text) at time seconds (as nanos from 1.8e18); returns the spans it
 * ended (a new array the caller releases). */
static json_t *
feed(struct kagent_otlp_spans *spans, const char *text, long long seconds)
{
	json_t *finished = json_array(), *value = record(text);

	kagent_otlp_spans_record(spans, value, 1800000000000000000LL + seconds * 1000000000LL,
				 finished);
	json_decref(value);
	return finished;
}

/* The AnyValue of attribute key of span, or NULL. */
static const json_t *
attribute(const json_t *span, const char *key)
{
	size_t index;
	const json_t *pair;

	json_array_foreach(json_object_get(span, "attributes"), index, pair)
	{
		if (strcmp(json_string_value(json_object_get(pair, "key")), key) == 0)
			return json_object_get(pair, "value");
	}
	return NULL;
}

static const char *
string_attribute(const json_t *span, const char *key)
{
	return json_string_value(json_object_get(attribute(span, key), "stringValue"));
}

/* An intValue, which OTLP's JSON writes as a decimal string. */
static const char *
int_attribute(const json_t *span, const char *key)
{
	return json_string_value(json_object_get(attribute(span, key), "intValue"));
}

static double
double_attribute(const json_t *span, const char *key)
{
	const json_t *value = json_object_get(attribute(span, key), "doubleValue");

	CHECK(json_is_number(value));
	return json_number_value(value);
}

static const char *
text_of(const json_t *span, const char *key)
{
	return json_string_value(json_object_get(span, key));
}

#define RUN_START                                                                                  \
	"{\"type\": \"run_start\", \"run_id\": \"20261125-0700-ab12\", \"resumed\": false, "       \
	"\"problem_name\": \"relu\", \"problem_sha256\": \"00ff\", \"kagent_version\": "           \
	"\"0.1.0\", "                                                                              \
	"\"config\": {\"provider\": {\"api\": \"anthropic\", \"model\": \"claude-x\", "            \
	"\"base_url\": \"https://api.anthropic.com\", \"temperature\": 0.5, \"top_p\": null, "     \
	"\"max_output_tokens\": 0}, \"target\": {\"speedup\": 1.5, \"baseline\": \"best\"}}, "     \
	"\"tools\": [{\"name\": \"read_problem\", \"description\": \"Returns the problem.\"}, "    \
	"{\"name\": \"evaluate\", \"description\": \"Judges a candidate.\"}]}"

/* A whole run: two turns, a retry, a variant that passes and one that fails, the end. */
static void
test_run(void)
{
	unsigned next = 0;
	struct kagent_otlp_spans *spans = kagent_otlp_spans_create(counting_random, &next);
	json_t *ended, *chat, *tool, *root, *event;
	const char *trace_id, *root_id;

	ended = feed(spans, "{\"type\": \"message\", \"role\": \"user\"}", 0);
	CHECK_INT(json_array_size(ended), 0); /* before run_start: nothing */
	json_decref(ended);
	ended = feed(spans, RUN_START, 1);
	CHECK_INT(json_array_size(ended), 0);
	json_decref(ended);
	ended = feed(spans, "{\"type\": \"request\", \"turn\": 1, \"attempt\": 1}", 2);
	json_decref(ended);
	ended = feed(spans,
		     "{\"type\": \"retry\", \"turn\": 1, \"attempt\": 1, \"status\": 429, "
		     "\"failure\": \"status\", \"reason\": \"rate limited\", \"delay_ms\": 1000}",
		     3);
	json_decref(ended);
	/* The second attempt is the same model call: no second chat span. */
	ended = feed(spans, "{\"type\": \"request\", \"turn\": 1, \"attempt\": 2}", 4);
	CHECK_INT(json_array_size(ended), 0);
	json_decref(ended);
	ended = feed(spans,
		     "{\"type\": \"reply\", \"turn\": 1, \"usage\": {\"input_tokens\": 1200, "
		     "\"output_tokens\": 300, \"cached_tokens\": 1000}, \"cost\": 0.5, \"finish\": "
		     "\"tool_calls\", \"attempts\": 2}",
		     5);
	CHECK_INT(json_array_size(ended), 1);
	chat = json_array_get(ended, 0);
	trace_id = text_of(chat, "traceId");
	/* The counter's first 16 bytes are the trace id, the next 8 the root's span id. */
	CHECK_STRING(trace_id, "0102030405060708090a0b0c0d0e0f10");
	CHECK_STRING(text_of(chat, "parentSpanId"), "1112131415161718");
	CHECK_STRING(text_of(chat, "spanId"), "191a1b1c1d1e1f20");
	CHECK_STRING(text_of(chat, "name"), "chat claude-x");
	CHECK_INT(json_integer_value(json_object_get(chat, "kind")), 3); /* CLIENT */
	CHECK_STRING(text_of(chat, "startTimeUnixNano"), "1800000002000000000");
	CHECK_STRING(text_of(chat, "endTimeUnixNano"), "1800000005000000000");
	CHECK_STRING(string_attribute(chat, "gen_ai.operation.name"), "chat");
	CHECK_STRING(string_attribute(chat, "gen_ai.provider.name"), "anthropic");
	CHECK_STRING(string_attribute(chat, "gen_ai.system"), "anthropic");
	CHECK_STRING(string_attribute(chat, "gen_ai.request.model"), "claude-x");
	CHECK_STRING(string_attribute(chat, "gen_ai.conversation.id"), "20261125-0700-ab12");
	CHECK_STRING(string_attribute(chat, "server.address"), "api.anthropic.com");
	CHECK_STRING(int_attribute(chat, "server.port"), "443");
	/* The request's settings: Anthropic gets a max_tokens even when none is configured. */
	CHECK(double_attribute(chat, "gen_ai.request.temperature") == 0.5);
	CHECK(attribute(chat, "gen_ai.request.top_p") == NULL);
	CHECK_STRING(int_attribute(chat, "gen_ai.request.max_tokens"), "16384");
	CHECK_STRING(int_attribute(chat, "gen_ai.usage.input_tokens"), "1200");
	CHECK_STRING(int_attribute(chat, "gen_ai.usage.output_tokens"), "300");
	CHECK_STRING(int_attribute(chat, "gen_ai.usage.cache_read.input_tokens"), "1000");
	CHECK_STRING(int_attribute(chat, "kagent.attempts"), "2");
	CHECK_STRING(int_attribute(chat, "kagent.turn"), "1");
	CHECK(double_attribute(chat, "kagent.cost") == 0.5);
	CHECK_STRING(json_string_value(json_object_get(
			 json_array_get(
			     json_object_get(
				 json_object_get(attribute(chat, "gen_ai.response.finish_reasons"),
						 "arrayValue"),
				 "values"),
			     0),
			 "stringValue")),
		     "tool_calls");
	event = json_array_get(json_object_get(chat, "events"), 0);
	CHECK_STRING(text_of(event, "name"), "kagent.retry");
	CHECK_STRING(text_of(event, "timeUnixNano"), "1800000003000000000");
	CHECK(json_object_get(chat, "status") == NULL); /* unset: not an error */
	json_decref(ended);

	/* v1: correct at 1.3x; the tool span carries its verdict and commit. */
	json_decref(feed(spans,
			 "{\"type\": \"tool_call\", \"turn\": 1, \"id\": \"toolu_1\", \"name\": "
			 "\"evaluate\", \"arguments\": \"{}\"}",
			 6));
	json_decref(
	    feed(spans,
		 "{\"type\": \"verdict\", \"turn\": 1, \"variant\": \"v1\", \"purpose\": "
		 "\"evaluate\", \"status\": \"correct\", \"reason\": \"ok\", \"speedup\": 1.3, "
		 "\"speedup_vs_eager\": 1.3, \"speedup_vs_compile\": 0.9, \"credited\": true}",
		 7));
	json_decref(feed(spans,
			 "{\"type\": \"commit\", \"turn\": 1, \"variant\": \"v1\", \"commit\": "
			 "\"abc123\"}",
			 7));
	ended =
	    feed(spans,
		 "{\"type\": \"tool_result\", \"turn\": 1, \"id\": \"toolu_1\", \"name\": "
		 "\"evaluate\", \"is_error\": false, \"content\": \"v1 correct\", \"gpu_seconds\": "
		 "0.25}",
		 8);
	CHECK_INT(json_array_size(ended), 1);
	tool = json_array_get(ended, 0);
	CHECK_STRING(text_of(tool, "name"), "execute_tool evaluate");
	CHECK_INT(json_integer_value(json_object_get(tool, "kind")), 1); /* INTERNAL */
	CHECK_STRING(text_of(tool, "parentSpanId"), "1112131415161718");
	CHECK_STRING(string_attribute(tool, "gen_ai.operation.name"), "execute_tool");
	CHECK_STRING(string_attribute(tool, "gen_ai.tool.name"), "evaluate");
	CHECK_STRING(string_attribute(tool, "gen_ai.tool.call.id"), "toolu_1");
	CHECK_STRING(string_attribute(tool, "gen_ai.tool.type"), "function");
	CHECK_STRING(string_attribute(tool, "gen_ai.tool.description"), "Judges a candidate.");
	CHECK_STRING(string_attribute(tool, "kagent.variant.id"), "v1");
	CHECK(attribute(tool, "kagent.variant.parent") == NULL); /* the first: no parent */
	CHECK_STRING(string_attribute(tool, "kagent.verdict.status"), "correct");
	CHECK_STRING(string_attribute(tool, "kagent.commit"), "abc123");
	CHECK(double_attribute(tool, "kagent.speedup") == 1.3);
	CHECK(double_attribute(tool, "kagent.speedup_vs_compile") == 0.9);
	CHECK(json_is_true(json_object_get(attribute(tool, "kagent.credited"), "boolValue")));
	CHECK(double_attribute(tool, "kagent.gpu_seconds") == 0.25);
	CHECK_STRING(text_of(json_array_get(json_object_get(tool, "events"), 0), "name"),
		     "kagent.verdict");
	json_decref(ended);
	json_decref(feed(spans, "{\"type\": \"turn_end\", \"turn\": 1}", 9));

	/* Turn 2: v2 is refused; its parent is v1, as its verdict record says (docs/traces.md). */
	json_decref(feed(spans, "{\"type\": \"request\", \"turn\": 2, \"attempt\": 1}", 10));
	json_decref(
	    feed(spans,
		 "{\"type\": \"reply\", \"turn\": 2, \"usage\": {\"input_tokens\": 800, "
		 "\"output_tokens\": 100, \"cached_tokens\": 0}, \"finish\": \"tool_calls\"}",
		 11));
	json_decref(feed(spans,
			 "{\"type\": \"tool_call\", \"turn\": 2, \"id\": \"toolu_2\", \"name\": "
			 "\"evaluate\"}",
			 12));
	json_decref(feed(spans,
			 "{\"type\": \"verdict\", \"turn\": 2, \"variant\": \"v2\", \"purpose\": "
			 "\"evaluate\", \"status\": \"wrong\", \"reason\": \"output differs\", "
			 "\"speedup\": 0, \"parent\": \"v1\"}",
			 13));
	ended = feed(spans,
		     "{\"type\": \"tool_result\", \"turn\": 2, \"id\": \"toolu_2\", \"name\": "
		     "\"evaluate\", \"is_error\": true, \"content\": \"v2 wrong: output differs\"}",
		     14);
	tool = json_array_get(ended, 0);
	CHECK_STRING(string_attribute(tool, "kagent.variant.parent"), "v1");
	CHECK_STRING(string_attribute(tool, "kagent.verdict.status"), "wrong");
	CHECK_STRING(string_attribute(tool, "kagent.verdict.reason"), "output differs");
	CHECK_STRING(string_attribute(tool, "error.type"), "tool_error");
	CHECK_INT(json_integer_value(json_object_get(json_object_get(tool, "status"), "code")), 2);
	CHECK_STRING(json_string_value(json_object_get(json_object_get(tool, "status"), "message")),
		     "v2 wrong: output differs");
	json_decref(ended);

	/* The end: the final check and best land on the root as events and attributes. */
	json_decref(
	    feed(spans,
		 "{\"type\": \"stop\", \"turn\": 2, \"reason\": \"budget_turns\", \"detail\": "
		 "\"2 turns of 2\"}",
		 15));
	json_decref(feed(spans,
			 "{\"type\": \"verdict\", \"turn\": 2, \"variant\": \"v1\", \"purpose\": "
			 "\"final\", \"status\": \"correct\", \"speedup\": 1.25}",
			 16));
	json_decref(
	    feed(spans,
		 "{\"type\": \"best\", \"turn\": 2, \"variant\": \"v1\", \"speedup\": 1.25, "
		 "\"previous\": null}",
		 16));
	ended =
	    feed(spans,
		 "{\"type\": \"final\", \"turn\": 2, \"variant\": \"v1\", \"commit\": \"abc123\", "
		 "\"confirmed\": true, \"stop_reason\": \"budget_turns\", \"stop_detail\": \"2 "
		 "turns of 2\", \"target_reached\": false, \"confirmation\": {\"status\": "
		 "\"correct\", \"speedup\": 1.25}, \"totals\": {\"turns\": 2, \"cost\": 0.5}}",
		 17);
	CHECK_INT(json_array_size(ended), 1);
	root = json_array_get(ended, 0);
	root_id = text_of(root, "spanId");
	CHECK_STRING(root_id, "1112131415161718");
	CHECK(json_object_get(root, "parentSpanId") == NULL);
	CHECK_STRING(text_of(root, "traceId"), "0102030405060708090a0b0c0d0e0f10");
	CHECK_STRING(text_of(root, "name"), "invoke_agent kagent");
	CHECK_INT(json_integer_value(json_object_get(root, "kind")), 1);
	CHECK_STRING(text_of(root, "startTimeUnixNano"), "1800000001000000000");
	CHECK_STRING(text_of(root, "endTimeUnixNano"), "1800000017000000000");
	CHECK_STRING(string_attribute(root, "gen_ai.operation.name"), "invoke_agent");
	CHECK_STRING(string_attribute(root, "gen_ai.agent.name"), "kagent");
	CHECK_STRING(string_attribute(root, "gen_ai.conversation.id"), "20261125-0700-ab12");
	CHECK_STRING(string_attribute(root, "kagent.problem"), "relu");
	/* The usage of the whole run: both chat spans summed. */
	CHECK_STRING(int_attribute(root, "gen_ai.usage.input_tokens"), "2000");
	CHECK_STRING(int_attribute(root, "gen_ai.usage.output_tokens"), "400");
	CHECK_STRING(string_attribute(root, "kagent.variant.id"), "v1");
	CHECK_STRING(string_attribute(root, "kagent.best.variant"), "v1");
	CHECK_STRING(string_attribute(root, "kagent.stop_reason"), "budget_turns");
	CHECK_STRING(string_attribute(root, "kagent.verdict.status"), "correct");
	CHECK(double_attribute(root, "kagent.speedup") == 1.25);
	CHECK_STRING(int_attribute(root, "kagent.turns"), "2");
	CHECK(json_object_get(root, "status") == NULL);
	/* Events: the final verdict and the best move (the problem check was never recorded). */
	CHECK_INT(json_array_size(json_object_get(root, "events")), 2);
	json_decref(ended);

	/* After final nothing more comes out, not even from a second run_start. */
	ended = feed(spans, RUN_START, 18);
	json_decref(ended);
	ended = feed(spans, "{\"type\": \"request\", \"turn\": 3}", 19);
	CHECK_INT(json_array_size(ended), 0);
	json_decref(ended);
	kagent_otlp_spans_free(spans);
}

/* A model call that fails, and a run that ends in llm_error: both spans say so. */
static void
test_llm_error(void)
{
	unsigned next = 0;
	struct kagent_otlp_spans *spans = kagent_otlp_spans_create(counting_random, &next);
	json_t *ended;
	const json_t *chat, *root;

	json_decref(feed(spans,
			 "{\"type\": \"run_start\", \"run_id\": \"r\", \"config\": {\"provider\": "
			 "{\"api\": \"responses\", \"model\": \"gpt-5\", \"base_url\": "
			 "\"http://user@[::1]:8000/v1\"}}}",
			 0));
	json_decref(feed(spans, "{\"type\": \"request\", \"turn\": 1}", 1));
	ended = feed(spans,
		     "{\"type\": \"llm_error\", \"turn\": 1, \"failure\": \"authentication\", "
		     "\"http_status\": 401, \"message\": \"refused the key\"}",
		     2);
	chat = json_array_get(ended, 0);
	CHECK_STRING(string_attribute(chat, "gen_ai.provider.name"), "openai");
	CHECK(attribute(chat, "gen_ai.request.max_tokens") == NULL); /* 0: none sent */
	CHECK_STRING(string_attribute(chat, "server.address"), "[::1]");
	CHECK_STRING(int_attribute(chat, "server.port"), "8000");
	CHECK_STRING(string_attribute(chat, "error.type"), "authentication");
	CHECK_STRING(int_attribute(chat, "kagent.http_status"), "401");
	CHECK_INT(json_integer_value(json_object_get(json_object_get(chat, "status"), "code")), 2);
	CHECK_STRING(json_string_value(json_object_get(json_object_get(chat, "status"), "message")),
		     "refused the key");
	json_decref(ended);
	ended = feed(spans,
		     "{\"type\": \"final\", \"turn\": 1, \"confirmed\": false, \"stop_reason\": "
		     "\"llm_error\", \"stop_detail\": \"refused the key\", \"confirmation\": null}",
		     3);
	root = json_array_get(ended, 0);
	CHECK_STRING(string_attribute(root, "error.type"), "llm_error");
	CHECK_INT(json_integer_value(json_object_get(json_object_get(root, "status"), "code")), 2);
	CHECK_STRING(int_attribute(root, "gen_ai.usage.input_tokens"), "0");
	CHECK(attribute(root, "kagent.variant.id") == NULL);
	json_decref(ended);
	kagent_otlp_spans_free(spans);
}

/* A run that stops without its final record: end_all closes what is open, innermost first. */
static void
test_end_all(void)
{
	unsigned next = 0;
	struct kagent_otlp_spans *spans = kagent_otlp_spans_create(counting_random, &next);
	json_t *ended = json_array();

	kagent_otlp_spans_end_all(spans, 5, ended); /* nothing open: nothing */
	CHECK_INT(json_array_size(ended), 0);
	json_decref(feed(spans, RUN_START, 0));
	json_decref(feed(spans,
			 "{\"type\": \"tool_call\", \"turn\": 1, \"id\": \"c\", \"name\": "
			 "\"profile\"}",
			 1));
	kagent_otlp_spans_end_all(spans, 1800000002000000000LL, ended);
	CHECK_INT(json_array_size(ended), 2);
	CHECK_STRING(text_of(json_array_get(ended, 0), "name"), "execute_tool profile");
	CHECK_STRING(text_of(json_array_get(ended, 1), "name"), "invoke_agent kagent");
	for (size_t index = 0; index < 2; index++) {
		const json_t *span = json_array_get(ended, index);

		CHECK_STRING(string_attribute(span, "error.type"), "unfinished");
		CHECK_STRING(text_of(span, "endTimeUnixNano"), "1800000002000000000");
	}
	json_decref(ended);
	kagent_otlp_spans_free(spans);
}

/* A failed tool's long answer is cut to 512 bytes for the status, between UTF-8 characters. */
static void
test_long_tool_error(void)
{
	unsigned next = 0;
	struct kagent_otlp_spans *spans = kagent_otlp_spans_create(counting_random, &next);
	json_t *ended = json_array(), *result;
	char content[1200];

	/* 511 ASCII bytes, then two-byte characters: byte 512 is the second half of one. */
	memset(content, 'a', 511);
	for (size_t index = 511; index + 2 < sizeof content; index += 2)
		memcpy(content + index, "\xc3\xa9", 2);
	content[sizeof content - 1] = '\0';
	if (content[sizeof content - 2] == '\xc3')
		content[sizeof content - 2] = '\0';
	json_decref(feed(spans, RUN_START, 0));
	json_decref(feed(spans, "{\"type\": \"tool_call\", \"id\": \"c\", \"name\": \"x\"}", 1));
	result =
	    json_pack("{s:s, s:b, s:s}", "type", "tool_result", "is_error", 1, "content", content);
	CHECK(result != NULL);
	kagent_otlp_spans_record(spans, result, 1800000002000000000LL, ended);
	CHECK_INT(strlen(json_string_value(json_object_get(
		      json_object_get(json_array_get(ended, 0), "status"), "message"))),
		  511);
	json_decref(result);
	json_decref(ended);
	kagent_otlp_spans_free(spans);
}

/* An all-zero id is invalid in OTLP: it is drawn again. */
static void
test_ids_never_zero(void)
{
	unsigned calls = 0;
	struct kagent_otlp_spans *spans = kagent_otlp_spans_create(zeros_first_random, &calls);
	json_t *ended = json_array();

	json_decref(feed(spans, RUN_START, 0));
	kagent_otlp_spans_end_all(spans, 1, ended);
	CHECK_STRING(text_of(json_array_get(ended, 0), "traceId"),
		     "abababababababababababababababab");
	CHECK_STRING(text_of(json_array_get(ended, 0), "spanId"), "abababababababab");
	json_decref(ended);
	kagent_otlp_spans_free(spans);

	/* With getrandom: 32 and 16 hex digits. */
	spans = kagent_otlp_spans_create(NULL, NULL);
	ended = json_array();
	json_decref(feed(spans, RUN_START, 0));
	kagent_otlp_spans_end_all(spans, 1, ended);
	CHECK_INT(strlen(text_of(json_array_get(ended, 0), "traceId")), 32);
	CHECK_INT(strspn(text_of(json_array_get(ended, 0), "traceId"), "0123456789abcdef"), 32);
	CHECK_INT(strlen(text_of(json_array_get(ended, 0), "spanId")), 16);
	json_decref(ended);
	kagent_otlp_spans_free(spans);
}

/* The export request: one resource (service.name kagent), one scope, the spans as given. */
static void
test_request(void)
{
	json_t *spans = json_pack("[{s:s}, {s:s}]", "name", "a", "name", "b");
	json_t *request = kagent_otlp_spans_request(spans);
	const json_t *resource_spans = json_array_get(json_object_get(request, "resourceSpans"), 0);
	const json_t *scope_spans =
	    json_array_get(json_object_get(resource_spans, "scopeSpans"), 0);
	const json_t *service = json_array_get(
	    json_object_get(json_object_get(resource_spans, "resource"), "attributes"), 0);

	CHECK_INT(json_array_size(json_object_get(request, "resourceSpans")), 1);
	CHECK_STRING(text_of(service, "key"), "service.name");
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(service, "value"), "stringValue")),
	    "kagent");
	CHECK_STRING(text_of(json_object_get(scope_spans, "scope"), "name"), "kagent");
	CHECK_STRING(text_of(json_object_get(scope_spans, "scope"), "version"), KAGENT_VERSION);
	CHECK(json_equal(json_object_get(scope_spans, "spans"), spans));
	json_decref(request);
	json_decref(spans);
}

static const struct kagent_test tests[] = {
    {"run", test_run},
    {"llm_error", test_llm_error},
    {"end_all", test_end_all},
    {"long_tool_error", test_long_tool_error},
    {"ids_never_zero", test_ids_never_zero},
    {"request", test_request},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
