/*
 * Locating the interpreter, runner, prompts, web viewer, sandbox library, cache and worker
 * sockets (see include/kagent/base/paths.h). The order (environment, beside the executable,
 * compiled default) lets a build folder inside the source tree work without any
 * setup, while tests and installs override each path on its own.
 */
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/base/alloc.h"
#include "kagent/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <dirent.h>

#include <ftw.h>

#ifndef KAGENT_DEFAULT_RUNNER_DIR
#define KAGENT_DEFAULT_RUNNER_DIR "sandbox/runner"
#endif
#ifndef KAGENT_DEFAULT_SANDBOX_LIBRARY
#define KAGENT_DEFAULT_SANDBOX_LIBRARY "libkagent-sandbox.so"
#endif
#ifndef KAGENT_DEFAULT_PROMPTS_DIR
#define KAGENT_DEFAULT_PROMPTS_DIR "prompts"
#endif
#ifndef KAGENT_DEFAULT_VIEWER_DIR
#define KAGENT_DEFAULT_VIEWER_DIR "agent/daemon/viewer"
#endif
#ifndef KAGENT_DEFAULT_JAVASCRIPT_DIR
#define KAGENT_DEFAULT_JAVASCRIPT_DIR "/usr/share/javascript"
#endif
#ifndef KAGENT_DEFAULT_PYTHON
#define KAGENT_DEFAULT_PYTHON "python3"
#endif

/* An empty variable counts as unset, as a shell user who wrote VAR= expects. */
static const char *
paths__getenv(const char *name)
{
	const char *value = getenv(name);

	if (value == NULL || value[0] == '\0')
		return NULL;
	return value;
}

int
kagent_paths_executable_dir(char **out, char **cause)
{
	char buffer[PATH_MAX];
	ssize_t length;
	char *slash;
	int error = 0;

	*out = NULL;
	length = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
	if (length < 0) {
		error = -errno;
		if (cause != NULL)
			*cause = kagent_asprintf("cannot read /proc/self/exe: %s", strerror(errno));
		goto out;
	}
	buffer[length] = '\0';
	slash = strrchr(buffer, '/');
	if (slash == NULL) {
		error = -ENOENT;
		if (cause != NULL)
			*cause = kagent_asprintf("/proc/self/exe is not a path: %s", buffer);
		goto out;
	}
	*slash = '\0';
	*out = kagent_strdup(buffer[0] == '\0' ? "/" : buffer);
out:
	return error;
}

/* A path relative to the executable's folder, when it exists with the given access mode. */
static char *
paths__beside_executable(const char *relative, int mode)
{
	char *directory = NULL, *path = NULL;

	if (kagent_paths_executable_dir(&directory, NULL) != 0)
		goto out;
	path = kagent_asprintf("%s/%s", directory, relative);
	if (access(path, mode) != 0) {
		free(path);
		path = NULL;
	}
out:
	free(directory);
	return path;
}

static int
paths__locate(char **out, const char *variable, const char *relative, int mode,
	      const char *fallback)
{
	const char *value = paths__getenv(variable);

	if (value != NULL) {
		*out = kagent_strdup(value);
		return 0;
	}
	*out = paths__beside_executable(relative, mode);
	if (*out == NULL)
		*out = kagent_strdup(fallback);
	return 0;
}

int
kagent_paths_python(char **out, char **cause)
{
	return paths__locate(out, "KAGENT_PYTHON", "../.venv/bin/python3", X_OK,
			     KAGENT_DEFAULT_PYTHON);
}

int
kagent_paths_runner_dir(char **out, char **cause)
{
	return paths__locate(out, "KAGENT_RUNNER_DIR", "../sandbox/runner", R_OK | X_OK,
			     KAGENT_DEFAULT_RUNNER_DIR);
}

int
kagent_paths_prompts_dir(char **out, char **cause)
{
	return paths__locate(out, "KAGENT_PROMPTS_DIR", "../prompts", R_OK | X_OK,
			     KAGENT_DEFAULT_PROMPTS_DIR);
}

