/* Tests of the Server-Sent-Events parser: every split point, CRLF, comments, caps. */
#include "kagent/llm/sse.h"

#include "kagent/base/alloc.h"
#include "test.h"

#include <errno.h>

/* Records events as "name|data|id\n" lines so a whole run compares as one string. */
struct recorder {
	char *log;
	int stop_after;
	int events;
};

static int
record_event(void *argument, const struct kagent_sse_event *event, char **cause)
{
	struct recorder *recorder = argument;
	char *old = recorder->log;

	CHECK_INT(strlen(event->data), event->data_length);
	recorder->log = kagent_asprintf("%s%s|%s|%s\n", old != NULL ? old : "", event->name,
					event->data, event->id);
	free(old);
	recorder->events++;
	if (recorder->stop_after > 0 && recorder->events >= recorder->stop_after) {
		*cause = kagent_strdup("enough");
		return -ECANCELED;
	}
	return 0;
}

/* Feeds text in pieces cut at the given points; returns the event log. */
static char *
parse_split(const char *text, size_t length, const size_t *cuts, size_t cut_count,
	    unsigned long long *comments, int *partial)
{
	struct recorder recorder = {0};
	struct kagent_sse *sse = kagent_sse_create(0, 0, record_event, &recorder);
	struct kagent_sse_stats stats;
	char *cause = NULL;
	size_t start = 0;

	for (size_t i = 0; i <= cut_count; i++) {
		size_t stop = i < cut_count ? cuts[i] : length;

		CHECK_INT(kagent_sse_feed(sse, text + start, stop - start, &cause), 0);
		start = stop;
	}
	CHECK_INT(kagent_sse_finish(sse, partial, &cause), 0);
	kagent_sse_get_stats(sse, &stats);
	CHECK_INT(stats.bytes, length);
	if (comments != NULL)
		*comments = stats.comments;
	kagent_sse_free(sse);
	if (recorder.log == NULL)
		recorder.log = kagent_strdup("");
	return recorder.log;
}

/* Checks that every one- and two-cut split of text gives the expected log. */
static void
check_all_splits(const char *text, const char *expected, unsigned long long expected_comments)
{
	size_t length = strlen(text);
	unsigned long long comments;
	char *log;

	log = parse_split(text, length, NULL, 0, &comments, NULL);
	CHECK_STRING(log, expected);
	CHECK_INT(comments, expected_comments);
	free(log);
	for (size_t a = 0; a <= length; a++) {
		for (size_t b = a; b <= length; b += (length > 200 ? 7 : 1)) {
			size_t cuts[2] = {a, b};

			log = parse_split(text, length, cuts, 2, &comments, NULL);
			if (strcmp(log, expected) != 0)
				fprintf(stderr, "split at %zu and %zu\n", a, b);
			CHECK_STRING(log, expected);
			CHECK_INT(comments, expected_comments);
			free(log);
		}
	}
	/* One byte at a time. */
	{
		size_t *cuts = kagent_calloc(length + 1, sizeof *cuts);

		for (size_t i = 0; i < length; i++)
			cuts[i] = i;
		log = parse_split(text, length, cuts, length, &comments, NULL);
		CHECK_STRING(log, expected);
		free(log);
		free(cuts);
	}
}

static void
test_basic_events(void)
{
	check_all_splits("data: hello\n\nevent: delta\ndata: {\"a\":1}\n\n",
			 "message|hello|\ndelta|{\"a\":1}|\n", 0);
}

static void
test_multiline_data_joined(void)
{
	check_all_splits("data: one\ndata: two\ndata:three\ndata:\n\n",
			 "message|one\ntwo\nthree\n|\n", 0);
}

static void
test_crlf_and_lone_cr(void)
{
	check_all_splits("event: a\r\ndata: x\r\n\r\nevent: b\rdata: y\r\rdata: z\n\n",
			 "a|x|\nb|y|\nmessage|z|\n", 0);
}

static void
test_comments_are_keepalives(void)
{
	check_all_splits(": ping\n\n:\ndata: after\n: mid\n\n", "message|after|\n", 3);
}

static void
test_fields_and_id(void)
{
	/* No space after the colon, only one space removed, unknown fields ignored,
	 * the event name reset after each dispatch, the id kept across events. */
	check_all_splits("id: 7\nretry: 100\nfoo: bar\nevent:x\ndata:  two spaces\n\ndata\n\n",
			 "x| two spaces|7\nmessage||7\n", 0);
}

static void
test_blank_lines_without_data(void)
{
	/* An event: line alone does not dispatch, and the name does not leak into the next. */
	check_all_splits("event: lonely\n\n\n\ndata: d\n\n", "message|d|\n", 0);
}

static void
test_byte_order_mark(void)
{
	check_all_splits("\xEF\xBB\xBF"
			 "data: bom\n\n",
			 "message|bom|\n", 0);
}

