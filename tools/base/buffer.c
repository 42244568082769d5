/* A growable, NUL-terminated byte buffer (see include/kagent/base/buffer.h). */
#include "kagent/base/buffer.h"

#include "kagent/base/alloc.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void
kagent_buffer_append(struct kagent_buffer *buffer, const void *bytes, size_t size)
{
	if (buffer->capacity - buffer->length < size + 1) {
		size_t capacity = buffer->capacity == 0 ? 64 : buffer->capacity;

		while (capacity - buffer->length < size + 1)
			capacity *= 2;
		buffer->data = kagent_realloc(buffer->data, capacity);
		buffer->capacity = capacity;
	}
	if (size > 0)
		memcpy(buffer->data + buffer->length, bytes, size);
	buffer->length += size;
	buffer->data[buffer->length] = '\0';
}

void
kagent_buffer_set(struct kagent_buffer *buffer, const void *bytes, size_t size)
{
	buffer->length = 0;
	kagent_buffer_append(buffer, bytes, size);
}

const char *
kagent_buffer_string(const struct kagent_buffer *buffer)
{
	return buffer->data != NULL ? buffer->data : "";
}

void
kagent_buffer_append_string(struct kagent_buffer *buffer, const char *string)
{
	kagent_buffer_append(buffer, string, strlen(string));
}

void
kagent_buffer_appendf(struct kagent_buffer *buffer, const char *format, ...)
{
	va_list arguments;
	char *text;

	va_start(arguments, format);
	text = kagent_vasprintf(format, arguments);
	va_end(arguments);
	kagent_buffer_append_string(buffer, text);
	free(text);
}

char *
kagent_buffer_take(struct kagent_buffer *buffer)
{
	/* Fitted: what is taken may be kept for long (a session's prompts). */
	char *data = buffer->data != NULL ? kagent_realloc(buffer->data, buffer->length + 1)
					  : kagent_strdup("");

	memset(buffer, 0, sizeof *buffer);
	return data;
}

void
kagent_buffer_free(struct kagent_buffer *buffer)
{
	free(buffer->data);
	memset(buffer, 0, sizeof *buffer);
}
