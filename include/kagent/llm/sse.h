/*
 * An incremental Server-Sent-Events parser (the text/event-stream format of the
 * WHATWG HTML standard) for streamed model replies. Bytes arrive in whatever
 * pieces the network gives; a line may be split anywhere, including between
 * the \r and the \n of a CRLF. The parser keeps partial lines across feeds and
 * calls back once per complete event, on the blank line that ends it. Every
 * buffer is capped because the peer controls their size.
 */
#ifndef KAGENT_SSE_H
#define KAGENT_SSE_H

#include <stddef.h>

/* Default caps: one line, and one event's data (its data: lines joined). */
#define KAGENT_SSE_DEFAULT_LINE_CAP ((size_t)8 << 20)
#define KAGENT_SSE_DEFAULT_DATA_CAP ((size_t)8 << 20)

struct kagent_sse;

struct kagent_sse_event {
	/* "message" when the event has no event: field. */
	const char *name;
	/* The data: lines joined with \n, NUL-terminated; data_length excludes the NUL. */
	const char *data;
	size_t data_length;
	/* The last id: field seen in the stream, "" if none. */
	const char *id;
};

/*
 * Called once per event. The event's strings live until the callback returns.
 * Returning a negative errno (and setting *cause) stops the parser: the feed
 * that dispatched it returns that value and every later feed fails too.
 */
typedef int (*kagent_sse_event_function)(void *argument, const struct kagent_sse_event *event,
					 char **cause);

struct kagent_sse_stats {
	unsigned long long events;   /* events dispatched */
	unsigned long long comments; /* ":" lines, the keep-alives */
	unsigned long long bytes;    /* bytes fed */
};

/* A cap of 0 means the default. Never returns NULL. */
struct kagent_sse *kagent_sse_create(size_t line_cap, size_t data_cap,
				     kagent_sse_event_function function, void *argument);
/*
 * Parses size bytes. Returns 0, -EMSGSIZE when a line or an event's data passes
 * its cap, or the callback's error; fills *cause on failure. After a failure the
 * parser stays failed.
 */
int kagent_sse_feed(struct kagent_sse *sse, const void *bytes, size_t size, char **cause);
/*
 * The end of the stream. A last line without its newline is taken as a line;
 * an event whose blank line never came is discarded, as the standard says, and
 * reported through *partial_out (1 when data was discarded, may be NULL).
 * Returns 0 or the same errors as feed.
 */
int kagent_sse_finish(struct kagent_sse *sse, int *partial_out, char **cause);
void kagent_sse_get_stats(const struct kagent_sse *sse, struct kagent_sse_stats *stats);
void kagent_sse_free(struct kagent_sse *sse);

#endif
