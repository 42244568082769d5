/*
 * kagentd's HTTP/1.1 server on libh2o 2.2.5's libuv flavour (see
 * include/kagent/daemon/http_server.h and docs/http-server.md). h2o parses HTTP and writes
 * responses; this file listens, checks the token, dispatches the route table, parses bodies,
 * and keeps the lifetimes straight:
 *
 * - A connection is a uv stream this file allocates and hands to h2o
 *   (h2o_uv_socket_create); h2o closes it, and its close callback frees it here.
 * - A request of ours lives exactly as long as h2o's request: a shared chunk in h2o's request
 *   pool with a dispose callback frees it when h2o disposes the request (answered, or the
 *   connection gone), and tells an owner still waiting (on_gone, on_close) first.
 * - h2o stops reading a connection while its request is processed, so it would notice a client
 *   that left only when the answer is written. A timer (watch) polls the sockets of waiting
 *   requests and idle streams for the peer's hang-up, tells the owner, and finishes the
 *   response so h2o closes the connection.
 * - A browser cannot send the Authorization header with a page, a script or an EventSource:
 *   over TCP a GET with ?token=<the token> is answered 303 to the same path without it and a
 *   cookie holding the token (HttpOnly, SameSite=Strict), which the browser then sends with
 *   every request of the page, and which counts as the bearer token does.
 * - Closing: listeners first, then every waiting request is answered and every stream ended,
 *   every connection's reading side is shut down so that idle keep-alive connections read EOF
 *   and h2o closes them; once none is left the h2o context is disposed and the server freed,
 *   two close callbacks later (h2o closes its timers with no callback of their own).
 */
#include "kagent/daemon/http_server.h"
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"
#include "kagent/base/log.h"
#include "kagent/base/paths.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* h2o's headers come from /usr/include (pkg-config adds no -I), so the compiler treats them as
 * system headers and their pedantic warnings stay out of -Werror. */
#include <h2o.h>

/* server__context_dispose below copies h2o_context_dispose of this exact version. */
#if H2O_LIBRARY_VERSION_MAJOR != 0 || H2O_LIBRARY_VERSION_MINOR != 13
#error "http_server.c copies h2o_context_dispose of libh2o 0.13 (h2o 2.2.x): check it again"
#endif

#define HTTP_SERVER_DEFAULT_BODY_CAP (1u << 20)
#define HTTP_SERVER_DEFAULT_STREAM_CAP (1u << 20)
#define HTTP_SERVER_DEFAULT_WATCH_MS 1000
/* The kernel's largest: many event-stream clients may connect at once (a page of many
 * sessions reloading), and a full backlog fails a Unix socket's connect with EAGAIN at once. */
#define HTTP_SERVER_BACKLOG SOMAXCONN
#define HTTP_SERVER_MAX_PARAMETERS 16
/* A bearer token a person could guess is no protection: refuse short ones. */
#define HTTP_SERVER_MIN_TOKEN_LENGTH 16
/* The cookie a browser gets for the token: kagent_token_<port>, so that two daemons on one host
 * (cookies are per host, not per port) do not overwrite each other's. */
#define HTTP_SERVER_COOKIE_PREFIX "kagent_token_"

struct http_server__pair {
	char *name;
	char *value;
};

union http_server__stream_handle {
	uv_stream_t stream;
	uv_tcp_t tcp;
	uv_pipe_t pipe;
};

struct http_server__listener {
	union http_server__stream_handle handle; /* first: the close callback casts back */
	struct kagent_http_server *server;
	int over_tcp;
	int open;
};

struct http_server__connection {
	union http_server__stream_handle handle; /* first: the close callback casts back */
	struct kagent_http_server *server;
	h2o_socket_t *socket;
	int over_tcp;
	struct http_server__connection *previous, *next;
};

struct http_server__handler {
	h2o_handler_t super;
	struct kagent_http_server *server;
};

enum http_server__state {
	REQUEST_WAITING,  /* the handler owes an answer */
	REQUEST_ANSWERED, /* answered, or the owner was told the client left */
	REQUEST_STREAM,	  /* an event stream */
};

struct kagent_http_stream {
	h2o_generator_t generator; /* first: h2o's callbacks cast back */
	struct kagent_http_request *request;
	struct kagent_http_stream_callbacks callbacks;
	struct kagent_buffer queue;   /* events not yet handed to h2o */
	struct kagent_buffer sending; /* what h2o writes now: kept until proceed */
	size_t queued_events;
	char *first_queued_id;
	int in_flight;	   /* an h2o_send awaits proceed */
	int finished;	   /* the final h2o_send was made, or h2o stopped the generator */
	int owner_closed;  /* kagent_http_stream_close */
	int owner_told;	   /* on_close ran */
	int end_requested; /* the server ends it (client gone, closing) */
};

struct kagent_http_request {
	struct kagent_http_server *server;
	h2o_req_t *req;
	int fd; /* the connection's socket, for the watch */
	int over_tcp;
	enum http_server__state state;
	const struct kagent_http_route *route;
	char *method;
	char *path;
	char *body;
	size_t body_length;
	json_t *json;
	struct http_server__pair parameters[HTTP_SERVER_MAX_PARAMETERS];
	size_t parameter_count;
	struct http_server__pair *queries;
	size_t query_count;
	void (*on_gone)(struct kagent_http_request *request, void *data);
	void *gone_data;
	struct kagent_http_stream *stream;
	struct kagent_http_request *previous, *next;
};

/* Lives in h2o's request pool; its dispose frees our request. */
struct http_server__request_token {
	struct kagent_http_request *request;
};

struct kagent_http_server {
	uv_loop_t *loop;
	h2o_globalconf_t config;
	h2o_context_t context;
	h2o_accept_ctx_t accept;
	struct http_server__listener unix_listener;
	struct http_server__listener tcp_listener;
	uv_timer_t watch; /* client-left checks; its close is the first step of the final free */
	uv_timer_t last;  /* the second step */
	const struct kagent_http_route *routes;
	void *handler_data;
	char *token;
	char *socket_path;
	dev_t socket_device;
	ino_t socket_inode;
	int tcp_port;
	size_t body_cap;
	size_t stream_cap;
	struct http_server__connection *connections;
	struct kagent_http_request *requests; /* every request whose h2o request is alive */
	int closing;
	int finishing;
	void (*on_closed)(void *data);
	void *closed_data;
};

