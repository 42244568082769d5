/*
 * HTTP requests on the libuv loop through libcurl's multi interface (see
 * include/kagent/llm/http_client.h), after curl's docs/examples/multi-uv.c with the
 * fixes of /work/shared/design/platform-notes.md: one uv_poll_t per socket kept
 * in curl's socketp, closed before curl closes the socket; one client timer for
 * curl's timeouts. Every user callback that curl drives (on_head, on_body) may
 * cancel, start or free: none of those calls libcurl from inside a callback,
 * they set flags and defer the work to the loop or to the end of the dispatch.
 *
 * Lifetimes: the client and each request and socket own one libuv handle; the
 * client counts its open handles (its timer, the sockets' polls, the requests'
 * timers) and is freed by the close callback of the last, once torn down.
 */
#include "kagent/llm/http_client.h"
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The request body a caller may send, and how much of an error body is kept. */
#define HTTP_REQUEST_BODY_CAP (64u << 20)
#define HTTP_ERROR_BODY_CAP (64u << 10)
/* Retry headers are short; a longer value is cut rather than trusted. */
#define HTTP_HEADER_VALUE_CAP 256
#define HTTP_DEFAULT_CONNECT_TIMEOUT_MS 10000
#define HTTP_DEFAULT_STALL_SECONDS 120
/* libcurl's receive buffer per transfer (its default is 16 KB): a daemon holds one per session
 * waiting on its model, and answers arrive as small server-sent events anyway. */
#define HTTP_RECEIVE_BUFFER_SIZE 4096L
/* libcurl's buffer for a body read as it is sent (its default is 64 KB, this is its minimum): it
 * is kept until the transfer ends, so a session waiting on its model holds one. */
#define HTTP_UPLOAD_BUFFER_SIZE 16384L

struct http_client__socket {
	uv_poll_t poll;
	curl_socket_t fd;
	struct kagent_http_client *client;
	struct http_client__socket *previous, *next;
};

enum http_client__phase {
	HTTP_QUEUED,  /* waiting for the loop to add it to the multi handle */
	HTTP_RUNNING, /* in the multi handle */
};

struct kagent_http_request {
	struct kagent_http_client *client;
	struct kagent_http_request *previous, *next;
	CURL *easy;
	struct curl_slist *headers;
	/* Deferred start, then the stall watch; a 0 ms start after cancel. */
	uv_timer_t timer;
	enum http_client__phase phase;
	int cancelled;
	int head_seen;
	int body_refused;    /* on_body returned non-zero */
	int error_body_full; /* the error body reached its cap: the transfer was stopped */
	uint64_t stall_ms;
	uint64_t last_activity_ms; /* loop time of the last byte moved */
	curl_off_t uploaded;
	/* A body read as it is sent (options.read_body), and where the next read starts. */
	size_t (*read_body)(size_t offset, char *buffer, size_t size, void *data);
	size_t body_offset;
	uint64_t started_ns;
	char *description; /* "POST http://host/path" (no query: it may hold a key) */
	struct kagent_buffer error_body;
	struct kagent_http_result result;
	char curl_error[CURL_ERROR_SIZE];
	void (*on_head)(const struct kagent_http_response_head *head, void *data);
	int (*on_body)(const char *bytes, size_t size, void *data);
	void (*on_done)(const struct kagent_http_result *result, void *data);
	void *data;
};

struct kagent_http_client {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer; /* curl's CURLMOPT_TIMERFUNCTION */
	struct kagent_http_request *requests;
	struct http_client__socket *sockets;
	int open_handles;
	int dispatching; /* inside curl_multi_socket_action: no libcurl call allowed */
	int freeing;
	int torn_down;
};

static pthread_once_t http_client__global_once = PTHREAD_ONCE_INIT;
static CURLcode http_client__global_status;

static void
http_client__global_init(void)
{
	http_client__global_status = curl_global_init(CURL_GLOBAL_DEFAULT);
}

