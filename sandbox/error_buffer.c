/* Error messages into a caller's buffer (see include/kagent/error_buffer.h). */
#include "kagent/error_buffer.h"

#include <stdarg.h>
#include <stdio.h>

int
kagent_error_buffer_write(char *error, size_t error_size, int code, const char *format, ...)
{
	va_list arguments;

	if (error != NULL && error_size > 0) {
		va_start(arguments, format);
		vsnprintf(error, error_size, format, arguments);
		va_end(arguments);
	}
	return code;
}
