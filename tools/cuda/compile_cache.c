/*
 * The cubin cache (see include/kagent/cuda/compile_cache.h). The .cubin is written
 * before the .json, and the .json records the cubin's size and sha256, so the
 * .json is the commit marker: a crash between the two, a truncated file or a
 * stray edit all read as a miss and the source is compiled again.
 */
#include "kagent/cuda/compile_cache.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"
#include "kagent/base/sha256.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int
kagent_compile_cache_directory(char **directory_out, char **cause)
{
	const char *value;
	int result = 0;

	*directory_out = NULL;
	value = getenv("KAGENT_CACHE_DIR");
	if (value != NULL && value[0] != '\0') {
		*directory_out = kagent_strdup(value);
		goto out;
	}
	value = getenv("XDG_CACHE_HOME");
	if (value != NULL && value[0] == '/') {
		*directory_out = kagent_asprintf("%s/kagent", value);
		goto out;
	}
	value = getenv("HOME");
	if (value != NULL && value[0] != '\0') {
		*directory_out = kagent_asprintf("%s/.cache/kagent", value);
		goto out;
	}
	result = -ENOENT;
	*cause = kagent_strdup("no cache directory: set KAGENT_CACHE_DIR, XDG_CACHE_HOME or HOME");
out:
	return result;
}

/* Length-prefixed, so no two different inputs concatenate to the same bytes. */
static void
compile_cache__field(struct kagent_buffer *buffer, const char *name, const char *value)
{
	if (value == NULL)
		value = "";
	kagent_buffer_appendf(buffer, "%s:%zu:", name, strlen(value));
	kagent_buffer_append_string(buffer, value);
	kagent_buffer_append_string(buffer, "\n");
}

static int
compile_cache__compare_strings(const void *left, const void *right)
{
	return strcmp(*(const char *const *)left, *(const char *const *)right);
}

static void
compile_cache__sorted_fields(struct kagent_buffer *buffer, const char *name,
			     const char *const *items, size_t count)
{
	const char **sorted = kagent_calloc(count, sizeof *sorted);
	size_t index;

	if (count > 0)
		memcpy(sorted, items, count * sizeof *sorted);
	qsort(sorted, count, sizeof *sorted, compile_cache__compare_strings);
	for (index = 0; index < count; index++)
		compile_cache__field(buffer, name, sorted[index]);
	free(sorted);
}

void
kagent_compile_cache_key(const struct kagent_compile_cache_inputs *inputs, char hex[65])
{
	struct kagent_buffer buffer = {0};

	compile_cache__field(&buffer, "kagent-compile-cache", "1");
	compile_cache__field(&buffer, "nvrtc", inputs->nvrtc_version);
	compile_cache__field(&buffer, "arch", inputs->arch);
	compile_cache__field(&buffer, "file", inputs->file_name);
	/*
	 * Sorted so that the same set of flags hits the same entry; options
	 * whose order matters (-DX=1 -DX=2) are the caller's to avoid.
	 */
	compile_cache__sorted_fields(&buffer, "option", inputs->options, inputs->option_count);
	compile_cache__sorted_fields(&buffer, "name", inputs->name_expressions,
				     inputs->name_expression_count);
	compile_cache__field(&buffer, "source", inputs->source);
	kagent_sha256_hex(buffer.data, buffer.length, hex);
	kagent_buffer_free(&buffer);
}

static bool
compile_cache__key_is_valid(const char *key)
{
	size_t index;

	for (index = 0; index < 64; index++) {
		if (!((key[index] >= '0' && key[index] <= '9') ||
		      (key[index] >= 'a' && key[index] <= 'f')))
			return false;
	}
	return key[64] == '\0';
}

int
kagent_compile_cache_load(const char *directory, const char *key,
			  struct kagent_compile_result **result_out, char **cause)
{
	struct kagent_compile_result *result = NULL;
	char *json_path = NULL, *cubin_path = NULL, *text = NULL, *cubin = NULL, *inner = NULL;
	char hex[65];
	size_t text_size, cubin_size;
	json_t *object = NULL, *recorded;
	json_error_t error;
	int status = 0;

