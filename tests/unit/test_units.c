/* Tests of the number formats shared by the terminal view and the budget line. */
#include "kagent/base/units.h"

#include "test.h"

static void
check_tokens(double tokens, const char *expected)
{
	char text[32];

	kagent_units_format_tokens(text, sizeof text, tokens);
	CHECK_STRING(text, expected);
}

static void
check_duration(double seconds, const char *expected)
{
	char text[32];

	kagent_units_format_duration(text, sizeof text, seconds);
	CHECK_STRING(text, expected);
}

static void
test_tokens(void)
{
	check_tokens(0, "0");
	check_tokens(567, "567");
	check_tokens(1234, "1.2k");
	check_tokens(12345, "12k");
	check_tokens(1234567, "1.2M");
	check_tokens(12345678, "12M");
}

static void
test_durations(void)
{
	check_duration(0, "0s");
	check_duration(1.94, "1.9s");
	check_duration(45, "45s");
	check_duration(130, "2m10s");
	check_duration(3600, "60m");
	check_duration(6000, "1h40m");
	check_duration(7200, "2h");
}

static const struct kagent_test tests[] = {
    {"tokens", test_tokens},
    {"durations", test_durations},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
