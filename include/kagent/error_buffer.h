/*
 * Error messages into a caller's buffer, for the shared libraries that Python calls through
 * ctypes (sandbox, kernel trace, CUDA launch): they cannot hand back allocated strings, so
 * a failure writes its message into error[error_size] and returns its code in one line.
 * Hidden, so that each library keeps its own copy when several are loaded in one process.
 */
#ifndef KAGENT_ERROR_BUFFER_H
#define KAGENT_ERROR_BUFFER_H

#include <stddef.h>

__attribute__((visibility("hidden"), format(printf, 4, 5))) int
kagent_error_buffer_write(char *error, size_t error_size, int code, const char *format, ...);

#endif
