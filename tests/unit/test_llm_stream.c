/*
 * Tests of the streamed-reply accumulator: recorded streams of the three wire
 * formats, fed through the SSE parser in every chunking we can afford, must
 * give the same result as when fed whole.
 */
#include "kagent/llm/llm_stream.h"

#include "kagent/base/alloc.h"
#include "kagent/llm/sse.h"
#include "test.h"

#include <errno.h>

/* ---- Recorded streams (written by hand after the providers' documentation) ---- */

static const char chat_tools[] =
    "data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":"
    "{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo "
    "\\u00e9\\n\"}}]}\n\n"
    ": keep-alive\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\","
    "\"type\":\"function\",\"function\":{\"name\":\"run\",\"arguments\":\"\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
    "{\"arguments\":\"{\\\"cmd\\\": \\\"l\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\","
    "\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
    "{\"arguments\":\"s\\\"}\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":"
    "{\"arguments\":\"\\\"a.c\\\"}\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,"
    "\"prompt_tokens_details\":{\"cached_tokens\":64}}}\n\n"
    "data: [DONE]\n\n";

/* OpenAI-compatible servers: no index, whole call at once, arguments as an object,
 * repeated ids, index 0 reused for a second call, no [DONE]. */
static const char chat_lenient[] =
    "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"plan\",\"tool_calls\":[{\"index\":"
    "0,\"id\":\"c1\",\"function\":{\"name\":\"a\",\"arguments\":{\"x\":1}}}]}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c2\",\"function\":{\"name\":\"b\","
    "\"arguments\":\"{\\\"y\\\"\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c2\",\"function\":{\"name\":\"b\","
    "\"arguments\":\":2}\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c3\",\"function\":"
    "{\"name\":\"c\",\"arguments\":\"{}\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n";

