/*
 * A blocking request to kagentd (see include/kagent/daemon/daemon_client.h): libcurl's easy
 * interface with CURLOPT_UNIX_SOCKET_PATH for the socket, or the URL and a bearer token for TCP.
 */
#include "kagent/daemon/daemon_client.h"
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"

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

int
kagent_daemon_client_request(const char *target, const char *token, const char *method,
			     const char *path, const json_t *body, long *status_out,
			     json_t **reply_out, char **cause)
{
	struct daemon_client__reply reply = {0};
	struct curl_slist *headers = NULL;
	char error_text[CURL_ERROR_SIZE] = "";
	int over_tcp = daemon_client__is_url(target);
	char *url = NULL, *text = NULL, *authorization = NULL;
	struct stat info;
	json_error_t json_error;
	json_t *parsed;
	CURL *easy = NULL;
	CURLcode code;
	int error = 0;

	*status_out = 0;
	if (reply_out != NULL)
		*reply_out = NULL;
	pthread_once(&daemon_client__once, daemon_client__global_init);
	if (daemon_client__global_status != CURLE_OK) {
		error = -EIO;
		*cause = kagent_asprintf("cannot start libcurl: %s",
					 curl_easy_strerror(daemon_client__global_status));
		goto out;
	}
	if (!over_tcp && stat(target, &info) != 0) {
		error = -ECONNREFUSED;
		*cause = kagent_asprintf("no kagentd at %s: start it with `kagent daemon`", target);
		goto out;
	}
	easy = curl_easy_init();
	if (easy == NULL) {
		error = -ENOMEM;
		*cause = kagent_strdup("cannot make a libcurl handle");
		goto out;
	}
	if (over_tcp) {
		url = kagent_asprintf("%s%s", target, path);
		if (token != NULL) {
			authorization = kagent_asprintf("Authorization: Bearer %s", token);
			headers = curl_slist_append(headers, authorization);
		}
	} else {
		/* The host part of the URL is ignored over a Unix socket. */
		url = kagent_asprintf("http://localhost%s", path);
		curl_easy_setopt(easy, CURLOPT_UNIX_SOCKET_PATH, target);
	}
	curl_easy_setopt(easy, CURLOPT_URL, url);
	curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error_text);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT, (long)DAEMON_CLIENT_TIMEOUT_SECONDS);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)DAEMON_CLIENT_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, daemon_client__write);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, &reply);
	/* The token must not follow a redirect elsewhere; kagentd never redirects anyway. */
	curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
		if (text == NULL) {
			error = -EINVAL;
			*cause = kagent_strdup("the request body cannot be encoded as JSON");
			goto out;
		}
		headers = curl_slist_append(headers, "Content-Type: application/json");
		curl_easy_setopt(easy, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
	} else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		curl_easy_setopt(easy, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, 0L);
	}
	/* No "Expect: 100-continue" round trip for a large body. */
	headers = curl_slist_append(headers, "Expect:");
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
	code = curl_easy_perform(easy);
	if (code == CURLE_COULDNT_CONNECT && !over_tcp) {
		error = -ECONNREFUSED;
		*cause = kagent_asprintf("no kagentd at %s: start it with `kagent daemon`", target);
		goto out;
	}
	if (code == CURLE_COULDNT_CONNECT) {
		error = -ECONNREFUSED;
		*cause = kagent_asprintf("no kagentd at %s: %s", target,
					 error_text[0] ? error_text : curl_easy_strerror(code));
		goto out;
	}
	if (code != CURLE_OK) {
		error = code == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
		*cause = kagent_asprintf(
		    "%s %s at %s: %s", method, path, target,
		    reply.too_large ? "the answer is over 64 MiB"
				    : (error_text[0] ? error_text : curl_easy_strerror(code)));
		goto out;
	}
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, status_out);
	if (reply.body.length == 0)
		goto out;
	parsed = json_loadb(reply.body.data, reply.body.length, JSON_DECODE_ANY, &json_error);
	if (parsed == NULL && *status_out >= 400)
		parsed = json_pack("{s:s%}", "error", reply.body.data, reply.body.length);
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
	if (easy != NULL)
		curl_easy_cleanup(easy);
	curl_slist_free_all(headers);
	kagent_buffer_free(&reply.body);
	free(url);
	free(text);
	free(authorization);
	return error;
}
