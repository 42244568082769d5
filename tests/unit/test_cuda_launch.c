/*
 * Unit tests for sandbox/cuda_launch.c that need no GPU: parameter lists,
 * launch limits, compiling with NVRTC (which needs no driver), finding kernels
 * and the messages for a missing driver.
 */
#include "kagent/sandbox/cuda_launch.h"

#include "test.h"

#include <dlfcn.h>
#include <errno.h>

static const char *const kernels_source =
    "extern \"C\" __global__ void relu(const float *__restrict__ x, float *out, long n)\n"
    "{\n"
    "\tlong i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "\tif (i < n)\n"
    "\t\tout[i] = fmaxf(x[i], 0.0f);\n"
    "}\n"
    "__global__ void scale_cpp(float *x, unsigned int n, double factor)\n"
    "{\n"
    "\tunsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "\tif (i < n)\n"
    "\t\tx[i] = (float)(x[i] * factor);\n"
    "}\n"
    "template <typename T> __global__ void fill(T *x, T value, size_t n)\n"
    "{\n"
    "\tsize_t i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "\tif (i < n)\n"
    "\t\tx[i] = value;\n"
    "}\n";

static void
check_types(const char *list, const enum kagent_cuda_launch_type *expected, size_t count)
{
	enum kagent_cuda_launch_type types[KAGENT_CUDA_LAUNCH_MAX_PARAMETERS];
	char error[256] = "";
	size_t found = 99, index;

	CHECK_INT(kagent_cuda_launch_parse_parameters(
		      list, types, KAGENT_CUDA_LAUNCH_MAX_PARAMETERS, &found, error, sizeof error),
		  0);
	if (found != count)
		fprintf(stderr, "%s: %zu parameters\n", list, found);
	CHECK_INT(found, count);
	for (index = 0; index < count; index++) {
		if (types[index] != expected[index])
			fprintf(stderr, "%s: parameter %zu is %s, expected %s\n", list, index,
				kagent_cuda_launch_type_name(types[index]),
				kagent_cuda_launch_type_name(expected[index]));
		CHECK_INT(types[index], expected[index]);
	}
}

static void
test_parse_demangled(void)
{
	static const enum kagent_cuda_launch_type relu[] = {
	    KAGENT_CUDA_LAUNCH_POINTER, KAGENT_CUDA_LAUNCH_POINTER, KAGENT_CUDA_LAUNCH_INT64};
	static const enum kagent_cuda_launch_type scale[] = {KAGENT_CUDA_LAUNCH_POINTER,
							     KAGENT_CUDA_LAUNCH_INT32};
	static const enum kagent_cuda_launch_type wide[] = {
	    KAGENT_CUDA_LAUNCH_UINT64, KAGENT_CUDA_LAUNCH_UINT32, KAGENT_CUDA_LAUNCH_INT8,
	    KAGENT_CUDA_LAUNCH_UINT8,  KAGENT_CUDA_LAUNCH_INT16,  KAGENT_CUDA_LAUNCH_BOOL,
	    KAGENT_CUDA_LAUNCH_HALF,   KAGENT_CUDA_LAUNCH_DOUBLE, KAGENT_CUDA_LAUNCH_INT64};

	check_types("relu(float const*, float*, long)", relu, 3);
	check_types("void scale<float>(float*, int)", scale, 2);
	check_types("ns::k(unsigned long long, unsigned int, signed char, unsigned char, short, "
		    "bool, __half, double, long long)",
		    wide, 9);
	check_types("f()", NULL, 0);
	check_types("f(void)", NULL, 0);
	/* c++filt's "(anonymous namespace)" opens no parameter list. */
	check_types("(anonymous namespace)::scale(float*, int)", scale, 2);
	check_types("void (anonymous namespace)::scale<float>(float*, int)", scale, 2);
}

static void
test_parse_closures(void)
{
	static const enum kagent_cuda_launch_type applied[] = {KAGENT_CUDA_LAUNCH_POINTER,
							       KAGENT_CUDA_LAUNCH_UNKNOWN};

	/* A lambda's closure type names its call's parameters, not its own layout. */
	check_types("void apply<{lambda(float)#1}>(float*, {lambda(float)#1})", applied, 2);
	check_types("k(float*, (anonymous namespace)::{unnamed type#1})", applied, 2);
}

