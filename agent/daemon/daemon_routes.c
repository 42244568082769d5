/*
 * kagentd's API (docs/daemon-api.md, docs/openapi.yaml): the route table and its handlers.
 * A handler checks what it can on the loop, runs its store calls (and any file system scan)
 * on the thread pool through kagent_store_submit, and answers from the loop afterwards,
 * unless the client left meanwhile (on_gone). Store errors map to statuses: -ENOENT 404,
 * -EALREADY 409, -EINVAL 400, anything else 500.
 */
#include "daemon_internal.h"

#include "kagent/base/alloc.h"
#include "kagent/daemon/daemon_routes.h"
#include "kagent/daemon/http_server.h"
#include "kagent/daemon/report.h"
#include "kagent/daemon/viewer.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A batch holds at most this many problems (KernelBench has 250): a folder scan stops there. */
#define ROUTES_PROBLEM_CAP 10000
/* How deep a scan goes under a level folder. */
#define ROUTES_SCAN_DEPTH 4

/* One request on its way through the thread pool. */
struct routes__call {
	struct kagent_daemon *daemon;
	struct kagent_http_request *request; /* NULL once the client left */
	char *id;			     /* the {id} of the path */
	json_t *body;			     /* the request's JSON, kept for the work */
	json_t *result;			     /* what the work found */
	json_t *live; /* session id -> its live view, copied on the loop for the work */
	int running;  /* a cancelled session runs here: interrupt it */
	int created;  /* answer 201 */
	/* A file of the web viewer, answered as itself rather than as JSON: */
	enum kagent_viewer_folder folder;
	const char *content_type; /* set once read */
	char *bytes;
	size_t length;
	void (*answer)(struct routes__call *call);
};

static int
routes__http_status(int status)
{
	switch (status) {
	case -ENOENT:
		return 404;
	case -EALREADY:
		return 409;
	case -EINVAL:
		return 400;
	default:
		return 500;
	}
}

static void
routes__gone(struct kagent_http_request *request, void *data)
{
	struct routes__call *call = data;

	(void)request;
	call->request = NULL;
}

static void
routes__after(int status, const char *cause, void *data)
{
	struct routes__call *call = data;

	/* The side effects happen whether or not the client is still there to hear of them. */
	if (status == 0 && call->answer != NULL)
		call->answer(call);
	if (call->request != NULL) {
		if (status < 0)
			kagent_http_reply_error(call->request, routes__http_status(status), "%s",
						cause != NULL ? cause : strerror(-status));
		else if (call->content_type != NULL)
			kagent_http_reply_bytes(call->request, 200, call->content_type, call->bytes,
						call->length);
		else
			kagent_http_reply_json(call->request, call->created ? 201 : 200,
					       json_incref(call->result));
	}
	free(call->bytes);
	free(call->id);
	json_decref(call->body);
	json_decref(call->result);
	json_decref(call->live);
	free(call);
}

/* A call for request, its {id} and body kept for the work. */
static struct routes__call *
routes__call_new(struct kagent_http_request *request, void *data,
		 void (*answer)(struct routes__call *call))
{
	struct routes__call *call = kagent_calloc(1, sizeof *call);
	const char *id = kagent_http_request_parameter(request, "id");
	json_t *body = kagent_http_request_json(request);

	call->daemon = data;
	call->request = request;
	call->id = id != NULL ? kagent_strdup(id) : NULL;
	call->body = body != NULL ? json_incref(body) : NULL;
	call->answer = answer;
	return call;
}

/* Runs work on the pool, then answers (call->answer may reshape call->result first). */
static void
routes__start(struct routes__call *call, kagent_store_work_function work)
{
	struct kagent_daemon *daemon = call->daemon;
	struct kagent_http_request *request = call->request;
	int status = kagent_store_submit(daemon->store, &daemon->loop, work, routes__after, call);

	if (status < 0) {
		kagent_http_reply_error(request, 503, "the daemon cannot take work now: %s",
					uv_strerror(status));
		free(call->id);
		json_decref(call->body);
		json_decref(call->live);
		free(call);
		return;
	}
	kagent_http_request_set_on_gone(request, routes__gone, call);
}

static void
routes__submit(struct kagent_http_request *request, void *data, kagent_store_work_function work,
	       void (*answer)(struct routes__call *call))
{
	routes__start(routes__call_new(request, data, answer), work);
}

