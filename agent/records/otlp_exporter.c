/*
 * OTLP/HTTP JSON export of a run's spans (see include/kagent/records/otlp_exporter.h). One
 * request at a time keeps the memory bounded by the queue's cap and the spans in order; what
 * ends while a request is out waits in the queue for the next. The exporter outlives its
 * session when a request is still out at the run's end: it frees itself from on_done.
 */
#include "kagent/records/otlp_exporter.h"

#include "kagent/base/alloc.h"
#include "kagent/base/log.h"
#include "kagent/records/config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Spans sent in one request, and queued at most (a collector that is down for a long run). */
#define OTLP_EXPORTER_BATCH 64
#define OTLP_EXPORTER_QUEUE_CAP 4096
/* A collector is local or near: waiting longer for one would only hold up a run's exit. */
#define OTLP_EXPORTER_CONNECT_TIMEOUT_MS 3000
#define OTLP_EXPORTER_STALL_SECONDS 5
/* After a collector could not be reached or stalled, what ends in this many milliseconds is
 * dropped rather than sent: a collector that is down costs a run (and its exit) one wait. */
#define OTLP_EXPORTER_QUIET_MS 30000
/* How much of a 2xx answer is read, for its partialSuccess. */
#define OTLP_EXPORTER_ANSWER_CAP 4096

struct kagent_otlp_exporter {
	struct kagent_http_client *http;
	char *url;
	char **headers; /* "Content-Type: application/json" and the configured ones */
	const struct kagent_trace *trace;
	struct kagent_otlp_spans *spans;
	json_t *queue;				   /* finished spans, not yet sent */
	struct kagent_http_request *request;	   /* the one out, or NULL */
	size_t request_spans;			   /* how many it carries */
	char answer[OTLP_EXPORTER_ANSWER_CAP + 1]; /* its 2xx body, cut at the cap */
	size_t answer_length;
	unsigned long long dropped; /* spans dropped since the last log line about it */
	int flush_wanted;     /* a turn or the run ended: send the whole queue, batch after batch */
	int client_gone;      /* the HTTP client cancelled a request: it is being freed */
	uint64_t quiet_until; /* loop time (ms) before which nothing is sent: a request failed */
	int finishing;
};

