/*
 * CUDA C++ to cubin with NVRTC (see include/kagent/cuda/compile.h). NVRTC needs no
 * GPU and no driver, so this runs on CI. Every compile asks ptxas for its
 * resource report (-Xptxas=-v, and -warn-spills as a separate option because
 * NVRTC rejects "-Xptxas=-v,-warn-spills"), and points NVRTC at the toolkit's
 * include and include/cccl folders, because NVRTC searches no system paths
 * and cuda/std, cub and thrust live under cccl in CUDA 13.
 */
#include "kagent/cuda/compile.h"

#include "kagent/base/alloc.h"
#include "kagent/cuda/compile_cache.h"
#include "kagent/cuda/demangle.h"
#include "kagent/base/log.h"
#include "kagent/cuda/ptxas_report.h"

#include <ctype.h>
#include <errno.h>
#include <nvrtc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef KAGENT_DEFAULT_CUDA_ROOT
#define KAGENT_DEFAULT_CUDA_ROOT "/usr/local/cuda"
#endif

/* Options that take no value. */
static const char *const compile__plain_options[] = {
    "--use_fast_math",
    "-use_fast_math",
    "-G",
    "--device-debug",
    "-lineinfo",
    "--generate-line-info",
    "-default-device",
    "--device-as-default-execution-space",
    "-w",
    "--disable-warnings",
    "-restrict",
    "--restrict",
    "-extra-device-vectorization",
    "--extra-device-vectorization",
    "-dlto",
    "--dlink-time-opt",
    "-no-source-include",
    "--no-source-include",
    "-err-no",
    "--display-error-number",
    "-no-err-no",
    "--no-display-error-number",
};

/* Options written as PREFIX then a non-empty value. */
static const char *const compile__value_options[] = {
    "-D",
    "--define-macro=",
    "-U",
    "--undefine-macro=",
    "-I",
    "--include-path=",
    "-include=",
    "--pre-include=",
    "-std=",
    "--std=",
    "-maxrregcount=",
    "--maxrregcount=",
    "-ftz=",
    "--ftz=",
    "-prec-div=",
    "--prec-div=",
    "-prec-sqrt=",
    "--prec-sqrt=",
    "-fmad=",
    "--fmad=",
    "-rdc=",
    "--relocatable-device-code=",
    "-dopt=",
    "--dopt=",
    "-diag-suppress=",
    "--diag-suppress=",
    "-diag-error=",
    "--diag-error=",
    "-diag-warn=",
    "--diag-warn=",
    "-split-compile=",
    "--split-compile=",
    "-Xptxas=",
    "--ptxas-options=",
};

int
kagent_compile_validate_arch(const char *arch, char **cause)
{
	int major_minor = 0, count = 0, index, result = 0, *supported = NULL;
	const char *p = arch != NULL ? arch + 3 : NULL;

	if (arch == NULL || strncmp(arch, "sm_", 3) != 0) {
		result = -EINVAL;
		*cause =
		    kagent_asprintf("invalid architecture '%s': expected sm_NN or sm_NNN with an "
				    "optional 'a' or 'f' suffix, e.g. sm_80, sm_90a, sm_100a",
				    arch ? arch : "(null)");
		goto out;
	}
	for (; isdigit((unsigned char)*p) && p - arch < 6; p++)
		major_minor = major_minor * 10 + (*p - '0');
	if (p - arch < 5 || (*p != '\0' && !((*p == 'a' || *p == 'f') && p[1] == '\0'))) {
		result = -EINVAL;
		*cause =
		    kagent_asprintf("invalid architecture '%s': expected sm_NN or sm_NNN with an "
				    "optional 'a' or 'f' suffix, e.g. sm_80, sm_90a, sm_100a",
				    arch);
		goto out;
	}
	if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0 || count > 1024) {
		result = -EIO;
		*cause = kagent_strdup("NVRTC cannot list its supported architectures");
		goto out;
	}
	supported = kagent_calloc((size_t)count, sizeof *supported);
	if (nvrtcGetSupportedArchs(supported) != NVRTC_SUCCESS) {
		result = -EIO;
		*cause = kagent_strdup("NVRTC cannot list its supported architectures");
		goto out;
	}
	result = -EINVAL;
	for (index = 0; index < count; index++) {
		if (supported[index] == major_minor)
			result = 0;
	}
	if (result < 0)
		*cause = kagent_asprintf("architecture '%s' is not supported by this NVRTC", arch);
out:
	free(supported);
	return result;
}

