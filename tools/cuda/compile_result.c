/*
 * The compile result's lifetime and its JSON form (see
 * include/kagent/cuda/compile_result.h). The same JSON is printed by
 * `kagent compile --json` and stored next to cached cubins, so reading it back
 * is strict: a cache entry that does not parse is treated as missing.
 */
#include "kagent/cuda/compile_result.h"

#include "kagent/base/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const compile_result__demangle_names[] = {"none", "name_expression", "demangler",
							     "base_name"};

const char *
kagent_compile_result_demangle_name(enum kagent_compile_demangle demangle)
{
	if ((unsigned)demangle <
	    sizeof compile_result__demangle_names / sizeof compile_result__demangle_names[0])
		return compile_result__demangle_names[demangle];
	return "none";
}

void
kagent_compile_result_free(struct kagent_compile_result *result)
{
	size_t index;

	if (result == NULL)
		return;
	free(result->file_name);
	free(result->arch);
	free(result->nvrtc_version);
	free(result->key);
	for (index = 0; index < result->option_count; index++)
		free(result->options[index]);
	free(result->options);
	free(result->cubin);
	free(result->log);
	kagent_nvrtc_log_free(result->diagnostics, result->diagnostic_count);
	for (index = 0; index < result->kernel_count; index++) {
		free(result->kernels[index].mangled_name);
		free(result->kernels[index].demangled_name);
	}
	free(result->kernels);
	free(result);
}

/*
 * jansson refuses invalid UTF-8, and logs echo source bytes verbatim: replace
 * any byte that is not ASCII with '?' rather than lose the whole field.
 */
static json_t *
compile_result__safe_string(const char *text)
{
	json_t *value;
	char *copy;
	size_t index;

	if (text == NULL)
		return json_string("");
	value = json_string(text);
	if (value != NULL)
		return value;
	copy = kagent_strdup(text);
	for (index = 0; copy[index] != '\0'; index++) {
		if ((unsigned char)copy[index] >= 0x80 || (unsigned char)copy[index] < 0x09)
			copy[index] = '?';
	}
	value = json_string(copy);
	free(copy);
	return value != NULL ? value : json_string("");
}

/* A number that ptxas did not report stays null in JSON rather than a fake 0. */
static json_t *
compile_result__optional_integer(long long value)
{
	return value < 0 ? json_null() : json_integer(value);
}

json_t *
kagent_compile_result_to_json(const struct kagent_compile_result *result)
{
	json_t *object = json_object(), *options = json_array(), *diagnostics = json_array();
	json_t *kernels = json_array();
	size_t index;

	json_object_set_new(object, "success", json_boolean(result->success));
	json_object_set_new(object, "cached", json_boolean(result->cached));
	json_object_set_new(object, "file", compile_result__safe_string(result->file_name));
	json_object_set_new(object, "arch", compile_result__safe_string(result->arch));
	json_object_set_new(object, "nvrtc_version",
			    compile_result__safe_string(result->nvrtc_version));
	json_object_set_new(object, "key", result->key ? json_string(result->key) : json_null());
	for (index = 0; index < result->option_count; index++)
		json_array_append_new(options, compile_result__safe_string(result->options[index]));
	json_object_set_new(object, "options", options);
	json_object_set_new(object, "cubin_size", json_integer((json_int_t)result->cubin_size));
	json_object_set_new(object, "compile_seconds", json_real(result->compile_seconds));
	json_object_set_new(object, "elapsed_seconds", json_real(result->elapsed_seconds));
	for (index = 0; index < result->diagnostic_count; index++) {
		const struct kagent_nvrtc_diagnostic *diagnostic = &result->diagnostics[index];

		json_array_append_new(
		    diagnostics,
		    json_pack("{s:o, s:i, s:s, s:o, s:o}", "file",
			      compile_result__safe_string(diagnostic->file), "line",
			      diagnostic->line, "severity",
			      kagent_nvrtc_log_severity_name(diagnostic->severity), "code",
			      diagnostic->code ? compile_result__safe_string(diagnostic->code)
					       : json_null(),
			      "message", compile_result__safe_string(diagnostic->message)));
	}
	json_object_set_new(object, "diagnostics", diagnostics);
	for (index = 0; index < result->kernel_count; index++) {
		const struct kagent_compile_kernel *kernel = &result->kernels[index];
		json_t *entry = json_object();

		json_object_set_new(entry, "mangled_name",
				    compile_result__safe_string(kernel->mangled_name));
		json_object_set_new(entry, "demangled_name",
				    compile_result__safe_string(kernel->demangled_name));
		json_object_set_new(
		    entry, "demangle",
		    json_string(kagent_compile_result_demangle_name(kernel->demangle)));
		json_object_set_new(entry, "registers",
				    compile_result__optional_integer(kernel->registers));
		json_object_set_new(entry, "barriers",
				    compile_result__optional_integer(kernel->barriers));
		json_object_set_new(entry, "stack_frame_bytes",
				    compile_result__optional_integer(kernel->stack_frame_bytes));
		json_object_set_new(entry, "spill_store_bytes",
				    compile_result__optional_integer(kernel->spill_store_bytes));
		json_object_set_new(entry, "spill_load_bytes",
				    compile_result__optional_integer(kernel->spill_load_bytes));
		json_object_set_new(entry, "shared_bytes",
				    compile_result__optional_integer(kernel->shared_bytes));
		json_object_set_new(entry, "constant_bytes",
				    compile_result__optional_integer(kernel->constant_bytes));
		json_object_set_new(entry, "local_bytes",
				    compile_result__optional_integer(kernel->local_bytes));
		json_array_append_new(kernels, entry);
	}
	json_object_set_new(object, "kernels", kernels);
	json_object_set_new(object, "log", compile_result__safe_string(result->log));
	return object;
}

