/* Diagnostic logging to stderr, filtered by the -v level (see include/kagent/base/log.h). */
#include "kagent/base/log.h"

#include <stdarg.h>
#include <stdio.h>

int kagent_log_verbosity = KAGENT_LOG_WARNING;

void
kagent_log_write(enum kagent_log_level level, const char *function, const char *format, ...)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	va_list arguments;

	fprintf(stderr, "kagent: %s: %s: ", names[level], function);
	va_start(arguments, format);
	vfprintf(stderr, format, arguments);
	va_end(arguments);
	fputc('\n', stderr);
}
