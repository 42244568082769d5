/*
 * Tests of agent/daemon/http_server.c and daemon_client.c: the server runs on a libuv loop in
 * the test's thread; a client thread drives it with the daemon client (libcurl) or raw sockets
 * (for garbage, slow readers and clients that leave), then asks the loop to close the server.
 * Every test ends with the loop closed and no handle left.
 */
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/daemon/daemon_client.h"
#include "kagent/daemon/http_server.h"
#include "test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "0123456789abcdef-test-token"

struct fixture {
	uv_loop_t loop;
	uv_async_t done;
	uv_timer_t flood_timer;
	struct kagent_http_server *server;
	struct kagent_http_server_options options;
	char *directory;
	char *socket_path;
	char *url; /* http://127.0.0.1:PORT when TCP is on */
	pthread_t thread;
	void (*client)(struct fixture *fixture);
	struct kagent_http_stream *flood;
	struct kagent_http_stream *paced;
	int paced_next, paced_last;
	struct kagent_http_request *held;
	int flood_sequence;
	atomic_int held_count;
	atomic_int gone_count;
	atomic_int overflow_count;
	atomic_int stream_closed_count;
	atomic_int closed;
	atomic_flag done_sent;
	char first_dropped[64];
};

/* ---- routes ---- */

static void
handle_run(struct kagent_http_request *request, void *data)
{
	const char *q = kagent_http_request_query(request, "q");

	kagent_http_reply_json(request, 200,
			       json_pack("{s:s, s:b, s:s?}", "id",
					 kagent_http_request_parameter(request, "id"), "over_tcp",
					 kagent_http_request_over_tcp(request), "q", q));
}

static void
handle_create(struct kagent_http_request *request, void *data)
{
	json_t *body = kagent_http_request_json(request);

	kagent_http_reply_json(request, 201,
			       json_pack("{s:O?}", "received", body != NULL ? body : json_null()));
}

static void
handle_raw(struct kagent_http_request *request, void *data)
{
	size_t length;

	kagent_http_request_body(request, &length);
	CHECK(kagent_http_request_json(request) == NULL);
	kagent_http_reply_json(request, 200, json_pack("{s:I}", "length", (json_int_t)length));
}

/* A page, as the web viewer's files are answered. */
static void
handle_page(struct kagent_http_request *request, void *data)
{
	kagent_http_reply_header(request, "Content-Security-Policy", "default-src 'self'");
	kagent_http_reply_bytes(request, 200, "text/html; charset=utf-8", "<p>page</p>", 11);
}

static void
work(uv_work_t *job)
{
	usleep(20000);
}

static void
work_done(uv_work_t *job, int status)
{
	struct kagent_http_request *request = job->data;

	kagent_http_reply_json(request, 200, json_pack("{s:b}", "worked", 1));
	free(job);
}

/* Answers after a thread-pool job, as the daemon's store calls will. */
static void
handle_work(struct kagent_http_request *request, void *data)
{
	struct fixture *fixture = data;
	uv_work_t *job = kagent_calloc(1, sizeof *job);

	job->data = request;
	CHECK_INT(uv_queue_work(&fixture->loop, job, work, work_done), 0);
}

static void
on_gone(struct kagent_http_request *request, void *data)
{
	struct fixture *fixture = data;

	CHECK(fixture->held == request);
	fixture->held = NULL;
	atomic_fetch_add(&fixture->gone_count, 1);
}

/* Never answers: the client leaves, or the server closes. */
static void
handle_hold(struct kagent_http_request *request, void *data)
{
	struct fixture *fixture = data;

	fixture->held = request;
	kagent_http_request_set_on_gone(request, on_gone, fixture);
	atomic_fetch_add(&fixture->held_count, 1);
}

static void
handle_events(struct kagent_http_request *request, void *data)
{
	struct kagent_http_stream *stream = kagent_http_stream_start(request, NULL);
	json_t *event;
	char id[16];
	int n;

	for (n = 1; n <= 3; n++) {
		snprintf(id, sizeof id, "%d", n);
		event = json_pack("{s:i}", "n", n);
		CHECK_INT(kagent_http_stream_send(stream, id, "step", event), 0);
		json_decref(event);
	}
	CHECK_INT(kagent_http_stream_send(stream, NULL, NULL, NULL), 0);
	kagent_http_stream_close(stream);
}

static void
on_flood_overflow(struct kagent_http_stream *stream, size_t count, const char *first_dropped_id,
		  void *data)
{
	struct fixture *fixture = data;

	CHECK(count > 0);
	CHECK(first_dropped_id != NULL);
	snprintf(fixture->first_dropped, sizeof fixture->first_dropped, "%s", first_dropped_id);
	atomic_fetch_add(&fixture->overflow_count, 1);
}

static void
on_flood_close(struct kagent_http_stream *stream, void *data)
{
	struct fixture *fixture = data;

	CHECK(fixture->flood == stream);
	fixture->flood = NULL;
	uv_timer_stop(&fixture->flood_timer);
	atomic_fetch_add(&fixture->stream_closed_count, 1);
}

