/*
 * Tests of agent/records/otlp_exporter.c on a real libuv loop against
 * tests/fixtures/llm_server.py standing in for a collector: requests go to
 * <endpoint>/v1/traces with the configured headers, one per turn, spans are redacted as the
 * trace is, the queue is capped, and the exporter frees itself however its requests end
 * (answered, refused, or cancelled by the HTTP client going away).
 */
#include "kagent/records/otlp_exporter.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "llm_server.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#define SECRET "s3cret-header-value"

struct fixture {
	uv_loop_t loop;
	struct kagent_http_client *http;
	struct kagent_test_llm_server server;
	struct kagent_trace *trace;
	char *directory;
};

static void
fixture_start(struct fixture *fixture, const char *script)
{
	char *error = NULL, *path;

	memset(fixture, 0, sizeof *fixture);
	CHECK_INT(uv_loop_init(&fixture->loop), 0);
	kagent_test_llm_server_start(&fixture->server, script);
	CHECK_INT(kagent_http_client_create(&fixture->loop, &fixture->http, &error), 0);
	fixture->directory = kagent_test_make_directory();
	path = kagent_asprintf("%s/trace.jsonl", fixture->directory);
	CHECK_INT(kagent_trace_open(path, 0, &fixture->trace, &error), 0);
	kagent_trace_add_secret(fixture->trace, SECRET);
	free(path);
}

/* Frees the client, runs the loop dry and checks that no handle is left. */
static void
fixture_stop(struct fixture *fixture)
{
	kagent_http_client_free(fixture->http);
	uv_run(&fixture->loop, UV_RUN_DEFAULT);
	CHECK_INT(uv_loop_close(&fixture->loop), 0);
	kagent_trace_close(fixture->trace);
	kagent_test_llm_server_stop(&fixture->server);
	free(fixture->directory);
}

static struct kagent_otlp_exporter *
exporter_create(struct fixture *fixture, const char *path, const char *headers)
{
	char *endpoint = kagent_test_llm_server_url(&fixture->server, path), *error = NULL;
	struct kagent_otlp_exporter *exporter;

	CHECK_INT(kagent_otlp_exporter_create(
		      &(struct kagent_otlp_exporter_options){.http = fixture->http,
							     .endpoint = endpoint,
							     .headers = headers,
							     .trace = fixture->trace},
		      &exporter, &error),
		  0);
	free(endpoint);
	return exporter;
}

static void
feed(struct kagent_otlp_exporter *exporter, const char *text)
{
	json_t *record = json_loads(text, 0, NULL);

	CHECK(record != NULL);
	kagent_otlp_exporter_record(exporter, record);
	json_decref(record);
}

/* The spans of logged request index. */
static const json_t *
request_spans(const json_t *log, size_t index)
{
	const json_t *body = json_object_get(json_array_get(log, index), "body");

	return json_object_get(
	    json_array_get(
		json_object_get(json_array_get(json_object_get(body, "resourceSpans"), 0),
				"scopeSpans"),
		0),
	    "spans");
}

static size_t
count_spans(const json_t *log)
{
	size_t total = 0;

	for (size_t index = 0; index < json_array_size(log); index++)
		total += json_array_size(request_spans(log, index));
	return total;
}

#define ANSWER "[{\"body\": {\"partialSuccess\": {}}}]"
#define RUN_START                                                                                  \
	"{\"type\": \"run_start\", \"run_id\": \"r1\", \"config\": {\"provider\": {\"api\": "      \
	"\"chat_completions\", \"model\": \"m\"}}}"

