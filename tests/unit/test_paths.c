/* Unit tests for tools/base/paths.c: the lookup order of each path. */
#include "kagent/base/paths.h"
#include "kagent/base/alloc.h"
#include "test.h"

#include <sys/stat.h>
#include <unistd.h>

static void
test_environment_first(void)
{
	char *path = NULL, *cause = NULL;

	setenv("KAGENT_PYTHON", "/opt/py/bin/python3", 1);
	setenv("KAGENT_RUNNER_DIR", "/opt/runner", 1);
	setenv("KAGENT_SANDBOX_LIBRARY", "/opt/lib/libkagent-sandbox.so", 1);
	CHECK_INT(kagent_paths_python(&path, &cause), 0);
	CHECK_STRING(path, "/opt/py/bin/python3");
	free(path);
	CHECK_INT(kagent_paths_runner_dir(&path, &cause), 0);
	CHECK_STRING(path, "/opt/runner");
	free(path);
	CHECK_INT(kagent_paths_sandbox_library(&path, &cause), 0);
	CHECK_STRING(path, "/opt/lib/libkagent-sandbox.so");
	free(path);
}

static void
test_defaults(void)
{
	char *path = NULL, *cause = NULL;

	unsetenv("KAGENT_RUNNER_DIR");
	setenv("KAGENT_SANDBOX_LIBRARY", "", 1); /* empty counts as unset */
	CHECK_INT(kagent_paths_runner_dir(&path, &cause), 0);
	/* Tests run from the build folder: beside it, or the compiled default, both the source. */
	CHECK_CONTAINS(path, "sandbox/runner");
	free(path);
	CHECK_INT(kagent_paths_sandbox_library(&path, &cause), 0);
	CHECK_CONTAINS(path, "libkagent-sandbox.so");
	free(path);
	CHECK_INT(kagent_paths_executable_dir(&path, &cause), 0);
	CHECK(path[0] == '/');
	free(path);
}

static void
test_cache_dir(void)
{
	char *directory = kagent_test_make_directory();
	char *expected, *path = NULL, *cause = NULL;
	struct stat info;

	unsetenv("KAGENT_CACHE_DIR");
	setenv("XDG_CACHE_HOME", directory, 1);
	CHECK_INT(kagent_paths_cache_dir(&path, &cause), 0);
	expected = kagent_asprintf("%s/kagent", directory);
	CHECK_STRING(path, expected);
	CHECK(stat(path, &info) == 0 && S_ISDIR(info.st_mode));
	free(path);
	free(expected);

	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", directory, 1);
	CHECK_INT(kagent_paths_cache_dir(&path, &cause), 0);
	expected = kagent_asprintf("%s/.cache/kagent", directory);
	CHECK_STRING(path, expected);
	free(path);
	free(expected);

	expected = kagent_asprintf("%s/own/deep/cache", directory);
	setenv("KAGENT_CACHE_DIR", expected, 1);
	CHECK_INT(kagent_paths_cache_dir(&path, &cause), 0);
	CHECK_STRING(path, expected);
	CHECK(stat(path, &info) == 0 && S_ISDIR(info.st_mode));
	free(path);
	free(expected);

	/* A file where the folder should be is an error with a cause. */
	free(kagent_test_write_file(directory, "file", "x"));
	expected = kagent_asprintf("%s/file/cache", directory);
	setenv("KAGENT_CACHE_DIR", expected, 1);
	CHECK(kagent_paths_cache_dir(&path, &cause) < 0);
	CHECK(path == NULL);
	CHECK_CONTAINS(cause, "cannot create folder");
	free(cause);
	free(expected);

	CHECK_INT(kagent_paths_remove_tree(directory, &cause), 0);
	CHECK(access(directory, F_OK) != 0);
	free(directory);
}

static void
test_worker_socket(void)
{
	char *path = NULL, *cause = NULL, *expected;

	setenv("KAGENT_WORKER_SOCKET", "/x/w.sock", 1);
	CHECK_INT(kagent_paths_worker_socket(&path, &cause), 0);
	CHECK_STRING(path, "/x/w.sock");
	free(path);
	unsetenv("KAGENT_WORKER_SOCKET");
	setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
	CHECK_INT(kagent_paths_worker_socket(&path, &cause), 0);
	CHECK_STRING(path, "/run/user/7/kagent/worker.sock");
	free(path);
	unsetenv("XDG_RUNTIME_DIR");
	CHECK_INT(kagent_paths_worker_socket(&path, &cause), 0);
	expected = kagent_asprintf("/tmp/kagent-%u/worker.sock", (unsigned)getuid());
	CHECK_STRING(path, expected);
	free(path);
	free(expected);
}

static void
test_remove_tree_missing(void)
{
	char *cause = NULL;

	CHECK_INT(kagent_paths_remove_tree("/nonexistent/kagent/tree", &cause), 0);
}

static const struct kagent_test tests[] = {
    {"environment_first", test_environment_first},
    {"defaults", test_defaults},
    {"cache_dir", test_cache_dir},
    {"worker_socket", test_worker_socket},
    {"remove_tree_missing", test_remove_tree_missing},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
