/*
 * The command line's side of kagentd's API: one blocking HTTP request (libcurl's easy
 * interface) to the daemon's Unix socket, or to its TCP address with the bearer token, and the
 * JSON answer. Blocking is right here: the command line waits for the answer and has no loop.
 */
#ifndef KAGENT_DAEMON_CLIENT_H
#define KAGENT_DAEMON_CLIENT_H

#include "kagent/llm/sse.h"

#include <jansson.h>
#include <signal.h>

/*
 * Sends method path (with its query string) to the daemon at target: a Unix socket path, or
 * "http://HOST:PORT" with token (NULL over the socket). body may be NULL (no body).
 * Returns 0 once an answer came, whatever its status: *status_out holds it and *reply_out
 * (may be NULL) its JSON body, or NULL when the body was empty; an error body that is not JSON
 * becomes {"error": "<the text>"}. Returns a negative errno with *cause set when no answer
 * came: -ECONNREFUSED with "no kagentd at PATH: start it with `kagent daemon`" when no daemon
 * listens there.
 */
int kagent_daemon_client_request(const char *target, const char *token, const char *method,
				 const char *path, const json_t *body, long *status_out,
				 json_t **reply_out, char **cause);

/* Called for each event of a stream (borrowed: valid during the call); 0 to go on, anything
 * else to stop the stream (returned by kagent_daemon_client_stream as is). */
typedef int (*kagent_daemon_client_event_function)(const struct kagent_sse_event *event,
						   void *data);

/*
 * GET path from the daemon at target (as kagent_daemon_client_request), read as an event
 * stream (Server-Sent Events) as it comes: function runs for each event until the daemon ends
 * the stream (0, *status_out 200), function returns non-zero (that value), or *stop (may be
 * NULL; a signal handler sets it) becomes non-zero (-EINTR; looked at about once a second and
 * whenever data comes). No overall timeout: a stream may stay quiet for long. An answer other
 * than 200 returns 0 with *status_out and its JSON body in *reply_out (the caller releases it),
 * as kagent_daemon_client_request does. Other failures: a negative errno with *cause set.
 */
int kagent_daemon_client_stream(const char *target, const char *token, const char *path,
				kagent_daemon_client_event_function function, void *data,
				const volatile sig_atomic_t *stop, long *status_out,
				json_t **reply_out, char **cause);

#endif
