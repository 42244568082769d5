/*
 * Fuzzes the trace reader (agent/records/trace.c) both ways it is used: `kagent trace` reads
 * every record, and --resume opens the trace, numbers on from its last record and appends.
 * Both read a path, so the input is written to a scratch file first.
 */
#include "fuzz.h"

#include "kagent/records/trace.h"

#include <stdlib.h>

static int
fuzz_trace__on_record(const json_t *record, void *data)
{
	size_t *records = data;

	if (!json_is_object(record))
		abort();
	(*records)++;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = kagent_fuzz_write_input(data, size);
	struct kagent_trace *trace = NULL;
	size_t records = 0;
	char *cause = NULL;
	int truncated;

	kagent_trace_read(path, fuzz_trace__on_record, &records, &truncated, &cause);
	free(cause);
	cause = NULL;
	if (kagent_trace_open(path, 1, &trace, &cause) == 0)
		kagent_trace_write(trace, "resumed", NULL);
	free(cause);
	kagent_trace_close(trace);
	return 0;
}
