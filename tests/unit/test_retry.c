/* Tests of the retry decision (agent/llm/retry.c): every rule, with a fixed clock and jitter. */
#include "kagent/llm/retry.h"

#include "test.h"

/* Wed, 21 Oct 2015 07:28:00 GMT */
#define DATE_TEXT "Wed, 21 Oct 2015 07:28:00 GMT"
#define DATE_SECONDS 1445412480.0

static struct kagent_retry_decision
decide(const struct kagent_http_result *result, int attempt)
{
	struct kagent_retry_decision decision = {.retry = -1, .delay_ms = 12345};

	kagent_retry_decide(result, attempt, 3, DATE_SECONDS - 10, 0, &decision);
	CHECK(decision.reason != NULL && decision.reason[0] != '\0');
	return decision;
}

static struct kagent_http_result
status_result(long status)
{
	return (struct kagent_http_result){.failure = KAGENT_HTTP_OK, .status = status};
}

static void
test_success_is_not_retried(void)
{
	struct kagent_http_result result = status_result(200);
	struct kagent_retry_decision decision = decide(&result, 1);

	CHECK_INT(decision.retry, 0);
	CHECK_INT(decision.delay_ms, 0);
	CHECK_STRING(decision.reason, "succeeded");
}

static void
test_retryable_statuses(void)
{
	static const long retried[] = {408, 409, 429, 500, 502, 503, 504, 529, 599};
	static const long final[] = {300, 400, 401, 403, 404, 413, 422, 600};

	for (size_t i = 0; i < sizeof retried / sizeof retried[0]; i++) {
		struct kagent_http_result result = status_result(retried[i]);

		CHECK_INT(decide(&result, 1).retry, 1);
	}
	for (size_t i = 0; i < sizeof final / sizeof final[0]; i++) {
		struct kagent_http_result result = status_result(final[i]);
		struct kagent_retry_decision decision = decide(&result, 1);

		CHECK_INT(decision.retry, 0);
		CHECK_INT(decision.delay_ms, 0);
	}
}

static void
test_reasons_name_the_cause(void)
{
	struct kagent_http_result result = status_result(429);

	CHECK_STRING(decide(&result, 1).reason, "429 rate limited, backing off");
	result.status = 503;
	CHECK_CONTAINS(decide(&result, 1).reason, "server error");
	result.status = 408;
	CHECK_CONTAINS(decide(&result, 1).reason, "408");
	result.status = 404;
	CHECK_CONTAINS(decide(&result, 1).reason, "status");
}

static void
test_transport_failures(void)
{
	static const struct {
		enum kagent_http_failure failure;
		const char *reason;
	} cases[] = {
	    {KAGENT_HTTP_CONNECT, "could not connect"},
	    {KAGENT_HTTP_STALLED, "stalled"},
	    {KAGENT_HTTP_CUT, "cut"},
	    {KAGENT_HTTP_OTHER, "transport error"},
	};
	struct kagent_http_result result = {0};
	struct kagent_retry_decision decision;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		result.failure = cases[i].failure;
		decision = decide(&result, 1);
		CHECK_INT(decision.retry, 1);
		CHECK_INT(decision.delay_ms, 500);
		CHECK_CONTAINS(decision.reason, cases[i].reason);
	}
	/* A cut stream after a 200 head is retried, too. */
	result = status_result(200);
	result.failure = KAGENT_HTTP_CUT;
	CHECK_INT(decide(&result, 1).retry, 1);
}

static void
test_aborted_is_never_retried(void)
{
	struct kagent_http_result result = {
	    .failure = KAGENT_HTTP_ABORTED, .status = 503, .should_retry = "true"};
	struct kagent_retry_decision decision = decide(&result, 1);

	CHECK_INT(decision.retry, 0);
	CHECK_CONTAINS(decision.reason, "aborted");
}

static void
test_should_retry_overrides_the_status(void)
{
	struct kagent_http_result result = status_result(429);

	result.should_retry = "false";
	CHECK_INT(decide(&result, 1).retry, 0);
	CHECK_CONTAINS(decide(&result, 1).reason, "x-should-retry");
	result.status = 400;
	result.should_retry = "true";
	CHECK_INT(decide(&result, 1).retry, 1);
	CHECK_CONTAINS(decide(&result, 1).reason, "x-should-retry");
	/* Neither true nor false: the status decides. */
	result.should_retry = "maybe";
	CHECK_INT(decide(&result, 1).retry, 0);
	result.status = 500;
	CHECK_INT(decide(&result, 1).retry, 1);
}

static void
test_retry_after_ms_comes_first(void)
{
	struct kagent_http_result result = status_result(429);
	struct kagent_retry_decision decision;

	result.retry_after_ms = "1500";
	result.retry_after = "7";
	decision = decide(&result, 1);
	CHECK_INT(decision.retry, 1);
	CHECK_INT(decision.delay_ms, 1500);
	CHECK_CONTAINS(decision.reason, "retry-after-ms");
	result.retry_after_ms = "250.7";
	CHECK_INT(decide(&result, 1).delay_ms, 250);
	/* Unreadable or negative: the next source. */
	result.retry_after_ms = "soon";
	CHECK_INT(decide(&result, 1).delay_ms, 7000);
	result.retry_after_ms = "-5";
	CHECK_INT(decide(&result, 1).delay_ms, 7000);
}

