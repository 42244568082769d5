/*
 * Setting a session up: the problem, the run id, the problem's repository and
 * the run's worktree, the trace, the prompts and tool definitions; and, for
 * --resume, the conversation, variants, totals and best rebuilt from the
 * run's trace and the variant files, so the model continues where it was.
 */
#include "kagent/session/session.h"
#include "session_internal.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"
#include "kagent/base/log.h"
#include "kagent/base/paths.h"
#include "kagent/records/config.h"
#include "kagent/records/otlp_exporter.h"
#include "kagent/records/prompt.h"
#include "kagent/base/sha256.h"
#include "kagent/llm/llm_request.h"
#include "kagent/records/trace.h"
#include "kagent/records/variant_repository.h"
#include "kagent/records/variants.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define SESSION_PROBLEM_CAP ((size_t)1 << 20)

/*
 * "19_ReLU" from "path/to/19_ReLU.py": the repository's folder name. A generic
 * file name (problem.py, model.py) takes its folder's name instead, so that
 * examples/relu/problem.py is "relu".
 */
static char *
session_create__problem_name(const char *path)
{
	const char *base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
	size_t length = strlen(base), index;
	char *name;

	if (length > 3 && strcmp(base + length - 3, ".py") == 0)
		length -= 3;
	if ((strncmp(base, "problem", length) == 0 && length == 7) ||
	    (strncmp(base, "model", length) == 0 && length == 5)) {
		const char *folder_end = base - 1, *folder = folder_end;

		while (folder > path && folder[-1] != '/')
			folder--;
		if (folder_end > path && folder < folder_end && strncmp(folder, ".", 1) != 0) {
			base = folder;
			length = (size_t)(folder_end - folder);
		}
	}
	if (length > 64)
		length = 64;
	name = kagent_strndup(base, length);
	for (index = 0; index < length; index++) {
		if (!isalnum((unsigned char)name[index]) && name[index] != '-' &&
		    name[index] != '_' && name[index] != '.')
			name[index] = '_';
	}
	if (name[0] == '.' || name[0] == '\0') {
		char *prefixed = kagent_asprintf("problem%s", name);

		free(name);
		name = prefixed;
	}
	return name;
}

/* 20261122-061502-3f2a: sortable, and unique enough for runs started in the same second. */
static char *
session_create__run_id(void)
{
	time_t now = time(NULL);
	struct tm utc;
	char stamp[32];
	unsigned short random_bits = 0;

	gmtime_r(&now, &utc);
	strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
	if (getrandom(&random_bits, sizeof random_bits, 0) != sizeof random_bits)
		random_bits = (unsigned short)getpid();
	return kagent_asprintf("%s-%04x", stamp, random_bits);
}

static const char *
session_create__baseline_text(enum kagent_target_baseline baseline)
{
	switch (baseline) {
	case KAGENT_TARGET_EAGER:
		return "eager PyTorch";
	case KAGENT_TARGET_COMPILE:
		return "torch.compile";
	case KAGENT_TARGET_BEST:
	default:
		return "the faster of eager PyTorch and torch.compile";
	}
}

static int
session_create__prompts(struct kagent_session *session, char **cause)
{
	const struct kagent_config *config = session->config;
	char target[64], turns[32];
	int status;

	if (config->target.speedup > 0)
		snprintf(target, sizeof target, "%.2fx", config->target.speedup);
	else
		snprintf(target, sizeof target, "as fast as you can (no fixed target)");
	if (config->budget.max_turns > 0)
		snprintf(turns, sizeof turns, "%lld", config->budget.max_turns);
	else
		snprintf(turns, sizeof turns, "no limit");
	{
		const struct kagent_prompt_variable variables[] = {
		    {"target_speedup", target},
		    {"target_baseline", session_create__baseline_text(config->target.baseline)},
		    {"max_turns", turns},
		    {"problem_name", session->problem_name},
		    {"problem_source", session->problem_source},
		    {"gpu", session->gpu_name != NULL ? session->gpu_name : "unknown"},
		    {"input_summary", "see get_inputs() in the source below"},
		};
		size_t count = sizeof variables / sizeof variables[0];

		status = kagent_prompt_render(session->prompts_directory, "system.md", variables,
					      count, &session->system_prompt, cause);
		if (status < 0)
			return status;
		status = kagent_prompt_render(session->prompts_directory, "problem.md", variables,
					      count, &session->problem_prompt, cause);
		if (status < 0)
			return status;
	}
	session->conversation =
	    kagent_llm_conversation_create(config->provider.format, session->system_prompt);
	session->tools = kagent_tool_definitions(session->prompts_directory, cause);
	return session->tools != NULL ? 0 : -ENOENT;
}

/* ---- resume ---- */

