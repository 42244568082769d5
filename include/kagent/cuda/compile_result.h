/*
 * What one CUDA compile produced (see include/kagent/cuda/compile.h): the cubin,
 * the log, parsed diagnostics and per-kernel resource use, and its JSON form,
 * which is both the `kagent compile --json` output and the cache's metadata.
 * Kept apart from compile.c so the cache and the tests need no NVRTC.
 */
#ifndef KAGENT_COMPILE_RESULT_H
#define KAGENT_COMPILE_RESULT_H

#include "kagent/cuda/nvrtc_log.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum kagent_compile_demangle {
	KAGENT_COMPILE_DEMANGLE_NONE = 0,	     /* extern "C": the name is the symbol */
	KAGENT_COMPILE_DEMANGLE_NAME_EXPRESSION = 1, /* the caller's name expression */
	KAGENT_COMPILE_DEMANGLE_DEMANGLER = 2, /* the demangler (libiberty), whole signature */
	KAGENT_COMPILE_DEMANGLE_BASE_NAME = 3, /* only the function name could be read */
};

struct kagent_compile_kernel {
	char *mangled_name;
	char *demangled_name;
	enum kagent_compile_demangle demangle;
	/* -1 where ptxas did not say (it omits some zero values). */
	int registers;
	int barriers;
	long long stack_frame_bytes;
	long long spill_store_bytes;
	long long spill_load_bytes;
	long long shared_bytes;
	long long constant_bytes;
	long long local_bytes;
};

struct kagent_compile_result {
	bool success;
	bool cached; /* served from the cubin cache; not stored in the cache itself */
	char *file_name;
	char *arch;
	char *nvrtc_version; /* "13.0" */
	char *key;	     /* the cache key (sha256 hex), NULL if not computed */
	char **options;	     /* the options NVRTC was given, including the ones kagent adds */
	size_t option_count;
	unsigned char *cubin;
	size_t cubin_size;
	char *log;
	struct kagent_nvrtc_diagnostic *diagnostics;
	size_t diagnostic_count;
	struct kagent_compile_kernel *kernels;
	size_t kernel_count;
	double compile_seconds; /* NVRTC's time when the result was made */
	double elapsed_seconds; /* this call's time, cache lookups included */
};

void kagent_compile_result_free(struct kagent_compile_result *result);
/* Diagnostics with file:line, a table of per-kernel resources and a closing line, for a person
 * or a model. */
void kagent_compile_result_render_text(const struct kagent_compile_result *result, FILE *stream);
const char *kagent_compile_result_demangle_name(enum kagent_compile_demangle demangle);
/* A new JSON object (schema in docs/compile.md); the cubin is described, not embedded. */
json_t *kagent_compile_result_to_json(const struct kagent_compile_result *result);
/*
 * The inverse, for cache entries: every field is type checked, and anything
 * missing or malformed is -EBADMSG with *cause filled. The cubin is left empty.
 */
int kagent_compile_result_from_json(const json_t *object, struct kagent_compile_result **result_out,
				    char **cause);

#endif