const char *
kagent_http_failure_name(enum kagent_http_failure failure)
{
	switch (failure) {
	case KAGENT_HTTP_OK:
		return "ok";
	case KAGENT_HTTP_CONNECT:
		return "connect";
	case KAGENT_HTTP_STALLED:
		return "stalled";
	case KAGENT_HTTP_CUT:
		return "cut";
	case KAGENT_HTTP_ABORTED:
		return "aborted";
	case KAGENT_HTTP_OTHER:
		return "other";
	}
	return "unknown";
}

static void
http_client__client_handle_closed(struct kagent_http_client *client)
{
	if (--client->open_handles == 0 && client->torn_down)
		free(client);
}

static void
http_client__client_timer_closed(uv_handle_t *handle)
{
	http_client__client_handle_closed(handle->data);
}

/* ---- sockets ---- */

static void
http_client__socket_closed(uv_handle_t *handle)
{
	struct http_client__socket *socket = handle->data;
	struct kagent_http_client *client = socket->client;

	free(socket);
	http_client__client_handle_closed(client);
}

static void
http_client__socket_close(struct http_client__socket *socket)
{
	struct kagent_http_client *client = socket->client;

	if (socket->previous != NULL)
		socket->previous->next = socket->next;
	else
		client->sockets = socket->next;
	if (socket->next != NULL)
		socket->next->previous = socket->previous;
	uv_poll_stop(&socket->poll);
	uv_close((uv_handle_t *)&socket->poll, http_client__socket_closed);
}

static void http_client__dispatch(struct kagent_http_client *client, curl_socket_t fd, int flags);

static void
http_client__poll_callback(uv_poll_t *poll, int status, int events)
{
	struct http_client__socket *socket = poll->data;
	int flags = 0;

	if (status < 0)
		flags = CURL_CSELECT_ERR;
	else {
		if (events & UV_READABLE)
			flags |= CURL_CSELECT_IN;
		if (events & UV_WRITABLE)
			flags |= CURL_CSELECT_OUT;
	}
	http_client__dispatch(socket->client, socket->fd, flags);
}

/* CURLMOPT_SOCKETFUNCTION: what curl wants to wait for on one socket. */
static int
http_client__socket_function(CURL *easy, curl_socket_t fd, int what, void *client_data,
			     void *socket_data)
{
	struct kagent_http_client *client = client_data;
	struct http_client__socket *socket = socket_data;
	int events = 0, status;

	if (what == CURL_POLL_REMOVE) {
		if (socket != NULL)
			http_client__socket_close(socket);
		return 0;
	}
	if (socket == NULL) {
		socket = kagent_calloc(1, sizeof *socket);
		status = uv_poll_init_socket(client->loop, &socket->poll, fd);
		if (status < 0) {
			kagent_log(KAGENT_LOG_WARNING, "cannot watch socket %d: %s", (int)fd,
				   uv_strerror(status));
			free(socket);
			return -1;
		}
		socket->poll.data = socket;
		socket->fd = fd;
		socket->client = client;
		socket->next = client->sockets;
		if (client->sockets != NULL)
			client->sockets->previous = socket;
		client->sockets = socket;
		client->open_handles++;
		curl_multi_assign(client->multi, fd, socket);
	}
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		events |= UV_READABLE;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		events |= UV_WRITABLE;
	uv_poll_start(&socket->poll, events, http_client__poll_callback);
	return 0;
}

/*
 * CURLOPT_CLOSESOCKETFUNCTION: libcurl may close a socket without CURL_POLL_REMOVE
 * (curl#16026); a poll left on the closed fd would make libuv abort on EBADF, or
 * watch whatever socket reuses the number. So close the poll first.
 */
static int
http_client__close_socket_function(void *client_data, curl_socket_t fd)
{
	struct kagent_http_client *client = client_data;
	struct http_client__socket *socket;

	for (socket = client->sockets; socket != NULL; socket = socket->next) {
		if (socket->fd == fd) {
			http_client__socket_close(socket);
			break;
		}
	}
	if (!client->torn_down)
		curl_multi_assign(client->multi, fd, NULL);
	return close(fd);
}

/* ---- the client timer ---- */

