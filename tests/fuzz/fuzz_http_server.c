/*
 * Fuzzes kagentd's HTTP server (agent/daemon/http_server.c): h2o's request parsing and the
 * server's token check, dispatch, {id} captures, query strings and JSON bodies, with routes that
 * answer at once, hold the request, or stream events. Each input is sent as the bytes of one
 * client connection to a fresh server on a Unix socket of one libuv loop; the client then
 * half-closes and reads until the server hangs up, and the server is closed. A hang (the loop
 * still running after 5 s) or a loop left with handles is a finding.
 */
#include "fuzz.h"

#include "kagent/daemon/http_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_HTTP_DEADLINE_MS 5000

struct fuzz_http__session {
	uv_loop_t loop;
	uv_pipe_t client;
	uv_connect_t connect;
	uv_write_t write;
	uv_shutdown_t shutdown;
	uv_timer_t deadline;
	struct kagent_http_server *server;
	uv_buf_t input;
	char read_buffer[4096];
};

static void
fuzz_http__reply(struct kagent_http_request *request, void *data)
{
	kagent_http_reply_json(request, 200,
			       json_pack("{s:s?, s:s?, s:O?}", "id",
					 kagent_http_request_parameter(request, "id"), "q",
					 kagent_http_request_query(request, "q"), "body",
					 kagent_http_request_json(request)));
}

static void
fuzz_http__hold(struct kagent_http_request *request, void *data)
{
	/* Never answered: the client's hang-up or the close ends it. */
}

static void
fuzz_http__events(struct kagent_http_request *request, void *data)
{
	struct kagent_http_stream *stream = kagent_http_stream_start(request, NULL);
	json_t *event = json_pack("{s:s}", "path", kagent_http_request_path(request));

	kagent_http_stream_send(stream, "1", "step", event);
	kagent_http_stream_send(stream, "2", "step", event);
	json_decref(event);
	if (kagent_http_request_query(request, "keep") == NULL)
		kagent_http_stream_close(stream);
}

static const struct kagent_http_route fuzz_http__routes[] = {
    {.method = "GET", .pattern = "/v1/runs/{id}", .handle = fuzz_http__reply},
    {.method = "POST", .pattern = "/v1/runs", .handle = fuzz_http__reply},
    {.method = "POST",
     .pattern = "/v1/raw/{id}",
     .handle = fuzz_http__reply,
     .flags = KAGENT_HTTP_ROUTE_RAW_BODY},
    {.method = "GET", .pattern = "/v1/hold", .handle = fuzz_http__hold},
    {.method = "GET", .pattern = "/v1/runs/{id}/events", .handle = fuzz_http__events},
    {.method = NULL},
};

static void
fuzz_http__alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer)
{
	struct fuzz_http__session *session = handle->data;

	*buffer = uv_buf_init(session->read_buffer, sizeof session->read_buffer);
}

static void
fuzz_http__finish(struct fuzz_http__session *session)
{
	if (uv_is_closing((uv_handle_t *)&session->client))
		return;
	uv_close((uv_handle_t *)&session->client, NULL);
	uv_close((uv_handle_t *)&session->deadline, NULL);
	kagent_http_server_close(session->server, NULL, NULL);
}

static void
fuzz_http__on_read(uv_stream_t *stream, ssize_t length, const uv_buf_t *buffer)
{
	if (length < 0)
		fuzz_http__finish(stream->data);
}

static void
fuzz_http__on_shutdown(uv_shutdown_t *request, int status)
{
}

static void
fuzz_http__on_written(uv_write_t *request, int status)
{
	struct fuzz_http__session *session = request->data;

	if (status == 0 && !uv_is_closing((uv_handle_t *)&session->client)) {
		session->shutdown.data = session;
		uv_shutdown(&session->shutdown, (uv_stream_t *)&session->client,
			    fuzz_http__on_shutdown);
	}
}

static void
fuzz_http__on_connect(uv_connect_t *request, int status)
{
	struct fuzz_http__session *session = request->data;

	if (status < 0) {
		fprintf(stderr, "fuzz_http_server: connect: %s\n", uv_strerror(status));
		abort();
	}
	uv_read_start((uv_stream_t *)&session->client, fuzz_http__alloc, fuzz_http__on_read);
	session->write.data = session;
	if (session->input.len == 0) {
		fuzz_http__on_written(&session->write, 0);
		return;
	}
	uv_write(&session->write, (uv_stream_t *)&session->client, &session->input, 1,
		 fuzz_http__on_written);
}

static void
fuzz_http__on_deadline(uv_timer_t *timer)
{
	fprintf(stderr, "fuzz_http_server: the exchange did not end in %d ms\n",
		FUZZ_HTTP_DEADLINE_MS);
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_http__session session;
	struct kagent_http_server_options options = {
	    .socket_path = kagent_fuzz_path("kagentd.sock"),
	    .routes = fuzz_http__routes,
	    .body_cap = 4096,
	    .stream_cap = 1024,
	    .watch_interval_ms = 1,
	};
	char *cause = NULL;

	memset(&session, 0, sizeof session);
	session.input = uv_buf_init((char *)data, (unsigned)size);
	if (uv_loop_init(&session.loop) != 0)
		abort();
	if (kagent_http_server_start(&session.loop, &options, &session.server, &cause) != 0) {
		fprintf(stderr, "fuzz_http_server: %s\n", cause);
		abort();
	}
	uv_timer_init(&session.loop, &session.deadline);
	uv_timer_start(&session.deadline, fuzz_http__on_deadline, FUZZ_HTTP_DEADLINE_MS, 0);
	uv_pipe_init(&session.loop, &session.client, 0);
	session.client.data = &session;
	session.connect.data = &session;
	uv_pipe_connect(&session.connect, &session.client, options.socket_path,
			fuzz_http__on_connect);
	uv_run(&session.loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&session.loop) != 0) {
		fprintf(stderr, "fuzz_http_server: the loop ended with handles left\n");
		abort();
	}
	return 0;
}
