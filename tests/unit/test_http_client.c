/*
 * Tests of agent/llm/http_client.c on a real libuv loop against
 * tests/fixtures/llm_server.py: streams, errors, cuts, stalls, cancels, and that
 * the loop closes with no handle left however the requests end.
 */
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/llm/http_client.h"
#include "llm_server.h"
#include "test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

struct fixture;

/* What one request saw. */
struct outcome {
	struct fixture *fixture;
	struct kagent_http_request *request;
	int head_calls;
	long head_status;
	char *content_type;
	int body_calls;
	struct kagent_buffer body;
	int refuse_body_at; /* on_body returns non-zero at this call (counting from 1) */
	int cancel_at_body; /* on_body cancels its request at this call */
	int free_at_body;   /* on_body frees the client at this call */
	int done_calls;
	struct kagent_http_result result; /* copies */
};

struct fixture {
	uv_loop_t loop;
	struct kagent_http_client *client;
	struct kagent_test_llm_server server;
	int outstanding; /* requests whose on_done has not come; at 0 the client is freed */
	int start_next;	 /* on_done starts another request (a chain on one connection) */
	struct outcome *next_outcome;
};

static char *
copy_or_null(const char *text)
{
	return text != NULL ? kagent_strdup(text) : NULL;
}

static void
on_head(const struct kagent_http_response_head *head, void *data)
{
	struct outcome *outcome = data;

	outcome->head_calls++;
	outcome->head_status = head->status;
	free(outcome->content_type);
	outcome->content_type = copy_or_null(head->header(head, "Content-Type"));
	CHECK(head->header(head, "x-no-such-header") == NULL);
}

static int
on_body(const char *bytes, size_t size, void *data)
{
	struct outcome *outcome = data;

	outcome->body_calls++;
	kagent_buffer_append(&outcome->body, bytes, size);
	if (outcome->body_calls == outcome->cancel_at_body)
		kagent_http_request_cancel(outcome->request);
	if (outcome->body_calls == outcome->free_at_body)
		kagent_http_client_free(outcome->fixture->client);
	return outcome->body_calls == outcome->refuse_body_at;
}

static struct kagent_http_request *start_request(struct fixture *fixture, struct outcome *outcome,
						 struct kagent_http_request_options options);

static void
on_done(const struct kagent_http_result *result, void *data)
{
	struct outcome *outcome = data;
	struct fixture *fixture = outcome->fixture;

	outcome->done_calls++;
	outcome->result = *result;
	outcome->result.error_message = copy_or_null(result->error_message);
	outcome->result.retry_after = copy_or_null(result->retry_after);
	outcome->result.retry_after_ms = copy_or_null(result->retry_after_ms);
	outcome->result.should_retry = copy_or_null(result->should_retry);
	outcome->result.error_body = copy_or_null(result->error_body);
	if (fixture->start_next > 0) {
		char *url = kagent_test_llm_server_url(&fixture->server, "/next");

		fixture->start_next--;
		start_request(fixture, fixture->next_outcome++,
			      (struct kagent_http_request_options){.url = url});
		free(url);
	}
	if (--fixture->outstanding == 0)
		kagent_http_client_free(fixture->client);
}

static void
fixture_start(struct fixture *fixture, const char *script)
{
	char *error = NULL;

	memset(fixture, 0, sizeof *fixture);
	CHECK_INT(uv_loop_init(&fixture->loop), 0);
	kagent_test_llm_server_start(&fixture->server, script);
	CHECK_INT(kagent_http_client_create(&fixture->loop, &fixture->client, &error), 0);
	CHECK(error == NULL);
}

/* Starts a request with the outcome's callbacks; options gives the rest. */
static struct kagent_http_request *
start_request(struct fixture *fixture, struct outcome *outcome,
	      struct kagent_http_request_options options)
{
	char *error = NULL;

