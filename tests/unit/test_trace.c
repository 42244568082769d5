/* Tests of the trace file: numbering, time, redaction, resume, cut lines and bad lines. */
#include "kagent/records/trace.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "test.h"

#include <errno.h>
#include <regex.h>
#include <sys/stat.h>
#include <unistd.h>

/* Collects every record read, in order. */
static int
collect(const json_t *record, void *data)
{
	json_array_append(data, (json_t *)record);
	return 0;
}

static json_t *
read_all(const char *path, int *truncated)
{
	json_t *records = json_array();
	char *error = NULL;

	CHECK_INT(kagent_trace_read(path, collect, records, truncated, &error), 0);
	CHECK(error == NULL);
	return records;
}

static char *
read_text(const char *path)
{
	char *text = NULL, *cause = NULL;
	size_t size;

	CHECK_INT(kagent_fileio_read(path, 1 << 20, &text, &size, &cause), 0);
	return text;
}

static void
append_text(const char *path, const char *text)
{
	FILE *file = fopen(path, "a");

	CHECK(file != NULL);
	CHECK(fputs(text, file) >= 0);
	CHECK(fclose(file) == 0);
}

static void
remove_directory(char *directory)
{
	char *cause = NULL;

	CHECK_INT(kagent_paths_remove_tree(directory, &cause), 0);
	free(directory);
}

static long long
seq_of(const json_t *records, size_t index)
{
	return json_integer_value(json_object_get(json_array_get(records, index), "seq"));
}

static void
test_round_trip(void)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_asprintf("%s/relu/traces/run.jsonl", directory);
	char *folder = kagent_asprintf("%s/relu/traces", directory);
	struct kagent_trace *trace = NULL;
	char *error = NULL, *text;
	json_t *records, *record;
	regex_t time_pattern;
	struct stat info;
	int truncated = -1;

	CHECK_INT(kagent_trace_open(path, 0, &trace, &error), 0);
	CHECK_INT(stat(folder, &info), 0);
	CHECK_INT(info.st_mode & 0777, 0700);
	CHECK_INT(stat(path, &info), 0);
	CHECK_INT(info.st_mode & 0777, 0600);
	CHECK_INT(kagent_trace_write(trace, "run_start",
				     json_pack("{s:s, s:b, s:{s:s}}", "run_id", "r1", "resumed", 0,
					       "config", "model", "gpt-5")),
		  0);
	CHECK_INT(kagent_trace_write(trace, "message", NULL), 0);
	/* A caller's own type or seq does not break the numbering. */
	CHECK_INT(kagent_trace_write(trace, "reply",
				     json_pack("{s:i, s:s, s:i, s:s}", "turn", 1, "type", "evil",
					       "seq", 99, "text", "line one\nline \"two\"")),
		  0);
	/* Not an object: refused, nothing written, the numbering goes on. */
	CHECK_INT(kagent_trace_write(trace, "bad", json_integer(3)), -EINVAL);
	CHECK_INT(kagent_trace_write(trace, "stop", json_pack("{s:s}", "reason", "interrupted")),
		  0);
	kagent_trace_close(trace);

	text = read_text(path);
	CHECK(strncmp(text, "{\"type\":\"run_start\",\"seq\":1,\"time\":\"", 36) == 0);
	CHECK_CONTAINS(text, "\"time\":");
	CHECK_CONTAINS(text,
		       ",\"run_id\":\"r1\",\"resumed\":false,\"config\":{\"model\":\"gpt-5\"}}\n");
	CHECK(text[strlen(text) - 1] == '\n');

	records = read_all(path, &truncated);
	CHECK_INT(truncated, 0);
	CHECK_INT(json_array_size(records), 4);
	CHECK(regcomp(&time_pattern,
		      "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
		      REG_EXTENDED | REG_NOSUB) == 0);
	for (size_t i = 0; i < 4; i++) {
		const char *time =
		    json_string_value(json_object_get(json_array_get(records, i), "time"));

		CHECK_INT(seq_of(records, i), i + 1);
		CHECK(time != NULL);
		CHECK_INT(regexec(&time_pattern, time, 0, NULL, 0), 0);
	}
	regfree(&time_pattern);
	record = json_array_get(records, 2);
	CHECK_STRING(json_string_value(json_object_get(record, "type")), "reply");
	CHECK_STRING(json_string_value(json_object_get(record, "text")), "line one\nline \"two\"");
	CHECK_INT(json_integer_value(json_object_get(record, "turn")), 1);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(records, 1), "type")),
		     "message");
	CHECK_INT(json_object_size(json_array_get(records, 1)), 3);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(records, 3), "type")),
		     "stop");
	json_decref(records);
	free(text);
	free(path);
	free(folder);
	remove_directory(directory);
}

