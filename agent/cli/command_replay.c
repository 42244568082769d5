/*
 * `kagent replay (SESSION|TRACE) [--gpu N] [--device cpu|cuda] [--json]`: re-evaluates every
 * variant of a finished run on this machine, in the order the run evaluated them, with the
 * seeds and trial counts its verdicts record, through the evaluation `kagent eval` runs
 * (evaluation.h), and compares each with its original verdict as `kagent verify` does
 * (kagent_evidence_compare: the status, and the speedup's intervals on the same GPU model,
 * each widened to at least --interval-floor of its speedup).
 * It also says whether the run's best would still be its best. No model is called: the
 * variants come from the trace (run_log.h).
 */
#include "daemon_call.h"
#include "run_source.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/cli/command.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/evaluator/evidence.h"
#include "kagent/records/run_log.h"
#include "kagent/records/variants.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_SCHEMA "kagent.replay/1"

enum {
	COMMAND_REPLAY_DEVICE,
	COMMAND_REPLAY_GPU,
	COMMAND_REPLAY_INTERVAL_FLOOR,
	COMMAND_REPLAY_STORE,
};

/* clang-format off */
static const struct kagent_command_option command_replay__options[] = {
	[COMMAND_REPLAY_DEVICE] = {"device", 0, "cuda|cpu", "where the kernels run",
		"the device of the original verdicts", NULL},
	[COMMAND_REPLAY_GPU] = {"gpu", 0, "N", "the index of the GPU to use", "0", NULL},
	[COMMAND_REPLAY_INTERVAL_FLOOR] = {"interval-floor", 0, "PERCENT",
		"the least half-width of a speedup's interval when then and now are compared, "
		"in percent of the speedup, 0 to 100 (0: the intervals as measured)", "2", NULL},
	[COMMAND_REPLAY_STORE] = KAGENT_RUN_SOURCE_STORE_OPTION,
	/* --json prints the comparison and the new verdicts as one object */
	KAGENT_DAEMON_CALL_OPTIONS,
	{0},
};
/* clang-format on */

struct command_replay__settings {
	const char *device; /* NULL: each verdict's own */
	int gpu_index;
	double interval_floor; /* a fraction of the speedup (kagent_evidence_compare) */
	int json;
};

/* "1.23x [1.10, 1.40]" or "-". */
static void
command_replay__format_speedup(char *buffer, size_t size, const json_t *speedup, const char *moment)
{
	char key[16];
	const json_t *value = json_object_get(speedup, moment);
	const json_t *interval;

	snprintf(key, sizeof key, "%s_ci95", moment);
	interval = json_object_get(speedup, key);
	if (!json_is_number(value))
		snprintf(buffer, size, "-");
	else if (json_array_size(interval) == 2)
		snprintf(buffer, size, "%.2fx [%.2f, %.2f]", json_number_value(value),
			 json_number_value(json_array_get(interval, 0)),
			 json_number_value(json_array_get(interval, 1)));
	else
		snprintf(buffer, size, "%.2fx", json_number_value(value));
}

static void
command_replay__print_header(const struct kagent_run_log *log, FILE *stream)
{
	fprintf(stream, "replay of run %s (%s): %zu variant%s, from %s\n\n", log->run_id,
		log->problem_name != NULL ? log->problem_name : "?", log->count,
		log->count == 1 ? "" : "s", log->trace_path);
	fprintf(stream, "%-8s %-14s %-14s %-22s %-22s %s\n", "VARIANT", "STATUS THEN", "STATUS NOW",
		"EAGER THEN", "EAGER NOW", "REPRODUCED");
}

static void
command_replay__print_row(const json_t *row, FILE *stream)
{
	const json_t *eager = json_object_get(row, "speedup_vs_eager");
	const char *now = json_string_value(json_object_get(row, "status_now"));
	char then_text[64], now_text[64];

	command_replay__format_speedup(then_text, sizeof then_text, eager, "then");
	command_replay__format_speedup(now_text, sizeof now_text, eager, "now");
	fprintf(stream, "%-8s %-14s %-14s %-22s %-22s %s: %s\n",
		json_string_value(json_object_get(row, "variant")),
		json_string_value(json_object_get(row, "status_then"))
		    ? json_string_value(json_object_get(row, "status_then"))
		    : "?",
		now != NULL ? now : "error", then_text, now_text,
		json_is_true(json_object_get(row, "verified")) ? "yes" : "no",
		json_string_value(json_object_get(row, "reason")));
	fflush(stream);
}

