/*
 * The web viewer's files (include/kagent/daemon/viewer.h, docs/viewer.md): which names are
 * served, from which folder, as which type. Serving is by table and by a strict name check
 * rather than by cleaning paths, so that a traversal ("..", "%2F", a hidden file) has nothing
 * to match.
 */
#include "kagent/daemon/viewer.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Longer names are no file of ours. */
#define VIEWER_NAME_CAP 64

struct viewer__type {
	const char *extension;
	const char *content_type;
};

static const struct viewer__type viewer__types[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".png", "image/png"},
    {".svg", "image/svg+xml"},
    {NULL, NULL},
};

/* The libraries the page loads as /viewer/lib/NAME, and the Debian package's file each is. */
struct viewer__library {
	const char *name;
	const char *path; /* under kagent_paths_javascript_dir */
};

static const struct viewer__library viewer__libraries[] = {
    {"chart.js", "chart.js/chart.min.js"},		 /* libjs-chart.js (3.x, UMD: Chart) */
    {"highlight.js", "highlight.js/highlight.min.js"},	 /* libjs-highlight.js (9.x: hljs) */
    {"highlight.css", "highlight.js/styles/github.css"}, /* its light theme */
    {NULL, NULL},
};

static const char *
viewer__content_type(const char *name)
{
	const struct viewer__type *type;
	size_t length = strlen(name), extension;

	for (type = viewer__types; type->extension != NULL; type++) {
		extension = strlen(type->extension);
		if (length > extension && strcmp(name + length - extension, type->extension) == 0)
			return type->content_type;
	}
	return NULL;
}

/* One segment of [A-Za-z0-9._-], not starting with '.', at most VIEWER_NAME_CAP long. */
static int
viewer__name_is_plain(const char *name)
{
	const char *c;

	if (name[0] == '\0' || name[0] == '.' || strlen(name) > VIEWER_NAME_CAP)
		return 0;
	for (c = name; *c != '\0'; c++) {
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_'))
			return 0;
	}
	return 1;
}

int
kagent_viewer_resolve(enum kagent_viewer_folder folder, const char *name, char **path_out,
		      const char **content_type_out, char **cause)
{
	const struct viewer__library *library;
	const char *content_type;
	char *directory = NULL;
	int status = 0;

	*path_out = NULL;
	content_type = viewer__name_is_plain(name) ? viewer__content_type(name) : NULL;
	if (content_type == NULL) {
		*cause = kagent_strdup("no such file in the viewer");
		return -ENOENT;
	}
	if (folder == KAGENT_VIEWER_LIBRARY) {
		for (library = viewer__libraries; library->name != NULL; library++)
			if (strcmp(library->name, name) == 0)
				break;
		if (library->name == NULL) {
			*cause = kagent_asprintf("no library %s in the viewer", name);
			return -ENOENT;
		}
		if ((status = kagent_paths_javascript_dir(&directory, cause)) == 0)
			*path_out = kagent_asprintf("%s/%s", directory, library->path);
	} else if ((status = kagent_paths_viewer_dir(&directory, cause)) == 0)
		*path_out = kagent_asprintf("%s/%s", directory, name);
	free(directory);
	if (status == 0)
		*content_type_out = content_type;
	return status;
}

int
kagent_viewer_read(enum kagent_viewer_folder folder, const char *name, char **data_out,
		   size_t *length_out, const char **content_type_out, char **cause)
{
	char *path = NULL;
	int status;

	*data_out = NULL;
	status = kagent_viewer_resolve(folder, name, &path, content_type_out, cause);
	if (status == 0)
		status =
		    kagent_fileio_read(path, KAGENT_VIEWER_FILE_CAP, data_out, length_out, cause);
	if (status == -ENOENT && folder == KAGENT_VIEWER_LIBRARY && path != NULL) {
		/* The one thing a person can fix: say which package. */
		free(*cause);
		*cause =
		    kagent_asprintf("%s is missing: install libjs-chart.js and "
				    "libjs-highlight.js (Debian), or set KAGENT_JAVASCRIPT_DIR",
				    path);
	}
	free(path);
	return status;
}
