/* Unit tests for tools/evaluator/evaluation.c: backend detection, early errors, the request it
 * sends, and the check of a problem. */
#include "kagent/base/alloc.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/base/paths.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <unistd.h>

static void
test_detect_backend(void)
{
	CHECK_STRING(kagent_evaluation_detect_backend("import triton\n"), "triton");
	CHECK_STRING(kagent_evaluation_detect_backend("@triton.jit\ndef k(): pass"), "triton");
	CHECK_STRING(kagent_evaluation_detect_backend("from torch.utils.cpp_extension import "
						      "load_inline"),
		     "cuda");
	CHECK_STRING(kagent_evaluation_detect_backend("from kagent_runner import cuda\n"), "cuda");
	CHECK_STRING(kagent_evaluation_detect_backend("import kagent_runner.cuda as kc\n"), "cuda");
	CHECK_STRING(kagent_evaluation_detect_backend("from kagent_runner.cuda import compile\n"),
		     "cuda");
	CHECK_STRING(kagent_evaluation_detect_backend("import torch\n"), "unknown");
	CHECK_STRING(kagent_evaluation_detect_backend(NULL), "unknown");
}

/* A private environment: a fresh TMPDIR, cache, fake runner and no driver. */
static char *
setup(void)
{
	char *directory = kagent_test_make_directory(), *value;

	value = kagent_asprintf("%s/tests/fixtures/fake_runner", getenv("KAGENT_SOURCE_DIR"));
	setenv("KAGENT_RUNNER_DIR", value, 1);
	free(value);
	value = kagent_asprintf("%s/cache", directory);
	setenv("KAGENT_CACHE_DIR", value, 1);
	free(value);
	value = kagent_asprintf("%s/sandbox-cache", directory);
	setenv("KAGENT_SANDBOX_CACHE_DIR", value, 1);
	free(value);
	value = kagent_asprintf("%s/none.sock", directory);
	setenv("KAGENT_WORKER_SOCKET", value, 1);
	free(value);
	setenv("KAGENT_PYTHON", "python3", 1);
	setenv("KAGENT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	setenv("TMPDIR", directory, 1);
	unsetenv("FAKE_WORKER_RESULT");
	setenv("FAKE_WORKER_MODE", "normal", 1);
	free(kagent_test_write_file(directory, "p.py", "class Model: pass\n"));
	free(kagent_test_write_file(directory, "c.py", "import triton\nclass ModelNew: pass\n"));
	return directory;
}

static void
test_missing_file(void)
{
	char *directory = setup(), *problem = kagent_asprintf("%s/p.py", directory);
	struct kagent_evaluation_options options = {.problem_path = "/nonexistent/p.py",
						    .candidate_path = problem};
	json_t *object = NULL;

	CHECK_INT(kagent_evaluation_run_sync(&options, &object), -ENOENT);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "io");
	CHECK_CONTAINS(json_string_value(json_object_get(object, "message")),
		       "cannot read the problem /nonexistent/p.py");
	json_decref(object);
	kagent_paths_remove_tree(directory, NULL);
	free(problem);
	free(directory);
}

static void
test_no_gpu(void)
{
	char *directory = setup(), *problem = kagent_asprintf("%s/p.py", directory);
	char *candidate = kagent_asprintf("%s/c.py", directory);
	struct kagent_evaluation_options options = {.problem_path = problem,
						    .candidate_path = candidate};
	json_t *object = NULL;

	/* FAKE_WORKER_MODE=exit would fail differently: no Python may start before the probe. */
	setenv("FAKE_WORKER_MODE", "exit", 1);
	CHECK_INT(kagent_evaluation_run_sync(&options, &object), -ENODEV);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "no_gpu");
	CHECK_CONTAINS(json_string_value(json_object_get(object, "message")), "no usable GPU");
	json_decref(object);
	options.device = "tpu";
	CHECK_INT(kagent_evaluation_run_sync(&options, &object), -EINVAL);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "usage");
	json_decref(object);
	kagent_paths_remove_tree(directory, NULL);
	free(problem);
	free(candidate);
	free(directory);
}

/* Counts entries of a folder whose name starts with prefix. */
static int
count_entries(const char *directory, const char *prefix)
{
	DIR *folder = opendir(directory);
	struct dirent *entry;
	int count = 0;

	CHECK(folder != NULL);
	while ((entry = readdir(folder)) != NULL) {
		if (strncmp(entry->d_name, prefix, strlen(prefix)) == 0)
			count++;
	}
	closedir(folder);
	return count;
}

/* Fails on the first key that docs/worker-protocol.md lists and the object lacks (null counts). */
static void
check_keys(const json_t *object, const char *const *keys)
{
	for (; *keys != NULL; keys++) {
		if (json_object_get(object, *keys) == NULL)
			fprintf(stderr, "the request lacks \"%s\"\n", *keys);
		CHECK(json_object_get(object, *keys) != NULL);
	}
}