/* Sends 64 events of 1 KiB each millisecond while the stream lasts. */
static void
flood(uv_timer_t *timer)
{
	struct fixture *fixture = timer->data;
	char id[32], filler[1024];
	json_t *data;
	int i;

	memset(filler, 'x', sizeof filler - 1);
	filler[sizeof filler - 1] = '\0';
	data = json_pack("{s:s}", "filler", filler);
	for (i = 0; i < 64 && fixture->flood != NULL; i++) {
		snprintf(id, sizeof id, "%d", ++fixture->flood_sequence);
		kagent_http_stream_send(fixture->flood, id, "fill", data);
	}
	json_decref(data);
}

static void
handle_flood(struct kagent_http_request *request, void *data)
{
	struct fixture *fixture = data;
	struct kagent_http_stream_callbacks callbacks = {
	    .on_close = on_flood_close, .on_overflow = on_flood_overflow, .data = fixture};

	fixture->flood = kagent_http_stream_start(request, &callbacks);
	uv_timer_start(&fixture->flood_timer, flood, 1, 1);
}

/* Sends the paced events that fit; the rest after the next drain, then ends the stream. */
static void
paced_send(struct fixture *fixture)
{
	char id[16], data[1024];

	memset(data, 'y', sizeof data - 1);
	data[0] = data[sizeof data - 2] = '"';
	data[sizeof data - 1] = '\0';
	while (fixture->paced != NULL && fixture->paced_next <= fixture->paced_last) {
		/* The event's lines around the data: "id: N\nevent: paced\ndata: ...\n\n". */
		if (strlen(data) + 64 > kagent_http_stream_room(fixture->paced))
			return;
		snprintf(id, sizeof id, "%d", fixture->paced_next++);
		CHECK_INT(kagent_http_stream_send_text(fixture->paced, id, "paced", data), 0);
	}
	if (fixture->paced != NULL) {
		kagent_http_stream_close(fixture->paced);
		fixture->paced = NULL;
	}
}

static void
on_paced_drain(struct kagent_http_stream *stream, void *data)
{
	struct fixture *fixture = data;

	CHECK(fixture->paced == stream);
	paced_send(fixture);
}

static void
on_paced_close(struct kagent_http_stream *stream, void *data)
{
	struct fixture *fixture = data;

	fixture->paced = NULL;
	atomic_fetch_add(&fixture->stream_closed_count, 1);
}

/* 2,000 events of 1 KiB from after Last-Event-ID, never more than the stream has room for. */
static void
handle_paced(struct kagent_http_request *request, void *data)
{
	struct fixture *fixture = data;
	const char *last = kagent_http_request_header(request, "last-event-id");
	struct kagent_http_stream_callbacks callbacks = {.on_close = on_paced_close,
							 .on_overflow = on_flood_overflow,
							 .on_drain = on_paced_drain,
							 .data = fixture};

	fixture->paced_next = last != NULL ? atoi(last) + 1 : 1;
	fixture->paced_last = 2000;
	fixture->paced = kagent_http_stream_start(request, &callbacks);
	/* Data of two lines would break the event apart: refused. */
	CHECK_INT(kagent_http_stream_send_text(fixture->paced, NULL, NULL, "two\nlines"), -EINVAL);
	paced_send(fixture);
}

static void
on_quiet_close(struct kagent_http_stream *stream, void *data)
{
	atomic_fetch_add(&((struct fixture *)data)->stream_closed_count, 1);
}

/* A stream with nothing to say yet (a queued session's). */
static void
handle_quiet(struct kagent_http_request *request, void *data)
{
	struct kagent_http_stream_callbacks callbacks = {.on_close = on_quiet_close, .data = data};

	kagent_http_stream_start(request, &callbacks);
}

static const struct kagent_http_route routes[] = {
    {.method = "GET", .pattern = "/v1/runs/{id}", .handle = handle_run, .summary = "one run"},
    {.method = "POST", .pattern = "/v1/runs", .handle = handle_create, .summary = "a new run"},
    {.method = "POST",
     .pattern = "/v1/raw",
     .handle = handle_raw,
     .summary = "raw body",
     .flags = KAGENT_HTTP_ROUTE_RAW_BODY},
    {.method = "GET", .pattern = "/v1/work", .handle = handle_work, .summary = "async"},
    {.method = "GET", .pattern = "/page", .handle = handle_page, .summary = "a page"},
    {.method = "GET", .pattern = "/v1/hold", .handle = handle_hold, .summary = "never answers"},
    {.method = "GET", .pattern = "/v1/events", .handle = handle_events, .summary = "SSE"},
    {.method = "GET", .pattern = "/v1/flood", .handle = handle_flood, .summary = "SSE flood"},
    {.method = "GET", .pattern = "/v1/paced", .handle = handle_paced, .summary = "SSE paced"},
    {.method = "GET", .pattern = "/v1/quiet", .handle = handle_quiet, .summary = "SSE, quiet"},
    {.method = NULL},
};

/* ---- the fixture ---- */

