/* Answers into buffers the caller owns (see sandbox/ctypes_buffer.h). */
#include "ctypes_buffer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
kagent_ctypes_buffer_error(char *error, size_t error_size, int code, const char *format, ...)
{
	va_list arguments;

	if (error != NULL && error_size > 0) {
		va_start(arguments, format);
		vsnprintf(error, error_size, format, arguments);
		va_end(arguments);
	}
	return code;
}

int
kagent_ctypes_buffer_json(const json_t *value, char *buffer, size_t buffer_size, char *error,
			  size_t error_size)
{
	char *text = json_dumps(value, JSON_COMPACT);
	size_t length = text != NULL ? strlen(text) : 0;
	int status;

	if (text == NULL)
		status = kagent_ctypes_buffer_error(error, error_size, -ENOMEM, "out of memory");
	else if (length + 1 > buffer_size)
		status = kagent_ctypes_buffer_error(error, error_size, -ENOSPC, "%zu bytes needed",
						    length + 1);
	else {
		memcpy(buffer, text, length + 1);
		status = (int)length;
	}
	free(text);
	return status;
}