/* Every key of the evaluate request that the runner (worker.py, judge.py, candidate.py) reads. */
static void
check_protocol_keys(const json_t *request)
{
	static const char *const request_keys[] = {"type",
						   "id",
						   "problem_path",
						   "candidate_path",
						   "device",
						   "gpu_index",
						   "seeds",
						   "signed_seeds",
						   "tolerances",
						   "timing",
						   "baselines",
						   "measure_compile",
						   "limits",
						   "scratch_directory",
						   "cache_directory",
						   "sandbox_library",
						   "trace_library",
						   "cuda_library",
						   "judge_directory",
						   "judge_cache_directory",
						   "profile_reference",
						   "generalisation",
						   "sandbox_uid",
						   "timing_lock",
						   NULL};
	static const char *const limit_keys[] = {
	    "wall_seconds", "first_call_seconds", "call_seconds", "device_queues",
	    "cpu_seconds",  "max_processes",	  "output_bytes", NULL};
	static const char *const timing_keys[] = {"warmup_calls",
						  "min_calls",
						  "max_calls",
						  "target_seconds",
						  "verify_calls",
						  "target_relative_ci",
						  "fine_relative_ci",
						  "tighten_seconds",
						  "max_seconds",
						  "call_cap",
						  NULL};

	check_keys(request, request_keys);
	check_keys(json_object_get(request, "limits"), limit_keys);
	check_keys(json_object_get(request, "timing"), timing_keys);
	CHECK_INT(json_object_size(request), sizeof request_keys / sizeof request_keys[0] - 1);
}

/* The request the echo fake wrote to its log (FAKE_WORKER_LOG): the first JSON value. */
static json_t *
logged_request(const char *log)
{
	FILE *file = fopen(log, "r");
	json_error_t error;
	json_t *request;

	CHECK(file != NULL);
	request = json_loadf(file, JSON_DISABLE_EOF_CHECK, &error);
	fclose(file);
	CHECK(request != NULL);
	return request;
}

static int
ends_with(const char *text, const char *suffix)
{
	size_t length = strlen(text), suffix_length = strlen(suffix);

	return length >= suffix_length && strcmp(text + length - suffix_length, suffix) == 0;
}