	*result_out = NULL;
	if (!compile_cache__key_is_valid(key)) {
		status = -EINVAL;
		*cause = kagent_strdup("cache key is not 64 hex digits");
		goto out;
	}
	json_path = kagent_asprintf("%s/cubins/%s.json", directory, key);
	cubin_path = kagent_asprintf("%s/cubins/%s.cubin", directory, key);
	status =
	    kagent_fileio_read(json_path, KAGENT_COMPILE_CACHE_MAX_JSON, &text, &text_size, cause);
	if (status < 0) {
		if (status != -ENOENT)
			status = -EBADMSG;
		goto out;
	}
	object = json_loadb(text, text_size, 0, &error);
	if (object == NULL) {
		status = -EBADMSG;
		*cause = kagent_asprintf("%s: %s", json_path, error.text);
		goto out;
	}
	status = kagent_compile_result_from_json(object, &result, &inner);
	if (status < 0) {
		status = -EBADMSG;
		*cause = kagent_asprintf("%s: %s", json_path, inner);
		goto out;
	}
	recorded = json_object_get(object, "cubin_sha256");
	if (result->key == NULL || strcmp(result->key, key) != 0 || !result->success ||
	    !json_is_string(recorded)) {
		status = -EBADMSG;
		*cause = kagent_asprintf("%s does not describe a successful compile for its key",
					 json_path);
		goto out;
	}
	status = kagent_fileio_read(cubin_path, KAGENT_COMPILE_CACHE_MAX_CUBIN, &cubin, &cubin_size,
				    cause);
	if (status < 0) {
		status = -EBADMSG;
		goto out;
	}
	kagent_sha256_hex(cubin, cubin_size, hex);
	if (cubin_size != result->cubin_size || strcmp(hex, json_string_value(recorded)) != 0) {
		status = -EBADMSG;
		*cause =
		    kagent_asprintf("%s does not match its recorded size and sha256", cubin_path);
		goto out;
	}
	result->cubin = (unsigned char *)cubin;
	cubin = NULL;
	result->cached = true;
	*result_out = result;
	result = NULL;
out:
	kagent_compile_result_free(result);
	json_decref(object);
	free(json_path);
	free(cubin_path);
	free(text);
	free(cubin);
	free(inner);
	return status;
}

int
kagent_compile_cache_store(const char *directory, const struct kagent_compile_result *result,
			   char **cause)
{
	char *folder = NULL, *json_path = NULL, *cubin_path = NULL, *text = NULL;
	char hex[65];
	json_t *object = NULL;
	int status = 0;

	if (result->key == NULL || !compile_cache__key_is_valid(result->key) || !result->success) {
		status = -EINVAL;
		*cause = kagent_strdup("only successful results with a key are cached");
		goto out;
	}
	folder = kagent_asprintf("%s/cubins", directory);
	status = kagent_fileio_make_directories(folder, 0700, cause);
	if (status < 0)
		goto out;
	json_path = kagent_asprintf("%s/%s.json", folder, result->key);
	cubin_path = kagent_asprintf("%s/%s.cubin", folder, result->key);
	status = kagent_fileio_write_atomic(cubin_path, result->cubin, result->cubin_size, cause);
	if (status < 0)
		goto out;
	object = kagent_compile_result_to_json(result);
	kagent_sha256_hex(result->cubin, result->cubin_size, hex);
	json_object_set_new(object, "cubin_sha256", json_string(hex));
	/* Per-call facts do not belong in the entry. */
	json_object_del(object, "cached");
	json_object_del(object, "elapsed_seconds");
	text = json_dumps(object, JSON_COMPACT);
	if (text == NULL) {
		status = -ENOMEM;
		*cause = kagent_strdup("cannot encode the cache entry");
		goto out;
	}
	status = kagent_fileio_write_atomic(json_path, text, strlen(text), cause);
out:
	json_decref(object);
	free(folder);
	free(json_path);
	free(cubin_path);
	free(text);
	return status;
}