static void
http_client__timeout_callback(uv_timer_t *timer)
{
	http_client__dispatch(timer->data, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION. libcurl must not be called from here: a 0 ms timeout runs in 1 ms. */
static int
http_client__timer_function(CURLM *multi, long timeout_ms, void *client_data)
{
	struct kagent_http_client *client = client_data;

	if (timeout_ms < 0)
		uv_timer_stop(&client->timer);
	else
		uv_timer_start(&client->timer, http_client__timeout_callback,
			       timeout_ms == 0 ? 1 : (uint64_t)timeout_ms, 0);
	return 0;
}

/* ---- requests ---- */

static void
http_client__request_closed(uv_handle_t *handle)
{
	struct kagent_http_request *request = handle->data;
	struct kagent_http_client *client = request->client;

	free(request);
	http_client__client_handle_closed(client);
}

/* Tells the caller (exactly once) and releases the request. message is taken. */
static void
http_client__request_finish(struct kagent_http_request *request, enum kagent_http_failure failure,
			    char *message)
{
	struct kagent_http_client *client = request->client;
	struct kagent_http_result *result = &request->result;

	if (request->previous != NULL)
		request->previous->next = request->next;
	else
		client->requests = request->next;
	if (request->next != NULL)
		request->next->previous = request->previous;
	uv_timer_stop(&request->timer);
	if (request->phase == HTTP_RUNNING)
		curl_multi_remove_handle(client->multi, request->easy);
	if (result->status == 0)
		curl_easy_getinfo(request->easy, CURLINFO_RESPONSE_CODE, &result->status);
	curl_easy_cleanup(request->easy);
	curl_slist_free_all(request->headers);

	result->failure = failure;
	result->error_message = message;
	result->seconds = (double)(uv_hrtime() - request->started_ns) / 1e9;
	if (result->status < 200 || result->status > 299)
		result->error_body = request->error_body.length > 0
					 ? kagent_buffer_take(&request->error_body)
					 : NULL;
	kagent_log(KAGENT_LOG_DEBUG, "%s: %s, status %ld, %llu bytes in %.3f s",
		   request->description, kagent_http_failure_name(failure), result->status,
		   result->bytes, result->seconds);
	request->on_done(result, request->data);

	free(result->error_message);
	free(result->retry_after);
	free(result->retry_after_ms);
	free(result->should_retry);
	free(result->error_body);
	kagent_buffer_free(&request->error_body);
	free(request->description);
	uv_close((uv_handle_t *)&request->timer, http_client__request_closed);
}

/* Maps how libcurl ended the transfer to the caller's failure kinds. */
static void
http_client__request_complete(struct kagent_http_request *request, CURLcode code)
{
	enum kagent_http_failure failure;
	const char *what;

	if (request->cancelled) {
		http_client__request_finish(request, KAGENT_HTTP_ABORTED,
					    kagent_asprintf("%s: cancelled", request->description));
		return;
	}
	/* A capped error body stopped the transfer on purpose: the status is what counts. */
	if (code == CURLE_OK || (code == CURLE_WRITE_ERROR && request->error_body_full)) {
		http_client__request_finish(request, KAGENT_HTTP_OK, NULL);
		return;
	}
	if (code == CURLE_WRITE_ERROR && request->body_refused) {
		http_client__request_finish(
		    request, KAGENT_HTTP_ABORTED,
		    kagent_asprintf("%s: the response body callback stopped the request",
				    request->description));
		return;
	}
	switch (code) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	/* No CURLOPT_TIMEOUT is set, so only the connect timeout can expire. */
	case CURLE_OPERATION_TIMEDOUT:
		failure = KAGENT_HTTP_CONNECT;
		what = "could not connect";
		break;
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2_STREAM:
		failure = KAGENT_HTTP_CUT;
		what = "the connection ended before the response was complete";
		break;
	default:
		failure = KAGENT_HTTP_OTHER;
		what = "transfer failed";
		break;
	}
	http_client__request_finish(request, failure,
				    kagent_asprintf("%s: %s: %s", request->description, what,
						    request->curl_error[0] != '\0'
							? request->curl_error
							: curl_easy_strerror(code)));
}

static void
http_client__request_timer(uv_timer_t *timer)
{
	struct kagent_http_request *request = timer->data;
	struct kagent_http_client *client = request->client;
	uint64_t idle;
	CURLMcode code;

	if (request->cancelled) {
		http_client__request_complete(request, CURLE_OK);
		return;
	}
	if (request->phase == HTTP_QUEUED) {
		code = curl_multi_add_handle(client->multi, request->easy);
		if (code != CURLM_OK) {
			http_client__request_finish(request, KAGENT_HTTP_OTHER,
						    kagent_asprintf("%s: cannot start: %s",
								    request->description,
								    curl_multi_strerror(code)));
			return;
		}
		request->phase = HTTP_RUNNING;
		return;
	}
	/* The stall watch: re-armed for the rest of the time when bytes moved meanwhile. */
	idle = uv_now(client->loop) - request->last_activity_ms;
	if (idle < request->stall_ms) {
		uv_timer_start(&request->timer, http_client__request_timer,
			       request->stall_ms - idle, 0);
		return;
	}
	http_client__request_finish(
	    request, KAGENT_HTTP_STALLED,
	    kagent_asprintf("%s: stalled: no byte for %llu s", request->description,
			    (unsigned long long)(request->stall_ms / 1000)));
}

static void
http_client__request_saw_activity(struct kagent_http_request *request)
{
	request->last_activity_ms = uv_now(request->client->loop);
}

/* Whether curl callbacks must stop the transfer. */
static int
http_client__request_stopping(const struct kagent_http_request *request)
{
	return request->cancelled || request->client->freeing;
}

static const char *
http_client__head_header(const struct kagent_http_response_head *head, const char *name)
{
	const struct kagent_http_request *request = head->opaque;
	struct curl_header *header;

	if (curl_easy_header(request->easy, name, 0, CURLH_HEADER, -1, &header) != CURLHE_OK)
		return NULL;
	return header->value;
}

static char *
http_client__copy_header(struct kagent_http_request *request, const char *name)
{
	struct kagent_http_response_head head = {.opaque = request};
	const char *value = http_client__head_header(&head, name);

	return value != NULL ? kagent_strndup(value, strnlen(value, HTTP_HEADER_VALUE_CAP)) : NULL;
}

static int
http_client__status_ok(long status)
{
	return status >= 200 && status <= 299;
}

/* The head of the final response is complete (interim 1xx heads are skipped). */
static void
http_client__request_head(struct kagent_http_request *request)
{
	struct kagent_http_response_head head = {.header = http_client__head_header,
						 .opaque = request};
	long status = 0;

	curl_easy_getinfo(request->easy, CURLINFO_RESPONSE_CODE, &status);
	if (request->head_seen || (status >= 100 && status <= 199))
		return;
	request->head_seen = 1;
	request->result.status = status;
	request->result.retry_after = http_client__copy_header(request, "retry-after");
	request->result.retry_after_ms = http_client__copy_header(request, "retry-after-ms");
	request->result.should_retry = http_client__copy_header(request, "x-should-retry");
	if (http_client__status_ok(status) && request->on_head != NULL) {
		head.status = status;
		request->on_head(&head, request->data);
	}
}

static size_t
http_client__header_callback(char *line, size_t size, size_t count, void *data)
{
	struct kagent_http_request *request = data;
	size_t length = size * count;

	if (http_client__request_stopping(request))
		return CURL_WRITEFUNC_ERROR;
	http_client__request_saw_activity(request);
	if (length <= 2 && (length == 0 || line[0] == '\r' || line[0] == '\n'))
		http_client__request_head(request);
	return length;
}

static size_t
http_client__write_callback(char *bytes, size_t size, size_t count, void *data)
{
	struct kagent_http_request *request = data;
	size_t length = size * count, room;

	if (http_client__request_stopping(request))
		return CURL_WRITEFUNC_ERROR;
	http_client__request_saw_activity(request);
	if (!request->head_seen)
		http_client__request_head(request);
	request->result.bytes += length;
	if (http_client__status_ok(request->result.status)) {
		if (request->on_body != NULL && length > 0 &&
		    request->on_body(bytes, length, request->data) != 0) {
			request->body_refused = 1;
			return CURL_WRITEFUNC_ERROR;
		}
		return http_client__request_stopping(request) ? CURL_WRITEFUNC_ERROR : length;
	}
	room = HTTP_ERROR_BODY_CAP - request->error_body.length;
	kagent_buffer_append(&request->error_body, bytes, length < room ? length : room);
	if (length >= room && length > 0) {
		/* Enough to report the error; a peer must not make us read forever. */
		request->error_body_full = 1;
		return CURL_WRITEFUNC_ERROR;
	}
	return length;
}

/* The next bytes of a body read as it is sent. */
static size_t
http_client__read_callback(char *buffer, size_t size, size_t count, void *data)
{
	struct kagent_http_request *request = data;
	size_t copied =
	    request->read_body(request->body_offset, buffer, size * count, request->data);

	request->body_offset += copied;
	return copied;
}

/* curl sends the body again (a reused connection that turned out closed, a redirect): from
 * where it says. */
static int
http_client__seek_callback(void *data, curl_off_t offset, int origin)
{
	struct kagent_http_request *request = data;

	if (origin != SEEK_SET || offset < 0)
		return CURL_SEEKFUNC_CANTSEEK;
	request->body_offset = (size_t)offset;
	return CURL_SEEKFUNC_OK;
}

/* Upload progress counts as activity, so a large body on a slow link is not a stall. */
static int
http_client__progress_callback(void *data, curl_off_t download_total, curl_off_t downloaded,
			       curl_off_t upload_total, curl_off_t uploaded)
{
	struct kagent_http_request *request = data;

	if (uploaded > request->uploaded) {
		request->uploaded = uploaded;
		http_client__request_saw_activity(request);
	}
	return http_client__request_stopping(request);
}

/* The connection is up: the stall watch starts (before, the connect timeout rules). */
static int
http_client__prerequest_callback(void *data, char *connected_ip, char *local_ip, int connected_port,
				 int local_port)
{
	struct kagent_http_request *request = data;

	http_client__request_saw_activity(request);
	if (!request->cancelled)
		uv_timer_start(&request->timer, http_client__request_timer, request->stall_ms, 0);
	return CURL_PREREQFUNC_OK;
}

/* Checks the options that curl would only reject once the request runs. */
static int
http_client__check_options(const struct kagent_http_request_options *options, const char *method,
			   char **cause)
{
	CURLU *url;
	CURLUcode url_code;
	char *scheme = NULL;
	int status = 0;

	if (options->url == NULL || options->on_done == NULL) {
		*cause = kagent_strdup("an HTTP request needs a url and an on_done callback");
		return -EINVAL;
	}
	if (strcmp(method, "POST") != 0 && strcmp(method, "GET") != 0) {
		*cause = kagent_asprintf("HTTP method %s is not supported (POST or GET)", method);
		return -EINVAL;
	}
	if (options->body == NULL && options->read_body == NULL && options->body_length > 0) {
		*cause = kagent_strdup("an HTTP request body has a length but no bytes");
		return -EINVAL;
	}
	if (strcmp(method, "GET") == 0 && options->body_length > 0) {
		*cause = kagent_strdup("an HTTP GET request cannot carry a body");
		return -EINVAL;
	}
	if (options->body_length > HTTP_REQUEST_BODY_CAP) {
		*cause = kagent_asprintf("the HTTP request body (%zu bytes) is over the %u MiB cap",
					 options->body_length, HTTP_REQUEST_BODY_CAP >> 20);
		return -E2BIG;
	}
	url = curl_url();
	if (url == NULL) {
		status = -ENOMEM;
		*cause = kagent_strdup("out of memory parsing a URL");
		goto out;
	}
	url_code = curl_url_set(url, CURLUPART_URL, options->url, 0);
	if (url_code == CURLUE_OK)
		url_code = curl_url_get(url, CURLUPART_SCHEME, &scheme, 0);
	if (url_code != CURLUE_OK) {
		status = -EINVAL;
		*cause = kagent_asprintf("bad URL \"%.200s\": %s", options->url,
					 curl_url_strerror(url_code));
		goto out;
	}
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
		status = -EINVAL;
		*cause = kagent_asprintf("URL \"%.200s\" is not http or https", options->url);
		goto out;
	}
out:
	curl_free(scheme);
	curl_url_cleanup(url);
	return status;
}