static void
test_redaction(void)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_asprintf("%s/run.jsonl", directory);
	struct kagent_trace *trace = NULL;
	char *error = NULL, *text;
	json_t *value, *redacted, *records, *record, *clean;

	CHECK_INT(kagent_trace_open(path, 0, &trace, &error), 0);
	kagent_trace_add_secret(trace, "");
	kagent_trace_add_secret(trace, NULL);
	kagent_trace_add_secret(trace, "sk-secret");
	kagent_trace_add_secret(trace, "sk-secret-longer");
	value = json_pack("{s:{s:{s:s, s:s, s:s, s:i}}, s:[s, s, s, s, s], s:s, s:[{s:[s]}], "
			  "s:{s:s, s:{s:s}}}",
			  "config", "provider", "api_key", "sk-other", "api_key_env",
			  "OPENAI_API_KEY", "model", "gpt-5", "API-KEY", 7, "headers",
			  "Authorization: Bearer sk-secret-longer", "X-Api-Key: abc123",
			  "proxy-authorization: Basic xyz", "Content-Type: application/json",
			  "authorization is explained in the docs", "text",
			  "sk-secret-longer, then sk-secret twice: sk-secret.", "deep", "nested",
			  "it was sk-secret", "request", "Authorization", "Bearer sk-anything",
			  "sk-secret", "X-API-Key", "k");
	json_object_set_new(value, "clean", json_pack("{s:[s, i]}", "list", "plain text", 3));
	redacted = kagent_trace_redact(trace, value);
	/* What needs no redaction is shared, not copied; the original is untouched. */
	CHECK(redacted != value);
	CHECK(json_object_get(redacted, "clean") == json_object_get(value, "clean"));
	clean = json_object_get(value, "clean");
	CHECK(kagent_trace_redact(trace, clean) == clean);
	json_decref(clean);
	CHECK_STRING(json_string_value(json_object_get(
			 json_object_get(json_object_get(value, "config"), "provider"), "api_key")),
		     "sk-other");
	record = json_object_get(json_object_get(redacted, "config"), "provider");
	CHECK_STRING(json_string_value(json_object_get(record, "api_key")), "[redacted]");
	CHECK_STRING(json_string_value(json_object_get(record, "API-KEY")), "[redacted]");
	CHECK_STRING(json_string_value(json_object_get(record, "api_key_env")), "OPENAI_API_KEY");
	CHECK_STRING(json_string_value(json_object_get(record, "model")), "gpt-5");
	record = json_object_get(redacted, "headers");
	CHECK_STRING(json_string_value(json_array_get(record, 0)), "Authorization: [redacted]");
	CHECK_STRING(json_string_value(json_array_get(record, 1)), "X-Api-Key: [redacted]");
	CHECK_STRING(json_string_value(json_array_get(record, 2)),
		     "proxy-authorization: [redacted]");
	CHECK_STRING(json_string_value(json_array_get(record, 3)),
		     "Content-Type: application/json");
	CHECK_STRING(json_string_value(json_array_get(record, 4)),
		     "authorization is explained in the docs");
	CHECK_STRING(json_string_value(json_object_get(redacted, "text")),
		     "[redacted], then [redacted] twice: [redacted].");
	CHECK_STRING(
	    json_string_value(json_array_get(
		json_object_get(json_array_get(json_object_get(redacted, "deep"), 0), "nested"),
		0)),
	    "it was [redacted]");
	record = json_object_get(redacted, "request");
	CHECK_STRING(json_string_value(json_object_get(record, "Authorization")), "[redacted]");
	/* A secret in a key is replaced too; a credential key's value goes whatever its type. */
	CHECK(json_object_get(record, "sk-secret") == NULL);
	CHECK(json_is_object(json_object_get(record, "[redacted]")));
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(record, "[redacted]"), "X-API-Key")),
	    "[redacted]");
	json_decref(redacted);

	/* The same through the file. */
	CHECK_INT(kagent_trace_write(trace, "request", value), 0);
	kagent_trace_close(trace);
	text = read_text(path);
	CHECK(strstr(text, "sk-secret") == NULL);
	CHECK(strstr(text, "sk-other") == NULL);
	CHECK(strstr(text, "abc123") == NULL);
	CHECK(strstr(text, "sk-anything") == NULL);
	CHECK_CONTAINS(text, "OPENAI_API_KEY");
	records = read_all(path, NULL);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(records, 0), "text")),
		     "[redacted], then [redacted] twice: [redacted].");
	json_decref(records);
	free(text);
	free(path);
	remove_directory(directory);
}

