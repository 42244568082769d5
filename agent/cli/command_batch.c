/*
 * `kagent batch DIR|FILE...`: hands kagentd a batch of problems to optimize (POST
 * /v1/batches, docs/daemon-api.md): a folder the daemon scans (--level, --filter), or problem
 * files, with optimize's model, target and budget flags as the batch's settings. Prints the
 * batch's id; `kagent status ID` follows it and `kagent report ID` sums it up.
 */
#include "command_optimize.h"
#include "daemon_call.h"

#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/records/config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
	BATCH_OPTION_LEVEL,
	BATCH_OPTION_FILTER,
	BATCH_OPTION_SOCKET,
	BATCH_OPTION_TOKEN_FILE,
	BATCH_OPTION_JSON,
	BATCH_OPTION_FIRST_SETTING, /* from here on, each flag is one of the batch's settings */
};

/* clang-format off */
static const struct kagent_command_option command_batch__options[] = {
	[BATCH_OPTION_LEVEL] = {"level", 0, "N", "only the problems of DIR/levelN (KernelBench "
		"levels)", NULL, NULL},
	[BATCH_OPTION_FILTER] = {"filter", 0, "GLOB", "only the problem files whose name matches "
		"GLOB (fnmatch, e.g. '1*_*.py')", NULL, NULL},
	KAGENT_DAEMON_CALL_OPTIONS,
	/* The daemon's config decides what a flag leaves unset, not this machine's. */
	KAGENT_COMMAND_OPTIMIZE_SETTINGS("kagentd's config"),
	{0},
};
/* clang-format on */
#define BATCH_OPTION_COUNT (sizeof command_batch__options / sizeof command_batch__options[0] - 1)

/*
 * The settings object from the flags. Each value is checked and converted as `kagent optimize`
 * would (kagent_config_set, on a config of its own), and sent with the type the config gives it
 * (--max-turns 2 goes as 2, --target 1.5 as 1.5), so that a bad value fails here, before the
 * daemon queues anything. The key is the flag's name with '_' for '-' (command_optimize.h).
 */
static int
command_batch__settings(const struct kagent_daemon_call *call, json_t **settings_out, char **cause)
{
	struct kagent_config config;
	json_t *settings = json_object(), *values = NULL;
	size_t index;
	int error = 0;

	*settings_out = NULL;
	kagent_config_init(&config);
	for (index = BATCH_OPTION_FIRST_SETTING; index < BATCH_OPTION_COUNT; index++) {
		const struct kagent_command_option *option = &command_batch__options[index];
		char *reason = NULL;

		if (call->values[index] == NULL)
			continue;
		error =
		    kagent_config_set(&config, option->config_key, call->values[index], &reason);
		if (error < 0) {
			*cause = kagent_asprintf("--%s: %s", option->name, reason);
			free(reason);
			goto out;
		}
	}
	values = kagent_config_to_json(&config);
	for (index = BATCH_OPTION_FIRST_SETTING; index < BATCH_OPTION_COUNT; index++) {
		const struct kagent_command_option *option = &command_batch__options[index];
		const char *dot = strchr(option->config_key, '.');
		char *section =
		    kagent_strndup(option->config_key, (size_t)(dot - option->config_key));
		char *key = kagent_strdup(option->name), *dash;
		json_t *value = json_object_get(json_object_get(values, section), dot + 1);

		while ((dash = strchr(key, '-')) != NULL)
			*dash = '_';
		if (call->values[index] != NULL)
			json_object_set(settings, key, value != NULL ? value : json_null());
		free(section);
		free(key);
	}
	*settings_out = settings;
	settings = NULL;
out:
	json_decref(settings);
	json_decref(values);
	kagent_config_clear(&config);
	return error;
}

/* path made absolute and resolved: the daemon runs elsewhere, with another working folder. */
static int
command_batch__absolute(const char *path, char **absolute_out, int *is_folder_out, char **cause)
{
	char resolved[PATH_MAX];
	struct stat info;

	if (realpath(path, resolved) == NULL || stat(resolved, &info) != 0) {
		int error = -errno;

		*cause = kagent_asprintf("cannot read %s: %s", path, strerror(errno));
		return error;
	}
	*is_folder_out = S_ISDIR(info.st_mode);
	*absolute_out = kagent_strdup(resolved);
	return 0;
}