/* Sets up the easy handle; 0 or a negative errno with *cause set. */
static int
http_client__request_configure(struct kagent_http_request *request,
			       const struct kagent_http_request_options *options,
			       const char *method, char **cause)
{
	CURL *easy = request->easy;
	long connect_timeout_ms = options->connect_timeout_ms > 0 ? options->connect_timeout_ms
								  : HTTP_DEFAULT_CONNECT_TIMEOUT_MS;
	struct curl_slist *list;
	CURLcode code = CURLE_OK;

	/* Without "Expect:", curl waits up to 1 s for a 100 Continue before a body over 1 MiB. */
	request->headers = curl_slist_append(NULL, "Expect:");
	list = request->headers;
	for (size_t i = 0; list != NULL && options->headers != NULL && options->headers[i] != NULL;
	     i++) {
		list = curl_slist_append(request->headers, options->headers[i]);
		if (list != NULL)
			request->headers = list;
	}
	if (list == NULL) {
		*cause = kagent_strdup("out of memory building HTTP headers");
		return -ENOMEM;
	}

	curl_easy_setopt(easy, CURLOPT_PRIVATE, request);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, request->curl_error);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, HTTP_RECEIVE_BUFFER_SIZE);
	curl_easy_setopt(easy, CURLOPT_USERAGENT, "kagent/" KAGENT_VERSION);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, request->headers);
	curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, http_client__header_callback);
	curl_easy_setopt(easy, CURLOPT_HEADERDATA, request);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, http_client__write_callback);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, request);
	curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, http_client__progress_callback);
	curl_easy_setopt(easy, CURLOPT_XFERINFODATA, request);
	curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, http_client__prerequest_callback);
	curl_easy_setopt(easy, CURLOPT_PREREQDATA, request);
	curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, http_client__close_socket_function);
	curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, request->client);
	code = curl_easy_setopt(easy, CURLOPT_URL, options->url);
	if (code == CURLE_OK && strcmp(method, "POST") == 0) {
		curl_easy_setopt(easy, CURLOPT_POST, 1L);
		curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)options->body_length);
		if (options->read_body != NULL) {
			request->read_body = options->read_body;
			curl_easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE, HTTP_UPLOAD_BUFFER_SIZE);
			curl_easy_setopt(easy, CURLOPT_READFUNCTION, http_client__read_callback);
			curl_easy_setopt(easy, CURLOPT_READDATA, request);
			curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, http_client__seek_callback);
			code = curl_easy_setopt(easy, CURLOPT_SEEKDATA, request);
		} else {
			code = curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS,
						options->body != NULL ? options->body : "");
		}
	}
	if (code != CURLE_OK) {
		*cause =
		    kagent_asprintf("cannot set up the HTTP request: %s", curl_easy_strerror(code));
		return -ENOMEM;
	}
	return 0;
}

