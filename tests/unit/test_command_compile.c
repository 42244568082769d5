/*
 * End-to-end tests of `kagent compile`: runs the built binary ($KAGENT_BINARY)
 * and checks exit codes, the text report and the JSON object.
 */
#include "kagent/base/alloc.h"

#include "test.h"

#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs kagent with argv (NULL-terminated, without argv[0]); returns the exit status. */
static int
run(const char *const *arguments, char **output)
{
	const char *binary = getenv("KAGENT_BINARY");
	char *argv[32], buffer[4096];
	size_t length = 0, count = 0;
	int pipe_fds[2], status = 0;
	pid_t child;

	if (binary == NULL)
		kagent_test_skip("KAGENT_BINARY is not set");
	argv[count++] = (char *)binary;
	while (arguments[count - 1] != NULL && count < 31) {
		argv[count] = (char *)arguments[count - 1];
		count++;
	}
	argv[count] = NULL;
	CHECK(pipe(pipe_fds) == 0);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		dup2(pipe_fds[1], 1);
		close(pipe_fds[0]);
		close(pipe_fds[1]);
		execv(binary, argv);
		_exit(127);
	}
	close(pipe_fds[1]);
	*output = kagent_strdup("");
	for (;;) {
		ssize_t got = read(pipe_fds[0], buffer, sizeof buffer);

		if (got <= 0)
			break;
		*output = kagent_realloc(*output, length + (size_t)got + 1);
		memcpy(*output + length, buffer, (size_t)got);
		length += (size_t)got;
		(*output)[length] = '\0';
	}
	close(pipe_fds[0]);
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static json_t *
parse_one_object(const char *output)
{
	json_error_t error;
	json_t *object = json_loads(output, 0, &error);

	if (object == NULL)
		fprintf(stderr, "not one JSON object: %s\n%s\n", error.text, output);
	CHECK(json_is_object(object));
	return object;
}

static char *directory;

static char *
setup(const char *source)
{
	directory = kagent_test_make_directory();
	setenv("KAGENT_CACHE_DIR", directory, 1);
	return kagent_test_write_file(directory, "k.cu", source);
}

static void
test_json_success_and_cache(void)
{
	char *path = setup("__global__ void kernel(float *x, int n) { x[n] = 1.0f; }\n");
	char *output = NULL, *cubin = kagent_asprintf("%s/out.cubin", directory);
	const char *arguments[] = {"compile", path, "--json", "-o", cubin, NULL};
	json_t *object, *kernel;
	FILE *file;
	char magic[4];

	CHECK_INT(run(arguments, &output), 0);
	object = parse_one_object(output);
	CHECK(json_is_true(json_object_get(object, "success")));
	CHECK(json_is_false(json_object_get(object, "cached")));
	CHECK_STRING(json_string_value(json_object_get(object, "arch")), "sm_90a");
	CHECK_STRING(json_string_value(json_object_get(object, "output")), cubin);
	CHECK(json_integer_value(json_object_get(object, "cubin_size")) > 0);
	kernel = json_array_get(json_object_get(object, "kernels"), 0);
	CHECK_STRING(json_string_value(json_object_get(kernel, "mangled_name")), "_Z6kernelPfi");
	CHECK_STRING(json_string_value(json_object_get(kernel, "demangled_name")),
		     "kernel(float*, int)");
	CHECK(json_integer_value(json_object_get(kernel, "registers")) > 0);
	json_decref(object);
	free(output);
	file = fopen(cubin, "rb");
	CHECK(file != NULL);
	CHECK_INT(fread(magic, 1, 4, file), 4);
	fclose(file);
	CHECK(memcmp(magic,
		     "\x7f"
		     "ELF",
		     4) == 0);

	CHECK_INT(run(arguments, &output), 0);
	object = parse_one_object(output);
	CHECK(json_is_true(json_object_get(object, "cached")));
	json_decref(object);
	free(output);
	free(cubin);
	free(path);
}

static void
test_text_report(void)
{
	char *path = setup("__global__ void kernel(float *x, int n) { x[n] = 1.0f; }\n");
	char *output = NULL;
	const char *arguments[] = {"compile", path, "--arch", "sm_80", "--no-cache", NULL};

	CHECK_INT(run(arguments, &output), 0);
	CHECK_CONTAINS(output, "kernel(float*, int)");
	CHECK_CONTAINS(output, "regs");
	CHECK_CONTAINS(output, "compiled for sm_80");
	free(output);
	free(path);
}

static void
test_compile_errors(void)
{
	char *path = setup("__global__ void k(float *x)\n{\n\tx[0] = y;\n}\n");
	char *output = NULL, *expected;
	const char *text_arguments[] = {"compile", path, NULL};
	const char *json_arguments[] = {"compile", "--json", path, NULL};
	json_t *object, *diagnostic;

	CHECK_INT(run(text_arguments, &output), 1);
	expected = kagent_asprintf("%s:3: error: identifier \"y\" is undefined", path);
	CHECK_CONTAINS(output, expected);
	free(expected);
	free(output);
	CHECK_INT(run(json_arguments, &output), 1);
	object = parse_one_object(output);
	CHECK(json_is_false(json_object_get(object, "success")));
	diagnostic = json_array_get(json_object_get(object, "diagnostics"), 0);
	CHECK_INT(json_integer_value(json_object_get(diagnostic, "line")), 3);
	CHECK_STRING(json_string_value(json_object_get(diagnostic, "severity")), "error");
	json_decref(object);
	free(output);
	free(path);
}

static void
test_usage_errors(void)
{
	char *path = setup("__global__ void k() {}\n");
	char *output = NULL;
	const char *no_file[] = {"compile", NULL};
	const char *missing[] = {"compile", "/nonexistent/k.cu", "--json", NULL};
	const char *bad_arch[] = {"compile", path, "--arch", "sm_9x", "--json", NULL};
	const char *bad_option[] = {"compile", path, "--option", "--bogus", NULL};
	const char *unknown[] = {"compile", path, "--frobnicate", NULL};
	json_t *object, *error;

	CHECK_INT(run(no_file, &output), 2);
	free(output);
	CHECK_INT(run(missing, &output), 2);
	object = parse_one_object(output);
	error = json_object_get(object, "error");
	CHECK_STRING(json_string_value(json_object_get(error, "kind")), "io");
	json_decref(object);
	free(output);
	CHECK_INT(run(bad_arch, &output), 2);
	object = parse_one_object(output);
	error = json_object_get(object, "error");
	CHECK_STRING(json_string_value(json_object_get(error, "kind")), "invalid_request");
	CHECK_CONTAINS(json_string_value(json_object_get(error, "message")), "sm_9x");
	json_decref(object);
	free(output);
	CHECK_INT(run(bad_option, &output), 2);
	free(output);
	CHECK_INT(run(unknown, &output), 2);
	free(output);
	free(path);
}

static const struct kagent_test tests[] = {
    {"json_success_and_cache", test_json_success_and_cache},
    {"text_report", test_text_report},
    {"compile_errors", test_compile_errors},
    {"usage_errors", test_usage_errors},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 120)