int
kagent_compile_validate_option(const char *option, char **cause)
{
	size_t index, length;
	const char *p;
	int result = -EINVAL;

	length = strlen(option);
	if (length == 0 || length > KAGENT_COMPILE_MAX_OPTION_LENGTH) {
		*cause = kagent_strdup("empty or overlong compiler option");
		goto out;
	}
	for (p = option; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			*cause = kagent_strdup("compiler option contains a control character");
			goto out;
		}
	}
	if (strncmp(option, "-arch", 5) == 0 || strncmp(option, "--gpu-architecture", 18) == 0) {
		*cause = kagent_asprintf("option '%s': give the architecture with --arch instead",
					 option);
		goto out;
	}
	for (index = 0; index < sizeof compile__plain_options / sizeof compile__plain_options[0];
	     index++) {
		if (strcmp(option, compile__plain_options[index]) == 0) {
			result = 0;
			goto out;
		}
	}
	for (index = 0; index < sizeof compile__value_options / sizeof compile__value_options[0];
	     index++) {
		size_t prefix = strlen(compile__value_options[index]);

		if (strncmp(option, compile__value_options[index], prefix) != 0)
			continue;
		if (option[prefix] == '\0') {
			*cause = kagent_asprintf("option '%s' needs a value in the same argument "
						 "(e.g. -DNAME=1, -I/path, -std=c++17)",
						 option);
			goto out;
		}
		/* ptxas flags one per option: NVRTC rejects comma-joined lists. */
		if (strstr(compile__value_options[index], "ptxas") != NULL &&
		    (option[prefix] != '-' || strchr(option + prefix, ',') != NULL)) {
			*cause = kagent_asprintf("option '%s': pass one ptxas flag per option, "
						 "e.g. -Xptxas=-O3",
						 option);
			goto out;
		}
		result = 0;
		goto out;
	}
	*cause = kagent_asprintf(
	    "option '%s' is not an accepted NVRTC option (see docs/compile.md)", option);
out:
	return result;
}

static bool
compile__has_headers(const char *root)
{
	char *path = kagent_asprintf("%s/include/cuda_fp16.h", root);
	bool found = access(path, R_OK) == 0;

	free(path);
	return found;
}

int
kagent_compile_toolkit_root(char **root_out, char **cause)
{
	const char *candidates[4];
	size_t index;
	int result = -ENOENT;

	candidates[0] = getenv("CUDA_HOME");
	candidates[1] = getenv("CUDA_PATH");
	candidates[2] = KAGENT_DEFAULT_CUDA_ROOT;
	candidates[3] = "/usr/local/cuda";
	*root_out = NULL;
	for (index = 0; index < 4; index++) {
		if (candidates[index] == NULL || candidates[index][0] == '\0')
			continue;
		if (compile__has_headers(candidates[index])) {
			*root_out = kagent_strdup(candidates[index]);
			result = 0;
			goto out;
		}
		kagent_log(KAGENT_LOG_DEBUG, "no CUDA headers under %s", candidates[index]);
	}
	*cause = kagent_strdup("no CUDA toolkit headers found (set CUDA_HOME to the toolkit root)");
out:
	return result;
}

char *
kagent_compile_nvrtc_version(void)
{
	int major = 0, minor = 0;

	if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
		return kagent_strdup("unknown");
	return kagent_asprintf("%d.%d", major, minor);
}

