/*
 * Operands to trace paths for `kagent export` and `kagent replay` (run_source.h).
 */
#include "run_source.h"

#include "daemon_call.h"

#include "kagent/base/alloc.h"
#include "kagent/base/paths.h"
#include "kagent/daemon/daemon_client.h"
#include "kagent/daemon/store.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The longest batch or session id taken to the store; anything longer is no id. */
#define RUN_SOURCE_ID_MAX 64

struct kagent_run_source {
	const struct kagent_daemon_call *call;
	const char *store_url; /* --store, NULL: the default */
	struct kagent_store *store;
};

struct kagent_run_source *
kagent_run_source_create(const struct kagent_daemon_call *call)
{
	struct kagent_run_source *source = kagent_calloc(1, sizeof *source);

	source->call = call;
	source->store_url = kagent_daemon_call_value(call, "store");
	return source;
}

void
kagent_run_source_free(struct kagent_run_source *source)
{
	if (source == NULL)
		return;
	kagent_store_close(source->store);
	free(source);
}

/* Opens the store once. The default one must exist: reading runs never creates a store. */
static int
run_source__store(struct kagent_run_source *source, char **cause)
{
	struct stat info;
	char *url = NULL;
	int status;

	if (source->store != NULL)
		return 0;
	if (source->store_url != NULL)
		return kagent_store_open(source->store_url, &source->store, cause);
	kagent_paths_store_url(&url, cause);
	if (stat(url + strlen("sqlite:"), &info) != 0) {
		*cause = kagent_asprintf("no kagentd store at %s (kagentd has not run as this user "
					 "here); name one with --store URL",
					 url + strlen("sqlite:"));
		free(url);
		return -ENOENT;
	}
	status = kagent_store_open(url, &source->store, cause);
	free(url);
	return status;
}

static int
run_source__compare(const void *left, const void *right)
{
	return strcmp(*(char *const *)left, *(char *const *)right);
}

/* Appends folder's *.jsonl files, sorted (run ids sort by time). Returns how many. */
static size_t
run_source__traces_in(const char *folder, json_t *traces)
{
	DIR *directory = opendir(folder);
	struct dirent *entry;
	char **names = NULL;
	size_t count = 0, capacity = 0, index;

	if (directory == NULL)
		return 0;
	while ((entry = readdir(directory)) != NULL) {
		size_t length = strlen(entry->d_name);

		if (length <= strlen(".jsonl") ||
		    strcmp(entry->d_name + length - strlen(".jsonl"), ".jsonl") != 0)
			continue;
		if (count == capacity) {
			capacity = capacity ? 2 * capacity : 16;
			names = kagent_realloc(names, capacity * sizeof *names);
		}
		names[count++] = kagent_asprintf("%s/%s", folder, entry->d_name);
	}
	closedir(directory);
	qsort(names, count, sizeof *names, run_source__compare);
	for (index = 0; index < count; index++) {
		json_array_append_new(traces, json_string(names[index]));
		free(names[index]);
	}
	free(names);
	return count;
}

/* The .jsonl files of <folder>/traces, else of each <folder>/<problem>/traces. */
static size_t
run_source__folder(const char *folder, json_t *traces)
{
	char *path = kagent_asprintf("%s/traces", folder);
	size_t count = 0, index, found = 0;
	struct dirent *entry;
	char **names = NULL;
	DIR *directory;
	struct stat info;

	if (stat(path, &info) == 0 && S_ISDIR(info.st_mode)) {
		found = run_source__traces_in(path, traces);
		free(path);
		return found;
	}
	free(path);
	directory = opendir(folder);
	if (directory == NULL)
		return 0;
	while ((entry = readdir(directory)) != NULL) {
		if (entry->d_name[0] == '.')
			continue;
		names = kagent_realloc(names, (count + 1) * sizeof *names);
		names[count++] = kagent_asprintf("%s/%s/traces", folder, entry->d_name);
	}
	closedir(directory);
	qsort(names, count, sizeof *names, run_source__compare);
	for (index = 0; index < count; index++) {
		found += run_source__traces_in(names[index], traces);
		free(names[index]);
	}
	free(names);
	return found;
}