static const char chat_malformed[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\","
    "\"function\":{\"name\":\"run\",\"arguments\":\"{\\\"cmd\\\": \\\"ls\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c2\","
    "\"function\":{\"name\":\"sum\",\"arguments\":\"[1, 2]\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":\"c3\","
    "\"function\":{\"name\":\"now\"}}]}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
    "data: [DONE]\n\n";

static const char chat_error[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\n"
    "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_error\","
    "\"code\":\"rate_limit\"}}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ignored\"}}]}\n\n";

static const char chat_cut[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" wor";

static const char responses_tools[] =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5\","
    "\"status\":\"in_progress\"}}\n\n"
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":"
    "\"reasoning\",\"id\":\"rs_1\"}}\n\n"
    "event: response.reasoning_summary_text.delta\n"
    "data: {\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":\"rs_1\","
    "\"output_index\":0,\"delta\":\"Think\"}\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":1,"
    "\"content_index\":0,\"delta\":\"I will \"}\n\n"
    ": keep-alive\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":1,"
    "\"content_index\":0,\"delta\":\"look.\"}\n\n"
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"output_index\":2,\"item\":{\"type\":"
    "\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"read_file\","
    "\"arguments\":\"\"}}\n\n"
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"output_index\":3,\"item\":{\"type\":"
    "\"function_call\",\"id\":\"fc_2\",\"call_id\":\"call_2\",\"name\":\"run\","
    "\"arguments\":\"\"}}\n\n"
    "event: response.function_call_arguments.delta\n"
    "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\","
    "\"output_index\":2,\"delta\":\"{\\\"path\\\":\"}\n\n"
    "event: response.function_call_arguments.delta\n"
    "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_2\","
    "\"output_index\":3,\"delta\":\"{\\\"cmd\\\":\\\"make\\\"}\"}\n\n"
    "event: response.function_call_arguments.delta\n"
    "data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":2,"
    "\"delta\":\"\\\"k.cu\\\"}\"}\n\n"
    "event: response.function_call_arguments.done\n"
    "data: {\"type\":\"response.function_call_arguments.done\",\"item_id\":\"fc_2\","
    "\"output_index\":3,\"arguments\":\"{\\\"cmd\\\":\\\"make\\\"}\"}\n\n"
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"output_index\":4,\"item\":{\"type\":"
    "\"function_call\",\"id\":\"fc_3\",\"call_id\":\"call_3\",\"name\":\"wait\"}}\n\n"
    "event: response.output_item.done\n"
    "data: {\"type\":\"response.output_item.done\",\"output_index\":4,\"item\":{\"type\":"
    "\"function_call\",\"id\":\"fc_3\",\"call_id\":\"call_3\",\"name\":\"wait\","
    "\"arguments\":\"{\\\"s\\\":3}\"}}\n\n"
    "event: response.completed\n"
    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":"
    "\"completed\",\"usage\":{\"input_tokens\":500,\"input_tokens_details\":{\"cached_tokens\":"
    "128},\"output_tokens\":42}}}\n\n";

/* A reasoning model asked for its encrypted reasoning (include reasoning.encrypted_content). */
static const char responses_reasoning[] =
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":"
    "\"reasoning\",\"id\":\"rs_1\",\"summary\":[]}}\n\n"
    "event: response.reasoning_summary_text.delta\n"
    "data: {\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":\"rs_1\","
    "\"output_index\":0,\"delta\":\"Read first.\"}\n\n"
    "event: response.output_item.done\n"
    "data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":"
    "\"reasoning\",\"id\":\"rs_1\",\"summary\":[{\"type\":\"summary_text\",\"text\":"
    "\"Read first.\"}],\"encrypted_content\":\"gAAAAB-secret==\"}}\n\n"
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"type\":"
    "\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"read_file\","
    "\"arguments\":\"\"}}\n\n"
    "event: response.function_call_arguments.delta\n"
    "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\","
    "\"output_index\":1,\"delta\":\"{\\\"path\\\":\\\"k.cu\\\"}\"}\n\n"
    "event: response.output_item.done\n"
    "data: {\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":"
    "\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"read_file\","
    "\"arguments\":\"{\\\"path\\\":\\\"k.cu\\\"}\",\"status\":\"completed\"}}\n\n"
    "event: response.output_item.done\n"
    "data: {\"type\":\"response.output_item.done\",\"output_index\":2,\"item\":{\"type\":"
    "\"reasoning\",\"id\":\"rs_2\",\"summary\":[],\"encrypted_content\":\"gAAAAB-more\"}}"
    "\n\n"
    "event: response.completed\n"
    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_2\",\"status\":"
    "\"completed\",\"usage\":{\"input_tokens\":50,\"output_tokens\":9}}}\n\n";

static const char responses_error[] =
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hi\"}\n\n"
    "event: error\n"
    "data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"The server had an "
    "error\"}\n\n";

static const char responses_cut[] =
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":"
    "\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"run\",\"arguments\":"
    "\"\"}}\n\n"
    "event: response.function_call_arguments.delta\n"
    "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\","
    "\"output_index\":0,\"delta\":\"{\\\"cmd\\\":\"}\n\n";

static const char anthropic_tools[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
    "\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,"
    "\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90,"
    "\"cache_creation_input_tokens\":0,\"output_tokens\":1}}}\n\n"
    "event: ping\n"
    "data: {\"type\": \"ping\"}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
    "\"thinking\",\"thinking\":\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\","
    "\"thinking\":\"Hmm.\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
    "\"signature_delta\",\"signature\":\"c2ln\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\","
    "\"text\":\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\","
    "\"text\":\"Let me \"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\","
    "\"text\":\"check.\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":"
    "\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_file\",\"input\":{}}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":"
    "\"input_json_delta\",\"partial_json\":\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":"
    "\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"a\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":"
    "\"input_json_delta\",\"partial_json\":\".cu\\\"}\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":"
    "\"tool_use\",\"id\":\"toolu_2\",\"name\":\"list\",\"input\":{}}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":3}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\","
    "\"stop_sequence\":null},\"usage\":{\"output_tokens\":55}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

/* Extended thinking with tool use: a signed thinking block and a redacted one before the call. */
static const char anthropic_thinking[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_4\",\"model\":"
    "\"claude-x\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
    "\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\","
    "\"thinking\":\"Read the \"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\","
    "\"thinking\":\"kernel.\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
    "\"signature_delta\",\"signature\":\"EqQBCgIYAhIM\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":"
    "\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3va\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":"
    "\"tool_use\",\"id\":\"toolu_5\",\"name\":\"read_file\",\"input\":{}}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":"
    "\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"k.cu\\\"}\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},"
    "\"usage\":{\"output_tokens\":30}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

static const char anthropic_overloaded[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"usage\":{"
    "\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
    "\"text\":\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
    "\"text\":\"Part\"}}\n\n"
    "event: error\n"
    "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
    "\"Overloaded\"}}\n\n";

static const char anthropic_cut[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_3\",\"usage\":{"
    "\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
    "\"tool_use\",\"id\":\"toolu_9\",\"name\":\"run\",\"input\":{}}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
    "\"input_json_delta\",\"partial_json\":\"{\\\"cmd\\\": \\\"ma\"}}\n\n";

/* ---- Driving the parser ---- */

struct run {
	int status; /* kagent_llm_stream_finish's return */
	int feed_status;
	struct kagent_llm_result *result;
	char *cause;
};

/* Feeds text through a fresh SSE parser and stream, cut at the given points. */
static void
run_stream(enum kagent_llm_format format, const char *text, size_t length, const size_t *cuts,
	   size_t cut_count, struct run *run)
{
	struct kagent_llm_stream *stream = kagent_llm_stream_create(format);
	struct kagent_sse *sse = kagent_sse_create(0, 0, kagent_llm_stream_on_sse_event, stream);
	char *cause = NULL;
	size_t start = 0;

	memset(run, 0, sizeof *run);
	for (size_t i = 0; i <= cut_count && run->feed_status == 0; i++) {
		size_t stop = i < cut_count ? cuts[i] : length;

		run->feed_status = kagent_sse_feed(sse, text + start, stop - start, &cause);
		start = stop;
	}
	if (run->feed_status == 0)
		run->feed_status = kagent_sse_finish(sse, NULL, &cause);
	free(cause);
	run->status = kagent_llm_stream_finish(stream, &run->result, &run->cause);
	kagent_sse_free(sse);
	kagent_llm_stream_free(stream);
}

static void
run_release(struct run *run)
{
	kagent_llm_result_free(run->result);
	free(run->cause);
}

/* Everything in a result as one string, so two runs compare with strcmp. */
static char *
describe(const struct run *run)
{
	const struct kagent_llm_result *r = run->result;
	char *state = r->provider_state != NULL
			  ? json_dumps(r->provider_state, JSON_COMPACT | JSON_SORT_KEYS)
			  : NULL;
	char *text = kagent_asprintf(
	    "status=%d feed=%d text=[%s] reasoning=[%s] finish=%s/%s usage=%lld/%lld/%lld id=%s "
	    "model=%s error=%s/%s/%s cause=%s state=%s calls=%zu",
	    run->status, run->feed_status, r->text, r->reasoning, kagent_llm_finish_name(r->finish),
	    r->finish_reason, r->usage.input_tokens, r->usage.output_tokens, r->usage.cached_tokens,
	    r->response_id, r->model, kagent_llm_error_name(r->error), r->error_type,
	    r->error_message ? r->error_message : "-", run->cause ? run->cause : "-",
	    state ? state : "-", r->tool_call_count);

	free(state);

	for (size_t i = 0; i < r->tool_call_count; i++) {
		const struct kagent_llm_tool_call *call = &r->tool_calls[i];
		char *next = kagent_asprintf(
		    "%s\n  call %s %s %s parsed=%d %s", text, call->id, call->name, call->arguments,
		    call->arguments_json != NULL, call->parse_error ? call->parse_error : "-");

		free(text);
		text = next;
	}
	return text;
}

static void
check_same(const char *expected, const struct run *run, const char *how, size_t where)
{
	char *got = describe(run);

	if (strcmp(got, expected) != 0)
		fprintf(stderr, "chunking %s (%zu) differs:\n%s\nexpected:\n%s\n", how, where, got,
			expected);
	CHECK_STRING(got, expected);
	free(got);
}

/* Replaces every \n with \r\n. */
static char *
to_crlf(const char *text)
{
	size_t length = strlen(text), lines = 0, j = 0;
	char *out;

	for (size_t i = 0; i < length; i++)
		lines += text[i] == '\n';
	out = kagent_malloc(length + lines + 1);
	for (size_t i = 0; i < length; i++) {
		if (text[i] == '\n')
			out[j++] = '\r';
		out[j++] = text[i];
	}
	out[j] = '\0';
	return out;
}

/*
 * Feeds the stream whole, then cut at every single point, one byte at a time and
 * in random chunks, with LF and with CRLF endings; every run must describe the
 * same result. Returns the whole-stream run for the caller's own checks.
 */
static void
check_split_independent(enum kagent_llm_format format, const char *text, struct run *whole)
{
	char *crlf = to_crlf(text);
	const char *variants[2] = {text, crlf};
	char *expected;

	run_stream(format, text, strlen(text), NULL, 0, whole);
	expected = describe(whole);
	for (int v = 0; v < 2; v++) {
		const char *variant = variants[v];
		size_t length = strlen(variant);
		size_t *cuts = kagent_calloc(length + 1, sizeof *cuts);
		struct run run;

		for (size_t cut = 0; cut <= length; cut++) {
			run_stream(format, variant, length, &cut, 1, &run);
			check_same(expected, &run, "one cut", cut);
			run_release(&run);
		}
		for (size_t i = 0; i < length; i++)
			cuts[i] = i + 1;
		run_stream(format, variant, length, cuts, length - 1, &run);
		check_same(expected, &run, "byte by byte", 0);
		run_release(&run);
		srand(777);
		for (int round = 0; round < 100; round++) {
			size_t count = 0, position = 0;

			for (;;) {
				position += 1 + (size_t)(rand() % 40);
				if (position >= length)
					break;
				cuts[count++] = position;
			}
			run_stream(format, variant, length, cuts, count, &run);
			check_same(expected, &run, "random", (size_t)round);
			run_release(&run);
		}
		free(cuts);
	}
	free(expected);
	free(crlf);
}

/* ---- Chat Completions ---- */

static void
test_chat_text_and_parallel_tool_calls(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, chat_tools, &run);
	r = run.result;
	CHECK_INT(run.status, 0);
	CHECK_INT(run.feed_status, 0);
	CHECK_STRING(r->text, "Hello \xc3\xa9\n");
	CHECK_STRING(r->reasoning, "");
	CHECK_INT(r->finish, KAGENT_LLM_FINISH_TOOL_CALLS);
	CHECK_STRING(r->finish_reason, "tool_calls");
	CHECK_INT(r->usage.input_tokens, 100);
	CHECK_INT(r->usage.output_tokens, 20);
	CHECK_INT(r->usage.cached_tokens, 64);
	CHECK_STRING(r->response_id, "chatcmpl-1");
	CHECK_STRING(r->model, "gpt-x");
	CHECK_INT(r->error, KAGENT_LLM_ERROR_NONE);
	CHECK(r->error_message == NULL);
	CHECK_INT(r->tool_call_count, 2);
	CHECK_STRING(r->tool_calls[0].id, "call_a");
	CHECK_STRING(r->tool_calls[0].name, "run");
	CHECK_STRING(r->tool_calls[0].arguments, "{\"cmd\": \"ls\"}");
	CHECK(r->tool_calls[0].parse_error == NULL);
	CHECK_STRING(json_string_value(json_object_get(r->tool_calls[0].arguments_json, "cmd")),
		     "ls");
	CHECK_STRING(r->tool_calls[1].id, "call_b");
	CHECK_STRING(r->tool_calls[1].name, "read");
	CHECK_STRING(r->tool_calls[1].arguments, "{\"path\":\"a.c\"}");
	CHECK_STRING(json_string_value(json_object_get(r->tool_calls[1].arguments_json, "path")),
		     "a.c");
	run_release(&run);
}

static void
test_chat_lenient_servers(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, chat_lenient, &run);
	r = run.result;
	/* No [DONE], but a finish_reason came: accepted. */
	CHECK_INT(run.status, 0);
	CHECK_STRING(r->reasoning, "plan");
	CHECK_INT(r->usage.input_tokens, -1);
	CHECK_INT(r->tool_call_count, 3);
	CHECK_STRING(r->tool_calls[0].id, "c1");
	CHECK_STRING(r->tool_calls[0].name, "a");
	CHECK_STRING(r->tool_calls[0].arguments, "{\"x\":1}");
	CHECK_INT(json_integer_value(json_object_get(r->tool_calls[0].arguments_json, "x")), 1);
	CHECK_STRING(r->tool_calls[1].id, "c2");
	/* The repeated name was not doubled. */
	CHECK_STRING(r->tool_calls[1].name, "b");
	CHECK_STRING(r->tool_calls[1].arguments, "{\"y\":2}");
	CHECK(r->tool_calls[1].parse_error == NULL);
	CHECK_STRING(r->tool_calls[2].id, "c3");
	CHECK_STRING(r->tool_calls[2].name, "c");
	CHECK(r->tool_calls[2].arguments_json != NULL);
	run_release(&run);
}

static void
test_chat_malformed_arguments_kept(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, chat_malformed, &run);
	r = run.result;
	/* Bad arguments are the model's mistake, not the stream's. */
	CHECK_INT(run.status, 0);
	CHECK_INT(r->error, KAGENT_LLM_ERROR_NONE);
	CHECK_INT(r->tool_call_count, 3);
	CHECK_STRING(r->tool_calls[0].name, "run");
	CHECK_STRING(r->tool_calls[0].arguments, "{\"cmd\": \"ls");
	CHECK(r->tool_calls[0].arguments_json == NULL);
	CHECK_CONTAINS(r->tool_calls[0].parse_error, "tool \"run\" are not valid JSON");
	CHECK_STRING(r->tool_calls[1].arguments, "[1, 2]");
	CHECK(r->tool_calls[1].arguments_json == NULL);
	CHECK_CONTAINS(r->tool_calls[1].parse_error, "not a JSON object");
	/* No arguments at all means an empty object. */
	CHECK_STRING(r->tool_calls[2].arguments, "{}");
	CHECK(r->tool_calls[2].parse_error == NULL);
	CHECK_INT(json_object_size(r->tool_calls[2].arguments_json), 0);
	run_release(&run);
}

static void
test_chat_error_inside_200_stream(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, chat_error, &run);
	r = run.result;
	CHECK_INT(run.feed_status, -EREMOTEIO);
	CHECK_INT(run.status, -EREMOTEIO);
	CHECK_INT(r->error, KAGENT_LLM_ERROR_PROVIDER);
	CHECK_STRING(r->error_type, "rate_limit_error");
	CHECK_CONTAINS(r->error_message, "Rate limit reached");
	CHECK_CONTAINS(run.cause, "error in the stream");
	/* What came before the error is kept; nothing after it. */
	CHECK_STRING(r->text, "par");
	run_release(&run);
}

static void
test_chat_stream_cut(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, chat_cut, &run);
	r = run.result;
	CHECK_INT(run.feed_status, 0);
	CHECK_INT(run.status, -EPIPE);
	CHECK_INT(r->error, KAGENT_LLM_ERROR_TRUNCATED);
	CHECK_CONTAINS(run.cause, "stream ended early, before data: [DONE]");
	CHECK_STRING(r->text, "Hello");
	run_release(&run);
}

static void
test_chat_not_json(void)
{
	struct kagent_llm_stream *stream =
	    kagent_llm_stream_create(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS);
	struct kagent_llm_result *result;
	char *cause = NULL;

	CHECK_INT(kagent_llm_stream_event(stream, "message", "{nope", 5, &cause), -EBADMSG);
	CHECK_CONTAINS(cause, "not a JSON object");
	free(cause);
	cause = NULL;
	/* Later events report the same failure. */
	CHECK_INT(kagent_llm_stream_event(stream, "message", "[DONE]", 6, &cause), -EBADMSG);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_llm_stream_finish(stream, &result, &cause), -EBADMSG);
	CHECK_INT(result->error, KAGENT_LLM_ERROR_PROTOCOL);
	free(cause);
	kagent_llm_result_free(result);
	kagent_llm_stream_free(stream);
}

