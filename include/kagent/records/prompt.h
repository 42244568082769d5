/*
 * The prompt templates: Markdown files under prompts/ that users may edit (docs/prompts.md),
 * rendered with a deliberately tiny syntax so that a typo fails loudly instead of reaching
 * the model:
 *
 *   {{name}} or {{ name }}   the value of a variable (letters, digits, '_'); unknown: error
 *   {{> other.md}}           another file of the including file's folder (no '/', no "..")
 *   \{{                      a literal "{{"
 *
 * Any other "{{" (an unclosed tag, a tag spanning lines, a malformed name) is an error too.
 * Values are inserted as they are, never rendered again. Includes nest at most
 * KAGENT_PROMPT_MAX_DEPTH deep, which also stops an include cycle.
 */
#ifndef KAGENT_PROMPT_H
#define KAGENT_PROMPT_H

#include <stddef.h>

/* Each template file, and the rendered text, is at most this long. */
#define KAGENT_PROMPT_MAX_BYTES (1024 * 1024)
#define KAGENT_PROMPT_MAX_DEPTH 4

struct kagent_prompt_variable {
	const char *name;
	const char *value; /* NULL is an error when the template uses the variable */
};

/*
 * Renders <prompts_directory>/<name> (name may hold folders, as "tools/evaluate.md", but
 * no ".." and no leading '/'). Returns 0 and the text in *text_out, or a negative errno with
 * *cause naming the template and line ("system.md:12: unknown variable {{targte}}"); the
 * caller frees either.
 */
int kagent_prompt_render(const char *prompts_directory, const char *name,
			 const struct kagent_prompt_variable *variables, size_t count,
			 char **text_out, char **cause);

#endif