/* ---- sessions as the API shows them ---- */

/* "attempt" and "best_speedup" (the confirmed, credited speedup against the batch's target
 * baseline, or null). */
static void
routes__decorate_fields(json_t *session)
{
	const json_t *confirmation =
	    json_object_get(json_object_get(session, "result"), "confirmation");
	double speedup = json_number_value(json_object_get(confirmation, "speedup"));

	if (json_object_get(session, "attempt") == NULL)
		json_object_set(session, "attempt", json_object_get(session, "attempts"));
	if (json_object_get(session, "best_speedup") == NULL)
		json_object_set_new(
		    session, "best_speedup",
		    speedup > 0 && !json_is_false(json_object_get(confirmation, "credited"))
			? json_real(speedup)
			: json_null());
}

/* The fields above, and "live" where it runs in this daemon. */
static void
routes__decorate_session(struct kagent_daemon *daemon, json_t *session)
{
	const char *id = json_string_value(json_object_get(session, "id"));
	struct kagent_daemon_session *ds = id != NULL ? kagent_daemon_find(daemon, id) : NULL;

	routes__decorate_fields(session);
	if (ds != NULL)
		json_object_set_new(session, "live", json_deep_copy(ds->live));
}

/* ---- GET /v1/health ---- */

/*
 * GET /v1/health answers from the loop at once: what it says of this daemon is on the loop,
 * and the store's count of queued sessions is the last one read, refreshed on the pool (a
 * read beside the answer, never before it) once it is older than this. The first answer,
 * and the first after this daemon queued or cancelled sessions, waits for a fresh count.
 */
#define ROUTES_QUEUED_MAX_AGE_MS 1000

/* The sessions queued in the store, all batches together. */
static int
routes__count_queued(struct kagent_store *store, json_int_t *queued_out, char **cause)
{
	json_t *batches = NULL, *batch;
	size_t index;
	int status = kagent_store_batch_list(store, &batches, cause);

	*queued_out = 0;
	if (status < 0)
		return status;
	json_array_foreach(batches, index, batch)
	{
		*queued_out +=
		    json_integer_value(json_object_get(json_object_get(batch, "counts"), "queued"));
	}
	json_decref(batches);
	return 0;
}

static void
routes__queued_set(struct kagent_daemon *daemon, json_int_t queued)
{
	daemon->queued_count = queued;
	daemon->queued_known = 1;
	daemon->queued_read_at = uv_now(&daemon->loop);
}

/* This daemon changed the queue: the next GET /v1/health reads the count afresh. */
static void
routes__queued_changed(struct kagent_daemon *daemon)
{
	daemon->queued_known = 0;
}

struct routes__queued_refresh {
	struct kagent_daemon *daemon;
	json_int_t queued;
};

static int
routes__queued_refresh_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__queued_refresh *refresh = data;

	return routes__count_queued(store, &refresh->queued, cause);
}

static void
routes__queued_refreshed(int status, const char *cause, void *data)
{
	struct routes__queued_refresh *refresh = data;
	struct kagent_daemon *daemon = refresh->daemon;

	daemon->queued_refreshing = 0;
	if (status == 0)
		routes__queued_set(daemon, refresh->queued);
	else
		kagent_daemon_log("GET /v1/health: counting the queued sessions: %s", cause);
	free(refresh);
}

static void
routes__queued_refresh(struct kagent_daemon *daemon)
{
	struct routes__queued_refresh *refresh;

	if (daemon->queued_refreshing ||
	    uv_now(&daemon->loop) - daemon->queued_read_at < ROUTES_QUEUED_MAX_AGE_MS)
		return;
	refresh = kagent_calloc(1, sizeof *refresh);
	refresh->daemon = daemon;
	if (kagent_store_submit(daemon->store, &daemon->loop, routes__queued_refresh_work,
				routes__queued_refreshed, refresh) == 0)
		daemon->queued_refreshing = 1;
	else
		free(refresh);
}

static int
routes__health_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;
	json_int_t queued;
	int status = routes__count_queued(store, &queued, cause);

	if (status == 0)
		call->result = json_pack("{s:I}", "sessions_queued", queued);
	return status;
}

