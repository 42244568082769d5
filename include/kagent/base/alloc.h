/*
 * Allocation wrappers for kagent's own objects. They never return NULL: running
 * out of memory for an internal object is not something a caller can recover
 * from, so they print a message and abort (as tmux's xmalloc.c does). Buffers
 * whose size a peer or a candidate controls must be capped by the caller.
 */
#ifndef KAGENT_ALLOC_H
#define KAGENT_ALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *kagent_malloc(size_t size);
void *kagent_calloc(size_t count, size_t size);
void *kagent_realloc(void *pointer, size_t size);
char *kagent_strdup(const char *string);
char *kagent_strndup(const char *string, size_t length);
/* Returns a newly allocated string; the caller frees it. */
char *kagent_asprintf(const char *format, ...) __attribute__((format(printf, 1, 2)));
char *kagent_vasprintf(const char *format, va_list arguments) __attribute__((format(printf, 1, 0)));

#endif