/* 1 for text that can be a batch or session id: letters, digits and dashes. */
static int
run_source__looks_like_id(const char *text)
{
	size_t length = strlen(text);

	return length > 0 && length <= RUN_SOURCE_ID_MAX &&
	       strspn(text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") ==
		   length;
}

/* Ids go to the daemon's API when --socket or $KAGENT_SOCKET names it, or when no --store is
 * given and a daemon answers on the default socket; else to the store. */
static int
run_source__use_api(const struct kagent_run_source *source)
{
	const char *socket = kagent_daemon_call_value(source->call, "socket");
	const char *environment = getenv("KAGENT_SOCKET");
	char *path = NULL, *cause = NULL;
	int listening;

	if (source->store_url != NULL)
		return 0;
	if ((socket != NULL && socket[0] != '\0') ||
	    (environment != NULL && environment[0] != '\0'))
		return 1;
	if (kagent_paths_daemon_socket(&path, &cause) < 0) {
		free(cause);
		return 0;
	}
	listening = kagent_paths_socket_listening(path);
	free(path);
	return listening;
}

/* GET /v1/COLLECTION/ID from the daemon: the store's object, as the API shows it. */
static int
run_source__ask_daemon(struct kagent_run_source *source, const char *collection, const char *id,
		       json_t **object_out, char **cause)
{
	char *target = NULL, *token = NULL, *path = kagent_daemon_call_path(collection, id, "");
	json_t *reply = NULL;
	long http_status = 0;
	int status = kagent_daemon_call_connection(source->call, &target, &token, cause);

	if (status == 0)
		status = kagent_daemon_client_request(target, token, "GET", path, NULL,
						      &http_status, &reply, cause);
	if (status == 0 && (http_status < 200 || http_status >= 300 || !json_is_object(reply))) {
		*cause = kagent_asprintf("kagentd at %s answered GET %s with %ld: %s", target, path,
					 http_status,
					 json_string_value(json_object_get(reply, "error"))
					     ? json_string_value(json_object_get(reply, "error"))
					     : "no JSON object");
		status = http_status == 404 ? -ENOENT : -EPROTO;
	}
	if (status == 0) {
		*object_out = reply;
		reply = NULL;
	}
	json_decref(reply);
	free(target);
	free(token);
	free(path);
	return status;
}

/* The batch (collection "batches") or session ("sessions") id, from the daemon or the store. */
static int
run_source__lookup(struct kagent_run_source *source, const char *collection, const char *id,
		   json_t **object_out, char **cause)
{
	int status;

	if (run_source__use_api(source))
		return run_source__ask_daemon(source, collection, id, object_out, cause);
	status = run_source__store(source, cause);
	if (status == 0 && strcmp(collection, "batches") == 0)
		status = kagent_store_batch_get(source->store, id, object_out, cause);
	else if (status == 0)
		status = kagent_store_session_get(source->store, id, object_out, cause);
	return status;
}

static int
run_source__batch(struct kagent_run_source *source, const char *id, json_t *traces,
		  int *skipped_out, char **cause)
{
	json_t *batch = NULL, *session;
	size_t index;
	int status = run_source__lookup(source, "batches", id, &batch, cause);

	if (status < 0)
		return status;
	json_array_foreach(json_object_get(batch, "sessions"), index, session)
	{
		const char *path = json_string_value(json_object_get(session, "trace_path"));

		if (path != NULL)
			json_array_append_new(traces, json_string(path));
		else
			(*skipped_out)++;
	}
	json_decref(batch);
	return 0;
}

static int
run_source__session(struct kagent_run_source *source, const char *id, json_t *traces, char **cause)
{
	json_t *session = NULL;
	const char *path;
	int status = run_source__lookup(source, "sessions", id, &session, cause);

	if (status < 0)
		return status;
	path = json_string_value(json_object_get(session, "trace_path"));
	if (path != NULL) {
		json_array_append_new(traces, json_string(path));
	} else {
		*cause = kagent_asprintf("session %s has no trace: it is %s and never started", id,
					 json_string_value(json_object_get(session, "state"))
					     ? json_string_value(json_object_get(session, "state"))
					     : "unknown");
		status = -ENOENT;
	}
	json_decref(session);
	return status;
}

int
kagent_run_source_collect(struct kagent_run_source *source, const char *operand, json_t *traces,
			  int *skipped_out, char **cause)
{
	struct stat info;

	if (stat(operand, &info) == 0 && S_ISDIR(info.st_mode)) {
		if (run_source__folder(operand, traces) > 0)
			return 0;
		*cause = kagent_asprintf("%s holds no trace (no .jsonl file in traces/ or "
					 "*/traces/): not a run folder",
					 operand);
		return -ENOENT;
	}
	if (stat(operand, &info) == 0) {
		json_array_append_new(traces, json_string(operand));
		return 0;
	}
	if (!run_source__looks_like_id(operand)) {
		*cause = kagent_asprintf("%s: no such file or folder", operand);
		return -ENOENT;
	}
	if (strncmp(operand, "b-", 2) == 0)
		return run_source__batch(source, operand, traces, skipped_out, cause);
	return run_source__session(source, operand, traces, cause);
}