	outcome->fixture = fixture;
	options.on_head = on_head;
	options.on_body = on_body;
	options.on_done = on_done;
	options.data = outcome;
	outcome->request = kagent_http_request_start(fixture->client, &options, &error);
	if (outcome->request == NULL)
		fprintf(stderr, "start: %s\n", error);
	CHECK(outcome->request != NULL);
	/* on_done never runs from start. */
	CHECK_INT(outcome->done_calls, 0);
	fixture->outstanding++;
	return outcome->request;
}

/* Runs the loop until every request is done and the client is gone; no handle may remain. */
static void
fixture_run(struct fixture *fixture)
{
	CHECK_INT(uv_run(&fixture->loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(fixture->outstanding, 0);
	CHECK_INT(uv_loop_close(&fixture->loop), 0);
}

static void
outcome_free(struct outcome *outcome)
{
	free(outcome->content_type);
	kagent_buffer_free(&outcome->body);
	free(outcome->result.error_message);
	free(outcome->result.retry_after);
	free(outcome->result.retry_after_ms);
	free(outcome->result.should_retry);
	free(outcome->result.error_body);
}

/* One request to path with default options; the fixture is started on script. */
static void
run_one(const char *script, struct outcome *outcome, struct kagent_http_request_options options,
	const char *path)
{
	struct fixture fixture;
	char *url;

	fixture_start(&fixture, script);
	url = kagent_test_llm_server_url(&fixture.server, path);
	options.url = url;
	start_request(&fixture, outcome, options);
	fixture_run(&fixture);
	CHECK_INT(outcome->done_calls, 1);
	kagent_test_llm_server_stop(&fixture.server);
	free(url);
}

#define STREAM_EVENTS                                                                              \
	"[{\"event\": \"delta\", \"data\": \"one\"}, {\"data\": \"two\\nlines\"},"                 \
	" {\"raw\": \": keep-alive\\n\\n\"}, {\"data\": \"three\"}]"
#define STREAM_TEXT                                                                                \
	"event: delta\ndata: one\n\ndata: two\ndata: lines\n\n: keep-alive\n\ndata: three\n\n"

static void
test_stream_arrives_intact(void)
{
	struct outcome outcome = {0};

	run_one("[{\"sse\": " STREAM_EVENTS ", \"chunk_bytes\": 7, \"pause_ms\": 5}]", &outcome,
		(struct kagent_http_request_options){.body = "{}", .body_length = 2}, "/v1/stream");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_OK);
	CHECK(outcome.result.error_message == NULL);
	CHECK_INT(outcome.result.status, 200);
	CHECK_INT(outcome.head_calls, 1);
	CHECK_INT(outcome.head_status, 200);
	CHECK_STRING(outcome.content_type, "text/event-stream");
	CHECK_STRING(kagent_buffer_string(&outcome.body), STREAM_TEXT);
	CHECK(outcome.body_calls > 1);
	CHECK_INT(outcome.result.bytes, strlen(STREAM_TEXT));
	CHECK(outcome.result.error_body == NULL);
	CHECK(outcome.result.retry_after == NULL);
	CHECK(outcome.result.seconds > 0 && outcome.result.seconds < 60);
	outcome_free(&outcome);
}

static void
test_post_body_and_headers_reach_the_server(void)
{
	const char *headers[] = {"Authorization: Bearer test-key", "Content-Type: application/json",
				 "X-Kagent-Test: yes", NULL};
	const char *body = "{\"model\": \"m1\", \"messages\": [{\"role\": \"user\"}]}";
	struct fixture fixture;
	struct outcome outcomes[2] = {{0}};
	json_t *log, *entry;
	char *url, *error = NULL;

	fixture_start(&fixture,
		      "[{\"body\": \"ok\", \"expect\": {\"path\": \"/v1/chat/completions?x=1\","
		      " \"method\": \"POST\", \"body_contains\": [\"m1\"],"
		      " \"headers\": {\"x-kagent-test\": \"yes\"}}},"
		      " {\"body\": {\"answer\": 42}, \"expect\": {\"method\": \"GET\"}}]");
	url = kagent_test_llm_server_url(&fixture.server, "/v1/chat/completions?x=1");
	start_request(
	    &fixture, &outcomes[0],
	    (struct kagent_http_request_options){
		.url = url, .headers = headers, .body = body, .body_length = strlen(body)});
	fixture_run(&fixture);
	free(url);
	CHECK_INT(outcomes[0].result.failure, KAGENT_HTTP_OK);
	CHECK_INT(outcomes[0].result.status, 200);
	CHECK_STRING(kagent_buffer_string(&outcomes[0].body), "ok");

	/* A GET on a new client: the second exchange. */
	CHECK_INT(uv_loop_init(&fixture.loop), 0);
	CHECK_INT(kagent_http_client_create(&fixture.loop, &fixture.client, &error), 0);
	url = kagent_test_llm_server_url(&fixture.server, "/v1/models");
	start_request(&fixture, &outcomes[1],
		      (struct kagent_http_request_options){.url = url, .method = "GET"});
	fixture_run(&fixture);
	free(url);
	CHECK_INT(outcomes[1].result.status, 200);
	CHECK_STRING(kagent_buffer_string(&outcomes[1].body), "{\"answer\": 42}");

	log = kagent_test_llm_server_log(&fixture.server);
	CHECK_INT(json_array_size(log), 2);
	entry = json_array_get(log, 0);
	CHECK(json_object_get(entry, "expect_failed") == NULL);
	CHECK_STRING(json_string_value(json_object_get(entry, "method")), "POST");
	CHECK_STRING(json_string_value(json_object_get(entry, "path")), "/v1/chat/completions?x=1");
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(entry, "headers"), "authorization")),
	    "Bearer test-key");
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(entry, "headers"), "content-type")),
	    "application/json");
	CHECK(json_object_get(json_object_get(entry, "headers"), "expect") == NULL);
	CHECK_STRING(json_string_value(json_object_get(json_object_get(entry, "body"), "model")),
		     "m1");
	entry = json_array_get(log, 1);
	CHECK(json_object_get(entry, "expect_failed") == NULL);
	CHECK_STRING(json_string_value(json_object_get(entry, "method")), "GET");
	json_decref(log);
	kagent_test_llm_server_stop(&fixture.server);
	outcome_free(&outcomes[0]);
	outcome_free(&outcomes[1]);
}

