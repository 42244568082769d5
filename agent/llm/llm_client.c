/*
 * One model turn on the libuv loop (see include/kagent/llm/llm_client.h). Each
 * attempt is one HTTP request; its 2xx body goes through a fresh SSE parser
 * into a fresh stream accumulator, so nothing of a failed attempt leaks into
 * the next. What to do after a failed attempt is decided in one place
 * (llm_client__attempt_done): retry after kagent_retry_decide's delay, or
 * give up with a failure the caller can explain. The call struct holds a
 * timer, so it is freed only in that timer's close callback.
 */
#include "kagent/llm/llm_client.h"

#include "kagent/base/alloc.h"
#include "kagent/base/log.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How much of the provider's error message goes into ours. */
#define LLM_CLIENT_MESSAGE_CAP 1000
/* The status Anthropic gives an overloaded API: a stream that reports overload mid-way is
 * retried as if the request had been answered with it. */
#define LLM_CLIENT_OVERLOADED_STATUS 529

struct kagent_llm_call {
	uv_loop_t *loop;
	struct kagent_http_client *client;
	/* The provider's numbers (format, timeouts, retries, prices); its strings are not kept. */
	struct kagent_provider_config provider;
	struct kagent_llm_call_observer observer;
	kagent_llm_call_callback callback;
	void *data;

	char *url;
	char **headers;
	/* The request's body, read from the conversation as it is sent: a waiting session holds
	 * no copy of its conversation. */
	struct kagent_llm_body *body;

	/* Retry waits, and the delivery of a cancellation that came during one. */
	uv_timer_t timer;
	struct kagent_http_request *request; /* the attempt in flight, or NULL */
	int attempt;
	long last_status; /* of the last attempt that got an answer */
	uint64_t started_ns;
	int cancelled;

	/* The current attempt's stream; NULL until a 2xx head arrives. */
	struct kagent_sse *sse;
	struct kagent_llm_stream *stream;
	/* The 2xx answer was plain JSON: the server did not stream. */
	int not_streamed;
	/* Why on_body stopped the attempt (the SSE parser or the stream failed); NULL if it did
	 * not. */
	char *feed_error;
};

/* The HTTP result of an attempt as the retry decision should see it. */
struct llm_client__verdict {
	enum kagent_llm_call_failure failure; /* when not retried */
	int retryable;			      /* worth another attempt if any are left */
	struct kagent_http_result result; /* possibly rewritten (see llm_client__stream_verdict) */
	char *message;
	struct kagent_llm_result *reply; /* on success */
};

static int llm_client__attempt_start(struct kagent_llm_call *call, char **cause);

/* The length of the valid UTF-8 sequence at the start of text (length bytes), or 0 when
 * it is not one (overlong forms and surrogates included, as jansson refuses them). */
static size_t
llm_client__utf8_length(const unsigned char *text, size_t length)
{
	static const unsigned long minimum[] = {0, 0, 0x80, 0x800, 0x10000};
	size_t size = text[0] < 0x80		 ? 1
		      : (text[0] & 0xe0) == 0xc0 ? 2
		      : (text[0] & 0xf0) == 0xe0 ? 3
		      : (text[0] & 0xf8) == 0xf0 ? 4
						 : 0;
	unsigned long point;

	if (size <= 1 || size > length)
		return size > length ? 0 : size;
	point = text[0] & (0x7f >> size);
	for (size_t i = 1; i < size; i++) {
		if ((text[i] & 0xc0) != 0x80)
			return 0;
		point = point << 6 | (text[i] & 0x3f);
	}
	if (point < minimum[size] || point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff))
		return 0;
	return size;
}

/* A copy of a peer's text that is valid UTF-8 and at most cap bytes, since messages end up
 * in JSON traces and jansson refuses invalid UTF-8: invalid bytes and control characters
 * become '?', line breaks and tabs spaces. */
static char *
llm_client__clean_text(const char *text, size_t length, size_t cap)
{
	const unsigned char *bytes = (const unsigned char *)text;
	char *clean = kagent_malloc((length < cap ? length : cap) + 1);
	size_t in = 0, out = 0;

	while (in < length) {
		size_t size = llm_client__utf8_length(bytes + in, length - in);

		if (out + (size > 1 ? size : 1) > cap)
			break;
		if (size > 1) {
			memcpy(clean + out, text + in, size);
			out += size;
			in += size;
			continue;
		}
		if (size == 1 && bytes[in] >= 0x20 && bytes[in] != 0x7f)
			clean[out++] = text[in];
		else
			clean[out++] = bytes[in] == '\n' || bytes[in] == '\t' ? ' ' : '?';
		in++;
	}
	clean[out] = '\0';
	return clean;
}

