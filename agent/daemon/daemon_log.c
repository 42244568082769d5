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
