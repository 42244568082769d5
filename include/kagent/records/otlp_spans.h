/*
 * A run's trace records (docs/traces.md) as OpenTelemetry spans, following the GenAI semantic
 * conventions (docs/telemetry.md): an `invoke_agent` span for the session (the root), a
 * `chat` span per model call, an `execute_tool` span per tool call, with `kagent.*` attributes
 * for variants, verdicts and speedups. Pure functions of the records and the times they are
 * given, so the span building is tested without a network; otlp_exporter.c sends the spans.
 * Spans come out in OTLP's JSON encoding (ids in hex, times and integers as decimal strings).
 */
#ifndef KAGENT_OTLP_SPANS_H
#define KAGENT_OTLP_SPANS_H

#include <jansson.h>
#include <stddef.h>

struct kagent_otlp_spans;

/* Fills size bytes with random bits, for trace and span ids. */
typedef void (*kagent_otlp_random_function)(void *bytes, size_t size, void *data);

/* random NULL: getrandom(2). Tests pass a predictable one. */
struct kagent_otlp_spans *kagent_otlp_spans_create(kagent_otlp_random_function random,
						   void *random_data);
void kagent_otlp_spans_free(struct kagent_otlp_spans *spans);
/*
 * Takes one trace record (borrowed; it needs "type" and, inside a turn, "turn") written at
 * unix_nanos, and appends every span it ends to finished (a JSON array) as an OTLP span object.
 * Records before run_start, and types that make no span, change nothing.
 */
void kagent_otlp_spans_record(struct kagent_otlp_spans *spans, const json_t *record,
			      long long unix_nanos, json_t *finished);
/* Ends the spans still open (a run that stopped without its final record) with an error. */
void kagent_otlp_spans_end_all(struct kagent_otlp_spans *spans, long long unix_nanos,
			       json_t *finished);
/*
 * The body of an OTLP/HTTP export request (ExportTraceServiceRequest in JSON) carrying spans
 * (borrowed), with kagent as the resource's service and the instrumentation scope.
 */
json_t *kagent_otlp_spans_request(const json_t *spans);

#endif
