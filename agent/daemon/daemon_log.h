/*
 * kagentd's log (agent/daemon/daemon_log.c): what every part of the daemon writes to stderr.
 * Private to agent/daemon/.
 */
#ifndef KAGENT_DAEMON_LOG_H
#define KAGENT_DAEMON_LOG_H

#include <jansson.h>

/* One line on stderr, "kagentd: ...": journald keeps each line as one event. */
void kagent_daemon_log(const char *format, ...) __attribute__((format(printf, 1, 2)));

/*
 * A verdict's timing window (docs/verdict.md), when it has one: "timing window on GPU 1:
 * 1764290000.123456 to 1764290000.532000 (who)", or "on the CPU". The windows of one device
 * never overlap; bench/timing_windows.py checks a log for it.
 */
void kagent_daemon_log_timing_window(const json_t *verdict, const char *who);

#endif
