/*
 * Dataset records (include/kagent/records/dataset.h): a variant of a run read back from its
 * trace, flattened into fields of one type each. The whole verdict travels as JSON text, since
 * its nested shape varies between statuses and a columnar file needs one schema.
 */
#include "kagent/records/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The environment's fields, each a string or null in the record (docs/verdict.md). */
static const char *const dataset__environment_keys[] = {
    "device", "gpu", "compute_capability", "driver", "torch", "triton", "cuda_runtime", "python",
};

int
kagent_dataset_filter_from_name(const char *name)
{
	if (name != NULL && strcmp(name, "correct") == 0)
		return KAGENT_DATASET_CORRECT;
	if (name != NULL && strcmp(name, "credited") == 0)
		return KAGENT_DATASET_CREDITED;
	return -EINVAL;
}

/* A number as a real (so every row has the same type), or null. */
static json_t *
dataset__real(const json_t *value)
{
	return json_is_number(value) ? json_real(json_number_value(value)) : json_null();
}

/* [low, high] as reals, or null. */
static json_t *
dataset__interval(const json_t *value)
{
	if (!json_is_array(value) || json_array_size(value) != 2 ||
	    !json_is_number(json_array_get(value, 0)) || !json_is_number(json_array_get(value, 1)))
		return json_null();
	return json_pack("[o, o]", dataset__real(json_array_get(value, 0)),
			 dataset__real(json_array_get(value, 1)));
}

/* A string, a number written as text, or null. */
static json_t *
dataset__text(const json_t *value)
{
	char buffer[64];

	if (json_is_string(value))
		return json_copy((json_t *)value);
	if (json_is_integer(value)) {
		snprintf(buffer, sizeof buffer, "%lld", (long long)json_integer_value(value));
		return json_string(buffer);
	}
	if (json_is_real(value)) {
		snprintf(buffer, sizeof buffer, "%g", json_real_value(value));
		return json_string(buffer);
	}
	return json_null();
}

static json_t *
dataset__environment(const json_t *environment)
{
	json_t *kept = json_object();
	size_t index;

	for (index = 0;
	     index < sizeof dataset__environment_keys / sizeof *dataset__environment_keys; index++)
		json_object_set_new(
		    kept, dataset__environment_keys[index],
		    dataset__text(json_object_get(environment, dataset__environment_keys[index])));
	return kept;
}

static json_t *
dataset__string_or_null(const char *text)
{
	return text != NULL ? json_string(text) : json_null();
}

json_t *
kagent_dataset_record(const struct kagent_run_log *log, const struct kagent_run_variant *variant)
{
	const json_t *verdict = variant->verdict;
	const json_t *timing = json_object_get(verdict, "timing");
	const char *status = json_string_value(json_object_get(verdict, "status"));
	int correct = status != NULL && strcmp(status, "correct") == 0;
	/* the credit rule; a verdict from before it has no credit object and keeps its speedup */
	int credited = correct && !json_is_false(json_object_get(json_object_get(verdict, "credit"),
								 "credited"));
	char *verdict_text = json_dumps(verdict, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_t *record = json_object();

	json_object_set_new(record, "schema", json_string(KAGENT_DATASET_SCHEMA));
	json_object_set_new(record, "id", json_string(variant->source_sha256));
	json_object_set_new(record, "problem_id", json_string(log->problem_sha256));
	json_object_set_new(record, "problem_name", dataset__string_or_null(log->problem_name));
	json_object_set_new(record, "problem_source", json_string(log->problem_source));
	json_object_set_new(record, "run_id", json_string(log->run_id));
	json_object_set_new(record, "variant", json_string(variant->id));
	json_object_set_new(record, "parent", dataset__string_or_null(variant->parent));
	json_object_set_new(record, "turn", json_integer(variant->turn));
	json_object_set_new(record, "source", json_string(variant->source));
	json_object_set_new(
	    record, "backend",
	    dataset__text(json_object_get(json_object_get(verdict, "candidate"), "backend")));
	json_object_set_new(record, "messages", json_copy(variant->messages));
	json_object_set_new(record, "model", dataset__string_or_null(log->model));
	json_object_set_new(record, "provider", dataset__string_or_null(log->provider));
	json_object_set_new(record, "status", dataset__string_or_null(status));
	json_object_set_new(record, "reason", dataset__text(json_object_get(verdict, "reason")));
	json_object_set_new(record, "speedup_vs_eager",
			    dataset__real(json_object_get(timing, "speedup_vs_eager")));
	json_object_set_new(record, "speedup_vs_eager_ci95",
			    dataset__interval(json_object_get(timing, "speedup_vs_eager_ci95")));
	json_object_set_new(record, "speedup_vs_compile",
			    dataset__real(json_object_get(timing, "speedup_vs_compile")));
	json_object_set_new(record, "speedup_vs_compile_ci95",
			    dataset__interval(json_object_get(timing, "speedup_vs_compile_ci95")));
	json_object_set_new(record, "timing_basis",
			    dataset__text(json_object_get(timing, "basis")));
	json_object_set_new(
	    record, "candidate_ms",
	    dataset__real(json_object_get(json_object_get(timing, "candidate"), "median_ms")));
	json_object_set_new(record, "credited", json_boolean(credited));
	json_object_set_new(record, "environment",
			    dataset__environment(json_object_get(verdict, "environment")));
	json_object_set_new(record, "verdict", dataset__string_or_null(verdict_text));
	json_object_set_new(record, "kagent_version",
			    dataset__text(json_object_get(log->start, "kagent_version")));
	free(verdict_text);
	return record;
}

int
kagent_dataset_keep(enum kagent_dataset_filter filter, const json_t *record)
{
	const char *status = json_string_value(json_object_get(record, "status"));
	int correct = status != NULL && strcmp(status, "correct") == 0;

	switch (filter) {
	case KAGENT_DATASET_CORRECT:
		return correct;
	case KAGENT_DATASET_CREDITED:
		return correct && json_is_true(json_object_get(record, "credited"));
	case KAGENT_DATASET_ALL:
	default:
		return 1;
	}
}