static void
test_too_many_tool_calls(void)
{
	struct kagent_llm_stream *stream =
	    kagent_llm_stream_create(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS);
	struct kagent_llm_result *result;
	char *cause = NULL;
	int status = 0, i;

	for (i = 0; i < 1000 && status == 0; i++) {
		char *data =
		    kagent_asprintf("{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":%d,"
				    "\"id\":\"c%d\",\"function\":{\"name\":\"f\"}}]}}]}",
				    i, i);

		status = kagent_llm_stream_event(stream, "message", data, strlen(data), &cause);
		free(data);
	}
	CHECK_INT(status, -EMSGSIZE);
	CHECK_INT(i, KAGENT_LLM_STREAM_TOOL_CALL_CAP + 1);
	CHECK_CONTAINS(cause, "more than 256 tool calls");
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_llm_stream_finish(stream, &result, &cause), -EMSGSIZE);
	CHECK_INT(result->error, KAGENT_LLM_ERROR_TOO_LARGE);
	CHECK_INT(result->tool_call_count, KAGENT_LLM_STREAM_TOOL_CALL_CAP);
	free(cause);
	kagent_llm_result_free(result);
	kagent_llm_stream_free(stream);
}

/* ---- Responses ---- */

static void
test_responses_text_and_parallel_tool_calls(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_RESPONSES, responses_tools, &run);
	r = run.result;
	CHECK_INT(run.status, 0);
	CHECK_STRING(r->text, "I will look.");
	CHECK_STRING(r->reasoning, "Think");
	CHECK_INT(r->finish, KAGENT_LLM_FINISH_TOOL_CALLS);
	CHECK_STRING(r->finish_reason, "completed");
	CHECK_INT(r->usage.input_tokens, 500);
	CHECK_INT(r->usage.output_tokens, 42);
	CHECK_INT(r->usage.cached_tokens, 128);
	CHECK_STRING(r->response_id, "resp_1");
	CHECK_STRING(r->model, "gpt-5");
	CHECK_INT(r->tool_call_count, 3);
	CHECK_STRING(r->tool_calls[0].id, "call_1");
	CHECK_STRING(r->tool_calls[0].name, "read_file");
	CHECK_STRING(r->tool_calls[0].arguments, "{\"path\":\"k.cu\"}");
	CHECK(r->tool_calls[0].arguments_json != NULL);
	CHECK_STRING(r->tool_calls[1].id, "call_2");
	CHECK_STRING(r->tool_calls[1].name, "run");
	/* The .done event's whole text replaced the deltas, not doubled them. */
	CHECK_STRING(r->tool_calls[1].arguments, "{\"cmd\":\"make\"}");
	CHECK(r->tool_calls[1].arguments_json != NULL);
	/* Arguments only in output_item.done (no deltas) are not lost. */
	CHECK_STRING(r->tool_calls[2].id, "call_3");
	CHECK_STRING(r->tool_calls[2].arguments, "{\"s\":3}");
	CHECK_INT(json_integer_value(json_object_get(r->tool_calls[2].arguments_json, "s")), 3);
	run_release(&run);
}