/* A body read as it is sent: 300 KB in reads of at most 1000 bytes. */
#define READ_BODY_PAD (300 * 1000)

static size_t
read_padded_body(size_t offset, char *buffer, size_t size, void *data)
{
	const char *start = "{\"pad\": \"";
	size_t total = strlen(start) + READ_BODY_PAD + 2, count = 0;

	for (; count < size && count < 1000 && offset + count < total; count++) {
		size_t at = offset + count;

		buffer[count] = at < strlen(start)		     ? start[at]
				: at < strlen(start) + READ_BODY_PAD ? 'x'
				: at == total - 2		     ? '"'
								     : '}';
	}
	return count;
}

static void
test_body_read_as_sent(void)
{
	struct fixture fixture;
	struct outcome outcome = {0};
	json_t *log, *pad;
	char *url;

	fixture_start(&fixture, "[{\"body\": \"ok\"}]");
	url = kagent_test_llm_server_url(&fixture.server, "/v1/chat/completions");
	start_request(&fixture, &outcome,
		      (struct kagent_http_request_options){.url = url,
							   .body_length = strlen("{\"pad\": \"") +
									  READ_BODY_PAD + 2,
							   .read_body = read_padded_body});
	fixture_run(&fixture);
	free(url);
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_OK);
	CHECK_INT(outcome.result.status, 200);
	log = kagent_test_llm_server_log(&fixture.server);
	pad = json_object_get(json_object_get(json_array_get(log, 0), "body"), "pad");
	CHECK_INT(json_string_length(pad), READ_BODY_PAD);
	json_decref(log);
	outcome_free(&outcome);
	kagent_test_llm_server_stop(&fixture.server);
}

