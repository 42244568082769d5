/*
 * The batch report (see include/kagent/daemon/report.h): rows from the
 * sessions' final summaries, then KernelBench's numbers over them, as JSON and
 * as CSV. Pure arithmetic on JSON: no store, no I/O.
 */
#include "kagent/daemon/report.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The thresholds of fast_p (speedup strictly above p). */
static const double report__fast_thresholds[] = {0.0, 1.0, 2.0};
#define REPORT_FAST_COUNT (sizeof report__fast_thresholds / sizeof report__fast_thresholds[0])

/* What the summary adds up for one group of problems. */
struct report__group {
	int has_level; /* 0: the overall group or the problems without a level */
	json_int_t level;
	int problems;
	int correct;
	int credited;
	int fast_eager[REPORT_FAST_COUNT];
	int fast_compile[REPORT_FAST_COUNT];
	double log_sum_eager; /* sum of log speedups, for the geometric mean */
	int log_count_eager;
	double log_sum_compile;
	int log_count_compile;
};

static double
report__number(const json_t *object, const char *key)
{
	const json_t *value = json_object_get(object, key);

	return json_is_number(value) ? json_number_value(value) : 0.0;
}

/* A speedup as the row shows it: the number, or null when not measured (the store's
 * variants hold 0 for that). */
static json_t *
report__speedup(const json_t *source, const char *key)
{
	const json_t *value = json_object_get(source, key);

	return json_is_number(value) && json_number_value(value) > 0
		   ? json_real(json_number_value(value))
		   : json_null();
}

/* One row from one session (see store.h for its fields, docs/traces.md for the result's). */
static json_t *
report__row(const json_t *session)
{
	const json_t *result = json_object_get(session, "result");
	const json_t *confirmation = json_object_get(result, "confirmation");
	const json_t *totals = json_object_get(result, "totals");
	const char *state = json_string_value(json_object_get(session, "state"));
	const char *status = json_string_value(json_object_get(confirmation, "status"));
	const json_t *level = json_object_get(session, "level");
	const json_t *speedups = confirmation, *evaluated;
	double input_tokens = report__number(totals, "input_tokens");
	double output_tokens = report__number(totals, "output_tokens");
	int correct, credited;

	/* No confirmed best: the best variant as evaluated (uncredited, or never committed), so
	 * that a correct result the credit rule turned down reads as correct, not as missing. */
	if (status == NULL && (evaluated = json_object_get(result, "evaluated")) != NULL) {
		status = json_string_value(json_object_get(evaluated, "status"));
		speedups = evaluated;
	}
	correct = status != NULL && strcmp(status, "correct") == 0;
	/* A verdict from before the credit rule has no credited field and keeps its speedup. */
	credited = correct && !json_is_false(json_object_get(speedups, "credited"));
	if (status == NULL)
		status = state != NULL && strcmp(state, "done") == 0 ? "no_variant"
			 : state != NULL			     ? state
								     : "unknown";
	return json_pack(
	    "{s:O?, s:O?, s:o, s:s?, s:s, s:b, s:b, s:o, s:o, s:I, s:I, s:I, s:I, s:f, s:f, s:f, "
	    "s:o}",
	    "session", json_object_get(session, "id"), "problem",
	    json_object_get(session, "problem"), "level",
	    json_is_integer(level) ? json_integer(json_integer_value(level)) : json_null(), "state",
	    state, "status", status, "correct", correct, "credited", credited, "speedup_vs_eager",
	    report__speedup(speedups, "speedup_vs_eager"), "speedup_vs_compile",
	    report__speedup(speedups, "speedup_vs_compile"), "turns",
	    (json_int_t)report__number(totals, "turns"), "input_tokens", (json_int_t)input_tokens,
	    "output_tokens", (json_int_t)output_tokens, "tokens",
	    (json_int_t)(input_tokens + output_tokens), "cost", report__number(totals, "cost"),
	    "gpu_seconds", report__number(totals, "gpu_seconds"), "wall_seconds",
	    report__number(totals, "wall_seconds"), "gpu_name",
	    json_is_string(json_object_get(session, "gpu_name"))
		? json_incref(json_object_get(session, "gpu_name"))
		: json_null());
}

/* Counts a row's speedup against one baseline into fast and the geometric mean. */
static void
report__add_speedup(const json_t *row, const char *key, int fast[REPORT_FAST_COUNT],
		    double *log_sum, int *log_count)
{
	const json_t *value = json_object_get(row, key);
	double speedup;
	size_t index;

	if (!json_is_true(json_object_get(row, "credited")) || !json_is_number(value))
		return;
	speedup = json_number_value(value);
	for (index = 0; index < REPORT_FAST_COUNT; index++)
		if (speedup > report__fast_thresholds[index])
			fast[index]++;
	if (speedup > 0) {
		*log_sum += log(speedup);
		(*log_count)++;
	}
}