static void
check_json_text(const json_t *actual, const char *expected)
{
	char *dumped = json_dumps(actual, JSON_COMPACT | JSON_SORT_KEYS);

	CHECK_STRING(dumped, expected);
	free(dumped);
}

/* Reasoning items are kept whole, in output order, next to the calls read as before. */
static void
test_responses_reasoning_items_kept(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_RESPONSES, responses_reasoning, &run);
	r = run.result;
	CHECK_INT(run.status, 0);
	CHECK_STRING(r->reasoning, "Read first.");
	CHECK_INT(r->tool_call_count, 1);
	CHECK_STRING(r->tool_calls[0].id, "call_1");
	CHECK_STRING(r->tool_calls[0].arguments, "{\"path\":\"k.cu\"}");
	check_json_text(
	    r->provider_state,
	    "{\"format\":\"responses\",\"items\":["
	    "{\"encrypted_content\":\"gAAAAB-secret==\",\"id\":\"rs_1\",\"summary\":[{\"text\":"
	    "\"Read first.\",\"type\":\"summary_text\"}],\"type\":\"reasoning\"},"
	    "{\"encrypted_content\":\"gAAAAB-more\",\"id\":\"rs_2\",\"summary\":[],\"type\":"
	    "\"reasoning\"}]}");
	run_release(&run);

	/* A reply without reasoning has no state. */
	check_split_independent(KAGENT_LLM_FORMAT_RESPONSES, responses_error, &run);
	CHECK(run.result->provider_state == NULL);
	run_release(&run);
}

