/*
 * HTTP requests on the libuv loop through libcurl's multi interface: no thread
 * per request, so one process can stream replies for many sessions at once.
 * One call is one attempt; retries are the caller's (kagent/retry.h decides).
 * There is no total timeout, because a long generation is not a fault: a
 * request that receives no byte for stall_seconds is aborted as stalled.
 */
#ifndef KAGENT_HTTP_CLIENT_H
#define KAGENT_HTTP_CLIENT_H

#include <stddef.h>
#include <uv.h>

struct kagent_http_client;
struct kagent_http_request;

enum kagent_http_failure {
	KAGENT_HTTP_OK,	     /* a complete response arrived (any status) */
	KAGENT_HTTP_CONNECT, /* could not connect or resolve; nothing was sent */
	KAGENT_HTTP_STALLED, /* no byte for stall_seconds */
	KAGENT_HTTP_CUT,     /* the connection ended in the middle of the response */
	KAGENT_HTTP_ABORTED, /* the caller's body callback returned non-zero, or cancel */
	KAGENT_HTTP_OTHER,   /* any other transport error (TLS, protocol) */
};

struct kagent_http_response_head {
	long status;
	/* A header's value (case-insensitive name), or NULL. Valid during the callback only. */
	const char *(*header)(const struct kagent_http_response_head *head, const char *name);
	void *opaque; /* for header() */
};

struct kagent_http_result {
	enum kagent_http_failure failure;
	long status;	     /* 0 when no response head came */
	char *error_message; /* NULL when failure is KAGENT_HTTP_OK */
	/* Copied from the response head for the retry decision; NULL when absent. */
	char *retry_after;    /* Retry-After */
	char *retry_after_ms; /* retry-after-ms */
	char *should_retry;   /* x-should-retry */
	/* The body when the status is not 2xx (capped at 64 KiB), for error reporting; else NULL.
	 */
	char *error_body;
	double seconds;		  /* from start to done */
	unsigned long long bytes; /* body bytes received */
};

struct kagent_http_request_options {
	const char *method; /* "POST" (default when NULL) or "GET" */
	const char *url;
	const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
	const char *body;	    /* may be NULL; copied */
	size_t body_length;
	/* Instead of body: a body of body_length bytes read as it is sent (until on_done), so that
	 * the caller need not hold it as one text. Copies up to size bytes from offset on into
	 * buffer and returns how many (as many as there are, up to size). */
	size_t (*read_body)(size_t offset, char *buffer, size_t size, void *data);
	long connect_timeout_ms; /* 0: 10 s */
	long stall_seconds;	 /* 0: 120 s */
	/* Called once when the head of a 2xx response arrives; may be NULL. */
	void (*on_head)(const struct kagent_http_response_head *head, void *data);
	/* Body bytes of a 2xx response as they arrive. Return 0, or non-zero to abort the request.
	 */
	int (*on_body)(const char *bytes, size_t size, void *data);
	/* Called exactly once, from the loop, never from start. result is borrowed. */
	void (*on_done)(const struct kagent_http_result *result, void *data);
	void *data;
};

/* Returns 0 or a negative errno with *cause set. */
int kagent_http_client_create(uv_loop_t *loop, struct kagent_http_client **client_out,
			      char **cause);
/* Cancels what is in flight (each gets on_done with KAGENT_HTTP_ABORTED before this returns, or,
 * when called from on_head or on_body, as soon as libcurl returns) and frees the client once its
 * handles are closed; the loop must run for that. */
void kagent_http_client_free(struct kagent_http_client *client);
/* The loop the client runs on (for the timers of callers that retry). */
uv_loop_t *kagent_http_client_loop(struct kagent_http_client *client);
/* Starts a request; NULL on a bad option (*cause set). The handle is valid until on_done. */
struct kagent_http_request *
kagent_http_request_start(struct kagent_http_client *client,
			  const struct kagent_http_request_options *options, char **cause);
/* on_done follows with KAGENT_HTTP_ABORTED, from the loop. */
void kagent_http_request_cancel(struct kagent_http_request *request);

const char *kagent_http_failure_name(enum kagent_http_failure failure);

#endif
