/*
 * Fuzzes the client side of the worker protocol (tools/evaluator/worker_client.c): its line
 * splitting, the hello check and the response handling, which are reached only through a
 * connection. The harness plays the worker on a Unix socket of the same libuv loop: it sends
 * the input up to the end of its first non-empty line as the hello; once the client, ready, has
 * sent a request, it sends the rest as the answer and hangs up. Nothing else runs: no process, no
 * torch.
 */
#include "fuzz.h"

#include "kagent/evaluator/worker_client.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Generous: no input should make the client wait, a deadline passing is a hang. */
#define FUZZ_WORKER_DEADLINE_MS 5000

struct fuzz_worker_protocol__session {
	uv_pipe_t server;
	uv_pipe_t peer;
	uv_write_t write;
	kagent_worker_client_t *client;
	const uint8_t *rest; /* what follows the hello line, sent once asked */
	size_t rest_length;
	int answered;	    /* the rest has been sent */
	int client_closing; /* kagent_worker_client_close called */
};

static void
fuzz_worker_protocol__close_client(struct fuzz_worker_protocol__session *session)
{
	if (session->client_closing)
		return;
	session->client_closing = 1;
	kagent_worker_client_close(session->client, NULL, NULL);
}

static void
fuzz_worker_protocol__hang_up(struct fuzz_worker_protocol__session *session)
{
	if (!uv_is_closing((uv_handle_t *)&session->peer))
		uv_close((uv_handle_t *)&session->peer, NULL);
}

static void
fuzz_worker_protocol__on_written(uv_write_t *request, int status)
{
	struct fuzz_worker_protocol__session *session = request->data;

	/* After the hello the worker waits for the request; after the answer it is done. */
	if (session->answered || session->rest == NULL)
		fuzz_worker_protocol__hang_up(session);
}

static void
fuzz_worker_protocol__send(struct fuzz_worker_protocol__session *session, const uint8_t *bytes,
			   size_t length)
{
	uv_buf_t buffer = uv_buf_init((char *)bytes, (unsigned)length);

	session->write.data = session;
	if (uv_write(&session->write, (uv_stream_t *)&session->peer, &buffer, 1,
		     fuzz_worker_protocol__on_written) != 0)
		fuzz_worker_protocol__hang_up(session);
}

static void
fuzz_worker_protocol__alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer)
{
	static char scratch[4096];

	*buffer = uv_buf_init(scratch, sizeof scratch);
}

static void
fuzz_worker_protocol__on_request(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buffer)
{
	struct fuzz_worker_protocol__session *session = stream->data;

	if (nread < 0) {
		fuzz_worker_protocol__hang_up(session);
		return;
	}
	if (nread == 0 || session->answered)
		return;
	session->answered = 1;
	fuzz_worker_protocol__send(session, session->rest, session->rest_length);
}

static void
fuzz_worker_protocol__on_connection(uv_stream_t *server, int status)
{
	struct fuzz_worker_protocol__session *session = server->data;
	const uint8_t *hello = session->rest, *newline;
	size_t length = session->rest_length, skip;

	uv_pipe_init(server->loop, &session->peer, 0);
	session->peer.data = session;
	status = status != 0 ? status : uv_accept(server, (uv_stream_t *)&session->peer);
	uv_close((uv_handle_t *)&session->server, NULL); /* one client per session */
	if (status != 0) {
		fuzz_worker_protocol__hang_up(session);
		return;
	}
	/* The client skips empty lines: the hello ends with the first line that has a byte. */
	skip = 0;
	while (skip < length && hello[skip] == '\n')
		skip++;
	newline = memchr(hello + skip, '\n', length - skip);
	session->rest = newline != NULL ? newline + 1 : NULL;
	session->rest_length = newline != NULL ? length - (size_t)(session->rest - hello) : 0;
	if (session->rest != NULL)
		uv_read_start((uv_stream_t *)&session->peer, fuzz_worker_protocol__alloc,
			      fuzz_worker_protocol__on_request);
	fuzz_worker_protocol__send(session, hello, (size_t)(length - session->rest_length));
}

static void
fuzz_worker_protocol__on_response(kagent_worker_client_t *worker, int status,
				  const json_t *response, const char *message, void *data)
{
	if ((status == 0) != (response != NULL) || (status != 0 && message == NULL))
		abort();
	fuzz_worker_protocol__close_client(data);
}

static void
fuzz_worker_protocol__on_ready(kagent_worker_client_t *worker, int status, const json_t *hello,
			       const char *message, void *data)
{
	struct fuzz_worker_protocol__session *session = data;
	json_t *request;
	char *cause = NULL;

	if ((status == 0) != (hello != NULL) || (status != 0 && message == NULL))
		abort();
	if (status != 0) {
		fuzz_worker_protocol__close_client(session);
		return;
	}
	request = json_pack("{s:s, s:s}", "type", "ping", "id", "fuzz");
	if (kagent_worker_client_request(worker, request, FUZZ_WORKER_DEADLINE_MS,
					 fuzz_worker_protocol__on_response, session, &cause) != 0)
		fuzz_worker_protocol__close_client(session);
	free(cause);
	json_decref(request);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = kagent_fuzz_path("worker.sock");
	struct fuzz_worker_protocol__session session = {.rest = data, .rest_length = size};
	uv_loop_t loop;
	char *cause = NULL;

	if (size == 0)
		return 0; /* nothing to send: the client would wait for its deadline */
	unlink(path);
	uv_loop_init(&loop);
	uv_pipe_init(&loop, &session.server, 0);
	session.server.data = &session;
	if (uv_pipe_bind(&session.server, path) != 0 ||
	    uv_listen((uv_stream_t *)&session.server, 1, fuzz_worker_protocol__on_connection) != 0)
		abort();
	if (kagent_worker_client_connect(&loop, path, FUZZ_WORKER_DEADLINE_MS,
					 fuzz_worker_protocol__on_ready, &session, &session.client,
					 &cause) != 0)
		abort();
	uv_run(&loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&loop) != 0)
		abort();
	return 0;
}
