/*
 * kagentd's log (agent/daemon/daemon_log.c): what every part of the daemon writes to stderr.
 * Private to agent/daemon/.
 */
#ifndef KAGENT_DAEMON_LOG_H
#define KAGENT_DAEMON_LOG_H

/* One line on stderr, "kagentd: ...": journald keeps each line as one event. */
void kagent_daemon_log(const char *format, ...) __attribute__((format(printf, 1, 2)));

#endif