static void
report__add_row(struct report__group *group, const json_t *row)
{
	group->problems++;
	if (!json_is_true(json_object_get(row, "correct")))
		return;
	group->correct++;
	if (json_is_true(json_object_get(row, "credited")))
		group->credited++;
	report__add_speedup(row, "speedup_vs_eager", group->fast_eager, &group->log_sum_eager,
			    &group->log_count_eager);
	report__add_speedup(row, "speedup_vs_compile", group->fast_compile, &group->log_sum_compile,
			    &group->log_count_compile);
}

static json_t *
report__fraction(int count, int total)
{
	return json_real(total > 0 ? (double)count / total : 0.0);
}

static json_t *
report__geomean(double log_sum, int count)
{
	return count > 0 ? json_real(exp(log_sum / count)) : json_null();
}

static json_t *
report__group_json(const struct report__group *group, int with_level)
{
	json_t *object = json_object();
	size_t index;

	if (with_level)
		json_object_set_new(object, "level",
				    group->has_level ? json_integer(group->level) : json_null());
	json_object_set_new(object, "problems", json_integer(group->problems));
	json_object_set_new(object, "correct", json_integer(group->correct));
	json_object_set_new(object, "correct_rate",
			    report__fraction(group->correct, group->problems));
	json_object_set_new(object, "credited", json_integer(group->credited));
	for (index = 0; index < REPORT_FAST_COUNT; index++) {
		char key[32];

		snprintf(key, sizeof key, "fast_%d_eager", (int)report__fast_thresholds[index]);
		json_object_set_new(object, key,
				    report__fraction(group->fast_eager[index], group->problems));
	}
	for (index = 0; index < REPORT_FAST_COUNT; index++) {
		char key[32];

		snprintf(key, sizeof key, "fast_%d_compile", (int)report__fast_thresholds[index]);
		json_object_set_new(object, key,
				    report__fraction(group->fast_compile[index], group->problems));
	}
	json_object_set_new(object, "geomean_eager",
			    report__geomean(group->log_sum_eager, group->log_count_eager));
	json_object_set_new(object, "geomean_compile",
			    report__geomean(group->log_sum_compile, group->log_count_compile));
	return object;
}

/* The group of a level, found or added; the problems without a level share one group. */
static struct report__group *
report__level_group(struct report__group **groups, size_t *count, const json_t *level)
{
	int has_level = json_is_integer(level);
	json_int_t value = has_level ? json_integer_value(level) : 0;
	size_t index;

	for (index = 0; index < *count; index++)
		if ((*groups)[index].has_level == has_level && (*groups)[index].level == value)
			return &(*groups)[index];
	*groups = kagent_realloc(*groups, (*count + 1) * sizeof **groups);
	memset(&(*groups)[*count], 0, sizeof **groups);
	(*groups)[*count].has_level = has_level;
	(*groups)[*count].level = value;
	return &(*groups)[(*count)++];
}

/* Levels ascending, the problems without a level last. */
static int
report__compare_groups(const void *left, const void *right)
{
	const struct report__group *a = left, *b = right;

	if (a->has_level != b->has_level)
		return a->has_level ? -1 : 1;
	return a->level < b->level ? -1 : a->level > b->level;
}

int
kagent_report_build(const json_t *batch, json_t **report_out, char **cause)
{
	const json_t *sessions = json_object_get(batch, "sessions"), *session;
	struct report__group overall = {0}, *levels = NULL;
	size_t index, level_count = 0;
	json_t *rows, *level_array, *gpu_names, *known, *name;
	size_t known_index;

	*report_out = NULL;
	if (!json_is_array(sessions)) {
		*cause = kagent_strdup("the batch has no sessions to report on");
		return -EINVAL;
	}
	rows = json_array();
	gpu_names = json_array();
	json_array_foreach(sessions, index, session)
	{
		json_t *row = report__row(session);
		int seen = 0;

		/* The GPU models the speedups were measured on, each once: a batch whose
		 * sessions ran on several daemons may mix them, and says so. */
		name = json_object_get(row, "gpu_name");
		json_array_foreach(gpu_names, known_index, known) seen |= json_equal(known, name);
		if (json_is_string(name) && !seen)
			json_array_append(gpu_names, name);
		report__add_row(&overall, row);
		report__add_row(
		    report__level_group(&levels, &level_count, json_object_get(session, "level")),
		    row);
		json_array_append_new(rows, row);
	}
	if (level_count > 1)
		qsort(levels, level_count, sizeof *levels, report__compare_groups);
	level_array = json_array();
	for (index = 0; index < level_count; index++)
		json_array_append_new(level_array, report__group_json(&levels[index], 1));
	free(levels);
	*report_out = json_pack("{s:O?, s:o, s:{s:o, s:o, s:o, s:b}}", "batch",
				json_object_get(batch, "id"), "rows", rows, "summary", "overall",
				report__group_json(&overall, 0), "levels", level_array, "gpu_names",
				gpu_names, "mixed_gpus", json_array_size(gpu_names) > 1);
	return 0;
}

