/*
 * The retry decision for a model request (see include/kagent/llm/retry.h): a pure
 * function of the attempt's result, so that the rules are tested one by one.
 */
#include "kagent/llm/retry.h"

#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RETRY_DELAY_CAP_MS 60000.0
#define RETRY_BACKOFF_INITIAL_MS 500.0
#define RETRY_BACKOFF_MAX_MS 8000.0
#define RETRY_JITTER 0.25

/* Why a request is retryable; indexes the reason table. */
enum retry__cause {
	RETRY_CAUSE_408,
	RETRY_CAUSE_409,
	RETRY_CAUSE_429,
	RETRY_CAUSE_5XX,
	RETRY_CAUSE_SERVER_ASKED, /* x-should-retry: true on another status */
	RETRY_CAUSE_CONNECT,
	RETRY_CAUSE_STALLED,
	RETRY_CAUSE_CUT,
	RETRY_CAUSE_TRANSPORT,
	RETRY_CAUSE_COUNT,
};

/* Where the delay came from. */
enum retry__source {
	RETRY_SOURCE_BACKOFF,
	RETRY_SOURCE_RETRY_AFTER_MS,
	RETRY_SOURCE_RETRY_AFTER,
	RETRY_SOURCE_COUNT,
};

static const char *const retry__reasons[RETRY_CAUSE_COUNT][RETRY_SOURCE_COUNT] = {
    [RETRY_CAUSE_408] = {"408 request timeout, backing off",
			 "408 request timeout, server asked for a delay (retry-after-ms)",
			 "408 request timeout, server asked for a delay (Retry-After)"},
    [RETRY_CAUSE_409] = {"409 conflict, backing off",
			 "409 conflict, server asked for a delay (retry-after-ms)",
			 "409 conflict, server asked for a delay (Retry-After)"},
    [RETRY_CAUSE_429] = {"429 rate limited, backing off",
			 "429 rate limited, server asked for a delay (retry-after-ms)",
			 "429 rate limited, server asked for a delay (Retry-After)"},
    [RETRY_CAUSE_5XX] = {"server error (5xx), backing off",
			 "server error (5xx), server asked for a delay (retry-after-ms)",
			 "server error (5xx), server asked for a delay (Retry-After)"},
    [RETRY_CAUSE_SERVER_ASKED] =
	{"server asked for a retry (x-should-retry), backing off",
	 "server asked for a retry (x-should-retry) after a delay (retry-after-ms)",
	 "server asked for a retry (x-should-retry) after a delay (Retry-After)"},
    [RETRY_CAUSE_CONNECT] = {"could not connect, backing off",
			     "could not connect, server asked for a delay (retry-after-ms)",
			     "could not connect, server asked for a delay (Retry-After)"},
    [RETRY_CAUSE_STALLED] = {"the response stalled, backing off",
			     "the response stalled, server asked for a delay (retry-after-ms)",
			     "the response stalled, server asked for a delay (Retry-After)"},
    [RETRY_CAUSE_CUT] = {"the connection was cut, backing off",
			 "the connection was cut, server asked for a delay (retry-after-ms)",
			 "the connection was cut, server asked for a delay (Retry-After)"},
    [RETRY_CAUSE_TRANSPORT] = {"transport error, backing off",
			       "transport error, server asked for a delay (retry-after-ms)",
			       "transport error, server asked for a delay (Retry-After)"},
};

/* A non-negative finite number in text (trailing blanks allowed), or -1. */
static double
retry__parse_number(const char *text)
{
	char *end;
	double value;

	if (text == NULL)
		return -1;
	value = strtod(text, &end);
	if (end == text || !isfinite(value) || value < 0)
		return -1;
	end += strspn(end, " \t");
	return *end == '\0' ? value : -1;
}

/* The server's requested delay in ms, or -1 when it named none (or nothing readable). */
static double
retry__server_delay_ms(const struct kagent_http_result *result, double now,
		       enum retry__source *source)
{
	double value = retry__parse_number(result->retry_after_ms);
	time_t date;