/* What the loop knows, added to the queued count. */
static void
routes__health_describe(struct routes__call *call)
{
	struct kagent_daemon *daemon = call->daemon;
	const struct kagent_daemon_options *options = daemon->options;
	struct kagent_daemon_session *ds;
	json_t *gpus = json_array();
	json_int_t running = 0;

	if (strcmp(options->device, "cpu") != 0) {
		for (size_t slot = 0; slot < daemon->scheduler.slot_count; slot++)
			json_array_append_new(gpus, json_integer(daemon->slot_gpus[slot]));
	}
	for (ds = daemon->sessions; ds != NULL; ds = ds->next)
		running++;
	json_object_set_new(call->result, "status",
			    json_string(daemon->stopping ? "stopping" : "ok"));
	json_object_set_new(call->result, "version", json_string(KAGENT_VERSION));
	json_object_set_new(call->result, "device", json_string(options->device));
	json_object_set_new(call->result, "gpus", gpus);
	json_object_set_new(call->result, "sessions_running", json_integer(running));
	json_object_set_new(call->result, "max_sessions", json_integer(options->max_sessions));
	json_object_set_new(call->result, "evaluations",
			    kagent_daemon_evaluations_health(daemon->evaluations));
}

/* A fresh count, read on the pool: kept for the answers that follow. */
static void
routes__health_answer(struct routes__call *call)
{
	routes__queued_set(call->daemon,
			   json_integer_value(json_object_get(call->result, "sessions_queued")));
	routes__health_describe(call);
}

static void
routes__health(struct kagent_http_request *request, void *data)
{
	struct kagent_daemon *daemon = data;
	struct routes__call *call;

	if (!daemon->queued_known) {
		routes__submit(request, data, routes__health_work, routes__health_answer);
		return;
	}
	call = routes__call_new(request, data, routes__health_describe);
	call->result = json_pack("{s:I}", "sessions_queued", daemon->queued_count);
	routes__after(0, NULL, call);
	routes__queued_refresh(daemon);
}

/* ---- POST /v1/batches ---- */

/* The level a path's folders name ("…/level2/19_ReLU.py": 2), 0 when none. */
static int
routes__level_of(const char *path)
{
	const char *at = path;
	int level = 0;

	while ((at = strstr(at, "/level")) != NULL) {
		char *end;
		long value = strtol(at + 6, &end, 10);

		if (end != at + 6 && *end == '/' && value > 0 && value < 100)
			level = (int)value;
		at += 6;
	}
	return level;
}

static int
routes__compare_strings(const void *a, const void *b)
{
	return strcmp(json_string_value(*(json_t *const *)a),
		      json_string_value(*(json_t *const *)b));
}

/* Adds the *.py files of folder (and below, depth levels down) that match filter, sorted. */
static int
routes__scan(const char *folder, int depth, const char *filter, json_t *found, char **cause)
{
	DIR *directory = opendir(folder);
	struct dirent *entry;
	json_t *files = json_array(), *subfolders = json_array(), *item;
	size_t index;
	int status = 0;

	if (directory == NULL) {
		/* The client named the folder: whatever is wrong with it is the request's fault. */
		*cause = kagent_asprintf("cannot read %s: %s", folder, strerror(errno));
		status = -EINVAL;
		goto out;
	}
	while ((entry = readdir(directory)) != NULL) {
		const char *name = entry->d_name;
		char *path;
		struct stat info;

		/* Hidden files, __init__.py and __pycache__ are no problems. */
		if (name[0] == '.' || name[0] == '_')
			continue;
		path = kagent_asprintf("%s/%s", folder, name);
		if (stat(path, &info) == 0 && S_ISDIR(info.st_mode) && depth > 0)
			json_array_append_new(subfolders, json_string(path));
		else if (stat(path, &info) == 0 && S_ISREG(info.st_mode) && strlen(name) > 3 &&
			 strcmp(name + strlen(name) - 3, ".py") == 0 &&
			 (filter == NULL || fnmatch(filter, name, 0) == 0))
			json_array_append_new(files, json_string(path));
		free(path);
	}
	closedir(directory);
out:
	if (status == 0) {
		/* jansson keeps no contiguous array to sort: copy out, sort, append. */
		size_t count = json_array_size(files);
		json_t **sorted = kagent_calloc(count + 1, sizeof *sorted);

		json_array_foreach(files, index, item) sorted[index] = item;
		qsort(sorted, count, sizeof *sorted, routes__compare_strings);
		for (index = 0; index < count && json_array_size(found) < ROUTES_PROBLEM_CAP;
		     index++)
			json_array_append(found, sorted[index]);
		free(sorted);
		count = json_array_size(subfolders);
		sorted = kagent_calloc(count + 1, sizeof *sorted);
		json_array_foreach(subfolders, index, item) sorted[index] = item;
		qsort(sorted, count, sizeof *sorted, routes__compare_strings);
		for (index = 0; index < count && status == 0; index++)
			status = routes__scan(json_string_value(sorted[index]), depth - 1, filter,
					      found, cause);
		free(sorted);
	}
	json_decref(files);
	json_decref(subfolders);
	return status;
}

