/*
 * diff: how a variant disagrees with the reference (per output, from its
 * verdict's trials) and how its source differs from another variant, the
 * previous one by default, or from the problem itself.
 */
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/model_tools/tool_call.h"
#include "kagent/records/variant_repository.h"

#include <stdlib.h>
#include <string.h>

#define TOOL_DIFF_CONTEXT_LINES 3

static double
tool_diff__number(const json_t *object, const char *key)
{
	return json_number_value(json_object_get(object, key));
}

/* One line per output of the first failing trial, or of the first trial when all passed. */
static void
tool_diff__numbers(struct kagent_buffer *text, const json_t *verdict)
{
	const json_t *trials = json_object_get(verdict, "trials"), *trial = NULL, *item, *output;
	size_t index;

	json_array_foreach(trials, index, item)
	{
		if (!json_is_true(json_object_get(item, "passed"))) {
			trial = item;
			break;
		}
	}
	if (trial == NULL)
		trial = json_array_get(trials, 0);
	if (trial == NULL) {
		kagent_buffer_append_string(text,
					    "no trial ran, so there is no numerical comparison\n");
		return;
	}
	kagent_buffer_appendf(text, "trial seed %lld (%s inputs): %s\n",
			      (long long)json_integer_value(json_object_get(trial, "seed")),
			      json_string_value(json_object_get(trial, "distribution")),
			      json_is_true(json_object_get(trial, "passed")) ? "passed" : "failed");
	json_array_foreach(json_object_get(trial, "outputs"), index, output)
	{
		char *first = json_dumps(json_object_get(output, "first_mismatch"),
					 JSON_COMPACT | JSON_ENCODE_ANY);
		char *shape = json_dumps(json_object_get(output, "shape"), JSON_COMPACT);
		char *candidate_shape =
		    json_dumps(json_object_get(output, "candidate_shape"), JSON_COMPACT);

		kagent_buffer_appendf(
		    text,
		    "  %s %s%s: max abs %.3g, max rel %.3g, norm-relative %.3g, %.1f%% of "
		    "elements mismatched, first at %s, %lld non-finite; shape %s (candidate "
		    "%s)%s%s\n",
		    json_string_value(json_object_get(output, "path")),
		    json_is_string(json_object_get(output, "dtype"))
			? json_string_value(json_object_get(output, "dtype"))
			: "",
		    json_is_true(json_object_get(output, "passed")) ? " passed" : " FAILED",
		    tool_diff__number(output, "max_abs"), tool_diff__number(output, "max_rel"),
		    tool_diff__number(output, "norm_rel"),
		    100.0 * tool_diff__number(output, "mismatch_fraction"),
		    first != NULL ? first : "null",
		    (long long)json_integer_value(json_object_get(output, "nonfinite")),
		    shape != NULL ? shape : "?", candidate_shape != NULL ? candidate_shape : "?",
		    json_is_string(json_object_get(output, "reason")) ? ": " : "",
		    json_is_string(json_object_get(output, "reason"))
			? json_string_value(json_object_get(output, "reason"))
			: "");
		free(first);
		free(shape);
		free(candidate_shape);
	}
}

static void
tool_diff__run(struct kagent_tool_call *call)
{
	const struct kagent_tool_host *host = call->host;
	const char *name = kagent_tool_string_argument(call, "variant");
	const char *against_name = kagent_tool_string_argument(call, "against");
	struct kagent_variant *variant = kagent_variants_find(host->variants, name),
			      *against = NULL;
	const char *old_text, *old_name;
	struct kagent_buffer text = {0};
	char *diff = NULL, *cause = NULL, *old_label = NULL, *new_label = NULL;

	if (variant == NULL) {
		kagent_tool_call_finish(call, 1, kagent_asprintf("no variant %s", name));
		return;
	}
	if (against_name != NULL && strcmp(against_name, "reference") == 0) {
		old_text = host->problem_source;
		old_name = "reference";
	} else {
		against = against_name != NULL ? kagent_variants_find(host->variants, against_name)
					       : kagent_variants_previous(host->variants, variant);
		if (against_name != NULL && against == NULL) {
			kagent_tool_call_finish(call, 1,
						kagent_asprintf("no variant %s", against_name));
			return;
		}
		old_text = against != NULL ? against->source : host->problem_source;
		old_name = against != NULL ? against->id : "reference";
	}
	if (variant->verdict != NULL)
		tool_diff__numbers(&text, variant->verdict);
	else
		kagent_buffer_append_string(&text, "not evaluated yet\n");
	old_label = kagent_asprintf("%s.py", old_name);
	new_label = kagent_asprintf("%s.py", variant->id);
	if (kagent_variant_diff_texts(old_text, old_label, variant->source, new_label,
				      TOOL_DIFF_CONTEXT_LINES, &diff, &cause) < 0) {
		kagent_buffer_free(&text);
		kagent_tool_call_finish(call, 1, cause);
		goto out;
	}
	if (diff[0] == '\0')
		kagent_buffer_append_string(&text, "the sources are identical\n");
	else
		kagent_buffer_append_string(&text, diff);
	kagent_tool_call_finish(call, 0, kagent_buffer_take(&text));
out:
	free(diff);
	free(old_label);
	free(new_label);
}

const struct kagent_tool kagent_tool_diff = {
    .name = "diff",
    .parameters =
	"{\"type\": \"object\", \"properties\": {"
	"\"variant\": {\"type\": \"string\", \"description\": \"v1, v2, ... or latest\"}, "
	"\"against\": {\"type\": \"string\", \"description\": \"another variant, or "
	"reference; default: the previous variant\"}}, \"required\": [\"variant\"]}",
    .run = tool_diff__run,
};
