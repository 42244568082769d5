/* Unit tests for the cubin cache (tools/cuda/compile_cache.c), without NVRTC. */
#include "kagent/cuda/compile_cache.h"

#include "kagent/base/alloc.h"

#include "test.h"

#include <errno.h>
#include <unistd.h>

static struct kagent_compile_result *
sample(const char *key)
{
	struct kagent_compile_result *result = kagent_calloc(1, sizeof *result);

	result->success = true;
	result->file_name = kagent_strdup("k.cu");
	result->arch = kagent_strdup("sm_90a");
	result->nvrtc_version = kagent_strdup("13.0");
	result->key = kagent_strdup(key);
	result->log = kagent_strdup("");
	result->cubin = (unsigned char *)kagent_strdup("\x7f"
						       "ELF cubin");
	result->cubin_size = 9;
	return result;
}

static void
test_directory(void)
{
	char *directory = NULL, *cause = NULL;

	setenv("KAGENT_CACHE_DIR", "/tmp/kc", 1);
	CHECK_INT(kagent_compile_cache_directory(&directory, &cause), 0);
	CHECK_STRING(directory, "/tmp/kc");
	free(directory);
	unsetenv("KAGENT_CACHE_DIR");
	setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
	CHECK_INT(kagent_compile_cache_directory(&directory, &cause), 0);
	CHECK_STRING(directory, "/tmp/xdg/kagent");
	free(directory);
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "/home/u", 1);
	CHECK_INT(kagent_compile_cache_directory(&directory, &cause), 0);
	CHECK_STRING(directory, "/home/u/.cache/kagent");
	free(directory);
	unsetenv("HOME");
	CHECK_INT(kagent_compile_cache_directory(&directory, &cause), -ENOENT);
	free(cause);
}

static void
test_key(void)
{
	const char *options_a[] = {"-DA=1", "-DB=2"}, *options_b[] = {"-DB=2", "-DA=1"};
	struct kagent_compile_cache_inputs inputs = {"src", "k.cu", "sm_90a", options_a,
						     2,	    NULL,   0,	      "13.0"};
	char first[65], second[65];

	kagent_compile_cache_key(&inputs, first);
	CHECK_INT(strlen(first), 64);
	inputs.options = options_b;
	kagent_compile_cache_key(&inputs, second);
	CHECK_STRING(second, first); /* option order does not matter */
	inputs.arch = "sm_80";
	kagent_compile_cache_key(&inputs, second);
	CHECK(strcmp(second, first) != 0);
	inputs.arch = "sm_90a";
	inputs.nvrtc_version = "13.1";
	kagent_compile_cache_key(&inputs, second);
	CHECK(strcmp(second, first) != 0);
	inputs.nvrtc_version = "13.0";
	inputs.source = "src ";
	kagent_compile_cache_key(&inputs, second);
	CHECK(strcmp(second, first) != 0);
}

static void
test_store_load_and_corruption(void)
{
	const char *key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char *directory = kagent_test_make_directory(), *cause = NULL, *path;
	struct kagent_compile_result *result = sample(key), *loaded = NULL;
	FILE *file;

	CHECK_INT(kagent_compile_cache_load(directory, key, &loaded, &cause), -ENOENT);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_compile_cache_store(directory, result, &cause), 0);
	CHECK_INT(kagent_compile_cache_load(directory, key, &loaded, &cause), 0);
	CHECK(loaded->cached);
	CHECK_INT(loaded->cubin_size, 9);
	CHECK(memcmp(loaded->cubin, result->cubin, 9) == 0);
	kagent_compile_result_free(loaded);
	loaded = NULL;

	/* A flipped cubin byte is caught by the recorded sha256. */
	path = kagent_asprintf("%s/cubins/%s.cubin", directory, key);
	file = fopen(path, "r+");
	CHECK(file != NULL);
	fputc('X', file);
	fclose(file);
	CHECK_INT(kagent_compile_cache_load(directory, key, &loaded, &cause), -EBADMSG);
	CHECK_CONTAINS(cause, "sha256");
	free(cause);
	cause = NULL;
	free(path);

	/* A truncated JSON is corrupt, not fatal. */
	CHECK_INT(kagent_compile_cache_store(directory, result, &cause), 0);
	path = kagent_asprintf("%s/cubins/%s.json", directory, key);
	CHECK(truncate(path, 20) == 0);
	CHECK_INT(kagent_compile_cache_load(directory, key, &loaded, &cause), -EBADMSG);
	free(cause);
	cause = NULL;
	free(path);

	/* Not a key: refused before touching the file system. */
	CHECK_INT(kagent_compile_cache_load(directory, "../../etc/passwd", &loaded, &cause),
		  -EINVAL);
	free(cause);
	cause = NULL;
	result->success = false;
	CHECK_INT(kagent_compile_cache_store(directory, result, &cause), -EINVAL);
	free(cause);
	kagent_compile_result_free(result);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"directory", test_directory},
    {"key", test_key},
    {"store_load_and_corruption", test_store_load_and_corruption},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
