/*
 * Whole-file reads with a size cap and atomic whole-file writes (temporary
 * file in the same folder, fsync, rename), for caches and command inputs.
 */
#ifndef KAGENT_FILEIO_H
#define KAGENT_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Reads path into a new NUL-terminated buffer (the NUL is not counted in
 * *size_out). Returns 0, -EFBIG past cap bytes, or another negative errno;
 * fills *cause on failure.
 */
int kagent_fileio_read(const char *path, size_t cap, char **data_out, size_t *size_out,
		       char **cause);
/* Replaces path atomically: readers see the old file or the whole new one. */
int kagent_fileio_write_atomic(const char *path, const void *data, size_t size, char **cause);
/* mkdir -p: creates path and its missing parents with mode; an existing folder is fine. */
int kagent_fileio_make_directories(const char *path, mode_t mode, char **cause);

#endif
