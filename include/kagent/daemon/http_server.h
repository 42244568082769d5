/*
 * kagentd's HTTP/1.1 server: a JSON API on a Unix socket (and, behind a bearer token, on
 * TCP), served by libh2o's libuv flavour on the caller's loop, so that one loop hosts the
 * sessions and their API. The caller gives a table of routes; the server parses, checks and
 * dispatches, and answers the protocol's errors by itself (docs/http-server.md):
 *   404 unknown path, 405 wrong method (with Allow), 400 malformed JSON body, 413 body over
 *   the cap, 401 a TCP request without the right "Authorization: Bearer <token>" (or the
 *   cookie a browser gets by opening a page with ?token=<token> once: 303 to the page).
 * Every error body is {"error": "message"}, except h2o's own answers to bytes that are not
 * HTTP (400) and to bodies over the cap (413), which are text.
 *
 * Everything here runs on the loop's thread. A handler answers at once or later (after a
 * thread-pool job, say): the request stays valid until it is answered or until the server
 * tells its owner that the client left (on_gone); after either, the owner never touches it.
 * A handler may instead turn the request into an event stream (Server-Sent Events) whose
 * queue is bounded: a client too slow to read loses the queued events and the owner is told,
 * to resync it by event id.
 */
#ifndef KAGENT_DAEMON_HTTP_SERVER_H
#define KAGENT_DAEMON_HTTP_SERVER_H

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

struct kagent_http_server;
struct kagent_http_request;
struct kagent_http_stream;

/* The route does not parse its body as JSON: the handler reads kagent_http_request_body. */
#define KAGENT_HTTP_ROUTE_RAW_BODY 0x1

struct kagent_http_route {
	const char *method; /* "GET", "POST", "PUT", "DELETE", ... */
	/* "/v1/runs/{id}/events": literal segments, or {name} segments that match one non-empty
	 * segment, captured (percent-decoded) for kagent_http_request_parameter. */
	const char *pattern;
	/* Answers with kagent_http_reply_json, kagent_http_reply_error or
	 * kagent_http_stream_start, now or later. data is the server's handler_data. */
	void (*handle)(struct kagent_http_request *request, void *data);
	const char *summary; /* one line for generated docs */
	unsigned flags;	     /* KAGENT_HTTP_ROUTE_* */
};

struct kagent_http_server_options {
	/* The Unix socket. Its folder is created (0700) when missing; the socket is made 0600.
	 * Refused when a server answers there already; a stale socket file is replaced. */
	const char *socket_path;
	/* "HOST:PORT" ("127.0.0.1:7070", "[::1]:7070", "localhost:0" for any free port), or NULL
	 * for no TCP. Needs token. */
	const char *tcp_address;
	/* The bearer token every TCP request must carry (the caller reads it from its file). */
	const char *token;
	/* The routes, ended by an entry whose method is NULL; borrowed for the server's life. */
	const struct kagent_http_route *routes;
	void *handler_data;
	size_t body_cap;   /* request bodies above it get 413; 0: 1 MiB */
	size_t stream_cap; /* bytes queued per event stream before they are dropped; 0: 1 MiB */
	unsigned watch_interval_ms; /* how often waiting clients are checked for having left;
				       0: 1000 */
};

/*
 * Starts listening on loop. Returns 0, or a negative errno with *cause set (malloc'd). Writing
 * to a client that left raises SIGPIPE: this ignores SIGPIPE for the process, as every
 * socket server must (libuv writes with write(2), not send(2) with MSG_NOSIGNAL).
 */
int kagent_http_server_start(uv_loop_t *loop, const struct kagent_http_server_options *options,
			     struct kagent_http_server **server_out, char **cause);
/* The TCP port listened on (the one chosen for port 0), or 0 without TCP. */
int kagent_http_server_tcp_port(const struct kagent_http_server *server);
/*
 * Stops listening, removes the socket file, answers waiting requests 503 and ends streams
 * (their owners get on_gone / on_close first), closes every connection and frees the server;
 * then calls on_closed(data) (may be NULL). The loop must run for that; it can end afterwards.
 */
void kagent_http_server_close(struct kagent_http_server *server, void (*on_closed)(void *data),
			      void *data);

/* ---- requests (valid from handle until answered or until on_gone) ---- */

const char *kagent_http_request_method(const struct kagent_http_request *request);
/* The path without the query string, as sent (not decoded). */
const char *kagent_http_request_path(const struct kagent_http_request *request);
/* The route that matched. */
const struct kagent_http_route *
kagent_http_request_route(const struct kagent_http_request *request);
/* A {name} segment of the route's pattern, percent-decoded; NULL when the pattern has none. */
const char *kagent_http_request_parameter(const struct kagent_http_request *request,
					  const char *name);
