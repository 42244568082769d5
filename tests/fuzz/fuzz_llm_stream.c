/*
 * Fuzzes the streamed-reply accumulator (agent/llm/llm_stream.c) the way a reply reaches it:
 * through the SSE parser. Input: one byte, the wire format (modulo 3: Chat Completions,
 * Responses, Anthropic); one byte, the piece stride; then the event stream.
 */
#include "fuzz.h"

#include "kagent/llm/llm_stream.h"

#include <stdlib.h>

static int
fuzz_llm_stream__feed(void *target, const uint8_t *piece, size_t length)
{
	char *cause = NULL;
	int result = kagent_sse_feed(target, piece, length, &cause);

	free(cause);
	return result;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kagent_llm_stream *stream;
	struct kagent_llm_result *result = NULL;
	struct kagent_sse *sse;
	char *cause = NULL;

	if (size < 2)
		return 0;
	stream = kagent_llm_stream_create((enum kagent_llm_format)(data[0] % 3));
	sse = kagent_sse_create(0, 0, kagent_llm_stream_on_sse_event, stream);
	if (kagent_fuzz_feed(data + 2, size - 2, data[1], fuzz_llm_stream__feed, sse) == 0)
		kagent_sse_finish(sse, NULL, &cause);
	free(cause);
	cause = NULL;
	/* Finish always hands over a result, even for a failed stream. */
	kagent_llm_stream_finish(stream, &result, &cause);
	if (result == NULL || result->text == NULL || result->reasoning == NULL)
		abort();
	free(cause);
	kagent_llm_result_free(result);
	kagent_llm_stream_free(stream);
	kagent_sse_free(sse);
	return 0;
}
