/*
 * `kagent report ID`: a batch's report from kagentd (GET /v1/batches/ID/report, built by
 * agent/daemon/report.c): a table of its problems and the summary per level and overall
 * (correct rate, fast_p against eager PyTorch and torch.compile, geometric means); --json the
 * object as the daemon sent it, --csv the rows or --summary-csv the summary (report.h's CSV).
 * --plot draws the speedups per level into a PNG with matplotlib, in the runner's Python
 * (sandbox/runner/kagent_runner/plot_report.py, the report on its stdin): the C side has no
 * plotting library and the runner's Python is the one kagent already depends on
 * (runner_script.h).
 */
#include "daemon_call.h"
#include "runner_script.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/daemon/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The widest problem name the table makes room for; longer ones push their line out. */
#define REPORT_PROBLEM_WIDTH_MAX 40

enum {
	REPORT_OPTION_CSV,
	REPORT_OPTION_SUMMARY_CSV,
	REPORT_OPTION_PLOT,
};

/* clang-format off */
static const struct kagent_command_option command_report__options[] = {
	[REPORT_OPTION_CSV] = {"csv", 0, NULL, "print the rows as CSV: a header line, then one "
		"line per problem", NULL, NULL},
	[REPORT_OPTION_SUMMARY_CSV] = {"summary-csv", 0, NULL, "print the summary as CSV: a "
		"header line, the line of all problems, then one per level", NULL, NULL},
	[REPORT_OPTION_PLOT] = {"plot", 0, "FILE.png", "also draw the speedups per level into "
		"FILE.png (matplotlib, in the runner's Python)", NULL, NULL},
	KAGENT_DAEMON_CALL_OPTIONS,
	{0},
};
/* clang-format on */

/* A number of an object as PREFIX NUMBER (digits after the point), or "-" when it is null or
 * missing. */
static void
command_report__format(char *buffer, size_t size, const json_t *object, const char *key,
		       const char *prefix, int digits)
{
	const json_t *value = json_object_get(object, key);

	if (json_is_number(value))
		snprintf(buffer, size, "%s%.*f", prefix, digits, json_number_value(value));
	else
		snprintf(buffer, size, "-");
}

/* "50%/25%/0%": fast_0, fast_1 and fast_2 against basis. */
static void
command_report__format_fast(char *buffer, size_t size, const json_t *group, const char *basis)
{
	size_t used = 0;
	int threshold;

	buffer[0] = '\0';
	for (threshold = 0; threshold <= 2 && used < size; threshold++) {
		char key[32];
		const json_t *value;

		snprintf(key, sizeof key, "fast_%d_%s", threshold, basis);
		value = json_object_get(group, key);
		if (json_is_number(value))
			used += (size_t)snprintf(buffer + used, size - used, "%s%.0f%%",
						 threshold > 0 ? "/" : "",
						 100 * json_number_value(value));
		else
			used += (size_t)snprintf(buffer + used, size - used, "%s-",
						 threshold > 0 ? "/" : "");
	}
}

static void
command_report__print_rows(const json_t *rows, FILE *stream)
{
	char level[16], eager[32], compile[32], turns[32], tokens[32], cost[32], gpu[32], wall[32];
	const json_t *row;
	const char *problem;
	size_t index;
	int width = 7;

	json_array_foreach(rows, index, row)
	{
		problem = json_string_value(json_object_get(row, "problem"));
		if (problem != NULL && (int)strlen(problem) > width)
			width = (int)strlen(problem);
	}
	if (width > REPORT_PROBLEM_WIDTH_MAX)
		width = REPORT_PROBLEM_WIDTH_MAX;
	fprintf(stream, "%-*s %5s %-14s %8s %8s %8s %5s %9s %8s %8s %8s\n", width, "PROBLEM",
		"LEVEL", "STATUS", "EAGER", "COMPILE", "CREDITED", "TURNS", "TOKENS", "COST",
		"GPU-S", "WALL-S");
	json_array_foreach(rows, index, row)
	{
		problem = json_string_value(json_object_get(row, "problem"));
		command_report__format(level, sizeof level, row, "level", "", 0);
		kagent_daemon_call_format_speedup(eager, sizeof eager,
						  json_object_get(row, "speedup_vs_eager"));
		kagent_daemon_call_format_speedup(compile, sizeof compile,
						  json_object_get(row, "speedup_vs_compile"));
		command_report__format(turns, sizeof turns, row, "turns", "", 0);
		command_report__format(tokens, sizeof tokens, row, "tokens", "", 0);
		command_report__format(cost, sizeof cost, row, "cost", "$", 2);
		command_report__format(gpu, sizeof gpu, row, "gpu_seconds", "", 1);
		command_report__format(wall, sizeof wall, row, "wall_seconds", "", 0);
		fprintf(stream, "%-*s %5s %-14s %8s %8s %8s %5s %9s %8s %8s %8s\n", width,
			problem != NULL ? problem : "-", level,
			json_string_value(json_object_get(row, "status"))
			    ? json_string_value(json_object_get(row, "status"))
			    : "-",
			eager, compile,
			json_is_true(json_object_get(row, "credited")) ? "yes" : "no", turns,
			tokens, cost, gpu, wall);
	}
}

