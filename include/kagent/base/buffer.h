/*
 * A growable byte buffer, always NUL-terminated so that it can be read as a string (in the
 * spirit of curl's dynbuf). It grows without limit: callers cap whatever a peer controls
 * before appending.
 */
#ifndef KAGENT_BUFFER_H
#define KAGENT_BUFFER_H

#include <stddef.h>

struct kagent_buffer {
	char *data; /* NULL until the first append */
	size_t length;
	size_t capacity;
};

void kagent_buffer_append(struct kagent_buffer *buffer, const void *bytes, size_t size);
/* Appends a NUL-terminated string (without its NUL). */
void kagent_buffer_append_string(struct kagent_buffer *buffer, const char *string);
/* Appends printf-style formatted text. */
void kagent_buffer_appendf(struct kagent_buffer *buffer, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* Replaces the contents. */
void kagent_buffer_set(struct kagent_buffer *buffer, const void *bytes, size_t size);
/* The contents as a string, never NULL; valid until the next change. */
const char *kagent_buffer_string(const struct kagent_buffer *buffer);
/* Hands the string over (never NULL; the caller frees it) and leaves the buffer empty. */
char *kagent_buffer_take(struct kagent_buffer *buffer);
void kagent_buffer_free(struct kagent_buffer *buffer);

#endif