/* Re-evaluates one variant from a copy of its source in folder. A new row. */
static json_t *
command_replay__variant(const struct kagent_run_log *log, const struct kagent_run_variant *variant,
			const struct command_replay__settings *settings, const char *folder)
{
	const json_t *config = json_object_get(json_object_get(log->start, "config"), "evaluation");
	struct kagent_evaluation_options options = {
	    .problem_path = log->problem_path,
	    .measure_compile = !json_is_false(json_object_get(config, "measure_compile")),
	    .credit_threshold = json_number_value(json_object_get(config, "credit_threshold")),
	    .call_timeout_seconds =
		(int)json_integer_value(json_object_get(config, "call_timeout_seconds")),
	    .compile_timeout_seconds =
		(int)json_integer_value(json_object_get(config, "compile_timeout_seconds")),
	    .device_queues = (int)json_integer_value(json_object_get(config, "device_queues")),
	    .timing_processes =
		(int)json_integer_value(json_object_get(config, "timing_processes")),
	};
	char *path = kagent_asprintf("%s/%s.py", folder, variant->id), *cause = NULL;
	json_t *now = NULL, *row;

	kagent_evidence_options_from_verdict(variant->verdict, &options);
	if (settings->device != NULL)
		options.device = settings->device;
	options.gpu_index = settings->gpu_index;
	options.candidate_path = path;
	if (kagent_fileio_write_atomic(path, variant->source, strlen(variant->source), &cause) <
	    0) {
		now = kagent_verdict_error_json("io", cause);
	} else if (kagent_evaluation_run_sync(&options, &now) == 0) {
		row = kagent_evidence_compare(variant->verdict, now, settings->interval_floor);
		json_object_del(row, "schema");
		json_object_set_new(row, "variant", json_string(variant->id));
		json_object_set_new(
		    row, "speedup_then",
		    json_real(kagent_variants_verdict_speedup(log->baseline, variant->verdict)));
		json_object_set_new(row, "speedup_now",
				    json_real(kagent_variants_verdict_speedup(log->baseline, now)));
		json_object_set_new(row, "seed", json_integer((json_int_t)options.seed));
		json_object_set_new(row, "error", json_null());
		json_object_set_new(row, "verdict", now);
		goto out;
	}
	/* No verdict now (no GPU, a worker that failed): the row says why, nothing matches. */
	row =
	    json_pack("{s:s, s:O?, s:n, s:b, s:b, s:s?, s:O, s:n}", "variant", variant->id,
		      "status_then", json_object_get(variant->verdict, "status"), "status_now",
		      "status_match", 0, "verified", 0, "reason",
		      json_string_value(json_object_get(now, "message")), "error", now, "verdict");
	json_decref(now);
out:
	free(path);
	free(cause);
	return row;
}

/* The variant with the highest credited speedup against the run's baseline now, or NULL. */
static const char *
command_replay__best_now(const json_t *rows)
{
	const char *best = NULL;
	double fastest = 0;
	const json_t *row;
	size_t index;

	json_array_foreach(rows, index, row)
	{
		double speedup = json_number_value(json_object_get(row, "speedup_now"));

		if (speedup > fastest) {
			fastest = speedup;
			best = json_string_value(json_object_get(row, "variant"));
		}
	}
	return best;
}

/* Replays every variant into *result_out (the whole comparison). Returns 0, or -ENODEV with
 * *cause when this machine has no GPU for it: then no variant can run here. */
static int
command_replay__run(const struct kagent_run_log *log,
		    const struct command_replay__settings *settings, const char *folder,
		    json_t **result_out, char **cause)
{
	json_t *rows = json_array(), *row;
	const char *best_now, *reason, *error;
	size_t index, matching = 0, verified = 0;
	int same_gpu = 1, holds, reproduced;

	if (!settings->json)
		command_replay__print_header(log, stdout);
	for (index = 0; index < log->count; index++) {
		row = command_replay__variant(log, &log->variants[index], settings, folder);
		error = json_string_value(json_object_get(json_object_get(row, "error"), "error"));
		if (error != NULL && strcmp(error, "no_gpu") == 0) {
			*cause =
			    kagent_asprintf("%s; to replay on the CPU instead, add --device cpu",
					    json_string_value(json_object_get(row, "reason")));
			json_decref(row);
			json_decref(rows);
			return -ENODEV;
		}
		matching += json_is_true(json_object_get(row, "status_match"));
		verified += json_is_true(json_object_get(row, "verified"));
		same_gpu = same_gpu && json_is_true(json_object_get(row, "same_gpu"));
		if (!settings->json)
			command_replay__print_row(row, stdout);
		json_array_append_new(rows, row);
	}
	best_now = command_replay__best_now(rows);
	holds = (log->best == NULL && best_now == NULL) ||
		(log->best != NULL && best_now != NULL && strcmp(log->best, best_now) == 0);
	/* On another GPU model or the CPU speeds differ for good reasons: only statuses count. */
	reproduced = verified == log->count && (!same_gpu || holds || log->count == 0);
	reason = verified < log->count ? "some variants did not reproduce (see their reasons)"
		 : !same_gpu	       ? "every status reproduced (another GPU model or the CPU: "
					 "speeds not compared)"
		 : holds ? "every status reproduced, the speedups' intervals overlap and the best "
			   "holds"
			 : "every variant reproduced, but another variant would be the best";
	*result_out = json_pack(
	    "{s:s, s:s, s:s, s:s?, s:s, s:s, s:o, s:{s:s?, s:s?, s:b}, s:I, s:I, s:b, "
	    "s:s}",
	    "schema", REPLAY_SCHEMA, "trace", log->trace_path, "run_id", log->run_id, "problem",
	    log->problem_name, "problem_path", log->problem_path, "baseline",
	    kagent_target_baseline_name(log->baseline), "variants", rows, "best", "then", log->best,
	    "now", best_now, "holds", holds, "variants_total", (json_int_t)log->count,
	    "statuses_matching", (json_int_t)matching, "reproduced", reproduced, "reason", reason);
	return 0;
}