/* Items are placed by output_index, whatever order their done events come in. */
static void
test_responses_reasoning_output_order(void)
{
	static const char *const events[] = {
	    "{\"type\":\"response.output_item.done\",\"output_index\":3,\"item\":{\"type\":"
	    "\"reasoning\",\"id\":\"rs_c\"}}",
	    "{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":"
	    "\"reasoning\",\"id\":\"rs_a\"}}",
	    "{\"type\":\"response.output_item.done\",\"output_index\":2,\"item\":{\"type\":"
	    "\"reasoning\",\"id\":\"rs_b\"}}",
	    "{\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}",
	};
	struct kagent_llm_stream *stream = kagent_llm_stream_create(KAGENT_LLM_FORMAT_RESPONSES);
	struct kagent_llm_result *result;
	char *cause = NULL;

	for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
		CHECK_INT(
		    kagent_llm_stream_event(stream, NULL, events[i], strlen(events[i]), &cause), 0);
	CHECK_INT(kagent_llm_stream_finish(stream, &result, &cause), 0);
	check_json_text(result->provider_state,
			"{\"format\":\"responses\",\"items\":[{\"id\":\"rs_a\",\"type\":"
			"\"reasoning\"},{\"id\":\"rs_b\",\"type\":\"reasoning\"},{\"id\":\"rs_c\","
			"\"type\":\"reasoning\"}]}");
	kagent_llm_result_free(result);
	kagent_llm_stream_free(stream);
}

static void
test_responses_error_event(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_RESPONSES, responses_error, &run);
	r = run.result;
	CHECK_INT(run.status, -EREMOTEIO);
	CHECK_INT(r->error, KAGENT_LLM_ERROR_PROVIDER);
	CHECK_STRING(r->error_type, "server_error");
	CHECK_CONTAINS(r->error_message, "The server had an error");
	CHECK_STRING(r->text, "Hi");
	run_release(&run);
}