static void
on_server_closed(void *data)
{
	atomic_fetch_add(&((struct fixture *)data)->closed, 1);
}

static void
on_done(uv_async_t *async)
{
	struct fixture *fixture = async->data;

	uv_close((uv_handle_t *)&fixture->done, NULL);
	uv_close((uv_handle_t *)&fixture->flood_timer, NULL);
	kagent_http_server_close(fixture->server, on_server_closed, fixture);
}

/* Asks the loop (from the client thread) to close the server; once, because the handle is
 * closed after the first. */
static void
close_server(struct fixture *fixture)
{
	if (!atomic_flag_test_and_set(&fixture->done_sent))
		uv_async_send(&fixture->done);
}

static void *
client_thread(void *data)
{
	struct fixture *fixture = data;

	fixture->client(fixture);
	close_server(fixture);
	return NULL;
}

static void
fixture_init(struct fixture *fixture)
{
	memset(fixture, 0, sizeof *fixture);
	atomic_flag_clear(&fixture->done_sent);
	CHECK_INT(uv_loop_init(&fixture->loop), 0);
	fixture->directory = kagent_test_make_directory();
	fixture->socket_path = kagent_asprintf("%s/run/kagentd.sock", fixture->directory);
	fixture->options.socket_path = fixture->socket_path;
	fixture->options.routes = routes;
	fixture->options.handler_data = fixture;
	fixture->options.watch_interval_ms = 20;
}

/* Starts the server with fixture->options, runs client in a thread, then closes the server
 * and checks that the loop ends with nothing left. */
static void
fixture_run(struct fixture *fixture, void (*client)(struct fixture *fixture))
{
	char *cause = NULL;
	int error;

	error =
	    kagent_http_server_start(&fixture->loop, &fixture->options, &fixture->server, &cause);
	if (error != 0)
		fprintf(stderr, "start: %s\n", cause);
	CHECK_INT(error, 0);
	if (fixture->options.tcp_address != NULL)
		fixture->url = kagent_asprintf("http://127.0.0.1:%d",
					       kagent_http_server_tcp_port(fixture->server));
	CHECK_INT(uv_async_init(&fixture->loop, &fixture->done, on_done), 0);
	fixture->done.data = fixture;
	CHECK_INT(uv_timer_init(&fixture->loop, &fixture->flood_timer), 0);
	fixture->flood_timer.data = fixture;
	fixture->client = client;
	CHECK_INT(pthread_create(&fixture->thread, NULL, client_thread, fixture), 0);
	CHECK_INT(uv_run(&fixture->loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(pthread_join(fixture->thread, NULL), 0);
	CHECK_INT(atomic_load(&fixture->closed), 1);
	CHECK_INT(uv_loop_close(&fixture->loop), 0);
	/* The server removed its socket file. */
	CHECK(access(fixture->socket_path, F_OK) != 0);
}

static void
fixture_free(struct fixture *fixture)
{
	char *command = kagent_asprintf("rm -rf '%s'", fixture->directory);

	CHECK_INT(system(command), 0);
	free(command);
	free(fixture->directory);
	free(fixture->socket_path);
	free(fixture->url);
}

/* Waits (in the client thread) until *counter reaches at least value; 10 s at most. */
static void
wait_for(atomic_int *counter, int value)
{
	int i;

	for (i = 0; i < 1000 && atomic_load(counter) < value; i++)
		usleep(10000);
	if (atomic_load(counter) < value)
		fprintf(stderr, "waited for %d, have %d\n", value, atomic_load(counter));
	CHECK(atomic_load(counter) >= value);
}

/* ---- clients ---- */

/* One request through the daemon client; returns the status, the reply in *reply. */
static long
request(const char *target, const char *token, const char *method, const char *path, json_t *body,
	json_t **reply)
{
	char *cause = NULL;
	long status = 0;
	int error;

	error =
	    kagent_daemon_client_request(target, token, method, path, body, &status, reply, &cause);
	if (error != 0)
		fprintf(stderr, "request: %s\n", cause);
	CHECK_INT(error, 0);
	json_decref(body);
	return status;
}

static int
raw_connect_unix(const char *path)
{
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	CHECK(fd >= 0);
	snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
	CHECK_INT(connect(fd, (struct sockaddr *)&address, sizeof address), 0);
	return fd;
}

static void
raw_write(int fd, const char *bytes, size_t length)
{
	ssize_t written;

	while (length > 0) {
		written = write(fd, bytes, length);
		CHECK(written > 0);
		bytes += written;
		length -= (size_t)written;
	}
}

static void
raw_send(int fd, const char *text)
{
	raw_write(fd, text, strlen(text));
}

/* Sends bytes on a fresh connection to the Unix socket and reads until the server closes. */
static char *
raw_exchange(struct fixture *fixture, const char *bytes, size_t length)
{
	struct kagent_buffer response = {0};
	char piece[4096];
	ssize_t got;
	int fd = raw_connect_unix(fixture->socket_path);

	raw_write(fd, bytes, length);
	while ((got = read(fd, piece, sizeof piece)) > 0)
		kagent_buffer_append(&response, piece, (size_t)got);
	close(fd);
	return kagent_buffer_take(&response);
}

static char *
raw_request(struct fixture *fixture, const char *text)
{
	return raw_exchange(fixture, text, strlen(text));
}

/* Sends text on a fresh TCP connection and reads until the server closes. */
static char *
raw_request_tcp(struct fixture *fixture, const char *text)
{
	struct sockaddr_in address = {.sin_family = AF_INET};
	struct kagent_buffer response = {0};
	char piece[4096];
	ssize_t got;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(fd >= 0);
	address.sin_port = htons((uint16_t)kagent_http_server_tcp_port(fixture->server));
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_INT(connect(fd, (struct sockaddr *)&address, sizeof address), 0);
	raw_send(fd, text);
	while ((got = read(fd, piece, sizeof piece)) > 0)
		kagent_buffer_append(&response, piece, (size_t)got);
	close(fd);
	return kagent_buffer_take(&response);
}

/* A GET of path over TCP with these extra header lines ("" for none). */
static char *
tcp_get(struct fixture *fixture, const char *path, const char *headers)
{
	char *text = kagent_asprintf("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n",
				     path, headers);
	char *response = raw_request_tcp(fixture, text);

	free(text);
	return response;
}

/* ---- tests ---- */

static void
client_routing(struct fixture *fixture)
{
	json_t *reply = NULL;

	CHECK_INT(
	    request(fixture->socket_path, NULL, "GET", "/v1/runs/abc%20d?q=x+y&flag", NULL, &reply),
	    200);
	CHECK_STRING(json_string_value(json_object_get(reply, "id")), "abc d");
	CHECK_STRING(json_string_value(json_object_get(reply, "q")), "x y");
	CHECK(json_is_false(json_object_get(reply, "over_tcp")));
	json_decref(reply);
	CHECK_INT(request(fixture->socket_path, NULL, "POST", "/v1/runs",
			  json_pack("{s:s}", "problem", "gemm"), &reply),
		  201);
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(reply, "received"), "problem")),
	    "gemm");
	json_decref(reply);
	CHECK_INT(request(fixture->socket_path, NULL, "POST", "/v1/raw", json_string("not {json"),
			  &reply),
		  200);
	CHECK_INT(json_integer_value(json_object_get(reply, "length")), 11);
	json_decref(reply);
	/* A {id} matches one non-empty segment only. */
	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/runs/", NULL, &reply), 404);
	json_decref(reply);
	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/runs/a/b", NULL, &reply), 404);
	json_decref(reply);
}

