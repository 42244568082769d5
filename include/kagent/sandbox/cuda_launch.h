/*
 * CUDA kernels without a build system, for candidates in the sandboxed child
 * (sandbox/runner/kagent_runner/cuda.py): CUDA C++ compiled with NVRTC for the
 * current device through the cubin cache (include/kagent/cuda/compile.h), loaded
 * with cuModuleLoadData and launched with cuLaunchKernel on the caller's
 * stream. Built as libkagent-cuda.so and called through ctypes. libcuda is
 * opened with dlopen at first use ($KAGENT_LIBCUDA, else libcuda.so.1), never
 * linked. Every function returns 0 or a negative errno and writes a message a
 * person can read into the caller's buffer.
 */
#ifndef KAGENT_CUDA_LAUNCH_H
#define KAGENT_CUDA_LAUNCH_H

#include <stddef.h>

#define KAGENT_CUDA_LAUNCH_MAX_PARAMETERS 64
#define KAGENT_CUDA_LAUNCH_MAX_KERNELS 64
#define KAGENT_CUDA_LAUNCH_DEFAULT_SHARED (48u << 10)

/* How a kernel parameter is passed; the names are kagent_cuda_launch_type_name's. */
enum kagent_cuda_launch_type {
	KAGENT_CUDA_LAUNCH_UNKNOWN = 0, /* a struct or anything not understood: "unknown" */
	KAGENT_CUDA_LAUNCH_POINTER,	/* any T* (8 bytes): "pointer" */
	KAGENT_CUDA_LAUNCH_BOOL,	/* "bool" (1 byte) */
	KAGENT_CUDA_LAUNCH_INT8,	/* char, signed char, int8_t: "int8" */
	KAGENT_CUDA_LAUNCH_UINT8,	/* unsigned char, uint8_t: "uint8" */
	KAGENT_CUDA_LAUNCH_INT16,	/* short, int16_t: "int16" */
	KAGENT_CUDA_LAUNCH_UINT16,	/* unsigned short, uint16_t: "uint16" */
	KAGENT_CUDA_LAUNCH_INT32,	/* int, int32_t: "int32" */
	KAGENT_CUDA_LAUNCH_UINT32,	/* unsigned, uint32_t: "uint32" */
	KAGENT_CUDA_LAUNCH_INT64,	/* long, long long, int64_t, ptrdiff_t: "int64" */
	KAGENT_CUDA_LAUNCH_UINT64,	/* unsigned long (long), size_t, uint64_t: "uint64" */
	KAGENT_CUDA_LAUNCH_FLOAT,	/* "float" */
	KAGENT_CUDA_LAUNCH_DOUBLE,	/* "double" */
	KAGENT_CUDA_LAUNCH_HALF,	/* __half, half: its 16 bits as an unsigned short: "half" */
	KAGENT_CUDA_LAUNCH_BFLOAT16,	/* __nv_bfloat16: its 16 bits: "bfloat16" */
};

/* The limits one launch is checked against, from the device and the kernel. */
struct kagent_cuda_launch_limits {
	unsigned max_threads_per_block; /* the smaller of the device's and the kernel's */
	unsigned max_block[3];
	unsigned max_grid[3];
	size_t static_shared_bytes;    /* the kernel's own __shared__ arrays */
	size_t max_shared_bytes_optin; /* static plus dynamic, per block, after opting in */
};

struct kagent_cuda_module;

const char *kagent_cuda_launch_type_name(enum kagent_cuda_launch_type type);
/*
 * Reads a parameter list, either a demangled signature's ("float const*, int")
 * or a declaration's ("const float *__restrict__ x, long n"), with or without
 * the parentheses. Fills types[0..*count_out). A parameter whose type is not
 * understood is KAGENT_CUDA_LAUNCH_UNKNOWN, never an error; -E2BIG past
 * capacity, -EINVAL for unbalanced text.
 */
int kagent_cuda_launch_parse_parameters(const char *list, enum kagent_cuda_launch_type *types,
					size_t capacity, size_t *count_out, char *cause,
					size_t cause_size);
/* Checks a launch's shape against limits before anything is launched; -EINVAL with why. */
int kagent_cuda_launch_check(const struct kagent_cuda_launch_limits *limits, const unsigned grid[3],
			     const unsigned block[3], size_t shared_bytes, char *cause,
			     size_t cause_size);

/*
 * Compiles source and finds each requested kernel: an extern "C" symbol, the
 * function name of a C++ kernel, or a name expression (any name with '<' or
 * "::", such as "scale<float>", handed to NVRTC to instantiate). arch NULL
 * asks the driver for device device_ordinal's compute capability (sm_XY,
 * sm_90a on 9.0). cache_directory NULL follows $KAGENT_CACHE_DIR's rules. A
 * source that does not compile is -ENOEXEC with its diagnostics; a kernel that
 * does not exist is -ENOENT listing those that do. Nothing touches the GPU
 * unless arch is NULL.
 */
int kagent_cuda_module_compile(const char *source, const char *arch, int device_ordinal,
			       const char *const *kernels, size_t kernel_count,
			       const char *const *options, size_t option_count,
			       const char *cache_directory, struct kagent_cuda_module **module_out,
			       char *cause, size_t cause_size);
/*
 * Loads the cubin into device device_ordinal's primary context (the one torch
 * uses) and resolves every kernel; -ENODEV without a driver or GPU.
 */
int kagent_cuda_module_load(struct kagent_cuda_module *module, int device_ordinal, char *cause,
			    size_t cause_size);
/*
 * JSON: {"arch", "cached", "compile_seconds", "loaded", "kernels": [{"name",
 * "symbol", "signature", "parameters": ["pointer", "int32", ...] or null
 * when unknown, "registers"}]}. Returns the length, or -ENOSPC.
 */
int kagent_cuda_module_describe(const struct kagent_cuda_module *module, char *buffer,
				size_t buffer_size, char *cause, size_t cause_size);
/*
 * Launches kernel kernel_index (the order of kernels given to compile) on
 * stream (a CUstream; NULL: the legacy default stream) with arguments[i]
 * pointing at parameter i's value. The argument count and the shape are
 * checked first; dynamic shared memory above 48 KiB is opted into.
 */
int kagent_cuda_module_launch(struct kagent_cuda_module *module, size_t kernel_index,
			      const unsigned grid[3], const unsigned block[3], size_t shared_bytes,
			      void *stream, void **arguments, size_t argument_count, char *cause,
			      size_t cause_size);
void kagent_cuda_module_free(struct kagent_cuda_module *module);

#endif
