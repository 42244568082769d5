/* Unit tests for tools/evaluator/baseline_cache.c. */
#include "kagent/base/alloc.h"
#include "kagent/evaluator/baseline_cache.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "test.h"

#include <errno.h>
#include <unistd.h>

static struct kagent_baseline_key
sample_key(const json_t *timing)
{
	struct kagent_baseline_key key = {
	    .problem_sha256 = "abc",
	    .device = "cuda",
	    .gpu_name = "NVIDIA H200",
	    .driver = "13.0",
	    .torch = "2.11.0",
	    .triton = NULL,
	    .cuda_runtime = "13.0",
	    .timing = timing,
	    .measure_compile = 1,
	    .device_queues = 1,
	};
	return key;
}

static void
test_key(void)
{
	json_t *timing = json_pack("{s:i, s:i}", "warmup_calls", 3, "min_calls", 10);
	struct kagent_baseline_key key = sample_key(timing);
	char *a = kagent_baseline_cache_key(&key), *b, *path;

	CHECK_CONTAINS(a, "\"gpu\":\"NVIDIA H200\"");
	CHECK_CONTAINS(a, "\"triton\":null");
	/* Every key names the harness: baselines measured by an earlier one are never hit. */
	CHECK_CONTAINS(a, "\"harness\":4");
	CHECK(strcmp(a, "{\"cuda_runtime\":\"13.0\",\"device\":\"cuda\",\"driver\":\"13.0\","
			"\"gpu\":\"NVIDIA H200\",\"measure_compile\":true,\"problem\":\"abc\","
			"\"timing\":{\"min_calls\":10,\"warmup_calls\":3},\"torch\":\"2.11.0\","
			"\"triton\":null}") != 0);
	key.driver = "12.8";
	b = kagent_baseline_cache_key(&key);
	CHECK(strcmp(a, b) != 0);
	free(b);
	/* baselines timed with other hardware queues are never this evaluation's arms */
	key.driver = "13.0";
	b = kagent_baseline_cache_key(&key);
	CHECK(strcmp(a, b) == 0);
	free(b);
	key.device_queues = 8;
	b = kagent_baseline_cache_key(&key);
	CHECK(strcmp(a, b) != 0);
	CHECK_CONTAINS(b, "\"device_queues\":8");
	path = kagent_baseline_cache_path("/c", a);
	CHECK(strncmp(path, "/c/baselines/", 13) == 0);
	CHECK_INT(strlen(path), 13 + 64 + 5);
	free(path);
	free(a);
	free(b);
	json_decref(timing);
}

static void
test_roundtrip(void)
{
	char *directory = kagent_test_make_directory(), *cause = NULL;
	json_t *timing = json_pack("{s:i}", "warmup_calls", 3);
	struct kagent_baseline_key key = sample_key(timing);
	char *text = kagent_baseline_cache_key(&key);
	json_t *baselines =
	    json_pack("{s:{s:f}, s:n, s:b}", "eager", "median_ms", 3.07, "compile", "measured", 1);
	json_t *found = NULL;

	CHECK_INT(kagent_baseline_cache_lookup(directory, text, &found), 0);
	CHECK(found == NULL);
	CHECK_INT(kagent_baseline_cache_store(directory, text, baselines, &cause), 0);
	CHECK_INT(kagent_baseline_cache_lookup(directory, text, &found), 0);
	CHECK(found != NULL);
	CHECK(json_real_value(json_object_get(json_object_get(found, "eager"), "median_ms")) ==
	      3.07);
	CHECK(json_object_get(found, "measured") == NULL);
	json_decref(found);
	/* Another key is another file. */
	key.torch = "2.12.0";
	free(text);
	text = kagent_baseline_cache_key(&key);
	CHECK_INT(kagent_baseline_cache_lookup(directory, text, &found), 0);
	CHECK(found == NULL);
	CHECK_INT(kagent_baseline_cache_store(directory, text, json_null(), &cause), -EINVAL);
	free(cause);
	free(text);
	json_decref(baselines);
	json_decref(timing);
	kagent_paths_remove_tree(directory, NULL);
	free(directory);
}