static void http_server__maybe_finish(struct kagent_http_server *server);

/* ---- small helpers ---- */

static const char *
http_server__reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 303:
		return "See Other";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 409:
		return "Conflict";
	case 413:
		return "Payload Too Large";
	case 499:
		return "Client Closed Request";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	}
	return status < 400 ? "OK" : "Error";
}

static int
http_server__hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes [text, text + length) ('+' is a space when plus_is_space). NULL on a bad
 * escape or a NUL byte, which no id or parameter may hold. */
static char *
http_server__decode(const char *text, size_t length, int plus_is_space)
{
	char *out = kagent_malloc(length + 1), *o = out;
	size_t i;
	int high, low;

	for (i = 0; i < length; i++) {
		if (text[i] == '%') {
			if (length - i < 3)
				goto bad;
			high = http_server__hex((unsigned char)text[i + 1]);
			low = http_server__hex((unsigned char)text[i + 2]);
			if (high < 0 || low < 0 || (high == 0 && low == 0))
				goto bad;
			*o++ = (char)(high * 16 + low);
			i += 2;
		} else if (text[i] == '+' && plus_is_space)
			*o++ = ' ';
		else
			*o++ = text[i];
	}
	*o = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

/* Compares in time that depends on the expected token's length only. */
static int
http_server__token_matches(const char *given, size_t given_length, const char *expected)
{
	size_t expected_length = strlen(expected), i;
	unsigned char difference = given_length != expected_length;

	for (i = 0; i < expected_length; i++)
		difference |= (unsigned char)(expected[i] ^ (i < given_length ? given[i] : 0));
	return difference == 0;
}

/* ---- answering an h2o request ---- */

static void
http_server__send(h2o_req_t *req, int status, const char *content_type, const char *body,
		  size_t length)
{
	req->res.status = status;
	req->res.reason = http_server__reason(status);
	req->res.content_length = length;
	h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type,
		       strlen(content_type));
	h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
		       H2O_STRLIT("no-store"));
	/* A browser takes every answer as the type it says, never as a guess from the bytes. */
	h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-content-type-options"),
			      0, NULL, H2O_STRLIT("nosniff"));
	h2o_send_inline(req, body, length);
}

static void
http_server__send_json(h2o_req_t *req, int status, json_t *body)
{
	char *text;

	if (body == NULL)
		body = json_object();
	text = json_dumps(body, JSON_COMPACT);
	if (text == NULL)
		text = kagent_strdup("{\"error\":\"the answer could not be encoded\"}");
	http_server__send(req, status, "application/json", text, strlen(text));
	free(text);
	json_decref(body);
}

static void
http_server__send_error(h2o_req_t *req, int status, const char *message)
{
	http_server__send_json(req, status, json_pack("{s:s}", "error", message));
}

/* ---- requests ---- */

static void
http_server__request_unlink(struct kagent_http_request *request)
{
	struct kagent_http_server *server = request->server;

	if (request->previous != NULL)
		request->previous->next = request->next;
	else if (server->requests == request)
		server->requests = request->next;
	if (request->next != NULL)
		request->next->previous = request->previous;
	request->previous = request->next = NULL;
}

/* h2o disposes its request: tell an owner still waiting, then free ours. */
static void
http_server__request_disposed(void *pointer)
{
	struct http_server__request_token *token = pointer;
	struct kagent_http_request *request = token->request;
	struct kagent_http_stream *stream = request->stream;
	size_t i;

	http_server__request_unlink(request);
	request->req = NULL;
	if (request->state == REQUEST_WAITING) {
		request->state = REQUEST_ANSWERED;
		if (request->on_gone != NULL)
			request->on_gone(request, request->gone_data);
	}
	if (stream != NULL) {
		stream->finished = 1;
		if (!stream->owner_closed && !stream->owner_told) {
			stream->owner_told = 1;
			if (stream->callbacks.on_close != NULL)
				stream->callbacks.on_close(stream, stream->callbacks.data);
		}
		kagent_buffer_free(&stream->queue);
		kagent_buffer_free(&stream->sending);
		free(stream->first_queued_id);
		free(stream);
	}
	free(request->method);
	free(request->path);
	free(request->body);
	json_decref(request->json);
	for (i = 0; i < request->parameter_count; i++) {
		free(request->parameters[i].name);
		free(request->parameters[i].value);
	}
	for (i = 0; i < request->query_count; i++) {
		free(request->queries[i].name);
		free(request->queries[i].value);
	}
	free(request->queries);
	free(request);
}

static void http_server__stream_flush(struct kagent_http_stream *stream);

/*
 * The server ends a request whose owner still holds it (the client left, or the server
 * closes): the owner is told first and never touches it again; then h2o gets an answer, after
 * which it closes the connection and disposes the request.
 */
static void
http_server__abandon(struct kagent_http_request *request, int status, const char *message)
{
	struct kagent_http_stream *stream = request->stream;
	h2o_req_t *req = request->req;

	if (req == NULL)
		return;
	if (request->state == REQUEST_WAITING) {
		request->state = REQUEST_ANSWERED;
		if (request->on_gone != NULL)
			request->on_gone(request, request->gone_data);
		req->http1_is_persistent = 0;
		http_server__send_error(req, status, message);
		return;
	}
	if (stream == NULL || stream->owner_told || stream->owner_closed)
		return;
	stream->owner_told = 1;
	stream->end_requested = 1;
	req->http1_is_persistent = 0;
	if (stream->callbacks.on_close != NULL)
		stream->callbacks.on_close(stream, stream->callbacks.data);
	http_server__stream_flush(stream);
}