/* The problem files a batch names: its list, checked, or its folder, scanned. */
static int
routes__problem_paths(const json_t *body, json_t *paths, char **cause)
{
	const json_t *problems = json_object_get(body, "problems");
	const char *folder = json_string_value(json_object_get(body, "folder"));
	const char *filter = json_string_value(json_object_get(body, "filter"));
	json_int_t level = json_integer_value(json_object_get(body, "level"));
	json_t *item;
	size_t index;
	struct stat info;
	int status = 0;

	if (problems != NULL) {
		json_array_foreach(problems, index, item)
		{
			const char *path = json_string_value(item);

			if (stat(path, &info) != 0 || !S_ISREG(info.st_mode)) {
				*cause = kagent_asprintf("no problem file at %s", path);
				return -EINVAL;
			}
			json_array_append(paths, item);
		}
		return 0;
	}
	if (stat(folder, &info) != 0 || !S_ISDIR(info.st_mode)) {
		*cause = kagent_asprintf("no folder at %s", folder);
		return -EINVAL;
	}
	if (level > 0) {
		char *under = kagent_asprintf("%s/level%lld", folder, (long long)level);

		status = routes__scan(under, ROUTES_SCAN_DEPTH, filter, paths, cause);
		free(under);
	} else {
		int levels = 0;

		/* KernelBench's layout: level1/, level2/, level3/ under the folder. */
		for (int number = 1; number <= 3 && status == 0; number++) {
			char *under = kagent_asprintf("%s/level%d", folder, number);

			if (stat(under, &info) == 0 && S_ISDIR(info.st_mode)) {
				levels++;
				status =
				    routes__scan(under, ROUTES_SCAN_DEPTH, filter, paths, cause);
			}
			free(under);
		}
		if (levels == 0 && status == 0)
			status = routes__scan(folder, 0, filter, paths, cause);
	}
	if (status == 0 && json_array_size(paths) == 0) {
		*cause = kagent_asprintf("no problem files under %s", folder);
		status = -EINVAL;
	}
	return status;
}

static int
routes__batch_create_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;
	json_t *paths = json_array(), *item, *settings = json_object_get(call->body, "settings");
	struct kagent_store_problem *problems = NULL;
	char *batch_id = NULL;
	size_t index, count;
	int status;

	if ((status = routes__problem_paths(call->body, paths, cause)) < 0)
		goto out;
	count = json_array_size(paths);
	problems = kagent_calloc(count, sizeof *problems);
	json_array_foreach(paths, index, item)
	{
		problems[index].path = json_string_value(item);
		problems[index].level = routes__level_of(problems[index].path);
	}
	status = kagent_store_batch_create(store, settings, problems, count, &batch_id, cause);
	if (status < 0)
		goto out;
	call->result = json_pack("{s:s, s:I}", "batch", batch_id, "sessions", (json_int_t)count);
	call->created = 1;
out:
	free(problems);
	free(batch_id);
	json_decref(paths);
	return status;
}

static void
routes__batch_created(struct routes__call *call)
{
	kagent_daemon_log("batch %s: %lld problems queued",
			  json_string_value(json_object_get(call->result, "batch")),
			  (long long)json_integer_value(json_object_get(call->result, "sessions")));
	routes__queued_changed(call->daemon);
	kagent_daemon_wake(call->daemon);
	kagent_daemon_events_changed(
	    call->daemon, json_string_value(json_object_get(call->result, "batch")), NULL);
}

