/*
 * Fuzzes the SSE parser (agent/llm/sse.c). Input: one byte, the piece stride (0: one feed);
 * one byte whose low bit picks small caps (64-byte lines, 256 bytes of data per event) so the
 * -EMSGSIZE paths are reached; then the stream, fed in pieces and finished.
 */
#include "fuzz.h"

#include "kagent/llm/sse.h"

#include <stdlib.h>
#include <string.h>

static int
fuzz_sse__on_event(void *argument, const struct kagent_sse_event *event, char **cause)
{
	size_t *events = argument;

	/* The promises of struct kagent_sse_event; a broken one aborts, which libFuzzer reports. */
	if (event->name == NULL || event->id == NULL || event->data[event->data_length] != '\0')
		abort();
	(*events)++;
	return 0;
}

static int
fuzz_sse__feed(void *target, const uint8_t *piece, size_t length)
{
	char *cause = NULL;
	int result = kagent_sse_feed(target, piece, length, &cause);

	free(cause);
	return result;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kagent_sse *sse;
	size_t events = 0;
	char *cause = NULL;
	int small, partial;

	if (size < 2)
		return 0;
	small = data[1] & 1;
	sse = kagent_sse_create(small ? 64 : 0, small ? 256 : 0, fuzz_sse__on_event, &events);
	if (kagent_fuzz_feed(data + 2, size - 2, data[0], fuzz_sse__feed, sse) == 0)
		kagent_sse_finish(sse, &partial, &cause);
	free(cause);
	kagent_sse_free(sse);
	return 0;
}