/* 1 when the peer of fd hung up (its side is closed, or the socket failed). */
static int
http_server__peer_left(int fd)
{
	struct pollfd entry = {.fd = fd, .events = POLLRDHUP};

	if (fd < 0)
		return 0;
	if (poll(&entry, 1, 0) <= 0)
		return 0;
	return (entry.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

static void
http_server__watch(uv_timer_t *timer)
{
	struct kagent_http_server *server = timer->data;
	struct kagent_http_request *request, *next;

	/* abandon frees nothing at once (h2o disposes later), so next stays valid. */
	for (request = server->requests; request != NULL; request = next) {
		next = request->next;
		if (request->state == REQUEST_ANSWERED)
			continue;
		if (request->stream != NULL &&
		    (request->stream->owner_closed || request->stream->owner_told))
			continue;
		if (http_server__peer_left(request->fd)) {
			kagent_log(KAGENT_LOG_DEBUG, "client left %s %s", request->method,
				   request->path);
			http_server__abandon(request, 499, "the client closed the connection");
		}
	}
}

/* ---- dispatch ---- */

/* Matches path [path, path + length) against pattern; fills the {name} captures. */
static int
http_server__match(const char *pattern, const char *path, size_t length,
		   struct kagent_http_request *request)
{
	const char *p = pattern, *s = path, *end = path + length, *p_end, *s_end;
	size_t count = 0, i;
	char *value;

	for (;;) {
		if (*p != '/' || s >= end || *s != '/')
			goto mismatch;
		p++;
		s++;
		p_end = strchr(p, '/');
		if (p_end == NULL)
			p_end = p + strlen(p);
		s_end = memchr(s, '/', (size_t)(end - s));
		if (s_end == NULL)
			s_end = end;
		if (p_end - p >= 2 && *p == '{' && p_end[-1] == '}') {
			if (s_end == s || count == HTTP_SERVER_MAX_PARAMETERS)
				goto mismatch;
			value = http_server__decode(s, (size_t)(s_end - s), 0);
			if (value == NULL)
				goto mismatch;
			request->parameters[count].name =
			    kagent_strndup(p + 1, (size_t)(p_end - p - 2));
			request->parameters[count].value = value;
			count++;
		} else if (p_end - p != s_end - s || memcmp(p, s, (size_t)(p_end - p)) != 0)
			goto mismatch;
		p = p_end;
		s = s_end;
		if (*p == '\0' && s == end) {
			request->parameter_count = count;
			return 1;
		}
	}
mismatch:
	for (i = 0; i < count; i++) {
		free(request->parameters[i].name);
		free(request->parameters[i].value);
	}
	return 0;
}

static int
http_server__parse_query(struct kagent_http_request *request, const char *query, size_t length)
{
	const char *s = query, *end = query + length, *amp, *equals;
	struct http_server__pair pair;

	while (s < end) {
		amp = memchr(s, '&', (size_t)(end - s));
		if (amp == NULL)
			amp = end;
		if (amp > s) {
			equals = memchr(s, '=', (size_t)(amp - s));
			pair.name =
			    http_server__decode(s, (size_t)((equals ? equals : amp) - s), 1);
			pair.value =
			    equals != NULL
				? http_server__decode(equals + 1, (size_t)(amp - equals - 1), 1)
				: kagent_strdup("");
			if (pair.name == NULL || pair.value == NULL) {
				free(pair.name);
				free(pair.value);
				return -EINVAL;
			}
			request->queries =
			    kagent_realloc(request->queries,
					   (request->query_count + 1) * sizeof *request->queries);
			request->queries[request->query_count++] = pair;
		}
		s = amp + 1;
	}
	return 0;
}

static struct http_server__connection *
http_server__connection_of(struct kagent_http_server *server, h2o_req_t *req)
{
	h2o_socket_t *socket = req->conn->callbacks->get_socket != NULL
				   ? req->conn->callbacks->get_socket(req->conn)
				   : NULL;
	struct http_server__connection *connection;

	for (connection = server->connections; connection != NULL; connection = connection->next)
		if (connection->socket == socket)
			return connection;
	return NULL;
}

/* The value of this server's token cookie in one Cookie header ("a=1; kagent_token_7070=..."),
 * or NULL. */
static const char *
http_server__cookie_token(const struct kagent_http_server *server, const h2o_iovec_t *header,
			  size_t *length)
{
	char name[sizeof HTTP_SERVER_COOKIE_PREFIX + 8];
	const char *at = header->base, *end = header->base + header->len, *next;
	size_t name_length =
	    (size_t)snprintf(name, sizeof name, HTTP_SERVER_COOKIE_PREFIX "%d=", server->tcp_port);

	while (at < end) {
		while (at < end && (*at == ' ' || *at == ';'))
			at++;
		next = memchr(at, ';', (size_t)(end - at));
		if (next == NULL)
			next = end;
		if ((size_t)(next - at) >= name_length && memcmp(at, name, name_length) == 0) {
			*length = (size_t)(next - at) - name_length;
			return at + name_length;
		}
		at = next;
	}
	return NULL;
}

/* A TCP request carries the right token: as a bearer token, or in the viewer's cookie. */
static int
http_server__authorized(struct kagent_http_server *server, h2o_req_t *req)
{
	ssize_t index = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
	const h2o_iovec_t *value;
	const char *cookie;
	size_t length;

	if (index >= 0) {
		value = &req->headers.entries[index].value;
		return value->len >= 7 && strncasecmp(value->base, "Bearer ", 7) == 0 &&
		       http_server__token_matches(value->base + 7, value->len - 7, server->token);
	}
	for (index = -1; (index = h2o_find_header(&req->headers, H2O_TOKEN_COOKIE, index)) >= 0;) {
		cookie =
		    http_server__cookie_token(server, &req->headers.entries[index].value, &length);
		if (cookie != NULL)
			return http_server__token_matches(cookie, length, server->token);
	}
	return 0;
}

/* The decoded value of ?token= in a request's query string, or NULL (malloc'd). */
static char *
http_server__query_token(h2o_req_t *req)
{
	const char *query, *at, *end, *next;

	if (req->query_at == SIZE_MAX)
		return NULL;
	query = req->path.base + req->query_at + 1;
	end = req->path.base + req->path.len;
	for (at = query; at < end; at = next + 1) {
		next = memchr(at, '&', (size_t)(end - at));
		if (next == NULL)
			next = end;
		if (next - at >= 6 && memcmp(at, "token=", 6) == 0)
			return http_server__decode(at + 6, (size_t)(next - at - 6), 1);
	}
	return NULL;
}

/*
 * A GET over TCP with ?token= (a person opening the viewer): the right token is answered 303 to
 * the same path without the query, with the token as a cookie for the page's own requests, so
 * that the token leaves the address bar at once. 1 when answered so.
 */
static int
http_server__exchange_token(struct kagent_http_server *server, h2o_req_t *req)
{
	char *token = http_server__query_token(req), *text;
	size_t path_length = req->query_at;
	h2o_iovec_t cookie;

	if (token == NULL)
		return 0;
	if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) ||
	    !http_server__token_matches(token, strlen(token), server->token)) {
		free(token);
		return 0;
	}
	text = kagent_asprintf(HTTP_SERVER_COOKIE_PREFIX "%d=%s; Path=/; HttpOnly; SameSite=Strict",
			       server->tcp_port, token);
	cookie = h2o_strdup(&req->pool, text, SIZE_MAX);
	free(text);
	free(token);
	h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, cookie.base,
		       cookie.len);
	/* "//host/x" would send the browser to another host: such a path goes to "/". */
	if (path_length >= 2 && req->path.base[1] == '/')
		path_length = 1;
	h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL,
		       h2o_strdup(&req->pool, req->path.base, path_length).base, path_length);
	http_server__send(req, 303, "text/plain; charset=utf-8", "", 0);
	return 1;
}