/* What the body may hold besides settings (docs/daemon-api.md); checked before any work. */
static int
routes__check_batch_body(const struct kagent_daemon *daemon, const json_t *body, char **cause)
{
	const json_t *problems = json_object_get(body, "problems");
	const json_t *folder = json_object_get(body, "folder");
	const json_t *level = json_object_get(body, "level");
	const json_t *filter = json_object_get(body, "filter");
	const char *key;
	json_t *value;
	size_t index;

	if (!json_is_object(body)) {
		*cause = kagent_strdup("the body must be a JSON object with \"problems\" or "
				       "\"folder\"");
		return -EINVAL;
	}
	json_object_foreach((json_t *)body, key, value)
	{
		if (strcmp(key, "problems") != 0 && strcmp(key, "folder") != 0 &&
		    strcmp(key, "level") != 0 && strcmp(key, "filter") != 0 &&
		    strcmp(key, "settings") != 0) {
			*cause = kagent_asprintf("unknown key \"%s\" (expected problems or folder, "
						 "level, filter, settings)",
						 key);
			return -EINVAL;
		}
	}
	if ((problems == NULL) == (folder == NULL)) {
		*cause = kagent_strdup("give either \"problems\" (a list of files) or \"folder\"");
		return -EINVAL;
	}
	if (problems != NULL) {
		if (!json_is_array(problems) || json_array_size(problems) == 0 ||
		    json_array_size(problems) > ROUTES_PROBLEM_CAP) {
			*cause = kagent_asprintf("\"problems\" must be a list of 1 to %d files",
						 ROUTES_PROBLEM_CAP);
			return -EINVAL;
		}
		json_array_foreach(problems, index, value)
		{
			if (!json_is_string(value) || json_string_value(value)[0] != '/') {
				*cause = kagent_strdup("each problem must be an absolute path (the "
						       "daemon does not know the client's folder)");
				return -EINVAL;
			}
		}
		if (level != NULL || filter != NULL) {
			*cause = kagent_strdup("\"level\" and \"filter\" go with \"folder\"");
			return -EINVAL;
		}
	} else if (!json_is_string(folder) || json_string_value(folder)[0] != '/') {
		*cause = kagent_strdup("\"folder\" must be an absolute path");
		return -EINVAL;
	}
	if (level != NULL && (!json_is_integer(level) || json_integer_value(level) < 1 ||
			      json_integer_value(level) > 99)) {
		*cause = kagent_strdup("\"level\" must be an integer from 1");
		return -EINVAL;
	}
	if (filter != NULL && !json_is_string(filter)) {
		*cause = kagent_strdup("\"filter\" must be a glob, e.g. \"*ReLU*\"");
		return -EINVAL;
	}
	return kagent_daemon_check_settings(daemon, json_object_get(body, "settings"), cause);
}

static void
routes__batch_create(struct kagent_http_request *request, void *data)
{
	struct kagent_daemon *daemon = data;
	char *cause = NULL;

	if (daemon->stopping) {
		kagent_http_reply_error(request, 503, "the daemon is shutting down");
		return;
	}
	if (routes__check_batch_body(daemon, kagent_http_request_json(request), &cause) < 0) {
		kagent_http_reply_error(request, 400, "%s", cause);
		free(cause);
		return;
	}
	routes__submit(request, data, routes__batch_create_work, routes__batch_created);
}

/* ---- GET /v1/batches, /v1/batches/{id}, /v1/batches/{id}/report ---- */

static int
routes__batch_list_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;
	json_t *batches = NULL;
	int status = kagent_store_batch_list(store, &batches, cause);

	if (status == 0)
		call->result = json_pack("{s:o}", "batches", batches);
	return status;
}

static void
routes__batch_list(struct kagent_http_request *request, void *data)
{
	routes__submit(request, data, routes__batch_list_work, NULL);
}

/*
 * GET /v1/batches/{id}: a thousand sessions' answer is built and encoded on the pool, off the
 * loop that runs them; the loop only copies the live views of the batch's sessions running
 * here, when the request arrives.
 */
