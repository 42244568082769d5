/*
 * A small unit-test harness that speaks TAP to meson. Each test file lists its
 * tests in one table; every test runs in its own forked process with a time
 * limit, so a crash or a hang fails that test alone (libuv's runner-unix.c).
 */
#ifndef KAGENT_TEST_H
#define KAGENT_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kagent_test {
	const char *name;
	void (*function)(void);
};

/* Returns 0 when every test passed. A test skips by calling kagent_test_skip. */
int kagent_test_run_all(const struct kagent_test *tests, int timeout_seconds);
void kagent_test_skip(const char *reason) __attribute__((noreturn));
/* A fresh scratch directory under $TMPDIR; the caller frees the string. */
char *kagent_test_make_directory(void);
/* Writes text to a new file path/name; returns the full path, which the caller frees. */
char *kagent_test_write_file(const char *directory, const char *name, const char *text);

#define CHECK(condition)                                                                           \
	do {                                                                                       \
		if (!(condition)) {                                                                \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,           \
				#condition);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define CHECK_INT(actual, expected)                                                                \
	do {                                                                                       \
		long long actual_value_ = (long long)(actual);                                     \
		long long expected_value_ = (long long)(expected);                                 \
		if (actual_value_ != expected_value_) {                                            \
			fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", __FILE__, __LINE__,  \
				#actual, actual_value_, expected_value_);                          \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define CHECK_STRING(actual, expected)                                                             \
	do {                                                                                       \
		const char *actual_value_ = (actual);                                              \
		const char *expected_value_ = (expected);                                          \
		if (actual_value_ == NULL || strcmp(actual_value_, expected_value_) != 0) {        \
			fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__,        \
				__LINE__, #actual, actual_value_ ? actual_value_ : "(null)",       \
				expected_value_);                                                  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define CHECK_CONTAINS(haystack, needle)                                                           \
	do {                                                                                       \
		const char *haystack_value_ = (haystack);                                          \
		if (haystack_value_ == NULL || strstr(haystack_value_, (needle)) == NULL) {        \
			fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__,       \
				__LINE__, haystack_value_ ? haystack_value_ : "(null)", (needle)); \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define KAGENT_TEST_MAIN(table, timeout_seconds)                                                   \
	int main(void)                                                                             \
	{                                                                                          \
		return kagent_test_run_all((table), (timeout_seconds));                            \
	}

#endif
