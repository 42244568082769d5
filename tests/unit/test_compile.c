/* Unit tests for the NVRTC compiler (tools/cuda/compile.c): NVRTC runs without a GPU, so CI runs
 * these.
 */
#include "kagent/cuda/compile.h"

#include "kagent/base/alloc.h"
#include "kagent/cuda/compile_cache.h"

#include "test.h"

#include <errno.h>

static const char *const small_kernel = "__global__ void kernel(float *x, int n)\n"
					"{\n"
					"\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
					"\tif (i < n)\n"
					"\t\tx[i] = x[i] * 2.0f + 1.0f;\n"
					"}\n";

static struct kagent_compile_result *
compile(const char *source, const char *const *options, size_t option_count, int expected_status,
	char **cause_out)
{
	struct kagent_compile_request request;
	struct kagent_compile_result *result = NULL;
	char *cause = NULL;
	int status;

	memset(&request, 0, sizeof request);
	request.source = source;
	request.file_name = "kernel.cu";
	request.options = options;
	request.option_count = option_count;
	status = kagent_compile_source(&request, &result, &cause);
	if (status != expected_status)
		fprintf(stderr, "status %d: %s\n", status, cause ? cause : "");
	CHECK_INT(status, expected_status);
	if (cause_out != NULL)
		*cause_out = cause;
	else
		free(cause);
	return result;
}

static void
test_small_kernel(void)
{
	struct kagent_compile_result *result = compile(small_kernel, NULL, 0, 0, NULL);

	CHECK(result->success);
	CHECK(!result->cached);
	CHECK(result->cubin_size > 4);
	CHECK(memcmp(result->cubin,
		     "\x7f"
		     "ELF",
		     4) == 0);
	CHECK_STRING(result->arch, "sm_90a");
	CHECK_INT(result->kernel_count, 1);
	CHECK_STRING(result->kernels[0].mangled_name, "_Z6kernelPfi");
	CHECK_STRING(result->kernels[0].demangled_name, "kernel(float*, int)");
	CHECK_INT(result->kernels[0].demangle, KAGENT_COMPILE_DEMANGLE_DEMANGLER);
	CHECK(result->kernels[0].registers > 0);
	CHECK_INT(result->kernels[0].spill_store_bytes, 0);
	CHECK_CONTAINS(result->log, "Compiling entry function");
	CHECK_CONTAINS(result->nvrtc_version, ".");
	CHECK(result->compile_seconds > 0);
	CHECK_INT(result->diagnostic_count, 0);
	kagent_compile_result_free(result);
}

static void
test_compile_error(void)
{
	struct kagent_compile_result *result = compile(
	    "__global__ void k(float *x)\n{\n\tx[0] = y;\n\tint unused;\n}\n", NULL, 0, 0, NULL);
	size_t index;
	int errors = 0, warnings = 0;

	CHECK(!result->success);
	CHECK(result->cubin == NULL);
	CHECK(result->diagnostic_count >= 1);
	CHECK_STRING(result->diagnostics[0].file, "kernel.cu");
	CHECK_INT(result->diagnostics[0].line, 3);
	CHECK_INT(result->diagnostics[0].severity, KAGENT_NVRTC_ERROR);
	CHECK_CONTAINS(result->diagnostics[0].message, "\"y\" is undefined");
	for (index = 0; index < result->diagnostic_count; index++) {
		errors += result->diagnostics[index].severity == KAGENT_NVRTC_ERROR;
		warnings += result->diagnostics[index].severity == KAGENT_NVRTC_WARNING &&
			    result->diagnostics[index].line == 4;
	}
	CHECK_INT(errors, 1);
	CHECK_INT(warnings, 1);
	kagent_compile_result_free(result);
}

static void
test_toolkit_headers(void)
{
	static const char source[] =
	    "#include <cuda_fp16.h>\n"
	    "#include <cuda_bf16.h>\n"
	    "#include <cuda/std/cstdint>\n"
	    "#include <cuda/std/limits>\n"
	    "#include <cub/block/block_reduce.cuh>\n"
	    "__global__ void mixed(const __half *a, const __nv_bfloat16 *b, float *out)\n"
	    "{\n"
	    "\tusing Reduce = cub::BlockReduce<float, 128>;\n"
	    "\t__shared__ typename Reduce::TempStorage storage;\n"
	    "\tcuda::std::int32_t i = threadIdx.x;\n"
	    "\tfloat v = __half2float(a[i]) + __bfloat162float(b[i]);\n"
	    "\tfloat sum = Reduce(storage).Sum(v);\n"
	    "\tif (i == 0)\n"
	    "\t\tout[0] = sum + cuda::std::numeric_limits<float>::epsilon();\n"
	    "}\n";
	struct kagent_compile_result *result = compile(source, NULL, 0, 0, NULL);

	if (!result->success)
		fprintf(stderr, "%s\n", result->log);
	CHECK(result->success);
	CHECK_INT(result->kernel_count, 1);
	CHECK_CONTAINS(result->kernels[0].demangled_name, "mixed(");
	CHECK(result->kernels[0].shared_bytes > 0);
	kagent_compile_result_free(result);
}

