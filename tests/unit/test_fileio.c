/* Unit tests for capped reads and atomic writes (tools/base/fileio.c). */
#include "kagent/base/fileio.h"

#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <sys/stat.h>

static void
test_round_trip(void)
{
	char *directory = kagent_test_make_directory(), *cause = NULL, *data = NULL, *path;
	size_t size;

	path = malloc(strlen(directory) + 16);
	CHECK(path != NULL);
	sprintf(path, "%s/out.bin", directory);
	CHECK_INT(kagent_fileio_write_atomic(path, "a\0b", 3, &cause), 0);
	CHECK_INT(kagent_fileio_read(path, 100, &data, &size, &cause), 0);
	CHECK_INT(size, 3);
	CHECK(memcmp(data, "a\0b", 4) == 0);
	/* Fitted to the file, not the 64 KB read buffer (what is read may be kept long). */
	CHECK(malloc_usable_size(data) < 4096);
	free(data);
	/* Replacing leaves no temporary file behind. */
	CHECK_INT(kagent_fileio_write_atomic(path, "xyz!", 4, &cause), 0);
	{
		DIR *folder = opendir(directory);
		struct dirent *entry;
		int files = 0;

		CHECK(folder != NULL);
		while ((entry = readdir(folder)) != NULL)
			files += entry->d_name[0] != '.';
		closedir(folder);
		CHECK_INT(files, 1);
	}
	CHECK_INT(kagent_fileio_read(path, 3, &data, &size, &cause), -EFBIG);
	CHECK(data == NULL);
	free(cause);
	free(path);
	free(directory);
}

static void
test_errors(void)
{
	char *cause = NULL, *data = NULL;
	size_t size;

	CHECK_INT(kagent_fileio_read("/nonexistent/x", 10, &data, &size, &cause), -ENOENT);
	CHECK_CONTAINS(cause, "/nonexistent/x");
	free(cause);
	cause = NULL;
	CHECK(kagent_fileio_write_atomic("/nonexistent/x", "a", 1, &cause) < 0);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_fileio_make_directories("", 0700, &cause), -EINVAL);
	free(cause);
}

static void
test_make_directories(void)
{
	char *directory = kagent_test_make_directory(), *cause = NULL, *path;
	struct stat info;

	path = malloc(strlen(directory) + 16);
	CHECK(path != NULL);
	sprintf(path, "%s/a/b/c", directory);
	CHECK_INT(kagent_fileio_make_directories(path, 0700, &cause), 0);
	CHECK_INT(kagent_fileio_make_directories(path, 0700, &cause), 0);
	CHECK(stat(path, &info) == 0 && S_ISDIR(info.st_mode));
	free(path);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"round_trip", test_round_trip},
    {"errors", test_errors},
    {"make_directories", test_make_directories},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