static void
command_report__print_group(const char *label, const json_t *group, FILE *stream)
{
	char correct[48], rate[16], fast_eager[32], fast_compile[32], geomean_eager[32],
	    geomean_compile[32];

	snprintf(rate, sizeof rate, "-");
	if (json_is_number(json_object_get(group, "correct_rate")))
		snprintf(rate, sizeof rate, "%.0f%%",
			 100 * json_number_value(json_object_get(group, "correct_rate")));
	snprintf(correct, sizeof correct, "%lld (%s)",
		 (long long)json_integer_value(json_object_get(group, "correct")), rate);
	command_report__format_fast(fast_eager, sizeof fast_eager, group, "eager");
	command_report__format_fast(fast_compile, sizeof fast_compile, group, "compile");
	kagent_daemon_call_format_speedup(geomean_eager, sizeof geomean_eager,
					  json_object_get(group, "geomean_eager"));
	kagent_daemon_call_format_speedup(geomean_compile, sizeof geomean_compile,
					  json_object_get(group, "geomean_compile"));
	fprintf(stream, "%-8s %8lld %-12s %8lld %-14s %-14s %8s %8s\n", label,
		(long long)json_integer_value(json_object_get(group, "problems")), correct,
		(long long)json_integer_value(json_object_get(group, "credited")), fast_eager,
		fast_compile, geomean_eager, geomean_compile);
}

static void
command_report__print(const json_t *report, FILE *stream)
{
	const json_t *summary = json_object_get(report, "summary"), *group, *level;
	size_t index;

	fprintf(stream, "batch %s\n\n",
		json_string_value(json_object_get(report, "batch"))
		    ? json_string_value(json_object_get(report, "batch"))
		    : "-");
	command_report__print_rows(json_object_get(report, "rows"), stream);
	/* fast_p: the share of ALL the level's problems that are correct, credited and faster than
	 * p times the baseline; geomeans over the credited correct ones (report.h). */
	fprintf(stream, "\n%-8s %8s %-12s %8s %-14s %-14s %8s %8s\n", "LEVEL", "PROBLEMS",
		"CORRECT", "CREDITED", "FAST_0/1/2", "FAST_0/1/2", "GEOMEAN", "GEOMEAN");
	fprintf(stream, "%-8s %8s %-12s %8s %-14s %-14s %8s %8s\n", "", "", "", "", "vs eager",
		"vs compile", "eager", "compile");
	json_array_foreach(json_object_get(summary, "levels"), index, group)
	{
		char label[32];

		level = json_object_get(group, "level");
		if (json_is_integer(level))
			snprintf(label, sizeof label, "%lld", (long long)json_integer_value(level));
		else
			snprintf(label, sizeof label, "none");
		command_report__print_group(label, group, stream);
	}
	command_report__print_group("all", json_object_get(summary, "overall"), stream);
	/* Speedups from different GPU models are not comparable: never mixed silently. */
	if (json_is_true(json_object_get(summary, "mixed_gpus"))) {
		const json_t *name;

		fprintf(stream, "\nnote: these speedups were measured on different GPU models:");
		json_array_foreach(json_object_get(summary, "gpu_names"), index, name)
		    fprintf(stream, "%s %s", index > 0 ? "," : "", json_string_value(name));
		fprintf(stream, " (each row's gpu_name in --json or --csv says which)\n");
	} else if (json_array_size(json_object_get(summary, "gpu_names")) == 1) {
		fprintf(
		    stream, "\nGPU: %s\n",
		    json_string_value(json_array_get(json_object_get(summary, "gpu_names"), 0)));
	}
}

