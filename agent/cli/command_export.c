/*
 * `kagent export (BATCH|SESSION|RUN-DIR|TRACE)... --format jsonl|parquet [--only correct|credited]
 * -o FILE`: runs as data (docs/dataset.md). Every evaluated variant of the runs named becomes
 * one record (dataset.h), deduplicated by its problem's and its source's sha256 (the first run
 * to evaluate a source for a problem keeps it); the records are written as JSON lines here, one
 * run in memory at a time, and converted to Parquet as they come by
 * kagent_runner/export_parquet.py in the runner's Python (pyarrow), the only part that needs a
 * Parquet library.
 */
#include "daemon_call.h"
#include "run_source.h"
#include "runner_script.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/records/dataset.h"
#include "kagent/records/run_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	COMMAND_EXPORT_FORMAT,
	COMMAND_EXPORT_ONLY,
	COMMAND_EXPORT_OUTPUT,
	COMMAND_EXPORT_STORE,
};

/* clang-format off */
static const struct kagent_command_option command_export__options[] = {
	[COMMAND_EXPORT_FORMAT] = {"format", 0, "jsonl|parquet", "the file's format: JSON lines, "
		"or Parquet (pyarrow, in the runner's Python)", "jsonl", NULL},
	[COMMAND_EXPORT_ONLY] = {"only", 0, "correct|credited", "keep only correct variants, or "
		"only correct and credited ones (the credit rule)", "every evaluated variant", NULL},
	[COMMAND_EXPORT_OUTPUT] = {"output", 'o', "FILE", "where to write the records (replaced "
		"whole)", "stdout for jsonl; parquet needs a file", NULL},
	[COMMAND_EXPORT_STORE] = KAGENT_RUN_SOURCE_STORE_OPTION,
	KAGENT_DAEMON_CALL_OPTIONS,
	{0},
};
/* clang-format on */

/* What the records of all runs add up to. */
struct command_export__totals {
	size_t runs, written, duplicates, filtered;
	int skipped; /* sessions of a batch without a trace */
};

/* Writes the kept, new records of the trace at path to stream, one run in memory at a time. */
static int
command_export__run(const char *path, enum kagent_dataset_filter filter, json_t *seen, FILE *stream,
		    struct command_export__totals *totals, char **cause)
{
	struct kagent_run_log *log = NULL;
	size_t index;
	int status = kagent_run_log_read(path, &log, cause);

	if (status < 0)
		return status;
	totals->runs++;
	for (index = 0; index < log->count; index++) {
		json_t *record = kagent_dataset_record(log, &log->variants[index]);
		/* the same source for another problem is another example */
		char *key = kagent_asprintf("%s %s", log->problem_sha256,
					    json_string_value(json_object_get(record, "id")));
		char *line;

		if (!kagent_dataset_keep(filter, record)) {
			totals->filtered++;
		} else if (json_object_get(seen, key) != NULL) {
			totals->duplicates++;
		} else {
			json_object_set_new(seen, key, json_true());
			line = json_dumps(record, JSON_COMPACT | JSON_PRESERVE_ORDER);
			fputs(line, stream);
			fputc('\n', stream);
			free(line);
			totals->written++;
		}
		json_decref(record);
		free(key);
	}
	kagent_run_log_free(log);
	return 0;
}

/*
 * Where the records go: stdout, or a temporary file beside the output renamed over it at the
 * end (JSON lines written here, or Parquet written by export_parquet.py from the lines on its
 * stdin), so a failed export leaves no file and a reader never sees half of one.
 */
struct command_export__sink {
	FILE *stream;
	char *temporary; /* NULL: stdout */
	struct kagent_runner_script script;
	int parquet;
};

static int
command_export__open(struct command_export__sink *sink, int parquet, const char *output,
		     char **cause)
{
	const char *arguments[2] = {NULL, NULL};
	int status;

	memset(sink, 0, sizeof *sink);
	sink->parquet = parquet;
	if (output == NULL) {
		sink->stream = stdout;
		return 0;
	}
	sink->temporary = kagent_asprintf("%s.tmp-%d", output, (int)getpid());
	if (parquet) {
		arguments[0] = sink->temporary;
		status = kagent_runner_script_start(&sink->script, "export_parquet.py", arguments,
						    cause);
		sink->stream = status == 0 ? sink->script.input : NULL;
	} else {
		sink->stream = fopen(sink->temporary, "w");
		status = sink->stream != NULL ? 0 : -errno;
		if (status < 0)
			*cause = kagent_asprintf("cannot write %s: %s", sink->temporary,
						 strerror(-status));
	}
	if (status < 0) {
		free(sink->temporary);
		sink->temporary = NULL;
	}
	return status;
}

/* Ends the records: renames the file into place when ok (and everything was written), else
 * removes it. Returns 0, or a negative errno with *cause. */
