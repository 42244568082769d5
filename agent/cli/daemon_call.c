/*
 * The client side shared by the daemon commands (see daemon_call.h): options, where the daemon
 * is, the token, one request through kagent_daemon_client_request, and the exit statuses.
 */
#include "daemon_call.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/daemon/daemon_client.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A token is one short line; a larger file is not a token file. */
#define DAEMON_CALL_TOKEN_CAP 4096

int
kagent_daemon_call_fail(const struct kagent_daemon_call *call, int status, const char *kind,
			const char *message)
{
	kagent_command_fail(call->command, call->json, kind, message);
	return status;
}

void
kagent_daemon_call_print_json(const json_t *object)
{
	json_dumpf(object, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
}

int
kagent_daemon_call_parse(struct kagent_daemon_call *call, const struct kagent_command *command,
			 int argc, char **argv, int *status_out)
{
	struct kagent_command_parser parser;
	char *message = NULL;
	int option, index;

	memset(call, 0, sizeof *call);
	call->command = command;
	/* --json decides how errors are printed, usage errors included: look for it first. */
	for (index = 1; index < argc; index++)
		call->json = call->json || strcmp(argv[index], "--json") == 0;
	*status_out = 0;
	kagent_command_parser_init(&parser, command);
	while ((option = kagent_command_parser_next(&parser, argc, argv)) != KAGENT_COMMAND_END) {
		switch (option) {
		case KAGENT_COMMAND_HELP:
			kagent_command_print_help(command, stdout);
			return 0;
		case KAGENT_COMMAND_UNKNOWN:
		case KAGENT_COMMAND_MISSING_VALUE:
			message =
			    kagent_asprintf(option == KAGENT_COMMAND_UNKNOWN ? "unknown option %s"
									     : "%s needs a value",
					    argv[optind - 1]);
			*status_out = kagent_command_fail(command, call->json, "usage", message);
			free(message);
			return 0;
		default:
			call->values[option] = optarg != NULL ? optarg : "";
		}
	}
	call->first_operand = optind;
	return 1;
}

const char *
kagent_daemon_call_value(const struct kagent_daemon_call *call, const char *name)
{
	const struct kagent_command_option *option =
	    kagent_command_option_find(call->command, name);

	return option != NULL ? call->values[option - call->command->options] : NULL;
}

/* --socket, else $KAGENT_SOCKET (the name users were told), else kagent_paths_daemon_socket
 * ($KAGENT_DAEMON_SOCKET, the name the daemon reads, else the default). */
static int
daemon_call__target(const struct kagent_daemon_call *call, char **target_out, char **cause)
{
	const char *value = kagent_daemon_call_value(call, "socket");

	if (value == NULL || value[0] == '\0')
		value = getenv("KAGENT_SOCKET");
	if (value != NULL && value[0] != '\0') {
		*target_out = kagent_strdup(value);
		return 0;
	}
	return kagent_paths_daemon_socket(target_out, cause);
}

/* The bearer token for TCP: --token-file's first line, else $KAGENT_TOKEN; NULL: none. */
static int
daemon_call__token(const struct kagent_daemon_call *call, char **token_out, char **cause)
{
	const char *path = kagent_daemon_call_value(call, "token-file");
	char *data = NULL, *reason = NULL;
	size_t size = 0, length;
	int error;

	*token_out = NULL;
	if (path == NULL) {
		const char *value = getenv("KAGENT_TOKEN");

		if (value != NULL && value[0] != '\0')
			*token_out = kagent_strdup(value);
		return 0;
	}
	error = kagent_fileio_read(path, DAEMON_CALL_TOKEN_CAP, &data, &size, &reason);
	if (error < 0) {
		*cause = kagent_asprintf("--token-file: %s", reason);
		free(reason);
		return error;
	}
	/* Token files are written by editors and `echo`: the line's end is not the token's. */
	length = strcspn(data, "\r\n");
	while (length > 0 && isspace((unsigned char)data[length - 1]))
		length--;
	if (length == 0) {
		*cause = kagent_asprintf("--token-file: %s holds no token", path);
		free(data);
		return -EINVAL;
	}
	*token_out = kagent_strndup(data, length);
	free(data);
	return 0;
}

int
kagent_daemon_call_connection(const struct kagent_daemon_call *call, char **target_out,
			      char **token_out, char **cause)
{
	int status = daemon_call__target(call, target_out, cause);

	*token_out = NULL;
	if (status == 0 && (status = daemon_call__token(call, token_out, cause)) < 0) {
		free(*target_out);
		*target_out = NULL;
	}
	return status;
}

const char *
kagent_daemon_call_error_kind(long status)
{
	switch (status) {
	case 400:
		return "bad_request";
	case 401:
		return "unauthorized";
	case 404:
		return "not_found";
	case 409:
		return "conflict";
	case 413:
		return "too_large";
	default:
		return "daemon";
	}
}

/* Where the daemon is and its token; the exit status with the failure reported, or 0. */
static int
daemon_call__where(struct kagent_daemon_call *call, char **target_out, char **token_out)
{
	char *cause = NULL;
	int status = 0;

	*target_out = *token_out = NULL;
	if (daemon_call__target(call, target_out, &cause) < 0)
		status =
		    kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "no_daemon", cause);
	else if (daemon_call__token(call, token_out, &cause) < 0)
		status = kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "token", cause);
	free(cause);
	return status;
}

