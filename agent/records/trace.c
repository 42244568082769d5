/*
 * The trace of a run as an append-only JSONL file (see include/kagent/records/trace.h and
 * docs/traces.md): numbering, timestamps, redaction of secrets, one write(2) per
 * record, and a reader that survives a writer killed in the middle of a line.
 */
#include "kagent/records/trace.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"
#include "kagent/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One line of a trace at most: a request body carries the whole conversation, so be generous. */
#define TRACE_LINE_CAP ((size_t)64 << 20)
#define TRACE_REDACTED "[redacted]"
/* Record numbers stay below 2^53, which every JSON reader holds exactly; a larger one in a
 * trace to resume is not kagent's, and counting on from it would overflow. */
#define TRACE_SEQ_MAX ((long long)1 << 53)

struct kagent_trace {
	char *path;
	int fd;
	/* The file the descriptor points at, to notice it being removed or replaced. */
	dev_t device;
	ino_t inode;
	long long seq; /* of the last record written */
	char **secrets;
	size_t secret_count;
};

/* Fields holding credentials, whatever their value (compared ignoring case). */
static const char *const trace__secret_keys[] = {
    "authorization", "proxy-authorization", "x-api-key", "api-key", "api_key", NULL,
};

static int
trace__is_secret_key(const char *key)
{
	for (const char *const *name = trace__secret_keys; *name != NULL; name++) {
		if (strcasecmp(key, *name) == 0)
			return 1;
	}
	return 0;
}