static void
test_429_keeps_retry_headers_and_error_body(void)
{
	struct outcome outcome = {0};

	run_one("[{\"status\": 429, \"headers\": {\"Retry-After\": \"7\", \"retry-after-ms\":"
		" \"1500\", \"x-should-retry\": \"true\"}, \"body\": {\"error\": {\"message\":"
		" \"slow down\", \"type\": \"rate_limit_exceeded\"}}}]",
		&outcome, (struct kagent_http_request_options){0}, "/v1/chat/completions");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_OK);
	CHECK(outcome.result.error_message == NULL);
	CHECK_INT(outcome.result.status, 429);
	CHECK_STRING(outcome.result.retry_after, "7");
	CHECK_STRING(outcome.result.retry_after_ms, "1500");
	CHECK_STRING(outcome.result.should_retry, "true");
	CHECK_STRING(
	    outcome.result.error_body,
	    "{\"error\": {\"message\": \"slow down\", \"type\": \"rate_limit_exceeded\"}}");
	CHECK_INT(outcome.result.bytes, strlen(outcome.result.error_body));
	CHECK_INT(outcome.body_calls, 0);
	CHECK_INT(outcome.head_calls, 0);
	outcome_free(&outcome);
}

static void
test_500_error_body(void)
{
	struct outcome outcome = {0};

	run_one("[{\"status\": 500, \"body\": \"boom\"}]", &outcome,
		(struct kagent_http_request_options){0}, "/");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_OK);
	CHECK_INT(outcome.result.status, 500);
	CHECK_STRING(outcome.result.error_body, "boom");
	CHECK(outcome.result.retry_after == NULL);
	CHECK(outcome.result.retry_after_ms == NULL);
	CHECK(outcome.result.should_retry == NULL);
	CHECK_INT(outcome.body_calls, 0);
	outcome_free(&outcome);
}

static void
test_error_body_is_capped(void)
{
	struct outcome outcome = {0};
	size_t length = 200 * 1024;
	char *big = kagent_malloc(length + 1), *script;

	memset(big, 'x', length);
	big[length] = '\0';
	script =
	    kagent_asprintf("[{\"status\": 503, \"body\": \"%s\", \"chunk_bytes\": 8192}]", big);
	run_one(script, &outcome, (struct kagent_http_request_options){0}, "/");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_OK);
	CHECK_INT(outcome.result.status, 503);
	CHECK_INT(strlen(outcome.result.error_body), 64 * 1024);
	CHECK(outcome.result.bytes < length);
	free(script);
	free(big);
	outcome_free(&outcome);
}

static void
test_stream_cut_in_the_middle(void)
{
	struct outcome outcome = {0};

	run_one("[{\"sse\": [{\"data\": \"a\"}, {\"data\": \"b\"}, {\"data\": \"c\"}],"
		" \"cut_after\": 2}]",
		&outcome, (struct kagent_http_request_options){0}, "/");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_CUT);
	CHECK_INT(outcome.result.status, 200);
	CHECK_STRING(kagent_buffer_string(&outcome.body), "data: a\n\ndata: b\n\n");
	CHECK_CONTAINS(outcome.result.error_message, "POST http://127.0.0.1:");
	outcome_free(&outcome);
}

static void
test_stall_after_the_head(void)
{
	struct outcome outcome = {0};

	run_one("[{\"sse\": [{\"data\": \"a\"}], \"stall_after\": 0, \"stall_ms\": 20000}]",
		&outcome, (struct kagent_http_request_options){.stall_seconds = 1}, "/");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_STALLED);
	CHECK_INT(outcome.result.status, 200);
	CHECK_INT(outcome.head_calls, 1);
	CHECK_INT(outcome.body_calls, 0);
	CHECK(outcome.result.seconds >= 0.9 && outcome.result.seconds < 5);
	CHECK_CONTAINS(outcome.result.error_message, "no byte for 1 s");
	outcome_free(&outcome);
}