/* A query string parameter (the first of that name), decoded ('+' is a space); "" for a name
 * without '='; NULL when absent. */
const char *kagent_http_request_query(const struct kagent_http_request *request, const char *name);
/* The body parsed as JSON (borrowed), or NULL when the body was empty or the route is raw. */
json_t *kagent_http_request_json(const struct kagent_http_request *request);
/* The raw body (NUL-terminated for convenience; length in *length), never NULL. */
const char *kagent_http_request_body(const struct kagent_http_request *request, size_t *length);
/* A request header's value (name in lower case, e.g. "last-event-id"; the first of that name),
 * or NULL when absent. Valid as long as the request. */
const char *kagent_http_request_header(const struct kagent_http_request *request, const char *name);
/* 1 when the request came over TCP (with the right token), 0 over the Unix socket. */
int kagent_http_request_over_tcp(const struct kagent_http_request *request);
/*
 * Who to tell when the client leaves before the answer (an asynchronous handler sets it before
 * returning). on_gone runs on the loop; the request is invalid from then on.
 */
void kagent_http_request_set_on_gone(struct kagent_http_request *request,
				     void (*on_gone)(struct kagent_http_request *request,
						     void *data),
				     void *data);

/* Answers with status and the JSON body (the reference is taken over, as json_object_set_new
 * does; NULL sends {}). The request is invalid afterwards. */
void kagent_http_reply_json(struct kagent_http_request *request, int status, json_t *body);
/* Answers with status and length bytes of body as content_type ("text/html; charset=utf-8");
 * the bytes are copied. The request is invalid afterwards. */
void kagent_http_reply_bytes(struct kagent_http_request *request, int status,
			     const char *content_type, const char *body, size_t length);
/* Adds a header (a name in any case, and a value, both copied) to the answer still to come. */
void kagent_http_reply_header(struct kagent_http_request *request, const char *name,
			      const char *value);
/* Answers {"error": "<printf-formatted message>"} with status. */
void kagent_http_reply_error(struct kagent_http_request *request, int status, const char *format,
			     ...) __attribute__((format(printf, 3, 4)));

/* ---- event streams (Server-Sent Events) ---- */

struct kagent_http_stream_callbacks {
	/* The client left, or the server is closing: the stream is invalid from then on. */
	void (*on_close)(struct kagent_http_stream *stream, void *data);
	/* The client read too slowly: the queued events, count of them from first_dropped_id
	 * (NULL when that event had no id) on, were dropped. The stream stays open; the owner
	 * resyncs the client from first_dropped_id. May be NULL. */
	void (*on_overflow)(struct kagent_http_stream *stream, size_t count,
			    const char *first_dropped_id, void *data);
	/* Everything queued was written to the client: an owner that held events back to stay
	 * under the cap (kagent_http_stream_room) sends them now. May be NULL. */
	void (*on_drain)(struct kagent_http_stream *stream, void *data);
	void *data;
};

/*
 * Answers the request 200 text/event-stream (no-cache) and turns it into a stream, whose head
 * goes at once with a comment line ": open" (SSE clients ignore comments); the request is
 * invalid afterwards. Never NULL.
 */
struct kagent_http_stream *
kagent_http_stream_start(struct kagent_http_request *request,
			 const struct kagent_http_stream_callbacks *callbacks);
/*
 * Queues one event: "id: <id>\nevent: <event>\ndata: <data as compact JSON>\n\n"; id and event
 * may be NULL (left out); data is borrowed (NULL: no data line). Returns 0, or -EOVERFLOW when
 * the queue was over its cap and was dropped (on_overflow has run), or -EPIPE after the client
 * left but before on_close could run.
 */
int kagent_http_stream_send(struct kagent_http_stream *stream, const char *id, const char *event,
			    const json_t *data);
/* The same with data given as text, sent as is: one line (no CR or LF, else -EINVAL), e.g.
 * JSON that was serialised once for many streams. */
int kagent_http_stream_send_text(struct kagent_http_stream *stream, const char *id,
				 const char *event, const char *data);
/* How many bytes may still be queued before the cap: an owner that sends no more than this
 * (and waits for on_drain otherwise) never has events dropped. An event costs its data plus
 * its "id: ", "event: " and "data: " lines. */
size_t kagent_http_stream_room(const struct kagent_http_stream *stream);
/* Sends what is queued, then ends the response. The stream is invalid afterwards (on_close is
 * not called). */
void kagent_http_stream_close(struct kagent_http_stream *stream);

#endif
