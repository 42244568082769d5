/* finish: the model ends the run; kagent then confirms the best variant before announcing it. */
#include "kagent/base/alloc.h"
#include "kagent/model_tools/tool_call.h"

static void
tool_finish__run(struct kagent_tool_call *call)
{
	call->host->request_finish(call->host->data, kagent_tool_string_argument(call, "summary"));
	kagent_tool_call_finish(call, 0,
				kagent_strdup("finishing: kagent now re-checks the best variant "
					      "on inputs it has never seen"));
}

const struct kagent_tool kagent_tool_finish = {
    .name = "finish",
    .parameters = "{\"type\": \"object\", \"properties\": {\"summary\": {\"type\": \"string\", "
		  "\"description\": \"what you built and what you learned\"}}, "
		  "\"required\": [\"summary\"]}",
    .run = tool_finish__run,
};
