/*
 * A content-addressed cache of compile results: <dir>/cubins/<key>.cubin and
 * <key>.json, where key is the sha256 of everything that decides the output
 * (source, file name, arch, sorted options and name expressions, NVRTC
 * version). Writes are atomic; an entry that fails any check reads as missing.
 */
#ifndef KAGENT_COMPILE_CACHE_H
#define KAGENT_COMPILE_CACHE_H

#include "kagent/cuda/compile_result.h"

#include <stddef.h>

#define KAGENT_COMPILE_CACHE_MAX_CUBIN (256u << 20)
#define KAGENT_COMPILE_CACHE_MAX_JSON (64u << 20)

struct kagent_compile_cache_inputs {
	const char *source;
	const char *file_name;
	const char *arch;
	const char *const *options;
	size_t option_count;
	const char *const *name_expressions;
	size_t name_expression_count;
	const char *nvrtc_version;
};

/* $KAGENT_CACHE_DIR, else $XDG_CACHE_HOME/kagent, else $HOME/.cache/kagent. */
int kagent_compile_cache_directory(char **directory_out, char **cause);
void kagent_compile_cache_key(const struct kagent_compile_cache_inputs *inputs, char hex[65]);
/*
 * Returns 0 with a result (cached = true), -ENOENT when there is no entry, or
 * -EBADMSG when the entry is corrupt or does not match key; fills *cause.
 */
int kagent_compile_cache_load(const char *directory, const char *key,
			      struct kagent_compile_result **result_out, char **cause);
/* Stores a successful result under result->key. */
int kagent_compile_cache_store(const char *directory, const struct kagent_compile_result *result,
			       char **cause);

#endif
