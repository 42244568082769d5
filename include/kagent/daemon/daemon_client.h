/*
 * The command line's side of kagentd's API: one blocking HTTP request (libcurl's easy
 * interface) to the daemon's Unix socket, or to its TCP address with the bearer token, and the
 * JSON answer. Blocking is right here: the command line waits for the answer and has no loop.
 */
#ifndef KAGENT_DAEMON_CLIENT_H
#define KAGENT_DAEMON_CLIENT_H

#include <jansson.h>

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

#endif