static void
test_resume(void)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_asprintf("%s/run.jsonl", directory);
	struct kagent_trace *trace = NULL;
	char *error = NULL, *text;
	json_t *records;
	int truncated = -1;

	/* Nothing to resume. */
	CHECK(kagent_trace_open(path, 1, &trace, &error) == -ENOENT);
	CHECK(trace == NULL);
	CHECK_CONTAINS(error, path);
	free(error);
	error = NULL;
	CHECK(access(path, F_OK) != 0);

	CHECK_INT(kagent_trace_open(path, 0, &trace, &error), 0);
	CHECK_INT(kagent_trace_write(trace, "run_start", NULL), 0);
	CHECK_INT(kagent_trace_write(trace, "message", NULL), 0);
	kagent_trace_close(trace);
	/* A clean end: resuming adds no blank line. */
	CHECK_INT(kagent_trace_open(path, 1, &trace, &error), 0);
	CHECK_INT(kagent_trace_write(trace, "run_start", json_pack("{s:b}", "resumed", 1)), 0);
	kagent_trace_close(trace);
	text = read_text(path);
	CHECK(strstr(text, "\n\n") == NULL);
	free(text);
	/* A killed writer's cut line, ended by the resume; numbering goes on from the last record.
	 */
	append_text(path, "{\"type\":\"reply\",\"seq\":4,\"message\":{\"content\":\"hal");
	records = read_all(path, &truncated);
	CHECK_INT(truncated, 1);
	CHECK_INT(json_array_size(records), 3);
	json_decref(records);
	CHECK_INT(kagent_trace_open(path, 1, &trace, &error), 0);
	CHECK_INT(kagent_trace_write(trace, "run_start", json_pack("{s:b}", "resumed", 1)), 0);
	CHECK_INT(kagent_trace_write(trace, "message", NULL), 0);
	kagent_trace_close(trace);
	text = read_text(path);
	CHECK_CONTAINS(text, "\"content\":\"hal\n{\"type\":\"run_start\",\"seq\":4,");
	free(text);
	/* The repaired line is skipped as the cut record it is, not an error. */
	records = read_all(path, &truncated);
	CHECK_INT(truncated, 0);
	CHECK_INT(json_array_size(records), 5);
	for (size_t i = 0; i < 5; i++)
		CHECK_INT(seq_of(records, i), i + 1);
	json_decref(records);
	free(path);
	remove_directory(directory);
}

/* Reads text as a trace; returns the number of records, fills *truncated and *cause. */
static int
read_text_as_trace(const char *text, int *truncated, int *result, char **cause)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_test_write_file(directory, "t.jsonl", text);
	json_t *records = json_array();
	int count;

	*cause = NULL;
	*result = kagent_trace_read(path, collect, records, truncated, cause);
	count = (int)json_array_size(records);
	json_decref(records);
	free(path);
	remove_directory(directory);
	return count;
}