/* Bytes that keep coming reset the stall watch: 5 pauses of 500 ms under a 2 s limit. */
static void
test_slow_stream_is_not_a_stall(void)
{
	struct outcome outcome = {0};

	run_one("[{\"sse\": [{\"data\": \"a\"}, {\"data\": \"b\"}, {\"data\": \"c\"},"
		" {\"data\": \"d\"}, {\"data\": \"e\"}, {\"data\": \"f\"}], \"pause_ms\": 500}]",
		&outcome, (struct kagent_http_request_options){.stall_seconds = 2}, "/");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_OK);
	CHECK(outcome.result.seconds >= 2.4);
	CHECK_INT(outcome.body_calls, 6);
	outcome_free(&outcome);
}

/* A port that was just free: nothing listens there. */
static int
closed_port(void)
{
	struct sockaddr_in address = {.sin_family = AF_INET};
	socklen_t length = sizeof address;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0);
	CHECK_INT(bind(fd, (struct sockaddr *)&address, sizeof address), 0);
	CHECK_INT(getsockname(fd, (struct sockaddr *)&address, &length), 0);
	close(fd);
	return ntohs(address.sin_port);
}

static void
test_connection_refused(void)
{
	struct fixture fixture = {0};
	struct outcome outcome = {0};
	char *url, *error = NULL;

	CHECK_INT(uv_loop_init(&fixture.loop), 0);
	CHECK_INT(kagent_http_client_create(&fixture.loop, &fixture.client, &error), 0);
	url = kagent_asprintf("http://127.0.0.1:%d/v1/chat/completions", closed_port());
	start_request(&fixture, &outcome, (struct kagent_http_request_options){.url = url});
	fixture_run(&fixture);
	CHECK_INT(outcome.done_calls, 1);
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_CONNECT);
	CHECK_INT(outcome.result.status, 0);
	CHECK_CONTAINS(outcome.result.error_message, "could not connect");
	CHECK_INT(outcome.head_calls, 0);
	free(url);
	outcome_free(&outcome);
}

/* Polled: cancels once the first event arrived, so that the request is surely mid-stream. */
static void
cancel_on_timer(uv_timer_t *timer)
{
	struct outcome *outcome = timer->data;

	if (outcome->body_calls == 0)
		return;
	kagent_http_request_cancel(outcome->request);
	uv_close((uv_handle_t *)timer, NULL);
}

static void
test_cancel_in_flight(void)
{
	struct fixture fixture;
	struct outcome outcome = {0}, early = {0};
	uv_timer_t timer;
	char *url;

	fixture_start(&fixture,
		      "{\"exchanges\": [{\"sse\": [{\"data\": \"a\"}], \"stall_after\": 1,"
		      " \"stall_ms\": 20000}], \"repeat_last\": true}");
	url = kagent_test_llm_server_url(&fixture.server, "/");
	start_request(&fixture, &outcome, (struct kagent_http_request_options){.url = url});
	/* Cancelled before the loop even ran: still reported from the loop. */
	kagent_http_request_cancel(
	    start_request(&fixture, &early, (struct kagent_http_request_options){.url = url}));
	CHECK_INT(early.done_calls, 0);
	uv_timer_init(&fixture.loop, &timer);
	timer.data = &outcome;
	uv_timer_start(&timer, cancel_on_timer, 20, 20);
	fixture_run(&fixture);
	CHECK_INT(outcome.done_calls, 1);
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_ABORTED);
	CHECK_STRING(kagent_buffer_string(&outcome.body), "data: a\n\n");
	CHECK(outcome.result.seconds < 10);
	CHECK_INT(early.done_calls, 1);
	CHECK_INT(early.result.failure, KAGENT_HTTP_ABORTED);
	CHECK_INT(early.result.status, 0);
	kagent_test_llm_server_stop(&fixture.server);
	free(url);
	outcome_free(&outcome);
	outcome_free(&early);
}