static int
compile_result__get_string(const json_t *object, const char *field, bool nullable, char **out)
{
	json_t *value = json_object_get(object, field);

	*out = NULL;
	if (nullable && json_is_null(value))
		return 0;
	if (!json_is_string(value))
		return -EBADMSG;
	*out = kagent_strdup(json_string_value(value));
	return 0;
}

static int
compile_result__get_integer(const json_t *object, const char *field, long long *out)
{
	json_t *value = json_object_get(object, field);

	if (json_is_null(value)) {
		*out = -1;
		return 0;
	}
	if (!json_is_integer(value) || json_integer_value(value) < 0)
		return -EBADMSG;
	*out = json_integer_value(value);
	return 0;
}

static int
compile_result__get_kernel(const json_t *entry, struct kagent_compile_kernel *kernel)
{
	long long registers, barriers;
	char *demangle = NULL;
	size_t index;
	int result = -EBADMSG;

	if (!json_is_object(entry) ||
	    compile_result__get_string(entry, "mangled_name", false, &kernel->mangled_name) ||
	    compile_result__get_string(entry, "demangled_name", false, &kernel->demangled_name) ||
	    compile_result__get_string(entry, "demangle", false, &demangle) ||
	    compile_result__get_integer(entry, "registers", &registers) ||
	    compile_result__get_integer(entry, "barriers", &barriers) ||
	    compile_result__get_integer(entry, "stack_frame_bytes", &kernel->stack_frame_bytes) ||
	    compile_result__get_integer(entry, "spill_store_bytes", &kernel->spill_store_bytes) ||
	    compile_result__get_integer(entry, "spill_load_bytes", &kernel->spill_load_bytes) ||
	    compile_result__get_integer(entry, "shared_bytes", &kernel->shared_bytes) ||
	    compile_result__get_integer(entry, "constant_bytes", &kernel->constant_bytes) ||
	    compile_result__get_integer(entry, "local_bytes", &kernel->local_bytes) ||
	    registers > 65536 || barriers > 65536)
		goto out;
	kernel->registers = (int)registers;
	kernel->barriers = (int)barriers;
	for (index = 0; index < sizeof compile_result__demangle_names /
				    sizeof compile_result__demangle_names[0];
	     index++) {
		if (strcmp(demangle, compile_result__demangle_names[index]) == 0) {
			kernel->demangle = (enum kagent_compile_demangle)index;
			result = 0;
		}
	}
out:
	free(demangle);
	return result;
}

static int
compile_result__get_diagnostic(const json_t *entry, struct kagent_nvrtc_diagnostic *diagnostic)
{
	char *severity = NULL;
	long long line;
	int result = -EBADMSG;

	if (!json_is_object(entry) ||
	    compile_result__get_string(entry, "file", false, &diagnostic->file) ||
	    compile_result__get_string(entry, "code", true, &diagnostic->code) ||
	    compile_result__get_string(entry, "message", false, &diagnostic->message) ||
	    compile_result__get_string(entry, "severity", false, &severity) ||
	    compile_result__get_integer(entry, "line", &line) || line > 100000000 ||
	    kagent_nvrtc_log_severity_parse(severity, &diagnostic->severity) < 0)
		goto out;
	diagnostic->line = line < 0 ? 0 : (int)line;
	result = 0;
out:
	free(severity);
	return result;
}