static void
test_routing(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture_run(&fixture, client_routing);
	fixture_free(&fixture);
}

static void
client_errors(struct fixture *fixture)
{
	json_t *reply = NULL;
	char *response, *big, *text;

	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/nope", NULL, &reply), 404);
	CHECK_CONTAINS(json_string_value(json_object_get(reply, "error")), "no such path: /nope");
	json_decref(reply);
	CHECK_INT(request(fixture->socket_path, NULL, "DELETE", "/v1/runs/abc", NULL, &reply), 405);
	CHECK_CONTAINS(json_string_value(json_object_get(reply, "error")), "allowed: GET");
	json_decref(reply);
	response = raw_request(fixture, "PUT /v1/runs HTTP/1.1\r\nHost: x\r\nConnection: "
					"close\r\nContent-Length: 0\r\n\r\n");
	CHECK_CONTAINS(response, "HTTP/1.1 405");
	CHECK_CONTAINS(response, "allow: POST");
	free(response);
	response = raw_request(fixture, "POST /v1/runs HTTP/1.1\r\nHost: x\r\nConnection: "
					"close\r\nContent-Length: 10\r\n\r\n{\"a\": 1,,}");
	CHECK_CONTAINS(response, "HTTP/1.1 400");
	CHECK_CONTAINS(response, "malformed JSON body");
	CHECK_CONTAINS(response, "line 1, column 9");
	free(response);
	/* Over the cap of 1 KiB: h2o refuses it before dispatch. */
	big = kagent_malloc(2001);
	memset(big, ' ', 2000);
	big[2000] = '\0';
	text = kagent_asprintf("POST /v1/raw HTTP/1.1\r\nHost: x\r\nConnection: "
			       "close\r\nContent-Length: 2000\r\n\r\n%s",
			       big);
	response = raw_request(fixture, text);
	CHECK_CONTAINS(response, "HTTP/1.1 413");
	free(response);
	free(text);
	free(big);
	/* At the cap: accepted. */
	CHECK_INT(request(fixture->socket_path, NULL, "POST", "/v1/raw", json_string("ok"), &reply),
		  200);
	json_decref(reply);
}

static void
test_errors(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture.options.body_cap = 1024;
	fixture_run(&fixture, client_errors);
	fixture_free(&fixture);
}

