/*
 * Compiles CUDA C++ to a cubin with NVRTC (no GPU or driver needed) and
 * reports diagnostics and per-kernel resource use from the ptxas -v report,
 * with a content-addressed cache of results (include/kagent/cuda/compile_cache.h).
 */
#ifndef KAGENT_COMPILE_H
#define KAGENT_COMPILE_H

#include "kagent/cuda/compile_result.h"

#include <stdbool.h>
#include <stddef.h>

#define KAGENT_COMPILE_DEFAULT_ARCH "sm_90a"
#define KAGENT_COMPILE_MAX_OPTIONS 128
#define KAGENT_COMPILE_MAX_OPTION_LENGTH 4096
#define KAGENT_COMPILE_MAX_SOURCE (16u << 20)
#define KAGENT_COMPILE_MAX_LOG (16u << 20)

struct kagent_compile_request {
	const char *source;    /* NUL-terminated CUDA C++ */
	const char *file_name; /* shown in diagnostics; NULL: "kernel.cu" */
	const char *arch;      /* "sm_90a", "sm_80", ...; NULL: KAGENT_COMPILE_DEFAULT_ARCH */
	/* User options, each one NVRTC option ("-DN=4", "--use_fast_math", "-std=c++17"). */
	const char *const *options;
	size_t option_count;
	/*
	 * C++ expressions naming template kernels (`scale<float>`): NVRTC
	 * instantiates them and reports their mangled names, which then carry
	 * the expression as their demangled name.
	 */
	const char *const *name_expressions;
	size_t name_expression_count;
	bool use_cache;
	const char *cache_directory; /* NULL: kagent_compile_cache_directory() */
};

/*
 * Compiles request->source. Returns 0 with *result_out filled whether or not
 * the source compiled (check result->success and its diagnostics); -EINVAL
 * for a malformed request (arch, options, NUL in source) and other negative
 * errnos for failures of NVRTC itself, with *cause filled. A cache that cannot
 * be read or written only costs time: it is logged, never an error.
 */
int kagent_compile_source(const struct kagent_compile_request *request,
			  struct kagent_compile_result **result_out, char **cause);
/* "sm_" followed by 2-3 digits and an optional 'a' or 'f', and known to this NVRTC. */
int kagent_compile_validate_arch(const char *arch, char **cause);
/* One NVRTC option from the allowed set (defines, include paths, language and codegen flags). */
int kagent_compile_validate_option(const char *option, char **cause);
/* The CUDA toolkit root: $CUDA_HOME, $CUDA_PATH, then the build's default, checked for headers. */
int kagent_compile_toolkit_root(char **root_out, char **cause);
/* "13.0". */
char *kagent_compile_nvrtc_version(void);

#endif
