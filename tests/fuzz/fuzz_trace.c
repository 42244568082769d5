/*
 * Fuzzes the trace reader (agent/records/trace.c) the ways it is used: `kagent trace` reads
 * every record, `kagent export` and `kagent replay` read the run back as data
 * (agent/records/run_log.c), and --resume opens the trace, numbers on from its last record and
 * appends. All read a path, so the input is written to a scratch file first.
 */
#include "fuzz.h"

#include "kagent/records/run_log.h"
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
	struct kagent_run_log *log = NULL;
	size_t records = 0;
	char *cause = NULL;
	int truncated;

	kagent_trace_read(path, fuzz_trace__on_record, &records, &truncated, &cause);
	free(cause);
	cause = NULL;
	if (kagent_run_log_read(path, &log, &cause) == 0 && log->count > 0 &&
	    log->variants[0].source == NULL)
		abort(); /* a run read back has every variant's source */
	kagent_run_log_free(log);
	free(cause);
	cause = NULL;
	if (kagent_trace_open(path, 1, &trace, &cause) == 0)
		kagent_trace_write(trace, "resumed", NULL);
	free(cause);
	kagent_trace_close(trace);
	return 0;
}
