/* The names of the LLM wire formats, shared by the config's key table and the LLM stack. */
#include "kagent/llm/provider.h"

#include <errno.h>
#include <string.h>

const char *const kagent_llm_format_names[] = {
    [KAGENT_LLM_FORMAT_CHAT_COMPLETIONS] = "chat_completions",
    [KAGENT_LLM_FORMAT_RESPONSES] = "responses",
    [KAGENT_LLM_FORMAT_ANTHROPIC] = "anthropic",
    [KAGENT_LLM_FORMAT_ANTHROPIC + 1] = NULL,
};

const char *
kagent_llm_format_name(enum kagent_llm_format format)
{
	if ((unsigned)format > KAGENT_LLM_FORMAT_ANTHROPIC)
		return "unknown";
	return kagent_llm_format_names[format];
}

int
kagent_llm_format_parse(const char *name, enum kagent_llm_format *format_out)
{
	for (int index = 0; kagent_llm_format_names[index] != NULL; index++) {
		if (strcmp(kagent_llm_format_names[index], name) == 0) {
			*format_out = (enum kagent_llm_format)index;
			return 0;
		}
	}
	return -EINVAL;
}