struct session_create__resume {
	struct kagent_session *session;
	char *cause;
	int saw_turn_end;
	json_t *last_calls; /* the tool calls of the last reply */
	json_t *answered;   /* the ids of the tool results after it */
};

static void
session_create__add_totals(struct kagent_session *session, const json_t *totals)
{
	session->totals.input_tokens = json_integer_value(json_object_get(totals, "input_tokens"));
	session->totals.output_tokens =
	    json_integer_value(json_object_get(totals, "output_tokens"));
	session->totals.cost = json_number_value(json_object_get(totals, "cost"));
	session->totals.gpu_seconds = json_number_value(json_object_get(totals, "gpu_seconds"));
	session->totals.wall_seconds_before =
	    json_number_value(json_object_get(totals, "wall_seconds"));
}

static int
session_create__replay(const json_t *record, void *data)
{
	struct session_create__resume *resume = data;
	struct kagent_session *session = resume->session;
	const char *type = json_string_value(json_object_get(record, "type"));
	const json_t *usage;

	if (type == NULL)
		return 0;
	if (json_is_integer(json_object_get(record, "turn")) &&
	    json_integer_value(json_object_get(record, "turn")) > session->turn)
		session->turn = json_integer_value(json_object_get(record, "turn"));
	if (strcmp(type, "run_start") == 0) {
		char hex[KAGENT_SHA256_HEX_SIZE];
		const char *recorded = json_string_value(json_object_get(record, "problem_sha256"));

		kagent_sha256_hex(session->problem_source, strlen(session->problem_source), hex);
		if (recorded != NULL && strcmp(recorded, hex) != 0) {
			resume->cause = kagent_asprintf("run %s optimized a different version of "
							"this problem; start a new run",
							session->run_id);
			return -EINVAL;
		}
	} else if (strcmp(type, "message") == 0) {
		kagent_session_add_message(session,
					   json_pack("{s:s, s:O}", "role", "user", "content",
						     json_object_get(record, "content")));
	} else if (strcmp(type, "reply") == 0 &&
		   json_is_object(json_object_get(record, "message"))) {
		kagent_session_add_message(session,
					   json_incref(json_object_get(record, "message")));
		json_decref(resume->last_calls);
		resume->last_calls =
		    json_incref(json_object_get(json_object_get(record, "message"), "tool_calls"));
		json_array_clear(resume->answered);
		usage = json_object_get(record, "usage");
		session->totals.input_tokens +=
		    json_integer_value(json_object_get(usage, "input_tokens")) > 0
			? json_integer_value(json_object_get(usage, "input_tokens"))
			: 0;
		session->totals.output_tokens +=
		    json_integer_value(json_object_get(usage, "output_tokens")) > 0
			? json_integer_value(json_object_get(usage, "output_tokens"))
			: 0;
		session->totals.cost += json_number_value(json_object_get(record, "cost"));
	} else if (strcmp(type, "tool_result") == 0) {
		kagent_session_add_message(
		    session, json_pack("{s:s, s:O, s:O, s:O, s:b}", "role", "tool", "tool_call_id",
				       json_object_get(record, "id"), "name",
				       json_object_get(record, "name"), "content",
				       json_object_get(record, "content"), "is_error",
				       json_is_true(json_object_get(record, "is_error"))));
		json_array_append(resume->answered, json_object_get(record, "id"));
		session->totals.gpu_seconds +=
		    json_number_value(json_object_get(record, "gpu_seconds"));
	} else if (strcmp(type, "turn_end") == 0) {
		/* The totals of a turn_end already count every reply and tool before it. */
		session_create__add_totals(session, json_object_get(record, "totals"));
		resume->saw_turn_end = 1;
	} else {
		kagent_variants_replay(session->variants, record);
	}
	return 0;
}

/* A tool call the killed run never answered gets an answer, so the conversation is whole. */
static void
session_create__answer_dangling_calls(struct session_create__resume *resume)
{
	json_t *call, *answer;
	size_t call_index, index;

	json_array_foreach(resume->last_calls, call_index, call)
	{
		const char *id = json_string_value(json_object_get(call, "id"));
		int answered = 0;

		json_array_foreach(resume->answered, index, answer)
		{
			if (id != NULL && json_is_string(answer) &&
			    strcmp(id, json_string_value(answer)) == 0)
				answered = 1;
		}
		if (!answered)
			kagent_session_add_message(
			    resume->session,
			    json_pack("{s:s, s:s, s:O, s:s, s:b}", "role", "tool", "tool_call_id",
				      id != NULL ? id : "", "name", json_object_get(call, "name"),
				      "content",
				      "the run was interrupted before this call finished; call it "
				      "again if you still need it",
				      "is_error", 1));
	}
}

