/*
 * Unit tests for agent/daemon/viewer.c: which names the web viewer serves, from which folder,
 * as which type, and that nothing else (a traversal, a hidden file, an unknown type or library)
 * resolves.
 */
#include "kagent/daemon/viewer.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"

#include "test.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static void
check_refused(enum kagent_viewer_folder folder, const char *name)
{
	char *path = NULL, *cause = NULL;
	const char *type = NULL;

	CHECK_INT(kagent_viewer_resolve(folder, name, &path, &type, &cause), -ENOENT);
	CHECK(path == NULL);
	CHECK(cause != NULL);
	free(cause);
}

static void
test_own_files(void)
{
	char *directory = kagent_test_make_directory(), *file, *path = NULL, *cause = NULL;
	char *data = NULL;
	const char *type = NULL;
	size_t length = 0;

	setenv("KAGENT_VIEWER_DIR", directory, 1);
	file = kagent_asprintf("%s/index.html", directory);
	CHECK_INT(kagent_fileio_write_atomic(file, "<html></html>", 13, &cause), 0);
	CHECK_INT(kagent_viewer_resolve(KAGENT_VIEWER_OWN, "index.html", &path, &type, &cause), 0);
	CHECK_STRING(path, file);
	CHECK_STRING(type, "text/html; charset=utf-8");
	free(path);
	CHECK_INT(
	    kagent_viewer_read(KAGENT_VIEWER_OWN, "index.html", &data, &length, &type, &cause), 0);
	CHECK_INT((int)length, 13);
	CHECK(memcmp(data, "<html></html>", 13) == 0);
	free(data);
	CHECK_INT(kagent_viewer_resolve(KAGENT_VIEWER_OWN, "viewer.js", &path, &type, &cause), 0);
	CHECK_STRING(type, "text/javascript; charset=utf-8");
	free(path);
	CHECK_INT(kagent_viewer_resolve(KAGENT_VIEWER_OWN, "viewer.css", &path, &type, &cause), 0);
	CHECK_STRING(type, "text/css; charset=utf-8");
	free(path);
	/* A name that is served but missing: -ENOENT from the read. */
	CHECK_INT(kagent_viewer_read(KAGENT_VIEWER_OWN, "absent.js", &data, &length, &type, &cause),
		  -ENOENT);
	CHECK(data == NULL);
	free(cause);
	free(file);
	unsetenv("KAGENT_VIEWER_DIR");
	free(directory);
}

static void
test_refused_names(void)
{
	setenv("KAGENT_VIEWER_DIR", "/tmp", 1);
	check_refused(KAGENT_VIEWER_OWN, "");
	check_refused(KAGENT_VIEWER_OWN, "..");
	check_refused(KAGENT_VIEWER_OWN, "../index.html");
	check_refused(KAGENT_VIEWER_OWN, "a/../../etc/passwd.js");
	check_refused(KAGENT_VIEWER_OWN, "/etc/passwd");
	check_refused(KAGENT_VIEWER_OWN, ".hidden.js");
	check_refused(KAGENT_VIEWER_OWN, "index.html\\..");
	check_refused(KAGENT_VIEWER_OWN, "kagent.db");	 /* no type of ours */
	check_refused(KAGENT_VIEWER_OWN, "index.html~"); /* nor this */
	check_refused(KAGENT_VIEWER_OWN, "a b.js");
	check_refused(KAGENT_VIEWER_OWN,
		      "a-name-that-is-far-too-long-to-be-any-file-of-the-viewer-at-all-really.js");
	/* Libraries by the table's names only. */
	check_refused(KAGENT_VIEWER_LIBRARY, "jquery.js");
	check_refused(KAGENT_VIEWER_LIBRARY, "chart.min.js");
	check_refused(KAGENT_VIEWER_LIBRARY, "..");
	unsetenv("KAGENT_VIEWER_DIR");
}

static void
test_libraries(void)
{
	char *directory = kagent_test_make_directory(), *folder, *file, *path = NULL, *cause = NULL,
	     *data = NULL;
	const char *type = NULL;
	size_t length = 0;

	setenv("KAGENT_JAVASCRIPT_DIR", directory, 1);
	CHECK_INT(kagent_viewer_resolve(KAGENT_VIEWER_LIBRARY, "chart.js", &path, &type, &cause),
		  0);
	file = kagent_asprintf("%s/chart.js/chart.min.js", directory);
	CHECK_STRING(path, file);
	CHECK_STRING(type, "text/javascript; charset=utf-8");
	free(path);
	CHECK_INT(
	    kagent_viewer_resolve(KAGENT_VIEWER_LIBRARY, "highlight.js", &path, &type, &cause), 0);
	CHECK_CONTAINS(path, "/highlight.js/highlight.min.js");
	free(path);
	CHECK_INT(
	    kagent_viewer_resolve(KAGENT_VIEWER_LIBRARY, "highlight.css", &path, &type, &cause), 0);
	CHECK_STRING(type, "text/css; charset=utf-8");
	free(path);
	/* Missing: the message names the Debian packages. */
	CHECK_INT(
	    kagent_viewer_read(KAGENT_VIEWER_LIBRARY, "chart.js", &data, &length, &type, &cause),
	    -ENOENT);
	CHECK_CONTAINS(cause, "libjs-chart.js");
	free(cause);
	folder = kagent_asprintf("%s/chart.js", directory);
	CHECK_INT(mkdir(folder, 0700), 0);
	CHECK_INT(kagent_fileio_write_atomic(file, "var Chart;", 10, &cause), 0);
	CHECK_INT(
	    kagent_viewer_read(KAGENT_VIEWER_LIBRARY, "chart.js", &data, &length, &type, &cause),
	    0);
	CHECK_INT((int)length, 10);
	free(data);
	free(folder);
	free(file);
	unsetenv("KAGENT_JAVASCRIPT_DIR");
	free(directory);
}

static const struct kagent_test tests[] = {
    {"own_files", test_own_files},
    {"refused_names", test_refused_names},
    {"libraries", test_libraries},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