int
kagent_paths_viewer_dir(char **out, char **cause)
{
	return paths__locate(out, "KAGENT_VIEWER_DIR", "../agent/daemon/viewer", R_OK | X_OK,
			     KAGENT_DEFAULT_VIEWER_DIR);
}

int
kagent_paths_javascript_dir(char **out, char **cause)
{
	const char *value = paths__getenv("KAGENT_JAVASCRIPT_DIR");

	*out = kagent_strdup(value != NULL ? value : KAGENT_DEFAULT_JAVASCRIPT_DIR);
	return 0;
}

int
kagent_paths_sandbox_library(char **out, char **cause)
{
	return paths__locate(out, "KAGENT_SANDBOX_LIBRARY", "sandbox/libkagent-sandbox.so", R_OK,
			     KAGENT_DEFAULT_SANDBOX_LIBRARY);
}

int
kagent_paths_sandbox_cache_dir(char **out, char **cause)
{
	const char *value = paths__getenv("KAGENT_SANDBOX_CACHE_DIR");
	char *path;
	int error;

	*out = NULL;
	/* Not under $HOME: a root user's home is closed to the sandbox uid. */
	path = value != NULL ? kagent_strdup(value)
			     : kagent_asprintf("/var/tmp/kagent-%u", (unsigned)geteuid());
	error = kagent_fileio_make_directories(path, 0711, cause);
	if (error != 0) {
		free(path);
		return error;
	}
	*out = path;
	return 0;
}

int
kagent_paths_bytecode_dir(char **out, char **cause)
{
	const char *value = paths__getenv("KAGENT_BYTECODE_DIR");
	char *sandbox_cache = NULL;
	int error;

	*out = NULL;
	if (value != NULL) {
		*out = kagent_strdup(value);
		return 0;
	}
	/* Beside the sandbox's caches, which the sandbox uid can reach, yet in none of the
	 * folders a sandboxed child may write. */
	error = kagent_paths_sandbox_cache_dir(&sandbox_cache, cause);
	if (error != 0)
		return error;
	*out = kagent_asprintf("%s/bytecode", sandbox_cache);
	free(sandbox_cache);
	return 0;
}

int
kagent_paths_cache_dir(char **out, char **cause)
{
	const char *value;
	char *path;
	int error = 0;

	*out = NULL;
	if ((value = paths__getenv("KAGENT_CACHE_DIR")) != NULL)
		path = kagent_strdup(value);
	else if ((value = paths__getenv("XDG_CACHE_HOME")) != NULL)
		path = kagent_asprintf("%s/kagent", value);
	else if ((value = paths__getenv("HOME")) != NULL)
		path = kagent_asprintf("%s/.cache/kagent", value);
	else {
		error = -ENOENT;
		if (cause != NULL)
			*cause = kagent_strdup(
			    "no cache folder: set KAGENT_CACHE_DIR, XDG_CACHE_HOME or HOME");
		goto out;
	}
	error = kagent_fileio_make_directories(path, 0700, cause);
	if (error != 0) {
		free(path);
		goto out;
	}
	*out = path;
out:
	return error;
}

int
kagent_paths_socket_dir(char **out, char **cause)
{
	const char *value = paths__getenv("XDG_RUNTIME_DIR");

	*out = value != NULL ? kagent_asprintf("%s/kagent", value)
			     : kagent_asprintf("/tmp/kagent-%u", (unsigned)getuid());
	return 0;
}

int
kagent_paths_worker_socket(char **out, char **cause)
{
	const char *value = paths__getenv("KAGENT_WORKER_SOCKET");
	char *folder = NULL;

	if (value != NULL) {
		*out = kagent_strdup(value);
		return 0;
	}
	kagent_paths_socket_dir(&folder, cause);
	*out = kagent_asprintf("%s/worker.sock", folder);
	free(folder);
	return 0;
}

int
kagent_paths_daemon_socket(char **out, char **cause)
{
	const char *value = paths__getenv("KAGENT_DAEMON_SOCKET");
	char *folder = NULL;

	if (value != NULL) {
		*out = kagent_strdup(value);
		return 0;
	}
	kagent_paths_socket_dir(&folder, cause);
	*out = kagent_asprintf("%s/kagentd.sock", folder);
	free(folder);
	return 0;
}