static void
test_spills(void)
{
	static const char source[] = "__global__ void spill(float *x, int n)\n"
				     "{\n"
				     "\tfloat local[64];\n"
				     "\tfor (int i = 0; i < 64; i++)\n"
				     "\t\tlocal[i] = x[i * n];\n"
				     "\tx[threadIdx.x] = local[n & 63];\n"
				     "}\n";
	const char *options[] = {"-maxrregcount=32"};
	struct kagent_compile_result *result = compile(source, options, 1, 0, NULL);
	size_t index;
	int spill_warning = 0;

	CHECK(result->success);
	CHECK_INT(result->kernel_count, 1);
	CHECK(result->kernels[0].registers <= 32);
	CHECK(result->kernels[0].spill_store_bytes > 0);
	CHECK(result->kernels[0].spill_load_bytes > 0);
	CHECK(result->kernels[0].stack_frame_bytes > 0);
	for (index = 0; index < result->diagnostic_count; index++)
		spill_warning += strcmp(result->diagnostics[index].file, "ptxas") == 0 &&
				 result->diagnostics[index].severity == KAGENT_NVRTC_WARNING;
	CHECK_INT(spill_warning, 1);
	kagent_compile_result_free(result);
}

static void
test_templates_and_name_expressions(void)
{
	static const char source[] = "template <typename T, int N> __global__ void scale(T *x)\n"
				     "{\n"
				     "\tx[threadIdx.x] *= T(N);\n"
				     "}\n"
				     "template __global__ void scale<double, 3>(double *);\n"
				     "extern \"C\" __global__ void plain(int *y) { y[0] = 1; }\n";
	const char *names[] = {"scale<float, 4>"};
	struct kagent_compile_request request;
	struct kagent_compile_result *result = NULL;
	char *cause = NULL;
	size_t index;
	int seen = 0;

	memset(&request, 0, sizeof request);
	request.source = source;
	request.name_expressions = names;
	request.name_expression_count = 1;
	request.arch = "sm_80";
	CHECK_INT(kagent_compile_source(&request, &result, &cause), 0);
	CHECK(result->success);
	CHECK_INT(result->kernel_count, 3);
	for (index = 0; index < result->kernel_count; index++) {
		const struct kagent_compile_kernel *kernel = &result->kernels[index];

		if (strcmp(kernel->mangled_name, "_Z5scaleIfLi4EEvPT_") == 0) {
			CHECK_STRING(kernel->demangled_name, "scale<float, 4>");
			CHECK_INT(kernel->demangle, KAGENT_COMPILE_DEMANGLE_NAME_EXPRESSION);
			seen++;
		} else if (strcmp(kernel->mangled_name, "_Z5scaleIdLi3EEvPT_") == 0) {
			CHECK_STRING(kernel->demangled_name, "void scale<double, 3>(double*)");
			CHECK_INT(kernel->demangle, KAGENT_COMPILE_DEMANGLE_DEMANGLER);
			seen++;
		} else {
			CHECK_STRING(kernel->mangled_name, "plain");
			CHECK_STRING(kernel->demangled_name, "plain");
			CHECK_INT(kernel->demangle, KAGENT_COMPILE_DEMANGLE_NONE);
			seen++;
		}
	}
	CHECK_INT(seen, 3);
	kagent_compile_result_free(result);
}