static char *
http_client__describe(const char *method, const char *url)
{
	return kagent_asprintf("%s %.*s", method, (int)strcspn(url, "?#"), url);
}

struct kagent_http_request *
kagent_http_request_start(struct kagent_http_client *client,
			  const struct kagent_http_request_options *options, char **cause)
{
	const char *method = options->method != NULL ? options->method : "POST";
	struct kagent_http_request *request = NULL;

	if (client->freeing) {
		*cause = kagent_strdup("the HTTP client is being freed");
		return NULL;
	}
	if (http_client__check_options(options, method, cause) < 0)
		return NULL;
	request = kagent_calloc(1, sizeof *request);
	request->client = client;
	request->easy = curl_easy_init();
	if (request->easy == NULL) {
		*cause = kagent_strdup("cannot create a libcurl handle (out of memory)");
		goto fail;
	}
	if (http_client__request_configure(request, options, method, cause) < 0)
		goto fail;
	request->stall_ms =
	    1000 * (uint64_t)(options->stall_seconds > 0 ? options->stall_seconds
							 : HTTP_DEFAULT_STALL_SECONDS);
	request->on_head = options->on_head;
	request->on_body = options->on_body;
	request->on_done = options->on_done;
	request->data = options->data;
	request->description = http_client__describe(method, options->url);
	request->started_ns = uv_hrtime();
	request->phase = HTTP_QUEUED;

	uv_timer_init(client->loop, &request->timer);
	request->timer.data = request;
	client->open_handles++;
	request->next = client->requests;
	if (client->requests != NULL)
		client->requests->previous = request;
	client->requests = request;
	/* Added from the loop, so that start may be called from any callback, even curl's. */
	uv_timer_start(&request->timer, http_client__request_timer, 0, 0);
	return request;

fail:
	curl_slist_free_all(request->headers);
	curl_easy_cleanup(request->easy);
	free(request);
	return NULL;
}

