/* profile: where a variant's GPU time goes, against the reference and the roofline. */
#include "kagent/base/alloc.h"
#include "kagent/evaluator/profile.h"
#include "kagent/model_tools/tool_call.h"

#include <stdlib.h>

static void
tool_profile__done(int status, const json_t *verdict, void *data)
{
	struct kagent_tool_call *call = data;
	char *text;

	if (status < 0) {
		kagent_tool_call_finish(
		    call, 1,
		    kagent_asprintf("the profile did not run: %s",
				    json_string_value(json_object_get(verdict, "message"))));
		return;
	}
	text = kagent_tool_render_verdict(kagent_profile_render_text, verdict);
	kagent_tool_call_finish(call, 0, text);
}

static void
tool_profile__run(struct kagent_tool_call *call)
{
	const char *name = kagent_tool_string_argument(call, "variant");
	struct kagent_variant *variant = kagent_variants_find(call->host->variants, name);

	if (variant == NULL) {
		kagent_tool_call_finish(call, 1,
					kagent_asprintf("no variant %s to profile: evaluate a "
							"candidate first",
							name));
		return;
	}
	call->host->evaluate(call->host->data, variant, KAGENT_VARIANTS_PROFILE, tool_profile__done,
			     call);
}

const struct kagent_tool kagent_tool_profile = {
    .name = "profile",
    .parameters = "{\"type\": \"object\", \"properties\": {\"variant\": {\"type\": \"string\", "
		  "\"description\": \"v1, v2, ... or latest\"}}, \"required\": [\"variant\"]}",
    .run = tool_profile__run,
};