int
kagent_compile_result_from_json(const json_t *object, struct kagent_compile_result **result_out,
				char **cause)
{
	struct kagent_compile_result *result = kagent_calloc(1, sizeof *result);
	json_t *options, *diagnostics, *kernels, *entry, *success, *seconds, *size;
	size_t index;
	int status = -EBADMSG;

	*result_out = NULL;
	if (!json_is_object(object))
		goto out;
	success = json_object_get(object, "success");
	seconds = json_object_get(object, "compile_seconds");
	size = json_object_get(object, "cubin_size");
	options = json_object_get(object, "options");
	diagnostics = json_object_get(object, "diagnostics");
	kernels = json_object_get(object, "kernels");
	if (!json_is_boolean(success) || !json_is_number(seconds) || !json_is_integer(size) ||
	    json_integer_value(size) < 0 || !json_is_array(options) ||
	    !json_is_array(diagnostics) || !json_is_array(kernels) ||
	    compile_result__get_string(object, "file", false, &result->file_name) ||
	    compile_result__get_string(object, "arch", false, &result->arch) ||
	    compile_result__get_string(object, "nvrtc_version", false, &result->nvrtc_version) ||
	    compile_result__get_string(object, "key", true, &result->key) ||
	    compile_result__get_string(object, "log", false, &result->log))
		goto out;
	result->success = json_is_true(success);
	result->compile_seconds = json_number_value(seconds);
	result->cubin_size = (size_t)json_integer_value(size);
	result->options = kagent_calloc(json_array_size(options), sizeof *result->options);
	json_array_foreach(options, index, entry)
	{
		if (!json_is_string(entry))
			goto out;
		result->options[result->option_count++] = kagent_strdup(json_string_value(entry));
	}
	result->diagnostics =
	    kagent_calloc(json_array_size(diagnostics), sizeof *result->diagnostics);
	json_array_foreach(diagnostics, index, entry)
	{
		result->diagnostic_count++;
		if (compile_result__get_diagnostic(entry, &result->diagnostics[index]) < 0)
			goto out;
	}
	result->kernels = kagent_calloc(json_array_size(kernels), sizeof *result->kernels);
	json_array_foreach(kernels, index, entry)
	{
		result->kernel_count++;
		if (compile_result__get_kernel(entry, &result->kernels[index]) < 0)
			goto out;
	}
	*result_out = result;
	result = NULL;
	status = 0;
out:
	if (status < 0)
		*cause = kagent_strdup("malformed compile result JSON");
	kagent_compile_result_free(result);
	return status;
}

static void
compile_result__print_number(FILE *stream, long long value, int width)
{
	if (value < 0)
		fprintf(stream, " %*s", width, "-");
	else
		fprintf(stream, " %*lld", width, value);
}

void
kagent_compile_result_render_text(const struct kagent_compile_result *result, FILE *stream)
{
	size_t index;

	for (index = 0; index < result->diagnostic_count; index++) {
		const struct kagent_nvrtc_diagnostic *diagnostic = &result->diagnostics[index];

		if (diagnostic->line > 0)
			fprintf(stream, "%s:%d: %s: %s\n", diagnostic->file, diagnostic->line,
				kagent_nvrtc_log_severity_name(diagnostic->severity),
				diagnostic->message);
		else
			fprintf(stream, "%s: %s: %s\n", diagnostic->file,
				kagent_nvrtc_log_severity_name(diagnostic->severity),
				diagnostic->message);
	}
	if (result->kernel_count > 0) {
		fprintf(stream, "%-40s %5s %9s %9s %7s %7s %7s\n", "kernel", "regs", "spill-st",
			"spill-ld", "stack", "smem", "cmem");
		for (index = 0; index < result->kernel_count; index++) {
			const struct kagent_compile_kernel *kernel = &result->kernels[index];

			/* A long signature gets its own line so the columns stay aligned. */
			if (strlen(kernel->demangled_name) > 40)
				fprintf(stream, "%s\n%-40s", kernel->demangled_name, "");
			else
				fprintf(stream, "%-40s", kernel->demangled_name);
			compile_result__print_number(stream, kernel->registers, 5);
			compile_result__print_number(stream, kernel->spill_store_bytes, 9);
			compile_result__print_number(stream, kernel->spill_load_bytes, 9);
			compile_result__print_number(stream, kernel->stack_frame_bytes, 7);
			compile_result__print_number(stream, kernel->shared_bytes, 7);
			compile_result__print_number(stream, kernel->constant_bytes, 7);
			fprintf(stream, "\n");
			if (strcmp(kernel->demangled_name, kernel->mangled_name) != 0)
				fprintf(stream, "  %s\n", kernel->mangled_name);
		}
	}
	if (result->success)
		fprintf(stream, "%s for %s in %.3f s (NVRTC %s), cubin %zu bytes\n",
			result->cached ? "served from cache" : "compiled", result->arch,
			result->elapsed_seconds, result->nvrtc_version, result->cubin_size);
	else
		fprintf(stream, "compilation failed for %s in %.3f s (NVRTC %s)\n", result->arch,
			result->elapsed_seconds, result->nvrtc_version);
}
