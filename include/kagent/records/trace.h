/*
 * The trace of an optimization run: an append-only JSONL file, one record per
 * line (docs/traces.md lists the record types), written with one write(2) per
 * record as it happens so that a killed run leaves a readable trace. Secrets
 * are redacted before a record is written: header and key fields by name, and
 * every registered secret value wherever it appears in a string.
 */
#ifndef KAGENT_TRACE_H
#define KAGENT_TRACE_H

#include <jansson.h>

struct kagent_trace;

/*
 * Opens path for appending (creating it, 0600, and its folder). With resume,
 * the file must exist: numbering continues after its last record, and a last
 * line cut in the middle (a killed writer) is ended with a newline first.
 */
int kagent_trace_open(const char *path, int resume, struct kagent_trace **trace_out, char **cause);
void kagent_trace_close(struct kagent_trace *trace);
/* A value never to be written (an API key); empty strings are ignored. */
void kagent_trace_add_secret(struct kagent_trace *trace, const char *secret);
/*
 * Appends a record of the given type: fields (stolen, may be NULL) with "type",
 * "seq" and "time" added, redacted, on one line. Returns 0 or a negative errno
 * (a full disk): the run goes on, and the caller reports it once.
 */
int kagent_trace_write(struct kagent_trace *trace, const char *type, json_t *fields);
/* value redacted as kagent_trace_write does, without changing it: the parts that need no
 * redaction are shared with it (value itself when none does). The caller releases it and must
 * not change it. */
json_t *kagent_trace_redact(const struct kagent_trace *trace, const json_t *value);

/*
 * Reads a trace: calls function for every record in order, skipping nothing but
 * a last line cut in the middle (reported through *truncated_out, may be NULL).
 * A line that is not a JSON object elsewhere is an error naming its line number.
 * function returns 0 to go on, or non-zero to stop (returned as is).
 */
int kagent_trace_read(const char *path, int (*function)(const json_t *record, void *data),
		      void *data, int *truncated_out, char **cause);

/* A record as kagent_trace_read_from hands it over, with the line it was read from. */
struct kagent_trace_line {
	const json_t *record;
	const char *text; /* the line as written, without its newline (not NUL-terminated) */
	size_t length;
	long long end; /* the byte offset just past the line's newline */
};

/*
 * Reads a trace that may still be written, from byte offset on (0, or an offset this returned):
 * calls function for each record of a complete line, skipping cut records as kagent_trace_read
 * does, and stops before a last line without its newline (its writer may be completing it),
 * after the line that brings what was read to budget bytes (0: no limit), or when function
 * returns non-zero (returned as is). *offset_out (may be NULL) is where the next call goes on:
 * just past the last line read.
 */
int kagent_trace_read_from(const char *path, long long offset, size_t budget,
			   int (*function)(const struct kagent_trace_line *line, void *data),
			   void *data, long long *offset_out, char **cause);

/*
 * The seq of one line of a trace file (without its newline), for copying records as text
 * (kagentd's copy to its store): read from the line's start, where kagent_trace_write puts
 * "type" and "seq", once the line is seen to close at its end; a line that starts otherwise
 * is parsed. 0 for a stream record (the reply record holds the reply whole), a record cut by
 * a killed writer (a resumed trace ends its line and writes the record again under the same
 * seq), and a line that is not a record with a seq.
 */
long long kagent_trace_line_seq(const char *line, size_t length);

#endif
