/* Unit tests for tools/base/paths.c: the lookup order of each path. */
#include "kagent/base/paths.h"
#include "kagent/base/alloc.h"
#include "test.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
	setenv("KAGENT_VIEWER_DIR", "/opt/viewer", 1);
	setenv("KAGENT_JAVASCRIPT_DIR", "/opt/javascript", 1);
	CHECK_INT(kagent_paths_viewer_dir(&path, &cause), 0);
	CHECK_STRING(path, "/opt/viewer");
	free(path);
	CHECK_INT(kagent_paths_javascript_dir(&path, &cause), 0);
	CHECK_STRING(path, "/opt/javascript");
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
	/* The viewer: beside the executable (none beside the tests' folder), else installed. */
	unsetenv("KAGENT_VIEWER_DIR");
	unsetenv("KAGENT_JAVASCRIPT_DIR");
	CHECK_INT(kagent_paths_viewer_dir(&path, &cause), 0);
	CHECK_CONTAINS(path, "kagent/viewer");
	free(path);
	CHECK_INT(kagent_paths_javascript_dir(&path, &cause), 0);
	CHECK_STRING(path, "/usr/share/javascript");
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
test_bytecode_dir(void)
{
	char *directory = kagent_test_make_directory();
	char *expected, *path = NULL, *cause = NULL;

	/* Beside the sandbox's caches by default, so that the sandbox uid can read it. */
	unsetenv("KAGENT_BYTECODE_DIR");
	setenv("KAGENT_SANDBOX_CACHE_DIR", directory, 1);
	CHECK_INT(kagent_paths_bytecode_dir(&path, &cause), 0);
	expected = kagent_asprintf("%s/bytecode", directory);
	CHECK_STRING(path, expected);
	CHECK(access(path, F_OK) != 0); /* the worker makes it, owned by its uid */
	free(path);
	free(expected);

	setenv("KAGENT_BYTECODE_DIR", "/elsewhere/bytecode", 1);
	CHECK_INT(kagent_paths_bytecode_dir(&path, &cause), 0);
	CHECK_STRING(path, "/elsewhere/bytecode");
	free(path);
	unsetenv("KAGENT_BYTECODE_DIR");
	unsetenv("KAGENT_SANDBOX_CACHE_DIR");
	CHECK_INT(kagent_paths_remove_tree(directory, &cause), 0);
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
test_daemon_socket(void)
{
	char *path = NULL, *cause = NULL, *expected;

	setenv("KAGENT_DAEMON_SOCKET", "/x/d.sock", 1);
	CHECK_INT(kagent_paths_daemon_socket(&path, &cause), 0);
	CHECK_STRING(path, "/x/d.sock");
	free(path);
	unsetenv("KAGENT_DAEMON_SOCKET");
	setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
	CHECK_INT(kagent_paths_daemon_socket(&path, &cause), 0);
	CHECK_STRING(path, "/run/user/7/kagent/kagentd.sock");
	free(path);
	unsetenv("XDG_RUNTIME_DIR");
	CHECK_INT(kagent_paths_daemon_socket(&path, &cause), 0);
	expected = kagent_asprintf("/tmp/kagent-%u/kagentd.sock", (unsigned)getuid());
	CHECK_STRING(path, expected);
	free(path);
	free(expected);
}

/* A Unix socket bound at path; listening, or as a killed process leaves it: a file alone. */
static int
bind_socket(const char *path, int listening)
{
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	CHECK(strlen(path) < sizeof address.sun_path);
	strcpy(address.sun_path, path);
	CHECK_INT(bind(fd, (struct sockaddr *)&address, sizeof address), 0);
	if (listening) {
		CHECK_INT(listen(fd, 1), 0);
		return fd;
	}
	close(fd);
	return -1;
}

static void
test_session_socket(void)
{
	char *directory = kagent_test_make_directory(), *cause = NULL, *path = NULL, *expected;
	char *folder = kagent_asprintf("%s/sockets", directory);
	char *worker = kagent_asprintf("%s/worker.sock", folder);
	char *stale = kagent_asprintf("%s/session-stale.sock", folder);
	char *live = kagent_asprintf("%s/session-live.sock", folder);
	char *other = kagent_asprintf("%s/other.sock", folder);
	int live_fd;

	/* Beside the worker socket, the folder created. */
	setenv("KAGENT_WORKER_SOCKET", worker, 1);
	CHECK_INT(kagent_paths_session_socket("run-1", &path, &cause), 0);
	expected = kagent_asprintf("%s/session-run-1.sock", folder);
	CHECK_STRING(path, expected);
	free(path);
	free(expected);

	/* A crashed run's socket goes; a live one, a file and another name stay. */
	bind_socket(stale, 0);
	bind_socket(other, 0);
	live_fd = bind_socket(live, 1);
	free(kagent_test_write_file(folder, "session-file.sock", "x"));
	CHECK_INT(kagent_paths_socket_listening(stale), 0);
	CHECK_INT(kagent_paths_socket_listening(live), 1);
	CHECK_INT(kagent_paths_socket_listening(folder), 0);
	CHECK_INT(kagent_paths_session_socket("run-2", &path, &cause), 0);
	free(path);
	CHECK(access(stale, F_OK) != 0);
	CHECK(access(live, F_OK) == 0);
	CHECK(access(other, F_OK) == 0);
	expected = kagent_asprintf("%s/session-file.sock", folder);
	CHECK(access(expected, F_OK) == 0);
	free(expected);
	close(live_fd);
	/* Its listener closed, the live socket is a crashed run's too. */
	CHECK_INT(kagent_paths_session_socket("run-3", &path, &cause), 0);
	free(path);
	CHECK(access(live, F_OK) != 0);

	unsetenv("KAGENT_WORKER_SOCKET");
	CHECK_INT(kagent_paths_remove_tree(directory, &cause), 0);
	free(other);
	free(live);
	free(stale);
	free(worker);
	free(folder);
	free(directory);
}

static void
test_remove_tree_missing(void)
{
	char *cause = NULL;

	CHECK_INT(kagent_paths_remove_tree("/nonexistent/kagent/tree", &cause), 0);
}

static void
test_store_url(void)
{
	char *url = NULL, *cause = NULL;

	setenv("XDG_STATE_HOME", "/state", 1);
	CHECK_INT(kagent_paths_store_url(&url, &cause), 0);
	CHECK_STRING(url, "sqlite:/state/kagent/kagent.db");
	free(url);
	/* a relative XDG_STATE_HOME is ignored, as the XDG specification says */
	setenv("XDG_STATE_HOME", "state", 1);
	setenv("HOME", "/home/k", 1);
	CHECK_INT(kagent_paths_store_url(&url, &cause), 0);
	CHECK_STRING(url, "sqlite:/home/k/.local/state/kagent/kagent.db");
	free(url);
	unsetenv("XDG_STATE_HOME");
	setenv("HOME", "", 1);
	CHECK_INT(kagent_paths_store_url(&url, &cause), 0);
	CHECK_STRING(url, "sqlite:/tmp/.local/state/kagent/kagent.db");
	free(url);
	/* a cluster's shared store, from its launch script, comes first */
	setenv("KAGENT_STORE", "postgresql://kagent@db/kagent", 1);
	CHECK_INT(kagent_paths_store_url(&url, &cause), 0);
	CHECK_STRING(url, "postgresql://kagent@db/kagent");
	free(url);
	unsetenv("KAGENT_STORE");
}

static const struct kagent_test tests[] = {
    {"environment_first", test_environment_first},
    {"defaults", test_defaults},
    {"cache_dir", test_cache_dir},
    {"bytecode_dir", test_bytecode_dir},
    {"worker_socket", test_worker_socket},
    {"daemon_socket", test_daemon_socket},
    {"session_socket", test_session_socket},
    {"remove_tree_missing", test_remove_tree_missing},
    {"store_url", test_store_url},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
