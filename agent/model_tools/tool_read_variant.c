/* read_variant: an earlier variant's source and the verdict it got. */
#include "kagent/base/alloc.h"
#include "kagent/model_tools/tool_call.h"
#include "kagent/evaluator/verdict.h"

#include <stdlib.h>

static void
tool_read_variant__run(struct kagent_tool_call *call)
{
	const char *name = kagent_tool_string_argument(call, "variant");
	struct kagent_variant *variant = kagent_variants_find(call->host->variants, name);
	char *verdict;

	if (variant == NULL) {
		kagent_tool_call_finish(call, 1,
					kagent_asprintf("no variant %s (variants are v1, v2, ... "
							"in the order you evaluated them)",
							name));
		return;
	}
	verdict = variant->verdict != NULL
		      ? kagent_tool_render_verdict(kagent_verdict_render_text, variant->verdict)
		      : kagent_strdup("not evaluated\n");
	kagent_tool_call_finish(
	    call, 0,
	    kagent_asprintf("%s (turn %d)%s%s:\n```python\n%s\n```\nverdict: %s", variant->id,
			    variant->turn, variant->note[0] != '\0' ? ", note: " : "",
			    variant->note, variant->source, verdict));
	free(verdict);
}

const struct kagent_tool kagent_tool_read_variant = {
    .name = "read_variant",
    .parameters = "{\"type\": \"object\", \"properties\": {\"variant\": {\"type\": \"string\", "
		  "\"description\": \"v1, v2, ... or latest\"}}, \"required\": [\"variant\"]}",
    .run = tool_read_variant__run,
};
