/*
 * The baseline cache (see include/kagent/evaluator/baseline_cache.h). Several kagent
 * processes may share a cache: writes go to a temporary file renamed into
 * place, so a reader sees a whole old file or a whole new one, and a reader
 * that finds anything else ignores it.
 */
#include "kagent/evaluator/baseline_cache.h"
#include "kagent/base/alloc.h"
#include "kagent/base/log.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/base/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *
kagent_baseline_cache_key(const struct kagent_baseline_key *key)
{
	json_t *object;
	char *text;

	object = json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:O?, s:b, s:i, s:i}",
			   "problem", key->problem_sha256, "device", key->device, "gpu",
			   key->gpu_name, "driver", key->driver, "torch", key->torch, "triton",
			   key->triton, "cuda_runtime", key->cuda_runtime, "timing", key->timing,
			   "measure_compile", key->measure_compile, "device_queues",
			   key->device_queues, "harness", KAGENT_BASELINE_CACHE_HARNESS);
	text = json_dumps(object, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(object);
	if (text == NULL)
		abort(); /* only out of memory makes json_dumps fail on an object we built */
	return text;
}

char *
kagent_baseline_cache_path(const char *cache_dir, const char *key)
{
	char hex[KAGENT_SHA256_HEX_SIZE];

	kagent_sha256_hex(key, strlen(key), hex);
	return kagent_asprintf("%s/baselines/%s.json", cache_dir, hex);
}

int
kagent_baseline_cache_lookup(const char *cache_dir, const char *key, json_t **baselines_out)
{
	char *path = kagent_baseline_cache_path(cache_dir, key);
	json_error_t error;
	json_t *entry = NULL, *baselines;
	const char *stored_key;
	struct stat info;

	*baselines_out = NULL;
	if (stat(path, &info) != 0)
		goto out;
	/* The cap keeps a planted or runaway file from being read whole. */
	if (!S_ISREG(info.st_mode) || info.st_size > KAGENT_BASELINE_CACHE_FILE_CAP) {
		kagent_log(KAGENT_LOG_WARNING, "ignoring baseline cache file %s: not a small file",
			   path);
		goto out;
	}
	entry = json_load_file(path, JSON_REJECT_DUPLICATES, &error);
	if (entry == NULL) {
		kagent_log(KAGENT_LOG_WARNING, "ignoring corrupt baseline cache file %s: %s", path,
			   error.text);
		goto out;
	}
	stored_key = json_string_value(json_object_get(entry, "key"));
	baselines = json_object_get(entry, "baselines");
	if (stored_key == NULL || strcmp(stored_key, key) != 0 || !json_is_object(baselines)) {
		kagent_log(KAGENT_LOG_WARNING, "ignoring baseline cache file %s: not for this key",
			   path);
		goto out;
	}
	*baselines_out = json_incref(baselines);
out:
	json_decref(entry);
	free(path);
	return 0;
}

int
kagent_baseline_cache_compile_retry(const json_t *baselines, int compile_timeout_seconds)
{
	const json_t *abandoned_at = json_object_get(baselines, "compile_timeout_seconds");

	return json_is_number(abandoned_at) &&
	       json_number_value(abandoned_at) < (double)compile_timeout_seconds;
}

int
kagent_baseline_cache_store(const char *cache_dir, const char *key, const json_t *baselines,
			    char **cause)
{
	char *directory = kagent_asprintf("%s/baselines", cache_dir);
	char *path = kagent_baseline_cache_path(cache_dir, key);
	char *temporary = kagent_asprintf("%s.XXXXXX", path);
	json_t *entry = NULL, *copy;
	int fd = -1, error = 0;

	if (!json_is_object(baselines)) {
		error = -EINVAL;
		*cause = kagent_strdup("baselines to cache are not an object");
		goto out;
	}
	error = kagent_fileio_make_directories(directory, 0700, cause);
	if (error != 0)
		goto out;
	/* "measured" describes one result, not the cached data: the worker sets it on echo. */
	copy = json_deep_copy(baselines);
	json_object_del(copy, "measured");
	entry = json_pack("{s:s, s:o}", "key", key, "baselines", copy);
	fd = mkstemp(temporary);
	if (fd < 0) {
		error = -errno;
		*cause = kagent_asprintf("cannot create %s: %s", temporary, strerror(errno));
		goto out;
	}
	if (json_dumpfd(entry, fd, JSON_COMPACT | JSON_SORT_KEYS) != 0 || fsync(fd) != 0) {
		error = -EIO;
		*cause = kagent_asprintf("cannot write %s", temporary);
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		error = -errno;
		*cause = kagent_asprintf("cannot write %s: %s", temporary, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(temporary, path) != 0) {
		error = -errno;
		*cause =
		    kagent_asprintf("cannot rename %s to %s: %s", temporary, path, strerror(errno));
		goto out;
	}
out:
	if (fd >= 0)
		close(fd);
	if (error != 0)
		unlink(temporary);
	json_decref(entry);
	free(temporary);
	free(path);
	free(directory);
	return error;
}