/* Runs plot_report.py in the runner's Python with the report on its stdin. Returns 0, or the
 * exit status with the failure reported. */
static int
command_report__plot(const struct kagent_daemon_call *call, const json_t *report,
		     const char *output)
{
	const char *arguments[] = {output, NULL};
	char *python = NULL, *cause = NULL, *message = NULL, *text = NULL;
	int exit_status = 0, status = 0;

	text = json_dumps(report, JSON_COMPACT);
	if (kagent_runner_script_run("plot_report.py", arguments, text, strlen(text), &exit_status,
				     &python, &cause) < 0) {
		message = kagent_asprintf("--plot: %s", cause);
		status = kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "plot", message);
		goto out;
	}
	if (exit_status == 0)
		goto out;
	if (exit_status == KAGENT_RUNNER_SCRIPT_EXIT_MISSING_MODULE)
		message = kagent_asprintf("--plot needs matplotlib in the runner's Python (%s): "
					  "install it with `%s -m pip install matplotlib`, or "
					  "name another Python with KAGENT_PYTHON",
					  python, python);
	else
		message = kagent_asprintf(
		    "--plot: %s kagent_runner/plot_report.py failed (exit status %d); its "
		    "messages are above",
		    python, exit_status);
	status = kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "plot", message);
out:
	free(python);
	free(cause);
	free(message);
	free(text);
	return status;
}

static int
command_report__handler(int argc, char **argv)
{
	struct kagent_daemon_call call;
	json_t *report = NULL;
	char *path = NULL, *csv = NULL;
	int status, formats;

	if (!kagent_daemon_call_parse(&call, &kagent_command_report, argc, argv, &status))
		return status;
	formats = call.json + (call.values[REPORT_OPTION_CSV] != NULL) +
		  (call.values[REPORT_OPTION_SUMMARY_CSV] != NULL);
	if (formats > 1)
		return kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "usage",
					       "choose one of --json, --csv and --summary-csv");
	if (argc - call.first_operand != 1 || strncmp(argv[call.first_operand], "b-", 2) != 0)
		return kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "usage",
					       "give one batch id (b-...)");
	path = kagent_daemon_call_path("batches", argv[call.first_operand], "/report");
	status = kagent_daemon_call_request(&call, "GET", path, NULL, &report, NULL, NULL);
	if (status != 0)
		goto out;
	/* The plot first: a failure then leaves stdout with the error object alone. */
	if (call.values[REPORT_OPTION_PLOT] != NULL &&
	    (status = command_report__plot(&call, report, call.values[REPORT_OPTION_PLOT])) != 0)
		goto out;
	if (call.json)
		kagent_daemon_call_print_json(report);
	else if (call.values[REPORT_OPTION_CSV] != NULL)
		fputs(csv = kagent_report_rows_csv(report), stdout);
	else if (call.values[REPORT_OPTION_SUMMARY_CSV] != NULL)
		fputs(csv = kagent_report_summary_csv(report), stdout);
	else
		command_report__print(report, stdout);
	if (call.values[REPORT_OPTION_PLOT] != NULL)
		fprintf(stderr, "kagent report: the speedups per level are drawn in %s\n",
			call.values[REPORT_OPTION_PLOT]);
out:
	json_decref(report);
	free(path);
	free(csv);
	return status;
}

const struct kagent_command kagent_command_report = {
    .name = "report",
    .operands = "BATCH-ID",
    .help = "show a batch's report from kagentd: per problem, and per level (fast_p, geomeans)",
    .options = command_report__options,
    .handler = command_report__handler,
};