static void
command_replay__print_summary(const json_t *result, FILE *stream)
{
	const json_t *best = json_object_get(result, "best");
	const char *then = json_string_value(json_object_get(best, "then"));
	const char *now = json_string_value(json_object_get(best, "now"));

	fprintf(stream, "\nstatuses: %lld of %lld as recorded\n",
		(long long)json_integer_value(json_object_get(result, "statuses_matching")),
		(long long)json_integer_value(json_object_get(result, "variants_total")));
	fprintf(stream, "best:     %s then, %s now (against %s): %s\n", then ? then : "none",
		now ? now : "none", json_string_value(json_object_get(result, "baseline")),
		json_is_true(json_object_get(best, "holds")) ? "holds" : "would change");
	fprintf(stream, "%s: %s\n",
		json_is_true(json_object_get(result, "reproduced")) ? "reproduced"
								    : "not reproduced",
		json_string_value(json_object_get(result, "reason")));
}

static int
command_replay__handler(int argc, char **argv)
{
	struct command_replay__settings settings = {0};
	struct kagent_daemon_call call;
	struct kagent_run_source *source = NULL;
	struct kagent_run_log *log = NULL;
	const char *kind = "replay", *usage = NULL, *gpu, *floor;
	json_t *traces = json_array(), *result = NULL;
	char *cause = NULL, *folder = NULL, *cache = NULL, *end = NULL;
	int status = 0, skipped = 0;
	long long number = 0;

	if (!kagent_daemon_call_parse(&call, &kagent_command_replay, argc, argv, &status))
		goto out;
	settings.json = call.json;
	settings.device = call.values[COMMAND_REPLAY_DEVICE];
	gpu = call.values[COMMAND_REPLAY_GPU];
	floor = call.values[COMMAND_REPLAY_INTERVAL_FLOOR];
	settings.interval_floor = KAGENT_EVIDENCE_INTERVAL_FLOOR;
	if (gpu != NULL)
		number = strtoll(gpu, &end, 10);
	if (gpu != NULL && (*end != '\0' || end == gpu || number < 0 || number > INT_MAX))
		usage = "--gpu needs a GPU index";
	else if (floor != NULL &&
		 kagent_evidence_interval_floor_parse(floor, &settings.interval_floor) < 0)
		usage = "--interval-floor needs a percentage, 0 to 100";
	else if (settings.device != NULL && strcmp(settings.device, "cuda") != 0 &&
		 strcmp(settings.device, "cpu") != 0)
		usage = "--device must be cuda or cpu";
	else if (argc - call.first_operand != 1)
		usage = "give exactly one session id or trace file";
	if (usage != NULL) {
		status = kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "usage", usage);
		goto out;
	}
	settings.gpu_index = (int)number;
	source = kagent_run_source_create(&call);
	if (kagent_run_source_collect(source, argv[call.first_operand], traces, &skipped, &cause) <
	    0)
		goto failed;
	if (json_array_size(traces) != 1) {
		cause = kagent_asprintf("%s names %zu runs: replay one session or trace at a time",
					argv[call.first_operand], json_array_size(traces));
		goto failed;
	}
	if (kagent_run_log_read(json_string_value(json_array_get(traces, 0)), &log, &cause) < 0)
		goto failed;
	/* The candidates' copies live in kagent's cache folder, which the sandbox may read. */
	if (kagent_paths_cache_dir(&cache, &cause) < 0)
		goto failed;
	folder = kagent_asprintf("%s/replay-%s-XXXXXX", cache, log->run_id);
	if (mkdtemp(folder) == NULL) {
		cause = kagent_asprintf("cannot create a folder for the variants in %s", cache);
		free(folder);
		folder = NULL;
		goto failed;
	}
	if (command_replay__run(log, &settings, folder, &result, &cause) < 0) {
		kind = "no_gpu";
		goto failed;
	}
	if (settings.json) {
		json_dumpf(result, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		command_replay__print_summary(result, stdout);
	}
	status = json_is_true(json_object_get(result, "reproduced")) ? 0 : 1;
	goto out;
failed:
	status = kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, kind,
					 cause != NULL ? cause : "failed");
out:
	if (folder != NULL) {
		free(cause);
		cause = NULL;
		kagent_paths_remove_tree(folder, &cause);
	}
	json_decref(result);
	json_decref(traces);
	kagent_run_log_free(log);
	kagent_run_source_free(source);
	free(folder);
	free(cache);
	free(cause);
	return status;
}

const struct kagent_command kagent_command_replay = {
    .name = "replay",
    .operands = "SESSION|TRACE",
    .help = "re-evaluate every variant of a finished run here, with its seeds; compare verdicts",
    .options = command_replay__options,
    .handler = command_replay__handler,
};
