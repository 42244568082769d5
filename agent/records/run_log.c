/*
 * A run read back from its trace (include/kagent/records/run_log.h): one pass over the
 * records rebuilds the conversation in kagent's neutral form and collects each evaluated
 * variant with the conversation as it stood when the model wrote it; the sources are then
 * found by their sha256, so what is exported or replayed is what was judged.
 */
#include "kagent/records/run_log.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/records/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A problem or candidate file larger than this is not one (the variants' own cap is 1 MiB). */
#define RUN_LOG_SOURCE_CAP ((size_t)4 << 20)

/* What the pass over the records keeps between them. */
struct run_log__reading {
	struct kagent_run_log *log;
	json_t *conversation; /* the neutral messages so far */
	size_t replied;	      /* the conversation's length after the last assistant message */
	json_t *sources;      /* sha256 -> source, from the evaluate calls' arguments */
	size_t capacity;
};

static const char *
run_log__string(const json_t *object, const char *key)
{
	return json_string_value(json_object_get(object, key));
}

/* A neutral message with every key present, so datasets see one shape. */
static json_t *
run_log__message(const char *role, const json_t *content, const json_t *reasoning,
		 json_t *tool_calls, const json_t *tool_call_id, const json_t *name)
{
	return json_pack("{s:s, s:O?, s:O?, s:o?, s:O?, s:O?}", "role", role, "content",
			 json_is_string(content) ? content : NULL, "reasoning",
			 json_is_string(reasoning) ? reasoning : NULL, "tool_calls", tool_calls,
			 "tool_call_id", json_is_string(tool_call_id) ? tool_call_id : NULL, "name",
			 json_is_string(name) ? name : NULL);
}

/* The assistant message of a reply record, its tool calls reduced to {id, name, arguments}. */
static json_t *
run_log__assistant(const json_t *message)
{
	const json_t *call;
	json_t *calls = NULL;
	size_t index;

	if (json_array_size(json_object_get(message, "tool_calls")) > 0) {
		calls = json_array();
		json_array_foreach(json_object_get(message, "tool_calls"), index, call)
		    json_array_append_new(
			calls, json_pack("{s:O?, s:O?, s:O?}", "id", json_object_get(call, "id"),
					 "name", json_object_get(call, "name"), "arguments",
					 json_object_get(call, "arguments")));
	}
	return run_log__message("assistant", json_object_get(message, "content"),
				json_object_get(message, "reasoning"), calls, NULL, NULL);
}

/* Remembers an evaluate call's source under its sha256. */
static void
run_log__remember_source(struct run_log__reading *reading, const json_t *record)
{
	const char *name = run_log__string(record, "name");
	const char *text = run_log__string(record, "arguments");
	const char *source;
	char hex[KAGENT_SHA256_HEX_SIZE];
	json_t *arguments;

	if (name == NULL || strcmp(name, "evaluate") != 0 || text == NULL)
		return;
	arguments = json_loads(text, 0, NULL);
	source = run_log__string(arguments, "source");
	if (source != NULL) {
		kagent_sha256_hex(source, strlen(source), hex);
		json_object_set_new(reading->sources, hex, json_string(source));
	}
	json_decref(arguments);
}

static void
run_log__add_variant(struct run_log__reading *reading, const json_t *record)
{
	struct kagent_run_log *log = reading->log;
	struct kagent_run_variant *variant;
	const json_t *verdict = json_object_get(record, "verdict");
	const char *id = run_log__string(record, "variant");
	const char *sha256 = run_log__string(json_object_get(verdict, "candidate"), "sha256");
	size_t index;

	/* A resumed run may hold a variant's verdict twice: the first is the one it was judged
	 * by. */
	if (id == NULL || !json_is_object(verdict) || kagent_run_log_find(log, id) != NULL)
		return;
	if (log->count == reading->capacity) {
		reading->capacity = reading->capacity ? 2 * reading->capacity : 16;
		log->variants =
		    kagent_realloc(log->variants, reading->capacity * sizeof *log->variants);
	}
	variant = &log->variants[log->count];
	memset(variant, 0, sizeof *variant);
	variant->id = kagent_strdup(id);
	variant->turn = (int)json_integer_value(json_object_get(record, "turn"));
	/* As the session named it (docs/traces.md); traces from before it have none. */
	variant->parent = run_log__string(record, "parent") != NULL
			      ? kagent_strdup(run_log__string(record, "parent"))
			      : NULL;
	variant->verdict = json_incref((json_t *)verdict);
	if (sha256 != NULL) {
		snprintf(variant->source_sha256, sizeof variant->source_sha256, "%s", sha256);
		if (json_is_string(json_object_get(reading->sources, sha256)))
			variant->source = kagent_strdup(
			    json_string_value(json_object_get(reading->sources, sha256)));
	}
	variant->messages = json_array();
	for (index = 0; index < reading->replied; index++)
		json_array_append(variant->messages, json_array_get(reading->conversation, index));
	log->count++;
}