/* A trace whose record numbers are out of range is refused on resume, not counted on from. */
static void
test_resume_refuses_huge_seq(void)
{
	static const char *const texts[] = {
	    "{\"type\":\"start\",\"seq\": 9223372036854775807}\n",
	    "{\"type\":\"start\",\"seq\": 9007199254740992}\n",
	    "{\"type\":\"start\",\"seq\": -4}\n",
	};
	char *directory = kagent_test_make_directory();
	char *path = kagent_asprintf("%s/run.jsonl", directory);
	struct kagent_trace *trace = NULL;
	char *cause = NULL;
	size_t index;

	for (index = 0; index < sizeof texts / sizeof texts[0]; index++) {
		CHECK_INT(
		    kagent_fileio_write_atomic(path, texts[index], strlen(texts[index]), &cause),
		    0);
		CHECK_INT(kagent_trace_open(path, 1, &trace, &cause), -ERANGE);
		CHECK(trace == NULL);
		CHECK_CONTAINS(cause, "seq is not between 0 and 2^53");
		free(cause);
		cause = NULL;
	}
	/* The largest number kagent writes is still resumed. */
	CHECK_INT(kagent_fileio_write_atomic(path, "{\"type\":\"a\",\"seq\": 9007199254740990}\n",
					     strlen("{\"type\":\"a\",\"seq\": 9007199254740990}\n"),
					     &cause),
		  0);
	CHECK_INT(kagent_trace_open(path, 1, &trace, &cause), 0);
	CHECK_INT(kagent_trace_write(trace, "b", NULL), 0);
	kagent_trace_close(trace);
	free(path);
	remove_directory(directory);
}

static void
test_cut_last_line(void)
{
	int truncated = -1, result;
	char *error = NULL;

	CHECK_INT(read_text_as_trace("{\"type\":\"a\",\"seq\":1}\n{\"type\":\"b\",\"seq\":2}\n"
				     "{\"type\":\"c\",\"se",
				     &truncated, &result, &error),
		  2);
	CHECK_INT(result, 0);
	CHECK_INT(truncated, 1);
	/* Any unended last line that does not parse is a cut one. */
	CHECK_INT(read_text_as_trace("{\"type\":\"a\"}\ngarb", &truncated, &result, &error), 1);
	CHECK_INT(result, 0);
	CHECK_INT(truncated, 1);
	/* A last line that only lacks its newline is whole. */
	CHECK_INT(
	    read_text_as_trace("{\"type\":\"a\"}\n{\"type\":\"b\"}", &truncated, &result, &error),
	    2);
	CHECK_INT(truncated, 0);
	/* Empty files and blank lines hold no records. */
	CHECK_INT(read_text_as_trace("", &truncated, &result, &error), 0);
	CHECK_INT(result, 0);
	CHECK_INT(truncated, 0);
	CHECK_INT(read_text_as_trace("\n{\"type\":\"a\"}\n\n", &truncated, &result, &error), 1);
	CHECK_INT(result, 0);
}

static void
test_bad_middle_line(void)
{
	static const char *const bad_lines[] = {
	    "not json at all",	  "[1,2]", "\"a string\"", "{\"type\":\"a\"} trailing",
	    "{\"type\":\"a\",,}",
	};
	int truncated = -1, result;
	char *error = NULL;

	for (size_t i = 0; i < sizeof bad_lines / sizeof bad_lines[0]; i++) {
		char *text =
		    kagent_asprintf("{\"type\":\"a\"}\n%s\n{\"type\":\"b\"}\n", bad_lines[i]);

		CHECK_INT(read_text_as_trace(text, &truncated, &result, &error), 1);
		CHECK_INT(result, -EBADMSG);
		CHECK_CONTAINS(error, "/t.jsonl:2: not a JSON object");
		free(error);
		free(text);
	}
	/* A complete last line is checked like any other. */
	CHECK_INT(read_text_as_trace("{\"type\":\"a\"}\n[]\n", &truncated, &result, &error), 1);
	CHECK_INT(result, -EBADMSG);
	CHECK_CONTAINS(error, ":2: not a JSON object");
	free(error);
}

static int
stop_at_second(const json_t *record, void *data)
{
	int *seen = data;

	return ++*seen == 2 ? 42 : 0;
}

static void
test_reader_stops_and_fails(void)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_test_write_file(directory, "t.jsonl", "{}\n{}\n{}\n");
	char *missing = kagent_asprintf("%s/missing.jsonl", directory);
	char *error = NULL;
	int seen = 0;

	CHECK_INT(kagent_trace_read(path, stop_at_second, &seen, NULL, &error), 42);
	CHECK_INT(seen, 2);
	CHECK(error == NULL);
	CHECK_INT(kagent_trace_read(missing, stop_at_second, &seen, NULL, &error), -ENOENT);
	CHECK_CONTAINS(error, "missing.jsonl");
	free(error);
	free(missing);
	free(path);
	remove_directory(directory);
}