/* A client failure (no answer): reported, with its exit status. */
static int
daemon_call__no_answer(struct kagent_daemon_call *call, int error, const char *cause)
{
	return kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR,
				       error == -ECONNREFUSED ? "no_daemon" : "daemon", cause);
}

/* An error answer: its message in *refusal_out when asked for, else reported. Returns 1. */
static int
daemon_call__refused(struct kagent_daemon_call *call, const char *method, const char *path,
		     long http_status, const json_t *reply, char **refusal_out)
{
	const char *text = json_string_value(json_object_get(reply, "error"));
	char *message = text != NULL ? kagent_strdup(text)
				     : kagent_asprintf("%s %s: kagentd answered %ld", method, path,
						       http_status);

	if (refusal_out != NULL) {
		*refusal_out = message;
		return KAGENT_DAEMON_CALL_EXIT_REFUSED;
	}
	kagent_daemon_call_fail(call, KAGENT_DAEMON_CALL_EXIT_REFUSED,
				kagent_daemon_call_error_kind(http_status), message);
	free(message);
	return KAGENT_DAEMON_CALL_EXIT_REFUSED;
}

int
kagent_daemon_call_request(struct kagent_daemon_call *call, const char *method, const char *path,
			   const json_t *body, json_t **reply_out, long *http_status_out,
			   char **refusal_out)
{
	char *target = NULL, *token = NULL, *cause = NULL, *message = NULL;
	json_t *reply = NULL;
	long http_status = 0;
	int status = 0, error;

	*reply_out = NULL;
	if (refusal_out != NULL)
		*refusal_out = NULL;
	if ((status = daemon_call__where(call, &target, &token)) != 0)
		goto out;
	error = kagent_daemon_client_request(target, token, method, path, body, &http_status,
					     &reply, &cause);
	if (error < 0) {
		status = daemon_call__no_answer(call, error, cause);
		goto out;
	}
	if (http_status_out != NULL)
		*http_status_out = http_status;
	if (http_status >= 200 && http_status < 300 && json_is_object(reply)) {
		*reply_out = reply;
		reply = NULL;
		goto out;
	}
	if (http_status >= 200 && http_status < 300) {
		message =
		    kagent_asprintf("%s %s: kagentd's answer is not a JSON object", method, path);
		status =
		    kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "daemon", message);
		goto out;
	}
	status = daemon_call__refused(call, method, path, http_status, reply, refusal_out);
out:
	json_decref(reply);
	free(target);
	free(token);
	free(cause);
	free(message);
	return status;
}

int
kagent_daemon_call_stream(struct kagent_daemon_call *call, const char *path,
			  kagent_daemon_client_event_function function, void *data,
			  const volatile sig_atomic_t *stop)
{
	char *target = NULL, *token = NULL, *cause = NULL;
	json_t *reply = NULL;
	long http_status = 0;
	int status, error;

	if ((status = daemon_call__where(call, &target, &token)) != 0)
		goto out;
	error = kagent_daemon_client_stream(target, token, path, function, data, stop, &http_status,
					    &reply, &cause);
	/* Stopped by the function or by a signal: the caller knows why. */
	if (error == -EINTR || error > 0)
		goto out;
	if (error < 0) {
		status = daemon_call__no_answer(call, error, cause);
		goto out;
	}
	if (http_status != 200)
		status = daemon_call__refused(call, "GET", path, http_status, reply, NULL);
out:
	json_decref(reply);
	free(target);
	free(token);
	free(cause);
	return status;
}

/* text percent-encoded (unreserved characters kept): an id typed by hand cannot change a path. */
static void
daemon_call__append_encoded(struct kagent_buffer *path, const char *text)
{
	const char *byte;

	for (byte = text; *byte != '\0'; byte++) {
		if (isalnum((unsigned char)*byte) || strchr("-._~", *byte) != NULL)
			kagent_buffer_append(path, byte, 1);
		else
			kagent_buffer_appendf(path, "%%%02X", (unsigned char)*byte);
	}
}

char *
kagent_daemon_call_path(const char *collection, const char *id, const char *suffix)
{
	struct kagent_buffer path = {0};

	kagent_buffer_appendf(&path, "/v1/%s/", collection);
	daemon_call__append_encoded(&path, id);
	kagent_buffer_append_string(&path, suffix);
	return kagent_buffer_take(&path);
}

char *
kagent_daemon_call_query_path(const char *path, const char *name, const char *value)
{
	struct kagent_buffer text = {0};

	kagent_buffer_appendf(&text, "%s?%s=", path, name);
	daemon_call__append_encoded(&text, value);
	return kagent_buffer_take(&text);
}

void
kagent_daemon_call_format_speedup(char *buffer, size_t size, const json_t *value)
{
	if (json_is_number(value))
		snprintf(buffer, size, "%.2fx", json_number_value(value));
	else
		snprintf(buffer, size, "-");
}
