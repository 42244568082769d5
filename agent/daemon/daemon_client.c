/*
 * A blocking request to kagentd (see include/kagent/daemon/daemon_client.h): libcurl's easy
 * interface with CURLOPT_UNIX_SOCKET_PATH for the socket, or the URL and a bearer token for TCP;
 * and the event streams, read as they come through the SSE parser of agent/llm/sse.c.
 */
#include "kagent/daemon/daemon_client.h"
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/llm/sse.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The daemon answers its API at once (long work is a run, polled or streamed): a daemon that
 * does not answer within this is stuck, and the command line says so rather than hang. */
#define DAEMON_CLIENT_TIMEOUT_SECONDS 120
#define DAEMON_CLIENT_CONNECT_TIMEOUT_MS 5000
/* The answers are JSON documents about runs; anything larger is not kagentd speaking. */
#define DAEMON_CLIENT_REPLY_CAP (64u << 20)

struct daemon_client__reply {
	struct kagent_buffer body;
	int too_large;
};

static pthread_once_t daemon_client__once = PTHREAD_ONCE_INIT;
static CURLcode daemon_client__global_status;

static void
daemon_client__global_init(void)
{
	daemon_client__global_status = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t
daemon_client__write(char *bytes, size_t size, size_t count, void *data)
{
	struct daemon_client__reply *reply = data;
	size_t length = size * count;

	if (reply->body.length + length > DAEMON_CLIENT_REPLY_CAP) {
		reply->too_large = 1;
		return CURL_WRITEFUNC_ERROR;
	}
	kagent_buffer_append(&reply->body, bytes, length);
	return length;
}

static int
daemon_client__is_url(const char *target)
{
	return strncmp(target, "http://", 7) == 0 || strncmp(target, "https://", 8) == 0;
}

/* One easy handle to the daemon, with what it holds on to. */
struct daemon_client__call {
	CURL *easy;
	struct curl_slist *headers;
	char *url;
	char *authorization;
	char error_text[CURL_ERROR_SIZE];
	int over_tcp;
};

static void
daemon_client__call_clear(struct daemon_client__call *call)
{
	if (call->easy != NULL)
		curl_easy_cleanup(call->easy);
	curl_slist_free_all(call->headers);
	free(call->url);
	free(call->authorization);
}

/* The handle for method path at target: URL or socket, token, and the options every call has. */
static int
daemon_client__call_open(struct daemon_client__call *call, const char *target, const char *token,
			 const char *method, const char *path, char **cause)
{
	struct stat info;

	memset(call, 0, sizeof *call);
	call->over_tcp = daemon_client__is_url(target);
	pthread_once(&daemon_client__once, daemon_client__global_init);
	if (daemon_client__global_status != CURLE_OK) {
		*cause = kagent_asprintf("cannot start libcurl: %s",
					 curl_easy_strerror(daemon_client__global_status));
		return -EIO;
	}
	if (!call->over_tcp && stat(target, &info) != 0) {
		*cause = kagent_asprintf("no kagentd at %s: start it with `kagent daemon`", target);
		return -ECONNREFUSED;
	}
	call->easy = curl_easy_init();
	if (call->easy == NULL) {
		*cause = kagent_strdup("cannot make a libcurl handle");
		return -ENOMEM;
	}
	if (call->over_tcp) {
		call->url = kagent_asprintf("%s%s", target, path);
		if (token != NULL) {
			call->authorization = kagent_asprintf("Authorization: Bearer %s", token);
			call->headers = curl_slist_append(call->headers, call->authorization);
		}
	} else {
		/* The host part of the URL is ignored over a Unix socket. */
		call->url = kagent_asprintf("http://localhost%s", path);
		curl_easy_setopt(call->easy, CURLOPT_UNIX_SOCKET_PATH, target);
	}
	curl_easy_setopt(call->easy, CURLOPT_URL, call->url);
	curl_easy_setopt(call->easy, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(call->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(call->easy, CURLOPT_ERRORBUFFER, call->error_text);
	curl_easy_setopt(call->easy, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)DAEMON_CLIENT_CONNECT_TIMEOUT_MS);
	/* The token must not follow a redirect elsewhere; kagentd never redirects anyway. */
	curl_easy_setopt(call->easy, CURLOPT_FOLLOWLOCATION, 0L);
	return 0;
}

/* The errno and message of a transfer that failed (code is not CURLE_OK). */
static int
daemon_client__failed(const struct daemon_client__call *call, CURLcode code, const char *target,
		      const char *method, const char *path, int too_large, char **cause)
{
	const char *text = call->error_text[0] ? call->error_text : curl_easy_strerror(code);

	if (code == CURLE_COULDNT_CONNECT && !call->over_tcp) {
		*cause = kagent_asprintf("no kagentd at %s: start it with `kagent daemon`", target);
		return -ECONNREFUSED;
	}
	if (code == CURLE_COULDNT_CONNECT) {
		*cause = kagent_asprintf("no kagentd at %s: %s", target, text);
		return -ECONNREFUSED;
	}
	*cause = kagent_asprintf("%s %s at %s: %s", method, path, target,
				 too_large ? "the answer is over 64 MiB" : text);
	return code == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
}

/* An error answer's body as JSON: {"error": "<the text>"} when it is not JSON. */
static json_t *
daemon_client__error_body(const struct kagent_buffer *body)
{
	json_t *parsed;

	if (body->length == 0)
		return NULL;
	parsed = json_loadb(body->data, body->length, JSON_DECODE_ANY, NULL);
	if (parsed == NULL)
		parsed = json_pack("{s:s%}", "error", body->data, body->length);
	return parsed;
}

int
kagent_daemon_client_request(const char *target, const char *token, const char *method,
			     const char *path, const json_t *body, long *status_out,
			     json_t **reply_out, char **cause)
{
	struct daemon_client__reply reply = {0};
	struct daemon_client__call call;
	char *text = NULL;
	json_error_t json_error;
	json_t *parsed;
	CURLcode code;
	int error = 0;

	*status_out = 0;
	if (reply_out != NULL)
		*reply_out = NULL;
	if ((error = daemon_client__call_open(&call, target, token, method, path, cause)) < 0)
		goto out;
	curl_easy_setopt(call.easy, CURLOPT_TIMEOUT, (long)DAEMON_CLIENT_TIMEOUT_SECONDS);
	curl_easy_setopt(call.easy, CURLOPT_WRITEFUNCTION, daemon_client__write);
	curl_easy_setopt(call.easy, CURLOPT_WRITEDATA, &reply);
	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
		if (text == NULL) {
			error = -EINVAL;
			*cause = kagent_strdup("the request body cannot be encoded as JSON");
			goto out;
		}
		call.headers = curl_slist_append(call.headers, "Content-Type: application/json");
		curl_easy_setopt(call.easy, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(call.easy, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
	} else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		curl_easy_setopt(call.easy, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(call.easy, CURLOPT_POSTFIELDSIZE, 0L);
	}
	/* No "Expect: 100-continue" round trip for a large body. */
	call.headers = curl_slist_append(call.headers, "Expect:");
	curl_easy_setopt(call.easy, CURLOPT_HTTPHEADER, call.headers);
	code = curl_easy_perform(call.easy);
	if (code != CURLE_OK) {
		error = daemon_client__failed(&call, code, target, method, path, reply.too_large,
					      cause);
		goto out;
	}
	curl_easy_getinfo(call.easy, CURLINFO_RESPONSE_CODE, status_out);
	if (reply.body.length == 0)
		goto out;
	parsed = json_loadb(reply.body.data, reply.body.length, JSON_DECODE_ANY, &json_error);
	if (parsed == NULL && *status_out >= 400)
		parsed = daemon_client__error_body(&reply.body);
	if (parsed == NULL) {
		error = -EPROTO;
		*cause = kagent_asprintf("%s %s at %s: the answer is not JSON: %s", method, path,
					 target, json_error.text);
		goto out;
	}
	if (reply_out != NULL)
		*reply_out = parsed;
	else
		json_decref(parsed);
out:
	daemon_client__call_clear(&call);
	kagent_buffer_free(&reply.body);
	free(text);
	return error;
}

/* ---- event streams ---- */

struct daemon_client__stream {
	CURL *easy;
	struct kagent_sse *sse;
	kagent_daemon_client_event_function function;
	void *data;
	const volatile sig_atomic_t *stop;
	struct daemon_client__reply error_body; /* the body of an answer that is not 200 */
	long status;				/* the answer's, once its head came */
	int result;				/* what the function returned to stop, or 0 */
	char *cause;				/* the parser's failure */
};

static int
daemon_client__stream_event(void *argument, const struct kagent_sse_event *event, char **cause)
{
	struct daemon_client__stream *stream = argument;

	(void)cause;
	stream->result = stream->function(event, stream->data);
	/* Any error stops the parser; the function's own value is returned to the caller. */
	return stream->result != 0 ? -ECANCELED : 0;
}

static size_t
daemon_client__stream_write(char *bytes, size_t size, size_t count, void *data)
{
	struct daemon_client__stream *stream = data;
	size_t length = size * count;

	if (stream->status == 0)
		curl_easy_getinfo(stream->easy, CURLINFO_RESPONSE_CODE, &stream->status);
	if (stream->status != 200)
		return daemon_client__write(bytes, size, count, &stream->error_body);
	if (kagent_sse_feed(stream->sse, bytes, length, &stream->cause) < 0)
		return CURL_WRITEFUNC_ERROR;
	return length;
}

/* libcurl asks this now and then, waiting included: a non-zero answer ends the transfer. */
static int
daemon_client__stream_progress(void *data, curl_off_t download_total, curl_off_t downloaded,
			       curl_off_t upload_total, curl_off_t uploaded)
{
	struct daemon_client__stream *stream = data;

	(void)download_total;
	(void)downloaded;
	(void)upload_total;
	(void)uploaded;
	return stream->stop != NULL && *stream->stop;
}

int
kagent_daemon_client_stream(const char *target, const char *token, const char *path,
			    kagent_daemon_client_event_function function, void *data,
			    const volatile sig_atomic_t *stop, long *status_out, json_t **reply_out,
			    char **cause)
{
	struct daemon_client__stream stream = {.function = function, .data = data, .stop = stop};
	struct daemon_client__call call;
	CURLcode code;
	int error;

	*status_out = 0;
	*reply_out = NULL;
	if ((error = daemon_client__call_open(&call, target, token, "GET", path, cause)) < 0)
		goto out;
	stream.easy = call.easy;
	stream.sse = kagent_sse_create(0, 0, daemon_client__stream_event, &stream);
	call.headers = curl_slist_append(call.headers, "Accept: text/event-stream");
	curl_easy_setopt(call.easy, CURLOPT_HTTPHEADER, call.headers);
	/* No overall timeout: a session's stream may be quiet for as long as a model thinks. */
	curl_easy_setopt(call.easy, CURLOPT_WRITEFUNCTION, daemon_client__stream_write);
	curl_easy_setopt(call.easy, CURLOPT_WRITEDATA, &stream);
	curl_easy_setopt(call.easy, CURLOPT_XFERINFOFUNCTION, daemon_client__stream_progress);
	curl_easy_setopt(call.easy, CURLOPT_XFERINFODATA, &stream);
	curl_easy_setopt(call.easy, CURLOPT_NOPROGRESS, 0L);
	code = curl_easy_perform(call.easy);
	if (stream.result != 0) {
		error = stream.result;
		goto out;
	}
	if (code == CURLE_ABORTED_BY_CALLBACK) {
		error = -EINTR;
		*cause = kagent_strdup("interrupted");
		goto out;
	}
	if (stream.cause != NULL) {
		error = -EPROTO;
		*cause = kagent_asprintf("GET %s at %s: %s", path, target, stream.cause);
		goto out;
	}
	if (code != CURLE_OK) {
		error = daemon_client__failed(&call, code, target, "GET", path,
					      stream.error_body.too_large, cause);
		goto out;
	}
	curl_easy_getinfo(call.easy, CURLINFO_RESPONSE_CODE, status_out);
	if (*status_out != 200)
		*reply_out = daemon_client__error_body(&stream.error_body.body);
out:
	if (stream.sse != NULL)
		kagent_sse_free(stream.sse);
	daemon_client__call_clear(&call);
	kagent_buffer_free(&stream.error_body.body);
	free(stream.cause);
	return error;
}
