/*
 * Diagnostics parsed out of an NVRTC program log: the front end's
 * `kernel.cu(12): error: identifier "x" is undefined`, the driver's
 * `nvrtc: error: ...` and ptxas's `ptxas warning : ...` lines. Text only, so it
 * is unit tested and fuzzed without NVRTC.
 */
#ifndef KAGENT_NVRTC_LOG_H
#define KAGENT_NVRTC_LOG_H

#include <stddef.h>

#define KAGENT_NVRTC_LOG_MAX_DIAGNOSTICS 1000
#define KAGENT_NVRTC_LOG_MAX_MESSAGE 4096

enum kagent_nvrtc_severity {
	KAGENT_NVRTC_ERROR = 0, /* also "catastrophic error", "internal error", ptxas "fatal" */
	KAGENT_NVRTC_WARNING = 1,
	KAGENT_NVRTC_NOTE = 2, /* "remark", "note" */
};

struct kagent_nvrtc_diagnostic {
	char *file; /* the source's name, a header path, or "nvrtc" / "ptxas" */
	int line;   /* 1-based; 0 where the tool gave none */
	enum kagent_nvrtc_severity severity;
	char *code;    /* "177-D" for `warning #177-D:`, else NULL */
	char *message; /* capped at KAGENT_NVRTC_LOG_MAX_MESSAGE bytes */
};

/* Parses length bytes of log. Returns 0 or a negative errno; never fails on odd text. */
int kagent_nvrtc_log_parse(const char *log, size_t length,
			   struct kagent_nvrtc_diagnostic **diagnostics_out, size_t *count_out,
			   char **cause);
void kagent_nvrtc_log_free(struct kagent_nvrtc_diagnostic *diagnostics, size_t count);
const char *kagent_nvrtc_log_severity_name(enum kagent_nvrtc_severity severity);
/* The inverse of kagent_nvrtc_log_severity_name; -EINVAL for an unknown name. */
int kagent_nvrtc_log_severity_parse(const char *name, enum kagent_nvrtc_severity *severity);

#endif