static double
compile__now_seconds(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void
compile__add_option(struct kagent_compile_result *result, char *option)
{
	result->options[result->option_count++] = option;
}

/* Fills result->kernels from the ptxas report, naming each as well as we honestly can. */
static int
compile__fill_kernels(struct kagent_compile_result *result, nvrtcProgram program,
		      const struct kagent_compile_request *request, char **cause)
{
	struct kagent_ptxas_report *report = NULL;
	size_t index, expression;
	int status;

	status = kagent_ptxas_report_parse(result->log, strlen(result->log), &report, cause);
	if (status < 0)
		goto out;
	result->kernels = kagent_calloc(report->kernel_count, sizeof *result->kernels);
	for (index = 0; index < report->kernel_count; index++) {
		const struct kagent_ptxas_kernel *source = &report->kernels[index];
		struct kagent_compile_kernel *kernel = &result->kernels[result->kernel_count++];
		int exact = 0;

		kernel->mangled_name = kagent_strdup(source->mangled_name);
		kernel->registers = source->registers;
		kernel->barriers = source->barriers;
		kernel->stack_frame_bytes = source->stack_frame_bytes;
		kernel->spill_store_bytes = source->spill_store_bytes;
		kernel->spill_load_bytes = source->spill_load_bytes;
		kernel->shared_bytes = source->shared_bytes;
		kernel->constant_bytes = source->constant_bytes;
		kernel->local_bytes = source->local_bytes;
		for (expression = 0; program != NULL && expression < request->name_expression_count;
		     expression++) {
			const char *lowered = NULL;

			if (nvrtcGetLoweredName(program, request->name_expressions[expression],
						&lowered) == NVRTC_SUCCESS &&
			    lowered != NULL && strcmp(lowered, source->mangled_name) == 0) {
				kernel->demangled_name =
				    kagent_strdup(request->name_expressions[expression]);
				kernel->demangle = KAGENT_COMPILE_DEMANGLE_NAME_EXPRESSION;
				break;
			}
		}
		if (kernel->demangled_name != NULL)
			continue;
		if (strncmp(source->mangled_name, "_Z", 2) != 0) {
			kernel->demangled_name = kagent_strdup(source->mangled_name);
			kernel->demangle = KAGENT_COMPILE_DEMANGLE_NONE;
			continue;
		}
		kernel->demangled_name = kagent_demangle_display(source->mangled_name, &exact);
		kernel->demangle =
		    exact ? KAGENT_COMPILE_DEMANGLE_DEMANGLER : KAGENT_COMPILE_DEMANGLE_BASE_NAME;
	}
out:
	kagent_ptxas_report_free(report);
	return status;
}

static int
compile__run_nvrtc(const struct kagent_compile_request *request,
		   struct kagent_compile_result *result, char **cause)
{
	nvrtcProgram program = NULL;
	nvrtcResult code;
	size_t index, log_size = 0;
	double started;
	int status = 0;

	code = nvrtcCreateProgram(&program, request->source, result->file_name, 0, NULL, NULL);
	if (code != NVRTC_SUCCESS) {
		program = NULL;
		status = -EIO;
		*cause = kagent_asprintf("nvrtcCreateProgram: %s", nvrtcGetErrorString(code));
		goto out;
	}
	for (index = 0; index < request->name_expression_count; index++) {
		code = nvrtcAddNameExpression(program, request->name_expressions[index]);
		if (code != NVRTC_SUCCESS) {
			status = -EINVAL;
			*cause = kagent_asprintf("name expression '%s': %s",
						 request->name_expressions[index],
						 nvrtcGetErrorString(code));
			goto out;
		}
	}
	started = compile__now_seconds();
	code = nvrtcCompileProgram(program, (int)result->option_count,
				   (const char *const *)result->options);
	result->compile_seconds = compile__now_seconds() - started;
	/* nvrtcGetProgramLog cannot be read in pieces: an overlong log is dropped whole. */
	if (nvrtcGetProgramLogSize(program, &log_size) != NVRTC_SUCCESS ||
	    log_size > KAGENT_COMPILE_MAX_LOG)
		log_size = 0;
	result->log = kagent_calloc(1, log_size + 1);
	if (log_size > 0)
		nvrtcGetProgramLog(program, result->log);
	if (code == NVRTC_ERROR_INVALID_OPTION) {
		status = -EINVAL;
		*cause = kagent_asprintf("NVRTC rejected the options: %s", result->log);
		goto out;
	}
	if (code != NVRTC_SUCCESS && code != NVRTC_ERROR_COMPILATION) {
		status = -EIO;
		*cause = kagent_asprintf("nvrtcCompileProgram: %s", nvrtcGetErrorString(code));
		goto out;
	}
	result->success = code == NVRTC_SUCCESS;
	if (result->success) {
		if (nvrtcGetCUBINSize(program, &result->cubin_size) != NVRTC_SUCCESS ||
		    result->cubin_size == 0) {
			status = -EIO;
			*cause = kagent_strdup("NVRTC produced no cubin");
			goto out;
		}
		result->cubin = kagent_malloc(result->cubin_size);
		code = nvrtcGetCUBIN(program, (char *)result->cubin);
		if (code != NVRTC_SUCCESS) {
			status = -EIO;
			*cause = kagent_asprintf("nvrtcGetCUBIN: %s", nvrtcGetErrorString(code));
			goto out;
		}
	}
	status = kagent_nvrtc_log_parse(result->log, strlen(result->log), &result->diagnostics,
					&result->diagnostic_count, cause);
	if (status < 0)
		goto out;
	status = compile__fill_kernels(result, program, request, cause);
out:
	if (program != NULL)
		nvrtcDestroyProgram(&program);
	return status;
}

int
kagent_compile_source(const struct kagent_compile_request *request,
		      struct kagent_compile_result **result_out, char **cause)
{
	struct kagent_compile_result *result = kagent_calloc(1, sizeof *result), *cached = NULL;
	struct kagent_compile_cache_inputs inputs;
	char *root = NULL, *directory = NULL, *cache_cause = NULL, *cccl = NULL;
	char key[65];
	struct stat info;
	double started = compile__now_seconds();
	size_t index;
	int status;

	*result_out = NULL;
	result->arch = kagent_strdup(request->arch ? request->arch : KAGENT_COMPILE_DEFAULT_ARCH);
	result->file_name = kagent_strdup(request->file_name ? request->file_name : "kernel.cu");
	status = kagent_compile_validate_arch(result->arch, cause);
	if (status < 0)
		goto out;
	if (request->source == NULL || strlen(request->source) > KAGENT_COMPILE_MAX_SOURCE) {
		status = -EINVAL;
		*cause = kagent_asprintf("source missing or larger than %u bytes",
					 KAGENT_COMPILE_MAX_SOURCE);
		goto out;
	}
	if (request->option_count > KAGENT_COMPILE_MAX_OPTIONS ||
	    request->name_expression_count > KAGENT_COMPILE_MAX_OPTIONS) {
		status = -EINVAL;
		*cause = kagent_asprintf("more than %d options or name expressions",
					 KAGENT_COMPILE_MAX_OPTIONS);
		goto out;
	}
	for (index = 0; index < request->option_count; index++) {
		status = kagent_compile_validate_option(request->options[index], cause);
		if (status < 0)
			goto out;
	}
	for (index = 0; index < request->name_expression_count; index++) {
		if (strlen(request->name_expressions[index]) > KAGENT_COMPILE_MAX_OPTION_LENGTH) {
			status = -EINVAL;
			*cause = kagent_strdup("overlong name expression");
			goto out;
		}
	}
	status = kagent_compile_toolkit_root(&root, cause);
	if (status < 0)
		goto out;

	/* The options NVRTC sees: arch, the user's (their -I first), then kagent's. */
	result->options = kagent_calloc(request->option_count + 5, sizeof *result->options);
	compile__add_option(result, kagent_asprintf("-arch=%s", result->arch));
	for (index = 0; index < request->option_count; index++)
		compile__add_option(result, kagent_strdup(request->options[index]));
	compile__add_option(result, kagent_strdup("-Xptxas=-v"));
	compile__add_option(result, kagent_strdup("-Xptxas=-warn-spills"));
	compile__add_option(result, kagent_asprintf("-I%s/include", root));
	cccl = kagent_asprintf("%s/include/cccl", root);
	if (stat(cccl, &info) == 0 && S_ISDIR(info.st_mode))
		compile__add_option(result, kagent_asprintf("-I%s", cccl));
	result->nvrtc_version = kagent_compile_nvrtc_version();

	/* The key covers exactly what the cubin and report depend on. */
	inputs.source = request->source;
	inputs.file_name = result->file_name;
	inputs.arch = result->arch;
	inputs.options = (const char *const *)result->options;
	inputs.option_count = result->option_count;
	inputs.name_expressions = request->name_expressions;
	inputs.name_expression_count = request->name_expression_count;
	inputs.nvrtc_version = result->nvrtc_version;
	kagent_compile_cache_key(&inputs, key);
	result->key = kagent_strdup(key);

	if (request->use_cache) {
		if (request->cache_directory != NULL)
			directory = kagent_strdup(request->cache_directory);
		else if (kagent_compile_cache_directory(&directory, &cache_cause) < 0) {
			kagent_log(KAGENT_LOG_WARNING, "cache disabled: %s", cache_cause);
			free(cache_cause);
			cache_cause = NULL;
		}
	}
	if (directory != NULL) {
		int loaded = kagent_compile_cache_load(directory, key, &cached, &cache_cause);

		if (loaded == 0) {
			cached->elapsed_seconds = compile__now_seconds() - started;
			*result_out = cached;
			cached = NULL;
			goto out;
		}
		if (loaded != -ENOENT)
			kagent_log(KAGENT_LOG_WARNING, "ignoring cache entry %s: %s", key,
				   cache_cause);
		free(cache_cause);
		cache_cause = NULL;
	}

	status = compile__run_nvrtc(request, result, cause);
	if (status < 0)
		goto out;
	if (directory != NULL && result->success &&
	    kagent_compile_cache_store(directory, result, &cache_cause) < 0)
		kagent_log(KAGENT_LOG_WARNING, "cannot cache %s: %s", key, cache_cause);
	result->elapsed_seconds = compile__now_seconds() - started;
	*result_out = result;
	result = NULL;
out:
	kagent_compile_result_free(result);
	kagent_compile_result_free(cached);
	free(root);
	free(directory);
	free(cache_cause);
	free(cccl);
	return status;
}