static long long
otlp_exporter__now(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

int
kagent_otlp_exporter_create(const struct kagent_otlp_exporter_options *options,
			    struct kagent_otlp_exporter **exporter_out, char **cause)
{
	struct kagent_otlp_exporter *exporter;
	char **configured = NULL;
	size_t count = 0, length = strlen(options->endpoint);
	int status;

	*exporter_out = NULL;
	if (options->headers != NULL &&
	    (status = kagent_config_parse_headers(options->headers, &configured, cause)) < 0)
		return status;
	exporter = kagent_calloc(1, sizeof *exporter);
	exporter->http = options->http;
	/* The OTLP/HTTP convention: the traces path is added to the base endpoint. */
	while (length > 0 && options->endpoint[length - 1] == '/')
		length--;
	exporter->url = kagent_asprintf("%.*s/v1/traces", (int)length, options->endpoint);
	while (configured != NULL && configured[count] != NULL)
		count++;
	exporter->headers = kagent_calloc(count + 2, sizeof *exporter->headers);
	exporter->headers[0] = kagent_strdup("Content-Type: application/json");
	for (size_t index = 0; index < count; index++)
		exporter->headers[index + 1] = kagent_strdup(configured[index]);
	kagent_config_free_headers(configured);
	exporter->trace = options->trace;
	exporter->spans = kagent_otlp_spans_create(options->random, options->random_data);
	exporter->queue = json_array();
	*exporter_out = exporter;
	return 0;
}

static void
otlp_exporter__free(struct kagent_otlp_exporter *exporter)
{
	kagent_config_free_headers(exporter->headers);
	kagent_otlp_spans_free(exporter->spans);
	json_decref(exporter->queue);
	free(exporter->url);
	free(exporter);
}

static void otlp_exporter__send(struct kagent_otlp_exporter *exporter);

/* Logs the spans a failed request carried as dropped, with why. */
static void
otlp_exporter__lost(struct kagent_otlp_exporter *exporter, const char *why)
{
	kagent_log(KAGENT_LOG_WARNING, "OTLP export to %s failed (%s): %zu spans dropped",
		   exporter->url, why, exporter->request_spans);
}

static int
otlp_exporter__body(const char *bytes, size_t size, void *data)
{
	struct kagent_otlp_exporter *exporter = data;
	size_t room = OTLP_EXPORTER_ANSWER_CAP - exporter->answer_length;

	if (size > room)
		size = room;
	memcpy(exporter->answer + exporter->answer_length, bytes, size);
	exporter->answer_length += size;
	return 0;
}

/* A 2xx answer may still say that the collector refused some spans (partialSuccess). */
static void
otlp_exporter__check_answer(struct kagent_otlp_exporter *exporter)
{
	json_t *answer, *partial;
	json_int_t rejected = 0;

	exporter->answer[exporter->answer_length] = '\0';
	answer = json_loads(exporter->answer, 0, NULL);
	partial = json_object_get(answer, "partialSuccess");
	/* rejectedSpans is an int64: a string in OTLP's JSON, though some send a number. */
	if (json_is_string(json_object_get(partial, "rejectedSpans")))
		rejected =
		    strtoll(json_string_value(json_object_get(partial, "rejectedSpans")), NULL, 10);
	else
		rejected = json_integer_value(json_object_get(partial, "rejectedSpans"));
	if (rejected > 0)
		kagent_log(KAGENT_LOG_WARNING,
			   "OTLP export to %s: the collector rejected %lld of %zu "
			   "spans: %s",
			   exporter->url, (long long)rejected, exporter->request_spans,
			   json_is_string(json_object_get(partial, "errorMessage"))
			       ? json_string_value(json_object_get(partial, "errorMessage"))
			       : "no reason given");
	json_decref(answer);
}

static void
otlp_exporter__done(const struct kagent_http_result *result, void *data)
{
	struct kagent_otlp_exporter *exporter = data;

	exporter->request = NULL;
	if (result->failure != KAGENT_HTTP_OK) {
		otlp_exporter__lost(exporter, result->error_message != NULL
						  ? result->error_message
						  : kagent_http_failure_name(result->failure));
	} else if (result->status < 200 || result->status > 299) {
		char why[64];

		snprintf(why, sizeof why, "HTTP %ld", result->status);
		otlp_exporter__lost(exporter, why);
	} else {
		otlp_exporter__check_answer(exporter);
	}
	exporter->request_spans = 0;
	/* An aborted request means the client is going away: nothing more can be sent. */
	if (result->failure == KAGENT_HTTP_ABORTED) {
		exporter->client_gone = 1;
		json_array_clear(exporter->queue);
	} else if (result->failure != KAGENT_HTTP_OK) {
		exporter->quiet_until =
		    uv_now(kagent_http_client_loop(exporter->http)) + OTLP_EXPORTER_QUIET_MS;
	}
	if (exporter->flush_wanted || json_array_size(exporter->queue) >= OTLP_EXPORTER_BATCH)
		otlp_exporter__send(exporter);
	if (exporter->finishing && exporter->request == NULL)
		otlp_exporter__free(exporter);
}

/* Sends up to a batch of the queue unless a request is out already. */
static void
otlp_exporter__send(struct kagent_otlp_exporter *exporter)
{
	size_t count = json_array_size(exporter->queue);
	json_t *batch, *body;
	char *text, *cause = NULL;

	if (exporter->request != NULL || exporter->client_gone || count == 0)
		return;
	if (uv_now(kagent_http_client_loop(exporter->http)) < exporter->quiet_until) {
		kagent_log(
		    KAGENT_LOG_WARNING,
		    "OTLP export to %s: the collector did not answer lately, %zu spans dropped",
		    exporter->url, count);
		json_array_clear(exporter->queue);
		exporter->flush_wanted = 0;
		return;
	}
	if (count > OTLP_EXPORTER_BATCH)
		count = OTLP_EXPORTER_BATCH;
	batch = json_array();
	for (size_t index = 0; index < count; index++)
		json_array_append(batch, json_array_get(exporter->queue, index));
	for (size_t index = 0; index < count; index++)
		json_array_remove(exporter->queue, 0);
	if (json_array_size(exporter->queue) == 0)
		exporter->flush_wanted = 0;
	body = kagent_otlp_spans_request(batch);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	json_decref(batch);
	exporter->answer_length = 0;
	exporter->request_spans = count;
	exporter->request =
	    kagent_http_request_start(exporter->http,
				      &(struct kagent_http_request_options){
					  .method = "POST",
					  .url = exporter->url,
					  .headers = (const char *const *)exporter->headers,
					  .body = text,
					  .body_length = strlen(text),
					  .connect_timeout_ms = OTLP_EXPORTER_CONNECT_TIMEOUT_MS,
					  .stall_seconds = OTLP_EXPORTER_STALL_SECONDS,
					  .on_body = otlp_exporter__body,
					  .on_done = otlp_exporter__done,
					  .data = exporter,
				      },
				      &cause);
	free(text);
	if (exporter->request == NULL) {
		otlp_exporter__lost(exporter, cause);
		exporter->request_spans = 0;
		free(cause);
	}
}

/* Queues the spans just finished, redacted; past the cap they are dropped and counted. */
static void
otlp_exporter__queue(struct kagent_otlp_exporter *exporter, json_t *finished)
{
	size_t index;
	json_t *span;

	json_array_foreach(finished, index, span)
	{
		if (json_array_size(exporter->queue) >= OTLP_EXPORTER_QUEUE_CAP) {
			exporter->dropped++;
			continue;
		}
		json_array_append_new(exporter->queue,
				      exporter->trace != NULL
					  ? kagent_trace_redact(exporter->trace, span)
					  : json_incref(span));
	}
	if (exporter->dropped > 0 && json_array_size(exporter->queue) < OTLP_EXPORTER_QUEUE_CAP) {
		kagent_log(KAGENT_LOG_WARNING,
			   "OTLP export to %s: the queue was full, %llu spans dropped",
			   exporter->url, exporter->dropped);
		exporter->dropped = 0;
	}
}

void
kagent_otlp_exporter_record(struct kagent_otlp_exporter *exporter, const json_t *record)
{
	const char *type = json_string_value(json_object_get(record, "type"));
	json_t *finished = json_array();

	kagent_otlp_spans_record(exporter->spans, record, otlp_exporter__now(), finished);
	otlp_exporter__queue(exporter, finished);
	json_decref(finished);
	/* A turn's spans go out when it ends, so a collector shows a run as it goes. */
	if (type != NULL && (strcmp(type, "turn_end") == 0 || strcmp(type, "final") == 0))
		exporter->flush_wanted = 1;
	if (exporter->flush_wanted || json_array_size(exporter->queue) >= OTLP_EXPORTER_BATCH)
		otlp_exporter__send(exporter);
}

void
kagent_otlp_exporter_finish(struct kagent_otlp_exporter *exporter)
{
	json_t *finished;

	if (exporter == NULL)
		return;
	finished = json_array();
	kagent_otlp_spans_end_all(exporter->spans, otlp_exporter__now(), finished);
	otlp_exporter__queue(exporter, finished);
	json_decref(finished);
	if (exporter->dropped > 0)
		kagent_log(KAGENT_LOG_WARNING,
			   "OTLP export to %s: the queue was full, %llu spans dropped",
			   exporter->url, exporter->dropped);
	exporter->trace = NULL;
	exporter->finishing = 1;
	exporter->flush_wanted = 1;
	otlp_exporter__send(exporter);
	if (exporter->request == NULL)
		otlp_exporter__free(exporter);
}