/* The request's body from the operands: {"folder", "level", "filter"} or {"problems"}. */
static int
command_batch__body(const struct kagent_daemon_call *call, int argc, char **argv, json_t **body_out,
		    int *status_out)
{
	const char *level = call->values[BATCH_OPTION_LEVEL];
	const char *filter = call->values[BATCH_OPTION_FILTER];
	json_t *body = json_object(), *problems = json_array(), *settings = NULL;
	char *cause = NULL, *absolute = NULL, *end = NULL;
	int index, is_folder = 0, folders = 0, error = 0;
	long level_number = 0;

	*body_out = NULL;
	*status_out = KAGENT_COMMAND_EXIT_ERROR;
	if (call->first_operand >= argc) {
		kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "usage",
					"give a folder of problems, or problem files");
		error = -EINVAL;
		goto out;
	}
	if (level != NULL) {
		errno = 0;
		level_number = strtol(level, &end, 10);
		if (errno != 0 || end == level || *end != '\0' || level_number < 1 ||
		    level_number > INT_MAX) {
			cause =
			    kagent_asprintf("--level must be a positive integer, not '%s'", level);
			kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "usage", cause);
			error = -EINVAL;
			goto out;
		}
	}
	for (index = call->first_operand; index < argc; index++) {
		error = command_batch__absolute(argv[index], &absolute, &is_folder, &cause);
		if (error < 0) {
			kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "io", cause);
			goto out;
		}
		folders += is_folder;
		if (is_folder)
			json_object_set_new(body, "folder", json_string(absolute));
		else
			json_array_append_new(problems, json_string(absolute));
		free(absolute);
		absolute = NULL;
	}
	if (folders > 0 && argc - call->first_operand > 1) {
		kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "usage",
					"give one folder of problems, or problem files, not both");
		error = -EINVAL;
		goto out;
	}
	if (folders == 0 && (level != NULL || filter != NULL)) {
		kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "usage",
					"--level and --filter choose inside a folder; with files, "
					"name the files");
		error = -EINVAL;
		goto out;
	}
	if (folders == 0)
		json_object_set(body, "problems", problems);
	if (level != NULL)
		json_object_set_new(body, "level", json_integer(level_number));
	if (filter != NULL)
		json_object_set_new(body, "filter", json_string(filter));
	error = command_batch__settings(call, &settings, &cause);
	if (error < 0) {
		kagent_daemon_call_fail(call, KAGENT_COMMAND_EXIT_ERROR, "usage", cause);
		goto out;
	}
	if (json_object_size(settings) > 0)
		json_object_set(body, "settings", settings);
	*body_out = body;
	body = NULL;
	*status_out = 0;
out:
	json_decref(body);
	json_decref(problems);
	json_decref(settings);
	free(absolute);
	free(cause);
	return error;
}

static int
command_batch__handler(int argc, char **argv)
{
	struct kagent_daemon_call call;
	json_t *body = NULL, *reply = NULL;
	const char *batch;
	long long count;
	int status;

	if (!kagent_daemon_call_parse(&call, &kagent_command_batch, argc, argv, &status))
		return status;
	if (command_batch__body(&call, argc, argv, &body, &status) < 0)
		goto out;
	status = kagent_daemon_call_request(&call, "POST", "/v1/batches", body, &reply, NULL, NULL);
	if (status != 0)
		goto out;
	batch = json_string_value(json_object_get(reply, "batch"));
	if (batch == NULL || !json_is_integer(json_object_get(reply, "sessions"))) {
		status = kagent_daemon_call_fail(&call, KAGENT_COMMAND_EXIT_ERROR, "daemon",
						 "kagentd's answer names no batch");
		goto out;
	}
	if (call.json) {
		kagent_daemon_call_print_json(reply);
		goto out;
	}
	count = (long long)json_integer_value(json_object_get(reply, "sessions"));
	printf("batch %s: %lld problem%s queued\n", batch, count, count == 1 ? "" : "s");
out:
	json_decref(body);
	json_decref(reply);
	return status;
}

const struct kagent_command kagent_command_batch = {
    .name = "batch",
    .operands = "DIR|FILE...",
    .help = "queue a batch of problems on kagentd, the daemon (a folder, or problem files)",
    .options = command_batch__options,
    .handler = command_batch__handler,
};