static void
test_retry_after_seconds_and_dates(void)
{
	struct kagent_http_result result = status_result(503);
	struct kagent_retry_decision decision;

	result.retry_after = "3";
	decision = decide(&result, 1);
	CHECK_INT(decision.delay_ms, 3000);
	CHECK_CONTAINS(decision.reason, "Retry-After");
	result.retry_after = "2.5";
	CHECK_INT(decide(&result, 1).delay_ms, 2500);
	result.retry_after = "0";
	CHECK_INT(decide(&result, 1).delay_ms, 0);
	/* The clock in decide() is 10 s before the date. */
	result.retry_after = DATE_TEXT;
	CHECK_INT(decide(&result, 1).delay_ms, 10000);
	CHECK_INT(decide(&result, 1).retry, 1);
	result.retry_after = "Wed, 21 Oct 2015 07:00:00 GMT";
	CHECK_INT(decide(&result, 1).delay_ms, 0);
	/* Unreadable: backoff. */
	result.retry_after = "later, please";
	decision = decide(&result, 1);
	CHECK_INT(decision.delay_ms, 500);
	CHECK_CONTAINS(decision.reason, "backing off");
	result.retry_after = "-3";
	CHECK_INT(decide(&result, 1).delay_ms, 500);
}

static void
test_server_delays_are_capped(void)
{
	struct kagent_http_result result = status_result(429);

	result.retry_after = "3600";
	CHECK_INT(decide(&result, 1).delay_ms, 60000);
	result.retry_after = "Wed, 21 Oct 2015 09:00:00 GMT";
	CHECK_INT(decide(&result, 1).delay_ms, 60000);
	result.retry_after_ms = "120000";
	CHECK_INT(decide(&result, 1).delay_ms, 60000);
}

static void
test_backoff_doubles_up_to_8_seconds(void)
{
	static const uint64_t expected[] = {500, 1000, 2000, 4000, 8000, 8000, 8000};
	struct kagent_http_result result = status_result(500);
	struct kagent_retry_decision decision;

	for (int attempt = 1; attempt <= 7; attempt++) {
		kagent_retry_decide(&result, attempt, 100, 0, 0, &decision);
		CHECK_INT(decision.retry, 1);
		CHECK_INT(decision.delay_ms, expected[attempt - 1]);
	}
	kagent_retry_decide(&result, 1000000, 2000000, 0, 0, &decision);
	CHECK_INT(decision.delay_ms, 8000);
}

static void
test_jitter_shortens_by_up_to_a_quarter(void)
{
	struct kagent_http_result result = {.failure = KAGENT_HTTP_CONNECT};
	struct kagent_retry_decision decision;

	kagent_retry_decide(&result, 1, 3, 0, 0.5, &decision);
	CHECK_INT(decision.delay_ms, 437);
	kagent_retry_decide(&result, 5, 10, 0, 0.99, &decision);
	CHECK_INT(decision.delay_ms, 6020);
	/* A server's delay is not jittered. */
	result = status_result(429);
	result.retry_after_ms = "1000";
	kagent_retry_decide(&result, 1, 3, 0, 0.99, &decision);
	CHECK_INT(decision.delay_ms, 1000);
}

static void
test_exhausted_quota_is_not_retried(void)
{
	struct kagent_http_result result = status_result(429);
	struct kagent_retry_decision decision;

	result.error_body = "{\"error\": {\"message\": \"You exceeded your current quota\","
			    " \"type\": \"insufficient_quota\"}}";
	result.retry_after = "1";
	decision = decide(&result, 1);
	CHECK_INT(decision.retry, 0);
	CHECK_CONTAINS(decision.reason, "quota");
	/* Even when the server says to retry. */
	result.should_retry = "true";
	CHECK_INT(decide(&result, 1).retry, 0);
	result.should_retry = NULL;
	result.error_body = "{\"error\": {\"message\": \"check your plan and billing details\"}}";
	CHECK_INT(decide(&result, 1).retry, 0);
	/* An ordinary rate limit is retried; a 500 mentioning billing too. */
	result.error_body = "{\"error\": {\"message\": \"Rate limit reached\"}}";
	CHECK_INT(decide(&result, 1).retry, 1);
	result.status = 500;
	result.error_body = "billing service down";
	CHECK_INT(decide(&result, 1).retry, 1);
}

static void
test_retries_are_bounded(void)
{
	struct kagent_http_result result = status_result(503);
	struct kagent_retry_decision decision;

	kagent_retry_decide(&result, 3, 3, 0, 0, &decision);
	CHECK_INT(decision.retry, 1);
	kagent_retry_decide(&result, 4, 3, 0, 0, &decision);
	CHECK_INT(decision.retry, 0);
	CHECK_INT(decision.delay_ms, 0);
	CHECK_CONTAINS(decision.reason, "used up");
	kagent_retry_decide(&result, 1, 0, 0, 0, &decision);
	CHECK_INT(decision.retry, 0);
	result.failure = KAGENT_HTTP_STALLED;
	kagent_retry_decide(&result, 2, 1, 0, 0, &decision);
	CHECK_INT(decision.retry, 0);
}

static const struct kagent_test tests[] = {
    {"success_is_not_retried", test_success_is_not_retried},
    {"retryable_statuses", test_retryable_statuses},
    {"reasons_name_the_cause", test_reasons_name_the_cause},
    {"transport_failures", test_transport_failures},
    {"aborted_is_never_retried", test_aborted_is_never_retried},
    {"should_retry_overrides_the_status", test_should_retry_overrides_the_status},
    {"retry_after_ms_comes_first", test_retry_after_ms_comes_first},
    {"retry_after_seconds_and_dates", test_retry_after_seconds_and_dates},
    {"server_delays_are_capped", test_server_delays_are_capped},
    {"backoff_doubles_up_to_8_seconds", test_backoff_doubles_up_to_8_seconds},
    {"jitter_shortens_by_up_to_a_quarter", test_jitter_shortens_by_up_to_a_quarter},
    {"exhausted_quota_is_not_retried", test_exhausted_quota_is_not_retried},
    {"retries_are_bounded", test_retries_are_bounded},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 10)
