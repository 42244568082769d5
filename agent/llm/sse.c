/*
 * Incremental Server-Sent-Events parser (see include/kagent/llm/sse.h). It follows
 * the WHATWG "event stream interpretation" rules: lines end in CRLF, LF or a
 * lone CR; "field: value" with one optional space after the colon; data lines
 * are joined with \n; the blank line dispatches; ":" lines are comments.
 */
#include "kagent/llm/sse.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct kagent_sse {
	kagent_sse_event_function function;
	void *argument;
	size_t line_cap;
	size_t data_cap;
	struct kagent_buffer line;
	struct kagent_buffer data;
	struct kagent_buffer name;
	struct kagent_buffer id;
	/* Whether the current event has had a data: line (an empty one counts). */
	int has_data;
	/* The last byte fed was a \r that ended a line: a following \n belongs to it. */
	int after_cr;
	/* Still looking for a UTF-8 byte order mark at the very start. */
	int at_start;
	/* The sticky error: once failed, the stream is not trustworthy any more. */
	int error;
	char *error_cause;
	struct kagent_sse_stats stats;
};

struct kagent_sse *
kagent_sse_create(size_t line_cap, size_t data_cap, kagent_sse_event_function function,
		  void *argument)
{
	struct kagent_sse *sse = kagent_calloc(1, sizeof *sse);

	sse->function = function;
	sse->argument = argument;
	sse->line_cap = line_cap == 0 ? KAGENT_SSE_DEFAULT_LINE_CAP : line_cap;
	sse->data_cap = data_cap == 0 ? KAGENT_SSE_DEFAULT_DATA_CAP : data_cap;
	sse->at_start = 1;
	kagent_buffer_set(&sse->id, "", 0);
	return sse;
}

void
kagent_sse_free(struct kagent_sse *sse)
{
	if (sse == NULL)
		return;
	kagent_buffer_free(&sse->line);
	kagent_buffer_free(&sse->data);
	kagent_buffer_free(&sse->name);
	kagent_buffer_free(&sse->id);
	free(sse->error_cause);
	free(sse);
}

void
kagent_sse_get_stats(const struct kagent_sse *sse, struct kagent_sse_stats *stats)
{
	*stats = sse->stats;
}

/* Records the first error and hands a copy of its message to the caller. */
static int
sse__fail(struct kagent_sse *sse, int error, char *message, char **cause)
{
	sse->error = error;
	sse->error_cause = message;
	*cause = kagent_strdup(message);
	return error;
}

static int
sse__dispatch(struct kagent_sse *sse, char **cause)
{
	struct kagent_sse_event event;
	char *callback_cause = NULL;
	int result = 0;

	if (!sse->has_data) {
		/* The standard resets the event name even when nothing is dispatched. */
		sse->name.length = 0;
		goto out;
	}
	if (sse->data.length == 0)
		kagent_buffer_set(&sse->data, "", 0);
	event.name = sse->name.length > 0 ? sse->name.data : "message";
	event.data = sse->data.data;
	event.data_length = sse->data.length;
	event.id = sse->id.data;
	sse->stats.events++;
	result = sse->function(sse->argument, &event, &callback_cause);
	sse->name.length = 0;
	sse->data.length = 0;
	sse->has_data = 0;
	if (result < 0)
		result = sse__fail(sse, result,
				   callback_cause != NULL ? callback_cause
							  : kagent_strdup("event handler failed"),
				   cause);
	else
		free(callback_cause);
out:
	return result;
}