static void
test_parse_declarations(void)
{
	static const enum kagent_cuda_launch_type declared[] = {
	    KAGENT_CUDA_LAUNCH_POINTER, KAGENT_CUDA_LAUNCH_UINT32,   KAGENT_CUDA_LAUNCH_UINT64,
	    KAGENT_CUDA_LAUNCH_UINT64,	KAGENT_CUDA_LAUNCH_UNKNOWN,  KAGENT_CUDA_LAUNCH_POINTER,
	    KAGENT_CUDA_LAUNCH_FLOAT,	KAGENT_CUDA_LAUNCH_BFLOAT16, KAGENT_CUDA_LAUNCH_INT32};

	check_types("(const float *__restrict__ x, unsigned n, size_t m, std::size_t k, "
		    "Pair<int, float> pair, const Pair<int *, float> *pairs, const float alpha, "
		    "__nv_bfloat16 b, int32_t count)",
		    declared, 9);
	check_types("int32_t n", declared + 8, 1);
}

static void
test_parse_errors(void)
{
	enum kagent_cuda_launch_type types[2];
	char error[256] = "";
	size_t count = 0;

	CHECK_INT(kagent_cuda_launch_parse_parameters("f(int, float", types, 2, &count, error,
						      sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "unbalanced");
	CHECK_INT(kagent_cuda_launch_parse_parameters("f(int, int, int)", types, 2, &count, error,
						      sizeof error),
		  -E2BIG);
	CHECK_CONTAINS(error, "more than 2 parameters");
}

static void
test_launch_limits(void)
{
	struct kagent_cuda_launch_limits limits = {
	    .max_threads_per_block = 1024,
	    .max_block = {1024, 1024, 64},
	    .max_grid = {2147483647u, 65535, 65535},
	    .static_shared_bytes = 1024,
	    .max_shared_bytes_optin = 232448,
	};
	unsigned grid[3] = {4096, 1, 1}, block[3] = {256, 1, 1};
	char error[256] = "";

	CHECK_INT(kagent_cuda_launch_check(&limits, grid, block, 0, error, sizeof error), 0);
	CHECK_INT(kagent_cuda_launch_check(&limits, grid, block, 100 << 10, error, sizeof error),
		  0);
	CHECK_INT(kagent_cuda_launch_check(&limits, grid, block, 232448, error, sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "shared memory");
	block[0] = 1025;
	CHECK_INT(kagent_cuda_launch_check(&limits, grid, block, 0, error, sizeof error), -EINVAL);
	CHECK_CONTAINS(error, "block x dimension 1025");
	block[0] = 512;
	block[1] = 4;
	CHECK_INT(kagent_cuda_launch_check(&limits, grid, block, 0, error, sizeof error), -EINVAL);
	CHECK_CONTAINS(error, "2048 threads");
	block[1] = 1;
	grid[1] = 70000;
	CHECK_INT(kagent_cuda_launch_check(&limits, grid, block, 0, error, sizeof error), -EINVAL);
	CHECK_CONTAINS(error, "grid y dimension 70000");
	grid[1] = 0;
	CHECK_INT(kagent_cuda_launch_check(&limits, grid, block, 0, error, sizeof error), -EINVAL);
	CHECK_CONTAINS(error, "at least 1");
}

static struct kagent_cuda_module *
compile(const char *source, const char *const *kernels, size_t count, int expected, char *cause,
	size_t cause_size)
{
	struct kagent_cuda_module *module = NULL;
	char *cache = kagent_test_make_directory();
	int status;

	status = kagent_cuda_module_compile(source, "sm_90a", 0, kernels, count, NULL, 0, cache,
					    &module, cause, cause_size);
	if (status != expected)
		fprintf(stderr, "status %d: %s\n", status, cause);
	CHECK_INT(status, expected);
	CHECK((module != NULL) == (expected == 0));
	free(cache);
	return module;
}

static void
test_compile_and_describe(void)
{
	static const char *const names[] = {"relu", "scale_cpp", "fill<float>"};
	struct kagent_cuda_module *module;
	char error[1024] = "", description[4096];

	module = compile(kernels_source, names, 3, 0, error, sizeof error);
	CHECK(kagent_cuda_module_describe(module, description, sizeof description, error,
					  sizeof error) > 0);
	CHECK_CONTAINS(description, "\"name\":\"relu\",\"symbol\":\"relu\"");
	CHECK_CONTAINS(description, "\"parameters\":[\"pointer\",\"pointer\",\"int64\"]");
	CHECK_CONTAINS(description, "\"symbol\":\"_Z9scale_cppPfjd\"");
	CHECK_CONTAINS(description, "\"parameters\":[\"pointer\",\"uint32\",\"double\"]");
	CHECK_CONTAINS(description, "\"name\":\"fill<float>\"");
	CHECK_CONTAINS(description, "\"parameters\":[\"pointer\",\"float\",\"uint64\"]");
	CHECK_CONTAINS(description, "\"loaded\":false");
	CHECK_INT(kagent_cuda_module_describe(module, description, 8, error, sizeof error),
		  -ENOSPC);
	kagent_cuda_module_free(module);
}

static void
test_compile_error(void)
{
	static const char *const names[] = {"broken"};
	char error[2048] = "";

	compile("extern \"C\" __global__ void broken(float *x)\n{\n\tx[0] = undefined_name;\n}\n",
		names, 1, -ENOEXEC, error, sizeof error);
	CHECK_CONTAINS(error, "does not compile");
	CHECK_CONTAINS(error, "kernel.cu:3: error:");
	CHECK_CONTAINS(error, "undefined_name");
}

static void
test_missing_kernel(void)
{
	static const char *const names[] = {"relu", "gelu"};
	char error[1024] = "";

	compile(kernels_source, names, 2, -ENOENT, error, sizeof error);
	CHECK_CONTAINS(error, "kernel 'gelu' not found");
	CHECK_CONTAINS(error, "relu (extern \"C\")");
	CHECK_CONTAINS(error, "scale_cpp(float*, unsigned int, double)");
}

static void
test_bad_requests(void)
{
	static const char *const empty[] = {""};
	static const char *const names[] = {"relu"};
	struct kagent_cuda_module *module = NULL;
	char error[512] = "";

	compile(kernels_source, empty, 1, -EINVAL, error, sizeof error);
	CHECK_CONTAINS(error, "kernel name 0");
	CHECK_INT(kagent_cuda_module_compile(kernels_source, "sm_90a", 0, names, 0, NULL, 0, NULL,
					     &module, error, sizeof error),
		  -EINVAL);
	CHECK_INT(kagent_cuda_module_compile(kernels_source, "sm_1", 0, names, 1, NULL, 0, NULL,
					     &module, error, sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "invalid architecture");
	CHECK(module == NULL);
}

static void
test_no_driver(void)
{
	static const char *const names[] = {"relu"};
	struct kagent_cuda_module *module = NULL;
	unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
	char error[512] = "";

	setenv("KAGENT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	CHECK_INT(kagent_cuda_module_compile(kernels_source, NULL, 0, names, 1, NULL, 0, NULL,
					     &module, error, sizeof error),
		  -ENODEV);
	CHECK_CONTAINS(error, "no NVIDIA driver found (/nonexistent/libcuda.so.1");
	module = compile(kernels_source, names, 1, 0, error, sizeof error);
	CHECK_INT(kagent_cuda_module_launch(module, 0, grid, block, 0, NULL, NULL, 0, error,
					    sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "not loaded");
	CHECK_INT(kagent_cuda_module_load(module, 0, error, sizeof error), -ENODEV);
	CHECK_CONTAINS(error, "no NVIDIA driver found");
	kagent_cuda_module_free(module);
}

struct fake_launch {
	int count;
	unsigned grid[3], block[3], shared_bytes;
	void *stream;
	long long third_argument;
	int dynamic_shared_set;
};

/* Loads the stand-in driver (tests/fixtures/fake_libcuda) and returns its launch record. */
static struct fake_launch *
use_fake_driver(void)
{
	const char *path = getenv("KAGENT_FAKE_LIBCUDA");
	struct fake_launch *record;
	void *library;

	if (path == NULL || path[0] == '\0')
		kagent_test_skip("KAGENT_FAKE_LIBCUDA is not set");
	setenv("KAGENT_LIBCUDA", path, 1);
	library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CHECK(library != NULL);
	record = dlsym(library, "fake_cuda_last_launch");
	CHECK(record != NULL);
	return record;
}

static void
test_load_and_launch(void)
{
	static const char *const names[] = {"relu", "scale_cpp"};
	struct fake_launch *record = use_fake_driver();
	struct kagent_cuda_module *module = NULL;
	unsigned grid[3] = {8, 1, 1}, block[3] = {256, 1, 1};
	char error[1024] = "", description[4096];
	long long n = 123456789012LL;
	void *x = NULL, *out = NULL, *arguments[3] = {&x, &out, &n};
	int stream_token = 0;
	char *cache = kagent_test_make_directory();

	/* No arch: the driver's 9.0 becomes sm_90a. */
	CHECK_INT(kagent_cuda_module_compile(kernels_source, NULL, 0, names, 2, NULL, 0, cache,
					     &module, error, sizeof error),
		  0);
	CHECK_INT(kagent_cuda_module_launch(module, 0, grid, block, 0, NULL, arguments, 3, error,
					    sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "not loaded");
	CHECK_INT(kagent_cuda_module_load(module, 0, error, sizeof error), 0);
	CHECK(kagent_cuda_module_describe(module, description, sizeof description, error,
					  sizeof error) > 0);
	CHECK_CONTAINS(description, "\"arch\":\"sm_90a\"");
	CHECK_CONTAINS(description, "\"loaded\":true");
	CHECK_CONTAINS(description, "\"driver_parameter_count\":3");

	CHECK_INT(kagent_cuda_module_launch(module, 0, grid, block, 0, &stream_token, arguments, 3,
					    error, sizeof error),
		  0);
	CHECK_INT(record->count, 1);
	CHECK_INT(record->grid[0], 8);
	CHECK_INT(record->block[0], 256);
	CHECK_INT(record->third_argument, n);
	CHECK(record->stream == &stream_token);
	CHECK_INT(record->dynamic_shared_set, 0);

	CHECK_INT(kagent_cuda_module_launch(module, 0, grid, block, 0, NULL, arguments, 2, error,
					    sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "kernel relu takes 3 arguments, 2 given");
	CHECK_INT(kagent_cuda_module_launch(module, 2, grid, block, 0, NULL, arguments, 3, error,
					    sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "no kernel 2");
	/* The kernel's own limit (768) is below the device's (1024). */
	block[0] = 1024;
	CHECK_INT(kagent_cuda_module_launch(module, 1, grid, block, 0, NULL, arguments, 3, error,
					    sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "kernel scale_cpp: block (1024, 1, 1) has 1024 threads; at most 768");
	block[0] = 256;
	CHECK_INT(kagent_cuda_module_launch(module, 0, grid, block, 300000, NULL, arguments, 3,
					    error, sizeof error),
		  -EINVAL);
	CHECK_CONTAINS(error, "shared memory");
	CHECK_INT(record->count, 1);
	/* Above 48 KiB of dynamic shared memory the kernel is opted in first. */
	CHECK_INT(kagent_cuda_module_launch(module, 0, grid, block, 100000, NULL, arguments, 3,
					    error, sizeof error),
		  0);
	CHECK_INT(record->dynamic_shared_set, 100000);
	CHECK_INT(record->shared_bytes, 100000);
	CHECK_INT(record->count, 2);
	kagent_cuda_module_free(module);
	free(cache);

	module = compile(kernels_source, names, 1, 0, error, sizeof error);
	CHECK_INT(kagent_cuda_module_load(module, 3, error, sizeof error), -EIO);
	CHECK_CONTAINS(error, "cuDeviceGet failed with CUDA error 101 (invalid device ordinal)");
	kagent_cuda_module_free(module);
}

static const struct kagent_test tests[] = {
    {"parse_demangled", test_parse_demangled},
    {"parse_closures", test_parse_closures},
    {"parse_declarations", test_parse_declarations},
    {"parse_errors", test_parse_errors},
    {"launch_limits", test_launch_limits},
    {"compile_and_describe", test_compile_and_describe},
    {"compile_error", test_compile_error},
    {"missing_kernel", test_missing_kernel},
    {"bad_requests", test_bad_requests},
    {"no_driver", test_no_driver},
    {"load_and_launch", test_load_and_launch},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 120)
