/*
 * commit: the model asks kagent to make a variant the run's best. kagent
 * re-evaluates it on fresh seeds and moves the best ref only when it is correct
 * and faster than the current best.
 */
#include "kagent/base/alloc.h"
#include "kagent/model_tools/tool_call.h"

static void
tool_commit__done(int moved, const char *message, void *data)
{
	struct kagent_tool_call *call = data;

	kagent_tool_call_finish(call, 0, kagent_strdup(message));
}

static void
tool_commit__run(struct kagent_tool_call *call)
{
	const char *name = kagent_tool_string_argument(call, "variant");
	const char *message = kagent_tool_string_argument(call, "message");
	struct kagent_variants *variants = call->host->variants;
	struct kagent_variant *variant = kagent_variants_find(variants, name);

	if (variant == NULL) {
		kagent_tool_call_finish(call, 1, kagent_asprintf("no variant %s", name));
		return;
	}
	kagent_variants_promote(variants, variant, message != NULL ? message : "",
				tool_commit__done, call);
}

const struct kagent_tool kagent_tool_commit = {
    .name = "commit",
    .parameters =
	"{\"type\": \"object\", \"properties\": {"
	"\"variant\": {\"type\": \"string\", \"description\": \"v1, v2, ... or latest\"}, "
	"\"message\": {\"type\": \"string\", \"description\": \"why it is better\"}}, "
	"\"required\": [\"variant\"]}",
    .run = tool_commit__run,
};
