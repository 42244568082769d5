/*
 * The web viewer's files as kagentd serves them (docs/viewer.md): GET / is the viewer's
 * index.html, GET /viewer/NAME one of its own files (kagent_paths_viewer_dir), and
 * GET /viewer/lib/NAME one of the JavaScript libraries it uses, read from the system's
 * Debian packages (libjs-chart.js, libjs-highlight.js under kagent_paths_javascript_dir).
 * Only what this module names is served: a name is one path segment of letters, digits,
 * '.', '-' and '_' that does not start with '.', with a known type, so no request reaches
 * outside those folders.
 */
#ifndef KAGENT_DAEMON_VIEWER_H
#define KAGENT_DAEMON_VIEWER_H

#include <stddef.h>

/* A file the viewer serves is read whole; none of ours or Debian's is near this. */
#define KAGENT_VIEWER_FILE_CAP (4u << 20)

enum kagent_viewer_folder {
	KAGENT_VIEWER_OWN,     /* the viewer's own files */
	KAGENT_VIEWER_LIBRARY, /* the system's JavaScript libraries, by the names of a table */
};

/*
 * The file behind name (the route's captured, decoded segment) and its Content-Type. Returns 0
 * with *path_out (malloc'd) and *content_type_out (static), or -ENOENT with *cause for a name
 * that is not served.
 */
int kagent_viewer_resolve(enum kagent_viewer_folder folder, const char *name, char **path_out,
			  const char **content_type_out, char **cause);

/* Reads what kagent_viewer_resolve found: 0 with *data_out (malloc'd) and *length_out, or
 * a negative errno with *cause (-ENOENT when the file is missing, -EFBIG over the cap). */
int kagent_viewer_read(enum kagent_viewer_folder folder, const char *name, char **data_out,
		       size_t *length_out, const char **content_type_out, char **cause);

#endif