static void
test_sends_by_turn(void)
{
	struct fixture fixture;
	struct kagent_otlp_exporter *exporter;
	json_t *log, *first;
	const json_t *headers;
	char *text;

	fixture_start(&fixture, "{\"exchanges\": " ANSWER ", \"repeat_last\": true}");
	/* A trailing slash on the endpoint is not doubled. */
	exporter = exporter_create(&fixture, "/otel/", "Authorization=Bearer%20tok , X-Scope=a");
	feed(exporter, RUN_START);
	feed(exporter, "{\"type\": \"request\", \"turn\": 1}");
	feed(exporter, "{\"type\": \"reply\", \"turn\": 1, \"usage\": {\"input_tokens\": 5, "
		       "\"output_tokens\": 6}, \"finish\": \"stop\"}");
	uv_run(&fixture.loop, UV_RUN_DEFAULT);
	log = kagent_test_llm_server_log(&fixture.server);
	CHECK_INT(json_array_size(log), 0); /* the turn is not over: nothing sent yet */
	json_decref(log);
	feed(exporter, "{\"type\": \"turn_end\", \"turn\": 1}");
	uv_run(&fixture.loop, UV_RUN_DEFAULT);
	log = kagent_test_llm_server_log(&fixture.server);
	CHECK_INT(json_array_size(log), 1);
	first = json_array_get(log, 0);
	CHECK_STRING(json_string_value(json_object_get(first, "path")), "/otel/v1/traces");
	CHECK_STRING(json_string_value(json_object_get(first, "method")), "POST");
	headers = json_object_get(first, "headers");
	CHECK_STRING(json_string_value(json_object_get(headers, "content-type")),
		     "application/json");
	CHECK_STRING(json_string_value(json_object_get(headers, "authorization")), "Bearer tok");
	CHECK_STRING(json_string_value(json_object_get(headers, "x-scope")), "a");
	CHECK_INT(json_array_size(request_spans(log, 0)), 1);
	CHECK_STRING(
	    json_string_value(json_object_get(json_array_get(request_spans(log, 0), 0), "name")),
	    "chat m");
	json_decref(log);

	/* A failed tool's message carries the secret: the span is redacted as the trace is. */
	feed(exporter, "{\"type\": \"tool_call\", \"turn\": 2, \"id\": \"c1\", \"name\": \"x\"}");
	feed(exporter,
	     "{\"type\": \"tool_result\", \"turn\": 2, \"id\": \"c1\", \"is_error\": true, "
	     "\"content\": \"denied for " SECRET "\"}");
	feed(exporter, "{\"type\": \"final\", \"turn\": 2, \"stop_reason\": \"model_finished\"}");
	kagent_otlp_exporter_finish(exporter); /* while the last request is out */
	uv_run(&fixture.loop, UV_RUN_DEFAULT);
	log = kagent_test_llm_server_log(&fixture.server);
	CHECK_INT(json_array_size(log), 2);
	CHECK_INT(json_array_size(request_spans(log, 1)), 2);
	text = json_dumps(json_object_get(json_array_get(log, 1), "body"), 0);
	CHECK(strstr(text, SECRET) == NULL);
	CHECK_CONTAINS(text, "denied for [redacted]");
	CHECK_CONTAINS(text, "invoke_agent kagent");
	free(text);
	json_decref(log);
	fixture_stop(&fixture);
}

/* A collector answering 500: the spans are dropped, the exporter finishes and frees itself. */
static void
test_refusing_collector(void)
{
	struct fixture fixture;
	struct kagent_otlp_exporter *exporter;
	json_t *log;

	fixture_start(&fixture, "{\"exchanges\": [{\"status\": 500, \"body\": {\"message\": "
				"\"no\"}}], \"repeat_last\": true}");
	exporter = exporter_create(&fixture, "", NULL);
	feed(exporter, RUN_START);
	feed(exporter, "{\"type\": \"request\", \"turn\": 1}");
	feed(exporter, "{\"type\": \"reply\", \"turn\": 1}");
	feed(exporter, "{\"type\": \"turn_end\", \"turn\": 1}");
	feed(exporter, "{\"type\": \"final\", \"turn\": 1}");
	kagent_otlp_exporter_finish(exporter);
	uv_run(&fixture.loop, UV_RUN_DEFAULT);
	log = kagent_test_llm_server_log(&fixture.server);
	/* One request per flush; the root waited for the first answer, then went alone. */
	CHECK_INT(json_array_size(log), 2);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(log, 0), "path")),
		     "/v1/traces");
	CHECK_INT(count_spans(log), 2);
	json_decref(log);
	fixture_stop(&fixture);
}

/* At the run's end a stalled collector gets one wait, not one per batch left. */
static void
test_stalled_collector_at_finish(void)
{
	struct fixture fixture;
	struct kagent_otlp_exporter *exporter;
	uint64_t started;
	json_t *log;

	fixture_start(&fixture, "{\"exchanges\": [{\"delay_ms\": 8000, \"body\": {}}], "
				"\"repeat_last\": true}");
	exporter = exporter_create(&fixture, "", NULL);
	feed(exporter, RUN_START);
	for (int index = 0; index < 100; index++) {
		feed(exporter, "{\"type\": \"tool_call\", \"id\": \"c\", \"name\": \"x\"}");
		feed(exporter, "{\"type\": \"tool_result\", \"id\": \"c\"}");
	}
	feed(exporter, "{\"type\": \"final\"}");
	kagent_otlp_exporter_finish(exporter);
	started = uv_hrtime();
	uv_run(&fixture.loop, UV_RUN_DEFAULT);
	/* The stall limit (5 s), not three times it, and no second request. */
	CHECK(uv_hrtime() - started < 7500000000u);
	log = kagent_test_llm_server_log(&fixture.server);
	CHECK_INT(json_array_size(log), 1);
	json_decref(log);
	fixture_stop(&fixture);
}