static void
test_request_and_worker_errors(void)
{
	char *directory = setup(), *problem = kagent_asprintf("%s/p.py", directory);
	char *candidate = kagent_asprintf("%s/c.py", directory);
	char *log = kagent_asprintf("%s/requests.jsonl", directory);
	struct kagent_evaluation_options options = {.problem_path = problem,
						    .candidate_path = candidate,
						    .device = "cpu",
						    .seed = 500,
						    .measure_compile = 1,
						    .generalisation = 1};
	json_t *object = NULL, *request;

	/* The echo fake answers with something that is not a result: a worker error. */
	setenv("FAKE_WORKER_LOG", log, 1);
	CHECK_INT(kagent_evaluation_run_sync(&options, &object), -EPROTO);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "worker");
	json_decref(object);
	request = logged_request(log);
	check_protocol_keys(request);
	CHECK_STRING(json_string_value(json_object_get(request, "type")), "evaluate");
	CHECK_STRING(json_string_value(json_object_get(request, "device")), "cpu");
	/* The worker reads copies in a job folder that the sandbox uid can reach. */
	CHECK_CONTAINS(json_string_value(json_object_get(request, "problem_path")), "/kagent-job-");
	CHECK_CONTAINS(json_string_value(json_object_get(request, "problem_path")), "/problem.py");
	CHECK_CONTAINS(json_string_value(json_object_get(request, "candidate_path")),
		       "/candidate.py");
	CHECK_CONTAINS(json_string_value(json_object_get(request, "judge_directory")), "/judge");
	CHECK_INT(json_integer_value(json_object_get(request, "sandbox_uid")), 2147400000);
	CHECK_INT(json_integer_value(json_array_get(json_object_get(request, "seeds"), 2)), 502);
	CHECK_INT(json_array_size(json_object_get(request, "signed_seeds")), 2);
	CHECK(json_is_null(json_object_get(request, "baselines")));
	CHECK(json_is_true(json_object_get(request, "generalisation")));
	CHECK(json_is_object(json_object_get(json_object_get(request, "tolerances"), "float32")));
	CHECK_INT(
	    json_integer_value(json_object_get(json_object_get(request, "limits"), "output_bytes")),
	    65536);
	/* One hardware queue per child's context unless the options say otherwise. */
	CHECK_INT(json_integer_value(
		      json_object_get(json_object_get(request, "limits"), "device_queues")),
		  KAGENT_EVALUATION_DEVICE_QUEUES);
	CHECK_INT(
	    json_integer_value(json_object_get(json_object_get(request, "timing"), "max_calls")),
	    100);
	CHECK_CONTAINS(json_string_value(json_object_get(request, "cache_directory")),
		       "/sandbox-cache/candidates/");
	CHECK_CONTAINS(json_string_value(json_object_get(request, "scratch_directory")),
		       "/scratch");
	/* One timing lock per device, whatever the lane (docs/worker-protocol.md). */
	CHECK_CONTAINS(json_string_value(json_object_get(request, "timing_lock")),
		       "/sandbox-cache/timing-cpu.lock");
	json_decref(request);
	/* The job folder is gone afterwards. */
	CHECK_INT(count_entries(directory, "kagent-job-"), 0);

	/* Another lane or GPU: a uid and caches of its own (the worker gives each folder to its
	 * uid), the same timing lock. */
	static const struct {
		int lane, gpu;
		const char *candidates, *judge;
	} uids[] = {
	    {3, 0, "/sandbox-cache/candidates-lane3/", "/sandbox-cache/judge-lane3"},
	    {0, 1, "/sandbox-cache/candidates-gpu1/", "/sandbox-cache/judge-gpu1"},
	    {3, 1, "/sandbox-cache/candidates-lane3-gpu1/", "/sandbox-cache/judge-lane3-gpu1"},
	};
	for (size_t index = 0; index < sizeof uids / sizeof uids[0]; index++) {
		unlink(log);
		options.sandbox_lane = uids[index].lane;
		options.gpu_index = uids[index].gpu;
		CHECK_INT(kagent_evaluation_run_sync(&options, &object), -EPROTO);
		json_decref(object);
		request = logged_request(log);
		CHECK_INT(json_integer_value(json_object_get(request, "sandbox_uid")),
			  2147400000 + uids[index].lane * 256 + uids[index].gpu);
		CHECK_CONTAINS(json_string_value(json_object_get(request, "cache_directory")),
			       uids[index].candidates);
		/* the folder's whole name: judge-lane3 must not be judge-lane3-gpu1 */
		CHECK_CONTAINS(json_string_value(json_object_get(request, "judge_cache_directory")),
			       uids[index].judge);
		CHECK(
		    ends_with(json_string_value(json_object_get(request, "judge_cache_directory")),
			      uids[index].judge));
		CHECK_CONTAINS(json_string_value(json_object_get(request, "timing_lock")),
			       "/sandbox-cache/timing-cpu.lock");
		json_decref(request);
	}
	options.sandbox_lane = 0;
	options.gpu_index = 0;

	/* A worker that dies mid-request: its stderr explains. */
	setenv("FAKE_WORKER_MODE", "exit", 1);
	CHECK_INT(kagent_evaluation_run_sync(&options, &object), -EPIPE);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "worker");
	CHECK_CONTAINS(json_string_value(json_object_get(object, "message")),
		       "No module named 'torch'");
	json_decref(object);
	CHECK_INT(count_entries(directory, "kagent-job-"), 0);
	unsetenv("FAKE_WORKER_LOG");
	kagent_paths_remove_tree(directory, NULL);
	free(log);
	free(problem);
	free(candidate);
	free(directory);
}

static void
test_problem_error(void)
{
	char *directory = setup(), *problem = kagent_asprintf("%s/p.py", directory);
	char *candidate = kagent_asprintf("%s/c.py", directory);
	char *result = kagent_test_write_file(
	    directory, "r.json",
	    "{\"type\": \"result\", \"judge\": {\"problem_error\": \"p.py defines no class "
	    "Model\"}}");
	struct kagent_evaluation_options options = {
	    .problem_path = problem, .candidate_path = candidate, .device = "cpu"};
	json_t *object = NULL;

	setenv("FAKE_WORKER_RESULT", result, 1);
	CHECK_INT(kagent_evaluation_run_sync(&options, &object), -EINVAL);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "problem");
	CHECK_CONTAINS(json_string_value(json_object_get(object, "message")), "no class Model");
	json_decref(object);
	kagent_paths_remove_tree(directory, NULL);
	free(result);
	free(problem);
	free(candidate);
	free(directory);
}

struct check_outcome {
	int status;
	json_t *object;
};

static void
check_done(int status, const json_t *object, void *data)
{
	struct check_outcome *outcome = data;

	outcome->status = status;
	outcome->object = json_incref((json_t *)object);
}

/* kagent_evaluation_check_problem on a loop of its own; the caller releases the object. */
static int
check_problem(const struct kagent_evaluation_options *options, json_t **object)
{
	struct check_outcome outcome = {-EINTR, NULL};
	uv_loop_t loop;

	CHECK_INT(uv_loop_init(&loop), 0);
	kagent_evaluation_check_problem(&loop, options, check_done, &outcome);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK_INT(uv_loop_close(&loop), 0);
	CHECK(outcome.object != NULL);
	*object = outcome.object;
	return outcome.status;
}