static void
test_corrupt(void)
{
	char *directory = kagent_test_make_directory(), *cause = NULL;
	char *key = kagent_strdup("{\"problem\":\"x\"}");
	char *path = kagent_baseline_cache_path(directory, key);
	char *folder = kagent_asprintf("%s/baselines", directory);
	json_t *baselines = json_pack("{s:{s:f}}", "eager", "median_ms", 1.0), *found = NULL;
	FILE *file;

	CHECK_INT(kagent_fileio_make_directories(folder, 0700, &cause), 0);
	file = fopen(path, "w");
	fputs("{\"key\": \"{\\\"problem", file);
	fclose(file);
	CHECK_INT(kagent_baseline_cache_lookup(directory, key, &found), 0);
	CHECK(found == NULL);
	/* A whole file, but for another key (a collision or a copied file). */
	file = fopen(path, "w");
	fputs("{\"key\": \"other\", \"baselines\": {}}", file);
	fclose(file);
	CHECK_INT(kagent_baseline_cache_lookup(directory, key, &found), 0);
	CHECK(found == NULL);
	/* The store replaces it. */
	CHECK_INT(kagent_baseline_cache_store(directory, key, baselines, &cause), 0);
	CHECK_INT(kagent_baseline_cache_lookup(directory, key, &found), 0);
	CHECK(found != NULL);
	json_decref(found);
	json_decref(baselines);
	kagent_paths_remove_tree(directory, NULL);
	free(folder);
	free(path);
	free(key);
	free(directory);
}

/* An entry written under the old key (no harness: bare wall summaries) is not reused. */
static void
test_old_entries_missed(void)
{
	char *directory = kagent_test_make_directory(), *cause = NULL;
	json_t *timing = json_pack("{s:i}", "warmup_calls", 3);
	struct kagent_baseline_key key = sample_key(timing);
	char *text = kagent_baseline_cache_key(&key);
	json_t *parsed = json_loads(text, 0, NULL), *found = NULL;
	json_t *baselines = json_pack("{s:{s:f}}", "eager", "median_ms", 3.07);
	char *old_key;

	CHECK(parsed != NULL);
	json_object_del(parsed, "harness");
	old_key = json_dumps(parsed, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK(strcmp(old_key, text) != 0);
	CHECK_INT(kagent_baseline_cache_store(directory, old_key, baselines, &cause), 0);
	CHECK_INT(kagent_baseline_cache_lookup(directory, text, &found), 0);
	CHECK(found == NULL);
	CHECK_INT(kagent_baseline_cache_lookup(directory, old_key, &found), 0);
	CHECK(found != NULL);
	json_decref(found);
	json_decref(baselines);
	json_decref(parsed);
	json_decref(timing);
	free(old_key);
	free(text);
	kagent_paths_remove_tree(directory, NULL);
	free(directory);
}

static void
test_unwritable(void)
{
	char *directory = kagent_test_make_directory(), *cause = NULL;
	char *file = kagent_test_write_file(directory, "plain", "x");
	json_t *baselines = json_object();

	CHECK(kagent_baseline_cache_store(file, "k", baselines, &cause) < 0);
	CHECK_CONTAINS(cause, "cannot create");
	free(cause);
	json_decref(baselines);
	kagent_paths_remove_tree(directory, NULL);
	free(file);
	free(directory);
}

/* A compile abandoned at a cap is measured again only under a larger cap. */
static void
test_compile_retry(void)
{
	json_t *abandoned =
	    json_pack("{s:{s:f}, s:n, s:s, s:i}", "eager", "median_ms", 3.0, "compile",
		      "compile_error", "exceeded 60 s", "compile_timeout_seconds", 60);
	json_t *failed =
	    json_pack("{s:{s:f}, s:n, s:s, s:n}", "eager", "median_ms", 3.0, "compile",
		      "compile_error", "BackendCompilerFailed", "compile_timeout_seconds");
	json_t *measured =
	    json_pack("{s:{s:f}, s:{s:f}}", "eager", "median_ms", 3.0, "compile", "median_ms", 2.0);

	CHECK_INT(kagent_baseline_cache_compile_retry(abandoned, 60), 0);
	CHECK_INT(kagent_baseline_cache_compile_retry(abandoned, 30), 0);
	CHECK_INT(kagent_baseline_cache_compile_retry(abandoned, 120), 1);
	CHECK_INT(kagent_baseline_cache_compile_retry(failed, 240), 0);
	CHECK_INT(kagent_baseline_cache_compile_retry(measured, 240), 0);
	CHECK_INT(kagent_baseline_cache_compile_retry(NULL, 240), 0);
	json_decref(abandoned);
	json_decref(failed);
	json_decref(measured);
}

static const struct kagent_test tests[] = {
    {"key", test_key},
    {"roundtrip", test_roundtrip},
    {"corrupt", test_corrupt},
    {"old_entries_missed", test_old_entries_missed},
    {"unwritable", test_unwritable},
    {"compile_retry", test_compile_retry},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
