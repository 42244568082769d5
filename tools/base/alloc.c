/* Allocation wrappers that never return NULL (see include/kagent/base/alloc.h). */
#include "kagent/base/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
alloc__out_of_memory(size_t size)
{
	fprintf(stderr, "kagent: out of memory allocating %zu bytes\n", size);
	abort();
}

void *
kagent_malloc(size_t size)
{
	void *pointer = malloc(size == 0 ? 1 : size);

	if (pointer == NULL)
		alloc__out_of_memory(size);
	return pointer;
}

void *
kagent_calloc(size_t count, size_t size)
{
	void *pointer = calloc(count == 0 ? 1 : count, size == 0 ? 1 : size);

	if (pointer == NULL)
		alloc__out_of_memory(count * size);
	return pointer;
}

void *
kagent_realloc(void *pointer, size_t size)
{
	void *grown = realloc(pointer, size == 0 ? 1 : size);

	if (grown == NULL)
		alloc__out_of_memory(size);
	return grown;
}

char *
kagent_strdup(const char *string)
{
	return kagent_strndup(string, strlen(string));
}

char *
kagent_strndup(const char *string, size_t length)
{
	char *copy = kagent_malloc(length + 1);

	memcpy(copy, string, length);
	copy[length] = '\0';
	return copy;
}

char *
kagent_vasprintf(const char *format, va_list arguments)
{
	va_list copy;
	int length;
	char *string;

	/* A NULL format is a bug in the caller. Saying so also keeps gcc 12 with
	 * -fsanitize=undefined from failing the build with "null format string". */
	if (format == NULL)
		abort();
	va_copy(copy, arguments);
	length = vsnprintf(NULL, 0, format, copy);
	va_end(copy);
	if (length < 0)
		alloc__out_of_memory(0);
	string = kagent_malloc((size_t)length + 1);
	vsnprintf(string, (size_t)length + 1, format, arguments);
	return string;
}

char *
kagent_asprintf(const char *format, ...)
{
	va_list arguments;
	char *string;

	va_start(arguments, format);
	string = kagent_vasprintf(format, arguments);
	va_end(arguments);
	return string;
}