static int
routes__batch_get_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;
	json_t *session;
	size_t index;
	int status = kagent_store_batch_get(store, call->id, &call->result, cause);

	if (status < 0)
		return status;
	json_array_foreach(json_object_get(call->result, "sessions"), index, session)
	{
		const char *id = json_string_value(json_object_get(session, "id"));
		json_t *view = id != NULL ? json_object_get(call->live, id) : NULL;

		routes__decorate_fields(session);
		if (view != NULL)
			json_object_set(session, "live", view);
	}
	call->bytes = json_dumps(call->result, JSON_COMPACT);
	if (call->bytes == NULL) {
		*cause = kagent_strdup("the batch could not be encoded");
		return -ENOMEM;
	}
	call->length = strlen(call->bytes);
	call->content_type = "application/json";
	return 0;
}

static void
routes__batch_get(struct kagent_http_request *request, void *data)
{
	struct kagent_daemon *daemon = data;
	struct routes__call *call = routes__call_new(request, data, NULL);
	struct kagent_daemon_session *ds;

	call->live = json_object();
	for (ds = daemon->sessions; ds != NULL; ds = ds->next)
		if (strcmp(ds->claim->batch_id, call->id) == 0)
			json_object_set_new(call->live, ds->claim->session_id,
					    json_deep_copy(ds->live));
	routes__start(call, routes__batch_get_work);
}

static int
routes__report_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;
	json_t *batch = NULL;
	int status = kagent_store_batch_get(store, call->id, &batch, cause);

	if (status == 0)
		status = kagent_report_build(batch, &call->result, cause);
	json_decref(batch);
	return status;
}

static void
routes__report(struct kagent_http_request *request, void *data)
{
	routes__submit(request, data, routes__report_work, NULL);
}

/* ---- DELETE /v1/batches/{id}, /v1/sessions/{id} ---- */

static int
routes__batch_cancel_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;
	json_t *running = NULL;
	int status = kagent_store_batch_cancel(store, call->id, &running, cause);

	if (status == 0)
		call->result = json_pack("{s:s, s:s, s:o}", "batch", call->id, "state", "cancelled",
					 "interrupted", running);
	return status;
}

static void
routes__batch_cancelled(struct routes__call *call)
{
	json_t *id;
	size_t index;

	kagent_daemon_log("batch %s cancelled", call->id);
	routes__queued_changed(call->daemon);
	kagent_daemon_events_changed(call->daemon, call->id, NULL);
	json_array_foreach(json_object_get(call->result, "interrupted"), index, id)
	    kagent_daemon_cancel(call->daemon, json_string_value(id));
}

static void
routes__batch_cancel(struct kagent_http_request *request, void *data)
{
	routes__submit(request, data, routes__batch_cancel_work, routes__batch_cancelled);
}

static int
routes__session_get_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;

	return kagent_store_session_get(store, call->id, &call->result, cause);
}

static void
routes__session_got(struct routes__call *call)
{
	routes__decorate_session(call->daemon, call->result);
}

static void
routes__session_get(struct kagent_http_request *request, void *data)
{
	routes__submit(request, data, routes__session_get_work, routes__session_got);
}

static int
routes__session_cancel_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;
	int running = 0;
	int status = kagent_store_session_cancel(store, call->id, &running, cause);

	if (status == 0) {
		call->result = json_pack("{s:s, s:s}", "session", call->id, "state", "cancelled");
		call->running = running;
	}
	return status;
}

static void
routes__session_cancelled(struct routes__call *call)
{
	kagent_daemon_log("session %s: cancelled", call->id);
	routes__queued_changed(call->daemon);
	kagent_daemon_events_changed(call->daemon, NULL, call->id);
	if (call->running)
		kagent_daemon_cancel(call->daemon, call->id);
}

static void
routes__session_cancel(struct kagent_http_request *request, void *data)
{
	routes__submit(request, data, routes__session_cancel_work, routes__session_cancelled);
}

/* ---- POST /v1/evaluations, GET /v1/evaluations/{id}: the reward service ---- */

static void
routes__evaluations_post(struct kagent_http_request *request, void *data)
{
	struct kagent_daemon *daemon = data;

	kagent_daemon_evaluations_post(daemon->evaluations, request);
}

static void
routes__evaluations_get(struct kagent_http_request *request, void *data)
{
	struct kagent_daemon *daemon = data;

	kagent_daemon_evaluations_get(daemon->evaluations, request);
}

/* ---- GET /, /viewer/{file}, /viewer/lib/{file}: the web viewer (docs/viewer.md) ---- */