static void
test_last_line_without_newline(void)
{
	const char *text = "data: done\n\ndata: cut";
	int partial = 0;
	char *log = parse_split(text, strlen(text), NULL, 0, NULL, &partial);

	/* The standard discards an event that never got its blank line; we say so. */
	CHECK_STRING(log, "message|done|\n");
	CHECK_INT(partial, 1);
	free(log);
	text = "data: done\n\n";
	log = parse_split(text, strlen(text), NULL, 0, NULL, &partial);
	CHECK_INT(partial, 0);
	free(log);
}

static void
test_random_chunks_long_stream(void)
{
	size_t count = 400, length;
	char *text = kagent_strdup(""), *expected = kagent_strdup(""), *log;

	for (size_t i = 0; i < count; i++) {
		char *next_text = kagent_asprintf("%s%sevent: e%zu\r\ndata: payload %zu\r\n\r\n",
						  text, i % 10 == 0 ? ": keep-alive\n" : "", i, i);
		char *next_expected = kagent_asprintf("%se%zu|payload %zu|\n", expected, i, i);

		free(text);
		free(expected);
		text = next_text;
		expected = next_expected;
	}
	length = strlen(text);
	srand(12345);
	for (int round = 0; round < 30; round++) {
		size_t cuts[4096], cut_count = 0, position = 0;
		unsigned long long comments;

		while (cut_count < 4096) {
			position += (size_t)(rand() % 97);
			if (position >= length)
				break;
			cuts[cut_count++] = position;
		}
		log = parse_split(text, length, cuts, cut_count, &comments, NULL);
		CHECK_STRING(log, expected);
		CHECK_INT(comments, count / 10);
		free(log);
	}
	free(text);
	free(expected);
}

static void
test_oversize_line_rejected(void)
{
	struct recorder recorder = {0};
	struct kagent_sse *sse = kagent_sse_create(64, 0, record_event, &recorder);
	char line[100], *cause = NULL;

	memset(line, 'x', sizeof line);
	CHECK_INT(kagent_sse_feed(sse, "data: ok\n\n", 10, &cause), 0);
	/* Split in two feeds: the cap holds across partial lines. */
	CHECK_INT(kagent_sse_feed(sse, line, 50, &cause), 0);
	CHECK_INT(kagent_sse_feed(sse, line, 50, &cause), -EMSGSIZE);
	CHECK_CONTAINS(cause, "longer than 64 bytes");
	free(cause);
	cause = NULL;
	/* The parser stays failed. */
	CHECK_INT(kagent_sse_feed(sse, "\n\n", 2, &cause), -EMSGSIZE);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_sse_finish(sse, NULL, &cause), -EMSGSIZE);
	free(cause);
	CHECK_INT(recorder.events, 1);
	kagent_sse_free(sse);
	free(recorder.log);
}

static void
test_oversize_data_rejected(void)
{
	struct recorder recorder = {0};
	struct kagent_sse *sse = kagent_sse_create(0, 20, record_event, &recorder);
	char *cause = NULL;
	const char *text = "data: 0123456789\ndata: 0123456789\n\n";

	/* Each line is short; their join (21 bytes) is over the 20-byte data cap. */
	CHECK_INT(kagent_sse_feed(sse, text, strlen(text), &cause), -EMSGSIZE);
	CHECK_CONTAINS(cause, "data is larger than 20 bytes");
	CHECK_INT(recorder.events, 0);
	free(cause);
	kagent_sse_free(sse);
}

static void
test_callback_error_stops(void)
{
	struct recorder recorder = {.stop_after = 1};
	struct kagent_sse *sse = kagent_sse_create(0, 0, record_event, &recorder);
	char *cause = NULL;
	const char *text = "data: a\n\ndata: b\n\n";

	CHECK_INT(kagent_sse_feed(sse, text, strlen(text), &cause), -ECANCELED);
	CHECK_STRING(cause, "enough");
	CHECK_INT(recorder.events, 1);
	free(cause);
	kagent_sse_free(sse);
	free(recorder.log);
}

static const struct kagent_test tests[] = {
    {"basic_events", test_basic_events},
    {"multiline_data_joined", test_multiline_data_joined},
    {"crlf_and_lone_cr", test_crlf_and_lone_cr},
    {"comments_are_keepalives", test_comments_are_keepalives},
    {"fields_and_id", test_fields_and_id},
    {"blank_lines_without_data", test_blank_lines_without_data},
    {"byte_order_mark", test_byte_order_mark},
    {"last_line_without_newline", test_last_line_without_newline},
    {"random_chunks_long_stream", test_random_chunks_long_stream},
    {"oversize_line_rejected", test_oversize_line_rejected},
    {"oversize_data_rejected", test_oversize_data_rejected},
    {"callback_error_stops", test_callback_error_stops},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