static void
client_tcp_token(struct fixture *fixture)
{
	json_t *reply = NULL;

	CHECK_INT(request(fixture->url, NULL, "GET", "/v1/runs/r1", NULL, &reply), 401);
	CHECK_CONTAINS(json_string_value(json_object_get(reply, "error")), "bearer token");
	json_decref(reply);
	CHECK_INT(request(fixture->url, "0123456789abcdef-test-tokeN", "GET", "/v1/runs/r1", NULL,
			  &reply),
		  401);
	json_decref(reply);
	CHECK_INT(request(fixture->url, "short", "GET", "/v1/runs/r1", NULL, &reply), 401);
	json_decref(reply);
	CHECK_INT(request(fixture->url, TOKEN, "GET", "/v1/runs/r1", NULL, &reply), 200);
	CHECK(json_is_true(json_object_get(reply, "over_tcp")));
	json_decref(reply);
	/* Unknown paths need the token too: nothing is told to a stranger. */
	CHECK_INT(request(fixture->url, NULL, "GET", "/nope", NULL, &reply), 401);
	json_decref(reply);
	/* The Unix socket needs none. */
	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/runs/r1", NULL, &reply), 200);
	CHECK(json_is_false(json_object_get(reply, "over_tcp")));
	json_decref(reply);
}

static void
test_tcp_token(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture.options.tcp_address = "127.0.0.1:0";
	fixture.options.token = TOKEN;
	fixture_run(&fixture, client_tcp_token);
	fixture_free(&fixture);
}

/* A browser: ?token= once gives a cookie and a 303 without the token; the cookie then counts
 * as the bearer token. */