/* Interprets one complete line (without its line ending). */
static int
sse__process_line(struct kagent_sse *sse, const char *line, size_t length, char **cause)
{
	const char *colon, *value;
	size_t field_length, value_length;
	int result = 0;

	if (length == 0) {
		result = sse__dispatch(sse, cause);
		goto out;
	}
	if (line[0] == ':') {
		sse->stats.comments++;
		goto out;
	}
	colon = memchr(line, ':', length);
	field_length = colon != NULL ? (size_t)(colon - line) : length;
	value = colon != NULL ? colon + 1 : line + length;
	value_length = length - (size_t)(value - line);
	if (value_length > 0 && value[0] == ' ') {
		value++;
		value_length--;
	}
	if (field_length == 4 && memcmp(line, "data", 4) == 0) {
		size_t joined = sse->data.length + (sse->has_data ? 1 : 0) + value_length;

		if (joined > sse->data_cap) {
			result = sse__fail(sse, -EMSGSIZE,
					   kagent_asprintf("server-sent event data is larger than "
							   "%zu bytes",
							   sse->data_cap),
					   cause);
			goto out;
		}
		if (sse->has_data)
			kagent_buffer_append(&sse->data, "\n", 1);
		kagent_buffer_append(&sse->data, value, value_length);
		sse->has_data = 1;
	} else if (field_length == 5 && memcmp(line, "event", 5) == 0) {
		kagent_buffer_set(&sse->name, value, value_length);
	} else if (field_length == 2 && memcmp(line, "id", 2) == 0) {
		/* An id containing NUL is ignored by the standard. */
		if (memchr(value, '\0', value_length) == NULL)
			kagent_buffer_set(&sse->id, value, value_length);
	}
	/* retry: and unknown fields are ignored: reconnection is the client's policy. */
out:
	return result;
}

static int
sse__line_too_long(struct kagent_sse *sse, char **cause)
{
	return sse__fail(
	    sse, -EMSGSIZE,
	    kagent_asprintf("a server-sent event line is longer than %zu bytes", sse->line_cap),
	    cause);
}

int
kagent_sse_feed(struct kagent_sse *sse, const void *bytes, size_t size, char **cause)
{
	const char *cursor = bytes, *end = cursor + size;
	int result = 0;

	if (sse->error != 0) {
		result = sse->error;
		*cause = kagent_strdup(sse->error_cause);
		goto out;
	}
	sse->stats.bytes += size;
	if (sse->at_start && cursor < end) {
		/* A byte order mark may itself arrive split: hold the start until 3 bytes are here.
		 */
		static const char bom[] = "\xEF\xBB\xBF";
		size_t have = sse->line.length, take = 0;

		while (have + take < 3 && cursor + take < end && cursor[take] == bom[have + take])
			take++;
		if (have + take == 3) {
			sse->line.length = 0;
			cursor += take;
			sse->at_start = 0;
		} else if (cursor + take == end) {
			kagent_buffer_append(&sse->line, cursor, take);
			goto out;
		} else {
			sse->at_start = 0;
		}
	}
	while (cursor < end) {
		const char *stop = cursor;
		size_t piece;

		if (sse->after_cr) {
			sse->after_cr = 0;
			if (*cursor == '\n') {
				cursor++;
				continue;
			}
		}
		while (stop < end && *stop != '\n' && *stop != '\r')
			stop++;
		piece = (size_t)(stop - cursor);
		if (sse->line.length + piece > sse->line_cap) {
			result = sse__line_too_long(sse, cause);
			goto out;
		}
		if (stop == end) {
			kagent_buffer_append(&sse->line, cursor, piece);
			break;
		}
		if (sse->line.length > 0) {
			kagent_buffer_append(&sse->line, cursor, piece);
			result = sse__process_line(sse, sse->line.data, sse->line.length, cause);
			sse->line.length = 0;
		} else {
			/* The whole line is in this chunk: no copy needed. */
			result = sse__process_line(sse, cursor, piece, cause);
		}
		if (result < 0)
			goto out;
		sse->after_cr = *stop == '\r';
		cursor = stop + 1;
	}
out:
	return result;
}

int
kagent_sse_finish(struct kagent_sse *sse, int *partial_out, char **cause)
{
	int result = 0;

	if (partial_out != NULL)
		*partial_out = 0;
	if (sse->error != 0) {
		result = sse->error;
		*cause = kagent_strdup(sse->error_cause);
		goto out;
	}
	if (sse->line.length > 0) {
		result = sse__process_line(sse, sse->line.data, sse->line.length, cause);
		sse->line.length = 0;
		if (result < 0)
			goto out;
	}
	if (sse->has_data && partial_out != NULL)
		*partial_out = 1;
	sse->has_data = 0;
	sse->data.length = 0;
	sse->name.length = 0;
out:
	return result;
}