static int
http_server__on_req(h2o_handler_t *self, h2o_req_t *req)
{
	struct kagent_http_server *server = ((struct http_server__handler *)self)->server;
	struct http_server__connection *connection = http_server__connection_of(server, req);
	const struct kagent_http_route *route, *chosen = NULL;
	struct kagent_http_request *request;
	struct http_server__request_token *token;
	struct kagent_buffer allow = {0};
	size_t path_length = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
	json_error_t error;
	char *message;

	if (server->closing) {
		req->http1_is_persistent = 0;
		http_server__send_error(req, 503, "kagentd is shutting down");
		return 0;
	}
	if (connection != NULL && connection->over_tcp && http_server__exchange_token(server, req))
		return 0;
	if (connection != NULL && connection->over_tcp && !http_server__authorized(server, req)) {
		h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL,
			       H2O_STRLIT("Bearer"));
		http_server__send_error(req, 401,
					"missing or wrong bearer token (Authorization: Bearer "
					"<token>, or ?token=<token> once in a browser)");
		return 0;
	}
	request = kagent_calloc(1, sizeof *request);
	request->server = server;
	request->fd = connection != NULL ? h2o_socket_get_fd(connection->socket) : -1;
	request->over_tcp = connection != NULL && connection->over_tcp;
	request->method = kagent_strndup(req->method.base, req->method.len);
	request->path = kagent_strndup(req->path.base, path_length);
	for (route = server->routes; route->method != NULL; route++) {
		if (!http_server__match(route->pattern, req->path.base, path_length, request))
			continue;
		if (strcmp(route->method, request->method) == 0) {
			chosen = route;
			break;
		}
		/* A route of another method: forget its captures, remember its method. */
		while (request->parameter_count > 0) {
			request->parameter_count--;
			free(request->parameters[request->parameter_count].name);
			free(request->parameters[request->parameter_count].value);
		}
		if (strstr(kagent_buffer_string(&allow), route->method) == NULL)
			kagent_buffer_appendf(&allow, "%s%s", allow.length > 0 ? ", " : "",
					      route->method);
	}
	request->route = chosen;
	if (chosen == NULL && allow.length == 0) {
		message = kagent_asprintf("no such path: %s", request->path);
		http_server__send_error(req, 404, message);
		free(message);
		goto refused;
	}
	if (chosen == NULL) {
		h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, allow.data,
			       allow.length);
		message = kagent_asprintf("%s is not allowed on %s (allowed: %s)", request->method,
					  request->path, allow.data);
		http_server__send_error(req, 405, message);
		free(message);
		goto refused;
	}
	if (req->entity.base != NULL && req->entity.len > server->body_cap) {
		message =
		    kagent_asprintf("the body is over the cap of %zu bytes", server->body_cap);
		http_server__send_error(req, 413, message);
		free(message);
		goto refused;
	}
	request->body_length = req->entity.base != NULL ? req->entity.len : 0;
	request->body = kagent_malloc(request->body_length + 1);
	if (request->body_length > 0)
		memcpy(request->body, req->entity.base, request->body_length);
	request->body[request->body_length] = '\0';
	if (request->body_length > 0 && !(chosen->flags & KAGENT_HTTP_ROUTE_RAW_BODY)) {
		request->json = json_loadb(request->body, request->body_length, 0, &error);
		if (request->json == NULL) {
			message = kagent_asprintf("malformed JSON body: %s (line %d, column %d)",
						  error.text, error.line, error.column);
			http_server__send_error(req, 400, message);
			free(message);
			goto refused;
		}
	}
	if (req->query_at != SIZE_MAX &&
	    http_server__parse_query(request, req->path.base + req->query_at + 1,
				     req->path.len - req->query_at - 1) != 0) {
		http_server__send_error(req, 400, "malformed query string");
		goto refused;
	}
	kagent_buffer_free(&allow);
	/* From here on, h2o's request pool owns the lifetime of ours. */
	request->req = req;
	request->state = REQUEST_WAITING;
	token = h2o_mem_alloc_shared(&req->pool, sizeof *token, http_server__request_disposed);
	token->request = request;
	request->next = server->requests;
	if (server->requests != NULL)
		server->requests->previous = request;
	server->requests = request;
	chosen->handle(request, server->handler_data);
	return 0;
refused:
	kagent_buffer_free(&allow);
	request->state = REQUEST_ANSWERED;
	{
		/* Not yet tied to h2o's pool: free it here through the same path. */
		struct http_server__request_token local = {.request = request};
		http_server__request_disposed(&local);
	}
	return 0;
}

/* ---- requests: the public side ---- */

const char *
kagent_http_request_method(const struct kagent_http_request *request)
{
	return request->method;
}

const char *
kagent_http_request_path(const struct kagent_http_request *request)
{
	return request->path;
}

const struct kagent_http_route *
kagent_http_request_route(const struct kagent_http_request *request)
{
	return request->route;
}

const char *
kagent_http_request_parameter(const struct kagent_http_request *request, const char *name)
{
	size_t i;

	for (i = 0; i < request->parameter_count; i++)
		if (strcmp(request->parameters[i].name, name) == 0)
			return request->parameters[i].value;
	return NULL;
}

const char *
kagent_http_request_query(const struct kagent_http_request *request, const char *name)
{
	size_t i;

	for (i = 0; i < request->query_count; i++)
		if (strcmp(request->queries[i].name, name) == 0)
			return request->queries[i].value;
	return NULL;
}

json_t *
kagent_http_request_json(const struct kagent_http_request *request)
{
	return request->json;
}