static void
test_responses_failed_and_incomplete(void)
{
	static const char failed[] = "{\"type\":\"response.failed\",\"response\":{\"status\":"
				     "\"failed\",\"error\":{\"code\":\"server_error\",\"message\":"
				     "\"boom\"}}}";
	static const char incomplete[] =
	    "{\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\","
	    "\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{"
	    "\"input_tokens\":3,\"output_tokens\":4}}}";
	struct kagent_llm_stream *stream = kagent_llm_stream_create(KAGENT_LLM_FORMAT_RESPONSES);
	struct kagent_llm_result *result;
	char *cause = NULL;

	CHECK_INT(
	    kagent_llm_stream_event(stream, "response.failed", failed, strlen(failed), &cause),
	    -EREMOTEIO);
	CHECK_CONTAINS(cause, "server_error: boom");
	free(cause);
	kagent_llm_stream_free(stream);

	stream = kagent_llm_stream_create(KAGENT_LLM_FORMAT_RESPONSES);
	cause = NULL;
	CHECK_INT(kagent_llm_stream_event(stream, "response.incomplete", incomplete,
					  strlen(incomplete), &cause),
		  0);
	CHECK(kagent_llm_stream_is_done(stream));
	CHECK_INT(kagent_llm_stream_finish(stream, &result, &cause), 0);
	CHECK_INT(result->finish, KAGENT_LLM_FINISH_LENGTH);
	CHECK_STRING(result->finish_reason, "max_output_tokens");
	CHECK_INT(result->usage.output_tokens, 4);
	CHECK_INT(result->usage.cached_tokens, -1);
	kagent_llm_result_free(result);
	kagent_llm_stream_free(stream);
}

static void
test_responses_stream_cut(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_RESPONSES, responses_cut, &run);
	r = run.result;
	CHECK_INT(run.status, -EPIPE);
	CHECK_INT(r->error, KAGENT_LLM_ERROR_TRUNCATED);
	CHECK_CONTAINS(run.cause, "before response.completed");
	/* The partial call is still reported, with its arguments unusable. */
	CHECK_INT(r->tool_call_count, 1);
	CHECK_STRING(r->tool_calls[0].arguments, "{\"cmd\":");
	CHECK(r->tool_calls[0].parse_error != NULL);
	run_release(&run);
}

/* ---- Anthropic ---- */

static void
test_anthropic_text_thinking_and_tools(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_ANTHROPIC, anthropic_tools, &run);
	r = run.result;
	CHECK_INT(run.status, 0);
	CHECK_STRING(r->text, "Let me check.");
	CHECK_STRING(r->reasoning, "Hmm.");
	CHECK_INT(r->finish, KAGENT_LLM_FINISH_TOOL_CALLS);
	CHECK_STRING(r->finish_reason, "tool_use");
	/* 10 uncached + 90 read from the cache. */
	CHECK_INT(r->usage.input_tokens, 100);
	CHECK_INT(r->usage.output_tokens, 55);
	CHECK_INT(r->usage.cached_tokens, 90);
	CHECK_STRING(r->response_id, "msg_1");
	CHECK_STRING(r->model, "claude-x");
	CHECK_INT(r->tool_call_count, 2);
	CHECK_STRING(r->tool_calls[0].id, "toolu_1");
	CHECK_STRING(r->tool_calls[0].name, "read_file");
	CHECK_STRING(r->tool_calls[0].arguments, "{\"path\": \"a.cu\"}");
	CHECK_STRING(json_string_value(json_object_get(r->tool_calls[0].arguments_json, "path")),
		     "a.cu");
	CHECK_STRING(r->tool_calls[1].id, "toolu_2");
	CHECK_STRING(r->tool_calls[1].arguments, "{}");
	CHECK(r->tool_calls[1].arguments_json != NULL);
	run_release(&run);
}

/* Signed thinking and redacted thinking are kept as blocks to send back, in block order. */
static void
test_anthropic_thinking_blocks_kept(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_ANTHROPIC, anthropic_thinking, &run);
	r = run.result;
	CHECK_INT(run.status, 0);
	CHECK_STRING(r->reasoning, "Read the kernel.");
	CHECK_STRING(r->text, "");
	CHECK_INT(r->finish, KAGENT_LLM_FINISH_TOOL_CALLS);
	CHECK_INT(r->tool_call_count, 1);
	CHECK_STRING(r->tool_calls[0].id, "toolu_5");
	CHECK_STRING(r->tool_calls[0].arguments, "{\"path\": \"k.cu\"}");
	check_json_text(r->provider_state,
			"{\"blocks\":[{\"signature\":\"EqQBCgIYAhIM\",\"thinking\":\"Read the "
			"kernel.\",\"type\":\"thinking\"},{\"data\":\"EmwKAhgBEgy3va\",\"type\":"
			"\"redacted_thinking\"}],\"format\":\"anthropic\"}");
	run_release(&run);

	/* The older recorded stream has a thinking block too. */
	check_split_independent(KAGENT_LLM_FORMAT_ANTHROPIC, anthropic_tools, &run);
	check_json_text(run.result->provider_state,
			"{\"blocks\":[{\"signature\":\"c2ln\",\"thinking\":\"Hmm.\",\"type\":"
			"\"thinking\"}],\"format\":\"anthropic\"}");
	run_release(&run);
}

