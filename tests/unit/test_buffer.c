/* Tests of the growable buffer (tools/base/buffer.c). */
#include "kagent/base/buffer.h"

#include "test.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static void
test_append_grows_and_terminates(void)
{
	struct kagent_buffer buffer = {0};
	size_t index;

	CHECK_STRING(kagent_buffer_string(&buffer), "");
	for (index = 0; index < 1000; index++)
		kagent_buffer_append(&buffer, "abc", 3);
	CHECK_INT(buffer.length, 3000);
	CHECK_INT(strlen(buffer.data), 3000);
	CHECK(memcmp(buffer.data + 2997, "abc", 3) == 0);
	kagent_buffer_set(&buffer, "x", 1);
	CHECK_STRING(kagent_buffer_string(&buffer), "x");
	kagent_buffer_free(&buffer);
	CHECK(buffer.data == NULL && buffer.length == 0);
}

static void
test_take_hands_over(void)
{
	struct kagent_buffer buffer = {0};
	char *text = kagent_buffer_take(&buffer);

	CHECK_STRING(text, "");
	free(text);
	{
		static const char long_text[4000];

		kagent_buffer_append(&buffer, long_text, sizeof long_text);
	}
	kagent_buffer_set(&buffer, "hello", 5); /* in the 4 KB grown for the long text */
	text = kagent_buffer_take(&buffer);
	CHECK_STRING(text, "hello");
	CHECK(malloc_usable_size(text) < 1024); /* fitted: what is taken may be kept long */
	CHECK(buffer.data == NULL && buffer.length == 0 && buffer.capacity == 0);
	free(text);
}

static void
test_append_string_and_formatted(void)
{
	struct kagent_buffer buffer = {0};

	kagent_buffer_append_string(&buffer, "turn ");
	kagent_buffer_appendf(&buffer, "%d of %s: %.2fx", 3, "40", 1.5);
	kagent_buffer_append_string(&buffer, "");
	CHECK_STRING(kagent_buffer_string(&buffer), "turn 3 of 40: 1.50x");
	CHECK_INT(buffer.length, strlen("turn 3 of 40: 1.50x"));
	kagent_buffer_free(&buffer);
}

static const struct kagent_test tests[] = {
    {"append_grows_and_terminates", test_append_grows_and_terminates},
    {"take_hands_over", test_take_hands_over},
    {"append_string_and_formatted", test_append_string_and_formatted},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