const char *
kagent_http_request_body(const struct kagent_http_request *request, size_t *length)
{
	if (length != NULL)
		*length = request->body_length;
	return request->body;
}

const char *
kagent_http_request_header(const struct kagent_http_request *request, const char *name)
{
	h2o_req_t *req = request->req;
	ssize_t index;

	if (req == NULL)
		return NULL;
	index = h2o_find_header_by_str(&req->headers, name, strlen(name), -1);
	if (index < 0)
		return NULL;
	/* A NUL-terminated copy in h2o's request pool: it lives exactly as long as the request. */
	return h2o_strdup(&req->pool, req->headers.entries[index].value.base,
			  req->headers.entries[index].value.len)
	    .base;
}

int
kagent_http_request_over_tcp(const struct kagent_http_request *request)
{
	return request->over_tcp;
}

void
kagent_http_request_set_on_gone(struct kagent_http_request *request,
				void (*on_gone)(struct kagent_http_request *request, void *data),
				void *data)
{
	request->on_gone = on_gone;
	request->gone_data = data;
}

void
kagent_http_reply_json(struct kagent_http_request *request, int status, json_t *body)
{
	h2o_req_t *req = request->req;

	if (req == NULL || request->state != REQUEST_WAITING) {
		/* Answered twice, or after on_gone: a bug of the caller's, kept harmless. */
		kagent_log(KAGENT_LOG_WARNING, "request %s %s answered twice", request->method,
			   request->path);
		json_decref(body);
		return;
	}
	request->state = REQUEST_ANSWERED;
	/* Last: h2o may dispose the request (and free ours) once it has the answer. */
	http_server__send_json(req, status, body);
}

void
kagent_http_reply_bytes(struct kagent_http_request *request, int status, const char *content_type,
			const char *body, size_t length)
{
	h2o_req_t *req = request->req;

	if (req == NULL || request->state != REQUEST_WAITING) {
		kagent_log(KAGENT_LOG_WARNING, "request %s %s answered twice", request->method,
			   request->path);
		return;
	}
	request->state = REQUEST_ANSWERED;
	/* h2o_send_inline copies the body into the request's pool. */
	http_server__send(req, status, content_type, body, length);
}

void
kagent_http_reply_header(struct kagent_http_request *request, const char *name, const char *value)
{
	h2o_req_t *req = request->req;
	h2o_iovec_t lower;

	if (req == NULL || request->state != REQUEST_WAITING)
		return;
	/* h2o keeps pointers, not copies, and looks names up in lower case. */
	lower = h2o_strdup(&req->pool, name, SIZE_MAX);
	h2o_strtolower(lower.base, lower.len);
	h2o_add_header_by_str(&req->pool, &req->res.headers, lower.base, lower.len, 1, NULL,
			      h2o_strdup(&req->pool, value, SIZE_MAX).base, strlen(value));
}

void
kagent_http_reply_error(struct kagent_http_request *request, int status, const char *format, ...)
{
	va_list arguments;
	char *message;

	va_start(arguments, format);
	message = kagent_vasprintf(format, arguments);
	va_end(arguments);
	kagent_http_reply_json(request, status, json_pack("{s:s}", "error", message));
	free(message);
}

/* ---- event streams ---- */

static void
http_server__stream_flush(struct kagent_http_stream *stream)
{
	h2o_req_t *req = stream->request->req;
	h2o_send_state_t state = H2O_SEND_STATE_IN_PROGRESS;
	h2o_iovec_t piece;

	if (req == NULL || stream->in_flight || stream->finished)
		return;
	if (stream->end_requested) {
		/* The owner was told: what is queued goes nowhere. */
		kagent_buffer_free(&stream->queue);
		stream->queued_events = 0;
	}
	if (stream->queue.length == 0 && !stream->owner_closed && !stream->end_requested)
		return;
	kagent_buffer_free(&stream->sending);
	stream->sending = stream->queue;
	memset(&stream->queue, 0, sizeof stream->queue);
	stream->queued_events = 0;
	free(stream->first_queued_id);
	stream->first_queued_id = NULL;
	if (stream->owner_closed || stream->end_requested) {
		state = H2O_SEND_STATE_FINAL;
		stream->finished = 1;
	} else
		stream->in_flight = 1;
	piece = h2o_iovec_init(stream->sending.data, stream->sending.length);
	h2o_send(req, piece.len > 0 ? &piece : NULL, piece.len > 0 ? 1 : 0, state);
}

static void
http_server__stream_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
	struct kagent_http_stream *stream = (struct kagent_http_stream *)generator;

	stream->in_flight = 0;
	kagent_buffer_free(&stream->sending);
	http_server__stream_flush(stream);
	/* Everything queued is written: the owner may send what it held back. */
	if (!stream->in_flight && !stream->finished && stream->queue.length == 0 &&
	    !stream->owner_told && !stream->owner_closed && stream->callbacks.on_drain != NULL)
		stream->callbacks.on_drain(stream, stream->callbacks.data);
}

/* The connection is closing: h2o disposes the request next (which tells the owner). */
static void
http_server__stream_stop(h2o_generator_t *generator, h2o_req_t *req)
{
	struct kagent_http_stream *stream = (struct kagent_http_stream *)generator;

	stream->in_flight = 0;
	stream->finished = 1;
}

struct kagent_http_stream *
kagent_http_stream_start(struct kagent_http_request *request,
			 const struct kagent_http_stream_callbacks *callbacks)
{
	static h2o_iovec_t opening = {H2O_STRLIT(": open\n\n")};
	struct kagent_http_stream *stream = kagent_calloc(1, sizeof *stream);
	h2o_req_t *req = request->req;

	stream->generator.proceed = http_server__stream_proceed;
	stream->generator.stop = http_server__stream_stop;
	stream->request = request;
	if (callbacks != NULL)
		stream->callbacks = *callbacks;
	request->stream = stream;
	if (req == NULL || request->state != REQUEST_WAITING) {
		/* A caller's bug (already answered): a stream that is finished from the start. */
		stream->finished = 1;
		stream->owner_told = 1;
		return stream;
	}
	request->state = REQUEST_STREAM;
	req->res.status = 200;
	req->res.reason = "OK";
	h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
		       H2O_STRLIT("text/event-stream"));
	h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
		       H2O_STRLIT("no-cache"));
	h2o_start_response(req, &stream->generator);
	/* h2o writes the head only with the body's first bytes: a comment line (clients ignore
	 * it) goes now, so the client sees the stream open before the first event. */
	stream->in_flight = 1;
	h2o_send(req, &opening, 1, H2O_SEND_STATE_IN_PROGRESS);
	return stream;
}