/* The page's scripts and styles are its own files only: nothing inline, nothing fetched from
 * elsewhere, and no other site may frame it. */
#define ROUTES_VIEWER_POLICY                                                                       \
	"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"

static int
routes__viewer_work(struct kagent_store *store, void *data, char **cause)
{
	struct routes__call *call = data;
	const char *content_type = NULL;
	int status;

	(void)store;
	status = kagent_viewer_read(call->folder, call->id, &call->bytes, &call->length,
				    &content_type, cause);
	if (status == 0)
		call->content_type = content_type;
	return status;
}

static void
routes__viewer_file(struct kagent_http_request *request, void *data,
		    enum kagent_viewer_folder folder)
{
	struct routes__call *call = routes__call_new(request, data, NULL);
	const char *file = kagent_http_request_parameter(request, "file");

	call->folder = folder;
	call->id = kagent_strdup(file != NULL ? file : "index.html");
	kagent_http_reply_header(request, "Content-Security-Policy", ROUTES_VIEWER_POLICY);
	routes__start(call, routes__viewer_work);
}

static void
routes__viewer_index(struct kagent_http_request *request, void *data)
{
	routes__viewer_file(request, data, KAGENT_VIEWER_OWN);
}

static void
routes__viewer_own(struct kagent_http_request *request, void *data)
{
	routes__viewer_file(request, data, KAGENT_VIEWER_OWN);
}

static void
routes__viewer_library(struct kagent_http_request *request, void *data)
{
	routes__viewer_file(request, data, KAGENT_VIEWER_LIBRARY);
}

/* The contract (docs/daemon-api.md); docs/openapi.yaml describes each (a unit test checks). */
/* clang-format off */
const struct kagent_http_route kagent_daemon_routes[] = {
	{.method = "GET", .pattern = "/v1/health", .handle = routes__health,
	 .summary = "the daemon's state: device, GPUs, sessions running and queued"},
	{.method = "POST", .pattern = "/v1/batches", .handle = routes__batch_create,
	 .summary = "queue a batch: a list of problem files or a folder, with settings"},
	{.method = "GET", .pattern = "/v1/batches", .handle = routes__batch_list,
	 .summary = "the batches, newest first, with counts per state"},
	{.method = "GET", .pattern = "/v1/batches/{id}", .handle = routes__batch_get,
	 .summary = "one batch with its sessions"},
	{.method = "GET", .pattern = "/v1/batches/{id}/report", .handle = routes__report,
	 .summary = "a batch's report: one row per problem, summary overall and per level"},
	{.method = "DELETE", .pattern = "/v1/batches/{id}", .handle = routes__batch_cancel,
	 .summary = "cancel a batch: queued sessions at once, running ones at their safe point"},
	{.method = "GET", .pattern = "/v1/sessions/{id}", .handle = routes__session_get,
	 .summary = "one session, with its live view while it runs here"},
	{.method = "DELETE", .pattern = "/v1/sessions/{id}", .handle = routes__session_cancel,
	 .summary = "cancel one session"},
	{.method = "POST", .pattern = "/v1/evaluations", .handle = routes__evaluations_post,
	 .summary = "judge candidates against one problem, as kagent eval --json, in order"},
	{.method = "GET", .pattern = "/v1/evaluations/{id}", .handle = routes__evaluations_get,
	 .summary = "one evaluation (ID-N) or a whole request (ID), verdicts once ready"},
	{.method = "GET", .pattern = "/v1/sessions/{id}/events",
	 .handle = kagent_daemon_events_serve_session,
	 .summary = "a session's trace records as Server-Sent Events: replayed, then live"},
	{.method = "GET", .pattern = "/v1/events", .handle = kagent_daemon_events_serve_all,
	 .summary = "session and batch state changes as Server-Sent Events (?batch=ID)"},
	{.method = "GET", .pattern = "/", .handle = routes__viewer_index,
	 .summary = "the web viewer's page (docs/viewer.md)"},
	{.method = "GET", .pattern = "/viewer/{file}", .handle = routes__viewer_own,
	 .summary = "one of the web viewer's own files (HTML, CSS, JavaScript)"},
	{.method = "GET", .pattern = "/viewer/lib/{file}", .handle = routes__viewer_library,
	 .summary = "a JavaScript library of the viewer's, from its Debian package"},
	{.method = NULL},
};
/* clang-format on */
