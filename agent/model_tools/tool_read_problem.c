/* read_problem: the problem's source, so the model can look at it again at any turn. */
#include "kagent/base/alloc.h"
#include "kagent/model_tools/tool_call.h"

static void
tool_read_problem__run(struct kagent_tool_call *call)
{
	kagent_tool_call_finish(call, 0,
				kagent_asprintf("problem %s:\n```python\n%s\n```",
						call->host->problem_name,
						call->host->problem_source));
}

const struct kagent_tool kagent_tool_read_problem = {
    .name = "read_problem",
    .parameters = "{\"type\": \"object\", \"properties\": {}}",
    .run = tool_read_problem__run,
};