static void
test_body_callback_aborts(void)
{
	struct outcome outcome = {.refuse_body_at = 2};

	run_one("[{\"sse\": [{\"data\": \"a\"}, {\"data\": \"b\"}, {\"data\": \"c\"}],"
		" \"pause_ms\": 50}]",
		&outcome, (struct kagent_http_request_options){0}, "/");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_ABORTED);
	CHECK_INT(outcome.body_calls, 2);
	CHECK_CONTAINS(outcome.result.error_message, "body callback");
	outcome_free(&outcome);
}

/* Cancel from inside on_body, where libcurl may not be called. */
static void
test_cancel_inside_body_callback(void)
{
	struct outcome outcome = {.cancel_at_body = 1};

	run_one("[{\"sse\": [{\"data\": \"a\"}, {\"data\": \"b\"}], \"pause_ms\": 200}]", &outcome,
		(struct kagent_http_request_options){0}, "/");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_ABORTED);
	CHECK_INT(outcome.body_calls, 1);
	CHECK_CONTAINS(outcome.result.error_message, "cancelled");
	outcome_free(&outcome);
}

/* Polled: frees the client once each of the three requests has received its first event. */
static void
free_on_timer(uv_timer_t *timer)
{
	struct fixture *fixture = timer->data;
	struct outcome *outcomes = fixture->next_outcome;

	for (int i = 0; i < 3; i++)
		if (outcomes[i].body_calls == 0)
			return;
	kagent_http_client_free(fixture->client);
	/* Every request was told, before free returned. */
	CHECK_INT(fixture->outstanding, 0);
	uv_close((uv_handle_t *)timer, NULL);
}

static void
test_free_with_requests_in_flight(void)
{
	struct fixture fixture;
	struct outcome outcomes[3] = {{0}};
	uv_timer_t timer;
	char *url;

	fixture_start(&fixture,
		      "{\"exchanges\": [{\"sse\": [{\"data\": \"a\"}], \"stall_after\": 1,"
		      " \"stall_ms\": 20000}], \"repeat_last\": true}");
	url = kagent_test_llm_server_url(&fixture.server, "/");
	for (int i = 0; i < 3; i++)
		start_request(&fixture, &outcomes[i],
			      (struct kagent_http_request_options){.url = url});
	fixture.next_outcome = outcomes; /* for free_on_timer; start_next stays 0 */
	uv_timer_init(&fixture.loop, &timer);
	timer.data = &fixture;
	uv_timer_start(&timer, free_on_timer, 20, 20);
	fixture_run(&fixture);
	for (int i = 0; i < 3; i++) {
		CHECK_INT(outcomes[i].done_calls, 1);
		CHECK_INT(outcomes[i].result.failure, KAGENT_HTTP_ABORTED);
		CHECK_STRING(kagent_buffer_string(&outcomes[i].body), "data: a\n\n");
		outcome_free(&outcomes[i]);
	}
	kagent_test_llm_server_stop(&fixture.server);
	free(url);
}

/* Freeing the client from inside on_body (inside libcurl) waits for libcurl to return. */
static void
test_free_inside_body_callback(void)
{
	struct outcome outcome = {.free_at_body = 1};

	run_one("[{\"sse\": [{\"data\": \"a\"}, {\"data\": \"b\"}], \"pause_ms\": 200}]", &outcome,
		(struct kagent_http_request_options){0}, "/");
	CHECK_INT(outcome.result.failure, KAGENT_HTTP_ABORTED);
	CHECK_INT(outcome.body_calls, 1);
	outcome_free(&outcome);
}

/* Requests in parallel, and requests started from on_done (reusing the connection). */
static void
test_parallel_and_chained_requests(void)
{
	struct fixture fixture;
	struct outcome outcomes[6] = {{0}};
	char *url;

	fixture_start(&fixture, "{\"exchanges\": [{\"sse\": [{\"data\": \"x\"}, {\"data\": \"y\"}],"
				" \"pause_ms\": 100}], \"repeat_last\": true}");
	url = kagent_test_llm_server_url(&fixture.server, "/");
	fixture.start_next = 3;
	fixture.next_outcome = &outcomes[3];
	for (int i = 0; i < 3; i++)
		start_request(&fixture, &outcomes[i],
			      (struct kagent_http_request_options){.url = url});
	fixture_run(&fixture);
	for (int i = 0; i < 6; i++) {
		CHECK_INT(outcomes[i].done_calls, 1);
		CHECK_INT(outcomes[i].result.failure, KAGENT_HTTP_OK);
		CHECK_STRING(kagent_buffer_string(&outcomes[i].body), "data: x\n\ndata: y\n\n");
		outcome_free(&outcomes[i]);
	}
	kagent_test_llm_server_stop(&fixture.server);
	free(url);
}

