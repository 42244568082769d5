/* Capped whole-file reads and atomic writes (see include/kagent/base/fileio.h). */
#include "kagent/base/fileio.h"

#include "kagent/base/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
kagent_fileio_read(const char *path, size_t cap, char **data_out, size_t *size_out, char **cause)
{
	char *data = NULL;
	size_t size = 0, capacity = 0;
	int fd, result = 0;

	*data_out = NULL;
	*size_out = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		result = -errno;
		*cause = kagent_asprintf("cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t got;

		if (capacity - size < 4096) {
			capacity = capacity == 0 ? 65536 : capacity * 2;
			data = kagent_realloc(data, capacity + 1);
		}
		got = read(fd, data + size, capacity - size);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			result = -errno;
			*cause = kagent_asprintf("cannot read %s: %s", path, strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		size += (size_t)got;
		if (size > cap) {
			result = -EFBIG;
			*cause = kagent_asprintf("%s is larger than %zu bytes", path, cap);
			goto out;
		}
	}
	/* Fitted: what is read may be kept for long (a session's problem, in a 64 KB buffer). */
	data = kagent_realloc(data, size + 1);
	data[size] = '\0';
	*data_out = data;
	*size_out = size;
	data = NULL;
out:
	if (fd >= 0)
		close(fd);
	free(data);
	return result;
}

int
kagent_fileio_write_atomic(const char *path, const void *data, size_t size, char **cause)
{
	char *temporary = kagent_asprintf("%s.tmp.XXXXXX", path);
	const char *bytes = data;
	size_t written = 0;
	int fd, result = 0;

	fd = mkostemp(temporary, O_CLOEXEC);
	if (fd < 0) {
		result = -errno;
		*cause = kagent_asprintf("cannot create %s: %s", temporary, strerror(errno));
		goto out;
	}
	while (written < size) {
		ssize_t put = write(fd, bytes + written, size - written);

		if (put < 0 && errno == EINTR)
			continue;
		if (put < 0) {
			result = -errno;
			*cause = kagent_asprintf("cannot write %s: %s", temporary, strerror(errno));
			goto out;
		}
		written += (size_t)put;
	}
	/* fsync before rename, or a crash could leave an empty file under the final name. */
	if (fsync(fd) < 0 || fchmod(fd, 0644) < 0) {
		result = -errno;
		*cause = kagent_asprintf("cannot sync %s: %s", temporary, strerror(errno));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		result = -errno;
		*cause = kagent_asprintf("cannot close %s: %s", temporary, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(temporary, path) < 0) {
		result = -errno;
		*cause =
		    kagent_asprintf("cannot rename %s to %s: %s", temporary, path, strerror(errno));
		goto out;
	}
out:
	if (fd >= 0)
		close(fd);
	if (result < 0)
		unlink(temporary);
	free(temporary);
	return result;
}

int
kagent_fileio_make_directories(const char *path, mode_t mode, char **cause)
{
	char *copy = kagent_strdup(path);
	char *cursor;
	struct stat info;
	int error = 0;

	if (copy[0] == '\0') {
		error = -EINVAL;
		if (cause != NULL)
			*cause = kagent_strdup("empty folder path");
		goto out;
	}
	/* Create each parent in turn; EEXIST is fine as long as it is a folder in the end. */
	for (cursor = copy + 1;; cursor++) {
		char saved = *cursor;

		if (saved != '/' && saved != '\0')
			continue;
		*cursor = '\0';
		if (copy[0] != '\0' && mkdir(copy, mode) != 0 && errno != EEXIST) {
			error = -errno;
			if (cause != NULL)
				*cause = kagent_asprintf("cannot create folder %s: %s", copy,
							 strerror(errno));
			goto out;
		}
		*cursor = saved;
		if (saved == '\0')
			break;
	}
	if (stat(path, &info) != 0 || !S_ISDIR(info.st_mode)) {
		error = -ENOTDIR;
		if (cause != NULL)
			*cause = kagent_asprintf("%s exists and is not a folder", path);
		goto out;
	}
out:
	free(copy);
	return error;
}
