/*
 * One call of a tool: the checks every call passes before its handler runs (a
 * known tool, arguments that parsed, the required arguments present with the
 * right JSON types), its end with the text for the model, cut to a size the
 * context can take, and the helpers handlers share. A call that fails a check
 * ends at once with an error the model can correct.
 */
#include "kagent/model_tools/tool_call.h"

#include "kagent/base/alloc.h"

#include <stdlib.h>
#include <string.h>

/* What one tool result may put into the model's context (a compile with a thousand errors must
 * not crowd out the conversation); the rest is cut with a note. */
#define TOOL_RESULT_CAP (32 * 1024)

static const char *
tool_call__json_type_name(const json_t *value)
{
	switch (json_typeof(value)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	default:
		return "null";
	}
}

/* Checks arguments against the schema's required list and each property's type. */
static char *
tool_call__check_arguments(const struct kagent_tool *tool, const json_t *arguments)
{
	json_t *schema = json_loads(tool->parameters, 0, NULL);
	json_t *properties = json_object_get(schema, "properties"), *required, *item, *value;
	const char *name, *expected, *actual;
	char *problem = NULL;
	size_t index;

	json_array_foreach(json_object_get(schema, "required"), index, item)
	{
		if (json_object_get(arguments, json_string_value(item)) == NULL) {
			problem = kagent_asprintf("%s needs the argument \"%s\"", tool->name,
						  json_string_value(item));
			goto out;
		}
	}
	json_object_foreach((json_t *)arguments, name, value)
	{
		required = json_object_get(properties, name);
		if (required == NULL) {
			problem = kagent_asprintf("%s takes no argument \"%s\"", tool->name, name);
			goto out;
		}
		expected = json_string_value(json_object_get(required, "type"));
		actual = tool_call__json_type_name(value);
		if (expected != NULL && strcmp(expected, actual) != 0 &&
		    !(strcmp(expected, "number") == 0 && strcmp(actual, "integer") == 0)) {
			problem = kagent_asprintf("%s: argument \"%s\" must be a %s, not a %s",
						  tool->name, name, expected, actual);
			goto out;
		}
	}
out:
	json_decref(schema);
	return problem;
}

void
kagent_tool_call_start(struct kagent_tool_call *call)
{
	char *problem;

	if (call->tool == NULL) {
		kagent_tool_call_finish(call, 1,
					kagent_strdup("no such tool; the tools are listed "
						      "in your tool definitions"));
		return;
	}
	if (!json_is_object(call->arguments)) {
		kagent_tool_call_finish(
		    call, 1,
		    kagent_asprintf("%s: the arguments must be one JSON object", call->tool->name));
		return;
	}
	problem = tool_call__check_arguments(call->tool, call->arguments);
	if (problem != NULL) {
		kagent_tool_call_finish(call, 1, problem);
		return;
	}
	call->tool->run(call);
}

/* Cuts content at the cap, on a UTF-8 character boundary, and says how much was left out. */
static char *
tool_call__cap(char *content)
{
	size_t length = strlen(content), cut = TOOL_RESULT_CAP;
	char *capped;

	if (length <= TOOL_RESULT_CAP)
		return content;
	while (cut > 0 && ((unsigned char)content[cut] & 0xC0) == 0x80)
		cut--;
	capped = kagent_asprintf("%.*s\n[... %zu more bytes cut: the result was too long]",
				 (int)cut, content, length - cut);
	free(content);
	return capped;
}

void
kagent_tool_call_finish(struct kagent_tool_call *call, int is_error, char *content)
{
	content = tool_call__cap(content);
	call->is_error = is_error;
	call->content = content;
	call->done(call, call->data);
}

const char *
kagent_tool_string_argument(const struct kagent_tool_call *call, const char *name)
{
	return json_string_value(json_object_get(call->arguments, name));
}

char *
kagent_tool_render_verdict(void (*render)(const json_t *verdict, FILE *stream),
			   const json_t *verdict)
{
	char *text = NULL;
	size_t size = 0;
	FILE *stream = open_memstream(&text, &size);

	if (stream == NULL)
		return kagent_strdup("(out of memory rendering the verdict)");
	render(verdict, stream);
	fclose(stream);
	return text;
}