int
kagent_paths_store_url(char **out, char **cause)
{
	const char *state = paths__getenv("XDG_STATE_HOME"), *home = paths__getenv("HOME");
	const char *shared = paths__getenv("KAGENT_STORE");

	(void)cause;
	/* From the environment: a cluster's launch script or manifest sets it (config/). */
	if (shared != NULL && shared[0] != '\0')
		*out = kagent_strdup(shared);
	else if (state != NULL && state[0] == '/')
		*out = kagent_asprintf("sqlite:%s/kagent/kagent.db", state);
	else
		*out = kagent_asprintf("sqlite:%s/.local/state/kagent/kagent.db",
				       home != NULL ? home : "/tmp");
	return 0;
}

int
kagent_paths_socket_listening(const char *path)
{
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	int fd, listening;

	if (strlen(path) >= sizeof address.sun_path)
		return 0;
	strcpy(address.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	/* A listener with a full backlog (EAGAIN) is alive too; a socket file nobody listens on
	 * any more answers ECONNREFUSED. */
	listening = connect(fd, (struct sockaddr *)&address, sizeof address) == 0 ||
		    errno == EAGAIN || errno == EINPROGRESS;
	close(fd);
	return listening;
}

/* Removes the session sockets in folder that nothing listens on any more: a run killed with
 * kill -9 could not remove its own. A file that is not a socket is never touched. */
static void
paths__remove_stale_sockets(const char *folder)
{
	DIR *directory = opendir(folder);
	struct dirent *entry;
	struct stat info;
	size_t length;
	char *path;

	if (directory == NULL)
		return;
	while ((entry = readdir(directory)) != NULL) {
		length = strlen(entry->d_name);
		if (strncmp(entry->d_name, "session-", 8) != 0 || length < 13 ||
		    strcmp(entry->d_name + length - 5, ".sock") != 0)
			continue;
		path = kagent_asprintf("%s/%s", folder, entry->d_name);
		if (lstat(path, &info) == 0 && S_ISSOCK(info.st_mode) &&
		    !kagent_paths_socket_listening(path) && unlink(path) == 0)
			kagent_log(KAGENT_LOG_INFO, "removed %s, left by a run that ended abruptly",
				   path);
		free(path);
	}
	closedir(directory);
}

int
kagent_paths_session_socket(const char *run_id, char **out, char **cause)
{
	char *folder = NULL, *slash;
	int error;

	*out = NULL;
	kagent_paths_worker_socket(&folder, cause);
	slash = strrchr(folder, '/');
	if (slash == NULL) {
		free(folder);
		folder = kagent_strdup(".");
	} else
		slash[slash == folder] = '\0'; /* "/w.sock" lies in "/" */
	error = kagent_fileio_make_directories(folder, 0700, cause);
	if (error == 0) {
		paths__remove_stale_sockets(folder);
		*out = kagent_asprintf("%s/session-%s.sock", folder, run_id);
	}
	free(folder);
	return error;
}

static int
paths__remove_entry(const char *path, const struct stat *info, int type, struct FTW *ftw)
{
	/* Keep going on errors: leave as little behind as possible; the caller checks the root. */
	if (remove(path) != 0 && errno != ENOENT)
		return 0;
	return 0;
}

int
kagent_paths_remove_tree(const char *path, char **cause)
{
	struct stat info;
	int error = 0;

	if (lstat(path, &info) != 0) {
		if (errno != ENOENT) {
			error = -errno;
			if (cause != NULL)
				*cause =
				    kagent_asprintf("cannot remove %s: %s", path, strerror(errno));
		}
		goto out;
	}
	/* FTW_DEPTH: children before their folder; FTW_PHYS: never follow a link out of the tree.
	 */
	nftw(path, paths__remove_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (lstat(path, &info) == 0) {
		error = -ENOTEMPTY;
		if (cause != NULL)
			*cause = kagent_asprintf("could not remove all of %s", path);
	}
out:
	return error;
}