/* Runs the check against a fake worker answering with this JSON text. */
static int
check_with_answer(const char *directory, const struct kagent_evaluation_options *options,
		  const char *answer, json_t **object)
{
	char *path = kagent_test_write_file(directory, "answer.json", answer);
	int status;

	setenv("FAKE_WORKER_RESULT", path, 1);
	status = check_problem(options, object);
	unsetenv("FAKE_WORKER_RESULT");
	free(path);
	return status;
}

static void
test_check_problem(void)
{
	char *directory = setup(), *problem = kagent_asprintf("%s/p.py", directory);
	char *log = kagent_asprintf("%s/requests.jsonl", directory);
	struct kagent_evaluation_options options = {
	    .problem_path = problem, .device = "cpu", .seed = 700, .device_queues = 4};
	json_t *object = NULL, *request;

	/* No candidate is needed; the echo fake's "result" is no answer to a check. */
	setenv("FAKE_WORKER_LOG", log, 1);
	CHECK_INT(check_problem(&options, &object), -EPROTO);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "worker");
	CHECK_CONTAINS(json_string_value(json_object_get(object, "message")),
		       "answered the problem check with a message of type result");
	json_decref(object);
	unsetenv("FAKE_WORKER_LOG");
	request = logged_request(log);
	CHECK_STRING(json_string_value(json_object_get(request, "type")), "check_problem");
	CHECK_CONTAINS(json_string_value(json_object_get(request, "id")), "check-");
	CHECK_CONTAINS(json_string_value(json_object_get(request, "problem_path")), "/kagent-job-");
	CHECK(json_object_get(request, "candidate_path") == NULL);
	CHECK_INT(json_array_size(json_object_get(request, "seeds")), 1);
	CHECK_INT(json_integer_value(json_array_get(json_object_get(request, "seeds"), 0)), 700);
	CHECK_INT(
	    json_integer_value(json_object_get(json_object_get(request, "limits"), "wall_seconds")),
	    300);
	CHECK_INT(json_integer_value(
		      json_object_get(json_object_get(request, "limits"), "device_queues")),
		  4);
	CHECK_CONTAINS(json_string_value(json_object_get(request, "judge_directory")), "/judge");
	CHECK_INT(json_integer_value(json_object_get(request, "sandbox_uid")), 2147400000);
	json_decref(request);
	CHECK_INT(count_entries(directory, "kagent-job-"), 0);

	/* A problem that cannot be used: kind "problem", worded as a verdict's, first line only. */
	CHECK_INT(check_with_answer(directory, &options,
				    "{\"type\": \"problem_check\", \"problem_error\": "
				    "\"get_inputs() failed: ValueError: no\\nsecond line\"}",
				    &object),
		  -EINVAL);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "problem");
	CHECK_STRING(json_string_value(json_object_get(object, "message")),
		     "the problem cannot be used: get_inputs() failed: ValueError: no");
	json_decref(object);

	/* The check itself failed: the worker's fault, not the problem's. */
	CHECK_INT(check_with_answer(directory, &options,
				    "{\"type\": \"problem_check\", \"problem_error\": null, "
				    "\"internal_error\": \"OSError: no room\"}",
				    &object),
		  -EPROTO);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "worker");
	CHECK_CONTAINS(json_string_value(json_object_get(object, "message")),
		       "the problem check failed: OSError: no room");
	json_decref(object);
	CHECK_INT(check_with_answer(directory, &options,
				    "{\"type\": \"error\", \"message\": \"unknown request\"}",
				    &object),
		  -EPROTO);
	CHECK_CONTAINS(json_string_value(json_object_get(object, "message")),
		       "the worker reported an error: unknown request");
	json_decref(object);

	/* A problem that works: the worker's answer. */
	CHECK_INT(check_with_answer(directory, &options,
				    "{\"type\": \"problem_check\", \"problem_error\": null, "
				    "\"internal_error\": null}",
				    &object),
		  0);
	CHECK_STRING(json_string_value(json_object_get(object, "type")), "problem_check");
	json_decref(object);

	/* A missing problem file never reaches a worker. */
	options.problem_path = "/nonexistent/p.py";
	CHECK_INT(check_problem(&options, &object), -ENOENT);
	CHECK_STRING(json_string_value(json_object_get(object, "error")), "io");
	json_decref(object);
	kagent_paths_remove_tree(directory, NULL);
	free(log);
	free(problem);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"detect_backend", test_detect_backend},
    {"missing_file", test_missing_file},
    {"no_gpu", test_no_gpu},
    {"request_and_worker_errors", test_request_and_worker_errors},
    {"problem_error", test_problem_error},
    {"check_problem", test_check_problem},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