void
kagent_http_request_cancel(struct kagent_http_request *request)
{
	if (request->cancelled)
		return;
	request->cancelled = 1;
	uv_timer_start(&request->timer, http_client__request_timer, 0, 0);
}

/* ---- dispatch and teardown ---- */

static void
http_client__teardown(struct kagent_http_client *client)
{
	if (client->torn_down)
		return;
	client->torn_down = 1;
	while (client->requests != NULL) {
		client->requests->cancelled = 1;
		http_client__request_complete(client->requests, CURLE_OK);
	}
	curl_multi_cleanup(client->multi);
	client->multi = NULL;
	while (client->sockets != NULL)
		http_client__socket_close(client->sockets);
	uv_close((uv_handle_t *)&client->timer, http_client__client_timer_closed);
}

/* Reports the transfers curl has finished; must run outside libcurl's callbacks. */
static void
http_client__check_done(struct kagent_http_client *client)
{
	CURLMsg *message;
	CURLcode code;
	char *request;
	int pending;

	while (!client->freeing && (message = curl_multi_info_read(client->multi, &pending))) {
		if (message->msg != CURLMSG_DONE)
			continue;
		/* The message dies with curl_multi_remove_handle: copy first. */
		code = message->data.result;
		curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &request);
		http_client__request_complete((struct kagent_http_request *)request, code);
	}
	if (client->freeing)
		http_client__teardown(client);
}