int
kagent_http_stream_send_text(struct kagent_http_stream *stream, const char *id, const char *event,
			     const char *data)
{
	struct kagent_buffer text = {0};
	size_t dropped;
	char *first;

	if (stream->finished || stream->owner_told || stream->owner_closed)
		return -EPIPE;
	if ((id != NULL && strpbrk(id, "\r\n") != NULL) ||
	    (event != NULL && strpbrk(event, "\r\n") != NULL) ||
	    (data != NULL && strpbrk(data, "\r\n") != NULL))
		return -EINVAL;
	if (id != NULL)
		kagent_buffer_appendf(&text, "id: %s\n", id);
	if (event != NULL)
		kagent_buffer_appendf(&text, "event: %s\n", event);
	if (data != NULL) {
		kagent_buffer_append_string(&text, "data: ");
		kagent_buffer_append_string(&text, data);
		kagent_buffer_append_string(&text, "\n");
	}
	kagent_buffer_append_string(&text, "\n");
	if (stream->queue.length + text.length > stream->request->server->stream_cap) {
		dropped = stream->queued_events + 1;
		first = stream->first_queued_id != NULL		   ? stream->first_queued_id
			: stream->queued_events == 0 && id != NULL ? kagent_strdup(id)
								   : NULL;
		stream->first_queued_id = NULL;
		kagent_buffer_free(&stream->queue);
		kagent_buffer_free(&text);
		stream->queued_events = 0;
		kagent_log(KAGENT_LOG_INFO, "slow client of %s: dropped %zu events",
			   stream->request->path, dropped);
		if (stream->callbacks.on_overflow != NULL)
			stream->callbacks.on_overflow(stream, dropped, first,
						      stream->callbacks.data);
		free(first);
		return -EOVERFLOW;
	}
	if (stream->queued_events == 0 && id != NULL)
		stream->first_queued_id = kagent_strdup(id);
	stream->queued_events++;
	kagent_buffer_append(&stream->queue, text.data, text.length);
	kagent_buffer_free(&text);
	http_server__stream_flush(stream);
	return 0;
}

int
kagent_http_stream_send(struct kagent_http_stream *stream, const char *id, const char *event,
			const json_t *data)
{
	char *json = NULL;
	int status;

	if (data != NULL) {
		/* Compact JSON holds no newline (strings escape theirs): one data line. */
		json = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
		if (json == NULL)
			return -EINVAL;
	}
	status = kagent_http_stream_send_text(stream, id, event, json);
	free(json);
	return status;
}

size_t
kagent_http_stream_room(const struct kagent_http_stream *stream)
{
	size_t cap = stream->request->server->stream_cap;

	return stream->queue.length < cap ? cap - stream->queue.length : 0;
}

void
kagent_http_stream_close(struct kagent_http_stream *stream)
{
	if (stream->owner_told || stream->owner_closed)
		return;
	stream->owner_closed = 1;
	if (stream->finished && stream->request->req == NULL) {
		/* Never started (a caller's bug): nothing of h2o's holds it. */
		return;
	}
	http_server__stream_flush(stream);
}

/* ---- connections and listeners ---- */

static void
http_server__connection_closed(uv_handle_t *handle)
{
	struct http_server__connection *connection = (struct http_server__connection *)handle;
	struct kagent_http_server *server = connection->server;

	if (connection->previous != NULL)
		connection->previous->next = connection->next;
	else if (server->connections == connection)
		server->connections = connection->next;
	if (connection->next != NULL)
		connection->next->previous = connection->previous;
	free(connection);
	http_server__maybe_finish(server);
}

static void
http_server__connection_refused(uv_handle_t *handle)
{
	free(handle);
}

static void
http_server__on_connection(uv_stream_t *stream, int status)
{
	struct http_server__listener *listener = (struct http_server__listener *)stream;
	struct kagent_http_server *server = listener->server;
	struct http_server__connection *connection;
	int error;

	if (status < 0) {
		kagent_log(KAGENT_LOG_WARNING, "accept: %s", uv_strerror(status));
		return;
	}
	connection = kagent_calloc(1, sizeof *connection);
	connection->server = server;
	connection->over_tcp = listener->over_tcp;
	if (listener->over_tcp)
		error = uv_tcp_init(server->loop, &connection->handle.tcp);
	else
		error = uv_pipe_init(server->loop, &connection->handle.pipe, 0);
	if (error < 0) {
		free(connection);
		return;
	}
	error = uv_accept(stream, &connection->handle.stream);
	if (error < 0 || server->closing) {
		uv_close((uv_handle_t *)&connection->handle, http_server__connection_refused);
		return;
	}
	connection->socket =
	    h2o_uv_socket_create(&connection->handle.stream, http_server__connection_closed);
	connection->next = server->connections;
	if (server->connections != NULL)
		server->connections->previous = connection;
	server->connections = connection;
	h2o_accept(&server->accept, connection->socket);
}

static void
http_server__listener_closed(uv_handle_t *handle)
{
	struct http_server__listener *listener = (struct http_server__listener *)handle;

	listener->open = 0;
	http_server__maybe_finish(listener->server);
}

