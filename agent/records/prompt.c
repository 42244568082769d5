/*
 * Rendering the prompt templates (see include/kagent/records/prompt.h). One pass over each file:
 * text is copied, tags are replaced by a value or by an included file rendered the same
 * way. Every error names the file and line where the tag is, and the chain of includes
 * that led there, so a user who edited a prompt knows exactly what to fix.
 */
#include "kagent/records/prompt.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct prompt__render {
	const char *directory;
	const struct kagent_prompt_variable *variables;
	size_t count;
	struct kagent_buffer text;
};

/* Where a tag is: the file (relative to the prompts folder), its line and the include chain. */
struct prompt__place {
	const char *name;
	int line;
	const char *trail; /* "" or " (included from system.md:40)" and so on */
};

static int prompt__render_file(struct prompt__render *render, const char *name, int depth,
			       const struct prompt__place *from, char **cause);

static int __attribute__((format(printf, 4, 5)))
prompt__fail(int code, const struct prompt__place *place, char **cause, const char *format, ...)
{
	va_list arguments;
	char *message;

	va_start(arguments, format);
	message = kagent_vasprintf(format, arguments);
	va_end(arguments);
	*cause = kagent_asprintf("%s:%d: %s%s", place->name, place->line, message, place->trail);
	free(message);
	return code;
}

static int
prompt__append(struct prompt__render *render, const struct prompt__place *place, const char *bytes,
	       size_t size, char **cause)
{
	kagent_buffer_append(&render->text, bytes, size);
	if (render->text.length > KAGENT_PROMPT_MAX_BYTES)
		return prompt__fail(-EFBIG, place, cause, "the rendered prompt grows past %d bytes",
				    KAGENT_PROMPT_MAX_BYTES);
	return 0;
}

static int
prompt__is_name_character(char character)
{
	return (character >= 'a' && character <= 'z') || (character >= 'A' && character <= 'Z') ||
	       (character >= '0' && character <= '9') || character == '_';
}

static int
prompt__count_lines(const char *start, const char *stop)
{
	int lines = 0;

	for (; start < stop; start++)
		lines += *start == '\n';
	return lines;
}

/* The variables this render knows, for an error message: "a, b, c" or "none". */
static char *
prompt__known_names(const struct prompt__render *render)
{
	struct kagent_buffer names = {0};

	for (size_t index = 0; index < render->count; index++) {
		if (index > 0)
			kagent_buffer_append(&names, ", ", 2);
		kagent_buffer_append(&names, render->variables[index].name,
				     strlen(render->variables[index].name));
	}
	if (render->count == 0)
		kagent_buffer_append(&names, "none", 4);
	return kagent_buffer_take(&names);
}

static int
prompt__substitute(struct prompt__render *render, const struct prompt__place *place,
		   const char *start, size_t length, char **cause)
{
	char *known;
	int result;

	for (size_t index = 0; index < length; index++)
		if (!prompt__is_name_character(start[index]))
			return prompt__fail(
			    -EINVAL, place, cause,
			    "malformed tag {{%.*s}}: a variable name has only "
			    "letters, digits and '_' (write \\{{ for literal braces)",
			    (int)length, start);
	for (size_t index = 0; index < render->count; index++) {
		const struct kagent_prompt_variable *variable = &render->variables[index];

		if (strlen(variable->name) != length || memcmp(variable->name, start, length) != 0)
			continue;
		if (variable->value == NULL)
			return prompt__fail(-EINVAL, place, cause, "variable {{%s}} has no value",
					    variable->name);
		return prompt__append(render, place, variable->value, strlen(variable->value),
				      cause);
	}
	known = prompt__known_names(render);
	result = prompt__fail(-EINVAL, place, cause, "unknown variable {{%.*s}} (known: %s)",
			      (int)length, start, known);
	free(known);
	return result;
}

static int
prompt__include(struct prompt__render *render, const struct prompt__place *place, int depth,
		const char *start, size_t length, char **cause)
{
	const char *slash = strrchr(place->name, '/');
	int folder_length = slash != NULL ? (int)(slash - place->name + 1) : 0;
	char *name;
	int result;

	if (length == 0)
		return prompt__fail(-EINVAL, place, cause, "{{>}} names no file");
	if (memchr(start, '/', length) != NULL || memmem(start, length, "..", 2) != NULL)
		return prompt__fail(-EINVAL, place, cause,
				    "cannot include \"%.*s\": an included file is named without "
				    "'/' or \"..\" and lies in the same folder",
				    (int)length, start);
	if (depth >= KAGENT_PROMPT_MAX_DEPTH)
		return prompt__fail(-ELOOP, place, cause,
				    "cannot include %.*s: includes nest deeper than %d (a cycle?)",
				    (int)length, start, KAGENT_PROMPT_MAX_DEPTH);
	name = kagent_asprintf("%.*s%.*s", folder_length, place->name, (int)length, start);
	result = prompt__render_file(render, name, depth + 1, place, cause);
	free(name);
	return result;
}

