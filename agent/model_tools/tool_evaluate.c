/*
 * evaluate: a new candidate from the model becomes variant vN, is judged by the
 * evaluator (kagent eval) and committed to the run's branch with its verdict.
 */
#include "kagent/base/alloc.h"
#include "kagent/model_tools/tool_call.h"
#include "kagent/evaluator/verdict.h"

#include <stdlib.h>

static void
tool_evaluate__done(int status, const json_t *verdict, void *data)
{
	struct kagent_tool_call *call = data;
	struct kagent_variant *variant = call->state;
	char *text, *budget = call->host->budget_line(call->host->data);

	call->state = NULL;
	if (status < 0) {
		kagent_tool_call_finish(
		    call, 1,
		    kagent_asprintf("%s could not be evaluated: %s\n%s", variant->id,
				    json_string_value(json_object_get(verdict, "message")),
				    budget));
		free(budget);
		return;
	}
	text = kagent_tool_render_verdict(kagent_verdict_render_text, verdict);
	kagent_tool_call_finish(call, 0, kagent_asprintf("%s %s%s", variant->id, text, budget));
	free(text);
	free(budget);
}

static void
tool_evaluate__run(struct kagent_tool_call *call)
{
	const struct kagent_tool_host *host = call->host;
	const char *note = kagent_tool_string_argument(call, "note");
	struct kagent_variant *variant;
	char *cause = NULL;

	variant = kagent_variants_add(host->variants, kagent_tool_string_argument(call, "source"),
				      note != NULL ? note : "", host->turn(host->data), &cause);
	if (variant == NULL) {
		kagent_tool_call_finish(call, 1, cause);
		return;
	}
	call->state = variant;
	host->evaluate(host->data, variant, KAGENT_VARIANTS_EVALUATE, tool_evaluate__done, call);
}

const struct kagent_tool kagent_tool_evaluate = {
    .name = "evaluate",
    .parameters =
	"{\"type\": \"object\", \"properties\": {"
	"\"source\": {\"type\": \"string\", \"description\": \"the whole Python file "
	"defining ModelNew\"}, "
	"\"note\": {\"type\": \"string\", \"description\": \"what this variant tries\"}}, "
	"\"required\": [\"source\"]}",
    .run = tool_evaluate__run,
};