/* Signatures are counted against the state cap (thinking text has the reasoning cap too). */
static void
test_state_caps(void)
{
	static const char start[] = "{\"type\":\"content_block_start\",\"index\":0,"
				    "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}";
	static const char prefix[] = "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{"
				     "\"type\":\"signature_delta\",\"signature\":\"";
	struct kagent_llm_stream *stream = kagent_llm_stream_create(KAGENT_LLM_FORMAT_ANTHROPIC);
	struct kagent_llm_result *result;
	size_t piece = (size_t)1 << 20;
	char *data = kagent_malloc(piece + 200), *cause = NULL;
	int status = 0, i;

	CHECK_INT(kagent_llm_stream_event(stream, NULL, start, strlen(start), &cause), 0);
	memcpy(data, prefix, sizeof prefix - 1);
	memset(data + sizeof prefix - 1, 's', piece);
	memcpy(data + sizeof prefix - 1 + piece, "\"}}", 4);
	for (i = 0; i < 40 && status == 0; i++)
		status = kagent_llm_stream_event(stream, NULL, data, strlen(data), &cause);
	CHECK_INT(status, -EMSGSIZE);
	CHECK_INT(i, 17);
	CHECK_CONTAINS(cause, "reasoning state (reasoning items, thinking blocks) is larger than "
			      "16777216 bytes");
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_llm_stream_finish(stream, &result, &cause), -EMSGSIZE);
	CHECK_INT(result->error, KAGENT_LLM_ERROR_TOO_LARGE);
	free(cause);
	free(data);
	kagent_llm_result_free(result);
	kagent_llm_stream_free(stream);

	/* The number of pieces is capped too: blocks of a few bytes each. */
	stream = kagent_llm_stream_create(KAGENT_LLM_FORMAT_ANTHROPIC);
	cause = NULL;
	status = 0;
	for (i = 0; i < 1000 && status == 0; i++) {
		char *event = kagent_asprintf("{\"type\":\"content_block_start\",\"index\":%d,"
					      "\"content_block\":{\"type\":\"redacted_thinking\","
					      "\"data\":\"x\"}}",
					      i);

		status = kagent_llm_stream_event(stream, NULL, event, strlen(event), &cause);
		free(event);
	}
	CHECK_INT(status, -EMSGSIZE);
	CHECK_INT(i, KAGENT_LLM_STREAM_STATE_PART_CAP + 1);
	CHECK_CONTAINS(cause, "more than 256 reasoning items or thinking blocks");
	free(cause);
	kagent_llm_stream_free(stream);
}

static void
test_anthropic_overloaded(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_ANTHROPIC, anthropic_overloaded, &run);
	r = run.result;
	CHECK_INT(run.feed_status, -EBUSY);
	CHECK_INT(run.status, -EBUSY);
	CHECK_INT(r->error, KAGENT_LLM_ERROR_OVERLOADED);
	CHECK_STRING(r->error_type, "overloaded_error");
	CHECK_CONTAINS(r->error_message, "Overloaded");
	CHECK_STRING(r->text, "Part");
	run_release(&run);
}

static void
test_anthropic_stream_cut(void)
{
	struct run run;
	const struct kagent_llm_result *r;

	check_split_independent(KAGENT_LLM_FORMAT_ANTHROPIC, anthropic_cut, &run);
	r = run.result;
	CHECK_INT(run.status, -EPIPE);
	CHECK_INT(r->error, KAGENT_LLM_ERROR_TRUNCATED);
	CHECK_CONTAINS(r->error_message, "stream ended early, before message_stop");
	CHECK_INT(r->tool_call_count, 1);
	CHECK_STRING(r->tool_calls[0].id, "toolu_9");
	CHECK_CONTAINS(r->tool_calls[0].parse_error, "not valid JSON");
	run_release(&run);
}

static void
test_anthropic_delta_for_unknown_block(void)
{
	static const char delta[] = "{\"type\":\"content_block_delta\",\"index\":4,\"delta\":{"
				    "\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}";
	struct kagent_llm_stream *stream = kagent_llm_stream_create(KAGENT_LLM_FORMAT_ANTHROPIC);
	char *cause = NULL;

	CHECK_INT(
	    kagent_llm_stream_event(stream, "content_block_delta", delta, strlen(delta), &cause),
	    -EBADMSG);
	CHECK_CONTAINS(cause, "not a tool_use block");
	free(cause);
	kagent_llm_stream_free(stream);
}

static void
test_oversize_line_through_sse(void)
{
	struct kagent_llm_stream *stream = kagent_llm_stream_create(KAGENT_LLM_FORMAT_ANTHROPIC);
	struct kagent_sse *sse = kagent_sse_create(1024, 0, kagent_llm_stream_on_sse_event, stream);
	char *line = kagent_malloc(4096), *cause = NULL;

	memset(line, 'a', 4096);
	memcpy(line, "data: ", 6);
	CHECK_INT(kagent_sse_feed(sse, line, 4096, &cause), -EMSGSIZE);
	CHECK_CONTAINS(cause, "longer than 1024 bytes");
	CHECK(!kagent_llm_stream_is_done(stream));
	free(cause);
	free(line);
	kagent_sse_free(sse);
	kagent_llm_stream_free(stream);
}

/* A small fuzzer: recorded streams with bytes changed must never crash, and the
 * result must stay consistent (under ASan this also checks memory). */