static void
client_browser_token(struct fixture *fixture)
{
	int port = kagent_http_server_tcp_port(fixture->server);
	char *response, *cookie, *header;

	response = tcp_get(fixture, "/page?token=" TOKEN, "");
	CHECK_CONTAINS(response, "HTTP/1.1 303");
	CHECK_CONTAINS(response, "location: /page\r\n");
	cookie = kagent_asprintf(
	    "set-cookie: kagent_token_%d=" TOKEN "; Path=/; HttpOnly; SameSite=Strict\r\n", port);
	CHECK_CONTAINS(response, cookie);
	free(cookie);
	free(response);
	/* Percent-encoded, among other parameters: the same. */
	response = tcp_get(fixture, "/v1/runs/r1?a=1&token=0123456789abcdef%2Dtest-token", "");
	CHECK_CONTAINS(response, "HTTP/1.1 303");
	CHECK_CONTAINS(response, "location: /v1/runs/r1\r\n");
	free(response);
	/* A path that a browser would read as another host's goes to "/". */
	response = tcp_get(fixture, "//example.com/x?token=" TOKEN, "");
	CHECK_CONTAINS(response, "HTTP/1.1 303");
	CHECK_CONTAINS(response, "location: /\r\n");
	free(response);
	/* A wrong token gets no cookie. */
	response = tcp_get(fixture, "/page?token=0123456789abcdef-test-tokeN", "");
	CHECK_CONTAINS(response, "HTTP/1.1 401");
	CHECK(strstr(response, "set-cookie") == NULL);
	free(response);
	/* Only a GET exchanges it. */
	response = raw_request_tcp(fixture, "POST /v1/runs?token=" TOKEN " HTTP/1.1\r\nHost: "
					    "x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
	CHECK_CONTAINS(response, "HTTP/1.1 401");
	free(response);
	/* The cookie, among others, lets the page and the API in. */
	header = kagent_asprintf("Cookie: theme=dark; kagent_token_%d=" TOKEN "; x=y\r\n", port);
	response = tcp_get(fixture, "/page", header);
	CHECK_CONTAINS(response, "HTTP/1.1 200");
	CHECK_CONTAINS(response, "content-type: text/html; charset=utf-8");
	CHECK_CONTAINS(response, "content-security-policy: default-src 'self'");
	CHECK_CONTAINS(response, "x-content-type-options: nosniff");
	CHECK_CONTAINS(response, "<p>page</p>");
	free(response);
	free(header);
	/* Another port's cookie, or a wrong one, does not. */
	header = kagent_asprintf("Cookie: kagent_token_%d=" TOKEN "\r\n", port + 1);
	response = tcp_get(fixture, "/page", header);
	CHECK_CONTAINS(response, "HTTP/1.1 401");
	free(response);
	free(header);
	header = kagent_asprintf("Cookie: kagent_token_%d=0123456789abcdef-test-tokeN\r\n", port);
	response = tcp_get(fixture, "/v1/runs/r1", header);
	CHECK_CONTAINS(response, "HTTP/1.1 401");
	free(response);
	free(header);
}

static void
test_browser_token(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture.options.tcp_address = "127.0.0.1:0";
	fixture.options.token = TOKEN;
	fixture_run(&fixture, client_browser_token);
	fixture_free(&fixture);
}

static void
test_tcp_needs_token(void)
{
	struct fixture fixture;
	struct kagent_http_server *server = NULL;
	char *cause = NULL;

	fixture_init(&fixture);
	fixture.options.tcp_address = "127.0.0.1:0";
	CHECK_INT(kagent_http_server_start(&fixture.loop, &fixture.options, &server, &cause),
		  -EINVAL);
	CHECK(server == NULL);
	CHECK_CONTAINS(cause, "without a token");
	free(cause);
	cause = NULL;
	fixture.options.token = "short";
	CHECK_INT(kagent_http_server_start(&fixture.loop, &fixture.options, &server, &cause),
		  -EINVAL);
	CHECK_CONTAINS(cause, "too short");
	free(cause);
	CHECK_INT(uv_run(&fixture.loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(uv_loop_close(&fixture.loop), 0);
	fixture_free(&fixture);
}

static void
client_async(struct fixture *fixture)
{
	json_t *reply = NULL;
	char *response;
	int fd;

	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/work", NULL, &reply), 200);
	CHECK(json_is_true(json_object_get(reply, "worked")));
	json_decref(reply);
	/* A client that leaves before the answer: the owner is told, the server goes on. */
	fd = raw_connect_unix(fixture->socket_path);
	raw_send(fd, "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n");
	wait_for(&fixture->held_count, 1);
	close(fd);
	wait_for(&fixture->gone_count, 1);
	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/runs/after", NULL, &reply), 200);
	json_decref(reply);
	/* A request still held when the server closes: the owner is told, the client gets 503. */
	fd = raw_connect_unix(fixture->socket_path);
	raw_send(fd, "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n");
	wait_for(&fixture->held_count, 2);
	close_server(fixture);
	{
		struct kagent_buffer text = {0};
		char piece[1024];
		ssize_t got;

		while ((got = read(fd, piece, sizeof piece)) > 0)
			kagent_buffer_append(&text, piece, (size_t)got);
		response = kagent_buffer_take(&text);
	}
	close(fd);
	CHECK_CONTAINS(response, "HTTP/1.1 503");
	CHECK_CONTAINS(response, "shutting down");
	free(response);
	wait_for(&fixture->gone_count, 2);
}

static void
test_async(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture_run(&fixture, client_async);
	CHECK_INT(atomic_load(&fixture.gone_count), 2);
	fixture_free(&fixture);
}

static void
client_garbage(struct fixture *fixture)
{
	static const char garbage[] = "\x00\x01\x02\xff garbage \r\n\r\n\x7f\x80";
	json_t *reply = NULL;
	char *response;
	int fd;

	response = raw_exchange(fixture, garbage, sizeof garbage - 1);
	CHECK_CONTAINS(response, "400");
	free(response);
	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/runs/x", NULL, &reply), 200);
	json_decref(reply);
	/* Half a request, then gone. */
	fd = raw_connect_unix(fixture->socket_path);
	raw_send(fd, "POST /v1/runs HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"a\":");
	close(fd);
	/* Headers that never end. */
	fd = raw_connect_unix(fixture->socket_path);
	raw_send(fd, "GET /v1/runs/x HTTP/1.1\r\nX-A: b");
	close(fd);
	/* A bad chunked body. */
	response = raw_request(fixture, "POST /v1/runs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
					"chunked\r\n\r\nzz\r\n");
	CHECK_CONTAINS(response, "400");
	free(response);
	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/runs/y", NULL, &reply), 200);
	CHECK_STRING(json_string_value(json_object_get(reply, "id")), "y");
	json_decref(reply);
}

static void
test_garbage(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture_run(&fixture, client_garbage);
	fixture_free(&fixture);
}

static void
client_events(struct fixture *fixture)
{
	char *response = raw_request(fixture, "GET /v1/events HTTP/1.1\r\nHost: x\r\nConnection: "
					      "close\r\n\r\n");
	const char *one, *two, *three;

	CHECK_CONTAINS(response, "HTTP/1.1 200");
	CHECK_CONTAINS(response, "content-type: text/event-stream");
	CHECK_CONTAINS(response, "cache-control: no-cache");
	one = strstr(response, "id: 1\nevent: step\ndata: {\"n\":1}\n\n");
	two = strstr(response, "id: 2\nevent: step\ndata: {\"n\":2}\n\n");
	three = strstr(response, "id: 3\nevent: step\ndata: {\"n\":3}\n\n");
	CHECK(one != NULL && two != NULL && three != NULL);
	CHECK(one < two && two < three);
	free(response);
}

static void
test_events(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture_run(&fixture, client_events);
	fixture_free(&fixture);
}

static void
client_slow_reader(struct fixture *fixture)
{
	int fd = raw_connect_unix(fixture->socket_path), size = 4096;

	CHECK_INT(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size), 0);
	raw_send(fd, "GET /v1/flood HTTP/1.1\r\nHost: x\r\n\r\n");
	/* Never reads: the server's queue fills and is dropped. */
	wait_for(&fixture->overflow_count, 1);
	close(fd);
	wait_for(&fixture->stream_closed_count, 1);
}

static void
test_slow_reader(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture.options.stream_cap = 16 << 10;
	fixture_run(&fixture, client_slow_reader);
	CHECK(fixture.first_dropped[0] != '\0');
	CHECK(atoi(fixture.first_dropped) > 1);
	CHECK_INT(atomic_load(&fixture.stream_closed_count), 1);
	fixture_free(&fixture);
}

/* A reader that stalls, then reads everything: every event from after its Last-Event-ID, in
 * order, none dropped, because the route sends only what fits and the rest after each drain. */
static void
client_paced(struct fixture *fixture)
{
	int fd = raw_connect_unix(fixture->socket_path), size = 4096, expected = 6;
	struct kagent_buffer response = {0};
	char piece[65536], id[32];
	const char *at;
	ssize_t got;

	CHECK_INT(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size), 0);
	raw_send(fd, "GET /v1/paced HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 5\r\n"
		     "Connection: close\r\n\r\n");
	usleep(300000);
	while ((got = read(fd, piece, sizeof piece)) > 0)
		kagent_buffer_append(&response, piece, (size_t)got);
	close(fd);
	at = kagent_buffer_string(&response);
	while ((at = strstr(at, "\nid: ")) != NULL) {
		snprintf(id, sizeof id, "\nid: %d\n", expected);
		CHECK(strncmp(at, id, strlen(id)) == 0);
		expected++;
		at++;
	}
	CHECK_INT(expected, 2001);
	CHECK_INT(atomic_load(&fixture->overflow_count), 0);
	kagent_buffer_free(&response);
}

static void
test_paced_stream(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture.options.stream_cap = 16 << 10;
	fixture_run(&fixture, client_paced);
	fixture_free(&fixture);
}

/* The head of a stream that sends no event comes at once, with the opening comment. */
static void
client_quiet(struct fixture *fixture)
{
	int fd = raw_connect_unix(fixture->socket_path);
	struct pollfd entry = {.fd = fd, .events = POLLIN};
	char piece[1024];
	ssize_t got;

	raw_send(fd, "GET /v1/quiet HTTP/1.1\r\nHost: x\r\n\r\n");
	CHECK_INT(poll(&entry, 1, 5000), 1);
	got = read(fd, piece, sizeof piece - 1);
	CHECK(got > 0);
	piece[got] = '\0';
	CHECK_CONTAINS(piece, "HTTP/1.1 200");
	CHECK_CONTAINS(piece, "\r\n\r\n");
	CHECK_CONTAINS(piece, ": open\n\n");
	close(fd);
	wait_for(&fixture->stream_closed_count, 1);
}

static void
test_quiet_stream(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture_run(&fixture, client_quiet);
	fixture_free(&fixture);
}

/* What kagent_daemon_client_stream handed over, and when to stop it. */
struct stream_events {
	json_t *events; /* [[id, name, data], ...] */
	size_t stop_after;
};

static int
collect_event(const struct kagent_sse_event *event, void *data)
{
	struct stream_events *collected = data;

	json_array_append_new(collected->events, json_pack("[s, s, s%]", event->id, event->name,
							   event->data, event->data_length));
	return collected->stop_after > 0 &&
		       json_array_size(collected->events) >= collected->stop_after
		   ? 7
		   : 0;
}

static void
client_stream(struct fixture *fixture)
{
	struct stream_events collected = {.events = json_array()};
	volatile sig_atomic_t stop = 0;
	json_t *reply = NULL;
	char *cause = NULL;
	long status = 0;

	/* To the end: the three steps, each with its id and data. */
	CHECK_INT(kagent_daemon_client_stream(fixture->socket_path, NULL, "/v1/events",
					      collect_event, &collected, &stop, &status, &reply,
					      &cause),
		  0);
	CHECK_INT(status, 200);
	CHECK(reply == NULL);
	CHECK_INT(json_array_size(collected.events), 3);
	CHECK_STRING(json_string_value(json_array_get(json_array_get(collected.events, 2), 0)),
		     "3");
	CHECK_STRING(json_string_value(json_array_get(json_array_get(collected.events, 2), 1)),
		     "step");
	CHECK_STRING(json_string_value(json_array_get(json_array_get(collected.events, 2), 2)),
		     "{\"n\":3}");
	/* The function stops it: its value comes back. */
	json_array_clear(collected.events);
	collected.stop_after = 10;
	CHECK_INT(kagent_daemon_client_stream(fixture->socket_path, NULL, "/v1/paced",
					      collect_event, &collected, &stop, &status, &reply,
					      &cause),
		  7);
	CHECK_INT(json_array_size(collected.events), 10);
	/* An error answer: its status and JSON body, no event. */
	json_array_clear(collected.events);
	CHECK_INT(kagent_daemon_client_stream(fixture->socket_path, NULL, "/v1/nothing",
					      collect_event, &collected, &stop, &status, &reply,
					      &cause),
		  0);
	CHECK_INT(status, 404);
	CHECK(json_string_value(json_object_get(reply, "error")) != NULL);
	CHECK_INT(json_array_size(collected.events), 0);
	json_decref(reply);
	reply = NULL;
	/* The stop flag (a signal handler's): a stream that never answers is left. */
	stop = 1;
	CHECK_INT(kagent_daemon_client_stream(fixture->socket_path, NULL, "/v1/hold", collect_event,
					      &collected, &stop, &status, &reply, &cause),
		  -EINTR);
	free(cause);
	json_decref(collected.events);
}

static void
test_client_stream(void)
{
	struct fixture fixture;

	fixture_init(&fixture);
	fixture_run(&fixture, client_stream);
	fixture_free(&fixture);
}

static void
client_socket_file(struct fixture *fixture)
{
	char *folder = kagent_asprintf("%s/run", fixture->directory);
	struct stat info;
	json_t *reply = NULL;

	CHECK_INT(stat(fixture->socket_path, &info), 0);
	CHECK(S_ISSOCK(info.st_mode));
	CHECK_INT(info.st_mode & 0777, 0600);
	CHECK_INT(stat(folder, &info), 0);
	CHECK_INT(info.st_mode & 0777, 0700);
	free(folder);
	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/runs/z", NULL, &reply), 200);
	json_decref(reply);
}

static void
test_socket_file(void)
{
	struct fixture fixture, other;
	struct kagent_http_server *second = NULL;
	char *cause = NULL;

	fixture_init(&fixture);
	fixture_run(&fixture, client_socket_file);
	fixture_free(&fixture);

	/* A second server on a live socket is refused (the first one runs in a thread here). */
	fixture_init(&fixture);
	CHECK_INT(
	    kagent_http_server_start(&fixture.loop, &fixture.options, &fixture.server, &cause), 0);
	CHECK_INT(uv_loop_init(&other.loop), 0);
	other.options = fixture.options;
	CHECK_INT(kagent_http_server_start(&other.loop, &other.options, &second, &cause),
		  -EADDRINUSE);
	CHECK_CONTAINS(cause, "already answers at");
	free(cause);
	CHECK_INT(uv_run(&other.loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(uv_loop_close(&other.loop), 0);
	/* The refused start left the live socket alone. */
	CHECK_INT(access(fixture.socket_path, F_OK), 0);
	kagent_http_server_close(fixture.server, on_server_closed, &fixture);
	CHECK_INT(uv_run(&fixture.loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(uv_loop_close(&fixture.loop), 0);
	fixture_free(&fixture);
}

static void
client_stale(struct fixture *fixture)
{
	json_t *reply = NULL;

	CHECK_INT(request(fixture->socket_path, NULL, "GET", "/v1/runs/s", NULL, &reply), 200);
	json_decref(reply);
}

static void
test_stale_socket(void)
{
	struct fixture fixture;
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	char *folder, *cause = NULL;
	long status = 0;
	int fd;

	fixture_init(&fixture);
	folder = kagent_asprintf("%s/run", fixture.directory);
	CHECK_INT(mkdir(folder, 0700), 0);
	free(folder);
	/* What a killed daemon leaves: a socket file nobody listens on. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(address.sun_path, sizeof address.sun_path, "%s", fixture.socket_path);
	CHECK_INT(bind(fd, (struct sockaddr *)&address, sizeof address), 0);
	close(fd);
	CHECK_INT(kagent_daemon_client_request(fixture.socket_path, NULL, "GET", "/v1/runs/s", NULL,
					       &status, NULL, &cause),
		  -ECONNREFUSED);
	CHECK_CONTAINS(cause, "no kagentd at ");
	CHECK_CONTAINS(cause, "start it with `kagent daemon`");
	free(cause);
	fixture_run(&fixture, client_stale);
	fixture_free(&fixture);
}

static void
test_client_no_daemon(void)
{
	char *cause = NULL;
	long status = -1;
	json_t *reply = NULL;

	CHECK_INT(kagent_daemon_client_request("/nonexistent/kagent/kagentd.sock", NULL, "GET",
					       "/v1/runs", NULL, &status, &reply, &cause),
		  -ECONNREFUSED);
	CHECK_STRING(cause, "no kagentd at /nonexistent/kagent/kagentd.sock: start it with "
			    "`kagent daemon`");
	CHECK_INT(status, 0);
	CHECK(reply == NULL);
	free(cause);
	cause = NULL;
	/* A TCP address where nothing listens (port 1 on loopback). */
	CHECK_INT(kagent_daemon_client_request("http://127.0.0.1:1", TOKEN, "GET", "/v1/runs", NULL,
					       &status, &reply, &cause),
		  -ECONNREFUSED);
	CHECK_CONTAINS(cause, "no kagentd at http://127.0.0.1:1");
	free(cause);
}

static const struct kagent_test tests[] = {
    {"routing", test_routing},
    {"errors", test_errors},
    {"tcp_token", test_tcp_token},
    {"tcp_needs_token", test_tcp_needs_token},
    {"browser_token", test_browser_token},
    {"async", test_async},
    {"garbage", test_garbage},
    {"events", test_events},
    {"slow_reader", test_slow_reader},
    {"quiet_stream", test_quiet_stream},
    {"paced_stream", test_paced_stream},
    {"client_stream", test_client_stream},
    {"socket_file", test_socket_file},
    {"stale_socket", test_stale_socket},
    {"client_no_daemon", test_client_no_daemon},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