static void
test_cache(void)
{
	char *directory = kagent_test_make_directory(), *path;
	struct kagent_compile_request request;
	struct kagent_compile_result *first = NULL, *second = NULL, *third = NULL;
	char *cause = NULL;
	FILE *file;

	memset(&request, 0, sizeof request);
	request.source = small_kernel;
	request.use_cache = true;
	request.cache_directory = directory;
	CHECK_INT(kagent_compile_source(&request, &first, &cause), 0);
	CHECK(!first->cached);
	CHECK_INT(kagent_compile_source(&request, &second, &cause), 0);
	CHECK(second->cached);
	CHECK(second->elapsed_seconds < 0.1);
	CHECK_STRING(second->key, first->key);
	CHECK_INT(second->cubin_size, first->cubin_size);
	CHECK(memcmp(second->cubin, first->cubin, first->cubin_size) == 0);
	CHECK_INT(second->kernel_count, 1);
	CHECK_INT(second->kernels[0].registers, first->kernels[0].registers);
	CHECK_STRING(second->kernels[0].demangled_name, first->kernels[0].demangled_name);

	/* Corrupt the cached cubin: the next compile recompiles and repairs the entry. */
	path = kagent_asprintf("%s/cubins/%s.cubin", directory, first->key);
	file = fopen(path, "w");
	CHECK(file != NULL);
	fputs("garbage", file);
	fclose(file);
	CHECK_INT(kagent_compile_source(&request, &third, &cause), 0);
	CHECK(!third->cached);
	CHECK(third->success);
	CHECK(memcmp(third->cubin, first->cubin, first->cubin_size) == 0);
	kagent_compile_result_free(third);
	third = NULL;
	CHECK_INT(kagent_compile_source(&request, &third, &cause), 0);
	CHECK(third->cached);
	kagent_compile_result_free(first);
	kagent_compile_result_free(second);
	kagent_compile_result_free(third);
	free(path);
	free(directory);
}

static void
test_invalid_arch(void)
{
	static const char *const bad[] = {"sm_9",  "sm_91x", "compute_90", "sm_90b", "sm_1000",
					  "sm_91", ""};
	size_t index;

	for (index = 0; index < sizeof bad / sizeof bad[0]; index++) {
		struct kagent_compile_request request;
		struct kagent_compile_result *result = NULL;
		char *cause = NULL;

		memset(&request, 0, sizeof request);
		request.source = small_kernel;
		request.arch = bad[index];
		CHECK_INT(kagent_compile_source(&request, &result, &cause), -EINVAL);
		CHECK(result == NULL);
		CHECK_CONTAINS(cause, "architecture");
		free(cause);
	}
	{
		char *cause = NULL;

		CHECK_INT(kagent_compile_validate_arch("sm_86", &cause), 0);
		CHECK_INT(kagent_compile_validate_arch("sm_100a", &cause), 0);
		CHECK(cause == NULL);
	}
}

static void
test_invalid_options(void)
{
	static const char *const bad[] = {
	    "--bogus",	     "-arch=sm_80", "-D",     "-Xptxas=-v,-warn-spills",
	    "-time=out.csv", "plain",	    "-DX=1\n"};
	size_t index;

	for (index = 0; index < sizeof bad / sizeof bad[0]; index++) {
		char *cause = NULL;
		struct kagent_compile_result *result =
		    compile(small_kernel, &bad[index], 1, -EINVAL, &cause);

		CHECK(result == NULL);
		CHECK(cause != NULL && strlen(cause) > 10);
		free(cause);
	}
	{
		/* Accepted by us, refused by NVRTC: still a clear -EINVAL. */
		const char *option = "-std=c++99";
		char *cause = NULL;
		struct kagent_compile_result *result =
		    compile(small_kernel, &option, 1, -EINVAL, &cause);

		CHECK(result == NULL);
		CHECK_CONTAINS(cause, "NVRTC rejected");
		free(cause);
	}
	{
		const char *options[] = {"-DSCALE=3.0f", "--use_fast_math", "-std=c++17",
					 "-Xptxas=-O3", "-lineinfo"};
		struct kagent_compile_result *result =
		    compile("__global__ void k(float *x) { x[0] = __expf(x[0]) * SCALE; }\n",
			    options, 5, 0, NULL);

		CHECK(result->success);
		kagent_compile_result_free(result);
	}
}

static void
test_toolkit_root(void)
{
	char *root = NULL, *cause = NULL;

	setenv("CUDA_HOME", "/nonexistent", 1);
	CHECK_INT(kagent_compile_toolkit_root(&root, &cause), 0);
	CHECK(strcmp(root, "/nonexistent") != 0);
	free(root);
}

static const struct kagent_test tests[] = {
    {"small_kernel", test_small_kernel},
    {"compile_error", test_compile_error},
    {"toolkit_headers", test_toolkit_headers},
    {"spills", test_spills},
    {"templates_and_name_expressions", test_templates_and_name_expressions},
    {"cache", test_cache},
    {"invalid_arch", test_invalid_arch},
    {"invalid_options", test_invalid_options},
    {"toolkit_root", test_toolkit_root},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 120)