static int
session_create__resume(struct kagent_session *session, char **cause)
{
	struct session_create__resume resume = {.session = session, .answered = json_array()};
	int status, truncated = 0;

	/* Variants first, from their files: a verdict or commit record refers to them by id. */
	kagent_variants_load(session->variants);
	status = kagent_trace_read(session->trace_path, session_create__replay, &resume, &truncated,
				   cause);
	if (status != 0) {
		if (resume.cause != NULL) {
			free(*cause);
			*cause = resume.cause;
		}
		status = status < 0 ? status : -EINVAL;
		goto out;
	}
	session_create__answer_dangling_calls(&resume);
out:
	json_decref(resume.last_calls);
	json_decref(resume.answered);
	return status;
}

/* ---- rebuild ---- */

static void
session_create__record_nothing(void *data, const char *type, json_t *fields)
{
	json_decref(fields);
}

static char *
session_create__trace_path(const struct kagent_session *session)
{
	return kagent_asprintf("%s/traces/%s.jsonl",
			       kagent_variant_repository_directory(session->repository),
			       session->run_id);
}

/*
 * The run's files are not here (taken over from another machine): its branch, variants and
 * best made again from the trace records, then the trace written back, last, since a trace
 * is what makes a run resumable here.
 */
static int
session_create__rebuild(struct kagent_session *session, const json_t *trace_records, char **cause)
{
	json_t *records = json_deep_copy(trace_records), *record;
	struct kagent_variants *variants = NULL;
	struct kagent_buffer text = {0};
	char *worktree = NULL, *path = session_create__trace_path(session), *folder = NULL;
	struct kagent_variants_options options = {
	    .repository = session->repository,
	    .run_id = session->run_id,
	    .baseline = session->config->target.baseline,
	    .record = session_create__record_nothing,
	};
	size_t index;
	int status;

	/* A branch without a trace is a rebuild cut short (the trace is written last): what it
	 * holds is made again below, with the same ids. */
	if ((status = kagent_variant_repository_forget_run(session->repository, session->run_id,
							   cause)) < 0 ||
	    (status = kagent_variant_repository_start_run(session->repository, session->run_id, 0,
							  &worktree, cause)) < 0)
		goto out;
	options.worktree = worktree;
	if ((status = kagent_variants_create(&options, &variants, cause)) < 0 ||
	    (status = kagent_variants_rebuild(variants, records, cause)) < 0)
		goto out;
	if (status > 0)
		kagent_log(KAGENT_LOG_WARNING,
			   "run %s: %d commit(s) rebuilt under new ids (a trace without their "
			   "times); its trace names the new ones",
			   session->run_id, status);
	json_array_foreach(records, index, record)
	{
		char *line = json_dumps(record, JSON_COMPACT | JSON_PRESERVE_ORDER);

		kagent_buffer_append_string(&text, line);
		kagent_buffer_append_string(&text, "\n");
		free(line);
	}
	folder =
	    kagent_asprintf("%s/traces", kagent_variant_repository_directory(session->repository));
	if ((status = kagent_fileio_make_directories(folder, 0755, cause)) < 0)
		goto out;
	status = kagent_fileio_write_atomic(path, text.data != NULL ? text.data : "", text.length,
					    cause);
	if (status == 0)
		kagent_log(KAGENT_LOG_INFO, "run %s rebuilt from %zu trace records",
			   session->run_id, json_array_size(records));
out:
	kagent_buffer_free(&text);
	kagent_variants_free(variants);
	json_decref(records);
	free(folder);
	free(worktree);
	free(path);
	return status < 0 ? status : 0;
}

/* ---- create ---- */

static void
session_create__record(void *data, const char *type, json_t *fields)
{
	kagent_session_record(data, type, fields);
}

/* The run's variants (and their folder) and the trace's path. */
static int
session_create__records(struct kagent_session *session, char **cause)
{
	struct kagent_variants_options options = {
	    .repository = session->repository,
	    .run_id = session->run_id,
	    .worktree = session->worktree,
	    .baseline = session->config->target.baseline,
	    .evaluate = kagent_session_evaluate,
	    .record = session_create__record,
	    .data = session,
	};
	int status;

	status = kagent_variants_create(&options, &session->variants, cause);
	if (status < 0)
		return status;
	session->trace_path = session_create__trace_path(session);
	if (session->resumed && access(session->trace_path, R_OK) != 0) {
		*cause = kagent_asprintf("run %s has no trace at %s: nothing to resume",
					 session->run_id, session->trace_path);
		return -ENOENT;
	}
	return 0;
}

/* A header value this short is no credential ("X-Team: kernels"): as a trace secret it would
 * blank every such word of the trace. */
#define SESSION_HEADER_SECRET_MINIMUM 12

