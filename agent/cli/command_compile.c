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
	bool help;
	const char **options;
	size_t option_count;
	const char **names;
	size_t name_count;
};

/* Indexes into command_compile__options, the cases of the parser's switch. */
enum {
	COMMAND_COMPILE_ARCH,
	COMMAND_COMPILE_JSON,
	COMMAND_COMPILE_OPTION,
	COMMAND_COMPILE_NAME_EXPRESSION,
	COMMAND_COMPILE_NO_CACHE,
	COMMAND_COMPILE_OUTPUT,
	COMMAND_COMPILE_DEFINE,
	COMMAND_COMPILE_UNDEFINE,
	COMMAND_COMPILE_INCLUDE,
};

/* clang-format off */
static const struct kagent_command_option command_compile__options[] = {
	[COMMAND_COMPILE_ARCH] = {"arch", 0, "ARCH", "the GPU architecture to compile for",
		KAGENT_COMPILE_DEFAULT_ARCH, NULL},
	[COMMAND_COMPILE_JSON] = {"json", 0, NULL,
		"print one JSON object (docs/compile.md), an error object on failure", NULL, NULL},
	[COMMAND_COMPILE_OPTION] = {"option", 0, "OPT", "pass OPT to NVRTC; repeatable "
		"(-std=, --use_fast_math, -lineinfo, -maxrregcount= also go as they are)",
		NULL, NULL},
	[COMMAND_COMPILE_NAME_EXPRESSION] = {"name-expression", 0, "EXPR",
		"a template instance to compile and report, e.g. 'k<float>'; repeatable", NULL,
		NULL},
	[COMMAND_COMPILE_NO_CACHE] = {"no-cache", 0, NULL,
		"neither read nor write the compile cache", NULL, NULL},
	[COMMAND_COMPILE_OUTPUT] = {"output", 'o', "OUT.cubin", "write the cubin there",
		"not written", NULL},
	[COMMAND_COMPILE_DEFINE] = {NULL, 'D', "NAME[=VALUE]", "define a macro", NULL, NULL},
	[COMMAND_COMPILE_UNDEFINE] = {NULL, 'U', "NAME", "undefine a macro", NULL, NULL},
	[COMMAND_COMPILE_INCLUDE] = {NULL, 'I', "DIR", "add a folder to the include path",
		NULL, NULL},
	{0},
};
/* clang-format on */

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

/* The option ARGUMENT names ("--name", "--name=VALUE" or "-o"), its inline value in *value. */
static const struct kagent_command_option *
command_compile__find(const char *argument, const char **value)
{
	const struct kagent_command_option *option;
	char *name;

	*value = NULL;
	if (strncmp(argument, "--", 2) == 0) {
		const char *equals = strchr(argument, '=');

		name = kagent_strndup(argument + 2, equals != NULL ? (size_t)(equals - argument - 2)
								   : strlen(argument + 2));
		option = kagent_command_option_find(&kagent_command_compile, name);
		free(name);
		if (option != NULL && equals != NULL)
			*value = equals + 1;
		return option;
	}
	for (option = command_compile__options; option->name != NULL || option->letter != 0;
	     option++) {
		if (argument[0] == '-' && option->letter == argument[1] && argument[2] == '\0')
			return option;
	}
	return NULL;
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
		const struct kagent_command_option *option;
		const char *value;

		if (strcmp(argument, "--help") == 0 || strcmp(argument, "-h") == 0) {
			arguments->help = true;
			goto out;
		}
		/* NVRTC's own options go through as they are. */
		if (command_compile__is_direct_option(argument)) {
			arguments->options[arguments->option_count++] = argument;
			continue;
		}
		option = command_compile__find(argument, &value);
		if (option == NULL && argument[0] == '-' && argument[1] != '\0') {
			result = -EINVAL;
			*cause = kagent_asprintf("unknown option %s (NVRTC options go through "
						 "--option OPT)",
						 argument);
			goto out;
		}
		if (option == NULL) {
			if (arguments->path != NULL) {
				result = -EINVAL;
				*cause = kagent_strdup("exactly one source file, please");
				goto out;
			}
			arguments->path = argument;
			continue;
		}
		if (option->argument != NULL && value == NULL) {
			if (index + 1 >= argc) {
				result = -EINVAL;
				*cause = kagent_asprintf("%s needs a value", argument);
				goto out;
			}
			value = argv[++index];
		} else if (option->argument == NULL && value != NULL) {
			result = -EINVAL;
			*cause = kagent_asprintf("--%s takes no value", option->name);
			goto out;
		}
		switch (option - command_compile__options) {
		case COMMAND_COMPILE_ARCH:
			arguments->arch = value;
			break;
		case COMMAND_COMPILE_OPTION:
			arguments->options[arguments->option_count++] = value;
			break;
		case COMMAND_COMPILE_NAME_EXPRESSION:
			arguments->names[arguments->name_count++] = value;
			break;
		case COMMAND_COMPILE_NO_CACHE:
			arguments->no_cache = true;
			break;
		case COMMAND_COMPILE_OUTPUT:
			arguments->output = value;
			break;
		default: /* --json, read above; -D, -U, -I, taken as NVRTC options above */
			break;
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
	if (command_compile__parse_arguments(argc, argv, &arguments, &cause) == 0 &&
	    arguments.help) {
		kagent_command_print_help(&kagent_command_compile, stdout);
		exit_status = 0;
		goto out;
	}
	if (cause != NULL) {
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
    .operands = "FILE.cu",
    .help = "compile CUDA C++ to a cubin with NVRTC; report diagnostics, registers, spills",
    .options = command_compile__options,
    .handler = command_compile__handler,
};
