/*
 * The table of the tools the model is offered (agent/model_tools/tool_table.c): the lookup
 * the session dispatches a call through, and the definitions sent with each request. It
 * stands apart from tool_call.h, which every tool includes, so that the table and the tools
 * do not depend on each other.
 */
#ifndef KAGENT_TOOL_TABLE_H
#define KAGENT_TOOL_TABLE_H

#include <jansson.h>

#include "kagent/model_tools/tool_call.h"

/* NULL-terminated. */
extern const struct kagent_tool *const kagent_tool_table[];

const struct kagent_tool *kagent_tool_find(const char *name);
/*
 * The tool definitions the model is offered: [{"name", "description",
 * "parameters"}], descriptions read from <prompts>/tools/NAME.md. The caller
 * releases it and must not change it (equal definitions are shared); NULL with *cause when a
 * description is missing.
 */
json_t *kagent_tool_definitions(const char *prompts_directory, char **cause);

#endif