/* The provider's own words from an error body: {"error": {"message"}} (OpenAI, Anthropic),
 * {"error": "text"}, {"message"}; else the body itself. NULL when there is no body. */
static char *
llm_client__provider_message(const char *error_body)
{
	json_t *parsed, *error;
	const char *message = NULL;
	char *clean;

	if (error_body == NULL || error_body[0] == '\0')
		return NULL;
	parsed = json_loads(error_body, 0, NULL);
	error = json_object_get(parsed, "error");
	if (json_is_string(error))
		message = json_string_value(error);
	else if (json_is_object(error))
		message = json_string_value(json_object_get(error, "message"));
	else
		message = json_string_value(json_object_get(parsed, "message"));
	if (message == NULL)
		message = error_body;
	clean = llm_client__clean_text(message, strlen(message), LLM_CLIENT_MESSAGE_CAP);
	json_decref(parsed);
	return clean;
}

/* A tool call without an id (some OpenAI-compatible servers send none) gets one here, so the
 * assistant message and the tool result that answers it (kagent_llm_request_assistant_message
 * copies the id) agree. Unique in the process. */
static void
llm_client__name_tool_calls(struct kagent_llm_result *reply)
{
	static unsigned long long counter;

	for (size_t i = 0; i < reply->tool_call_count; i++) {
		if (reply->tool_calls[i].id[0] != '\0')
			continue;
		free(reply->tool_calls[i].id);
		reply->tool_calls[i].id =
		    kagent_asprintf("call_%llu", __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	}
}

double
kagent_llm_cost(const struct kagent_provider_config *provider, const struct kagent_llm_usage *usage)
{
	double input = usage->input_tokens > 0 ? (double)usage->input_tokens : 0;
	double cached = usage->cached_tokens > 0 ? (double)usage->cached_tokens : 0;
	double output = usage->output_tokens > 0 ? (double)usage->output_tokens : 0;
	double uncached = input > cached ? input - cached : 0;

	return (uncached * provider->input_price + cached * provider->cached_input_price +
		output * provider->output_price) /
	       1e6;
}

const char *
kagent_llm_call_failure_name(enum kagent_llm_call_failure failure)
{
	switch (failure) {
	case KAGENT_LLM_CALL_OK:
		return "ok";
	case KAGENT_LLM_CALL_AUTHENTICATION:
		return "authentication";
	case KAGENT_LLM_CALL_NOT_FOUND:
		return "not_found";
	case KAGENT_LLM_CALL_BAD_REQUEST:
		return "bad_request";
	case KAGENT_LLM_CALL_QUOTA:
		return "quota";
	case KAGENT_LLM_CALL_EXHAUSTED:
		return "exhausted";
	case KAGENT_LLM_CALL_STREAM:
		return "stream";
	case KAGENT_LLM_CALL_CANCELLED:
		return "cancelled";
	}
	return "unknown";
}

void
kagent_llm_call_outcome_free(struct kagent_llm_call_outcome *outcome)
{
	if (outcome == NULL)
		return;
	free(outcome->error_message);
	kagent_llm_result_free(outcome->reply);
	free(outcome);
}

/* ---- Lifetime ---- */

static void
llm_client__end_stream(struct kagent_llm_call *call)
{
	kagent_sse_free(call->sse);
	kagent_llm_stream_free(call->stream);
	free(call->feed_error);
	call->sse = NULL;
	call->stream = NULL;
	call->feed_error = NULL;
	call->not_streamed = 0;
}

static void
llm_client__free(struct kagent_llm_call *call)
{
	llm_client__end_stream(call);
	free(call->url);
	kagent_llm_request_headers_free(call->headers);
	kagent_llm_body_free(call->body);
	free(call);
}

static void
llm_client__closed(uv_handle_t *handle)
{
	llm_client__free(handle->data);
}

/* Hands the outcome to the caller (from the loop) and releases the call. */
static void
llm_client__deliver(struct kagent_llm_call *call, enum kagent_llm_call_failure failure,
		    char *message, struct kagent_llm_result *reply)
{
	struct kagent_llm_call_outcome *outcome = kagent_calloc(1, sizeof *outcome);

	outcome->failure = failure;
	outcome->error_message = message;
	outcome->http_status = call->last_status;
	outcome->reply = reply;
	outcome->attempts = call->attempt;
	outcome->seconds = (double)(uv_hrtime() - call->started_ns) / 1e9;
	if (reply != NULL)
		outcome->cost = kagent_llm_cost(&call->provider, &reply->usage);
	kagent_log(KAGENT_LOG_DEBUG, "%s after %d attempt(s), %.1f s%s%s",
		   kagent_llm_call_failure_name(failure), outcome->attempts, outcome->seconds,
		   message != NULL ? ": " : "", message != NULL ? message : "");
	/* A cancel from the callback (too late) must not touch the closing timer. */
	call->cancelled = 1;
	/* The caller may add to the conversation the body reads from. */
	kagent_llm_body_free(call->body);
	call->body = NULL;
	uv_close((uv_handle_t *)&call->timer, llm_client__closed);
	call->callback(outcome, call->data);
}

/* ---- One attempt ---- */

static int
llm_client__on_sse_event(void *argument, const struct kagent_sse_event *event, char **cause)
{
	struct kagent_llm_call *call = argument;

	if (call->observer.on_event != NULL)
		call->observer.on_event(call->attempt, event->name, event->data, event->data_length,
					call->observer.data);
	return kagent_llm_stream_on_sse_event(call->stream, event, cause);
}

static void
llm_client__on_head(const struct kagent_http_response_head *head, void *data)
{
	struct kagent_llm_call *call = data;
	const char *type = head->header(head, "content-type");

	llm_client__end_stream(call);
	call->stream = kagent_llm_stream_create(call->provider.format);
	call->sse = kagent_sse_create(0, 0, llm_client__on_sse_event, call);
	call->not_streamed = type != NULL && strncasecmp(type, "application/json", 16) == 0;
}

static int
llm_client__on_body(const char *bytes, size_t size, void *data)
{
	struct kagent_llm_call *call = data;
	char *cause = NULL;

	if (call->not_streamed) {
		call->feed_error = kagent_strdup(
		    "the endpoint answered with application/json rather than an event stream "
		    "(does it support \"stream\": true?)");
		return 1;
	}
	if (kagent_sse_feed(call->sse, bytes, size, &cause) < 0) {
		call->feed_error = cause;
		return 1;
	}
	return 0;
}

/* Ends the attempt's stream and judges it: a whole reply, a failure worth a retry
 * (truncated, overloaded), or one that is not (protocol, caps, a provider error). The result
 * is rewritten for the retry decision: a truncated stream as a cut connection, an overload as
 * its HTTP status. */
static void
llm_client__stream_verdict(struct kagent_llm_call *call, struct llm_client__verdict *verdict)
{
	struct kagent_llm_result *reply = NULL;
	char *cause = NULL;
	int status;

	if (call->feed_error == NULL && kagent_sse_finish(call->sse, NULL, &cause) < 0)
		call->feed_error = cause;
	else
		free(cause);
	cause = NULL;
	status = kagent_llm_stream_finish(call->stream, &reply, &cause);
	if (status == 0) {
		/* A transport failure after the terminal event loses nothing. */
		llm_client__name_tool_calls(reply);
		verdict->failure = KAGENT_LLM_CALL_OK;
		verdict->reply = reply;
		free(cause);
		return;
	}
	if (reply->error == KAGENT_LLM_ERROR_OVERLOADED ||
	    (reply->error == KAGENT_LLM_ERROR_TRUNCATED && call->feed_error == NULL)) {
		verdict->retryable = 1;
		verdict->failure = KAGENT_LLM_CALL_EXHAUSTED;
		verdict->message = kagent_asprintf("attempt %d: %s", call->attempt, cause);
		if (reply->error == KAGENT_LLM_ERROR_OVERLOADED) {
			verdict->result.failure = KAGENT_HTTP_OK;
			verdict->result.status = LLM_CLIENT_OVERLOADED_STATUS;
			verdict->result.error_message = verdict->message;
		} else if (verdict->result.failure == KAGENT_HTTP_OK) {
			verdict->result.failure = KAGENT_HTTP_CUT;
			verdict->result.error_message = verdict->message;
		}
	} else {
		/* Truncated because on_body stopped: the SSE parser's cap, or not a stream. */
		verdict->failure = KAGENT_LLM_CALL_STREAM;
		verdict->message = kagent_asprintf(
		    "attempt %d: %s", call->attempt,
		    reply->error == KAGENT_LLM_ERROR_TRUNCATED ? call->feed_error : cause);
	}
	free(cause);
	kagent_llm_result_free(reply);
}

/* Whether a refused request could succeed if tried again (rate limits, server errors), as
 * opposed to one no retry helps (a bad key, a quota). */
static int
llm_client__retryable(const struct kagent_http_result *result)
{
	struct kagent_retry_decision decision;

	kagent_retry_decide(result, 1, 1, (double)time(NULL), 0, &decision);
	return decision.retry;
}

static void
llm_client__status_verdict(struct kagent_llm_call *call, struct llm_client__verdict *verdict)
{
	long status = verdict->result.status;
	char *provider_message = llm_client__provider_message(verdict->result.error_body);

	verdict->retryable = llm_client__retryable(&verdict->result);
	if (verdict->retryable)
		verdict->failure = KAGENT_LLM_CALL_EXHAUSTED;
	else if (status == 401 || status == 403)
		verdict->failure = KAGENT_LLM_CALL_AUTHENTICATION;
	else if (status == 404)
		verdict->failure = KAGENT_LLM_CALL_NOT_FOUND;
	else if (status == 429)
		verdict->failure = KAGENT_LLM_CALL_QUOTA;
	else
		verdict->failure = KAGENT_LLM_CALL_BAD_REQUEST;
	verdict->message =
	    kagent_asprintf("%s answered HTTP %ld: %s", call->url, status,
			    provider_message != NULL ? provider_message : "(no message)");
	free(provider_message);
}

static void
llm_client__retry_timer(uv_timer_t *timer)
{
	struct kagent_llm_call *call = timer->data;
	char *error = NULL;

	if (call->cancelled) {
		llm_client__deliver(call, KAGENT_LLM_CALL_CANCELLED,
				    kagent_strdup("the model call was cancelled"), NULL);
		return;
	}
	if (llm_client__attempt_start(call, &error) < 0) {
		/* The same options worked for the first attempt: nothing a retry would fix. */
		llm_client__deliver(
		    call, KAGENT_LLM_CALL_EXHAUSTED,
		    kagent_asprintf("attempt %d could not start: %s", call->attempt, error), NULL);
		free(error);
	}
}

static void
llm_client__attempt_done(const struct kagent_http_result *result, void *data)
{
	struct kagent_llm_call *call = data;
	struct llm_client__verdict verdict = {.result = *result};
	struct kagent_retry_decision decision;

	call->request = NULL;
	if (result->status != 0)
		call->last_status = result->status;
	/* ABORTED without a stream failure: cancelled here, or the HTTP client was freed. */
	if (call->cancelled ||
	    (result->failure == KAGENT_HTTP_ABORTED && call->feed_error == NULL)) {
		llm_client__deliver(call, KAGENT_LLM_CALL_CANCELLED,
				    kagent_strdup("the model call was cancelled"), NULL);
		return;
	}
	if (call->stream != NULL) {
		llm_client__stream_verdict(call, &verdict);
	} else if (result->failure != KAGENT_HTTP_OK) {
		verdict.retryable = 1;
		verdict.failure = KAGENT_LLM_CALL_EXHAUSTED;
		verdict.message = kagent_asprintf("%s: %s (%s)", call->url, result->error_message,
						  kagent_http_failure_name(result->failure));
	} else {
		llm_client__status_verdict(call, &verdict);
	}
	llm_client__end_stream(call);
	if (verdict.failure == KAGENT_LLM_CALL_OK) {
		llm_client__deliver(call, KAGENT_LLM_CALL_OK, NULL, verdict.reply);
		return;
	}
	if (verdict.retryable) {
		/* A real random number for the jitter, so that many sessions spread out. */
		kagent_retry_decide(&verdict.result, call->attempt, call->provider.max_retries,
				    (double)time(NULL), arc4random() / 4294967296.0, &decision);
		if (decision.retry) {
			kagent_log(KAGENT_LOG_INFO,
				   "attempt %d failed (%s); retrying in %llu ms: %s", call->attempt,
				   decision.reason, (unsigned long long)decision.delay_ms,
				   verdict.message);
			/* Before on_retry, so that a cancel from there replaces the wait. */
			uv_timer_start(&call->timer, llm_client__retry_timer, decision.delay_ms, 0);
			if (call->observer.on_retry != NULL)
				call->observer.on_retry(call->attempt, &verdict.result, &decision,
							call->observer.data);
			free(verdict.message);
			return;
		}
		if (call->attempt > call->provider.max_retries) {
			char *spent = kagent_asprintf("%s (gave up after %d attempts)",
						      verdict.message, call->attempt);

			free(verdict.message);
			verdict.message = spent;
		}
	}
	llm_client__deliver(call, verdict.failure,
			    llm_client__clean_text(verdict.message, strlen(verdict.message),
						   2 * LLM_CLIENT_MESSAGE_CAP),
			    NULL);
	free(verdict.message);
}

static size_t
llm_client__read_body(size_t offset, char *buffer, size_t size, void *data)
{
	struct kagent_llm_call *call = data;

	return kagent_llm_body_read(call->body, offset, buffer, size);
}

static int
llm_client__attempt_start(struct kagent_llm_call *call, char **cause)
{
	struct kagent_http_request_options options = {
	    .method = "POST",
	    .url = call->url,
	    .headers = (const char *const *)call->headers,
	    .body_length = kagent_llm_body_length(call->body),
	    .read_body = llm_client__read_body,
	    .connect_timeout_ms = call->provider.connect_timeout_ms,
	    .stall_seconds = call->provider.stall_seconds,
	    .on_head = llm_client__on_head,
	    .on_body = llm_client__on_body,
	    .on_done = llm_client__attempt_done,
	    .data = call,
	};

	call->attempt++;
	if (call->observer.on_attempt != NULL)
		call->observer.on_attempt(call->attempt, call->url, call->body,
					  call->observer.data);
	/* Cancelled from on_attempt: the timer already carries the cancellation. */
	if (call->cancelled)
		return 0;
	call->request = kagent_http_request_start(call->client, &options, cause);
	return call->request != NULL ? 0 : -1;
}

/* ---- The interface ---- */

struct kagent_llm_call *
kagent_llm_call_start(struct kagent_http_client *client, const struct kagent_llm_request *request,
		      const struct kagent_llm_call_observer *observer,
		      kagent_llm_call_callback callback, void *data, char **cause)
{
	struct kagent_llm_call *call = kagent_calloc(1, sizeof *call);
	char *detail = NULL;

	call->loop = kagent_http_client_loop(client);
	call->client = client;
	call->provider = *request->provider;
	call->provider.base_url = NULL;
	call->provider.model = NULL;
	call->provider.api_key_env = NULL;
	call->provider.api_key = NULL;
	call->provider.reasoning_effort = NULL;
	if (observer != NULL)
		call->observer = *observer;
	call->callback = callback;
	call->data = data;
	call->started_ns = uv_hrtime();
	call->url = kagent_llm_request_url(request->provider);
	if (call->url == NULL) {
		*cause = kagent_strdup("no endpoint is configured (set provider.base_url)");
		goto failed;
	}
	if (kagent_llm_body_build(request, &call->body, &detail) < 0) {
		*cause = kagent_asprintf("cannot build the request: %s", detail);
		free(detail);
		goto failed;
	}
	call->headers = kagent_llm_request_headers(request->provider);
	uv_timer_init(call->loop, &call->timer);
	call->timer.data = call;
	if (llm_client__attempt_start(call, &detail) < 0) {
		*cause = kagent_asprintf("cannot start the request: %s", detail);
		free(detail);
		uv_close((uv_handle_t *)&call->timer, llm_client__closed);
		return NULL;
	}
	return call;
failed:
	llm_client__free(call);
	return NULL;
}

void
kagent_llm_call_cancel(struct kagent_llm_call *call)
{
	if (call == NULL || call->cancelled)
		return;
	call->cancelled = 1;
	if (call->request != NULL) {
		kagent_http_request_cancel(call->request);
		return;
	}
	/* Waiting to retry: deliver the cancellation from the loop, through the same timer. */
	uv_timer_stop(&call->timer);
	uv_timer_start(&call->timer, llm_client__retry_timer, 0, 0);
}