static int
run_log__record(const json_t *record, void *data)
{
	struct run_log__reading *reading = data;
	struct kagent_run_log *log = reading->log;
	const char *type = run_log__string(record, "type");
	const char *purpose = run_log__string(record, "purpose");
	struct kagent_run_variant *variant;

	if (type == NULL)
		return 0;
	if (strcmp(type, "run_start") == 0) {
		/* a resumed run starts again; its conversation goes on from the trace */
		if (log->start != NULL)
			return 0;
		log->start = json_deep_copy(record);
		json_array_append_new(reading->conversation,
				      run_log__message("system", json_object_get(record, "system"),
						       NULL, NULL, NULL, NULL));
	} else if (strcmp(type, "message") == 0) {
		json_array_append_new(reading->conversation,
				      run_log__message("user", json_object_get(record, "content"),
						       NULL, NULL, NULL, NULL));
	} else if (strcmp(type, "reply") == 0) {
		json_array_append_new(reading->conversation,
				      run_log__assistant(json_object_get(record, "message")));
		reading->replied = json_array_size(reading->conversation);
	} else if (strcmp(type, "tool_call") == 0) {
		run_log__remember_source(reading, record);
	} else if (strcmp(type, "tool_result") == 0) {
		json_array_append_new(reading->conversation,
				      run_log__message("tool", json_object_get(record, "content"),
						       NULL, NULL, json_object_get(record, "id"),
						       json_object_get(record, "name")));
	} else if (strcmp(type, "verdict") == 0 && purpose != NULL &&
		   strcmp(purpose, "evaluate") == 0) {
		run_log__add_variant(reading, record);
	} else if (strcmp(type, "commit") == 0) {
		variant = (struct kagent_run_variant *)kagent_run_log_find(
		    log, run_log__string(record, "variant"));
		if (variant != NULL && variant->commit == NULL &&
		    run_log__string(record, "commit") != NULL)
			variant->commit = kagent_strdup(run_log__string(record, "commit"));
	} else if (strcmp(type, "best") == 0 && run_log__string(record, "variant") != NULL) {
		free(log->best);
		log->best = kagent_strdup(run_log__string(record, "variant"));
	} else if (strcmp(type, "final") == 0 && log->best == NULL &&
		   run_log__string(record, "variant") != NULL) {
		/* nothing confirmed: the run announced its fastest correct variant */
		log->best = kagent_strdup(run_log__string(record, "variant"));
	}
	return 0;
}

/* Reads path into *source_out when the file's sha256 is sha256; else 0 and nothing. */
static int
run_log__read_matching(const char *path, const char *sha256, char **source_out)
{
	char hex[KAGENT_SHA256_HEX_SIZE], *source = NULL, *cause = NULL;
	size_t size;

	if (path == NULL ||
	    kagent_fileio_read(path, RUN_LOG_SOURCE_CAP, &source, &size, &cause) < 0) {
		free(cause);
		return 0;
	}
	kagent_sha256_hex(source, size, hex);
	if (strlen(source) != size || strcmp(hex, sha256) != 0) {
		free(source);
		return 0;
	}
	*source_out = source;
	return 1;
}

/* The trace's folder's parent, <output>/<problem>, where the run's other files are. */
static char *
run_log__run_directory(const char *trace_path)
{
	const char *slash = strrchr(trace_path, '/');
	char *folder, *parent;

	if (slash == NULL)
		return kagent_strdup("..");
	folder = kagent_asprintf("%.*s", (int)(slash - trace_path), trace_path);
	parent = strrchr(folder, '/');
	if (parent == NULL) {
		free(folder);
		return kagent_strdup(".");
	}
	parent[parent == folder ? 1 : 0] = '\0';
	return folder;
}