static int
http_server__listen_unix(struct kagent_http_server *server, const char *path, char **cause)
{
	struct http_server__listener *listener = &server->unix_listener;
	struct sockaddr_un address;
	struct stat info;
	char *folder = kagent_strdup(path), *slash;
	int error = 0;

	if (strlen(path) >= sizeof address.sun_path) {
		error = -ENAMETOOLONG;
		*cause = kagent_asprintf("socket path too long (%zu bytes, at most %zu): %s",
					 strlen(path), sizeof address.sun_path - 1, path);
		goto out;
	}
	slash = strrchr(folder, '/');
	if (slash != NULL && slash != folder) {
		*slash = '\0';
		error = kagent_fileio_make_directories(folder, 0700, cause);
		if (error < 0)
			goto out;
		if (stat(folder, &info) == 0 &&
		    (info.st_uid != geteuid() || (info.st_mode & (S_IWGRP | S_IWOTH)) != 0)) {
			error = -EPERM;
			*cause = kagent_asprintf("%s is not private (owner %u, mode %03o): others "
						 "could replace the socket",
						 folder, (unsigned)info.st_uid,
						 (unsigned)(info.st_mode & 0777));
			goto out;
		}
	}
	if (lstat(path, &info) == 0) {
		if (!S_ISSOCK(info.st_mode)) {
			error = -EEXIST;
			*cause = kagent_asprintf("%s exists and is not a socket", path);
			goto out;
		}
		if (kagent_paths_socket_listening(path)) {
			error = -EADDRINUSE;
			*cause = kagent_asprintf("a kagentd already answers at %s", path);
			goto out;
		}
		/* Left by a daemon that ended abruptly. */
		if (unlink(path) != 0 && errno != ENOENT) {
			error = -errno;
			*cause = kagent_asprintf("cannot remove the stale socket %s: %s", path,
						 strerror(errno));
			goto out;
		}
	}
	error = uv_pipe_init(server->loop, &listener->handle.pipe, 0);
	if (error < 0) {
		*cause = kagent_asprintf("cannot make a pipe handle: %s", uv_strerror(error));
		goto out;
	}
	listener->open = 1;
	error = uv_pipe_bind(&listener->handle.pipe, path);
	if (error < 0) {
		*cause = kagent_asprintf("cannot bind %s: %s", path, uv_strerror(error));
		goto out;
	}
	/* The folder is private already; 0600 keeps the socket so if the folder is shared. */
	if (chmod(path, 0600) != 0 || lstat(path, &info) != 0) {
		error = -errno;
		unlink(path);
		goto private_failed;
	}
	server->socket_path = kagent_strdup(path);
	server->socket_device = info.st_dev;
	server->socket_inode = info.st_ino;
	error =
	    uv_listen(&listener->handle.stream, HTTP_SERVER_BACKLOG, http_server__on_connection);
	if (error < 0) {
		*cause = kagent_asprintf("cannot listen on %s: %s", path, uv_strerror(error));
		goto out;
	}
	goto out;
private_failed:
	/* Apart from the code above: GCC 12 with -fsanitize=undefined wrongly warns that path may
	 * be NULL (-Wformat-overflow) when this message is built inside the if. */
	*cause = kagent_asprintf("cannot make the socket %s private: %s", path, strerror(-error));
out:
	free(folder);
	return error;
}

static int
http_server__listen_tcp(struct kagent_http_server *server, const char *address, char **cause)
{
	struct http_server__listener *listener = &server->tcp_listener;
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *found = NULL;
	struct sockaddr_storage bound;
	char *host = kagent_strdup(address), *colon, *port;
	int error = 0, length = sizeof bound;

	colon = strrchr(host, ':');
	if (colon == NULL || colon[1] == '\0') {
		error = -EINVAL;
		*cause = kagent_asprintf("bad TCP address %s: expected HOST:PORT", address);
		goto out;
	}
	*colon = '\0';
	port = colon + 1;
	if (host[0] == '[' && colon > host + 1 && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	error = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, &found);
	if (error != 0) {
		*cause = kagent_asprintf("bad TCP address %s: %s", address, gai_strerror(error));
		error = -EINVAL;
		goto out;
	}
	error = uv_tcp_init(server->loop, &listener->handle.tcp);
	if (error < 0) {
		*cause = kagent_asprintf("cannot make a TCP handle: %s", uv_strerror(error));
		goto out;
	}
	listener->open = 1;
	error = uv_tcp_bind(&listener->handle.tcp, found->ai_addr, 0);
	if (error == 0)
		error = uv_listen(&listener->handle.stream, HTTP_SERVER_BACKLOG,
				  http_server__on_connection);
	if (error < 0) {
		*cause = kagent_asprintf("cannot listen on %s: %s", address, uv_strerror(error));
		goto out;
	}
	if (uv_tcp_getsockname(&listener->handle.tcp, (struct sockaddr *)&bound, &length) == 0)
		server->tcp_port =
		    ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
						      : ((struct sockaddr_in *)&bound)->sin_port);
out:
	if (found != NULL)
		freeaddrinfo(found);
	free(host);
	return error;
}

/* ---- start and close ---- */

int
kagent_http_server_start(uv_loop_t *loop, const struct kagent_http_server_options *options,
			 struct kagent_http_server **server_out, char **cause)
{
	struct kagent_http_server *server = NULL;
	struct http_server__handler *handler;
	h2o_hostconf_t *host;
	h2o_pathconf_t *path;
	const char *c;
	int error = 0;

	*server_out = NULL;
	if (options->socket_path == NULL || options->routes == NULL) {
		error = -EINVAL;
		*cause = kagent_strdup("the HTTP server needs a socket path and routes");
		goto out;
	}
	if (options->tcp_address != NULL) {
		if (options->token == NULL || options->token[0] == '\0') {
			error = -EINVAL;
			*cause = kagent_asprintf("refusing TCP on %s without a token: anyone who "
						 "reaches the port could drive kagentd",
						 options->tcp_address);
			goto out;
		}
		if (strlen(options->token) < HTTP_SERVER_MIN_TOKEN_LENGTH) {
			error = -EINVAL;
			*cause =
			    kagent_asprintf("the TCP token is too short (%zu characters, at "
					    "least %d)",
					    strlen(options->token), HTTP_SERVER_MIN_TOKEN_LENGTH);
			goto out;
		}
		for (c = options->token; *c != '\0'; c++) {
			if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f) {
				error = -EINVAL;
				*cause = kagent_strdup("the TCP token holds a space or a control "
						       "character");
				goto out;
			}
		}
	}
	/* Writing to a client that left must fail with EPIPE, not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);

	server = kagent_calloc(1, sizeof *server);
	server->loop = loop;
	server->routes = options->routes;
	server->handler_data = options->handler_data;
	server->token = options->token != NULL ? kagent_strdup(options->token) : NULL;
	server->body_cap =
	    options->body_cap != 0 ? options->body_cap : HTTP_SERVER_DEFAULT_BODY_CAP;
	server->stream_cap =
	    options->stream_cap != 0 ? options->stream_cap : HTTP_SERVER_DEFAULT_STREAM_CAP;
	server->unix_listener.server = server;
	server->tcp_listener.server = server;
	server->tcp_listener.over_tcp = 1;

	h2o_config_init(&server->config);
	server->config.server_name = h2o_iovec_init(H2O_STRLIT("kagentd"));
	/* h2o buffers a body whole before the handler runs: its cap is ours (h2o answers 413). */
	server->config.max_request_entity_size = server->body_cap;
	host =
	    h2o_config_register_host(&server->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
	path = h2o_config_register_path(host, "/", 0);
	handler = (struct http_server__handler *)h2o_create_handler(path, sizeof *handler);
	handler->super.on_req = http_server__on_req;
	handler->server = server;
	h2o_context_init(&server->context, loop, &server->config);
	server->accept.ctx = &server->context;
	server->accept.hosts = server->config.hosts;

	uv_timer_init(loop, &server->watch);
	server->watch.data = server;
	uv_timer_init(loop, &server->last);
	server->last.data = server;
	uv_timer_start(
	    &server->watch, http_server__watch,
	    options->watch_interval_ms ? options->watch_interval_ms : HTTP_SERVER_DEFAULT_WATCH_MS,
	    options->watch_interval_ms ? options->watch_interval_ms : HTTP_SERVER_DEFAULT_WATCH_MS);
	/* The watch alone must not keep the loop running. */
	uv_unref((uv_handle_t *)&server->watch);

	error = http_server__listen_unix(server, options->socket_path, cause);
	if (error == 0 && options->tcp_address != NULL)
		error = http_server__listen_tcp(server, options->tcp_address, cause);
	if (error < 0) {
		/* What was made closes on the loop, as kagent_http_server_close does. */
		kagent_http_server_close(server, NULL, NULL);
		goto out;
	}
	*server_out = server;
out:
	return error;
}

