/*
 * Answers into buffers the caller owns, for the shared libraries that Python calls through
 * ctypes (sandbox, kernel trace, CUDA launch): they cannot hand back allocated strings, so a
 * failure writes its message into cause[cause_size] and returns its code in one line, and a
 * JSON answer is copied into buffer[buffer_size]. Hidden, so that each library keeps its own
 * copy when several are loaded in one process.
 */
#ifndef KAGENT_CTYPES_BUFFER_H
#define KAGENT_CTYPES_BUFFER_H

#include <jansson.h>
#include <stddef.h>

__attribute__((visibility("hidden"), format(printf, 4, 5))) int
kagent_ctypes_buffer_error(char *cause, size_t cause_size, int code, const char *format, ...);

/* Writes value as compact JSON (value is not consumed). Returns the length written, or
 * -ENOSPC (the size needed in cause) or -ENOMEM. */
__attribute__((visibility("hidden"))) int kagent_ctypes_buffer_json(const json_t *value,
								    char *buffer,
								    size_t buffer_size, char *cause,
								    size_t cause_size);

#endif