/* One "{{...}}" tag; *cursor is just past "{{" and moves past "}}". */
static int
prompt__tag(struct prompt__render *render, const struct prompt__place *place, int depth,
	    const char **cursor, char **cause)
{
	const char *start = *cursor, *close = start, *end;

	/* A tag never spans lines, so a stray "{{" is reported where it is, not pages later. */
	while (*close != '\0' && *close != '\n' && !(close[0] == '}' && close[1] == '}'))
		close++;
	if (*close != '}')
		return prompt__fail(
		    -EINVAL, place, cause,
		    "\"{{\" is not closed by \"}}\" on the same line (write \\{{ for "
		    "literal braces)");
	*cursor = close + 2;
	end = close;
	while (start < end && (*start == ' ' || *start == '\t'))
		start++;
	while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (start == end)
		return prompt__fail(-EINVAL, place, cause, "empty tag {{}}");
	if (*start != '>')
		return prompt__substitute(render, place, start, (size_t)(end - start), cause);
	start++;
	while (start < end && (*start == ' ' || *start == '\t'))
		start++;
	return prompt__include(render, place, depth, start, (size_t)(end - start), cause);
}

static int
prompt__render_text(struct prompt__render *render, const char *name, const char *text, int depth,
		    const char *trail, char **cause)
{
	struct prompt__place place = {.name = name, .line = 1, .trail = trail};
	const char *cursor = text, *counted = text, *open;
	int result = 0;

	while ((open = strstr(cursor, "{{")) != NULL) {
		place.line += prompt__count_lines(counted, open);
		counted = open;
		if (open > cursor && open[-1] == '\\') {
			result = prompt__append(render, &place, cursor, (size_t)(open - 1 - cursor),
						cause);
			if (result == 0)
				result = prompt__append(render, &place, "{{", 2, cause);
			cursor = open + 2;
		} else {
			result =
			    prompt__append(render, &place, cursor, (size_t)(open - cursor), cause);
			cursor = open + 2;
			if (result == 0)
				result = prompt__tag(render, &place, depth, &cursor, cause);
		}
		if (result != 0)
			goto out;
	}
	place.line += prompt__count_lines(counted, cursor);
	result = prompt__append(render, &place, cursor, strlen(cursor), cause);
out:
	return result;
}

/* Renders the file name; from is the tag that includes it, NULL for the top template. */
static int
prompt__render_file(struct prompt__render *render, const char *name, int depth,
		    const struct prompt__place *from, char **cause)
{
	char *path = kagent_asprintf("%s/%s", render->directory, name);
	char *data = NULL, *detail = NULL, *trail;
	size_t size = 0;
	int result;

	trail = from != NULL ? kagent_asprintf(" (included from %s:%d)%s", from->name, from->line,
					       from->trail)
			     : kagent_strdup("");
	result = kagent_fileio_read(path, KAGENT_PROMPT_MAX_BYTES, &data, &size, &detail);
	if (result != 0) {
		if (from != NULL)
			prompt__fail(result, from, cause, "cannot include %s: %s", name, detail);
		else
			*cause = kagent_asprintf("prompt template %s: %s", name, detail);
		goto out;
	}
	if (strlen(data) != size) {
		result = -EINVAL;
		*cause = kagent_asprintf("prompt template %s holds a NUL byte%s", name, trail);
		goto out;
	}
	result = prompt__render_text(render, name, data, depth, trail, cause);
out:
	free(trail);
	free(detail);
	free(data);
	free(path);
	return result;
}

int
kagent_prompt_render(const char *prompts_directory, const char *name,
		     const struct kagent_prompt_variable *variables, size_t count, char **text_out,
		     char **cause)
{
	struct prompt__render render = {
	    .directory = prompts_directory, .variables = variables, .count = count};
	int result;

	*text_out = NULL;
	*cause = NULL;
	if (name == NULL || name[0] == '\0' || name[0] == '/' || strstr(name, "..") != NULL) {
		result = -EINVAL;
		*cause =
		    kagent_asprintf("prompt template \"%s\": a name inside the prompts folder, "
				    "without \"..\", is expected",
				    name != NULL ? name : "");
		goto out;
	}
	result = prompt__render_file(&render, name, 0, NULL, cause);
	if (result == 0)
		*text_out = kagent_buffer_take(&render.text);
out:
	kagent_buffer_free(&render.text);
	return result;
}
