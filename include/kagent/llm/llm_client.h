/*
 * One model turn, end to end, on the libuv loop: the request (llm_request.h),
 * the HTTP attempts with retries (http_client.h, retry.h), the streamed events
 * through the SSE parser into the reply (sse.h, llm_stream.h), and the turn's
 * token usage and cost. The observer sees every attempt, event and retry, so
 * the caller can trace them as they happen.
 */
#ifndef KAGENT_LLM_CLIENT_H
#define KAGENT_LLM_CLIENT_H

#include <jansson.h>
#include <uv.h>

#include "kagent/llm/http_client.h"
#include "kagent/llm/llm_request.h"
#include "kagent/llm/llm_stream.h"
#include "kagent/llm/retry.h"

/* Why a turn failed, so the caller can tell the user what to change. */
enum kagent_llm_call_failure {
	KAGENT_LLM_CALL_OK,
	KAGENT_LLM_CALL_AUTHENTICATION, /* 401 or 403: the key is missing, wrong or not allowed */
	KAGENT_LLM_CALL_NOT_FOUND,	/* 404: wrong base URL or model */
	KAGENT_LLM_CALL_BAD_REQUEST,	/* 400, 413, 422: the request was refused */
	KAGENT_LLM_CALL_QUOTA,		/* 429 insufficient_quota: no retry will help */
	KAGENT_LLM_CALL_EXHAUSTED,	/* retryable failures, max_retries spent */
	KAGENT_LLM_CALL_STREAM,		/* a reply that could not be parsed (protocol, caps) */
	KAGENT_LLM_CALL_CANCELLED,
};

struct kagent_llm_call_outcome {
	enum kagent_llm_call_failure failure;
	char *error_message; /* NULL on success */
	long http_status;    /* of the last attempt; 0 when none came */
	/* The parsed reply; NULL on failure (owned by the outcome). Every tool call has an id:
	 * one the provider left out is made up ("call_<n>", unique in the process). */
	struct kagent_llm_result *reply;
	double cost; /* US dollars, from usage and the configured prices */
	int attempts;
	double seconds; /* from start to done, retries and waits included */
};

struct kagent_llm_call_observer {
	/* Each may be NULL. attempt counts from 1. body is valid during the call only. */
	void (*on_attempt)(int attempt, const char *url, const struct kagent_llm_body *body,
			   void *data);
	void (*on_event)(int attempt, const char *name, const char *event_data, size_t length,
			 void *data);
	void (*on_retry)(int attempt, const struct kagent_http_result *result,
			 const struct kagent_retry_decision *decision, void *data);
	void *data;
};

struct kagent_llm_call;

typedef void (*kagent_llm_call_callback)(struct kagent_llm_call_outcome *outcome, void *data);

/*
 * Starts a turn. The callback runs exactly once, from the loop, and owns the
 * outcome (free it with kagent_llm_call_outcome_free). Returns NULL with *cause
 * set when the request cannot be built; then the callback never runs. The
 * request is copied, but not its conversation, which is read while the request is
 * sent: it must not change until the callback; the client must outlive the call
 * (cancel it first).
 *
 * Retried: what kagent_retry_decide retries (connect failures, 408, 409, 429,
 * 5xx), and a stream that breaks off before its terminal event or reports
 * overload (as a 529). Not retried: an error the provider reports inside a 2xx
 * stream, a stream that does not parse or passes a cap (KAGENT_LLM_CALL_STREAM).
 */
struct kagent_llm_call *kagent_llm_call_start(struct kagent_http_client *client,
					      const struct kagent_llm_request *request,
					      const struct kagent_llm_call_observer *observer,
					      kagent_llm_call_callback callback, void *data,
					      char **cause);
/* The callback follows with KAGENT_LLM_CALL_CANCELLED, from the loop. */
void kagent_llm_call_cancel(struct kagent_llm_call *call);
void kagent_llm_call_outcome_free(struct kagent_llm_call_outcome *outcome);
/* US dollars for a usage at the provider's prices (cached input at its own price). */
double kagent_llm_cost(const struct kagent_provider_config *provider,
		       const struct kagent_llm_usage *usage);
const char *kagent_llm_call_failure_name(enum kagent_llm_call_failure failure);

#endif