/* Opens (creating) the file and its folder, and remembers which file it is. */
static int
trace__open_file(struct kagent_trace *trace, int create, char **cause)
{
	char *folder = kagent_strdup(trace->path);
	char *slash = strrchr(folder, '/');
	struct stat info;
	int fd = -1, result = 0;

	if (create && slash != NULL && slash != folder) {
		*slash = '\0';
		result = kagent_fileio_make_directories(folder, 0700, cause);
		if (result < 0)
			goto out;
	}
	fd = open(trace->path, O_WRONLY | O_APPEND | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
	if (fd < 0) {
		result = -errno;
		*cause =
		    kagent_asprintf("cannot open the trace %s: %s", trace->path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &info) < 0) {
		result = -errno;
		*cause =
		    kagent_asprintf("cannot stat the trace %s: %s", trace->path, strerror(errno));
		goto out;
	}
	if (trace->fd >= 0)
		close(trace->fd);
	trace->fd = fd;
	trace->device = info.st_dev;
	trace->inode = info.st_ino;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	free(folder);
	return result;
}

/* Writes all of data, retrying short writes and interruptions. */
static int
trace__write_all(int fd, const char *data, size_t size)
{
	size_t written = 0;

	while (written < size) {
		ssize_t put = write(fd, data + written, size - written);

		if (put < 0 && errno == EINTR)
			continue;
		if (put < 0)
			return -errno;
		written += (size_t)put;
	}
	return 0;
}

static int
trace__find_last_seq(const json_t *record, void *data)
{
	long long *last = data;
	json_t *seq = json_object_get(record, "seq");

	if (!json_is_integer(seq))
		return 0;
	if (json_integer_value(seq) < 0 || json_integer_value(seq) >= TRACE_SEQ_MAX)
		return -ERANGE;
	if (json_integer_value(seq) > *last)
		*last = json_integer_value(seq);
	return 0;
}

/* Ends a last line cut by a killed writer, so that the next record starts on its own line. */
static int
trace__end_cut_line(struct kagent_trace *trace, char **cause)
{
	char last = '\n';
	int fd, result = 0;

	fd = open(trace->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		result = -errno;
		*cause =
		    kagent_asprintf("cannot read the trace %s: %s", trace->path, strerror(errno));
		goto out;
	}
	{
		off_t size = lseek(fd, 0, SEEK_END);

		if (size > 0 && pread(fd, &last, 1, size - 1) != 1) {
			result = -EIO;
			*cause =
			    kagent_asprintf("cannot read the end of the trace %s", trace->path);
			goto out;
		}
	}
	if (last != '\n') {
		result = trace__write_all(trace->fd, "\n", 1);
		if (result < 0) {
			*cause = kagent_asprintf("cannot write the trace %s: %s", trace->path,
						 strerror(-result));
			goto out;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	return result;
}

int
kagent_trace_open(const char *path, int resume, struct kagent_trace **trace_out, char **cause)
{
	struct kagent_trace *trace = kagent_calloc(1, sizeof *trace);
	char *detail = NULL;
	int result;

	*trace_out = NULL;
	trace->path = kagent_strdup(path);
	trace->fd = -1;
	if (resume) {
		result = kagent_trace_read(path, trace__find_last_seq, &trace->seq, NULL, &detail);
		if (result == -ERANGE && detail == NULL) {
			*cause =
			    kagent_asprintf("cannot resume the trace %s: a record's seq is not "
					    "between 0 and 2^53",
					    path);
			goto out;
		}
		if (result < 0) {
			*cause = kagent_asprintf("cannot resume the trace: %s", detail);
			goto out;
		}
	}
	result = trace__open_file(trace, !resume, cause);
	if (result < 0)
		goto out;
	if (resume) {
		result = trace__end_cut_line(trace, cause);
		if (result < 0)
			goto out;
	}
	*trace_out = trace;
	trace = NULL;
out:
	free(detail);
	kagent_trace_close(trace);
	return result;
}

void
kagent_trace_close(struct kagent_trace *trace)
{
	if (trace == NULL)
		return;
	if (trace->fd >= 0)
		close(trace->fd);
	for (size_t i = 0; i < trace->secret_count; i++)
		free(trace->secrets[i]);
	free(trace->secrets);
	free(trace->path);
	free(trace);
}

void
kagent_trace_add_secret(struct kagent_trace *trace, const char *secret)
{
	size_t at;

	if (secret == NULL || secret[0] == '\0')
		return;
	for (at = 0; at < trace->secret_count; at++) {
		if (strcmp(trace->secrets[at], secret) == 0)
			return;
	}
	/* Longest first, so that a secret containing another is replaced whole. */
	for (at = 0; at < trace->secret_count; at++) {
		if (strlen(trace->secrets[at]) < strlen(secret))
			break;
	}
	trace->secrets =
	    kagent_realloc(trace->secrets, (trace->secret_count + 1) * sizeof *trace->secrets);
	memmove(trace->secrets + at + 1, trace->secrets + at,
		(trace->secret_count - at) * sizeof *trace->secrets);
	trace->secrets[at] = kagent_strdup(secret);
	trace->secret_count++;
}

/*
 * The length of the header name when text is a header line naming a credential
 * ("Authorization: Bearer ...", as the LLM client's header lists hold), else 0.
 */
static size_t
trace__secret_header_length(const char *text, size_t text_length)
{
	/* Header names are short: only look that far into a string (a source file, say). */
	const char *colon = memchr(text, ':', text_length < 32 ? text_length : 32);
	char *name;
	size_t length;
	int secret;

	if (colon == NULL || colon == text)
		return 0;
	length = (size_t)(colon - text);
	name = kagent_strndup(text, length);
	secret = trace__is_secret_key(name);
	free(name);
	return secret ? length : 0;
}

/* text with header values and registered secrets replaced, in buffer. */
static void
trace__redact_string(const struct kagent_trace *trace, const char *text, size_t length,
		     struct kagent_buffer *buffer)
{
	size_t header = trace__secret_header_length(text, length);

	if (header > 0) {
		kagent_buffer_set(buffer, text, header);
		kagent_buffer_append(buffer, ": " TRACE_REDACTED, strlen(": " TRACE_REDACTED));
		return;
	}
	kagent_buffer_set(buffer, text, length);
	for (size_t i = 0; i < trace->secret_count; i++) {
		const char *secret = trace->secrets[i];
		size_t secret_length = strlen(secret);
		struct kagent_buffer replaced = {0};
		const char *rest = buffer->data, *end = buffer->data + buffer->length, *found;

		if (memmem(rest, buffer->length, secret, secret_length) == NULL)
			continue;
		while ((found = memmem(rest, (size_t)(end - rest), secret, secret_length)) !=
		       NULL) {
			kagent_buffer_append(&replaced, rest, (size_t)(found - rest));
			kagent_buffer_append(&replaced, TRACE_REDACTED, strlen(TRACE_REDACTED));
			rest = found + secret_length;
		}
		kagent_buffer_append(&replaced, rest, (size_t)(end - rest));
		kagent_buffer_free(buffer);
		*buffer = replaced;
	}
}

/* Whether text holds anything trace__redact_string would replace. */
static int
trace__needs_redaction(const struct kagent_trace *trace, const char *text, size_t length)
{
	if (trace__secret_header_length(text, length) > 0)
		return 1;
	for (size_t i = 0; i < trace->secret_count; i++) {
		if (memmem(text, length, trace->secrets[i], strlen(trace->secrets[i])) != NULL)
			return 1;
	}
	return 0;
}

/*
 * Most of a record holds no secret (a request's system prompt and tool definitions, the
 * conversation): its parts are shared with the result rather than copied, and only what holds
 * one is made anew.
 */
json_t *
kagent_trace_redact(const struct kagent_trace *trace, const json_t *value)
{
	struct kagent_buffer buffer = {0};
	json_t *copy, *parts, *part;
	const char *key;
	size_t index;
	int changed = 0;

	if (value == NULL)
		return NULL;
	switch (json_typeof(value)) {
	case JSON_OBJECT:
		parts = json_array();
		json_object_foreach((json_t *)value, key, part)
		{
			json_t *redacted = trace__is_secret_key(key)
					       ? json_string(TRACE_REDACTED)
					       : kagent_trace_redact(trace, part);

			changed |=
			    redacted != part || trace__needs_redaction(trace, key, strlen(key));
			json_array_append_new(parts, redacted);
		}
		if (!changed) {
			json_decref(parts);
			return json_incref((json_t *)value);
		}
		copy = json_object();
		index = 0;
		json_object_foreach((json_t *)value, key, part)
		{
			trace__redact_string(trace, key, strlen(key), &buffer);
			json_object_set(copy, kagent_buffer_string(&buffer),
					json_array_get(parts, index++));
		}
		kagent_buffer_free(&buffer);
		json_decref(parts);
		return copy;
	case JSON_ARRAY:
		parts = json_array();
		json_array_foreach(value, index, part)
		{
			json_t *redacted = kagent_trace_redact(trace, part);

			changed |= redacted != part;
			json_array_append_new(parts, redacted);
		}
		if (!changed) {
			json_decref(parts);
			return json_incref((json_t *)value);
		}
		return parts;
	case JSON_STRING:
		if (!trace__needs_redaction(trace, json_string_value(value),
					    json_string_length(value)))
			return json_incref((json_t *)value);
		trace__redact_string(trace, json_string_value(value), json_string_length(value),
				     &buffer);
		copy = json_stringn(kagent_buffer_string(&buffer), buffer.length);
		kagent_buffer_free(&buffer);
		/* Only a secret that is not UTF-8 itself could break the text: drop it all then. */
		return copy != NULL ? copy : json_string(TRACE_REDACTED);
	default: /* numbers, true, false, null: nothing to redact */
		return json_incref((json_t *)value);
	}
}

/* The current time as 2026-11-22T06:15:02.123Z. */
static json_t *
trace__now(void)
{
	struct timespec now;
	struct tm utc;
	char text[64];
	size_t length;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &utc);
	length = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
	snprintf(text + length, sizeof text - length, ".%03ldZ", now.tv_nsec / 1000000);
	return json_string(text);
}

/* Follows the path when the file was removed or replaced under us (a cleanup, a rotation). */
static int
trace__follow_path(struct kagent_trace *trace)
{
	struct stat info;
	char *cause = NULL;
	int result;

	if (stat(trace->path, &info) == 0 && info.st_dev == trace->device &&
	    info.st_ino == trace->inode)
		return 0;
	kagent_log(KAGENT_LOG_WARNING, "%s was removed or replaced: going on in a new file there",
		   trace->path);
	result = trace__open_file(trace, 1, &cause);
	if (result < 0) {
		kagent_log(KAGENT_LOG_WARNING, "%s", cause);
		free(cause);
	}
	return result;
}

int
kagent_trace_write(struct kagent_trace *trace, const char *type, json_t *fields)
{
	json_t *record = json_object(), *redacted = NULL;
	const char *key;
	json_t *member;
	char *line = NULL;
	size_t length;
	int result = 0;

	if (fields != NULL && !json_is_object(fields)) {
		result = -EINVAL;
		goto out;
	}
	json_object_set_new(record, "type", json_string(type));
	json_object_set_new(record, "seq", json_integer(trace->seq + 1));
	json_object_set_new(record, "time", trace__now());
	json_object_foreach(fields, key, member)
	{
		/* The common fields are ours; a caller's copy of them would break numbering. */
		if (json_object_get(record, key) == NULL)
			json_object_set(record, key, member);
	}
	redacted = kagent_trace_redact(trace, record);
	line = json_dumps(redacted, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (line == NULL) {
		result = -EINVAL;
		goto out;
	}
	length = strlen(line);
	if (length > TRACE_LINE_CAP) {
		/* Readers refuse such a line: keep the trace readable, lose this record. */
		result = -EMSGSIZE;
		goto out;
	}
	line = kagent_realloc(line, length + 2);
	line[length] = '\n';
	line[length + 1] = '\0';
	result = trace__follow_path(trace);
	if (result < 0)
		goto out;
	/* One write, so that readers (and a killed writer) never see two records interleaved. */
	result = trace__write_all(trace->fd, line, length + 1);
	if (result < 0)
		goto out;
	trace->seq++;
out:
	free(line);
	json_decref(redacted);
	json_decref(record);
	json_decref(fields);
	return result;
}

/*
 * Whether a line that did not parse is the start of a record cut by a killed
 * writer: jansson ran out of input (an object, string, literal, number, escape
 * or UTF-8 sequence left open at the very end), as opposed to meeting garbage.
 */
static int
trace__is_cut_record(const char *line, size_t length, const json_error_t *parse_error)
{
	enum json_error_code code = json_error_code(parse_error);

	if (length == 0 || line[0] != '{')
		return 0;
	if (code == json_error_premature_end_of_input)
		return 1;
	if (code == json_error_invalid_utf8)
		return (size_t)parse_error->position + 4 >= length;
	return code == json_error_invalid_syntax && (size_t)parse_error->position >= length &&
	       (strncmp(parse_error->text, "invalid token", 13) == 0 ||
		strncmp(parse_error->text, "invalid escape", 14) == 0);
}

struct trace__reader {
	const char *path;
	int (*function)(const json_t *record, void *data);
	int (*line_function)(const struct kagent_trace_line *line, void *data);
	void *data;
	int *truncated;
	char **cause;
	long long line_number; /* counted from the offset the read began at */
	long long offset;      /* that offset */
	long long end;	       /* just past the line at hand */
};

/* Handles one line; ended says whether it had its newline. */
static int
trace__read_line(struct trace__reader *reader, const char *line, size_t length, int ended)
{
	json_error_t parse_error;
	json_t *record;
	int result = 0;

	if (strspn(line, " \t\r") == length)
		return 0;
	record = json_loadb(line, length, JSON_REJECT_DUPLICATES, &parse_error);
	if (json_is_object(record)) {
		if (reader->line_function != NULL) {
			struct kagent_trace_line entry = {
			    .record = record, .text = line, .length = length, .end = reader->end};

			result = reader->line_function(&entry, reader->data);
		} else
			result = reader->function(record, reader->data);
		goto out;
	}
	if (!ended) {
		/* The last line of a killed writer. */
		*reader->truncated = 1;
		goto out;
	}
	if (record == NULL && trace__is_cut_record(line, length, &parse_error)) {
		/* A killed writer's line that a resumed run ended with a newline. */
		kagent_log(KAGENT_LOG_DEBUG, "%s:%lld: skipping a cut record", reader->path,
			   reader->line_number);
		goto out;
	}
	result = -EBADMSG;
	if (reader->offset == 0)
		*reader->cause = kagent_asprintf("%s:%lld: not a JSON object%s%s%s", reader->path,
						 reader->line_number, record == NULL ? " (" : "",
						 record == NULL ? parse_error.text : "",
						 record == NULL ? ")" : "");
	else
		*reader->cause = kagent_asprintf(
		    "%s: the line ending at byte %lld: not a JSON object%s%s%s", reader->path,
		    reader->end, record == NULL ? " (" : "", record == NULL ? parse_error.text : "",
		    record == NULL ? ")" : "");
out:
	json_decref(record);
	return result;
}

/*
 * Reads from reader->offset on. following: a last line without its newline is left alone (its
 * writer may be completing it) rather than read as a killed writer's. Stops after the line
 * that brings what was read to budget (0: no limit). *offset_out: just past the last line
 * handled.
 */
static int
trace__read(struct trace__reader *reader, int following, size_t budget, long long *offset_out)
{
	struct kagent_buffer pending = {0};
	char chunk[65536];
	long long position = reader->offset; /* of the next byte read */
	int fd, result = 0;

	reader->end = reader->offset;
	fd = open(reader->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		result = -errno;
		*reader->cause =
		    kagent_asprintf("cannot open the trace %s: %s", reader->path, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t got = pread(fd, chunk, sizeof chunk, (off_t)position);
		const char *start = chunk, *end = chunk + (got > 0 ? got : 0), *newline;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			result = -errno;
			*reader->cause = kagent_asprintf("cannot read the trace %s: %s",
							 reader->path, strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		position += got;
		while (start < end) {
			size_t piece;

			newline = memchr(start, '\n', (size_t)(end - start));
			piece = (size_t)((newline != NULL ? newline : end) - start);
			if (pending.length + piece > TRACE_LINE_CAP) {
				result = -EMSGSIZE;
				*reader->cause = kagent_asprintf(
				    "%s:%lld: a line longer than %zu MiB", reader->path,
				    reader->line_number + 1, TRACE_LINE_CAP >> 20);
				goto out;
			}
			kagent_buffer_append(&pending, start, piece);
			if (newline == NULL)
				break;
			reader->line_number++;
			reader->end += (long long)pending.length + 1;
			result = trace__read_line(reader, kagent_buffer_string(&pending),
						  pending.length, 1);
			if (result != 0)
				goto out;
			kagent_buffer_set(&pending, "", 0);
			start = newline + 1;
			if (budget > 0 && reader->end - reader->offset >= (long long)budget)
				goto out;
		}
	}
	if (pending.length > 0 && !following) {
		reader->line_number++;
		result =
		    trace__read_line(reader, kagent_buffer_string(&pending), pending.length, 0);
	}
out:
	if (offset_out != NULL)
		*offset_out = reader->end;
	if (fd >= 0)
		close(fd);
	kagent_buffer_free(&pending);
	return result;
}

int
kagent_trace_read(const char *path, int (*function)(const json_t *record, void *data), void *data,
		  int *truncated_out, char **cause)
{
	int truncated = 0, result;
	struct trace__reader reader = {
	    .path = path,
	    .function = function,
	    .data = data,
	    .truncated = &truncated,
	    .cause = cause,
	};

	result = trace__read(&reader, 0, 0, NULL);
	if (truncated_out != NULL)
		*truncated_out = truncated;
	return result;
}

int
kagent_trace_read_from(const char *path, long long offset, size_t budget,
		       int (*function)(const struct kagent_trace_line *line, void *data),
		       void *data, long long *offset_out, char **cause)
{
	int truncated = 0;
	struct trace__reader reader = {
	    .path = path,
	    .line_function = function,
	    .data = data,
	    .truncated = &truncated,
	    .cause = cause,
	    .offset = offset,
	};

	return trace__read(&reader, 1, budget, offset_out);
}

/* ---- lines as text ---- */

/* Whether the line's object closes at its last byte, and not before: braces and brackets
 * balanced outside strings. A cut record never does. A scan, not a parse. */
static int
trace__line_closed(const char *line, size_t length)
{
	int depth = 0, quoted = 0;

	for (size_t index = 0; index < length; index++) {
		char c = line[index];

		if (quoted) {
			if (c == '\\')
				index++;
			else if (c == '"')
				quoted = 0;
		} else if (c == '"') {
			quoted = 1;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if ((c == '}' || c == ']') && --depth == 0) {
			return index == length - 1;
		}
	}
	return 0;
}

/* The seq of a line kagent_trace_write wrote ({"type":"...","seq":N,...), -1 where the line
 * starts otherwise; *type_out, *type_length_out: its type's text. */
static long long
trace__line_seq_fast(const char *line, size_t length, const char **type_out,
		     size_t *type_length_out)
{
	static const char type[] = "{\"type\":\"", seq[] = "\",\"seq\":";
	const char *at = line + sizeof type - 1, *end = line + length;
	long long value = 0;

	if (length < sizeof type - 1 || memcmp(line, type, sizeof type - 1) != 0)
		return -1;
	while (at < end && *at != '"' && *at != '\\')
		at++;
	*type_out = line + sizeof type - 1;
	*type_length_out = (size_t)(at - *type_out);
	if ((size_t)(end - at) < sizeof seq - 1 || memcmp(at, seq, sizeof seq - 1) != 0)
		return -1;
	for (at += sizeof seq - 1; at < end && *at >= '0' && *at <= '9' && value < TRACE_SEQ_MAX;
	     at++)
		value = value * 10 + (*at - '0');
	return at < end && (*at == ',' || *at == '}') && value < TRACE_SEQ_MAX ? value : -1;
}

long long
kagent_trace_line_seq(const char *line, size_t length)
{
	const char *type = NULL;
	size_t type_length = 0;
	long long seq = trace__line_seq_fast(line, length, &type, &type_length);
	json_t *record;

	if (seq >= 0) {
		if (type_length == 6 && memcmp(type, "stream", 6) == 0)
			return 0;
		return trace__line_closed(line, length) ? seq : 0;
	}
	/* Written otherwise (by hand, or by an older kagent): parsed. */
	record = json_loadb(line, length, 0, NULL);
	type = json_string_value(json_object_get(record, "type"));
	seq = json_is_integer(json_object_get(record, "seq")) &&
		      (type == NULL || strcmp(type, "stream") != 0)
		  ? json_integer_value(json_object_get(record, "seq"))
		  : 0;
	json_decref(record);
	return seq > 0 ? seq : 0;
}