/* A 2xx answer that says the collector rejected spans is logged with its reason. */
static void
test_partial_success_logged(void)
{
	struct fixture fixture;
	struct kagent_otlp_exporter *exporter;
	char *path, *logged = NULL;
	size_t size;
	int saved = dup(2), fd;

	fixture_start(&fixture, "[{\"body\": {\"partialSuccess\": {\"rejectedSpans\": \"1\", "
				"\"errorMessage\": \"span too old\"}}}]");
	path = kagent_asprintf("%s/stderr.txt", fixture.directory);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && saved >= 0);
	CHECK(dup2(fd, 2) == 2);
	close(fd);
	exporter = exporter_create(&fixture, "", NULL);
	feed(exporter, RUN_START);
	feed(exporter, "{\"type\": \"final\"}");
	kagent_otlp_exporter_finish(exporter);
	uv_run(&fixture.loop, UV_RUN_DEFAULT);
	CHECK(dup2(saved, 2) == 2);
	close(saved);
	CHECK_INT(kagent_fileio_read(path, 1 << 16, &logged, &size, &(char *){NULL}), 0);
	CHECK_CONTAINS(logged, "the collector rejected 1 of 1 spans: span too old");
	free(logged);
	free(path);
	fixture_stop(&fixture);
}

/* The HTTP client goes away with a request out: the exporter is freed from its on_done. */
static void
test_client_freed_while_sending(void)
{
	struct fixture fixture;
	struct kagent_otlp_exporter *exporter;

	fixture_start(&fixture, "[{\"delay_ms\": 2000, \"body\": {}}]");
	exporter = exporter_create(&fixture, "", NULL);
	feed(exporter, RUN_START);
	feed(exporter, "{\"type\": \"final\"}");
	kagent_otlp_exporter_finish(exporter);
	fixture_stop(&fixture); /* frees the client first: the request is cancelled */
}

/* Spans past the queue's cap are dropped, never held: what was queued still goes out. */
static void
test_queue_cap(void)
{
	struct fixture fixture;
	struct kagent_otlp_exporter *exporter;
	json_t *log;

	fixture_start(&fixture, "{\"exchanges\": [{\"delay_ms\": 200, \"body\": {}}, {\"body\": "
				"{}}], \"repeat_last\": true}");
	exporter = exporter_create(&fixture, "", NULL);
	feed(exporter, RUN_START);
	/* The loop does not run meanwhile: the first batch of 64 is out, the rest queue up. */
	for (int index = 0; index < 5000; index++) {
		feed(exporter,
		     "{\"type\": \"tool_call\", \"turn\": 1, \"id\": \"c\", \"name\": \"x\"}");
		feed(exporter, "{\"type\": \"tool_result\", \"turn\": 1, \"id\": \"c\"}");
	}
	feed(exporter, "{\"type\": \"final\", \"turn\": 1}");
	kagent_otlp_exporter_finish(exporter);
	uv_run(&fixture.loop, UV_RUN_DEFAULT);
	log = kagent_test_llm_server_log(&fixture.server);
	CHECK_INT(count_spans(log), 64 + 4096);
	CHECK_INT(json_array_size(request_spans(log, 0)), 64);
	CHECK_INT(json_array_size(log), 1 + 4096 / 64);
	json_decref(log);
	fixture_stop(&fixture);
}

/* Malformed headers are refused at creation, naming the item and not the value. */
static void
test_bad_headers(void)
{
	struct kagent_otlp_exporter *exporter = (struct kagent_otlp_exporter *)&exporter;
	char *error = NULL;

	CHECK_INT(kagent_otlp_exporter_create(
		      &(struct kagent_otlp_exporter_options){.endpoint = "http://127.0.0.1:1",
							     .headers = "A=b,Authorization"},
		      &exporter, &error),
		  -EINVAL);
	CHECK(exporter == NULL);
	CHECK_STRING(error, "header 2 has no '=' between a name and a value");
	free(error);
}

static const struct kagent_test tests[] = {
    {"sends_by_turn", test_sends_by_turn},
    {"refusing_collector", test_refusing_collector},
    {"stalled_collector_at_finish", test_stalled_collector_at_finish},
    {"partial_success_logged", test_partial_success_logged},
    {"client_freed_while_sending", test_client_freed_while_sending},
    {"queue_cap", test_queue_cap},
    {"bad_headers", test_bad_headers},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
