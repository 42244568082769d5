/* The unit-test runner behind tests/unit/test.h: fork per test, time limit, TAP output. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test.h"

#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#define KAGENT_TEST_SKIP_STATUS 77

void
kagent_test_skip(const char *reason)
{
	printf("# skip reason: %s\n", reason);
	fflush(stdout);
	_exit(KAGENT_TEST_SKIP_STATUS);
}

char *
kagent_test_make_directory(void)
{
	const char *base = getenv("TMPDIR");
	char *path;
	size_t length;

	if (base == NULL)
		base = "/tmp";
	length = strlen(base) + 32;
	path = malloc(length);
	CHECK(path != NULL);
	snprintf(path, length, "%s/kagent-test-XXXXXX", base);
	CHECK(mkdtemp(path) != NULL);
	return path;
}

char *
kagent_test_write_file(const char *directory, const char *name, const char *text)
{
	size_t length = strlen(directory) + strlen(name) + 2;
	char *path = malloc(length);
	FILE *file;

	CHECK(path != NULL);
	snprintf(path, length, "%s/%s", directory, name);
	file = fopen(path, "w");
	CHECK(file != NULL);
	CHECK(fputs(text, file) >= 0);
	CHECK(fclose(file) == 0);
	return path;
}

static int
run_one(const struct kagent_test *test, int timeout_seconds)
{
	pid_t child;
	int status = 0;

	fflush(stdout);
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		alarm((unsigned)timeout_seconds);
		test->function();
		fflush(stdout);
#ifdef __SANITIZE_ADDRESS__
		/* _exit skips LeakSanitizer's exit hook: check this test's leaks here. */
		__lsan_do_leak_check();
#endif
		_exit(0);
	}
	if (waitpid(child, &status, 0) < 0)
		return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status)) {
		if (WTERMSIG(status) == SIGALRM)
			printf("# %s: timed out after %d s\n", test->name, timeout_seconds);
		else
			printf("# %s: killed by signal %d\n", test->name, WTERMSIG(status));
	}
	return -1;
}

int
kagent_test_run_all(const struct kagent_test *tests, int timeout_seconds)
{
	const char *only = getenv("KAGENT_TEST_ONLY");
	int count = 0, failed = 0, index;

	for (index = 0; tests[index].name != NULL; index++)
		count++;
	printf("1..%d\n", count);
	for (index = 0; index < count; index++) {
		int result;

		if (only != NULL && strcmp(only, tests[index].name) != 0) {
			printf("ok %d - %s # SKIP not selected\n", index + 1, tests[index].name);
			continue;
		}
		result = run_one(&tests[index], timeout_seconds);
		if (result == 0)
			printf("ok %d - %s\n", index + 1, tests[index].name);
		else if (result == KAGENT_TEST_SKIP_STATUS)
			printf("ok %d - %s # SKIP\n", index + 1, tests[index].name);
		else {
			printf("not ok %d - %s\n", index + 1, tests[index].name);
			failed++;
		}
		fflush(stdout);
	}
	return failed == 0 ? 0 : 1;
}