static int
command_export__close(struct command_export__sink *sink, int ok, const char *output, char **cause)
{
	char *python = NULL;
	int status = 0, exit_status;

	if (sink->stream == stdout) {
		fflush(stdout);
		return 0;
	}
	if (sink->parquet) {
		python = kagent_strdup(sink->script.python);
		exit_status = kagent_runner_script_finish(&sink->script, !ok);
		if (ok && exit_status == KAGENT_RUNNER_SCRIPT_EXIT_MISSING_MODULE)
			*cause = kagent_asprintf(
			    "--format parquet needs pyarrow in the runner's Python (%s): install "
			    "it with `%s -m pip install pyarrow`, or name another Python with "
			    "KAGENT_PYTHON",
			    python, python);
		else if (ok && exit_status != 0)
			*cause = kagent_asprintf("%s kagent_runner/export_parquet.py failed (exit "
						 "status %d); its messages are above",
						 python, exit_status);
		status = ok && exit_status != 0 ? -EIO : 0;
	} else if ((ferror(sink->stream) | fclose(sink->stream)) && ok) {
		*cause = kagent_asprintf("cannot write %s: %s", sink->temporary, strerror(errno));
		status = -EIO;
	}
	if (ok && status == 0 && rename(sink->temporary, output) != 0) {
		status = -errno;
		*cause = kagent_asprintf("cannot rename %s to %s: %s", sink->temporary, output,
					 strerror(-status));
	}
	if (!ok || status < 0)
		unlink(sink->temporary);
	free(sink->temporary);
	free(python);
	return status;
}

/* The summary: one line on stderr, and with --json one object on stdout. */
static void
command_export__summary(const struct kagent_daemon_call *call, const char *format,
			const char *output, const struct command_export__totals *totals)
{
	if (call->json) {
		json_t *summary = json_pack(
		    "{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:i}", "schema", "kagent.export/1",
		    "output", output, "format", format, "records", (json_int_t)totals->written,
		    "runs", (json_int_t)totals->runs, "duplicates", (json_int_t)totals->duplicates,
		    "filtered", (json_int_t)totals->filtered, "skipped_sessions", totals->skipped);

		kagent_daemon_call_print_json(summary);
		json_decref(summary);
	}
	fprintf(stderr,
		"kagent export: %zu record%s from %zu run%s to %s (%zu duplicate source%s, %zu "
		"left out by --only%s)\n",
		totals->written, totals->written == 1 ? "" : "s", totals->runs,
		totals->runs == 1 ? "" : "s", output != NULL ? output : "stdout",
		totals->duplicates, totals->duplicates == 1 ? "" : "s", totals->filtered,
		totals->skipped > 0 ? "; sessions that never started have no trace and were skipped"
				    : "");
}

static int
command_export__handler(int argc, char **argv)
{
	const char *format, *output, *only;
	struct command_export__totals totals = {0};
	enum kagent_dataset_filter filter = KAGENT_DATASET_ALL;
	struct kagent_daemon_call call;
	struct kagent_run_source *source = NULL;
	struct command_export__sink sink = {0};
	json_t *traces = json_array(), *seen = json_object(), *path;
	char *cause = NULL;
	const char *usage = NULL;
	int status = 0, parquet, operand;
	size_t index;

	if (!kagent_daemon_call_parse(&call, &kagent_command_export, argc, argv, &status))
		goto out;
	format = call.values[COMMAND_EXPORT_FORMAT] ? call.values[COMMAND_EXPORT_FORMAT] : "jsonl";
	output = call.values[COMMAND_EXPORT_OUTPUT];
	if (output != NULL && strcmp(output, "-") == 0)
		output = NULL;
	only = call.values[COMMAND_EXPORT_ONLY];
	parquet = strcmp(format, "parquet") == 0;
	if (!parquet && strcmp(format, "jsonl") != 0)
		usage = "--format must be jsonl or parquet";
	else if (only != NULL && kagent_dataset_filter_from_name(only) < 0)
		usage = "--only must be correct or credited";
	else if (parquet && output == NULL)
		usage = "--format parquet needs -o FILE";
	else if (call.json && output == NULL)
		usage = "--json prints a summary on stdout, so the records need -o FILE";
	else if (call.first_operand >= argc)
		usage = "name at least one batch, session, run folder or trace";
	if (usage != NULL) {
		status = kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "usage", usage);
		goto out;
	}
	if (only != NULL)
		filter = (enum kagent_dataset_filter)kagent_dataset_filter_from_name(only);
	source = kagent_run_source_create(&call);
	for (operand = call.first_operand; operand < argc; operand++) {
		if (kagent_run_source_collect(source, argv[operand], traces, &totals.skipped,
					      &cause) < 0)
			goto failed;
	}
	if (command_export__open(&sink, parquet, output, &cause) < 0)
		goto failed;
	json_array_foreach(traces, index, path)
	{
		if (command_export__run(json_string_value(path), filter, seen, sink.stream, &totals,
					&cause) < 0) {
			command_export__close(&sink, 0, output, &cause);
			goto failed;
		}
	}
	if (command_export__close(&sink, 1, output, &cause) < 0)
		goto failed;
	command_export__summary(&call, format, output, &totals);
	goto out;
failed:
	status = kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "export",
					 cause != NULL ? cause : "failed");
out:
	kagent_run_source_free(source);
	json_decref(traces);
	json_decref(seen);
	free(cause);
	return status;
}

const struct kagent_command kagent_command_export = {
    .name = "export",
    .operands = "(BATCH|SESSION|RUN-DIR|TRACE)...",
    .help = "write every evaluated variant of runs as dataset records (JSONL or Parquet)",
    .options = command_export__options,
    .handler = command_export__handler,
};