/* ---- CSV ---- */

/* A field per RFC 4180: quoted when it holds a comma, a quote or a line break. */
static void
report__csv_string(struct kagent_buffer *buffer, const char *text)
{
	const char *scan;

	if (text == NULL)
		return;
	if (strpbrk(text, ",\"\r\n") == NULL) {
		kagent_buffer_append_string(buffer, text);
		return;
	}
	kagent_buffer_append_string(buffer, "\"");
	for (scan = text; *scan != '\0'; scan++) {
		if (*scan == '"')
			kagent_buffer_append_string(buffer, "\"");
		kagent_buffer_append(buffer, scan, 1);
	}
	kagent_buffer_append_string(buffer, "\"");
}

/* A JSON value as a CSV field: null as empty, booleans as true/false. */
static void
report__csv_value(struct kagent_buffer *buffer, const json_t *value)
{
	if (json_is_string(value))
		report__csv_string(buffer, json_string_value(value));
	else if (json_is_integer(value))
		kagent_buffer_appendf(buffer, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
	else if (json_is_real(value))
		kagent_buffer_appendf(buffer, "%.6g", json_real_value(value));
	else if (json_is_boolean(value))
		kagent_buffer_append_string(buffer, json_is_true(value) ? "true" : "false");
}

static void
report__csv_line(struct kagent_buffer *buffer, const json_t *object, const char *const *keys,
		 size_t key_count)
{
	size_t index;

	for (index = 0; index < key_count; index++) {
		if (index > 0)
			kagent_buffer_append_string(buffer, ",");
		report__csv_value(buffer, json_object_get(object, keys[index]));
	}
	kagent_buffer_append_string(buffer, "\n");
}

static void
report__csv_header(struct kagent_buffer *buffer, const char *first, const char *const *keys,
		   size_t key_count)
{
	size_t index;

	kagent_buffer_append_string(buffer, first);
	for (index = 0; index < key_count; index++) {
		if (index > 0 || first[0] != '\0')
			kagent_buffer_append_string(buffer, ",");
		kagent_buffer_append_string(buffer, keys[index]);
	}
	kagent_buffer_append_string(buffer, "\n");
}

static const char *const report__row_keys[] = {
    "problem",
    "level",
    "session",
    "state",
    "status",
    "correct",
    "credited",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "turns",
    "input_tokens",
    "output_tokens",
    "tokens",
    "cost",
    "gpu_seconds",
    "wall_seconds",
    "gpu_name",
};

static const char *const report__group_keys[] = {
    "problems",	      "correct",	"correct_rate",	 "credited",
    "fast_0_eager",   "fast_1_eager",	"fast_2_eager",	 "fast_0_compile",
    "fast_1_compile", "fast_2_compile", "geomean_eager", "geomean_compile",
};

#define REPORT_KEYS(keys) (keys), (sizeof(keys) / sizeof((keys)[0]))

char *
kagent_report_rows_csv(const json_t *report)
{
	struct kagent_buffer buffer = {0};
	const json_t *row;
	size_t index;

	report__csv_header(&buffer, "", REPORT_KEYS(report__row_keys));
	json_array_foreach(json_object_get(report, "rows"), index, row)
	    report__csv_line(&buffer, row, REPORT_KEYS(report__row_keys));
	return kagent_buffer_take(&buffer);
}

char *
kagent_report_summary_csv(const json_t *report)
{
	const json_t *summary = json_object_get(report, "summary"), *group;
	struct kagent_buffer buffer = {0};
	size_t index;

	report__csv_header(&buffer, "level", REPORT_KEYS(report__group_keys));
	kagent_buffer_append_string(&buffer, "all,");
	report__csv_line(&buffer, json_object_get(summary, "overall"),
			 REPORT_KEYS(report__group_keys));
	json_array_foreach(json_object_get(summary, "levels"), index, group)
	{
		const json_t *level = json_object_get(group, "level");

		if (json_is_integer(level))
			kagent_buffer_appendf(&buffer, "%" JSON_INTEGER_FORMAT ",",
					      json_integer_value(level));
		else
			kagent_buffer_append_string(&buffer, "none,");
		report__csv_line(&buffer, group, REPORT_KEYS(report__group_keys));
	}
	return kagent_buffer_take(&buffer);
}