static void
http_client__dispatch(struct kagent_http_client *client, curl_socket_t fd, int flags)
{
	int running;

	client->dispatching++;
	curl_multi_socket_action(client->multi, fd, flags, &running);
	client->dispatching--;
	http_client__check_done(client);
}

int
kagent_http_client_create(uv_loop_t *loop, struct kagent_http_client **client_out, char **cause)
{
	struct kagent_http_client *client;

	*client_out = NULL;
	pthread_once(&http_client__global_once, http_client__global_init);
	if (http_client__global_status != CURLE_OK) {
		*cause = kagent_asprintf("cannot initialize libcurl: %s",
					 curl_easy_strerror(http_client__global_status));
		return -EIO;
	}
	client = kagent_calloc(1, sizeof *client);
	client->loop = loop;
	client->multi = curl_multi_init();
	if (client->multi == NULL) {
		free(client);
		*cause = kagent_strdup("cannot create a libcurl multi handle (out of memory)");
		return -ENOMEM;
	}
	uv_timer_init(loop, &client->timer);
	client->timer.data = client;
	client->open_handles = 1;
	curl_multi_setopt(client->multi, CURLMOPT_SOCKETFUNCTION, http_client__socket_function);
	curl_multi_setopt(client->multi, CURLMOPT_SOCKETDATA, client);
	curl_multi_setopt(client->multi, CURLMOPT_TIMERFUNCTION, http_client__timer_function);
	curl_multi_setopt(client->multi, CURLMOPT_TIMERDATA, client);
	*client_out = client;
	return 0;
}

uv_loop_t *
kagent_http_client_loop(struct kagent_http_client *client)
{
	return client->loop;
}

void
kagent_http_client_free(struct kagent_http_client *client)
{
	if (client == NULL || client->freeing)
		return;
	client->freeing = 1;
	/* Inside a curl callback, the dispatch tears down once libcurl has returned. */
	if (client->dispatching == 0)
		http_client__teardown(client);
}
