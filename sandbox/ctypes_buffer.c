/* Answers into buffers the caller owns (see sandbox/ctypes_buffer.h). */
#include "ctypes_buffer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
kagent_ctypes_buffer_error(char *cause, size_t cause_size, int code, const char *format, ...)
{
	va_list arguments;

	if (cause != NULL && cause_size > 0) {
		va_start(arguments, format);
		vsnprintf(cause, cause_size, format, arguments);
		va_end(arguments);
	}
	return code;
}

int
kagent_ctypes_buffer_json(const json_t *value, char *buffer, size_t buffer_size, char *cause,
			  size_t cause_size)
{
	char *text = json_dumps(value, JSON_COMPACT);
	size_t length = text != NULL ? strlen(text) : 0;
	int status;

	if (text == NULL)
		status = kagent_ctypes_buffer_error(cause, cause_size, -ENOMEM, "out of memory");
	else if (length + 1 > buffer_size)
		status = kagent_ctypes_buffer_error(cause, cause_size, -ENOSPC, "%zu bytes needed",
						    length + 1);
	else {
		memcpy(buffer, text, length + 1);
		status = (int)length;
	}
	free(text);
	return status;
}
