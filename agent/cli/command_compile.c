/*
 * `kagent compile`: compiles one CUDA file with NVRTC and reports diagnostics
 * and per-kernel resource use, as text or as one JSON object (docs/compile.md).
 * Exit status: 0 compiled, 1 compile errors, 2 usage or I/O errors.
 */
#include "kagent/base/alloc.h"
#include "kagent/cli/command.h"
#include "kagent/cuda/compile.h"
#include "kagent/base/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_COMPILE_ERRORS 1
#define EXIT_USAGE 2

struct command_compile__arguments {
	const char *path;
	const char *arch;
	const char *output;
	bool json;
	bool no_cache;
	const char **options;
	size_t option_count;
	const char **names;
	size_t name_count;
};

/* Reports a usage or I/O failure, as JSON when --json was asked for. */
static int
command_compile__fail(const struct command_compile__arguments *arguments, const char *kind,
		      const char *message)
{
	if (arguments->json) {
		json_t *object = json_pack("{s:b, s:{s:s, s:s}}", "success", 0, "error", "kind",
					   kind, "message", message);
		char *text = json_dumps(object, JSON_COMPACT);

		printf("%s\n", text != NULL ? text : "{\"success\":false}");
		free(text);
		json_decref(object);
	} else {
		fprintf(stderr, "kagent compile: %s\n", message);
	}
	return EXIT_USAGE;
}

static bool
command_compile__is_direct_option(const char *argument)
{
	return strncmp(argument, "-D", 2) == 0 || strncmp(argument, "-U", 2) == 0 ||
	       strncmp(argument, "-I", 2) == 0 || strncmp(argument, "-std=", 5) == 0 ||
	       strcmp(argument, "--use_fast_math") == 0 || strcmp(argument, "-lineinfo") == 0 ||
	       strncmp(argument, "-maxrregcount=", 14) == 0;
}

/* Returns 0 or a negative errno with *cause filled. */
static int
command_compile__parse_arguments(int argc, char **argv,
				 struct command_compile__arguments *arguments, char **cause)
{
	int index, result = 0;

	arguments->options = kagent_calloc((size_t)argc, sizeof *arguments->options);
	arguments->names = kagent_calloc((size_t)argc, sizeof *arguments->names);
	/* First pass for --json, so that even early errors come out as JSON. */
	for (index = 1; index < argc; index++) {
		if (strcmp(argv[index], "--json") == 0)
			arguments->json = true;
	}
	for (index = 1; index < argc; index++) {
		const char *argument = argv[index];
		const char *value = index + 1 < argc ? argv[index + 1] : NULL;

		if (strcmp(argument, "--json") == 0)
			continue;
		if (strcmp(argument, "--no-cache") == 0) {
			arguments->no_cache = true;
		} else if (strncmp(argument, "--arch=", 7) == 0) {
			arguments->arch = argument + 7;
		} else if (strncmp(argument, "--option=", 9) == 0) {
			arguments->options[arguments->option_count++] = argument + 9;
		} else if (strncmp(argument, "--name-expression=", 18) == 0) {
			arguments->names[arguments->name_count++] = argument + 18;
		} else if (strcmp(argument, "--arch") == 0 || strcmp(argument, "--option") == 0 ||
			   strcmp(argument, "--name-expression") == 0 ||
			   strcmp(argument, "-o") == 0) {
			if (value == NULL) {
				result = -EINVAL;
				*cause = kagent_asprintf("%s needs a value", argument);
				goto out;
			}
			index++;
			if (strcmp(argument, "--arch") == 0)
				arguments->arch = value;
			else if (strcmp(argument, "--option") == 0)
				arguments->options[arguments->option_count++] = value;
			else if (strcmp(argument, "--name-expression") == 0)
				arguments->names[arguments->name_count++] = value;
			else
				arguments->output = value;
		} else if (command_compile__is_direct_option(argument)) {
			arguments->options[arguments->option_count++] = argument;
		} else if (argument[0] == '-' && argument[1] != '\0') {
			result = -EINVAL;
			*cause = kagent_asprintf("unknown option %s (NVRTC options go through "
						 "--option OPT)",
						 argument);
			goto out;
		} else if (arguments->path != NULL) {
			result = -EINVAL;
			*cause = kagent_strdup("exactly one source file, please");
			goto out;
		} else {
			arguments->path = argument;
		}
	}
	if (arguments->path == NULL) {
		result = -EINVAL;
		*cause = kagent_strdup("no source file given");
	}
out:
	return result;
}

static int
command_compile__handler(int argc, char **argv)
{
	struct command_compile__arguments arguments;
	struct kagent_compile_request request;
	struct kagent_compile_result *result = NULL;
	char *cause = NULL, *source = NULL, *text = NULL;
	size_t size;
	json_t *object = NULL;
	int status, exit_status = EXIT_USAGE;

	memset(&arguments, 0, sizeof arguments);
	memset(&request, 0, sizeof request);
	if (command_compile__parse_arguments(argc, argv, &arguments, &cause) < 0) {
		exit_status = command_compile__fail(&arguments, "usage", cause);
		if (!arguments.json)
			kagent_command_print_usage(&kagent_command_compile);
		goto out;
	}
	status =
	    kagent_fileio_read(arguments.path, KAGENT_COMPILE_MAX_SOURCE, &source, &size, &cause);
	if (status < 0) {
		exit_status = command_compile__fail(&arguments, "io", cause);
		goto out;
	}
	if (strlen(source) != size) {
		exit_status =
		    command_compile__fail(&arguments, "io", "the source file contains a NUL byte");
		goto out;
	}
	request.source = source;
	request.file_name = arguments.path;
	request.arch = arguments.arch;
	request.options = arguments.options;
	request.option_count = arguments.option_count;
	request.name_expressions = arguments.names;
	request.name_expression_count = arguments.name_count;
	request.use_cache = !arguments.no_cache;
	status = kagent_compile_source(&request, &result, &cause);
	if (status < 0) {
		exit_status = command_compile__fail(
		    &arguments, status == -EINVAL ? "invalid_request" : "compiler", cause);
		goto out;
	}
	if (result->success && arguments.output != NULL) {
		status = kagent_fileio_write_atomic(arguments.output, result->cubin,
						    result->cubin_size, &cause);
		if (status < 0) {
			exit_status = command_compile__fail(&arguments, "io", cause);
			goto out;
		}
	}
	if (arguments.json) {
		object = kagent_compile_result_to_json(result);
		json_object_set_new(object, "output",
				    arguments.output && result->success
					? json_string(arguments.output)
					: json_null());
		text = json_dumps(object, JSON_COMPACT);
		printf("%s\n", text != NULL ? text : "{\"success\":false}");
	} else {
		kagent_compile_result_render_text(result, stdout);
		if (result->success && arguments.output != NULL)
			printf("cubin written to %s\n", arguments.output);
	}
	exit_status = result->success ? 0 : EXIT_COMPILE_ERRORS;
out:
	fflush(stdout);
	kagent_compile_result_free(result);
	json_decref(object);
	free(arguments.options);
	free(arguments.names);
	free(source);
	free(cause);
	free(text);
	return exit_status;
}

const struct kagent_command kagent_command_compile = {
    .name = "compile",
    .usage = "FILE.cu [--arch sm_90a] [--json] [-D...] [-I...] [--option OPT]... "
	     "[--name-expression EXPR]... [--no-cache] [-o OUT.cubin]",
    .help = "compile CUDA C++ to a cubin with NVRTC; report diagnostics, registers, spills",
    .handler = command_compile__handler,
};