int
kagent_http_server_tcp_port(const struct kagent_http_server *server)
{
	return server->tcp_port;
}

/*
 * h2o_context_dispose of h2o 2.2.5 without its last line, uv_run(loop, UV_RUN_NOWAIT): that
 * would run the caller's loop from inside one of its callbacks, which libuv forbids. The
 * timers it closes are embedded in the context, so the server is freed two close callbacks
 * later (http_server__last_closed).
 */
static void
http_server__context_dispose(h2o_context_t *ctx)
{
	h2o_globalconf_t *config = ctx->globalconf;
	size_t i, j;

	for (i = 0; config->hosts[i] != NULL; ++i) {
		h2o_hostconf_t *hostconf = config->hosts[i];
		for (j = 0; j != hostconf->paths.size; ++j)
			h2o_context_dispose_pathconf_context(ctx, hostconf->paths.entries + j);
		h2o_context_dispose_pathconf_context(ctx, &hostconf->fallback_path);
	}
	free(ctx->_pathconfs_inited.entries);
	free(ctx->_module_configs);
	h2o_timeout_dispose(ctx->loop, &ctx->zero_timeout);
	h2o_timeout_dispose(ctx->loop, &ctx->one_sec_timeout);
	h2o_timeout_dispose(ctx->loop, &ctx->hundred_ms_timeout);
	h2o_timeout_dispose(ctx->loop, &ctx->handshake_timeout);
	h2o_timeout_dispose(ctx->loop, &ctx->http1.req_timeout);
	h2o_timeout_dispose(ctx->loop, &ctx->http2.idle_timeout);
	h2o_timeout_dispose(ctx->loop, &ctx->http2.graceful_shutdown_timeout);
	h2o_timeout_dispose(ctx->loop, &ctx->proxy.io_timeout);
	h2o_filecache_destroy(ctx->filecache);
	ctx->filecache = NULL;
	for (i = 0; i != ctx->storage.size; ++i) {
		h2o_context_storage_item_t *item = ctx->storage.entries + i;
		if (item->dispose != NULL)
			item->dispose(item->data);
	}
	free(ctx->storage.entries);
	h2o_multithread_unregister_receiver(ctx->queue, &ctx->receivers.hostinfo_getaddr);
	h2o_multithread_destroy_queue(ctx->queue);
	if (ctx->_timestamp_cache.value != NULL)
		h2o_mem_release_shared(ctx->_timestamp_cache.value);
}

static void
http_server__last_closed(uv_handle_t *handle)
{
	struct kagent_http_server *server = handle->data;
	void (*on_closed)(void *data) = server->on_closed;
	void *data = server->closed_data;

	h2o_config_dispose(&server->config);
	free(server->token);
	free(server->socket_path);
	free(server);
	if (on_closed != NULL)
		on_closed(data);
}

/* h2o's timers were closed in the same pass as the watch, so they are done by now. */
static void
http_server__watch_closed(uv_handle_t *handle)
{
	struct kagent_http_server *server = handle->data;

	uv_close((uv_handle_t *)&server->last, http_server__last_closed);
}

static void
http_server__maybe_finish(struct kagent_http_server *server)
{
	if (!server->closing || server->finishing || server->unix_listener.open ||
	    server->tcp_listener.open || server->connections != NULL)
		return;
	server->finishing = 1;
	uv_close((uv_handle_t *)&server->watch, http_server__watch_closed);
	http_server__context_dispose(&server->context);
}

void
kagent_http_server_close(struct kagent_http_server *server, void (*on_closed)(void *data),
			 void *data)
{
	struct http_server__connection *connection;
	struct kagent_http_request *request, *next;
	struct stat info;
	uv_os_fd_t fd;

	if (server->closing)
		return;
	server->closing = 1;
	server->on_closed = on_closed;
	server->closed_data = data;
	if (server->unix_listener.open)
		uv_close((uv_handle_t *)&server->unix_listener.handle,
			 http_server__listener_closed);
	if (server->tcp_listener.open)
		uv_close((uv_handle_t *)&server->tcp_listener.handle, http_server__listener_closed);
	/* Only our own socket file: another daemon may have taken the path since. */
	if (server->socket_path != NULL && lstat(server->socket_path, &info) == 0 &&
	    info.st_dev == server->socket_device && info.st_ino == server->socket_inode)
		unlink(server->socket_path);
	for (request = server->requests; request != NULL; request = next) {
		next = request->next;
		http_server__abandon(request, 503, "kagentd is shutting down");
	}
	/* Idle keep-alive connections wait in read: EOF makes h2o close them; the others close
	 * once their answer is written (each is marked not persistent, or reads EOF next). */
	for (connection = server->connections; connection != NULL; connection = connection->next)
		if (uv_fileno((uv_handle_t *)&connection->handle, &fd) == 0)
			shutdown(fd, SHUT_RD);
	http_server__maybe_finish(server);
}