static int
run_log__find_problem(struct kagent_run_log *log, const char *directory, char **cause)
{
	const char *worktree = run_log__string(log->start, "worktree");
	char *candidates[3] = {
	    kagent_strdup(run_log__string(log->start, "problem")
			      ? run_log__string(log->start, "problem")
			      : ""),
	    worktree != NULL ? kagent_asprintf("%s/problem.py", worktree) : NULL,
	    kagent_asprintf("%s/%s/problem.py", directory, log->run_id),
	};
	size_t index;
	int status = -ENOENT;

	for (index = 0; index < 3 && status != 0; index++) {
		if (run_log__read_matching(candidates[index], log->problem_sha256,
					   &log->problem_source)) {
			log->problem_path = kagent_strdup(candidates[index]);
			status = 0;
		}
	}
	if (status != 0)
		*cause = kagent_asprintf("%s: the problem of run %s (sha256 %s) is neither at %s "
					 "nor in the run's worktree",
					 log->trace_path, log->run_id, log->problem_sha256,
					 candidates[0]);
	for (index = 0; index < 3; index++)
		free(candidates[index]);
	return status;
}

/* Sources the trace did not carry: the run's variant files with the judged sha256. */
static int
run_log__find_sources(struct kagent_run_log *log, const char *directory, char **cause)
{
	size_t index;

	for (index = 0; index < log->count; index++) {
		struct kagent_run_variant *variant = &log->variants[index];
		char *path;

		if (variant->source != NULL)
			continue;
		path = kagent_asprintf("%s/variants/%s/%s.py", directory, log->run_id, variant->id);
		if (!run_log__read_matching(path, variant->source_sha256, &variant->source)) {
			*cause = kagent_asprintf(
			    "%s: the source of %s (sha256 %s) is neither in the "
			    "trace nor at %s",
			    log->trace_path, variant->id,
			    variant->source_sha256[0] ? variant->source_sha256 : "unknown", path);
			free(path);
			return -ENOENT;
		}
		free(path);
	}
	return 0;
}

static enum kagent_target_baseline
run_log__baseline(const char *name)
{
	enum kagent_target_baseline baseline;

	for (baseline = KAGENT_TARGET_EAGER; baseline <= KAGENT_TARGET_BEST; baseline++) {
		if (name != NULL && strcmp(kagent_target_baseline_name(baseline), name) == 0)
			return baseline;
	}
	return KAGENT_TARGET_BEST;
}

int
kagent_run_log_read(const char *path, struct kagent_run_log **log_out, char **cause)
{
	struct kagent_run_log *log = kagent_calloc(1, sizeof *log);
	struct run_log__reading reading = {
	    .log = log, .conversation = json_array(), .sources = json_object()};
	const json_t *config;
	char *directory = run_log__run_directory(path);
	int status;

	log->trace_path = kagent_strdup(path);
	status = kagent_trace_read(path, run_log__record, &reading, NULL, cause);
	if (status != 0)
		goto out;
	log->run_id = run_log__string(log->start, "run_id");
	log->problem_name = run_log__string(log->start, "problem_name");
	log->problem_sha256 = run_log__string(log->start, "problem_sha256");
	if (log->run_id == NULL || log->problem_sha256 == NULL) {
		*cause = kagent_asprintf("%s is not the trace of a run: it has no run_start record "
					 "with a run id and the problem's sha256",
					 path);
		status = -EINVAL;
		goto out;
	}
	config = json_object_get(log->start, "config");
	log->model = run_log__string(json_object_get(config, "provider"), "model");
	log->provider = run_log__string(json_object_get(config, "provider"), "api");
	log->baseline =
	    run_log__baseline(run_log__string(json_object_get(config, "target"), "baseline"));
	status = run_log__find_problem(log, directory, cause);
	if (status == 0)
		status = run_log__find_sources(log, directory, cause);
out:
	json_decref(reading.conversation);
	json_decref(reading.sources);
	free(directory);
	if (status != 0) {
		kagent_run_log_free(log);
		log = NULL;
	}
	*log_out = log;
	return status;
}

void
kagent_run_log_free(struct kagent_run_log *log)
{
	size_t index;

	if (log == NULL)
		return;
	for (index = 0; index < log->count; index++) {
		free(log->variants[index].id);
		free(log->variants[index].parent);
		free(log->variants[index].source);
		json_decref(log->variants[index].verdict);
		json_decref(log->variants[index].messages);
		free(log->variants[index].commit);
	}
	free(log->variants);
	free(log->trace_path);
	json_decref(log->start);
	free(log->problem_path);
	free(log->problem_source);
	free(log->best);
	free(log);
}

const struct kagent_run_variant *
kagent_run_log_find(const struct kagent_run_log *log, const char *id)
{
	size_t index;

	for (index = 0; id != NULL && index < log->count; index++) {
		if (strcmp(log->variants[index].id, id) == 0)
			return &log->variants[index];
	}
	return NULL;
}
