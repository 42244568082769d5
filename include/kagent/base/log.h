/*
 * Diagnostic logging to stderr. The macro checks the level before its
 * arguments are evaluated, so a debug line costs nothing when -v is off.
 */
#ifndef KAGENT_LOG_H
#define KAGENT_LOG_H

enum kagent_log_level {
	KAGENT_LOG_ERROR = 0,
	KAGENT_LOG_WARNING = 1,
	KAGENT_LOG_INFO = 2,
	KAGENT_LOG_DEBUG = 3,
};

extern int kagent_log_verbosity;

void kagent_log_write(enum kagent_log_level level, const char *function, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

#define kagent_log(level, ...)                                                                     \
	do {                                                                                       \
		if ((int)(level) <= kagent_log_verbosity)                                          \
			kagent_log_write((level), __func__, __VA_ARGS__);                          \
	} while (0)

#endif
