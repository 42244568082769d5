/*
 * Finds diagnostics in an NVRTC program log (see include/kagent/cuda/nvrtc_log.h).
 * The log mixes diagnostics with echoed source lines and carets, summaries
 * ("1 error detected in ...") and the ptxas report; only lines of the shapes
 * below become diagnostics, everything else is left to the full log.
 *   FILE(LINE): SEVERITY[ #CODE]: MESSAGE
 *   nvrtc: SEVERITY: MESSAGE
 *   ptxas SEVERITY : MESSAGE      (info lines are the report, not diagnostics)
 */
#include "kagent/cuda/nvrtc_log.h"

#include "kagent/base/alloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *word;
	enum kagent_nvrtc_severity severity;
} nvrtc_log__severities[] = {
    {"catastrophic error", KAGENT_NVRTC_ERROR},
    {"internal error", KAGENT_NVRTC_ERROR},
    {"error", KAGENT_NVRTC_ERROR},
    {"fatal", KAGENT_NVRTC_ERROR},
    {"warning", KAGENT_NVRTC_WARNING},
    {"remark", KAGENT_NVRTC_NOTE},
    {"note", KAGENT_NVRTC_NOTE},
};

const char *
kagent_nvrtc_log_severity_name(enum kagent_nvrtc_severity severity)
{
	switch (severity) {
	case KAGENT_NVRTC_ERROR:
		return "error";
	case KAGENT_NVRTC_WARNING:
		return "warning";
	case KAGENT_NVRTC_NOTE:
		return "note";
	}
	return "error";
}

int
kagent_nvrtc_log_severity_parse(const char *name, enum kagent_nvrtc_severity *severity)
{
	int result = -EINVAL;

	if (strcmp(name, "error") == 0) {
		*severity = KAGENT_NVRTC_ERROR;
		result = 0;
	} else if (strcmp(name, "warning") == 0) {
		*severity = KAGENT_NVRTC_WARNING;
		result = 0;
	} else if (strcmp(name, "note") == 0) {
		*severity = KAGENT_NVRTC_NOTE;
		result = 0;
	}
	return result;
}

/*
 * Matches a severity word at p (within end) and an optional " #CODE", then
 * optional spaces and a colon. Returns the position after the colon or NULL.
 */
static const char *
nvrtc_log__match_severity(const char *p, const char *end, enum kagent_nvrtc_severity *severity,
			  const char **code, size_t *code_length)
{
	size_t index;

	*code = NULL;
	*code_length = 0;
	for (index = 0; index < sizeof nvrtc_log__severities / sizeof nvrtc_log__severities[0];
	     index++) {
		size_t length = strlen(nvrtc_log__severities[index].word);
		const char *q = p + length;

		if ((size_t)(end - p) < length ||
		    memcmp(p, nvrtc_log__severities[index].word, length) != 0)
			continue;
		if (q + 2 <= end && q[0] == ' ' && q[1] == '#') {
			const char *code_start = q + 2;

			q = code_start;
			while (q < end && (isalnum((unsigned char)*q) || *q == '-'))
				q++;
			*code = code_start;
			*code_length = (size_t)(q - code_start);
		}
		while (q < end && *q == ' ')
			q++;
		if (q < end && *q == ':') {
			*severity = nvrtc_log__severities[index].severity;
			return q + 1;
		}
	}
	return NULL;
}

/* Finds "(DIGITS): " in the line; returns the '(' position or NULL. */
static const char *
nvrtc_log__find_location(const char *start, const char *end, long *line_number, const char **after)
{
	const char *p;

	for (p = start + 1; p < end; p++) {
		const char *q = p + 1;
		long value = 0;

		if (*p != '(')
			continue;
		while (q < end && isdigit((unsigned char)*q) && value < 100000000) {
			value = value * 10 + (*q - '0');
			q++;
		}
		if (q == p + 1 || q + 2 > end || q[0] != ')' || q[1] != ':')
			continue;
		*line_number = value;
		*after = q + 2;
		return p;
	}
	return NULL;
}

static bool
nvrtc_log__parse_line(const char *start, const char *end,
		      struct kagent_nvrtc_diagnostic *diagnostic)
{
	enum kagent_nvrtc_severity severity = KAGENT_NVRTC_ERROR;
	const char *file = NULL, *file_end = NULL, *message, *code, *p, *location, *after;
	size_t code_length, message_length;
	long line_number = 0;

	if ((size_t)(end - start) > 7 && memcmp(start, "nvrtc: ", 7) == 0) {
		file = start;
		file_end = start + 5;
		message = nvrtc_log__match_severity(start + 7, end, &severity, &code, &code_length);
	} else if ((size_t)(end - start) > 6 && memcmp(start, "ptxas ", 6) == 0) {
		p = start + 6;
		while (p < end && *p == ' ')
			p++;
		file = start;
		file_end = start + 5;
		message = nvrtc_log__match_severity(p, end, &severity, &code, &code_length);
	} else {
		location = nvrtc_log__find_location(start, end, &line_number, &after);
		if (location == NULL)
			return false;
		file = start;
		file_end = location;
		p = after;
		while (p < end && *p == ' ')
			p++;
		message = nvrtc_log__match_severity(p, end, &severity, &code, &code_length);
	}
	if (message == NULL)
		return false;
	while (message < end && *message == ' ')
		message++;
	message_length = (size_t)(end - message);
	if (message_length > KAGENT_NVRTC_LOG_MAX_MESSAGE)
		message_length = KAGENT_NVRTC_LOG_MAX_MESSAGE;
	if ((size_t)(file_end - file) > KAGENT_NVRTC_LOG_MAX_MESSAGE)
		return false;
	diagnostic->file = kagent_strndup(file, (size_t)(file_end - file));
	diagnostic->line = (int)line_number;
	diagnostic->severity = severity;
	diagnostic->code =
	    code != NULL && code_length > 0 ? kagent_strndup(code, code_length) : NULL;
	diagnostic->message = kagent_strndup(message, message_length);
	return true;
}

int
kagent_nvrtc_log_parse(const char *log, size_t length,
		       struct kagent_nvrtc_diagnostic **diagnostics_out, size_t *count_out,
		       char **cause)
{
	struct kagent_nvrtc_diagnostic *diagnostics = NULL;
	size_t count = 0, capacity = 0, position = 0;
	int result = 0;

	while (position < length && count < KAGENT_NVRTC_LOG_MAX_DIAGNOSTICS) {
		const char *start = log + position;
		const char *newline = memchr(start, '\n', length - position);
		const char *end = newline != NULL ? newline : log + length;
		struct kagent_nvrtc_diagnostic diagnostic;

		position = (size_t)(end - log) + 1;
		if (end > start && end[-1] == '\r')
			end--;
		/* Echoed source lines are indented; diagnostics start at column 0. */
		if (end == start || *start == ' ' || *start == '\t')
			continue;
		if (!nvrtc_log__parse_line(start, end, &diagnostic))
			continue;
		if (count == capacity) {
			capacity = capacity == 0 ? 8 : capacity * 2;
			diagnostics = kagent_realloc(diagnostics, capacity * sizeof *diagnostics);
		}
		diagnostics[count++] = diagnostic;
	}
	*diagnostics_out = diagnostics;
	*count_out = count;
	(void)cause;
	return result;
}

void
kagent_nvrtc_log_free(struct kagent_nvrtc_diagnostic *diagnostics, size_t count)
{
	size_t index;

	for (index = 0; index < count; index++) {
		free(diagnostics[index].file);
		free(diagnostics[index].code);
		free(diagnostics[index].message);
	}
	free(diagnostics);
}