static void
test_mutated_streams_stay_consistent(void)
{
	static const struct {
		enum kagent_llm_format format;
		const char *text;
	} streams[] = {
	    {KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, chat_tools},
	    {KAGENT_LLM_FORMAT_CHAT_COMPLETIONS, chat_lenient},
	    {KAGENT_LLM_FORMAT_RESPONSES, responses_tools},
	    {KAGENT_LLM_FORMAT_RESPONSES, responses_reasoning},
	    {KAGENT_LLM_FORMAT_ANTHROPIC, anthropic_tools},
	    {KAGENT_LLM_FORMAT_ANTHROPIC, anthropic_thinking},
	};
	static const char alphabet[] = "{}[]\":,\\\n\r 0a-e";

	srand(4242);
	for (size_t s = 0; s < sizeof streams / sizeof streams[0]; s++) {
		size_t length = strlen(streams[s].text);

		for (int round = 0; round < 400; round++) {
			char *copy = kagent_strdup(streams[s].text);
			size_t cuts[3];
			struct run run;

			for (int m = 0; m < 1 + rand() % 4; m++)
				copy[(size_t)rand() % length] =
				    alphabet[(size_t)rand() % (sizeof alphabet - 1)];
			for (int c = 0; c < 3; c++)
				cuts[c] = (size_t)rand() % (length + 1);
			if (cuts[0] > cuts[1]) {
				size_t t = cuts[0];
				cuts[0] = cuts[1];
				cuts[1] = t;
			}
			if (cuts[1] > cuts[2]) {
				size_t t = cuts[1];
				cuts[1] = cuts[2];
				cuts[2] = t;
			}
			if (cuts[0] > cuts[1]) {
				size_t t = cuts[0];
				cuts[0] = cuts[1];
				cuts[1] = t;
			}
			run_stream(streams[s].format, copy, length, cuts, 3, &run);
			CHECK(run.result != NULL);
			CHECK((run.status == 0) == (run.result->error == KAGENT_LLM_ERROR_NONE));
			CHECK((run.status == 0) == (run.cause == NULL));
			CHECK((run.result->error == KAGENT_LLM_ERROR_NONE) ==
			      (run.result->error_message == NULL));
			for (size_t i = 0; i < run.result->tool_call_count; i++) {
				const struct kagent_llm_tool_call *call =
				    &run.result->tool_calls[i];

				CHECK(call->id != NULL && call->name != NULL &&
				      call->arguments != NULL);
				CHECK((call->arguments_json == NULL) !=
				      (call->parse_error == NULL));
			}
			run_release(&run);
			free(copy);
		}
	}
}

static void
test_text_cap(void)
{
	struct kagent_llm_stream *stream = kagent_llm_stream_create(KAGENT_LLM_FORMAT_ANTHROPIC);
	struct kagent_llm_result *result;
	size_t piece = (size_t)1 << 20;
	char *data = kagent_malloc(piece + 200), *cause = NULL;
	int status = 0, i;

	/* One mebibyte of text per event: the 17th passes the 16 MiB cap. */
	static const char prefix[] = "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{"
				     "\"type\":\"text_delta\",\"text\":\"";

	memcpy(data, prefix, sizeof prefix - 1);
	memset(data + sizeof prefix - 1, 'x', piece);
	memcpy(data + sizeof prefix - 1 + piece, "\"}}", 4);
	for (i = 0; i < 40 && status == 0; i++)
		status = kagent_llm_stream_event(stream, "content_block_delta", data, strlen(data),
						 &cause);
	CHECK_INT(status, -EMSGSIZE);
	CHECK_INT(i, 17);
	CHECK_CONTAINS(cause, "text is longer than 16777216 bytes");
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_llm_stream_finish(stream, &result, &cause), -EMSGSIZE);
	CHECK_INT(result->error, KAGENT_LLM_ERROR_TOO_LARGE);
	CHECK_INT(strlen(result->text), 16 * piece);
	free(cause);
	free(data);
	kagent_llm_result_free(result);
	kagent_llm_stream_free(stream);
}

static const struct kagent_test tests[] = {
    {"chat_text_and_parallel_tool_calls", test_chat_text_and_parallel_tool_calls},
    {"chat_lenient_servers", test_chat_lenient_servers},
    {"chat_malformed_arguments_kept", test_chat_malformed_arguments_kept},
    {"chat_error_inside_200_stream", test_chat_error_inside_200_stream},
    {"chat_stream_cut", test_chat_stream_cut},
    {"chat_not_json", test_chat_not_json},
    {"too_many_tool_calls", test_too_many_tool_calls},
    {"responses_text_and_parallel_tool_calls", test_responses_text_and_parallel_tool_calls},
    {"responses_reasoning_items_kept", test_responses_reasoning_items_kept},
    {"responses_reasoning_output_order", test_responses_reasoning_output_order},
    {"responses_error_event", test_responses_error_event},
    {"responses_failed_and_incomplete", test_responses_failed_and_incomplete},
    {"responses_stream_cut", test_responses_stream_cut},
    {"anthropic_text_thinking_and_tools", test_anthropic_text_thinking_and_tools},
    {"anthropic_thinking_blocks_kept", test_anthropic_thinking_blocks_kept},
    {"state_caps", test_state_caps},
    {"anthropic_overloaded", test_anthropic_overloaded},
    {"anthropic_stream_cut", test_anthropic_stream_cut},
    {"anthropic_delta_for_unknown_block", test_anthropic_delta_for_unknown_block},
    {"oversize_line_through_sse", test_oversize_line_through_sse},
    {"mutated_streams_stay_consistent", test_mutated_streams_stay_consistent},
    {"text_cap", test_text_cap},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 120)
