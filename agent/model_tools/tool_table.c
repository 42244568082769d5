/*
 * The table of tools the model may call, and their definitions as offered to
 * the model (descriptions from prompts/tools/NAME.md).
 */
#include "kagent/model_tools/tool_table.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"

#include <stdlib.h>
#include <string.h>

extern const struct kagent_tool kagent_tool_read_problem;
extern const struct kagent_tool kagent_tool_compile;
extern const struct kagent_tool kagent_tool_evaluate;
extern const struct kagent_tool kagent_tool_profile;
extern const struct kagent_tool kagent_tool_diff;
extern const struct kagent_tool kagent_tool_commit;
extern const struct kagent_tool kagent_tool_read_variant;
extern const struct kagent_tool kagent_tool_finish;

/* One tool per line, in the order the model sees them. */
/* clang-format off */
const struct kagent_tool *const kagent_tool_table[] = {
	&kagent_tool_read_problem,
#ifdef KAGENT_HAVE_NVRTC
	&kagent_tool_compile,
#endif
	&kagent_tool_evaluate,
	&kagent_tool_profile,
	&kagent_tool_diff,
	&kagent_tool_commit,
	&kagent_tool_read_variant,
	&kagent_tool_finish,
	NULL,
};
/* clang-format on */

/* A tool description file is prose for the model; anything larger is a mistake. */
#define TOOL_DESCRIPTION_CAP (64 * 1024)

/*
 * The definitions last built, handed out again while they come out the same: a daemon's
 * sessions would otherwise each hold a copy of their own (tens of KB each). They are still
 * built each time, so that an edited description reaches the next session.
 */
static json_t *tool_table__last;

const struct kagent_tool *
kagent_tool_find(const char *name)
{
	const struct kagent_tool *const *entry;

	for (entry = kagent_tool_table; *entry != NULL; entry++) {
		if (strcmp((*entry)->name, name) == 0)
			return *entry;
	}
	return NULL;
}

json_t *
kagent_tool_definitions(const char *prompts_directory, char **cause)
{
	const struct kagent_tool *const *entry;
	json_t *definitions = json_array(), *parameters;
	char *path = NULL, *description = NULL;
	size_t length;
	json_error_t json_error;
	int status;

	for (entry = kagent_tool_table; *entry != NULL; entry++) {
		path = kagent_asprintf("%s/tools/%s.md", prompts_directory, (*entry)->name);
		status =
		    kagent_fileio_read(path, TOOL_DESCRIPTION_CAP, &description, &length, cause);
		if (status < 0)
			goto fail;
		parameters = json_loads((*entry)->parameters, 0, &json_error);
		if (parameters == NULL) {
			*cause = kagent_asprintf("tool %s: bad parameter schema: %s",
						 (*entry)->name, json_error.text);
			goto fail;
		}
		/* Trailing newlines are noise in a JSON description. */
		while (length > 0 && description[length - 1] == '\n')
			description[--length] = '\0';
		json_array_append_new(
		    definitions, json_pack("{s:s, s:s, s:o}", "name", (*entry)->name, "description",
					   description, "parameters", parameters));
		free(path);
		free(description);
		path = description = NULL;
	}
	if (tool_table__last != NULL && json_equal(tool_table__last, definitions)) {
		json_decref(definitions);
		return json_incref(tool_table__last);
	}
	json_decref(tool_table__last);
	tool_table__last = json_incref(definitions);
	return definitions;
fail:
	free(path);
	free(description);
	json_decref(definitions);
	return NULL;
}