static void
never_called(const struct kagent_http_result *result, void *data)
{
	CHECK(0);
}

static void
expect_refused(struct kagent_http_client *client, struct kagent_http_request_options options,
	       const char *message)
{
	char *error = NULL;

	options.on_done = options.on_done != NULL ? options.on_done : never_called;
	CHECK(kagent_http_request_start(client, &options, &error) == NULL);
	CHECK_CONTAINS(error, message);
	free(error);
}

static void
test_bad_options_are_refused(void)
{
	uv_loop_t loop;
	struct kagent_http_client *client;
	char *error = NULL;
	static const char body[] = "x";

	CHECK_INT(uv_loop_init(&loop), 0);
	CHECK_INT(kagent_http_client_create(&loop, &client, &error), 0);
	expect_refused(client, (struct kagent_http_request_options){0}, "needs a url");
	expect_refused(client,
		       (struct kagent_http_request_options){.url = "http://a/", .method = "PUT"},
		       "PUT is not supported");
	expect_refused(client, (struct kagent_http_request_options){.url = "ftp://a/"},
		       "not http or https");
	expect_refused(client, (struct kagent_http_request_options){.url = "http://a b/"},
		       "bad URL");
	expect_refused(client,
		       (struct kagent_http_request_options){
			   .url = "http://a/", .method = "GET", .body = body, .body_length = 1},
		       "GET request cannot carry a body");
	expect_refused(client,
		       (struct kagent_http_request_options){
			   .url = "http://a/", .body = body, .body_length = (64u << 20) + 1},
		       "over the 64 MiB cap");
	kagent_http_client_free(client);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(uv_loop_close(&loop), 0);
}

static void
test_failure_names(void)
{
	CHECK_STRING(kagent_http_failure_name(KAGENT_HTTP_OK), "ok");
	CHECK_STRING(kagent_http_failure_name(KAGENT_HTTP_STALLED), "stalled");
	CHECK_STRING(kagent_http_failure_name(KAGENT_HTTP_CUT), "cut");
	CHECK_STRING(kagent_http_failure_name(KAGENT_HTTP_ABORTED), "aborted");
}

static const struct kagent_test tests[] = {
    {"stream_arrives_intact", test_stream_arrives_intact},
    {"post_body_and_headers_reach_the_server", test_post_body_and_headers_reach_the_server},
    {"body_read_as_sent", test_body_read_as_sent},
    {"429_keeps_retry_headers_and_error_body", test_429_keeps_retry_headers_and_error_body},
    {"500_error_body", test_500_error_body},
    {"error_body_is_capped", test_error_body_is_capped},
    {"stream_cut_in_the_middle", test_stream_cut_in_the_middle},
    {"stall_after_the_head", test_stall_after_the_head},
    {"slow_stream_is_not_a_stall", test_slow_stream_is_not_a_stall},
    {"connection_refused", test_connection_refused},
    {"cancel_in_flight", test_cancel_in_flight},
    {"body_callback_aborts", test_body_callback_aborts},
    {"cancel_inside_body_callback", test_cancel_inside_body_callback},
    {"free_with_requests_in_flight", test_free_with_requests_in_flight},
    {"free_inside_body_callback", test_free_inside_body_callback},
    {"parallel_and_chained_requests", test_parallel_and_chained_requests},
    {"bad_options_are_refused", test_bad_options_are_refused},
    {"failure_names", test_failure_names},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