	if (value >= 0) {
		*source = RETRY_SOURCE_RETRY_AFTER_MS;
		return value;
	}
	if (result->retry_after == NULL)
		return -1;
	*source = RETRY_SOURCE_RETRY_AFTER;
	value = retry__parse_number(result->retry_after);
	if (value >= 0)
		return value * 1000;
	date = curl_getdate(result->retry_after, NULL);
	if (date == -1)
		return -1;
	/* A date already past means now. */
	return (double)date > now ? ((double)date - now) * 1000 : 0;
}

static int
retry__cause_of_status(long status, enum retry__cause *cause)
{
	switch (status) {
	case 408:
		*cause = RETRY_CAUSE_408;
		return 1;
	case 409:
		*cause = RETRY_CAUSE_409;
		return 1;
	case 429:
		*cause = RETRY_CAUSE_429;
		return 1;
	default:
		*cause = RETRY_CAUSE_5XX;
		return status >= 500 && status <= 599;
	}
}

static int
retry__quota_exhausted(const struct kagent_http_result *result)
{
	return result->status == 429 && result->error_body != NULL &&
	       (strstr(result->error_body, "insufficient_quota") != NULL ||
		strstr(result->error_body, "billing") != NULL);
}

void
kagent_retry_decide(const struct kagent_http_result *result, int attempt, int max_retries,
		    double now, double random_unit, struct kagent_retry_decision *decision)
{
	enum retry__source source = RETRY_SOURCE_BACKOFF;
	enum retry__cause cause;
	double delay_ms;
	int retryable, doublings;

	decision->retry = 0;
	decision->delay_ms = 0;
	switch (result->failure) {
	case KAGENT_HTTP_OK:
		if (result->status >= 200 && result->status <= 299) {
			decision->reason = "succeeded";
			return;
		}
		if (retry__quota_exhausted(result)) {
			decision->reason = "429 quota exhausted (insufficient_quota or billing): "
					   "waiting will not help";
			return;
		}
		retryable = retry__cause_of_status(result->status, &cause);
		/* The server's word overrides the status (as in the OpenAI and Anthropic SDKs). */
		if (result->should_retry != NULL &&
		    strcasecmp(result->should_retry, "false") == 0) {
			decision->reason = "the server said not to retry (x-should-retry: false)";
			return;
		}
		if (result->should_retry != NULL && strcasecmp(result->should_retry, "true") == 0 &&
		    !retryable) {
			retryable = 1;
			cause = RETRY_CAUSE_SERVER_ASKED;
		}
		if (!retryable) {
			decision->reason = "the status is not one that a retry can fix";
			return;
		}
		break;
	case KAGENT_HTTP_CONNECT:
		cause = RETRY_CAUSE_CONNECT;
		break;
	case KAGENT_HTTP_STALLED:
		cause = RETRY_CAUSE_STALLED;
		break;
	case KAGENT_HTTP_CUT:
		cause = RETRY_CAUSE_CUT;
		break;
	case KAGENT_HTTP_OTHER:
		cause = RETRY_CAUSE_TRANSPORT;
		break;
	case KAGENT_HTTP_ABORTED:
	default:
		decision->reason = "the request was aborted, not failed";
		return;
	}
	if (attempt > max_retries) {
		decision->reason = "retryable, but the retries are used up";
		return;
	}

	delay_ms = retry__server_delay_ms(result, now, &source);
	if (delay_ms < 0) {
		source = RETRY_SOURCE_BACKOFF;
		doublings = attempt > 1 ? attempt - 1 : 0;
		delay_ms = RETRY_BACKOFF_INITIAL_MS;
		while (doublings-- > 0 && delay_ms < RETRY_BACKOFF_MAX_MS)
			delay_ms *= 2;
		if (delay_ms > RETRY_BACKOFF_MAX_MS)
			delay_ms = RETRY_BACKOFF_MAX_MS;
		delay_ms *= 1 - RETRY_JITTER * random_unit;
	}
	decision->retry = 1;
	decision->delay_ms =
	    (uint64_t)(delay_ms < RETRY_DELAY_CAP_MS ? delay_ms : RETRY_DELAY_CAP_MS);
	decision->reason = retry__reasons[cause][source];
}