static void
test_line_cap(void)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_asprintf("%s/big.jsonl", directory);
	size_t size = ((size_t)64 << 20) + 16;
	char *text = kagent_malloc(size), *error = NULL;
	FILE *file = fopen(path, "w");
	int seen = 0;

	memset(text, 'x', size);
	CHECK(file != NULL);
	CHECK(fputs("{}\n{\"data\":\"", file) >= 0);
	CHECK_INT(fwrite(text, 1, size, file), size);
	CHECK(fputs("\"}\n", file) >= 0);
	CHECK_INT(fclose(file), 0);
	CHECK_INT(kagent_trace_read(path, stop_at_second, &seen, NULL, &error), -EMSGSIZE);
	CHECK_INT(seen, 1);
	CHECK_CONTAINS(error, "big.jsonl:2: a line longer than 64 MiB");
	free(error);
	free(text);
	free(path);
	remove_directory(directory);
}

static void
test_file_removed_or_replaced(void)
{
	char *directory = kagent_test_make_directory();
	char *folder = kagent_asprintf("%s/traces", directory);
	char *path = kagent_asprintf("%s/run.jsonl", folder);
	struct kagent_trace *trace = NULL;
	char *error = NULL, *cause = NULL, *other;
	json_t *records;

	CHECK_INT(kagent_trace_open(path, 0, &trace, &error), 0);
	CHECK_INT(kagent_trace_write(trace, "run_start", NULL), 0);
	/* Removed: the trace goes on in a new file at the same path. */
	CHECK_INT(unlink(path), 0);
	CHECK_INT(kagent_trace_write(trace, "message", NULL), 0);
	records = read_all(path, NULL);
	CHECK_INT(json_array_size(records), 1);
	CHECK_INT(seq_of(records, 0), 2);
	json_decref(records);
	/* Replaced by another file: written there, after what it holds. */
	other = kagent_test_write_file(directory, "other.jsonl", "{\"type\":\"x\"}\n");
	CHECK_INT(rename(other, path), 0);
	CHECK_INT(kagent_trace_write(trace, "message", NULL), 0);
	records = read_all(path, NULL);
	CHECK_INT(json_array_size(records), 2);
	CHECK_INT(seq_of(records, 1), 3);
	json_decref(records);
	/* The whole folder removed: made again. */
	CHECK_INT(kagent_paths_remove_tree(folder, &cause), 0);
	CHECK_INT(kagent_trace_write(trace, "stop", NULL), 0);
	records = read_all(path, NULL);
	CHECK_INT(json_array_size(records), 1);
	CHECK_INT(seq_of(records, 0), 4);
	json_decref(records);
	/* A path that cannot be made again: an error, no crash, and the next write may succeed. */
	CHECK_INT(kagent_paths_remove_tree(folder, &cause), 0);
	free(other);
	other = kagent_test_write_file(directory, "traces", "a file where the folder was");
	CHECK(kagent_trace_write(trace, "stop", NULL) < 0);
	kagent_trace_close(trace);
	free(other);
	free(path);
	free(folder);
	remove_directory(directory);
}

/* What kagent_trace_read_from handed over: each record's seq, line and end offset. */
static int
collect_lines(const struct kagent_trace_line *line, void *data)
{
	json_array_append_new(
	    data, json_pack("{s:O, s:s%, s:I}", "seq", json_object_get(line->record, "seq"), "text",
			    line->text, line->length, "end", (json_int_t)line->end));
	return 0;
}

static json_t *
read_from(const char *path, long long offset, size_t budget, long long *next)
{
	json_t *lines = json_array();
	char *cause = NULL;

	CHECK_INT(kagent_trace_read_from(path, offset, budget, collect_lines, lines, next, &cause),
		  0);
	CHECK(cause == NULL);
	return lines;
}

