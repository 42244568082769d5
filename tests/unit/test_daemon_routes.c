/*
 * Unit tests for kagentd's route table (agent/daemon/daemon_routes.c): docs/openapi.yaml
 * describes exactly the routes the table serves, method by method, and every batch setting
 * the API accepts names a config key.
 */
#include "kagent/daemon/daemon.h"
#include "kagent/daemon/daemon_routes.h"
#include "kagent/records/config.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"

#include "test.h"

#include <ctype.h>
#include <string.h>

static char *
read_openapi(void)
{
	const char *source = getenv("KAGENT_SOURCE_DIR");
	char *path, *data = NULL, *cause = NULL;
	size_t size;

	CHECK(source != NULL);
	path = kagent_asprintf("%s/docs/openapi.yaml", source);
	if (kagent_fileio_read(path, 1 << 20, &data, &size, &cause) < 0) {
		fprintf(stderr, "%s\n", cause);
		abort();
	}
	free(path);
	return data;
}

/* The block of the path item "  PATTERN:" under "paths:", up to the next path item. */
static char *
path_block(const char *yaml, const char *pattern)
{
	char *needle = kagent_asprintf("\n  %s:\n", pattern);
	const char *start = strstr(yaml, needle), *end;

	free(needle);
	if (start == NULL)
		return NULL;
	start += 1;
	for (end = strchr(start, '\n'); end != NULL; end = strchr(end + 1, '\n')) {
		/* A line indented by exactly two spaces starts the next path item. */
		if (end[1] == ' ' && end[2] == ' ' && end[3] != ' ')
			break;
		if (end[1] != ' ' && end[1] != '\n' && end[1] != '\0')
			break;
	}
	return kagent_strndup(start, end != NULL ? (size_t)(end - start) : strlen(start));
}

static void
test_openapi_has_every_route(void)
{
	char *yaml = read_openapi();
	const struct kagent_http_route *route;

	CHECK_CONTAINS(yaml, "openapi: 3.1");
	for (route = kagent_daemon_routes; route->method != NULL; route++) {
		char *block = path_block(yaml, route->pattern), *method, *needle;

		if (block == NULL) {
			fprintf(stderr, "docs/openapi.yaml lacks the path %s\n", route->pattern);
			abort();
		}
		method = kagent_strdup(route->method);
		for (char *at = method; *at != '\0'; at++)
			*at = (char)tolower((unsigned char)*at);
		needle = kagent_asprintf("\n    %s:\n", method);
		if (strstr(block, needle) == NULL) {
			fprintf(stderr, "docs/openapi.yaml: %s lacks %s\n", route->pattern,
				route->method);
			abort();
		}
		free(needle);
		free(method);
		free(block);
	}
	free(yaml);
}

/* And nothing more: each path item and method of the file is in the table. */
static void
test_openapi_has_nothing_else(void)
{
	char *yaml = read_openapi();
	const char *at = strstr(yaml, "\npaths:\n");
	char path[256] = "";

	CHECK(at != NULL);
	for (at = strchr(at + 1, '\n'); at != NULL && at[1] != '\0'; at = strchr(at + 1, '\n')) {
		const char *line = at + 1;
		size_t length = strcspn(line, "\n");

		if (line[0] != ' ' && length > 0)
			break; /* the next top-level section */
		if (strncmp(line, "  /", 3) == 0 && line[length - 1] == ':') {
			snprintf(path, sizeof path, "%.*s", (int)(length - 3), line + 2);
		} else if (strncmp(line, "    ", 4) == 0 && line[4] != ' ' && path[0] != '\0' &&
			   line[length - 1] == ':') {
			const struct kagent_http_route *route;
			char method[16];
			int found = 0;

			snprintf(method, sizeof method, "%.*s", (int)(length - 5), line + 4);
			if (strcmp(method, "parameters") == 0 || strcmp(method, "summary") == 0)
				continue;
			for (route = kagent_daemon_routes; route->method != NULL; route++)
				found = found || (strcmp(route->pattern, path) == 0 &&
						  strcasecmp(route->method, method) == 0);
			if (!found) {
				fprintf(stderr, "docs/openapi.yaml has %s %s, the table does not\n",
					method, path);
				abort();
			}
		}
	}
	free(yaml);
}

static void
test_settings_are_config_keys(void)
{
	static const char *const settings[] = {"model",		  "base_url",	   "api",
					       "target",	  "against",	   "max_turns",
					       "max_tokens",	  "max_cost",	   "max_seconds",
					       "max_gpu_seconds", "speedup_basis", NULL};

	for (size_t index = 0; settings[index] != NULL; index++) {
		const char *key = kagent_daemon_setting_key(settings[index]);

		CHECK(key != NULL);
		CHECK(kagent_config_key_help(key) != NULL);
	}
	CHECK(kagent_daemon_setting_key("output_directory") == NULL);
	CHECK(kagent_daemon_setting_key("api_key_env") == NULL);
}

static const struct kagent_test tests[] = {
    {"openapi_has_every_route", test_openapi_has_every_route},
    {"openapi_has_nothing_else", test_openapi_has_nothing_else},
    {"settings_are_config_keys", test_settings_are_config_keys},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
