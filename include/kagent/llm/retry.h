/*
 * Whether and when to retry a failed model request, as the official OpenAI and
 * Anthropic SDKs decide it: 408, 409, 429 and 5xx are retried, and transport
 * failures (connect, stall, a cut stream); x-should-retry overrides the status;
 * the delay is retry-after-ms, else Retry-After (seconds or an HTTP date),
 * else a jittered exponential backoff. A 429 whose body says the quota is
 * exhausted (insufficient_quota, billing) is never retried: waiting will not help.
 */
#ifndef KAGENT_RETRY_H
#define KAGENT_RETRY_H

#include <stdint.h>

#include "kagent/llm/http_client.h"

struct kagent_retry_decision {
	int retry; /* 1: retry after delay_ms */
	uint64_t delay_ms;
	/* Why, for the trace and the terminal ("429 rate limited, server asked 2000 ms"). Static.
	 */
	const char *reason;
};

/*
 * attempt counts from 1 (the attempt that just failed); max_retries bounds the
 * retries. now is the current time in seconds since the epoch (for HTTP dates);
 * random_unit a number in [0, 1) for the jitter, so tests are deterministic.
 * Delays are capped at 60 s.
 */
void kagent_retry_decide(const struct kagent_http_result *result, int attempt, int max_retries,
			 double now, double random_unit, struct kagent_retry_decision *decision);

#endif