static void
test_read_from_follows_a_growing_file(void)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_test_write_file(directory, "run.jsonl", "");
	const char *first = "{\"type\":\"a\",\"seq\":1}\n";
	long long next = -1;
	json_t *lines;
	char *cause = NULL;

	/* Empty: nothing, and the next read starts at 0. */
	lines = read_from(path, 0, 0, &next);
	CHECK_INT(json_array_size(lines), 0);
	CHECK_INT(next, 0);
	json_decref(lines);
	/* A whole line and a cut one: only the whole one, and the offset stops before the cut. */
	append_text(path, first);
	append_text(path, "{\"type\":\"b\",\"se");
	lines = read_from(path, 0, 0, &next);
	CHECK_INT(json_array_size(lines), 1);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(lines, 0), "text")),
		     "{\"type\":\"a\",\"seq\":1}");
	CHECK_INT(next, (long long)strlen(first));
	json_decref(lines);
	/* The writer completes the line: the next read from there sees it whole. */
	append_text(path, "q\":2}\n{\"type\":\"c\",\"seq\":3}\n");
	lines = read_from(path, next, 0, &next);
	CHECK_INT(json_array_size(lines), 2);
	CHECK_INT(seq_of(lines, 0), 2);
	CHECK_INT(seq_of(lines, 1), 3);
	CHECK_INT(json_integer_value(json_object_get(json_array_get(lines, 1), "end")), next);
	json_decref(lines);
	/* A budget stops after the line that reaches it; the rest comes next time. */
	lines = read_from(path, 0, 1, &next);
	CHECK_INT(json_array_size(lines), 1);
	CHECK_INT(next, (long long)strlen(first));
	json_decref(lines);
	lines = read_from(path, next, 0, &next);
	CHECK_INT(json_array_size(lines), 2);
	json_decref(lines);
	/* Garbage after a whole line is an error naming where it is. */
	append_text(path, "garbage\n");
	lines = json_array();
	CHECK_INT(kagent_trace_read_from(path, next, 0, collect_lines, lines, &next, &cause),
		  -EBADMSG);
	CHECK_CONTAINS(cause, "not a JSON object");
	free(cause);
	json_decref(lines);
	free(path);
	remove_directory(directory);
}

/* The seq of a line without parsing it: what kagentd's copy to its store relies on. */
static void
test_line_seq(void)
{
	static const struct {
		const char *line;
		long long seq;
	} cases[] = {
	    {"{\"type\":\"turn_end\",\"seq\":12,\"time\":\"x\"}", 12},
	    {"{\"type\":\"a\",\"seq\":3}", 3},
	    /* braces and quotes inside strings do not close the record */
	    {"{\"type\":\"a\",\"seq\":4,\"text\":\"}{\\\"}\\\\\",\"b\":[{}]}", 4},
	    /* cut by a killed writer, at any point: not a record */
	    {"{\"type\":\"a\",\"seq\":5,\"text\":\"ab", 0},
	    {"{\"type\":\"a\",\"seq\":5,\"b\":{\"c\":1}", 0},
	    {"{\"type\":\"a\",\"seq\":5,\"b\":[1,", 0},
	    {"{\"type\":\"a\",\"seq\":5", 0},
	    {"{\"type\":\"a\",\"seq\":5,\"text\":\"\\\"}", 0},
	    /* closed before its end: not one record */
	    {"{\"type\":\"a\",\"seq\":6}{}", 0},
	    /* stream records stay in the file */
	    {"{\"type\":\"stream\",\"seq\":7,\"event\":{}}", 0},
	    {"{\"seq\":8,\"type\":\"stream\"}", 0},
	    /* written otherwise: parsed */
	    {"{\"seq\":9,\"type\":\"a\"}", 9},
	    {" {\"type\":\"a\",\"seq\":10}", 10},
	    {"{\"type\":\"a\"}", 0},
	    {"{\"type\":\"a\",\"seq\":\"11\"}", 0},
	    {"{\"type\":\"a\",\"seq\":-1}", 0},
	    {"not json", 0},
	    {"", 0},
	};

	for (size_t index = 0; index < sizeof cases / sizeof cases[0]; index++) {
		long long seq = kagent_trace_line_seq(cases[index].line, strlen(cases[index].line));

		if (seq != cases[index].seq)
			fprintf(stderr, "%s: %lld\n", cases[index].line, seq);
		CHECK(seq == cases[index].seq);
	}
}

static const struct kagent_test tests[] = {
    {"round_trip", test_round_trip},
    {"redaction", test_redaction},
    {"resume", test_resume},
    {"resume_refuses_huge_seq", test_resume_refuses_huge_seq},
    {"cut_last_line", test_cut_last_line},
    {"bad_middle_line", test_bad_middle_line},
    {"reader_stops_and_fails", test_reader_stops_and_fails},
    {"line_cap", test_line_cap},
    {"file_removed_or_replaced", test_file_removed_or_replaced},
    {"read_from_follows_a_growing_file", test_read_from_follows_a_growing_file},
    {"line_seq", test_line_seq},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
