/*
 * The opt-in export of a run's spans (otlp_spans.h) to an OpenTelemetry collector over
 * OTLP/HTTP with JSON bodies: POST <endpoint>/v1/traces, on the run's loop through the shared
 * HTTP client. The session feeds it every trace record; spans are queued and sent in batches
 * at each turn's end, when a batch is full and at the run's end, one request at a time. A
 * collector that is down, slow or refusing costs the run nothing but a log line: spans past the
 * queue's cap are dropped, and nothing is retried. Each span is redacted as the trace is.
 */
#ifndef KAGENT_OTLP_EXPORTER_H
#define KAGENT_OTLP_EXPORTER_H

#include "kagent/llm/http_client.h"
#include "kagent/records/otlp_spans.h"
#include "kagent/records/trace.h"

#include <jansson.h>

struct kagent_otlp_exporter;

struct kagent_otlp_exporter_options {
	struct kagent_http_client *http;
	const char *endpoint; /* http(s) URL of the receiver; "/v1/traces" is appended */
	const char *headers;  /* "Name=value,..." (kagent_config_parse_headers), or NULL */
	/* Redacts each span as the trace's records are (borrowed until _finish); may be NULL. */
	const struct kagent_trace *trace;
	/* For the ids; NULL: getrandom (kagent_otlp_spans_create). */
	kagent_otlp_random_function random;
	void *random_data;
};

/* Returns 0 or a negative errno with *cause set (malformed headers). */
int kagent_otlp_exporter_create(const struct kagent_otlp_exporter_options *options,
				struct kagent_otlp_exporter **exporter_out, char **cause);
/* Takes one trace record (borrowed) as it is written; may start a request. */
void kagent_otlp_exporter_record(struct kagent_otlp_exporter *exporter, const json_t *record);
/*
 * The run is over: ends the spans still open, sends what is queued and frees the exporter once
 * its last request is answered (or failed; the HTTP client's free cancels it). The trace is not
 * read after this returns. NULL is allowed.
 */
void kagent_otlp_exporter_finish(struct kagent_otlp_exporter *exporter);

#endif
