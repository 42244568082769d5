/*
 * What the commands that talk to kagentd (batch, status, cancel, report, watch) share: the options
 * that say where the daemon is (--socket, --token-file) and --json, a parser that collects
 * every option's value before the command acts, and one request with the daemon's answer
 * turned into the command's exit status and messages.
 *
 * Exit statuses: 0 done; 1 the daemon answered with an error ({"error": ...}, 4xx or 5xx: an
 * unknown id, a batch already finished); 2 no result at all (a usage error, no daemon at the
 * socket, an answer that is not kagentd's).
 */
#ifndef KAGENT_DAEMON_CALL_H
#define KAGENT_DAEMON_CALL_H

#include "kagent/cli/command.h"
#include "kagent/daemon/daemon_client.h"

#include <jansson.h>

#define KAGENT_DAEMON_CALL_EXIT_REFUSED 1

/* The entries every daemon command's option table carries (command.h's struct, in order):
 * where the daemon is, and --json for one JSON object (watch has a --json of its own). */
/* clang-format off */
#define KAGENT_DAEMON_CALL_TARGET_OPTIONS                                                          \
	{"socket", 0, "SOCKET", "kagentd's Unix socket, or http://HOST:PORT for its TCP address", \
		"$KAGENT_SOCKET, else $KAGENT_DAEMON_SOCKET, else kagentd.sock in "               \
		"$XDG_RUNTIME_DIR/kagent or /tmp/kagent-UID", NULL},                              \
	{"token-file", 0, "FILE", "the file holding the bearer token (over TCP only)",           \
		"$KAGENT_TOKEN", NULL}
#define KAGENT_DAEMON_CALL_OPTIONS                                                                 \
	KAGENT_DAEMON_CALL_TARGET_OPTIONS,                                                         \
	{"json", 0, NULL, "print exactly one JSON object (an error object on failure)", NULL,    \
		NULL}
/* clang-format on */

struct kagent_daemon_call {
	const struct kagent_command *command;
	/* Each option's value by its index in command->options: optarg, "" for a given switch,
	 * NULL when not given. */
	const char *values[KAGENT_COMMAND_MAX_OPTIONS];
	/* argv[first_operand..argc - 1] are the operands. */
	int first_operand;
	int json;
};

/*
 * Parses argv (argv[0] is the command's name) with command's table. Returns 1 when the
 * command goes on, 0 when it is over: --help printed (*status_out 0) or a usage error
 * reported (*status_out 2).
 */
int kagent_daemon_call_parse(struct kagent_daemon_call *call, const struct kagent_command *command,
			     int argc, char **argv, int *status_out);
/* The value of the option named name (without "--"), as in call->values. */
const char *kagent_daemon_call_value(const struct kagent_daemon_call *call, const char *name);

/*
 * Sends method path (body may be NULL) to the daemon that --socket, $KAGENT_SOCKET or the
 * default names. Returns 0 with the answer's JSON in *reply_out (a 2xx answer), or the exit
 * status with the failure reported (stderr, and the error object with --json): 1 when the
 * daemon answered an error, whose text is *refusal_out's when refusal_out is not NULL and
 * the caller reports it itself (*http_status_out, may be NULL, holds the status), else 2.
 */
int kagent_daemon_call_request(struct kagent_daemon_call *call, const char *method,
			       const char *path, const json_t *body, json_t **reply_out,
			       long *http_status_out, char **refusal_out);

/*
 * Reads GET path of the daemon as an event stream, calling function for each event
 * (kagent_daemon_client_stream). Returns 0 when the stream ended: the daemon ended it, the
 * function stopped it (non-zero), or *stop was set; else the exit status with the failure
 * reported, as kagent_daemon_call_request (1 for an error answer such as 404).
 */
int kagent_daemon_call_stream(struct kagent_daemon_call *call, const char *path,
			      kagent_daemon_client_event_function function, void *data,
			      const volatile sig_atomic_t *stop);

/*
 * Where the daemon is and its token, as kagent_daemon_call_request finds them, for a caller
 * that sends its requests itself (kagent_daemon_client_request) and reports their failures in
 * its own words (kagent export and replay). *token_out is NULL without one; the caller frees
 * both. Returns 0 or a negative errno with *cause.
 */
int kagent_daemon_call_connection(const struct kagent_daemon_call *call, char **target_out,
				  char **token_out, char **cause);

/* The --json error kind of an HTTP error status ("not_found", "conflict"...), so that a script
 * need not parse the message. */
const char *kagent_daemon_call_error_kind(long status);
/* A failure reported as kagent_command_fail does, with the given exit status. */
int kagent_daemon_call_fail(const struct kagent_daemon_call *call, int status, const char *kind,
			    const char *message);
/* The one JSON object of --json on stdout. */
void kagent_daemon_call_print_json(const json_t *object);

/* "/v1/COLLECTION/ID" + suffix, the id percent-encoded: an id typed by hand must not change the
 * path. The caller frees it. */
char *kagent_daemon_call_path(const char *collection, const char *id, const char *suffix);
/* path + "?NAME=VALUE", the value percent-encoded. The caller frees it. */
char *kagent_daemon_call_query_path(const char *path, const char *name, const char *value);
/* "1.23x", or "-" for null or no number (a speedup the report does not credit). */
void kagent_daemon_call_format_speedup(char *buffer, size_t size, const json_t *value);

#endif
