/*
 * kagentd's log lines (daemon_log.h), apart from daemon.c so that the modules daemon.c uses
 * (evaluations.c) can log too.
 */
#include "daemon_log.h"

#include <stdarg.h>
#include <stdio.h>

void
kagent_daemon_log(const char *format, ...)
{
	va_list arguments;

	fputs("kagentd: ", stderr);
	va_start(arguments, format);
	vfprintf(stderr, format, arguments);
	va_end(arguments);
	fputc('\n', stderr);
	fflush(stderr);
}

void
kagent_daemon_log_timing_window(const json_t *verdict, const char *who)
{
	const json_t *window = json_object_get(verdict, "timing_window");
	const json_t *gpu = json_object_get(window, "gpu_index");
	const json_t *start = json_object_get(window, "start_unix");
	const json_t *end = json_object_get(window, "end_unix");

	if (!json_is_number(start) || !json_is_number(end))
		return;
	if (json_is_integer(gpu))
		kagent_daemon_log("timing window on GPU %lld: %.6f to %.6f (%s)",
				  (long long)json_integer_value(gpu), json_number_value(start),
				  json_number_value(end), who);
	else
		kagent_daemon_log("timing window on the CPU: %.6f to %.6f (%s)",
				  json_number_value(start), json_number_value(end), who);
}