/* The span exporter of telemetry.otlp_endpoint; its headers' values are secrets of the trace. */
static int
session_create__exporter(struct kagent_session *session, char **cause)
{
	const struct kagent_telemetry_config *telemetry = &session->config->telemetry;
	struct kagent_otlp_exporter_options options = {
	    .http = session->http,
	    .endpoint = telemetry->otlp_endpoint,
	    .headers = telemetry->otlp_headers,
	    .trace = session->trace,
	};
	char **lines = NULL;
	int status;

	if (telemetry->otlp_headers != NULL) {
		if ((status = kagent_config_parse_headers(telemetry->otlp_headers, &lines, cause)) <
		    0)
			return status;
		for (size_t index = 0; lines[index] != NULL; index++) {
			const char *value = strchr(lines[index], ':') + 2;

			if (strlen(value) >= SESSION_HEADER_SECRET_MINIMUM)
				kagent_trace_add_secret(session->trace, value);
		}
		kagent_config_free_headers(lines);
	}
	return kagent_otlp_exporter_create(&options, &session->exporter, cause);
}

int
kagent_session_create(const struct kagent_session_options *options,
		      struct kagent_session **session_out, char **cause)
{
	struct kagent_session *session = kagent_calloc(1, sizeof *session);
	const struct kagent_config *config = options->config;
	size_t size;
	int status;

	*session_out = NULL;
	session->loop = options->loop;
	session->http = options->http;
	session->config = config;
	session->observer = options->observer;
	session->done = options->done;
	session->observer_data = options->data;
	session->resumed = options->resume;
	session->problem_path = kagent_strdup(options->problem_path);
	session->gpu_name = options->gpu_name != NULL ? kagent_strdup(options->gpu_name) : NULL;
	session->worker_executable =
	    options->worker_executable != NULL ? kagent_strdup(options->worker_executable) : NULL;
	uv_timer_init(session->loop, &session->step_timer);
	session->step_timer.data = session;
	kagent_warm_worker_init(&session->worker, session->loop);
	session->handles_open = 2;

	status = kagent_fileio_read(options->problem_path, SESSION_PROBLEM_CAP,
				    &session->problem_source, &size, cause);
	if (status < 0)
		goto out;
	if (strstr(session->problem_source, "class Model") == NULL) {
		*cause = kagent_asprintf("%s defines no class Model: a problem is a PyTorch module "
					 "Model with get_inputs() and get_init_inputs()",
					 options->problem_path);
		status = -EINVAL;
		goto out;
	}
	session->problem_name = session_create__problem_name(options->problem_path);
	if (options->resume && options->run_id == NULL) {
		*cause = kagent_strdup("--resume needs the id of the run to continue");
		status = -EINVAL;
		goto out;
	}
	session->run_id =
	    options->run_id != NULL ? kagent_strdup(options->run_id) : session_create__run_id();
	if (config->prompts_directory != NULL)
		session->prompts_directory = kagent_strdup(config->prompts_directory);
	else if ((status = kagent_paths_prompts_dir(&session->prompts_directory, cause)) < 0)
		goto out;
	if ((status = session_create__prompts(session, cause)) < 0)
		goto out;
	status =
	    kagent_variant_repository_open(config->output_directory, session->problem_name,
					   session->problem_source, &session->repository, cause);
	if (status < 0)
		goto out;
	if (options->resume && options->trace_records != NULL) {
		char *trace_path = session_create__trace_path(session);
		int missing = access(trace_path, F_OK) != 0;

		free(trace_path);
		/* Nothing of it reached the store (killed in its first turn elsewhere): it
		 * starts here under its id, as it would have there. */
		if (missing && json_array_size(options->trace_records) == 0)
			session->resumed = 0;
		else if (missing && (status = session_create__rebuild(
					 session, options->trace_records, cause)) < 0)
			goto out;
	}
	status = kagent_variant_repository_start_run(session->repository, session->run_id,
						     session->resumed, &session->worktree, cause);
	if (status < 0)
		goto out;
	session->problem_copy_path = kagent_asprintf("%s/problem.py", session->worktree);
	if ((status = session_create__records(session, cause)) < 0)
		goto out;
	status = kagent_trace_open(session->trace_path, session->resumed, &session->trace, cause);
	if (status < 0)
		goto out;
	if (config->provider.api_key != NULL)
		kagent_trace_add_secret(session->trace, config->provider.api_key);
	if (config->telemetry.otlp_endpoint != NULL &&
	    (status = session_create__exporter(session, cause)) < 0)
		goto out;
	if (session->resumed && (status = session_create__resume(session, cause)) < 0)
		goto out;
	*session_out = session;
	session = NULL;
out:
	if (session != NULL)
		kagent_session_free(session);
	return status;
}
