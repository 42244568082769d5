/*
 * Unit tests for tools/evaluator/worker_client.c against tests/fixtures/fake_runner (a fake worker
 * without torch): every error path, and that the loop closes with no handle left.
 */
#include "kagent/base/alloc.h"
#include "kagent/base/paths.h"
#include "kagent/evaluator/worker_client.h"
#include "test.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct outcome {
	int ready_status;
	char *ready_message;
	int response_status;
	char *response_message;
	json_t *response;
	int responses;
	int closed;
	uint64_t deadline_ms;
	kagent_worker_client_t *worker;
};

static char *
fake_runner(void)
{
	const char *source = getenv("KAGENT_SOURCE_DIR");

	CHECK(source != NULL);
	return kagent_asprintf("%s/tests/fixtures/fake_runner", source);
}

static void
on_closed(void *data)
{
	((struct outcome *)data)->closed++;
}

static void
on_response(kagent_worker_client_t *worker, int status, const json_t *response, const char *message,
	    void *data)
{
	struct outcome *outcome = data;

	outcome->responses++;
	outcome->response_status = status;
	outcome->response_message = message ? kagent_strdup(message) : NULL;
	outcome->response = response ? json_deep_copy(response) : NULL;
	kagent_worker_client_close(worker, on_closed, outcome);
}

static void
on_ready(kagent_worker_client_t *worker, int status, const json_t *hello, const char *message,
	 void *data)
{
	struct outcome *outcome = data;
	json_t *request;
	char *cause = NULL;

	outcome->ready_status = status;
	outcome->ready_message = message ? kagent_strdup(message) : NULL;
	if (status != 0) {
		kagent_worker_client_close(worker, on_closed, outcome);
		return;
	}
	CHECK_INT(json_integer_value(json_object_get(hello, "protocol")), 1);
	request = json_pack("{s:s, s:s}", "type", "evaluate", "id", "req-1");
	CHECK_INT(kagent_worker_client_request(worker, request, outcome->deadline_ms, on_response,
					       outcome, &cause),
		  0);
	/* A second request while one is outstanding is refused. */
	CHECK_INT(kagent_worker_client_request(worker, request, 1000, on_response, outcome, &cause),
		  -EBUSY);
	free(cause);
	json_decref(request);
}

/* Spawns the fake in a mode, runs the loop to the end, checks that nothing leaked. */
static void
run_fake(const char *mode, struct outcome *outcome)
{
	struct kagent_worker_client_spawn_options options = {
	    .python = "python3", .term_after_ms = 200, .kill_after_ms = 400};
	uv_loop_t loop;
	char *runner = fake_runner(), *cause = NULL;

	if (outcome->deadline_ms == 0)
		outcome->deadline_ms = 20000;
	options.runner_dir = runner;
	setenv("FAKE_WORKER_MODE", mode, 1);
	CHECK_INT(uv_loop_init(&loop), 0);
	CHECK_INT(kagent_worker_client_spawn(&loop, &options, on_ready, outcome, &outcome->worker,
					     &cause),
		  0);
	CHECK(kagent_worker_client_pid(outcome->worker) > 0);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(outcome->closed, 1);
	CHECK_INT(uv_loop_close(&loop), 0);
	free(runner);
}

static void
outcome_free(struct outcome *outcome)
{
	free(outcome->ready_message);
	free(outcome->response_message);
	json_decref(outcome->response);
}

static void
test_echo(void)
{
	struct outcome outcome = {0};

	run_fake("normal", &outcome);
	CHECK_INT(outcome.ready_status, 0);
	CHECK_INT(outcome.response_status, 0);
	CHECK_INT(outcome.responses, 1);
	CHECK_STRING(json_string_value(json_object_get(outcome.response, "id")), "req-1");
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(outcome.response, "echo"), "type")),
	    "evaluate");
	outcome_free(&outcome);
}

static void
test_bad_hello(void)
{
	struct outcome outcome = {0};

	run_fake("bad_hello", &outcome);
	CHECK_INT(outcome.ready_status, -EPROTO);
	CHECK_CONTAINS(outcome.ready_message, "speaks protocol 2; this kagent speaks 1");
	CHECK_INT(outcome.responses, 0);
	outcome_free(&outcome);
}

static void
test_no_hello(void)
{
	struct outcome outcome = {0};

	run_fake("no_hello", &outcome);
	CHECK_INT(outcome.ready_status, -EPIPE);
	CHECK_CONTAINS(outcome.ready_message,
		       "exited with status 1 before answering: ModuleNotFoundError: No module "
		       "named 'torch'");
	outcome_free(&outcome);
}

static void
test_garbage(void)
{
	struct outcome outcome = {0};

	run_fake("garbage", &outcome);
	CHECK_INT(outcome.ready_status, 0);
	CHECK_INT(outcome.response_status, -EPROTO);
	CHECK_CONTAINS(outcome.response_message, "sent a line that is not a JSON object: this is "
						 "not json");
	outcome_free(&outcome);
}

static void
test_exit_mid_request(void)
{
	struct outcome outcome = {0};

	run_fake("exit", &outcome);
	CHECK_INT(outcome.response_status, -EPIPE);
	CHECK_CONTAINS(outcome.response_message, "exited with status 1 before answering: "
						 "ModuleNotFoundError: No module named 'torch'");
	outcome_free(&outcome);
}

static void
test_hang(void)
{
	struct outcome outcome = {.deadline_ms = 300};

	run_fake("hang", &outcome);
	CHECK_INT(outcome.response_status, -ETIMEDOUT);
	CHECK_CONTAINS(outcome.response_message, "did not answer within");
	outcome_free(&outcome);
}

static void
test_stubborn_close(void)
{
	struct outcome outcome = {.deadline_ms = 100000};
	struct kagent_worker_client_spawn_options options = {
	    .python = "python3", .term_after_ms = 200, .kill_after_ms = 400};
	uv_loop_t loop;
	char *runner = fake_runner(), *cause = NULL;
	uint64_t start;
	kagent_worker_client_t *worker;

	/* Close once the fake is up (it ignores SIGTERM before saying hello), while its first
	 * request hangs: only SIGKILL, kill_after_ms later, ends it. */
	options.runner_dir = runner;
	setenv("FAKE_WORKER_MODE", "stubborn", 1);
	outcome.ready_status = 1;
	CHECK_INT(uv_loop_init(&loop), 0);
	CHECK_INT(kagent_worker_client_spawn(&loop, &options, on_ready, &outcome, &worker, &cause),
		  0);
	while (outcome.ready_status == 1)
		CHECK(uv_run(&loop, UV_RUN_ONCE) != 0);
	CHECK_INT(outcome.ready_status, 0);
	start = uv_hrtime();
	kagent_worker_client_close(worker, on_closed, &outcome);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(outcome.closed, 1);
	CHECK((uv_hrtime() - start) / 1000000 >= 350);
	CHECK_INT(uv_loop_close(&loop), 0);
	free(runner);
	outcome_free(&outcome);
}

static void
test_missing_python(void)
{
	struct kagent_worker_client_spawn_options options = {.python = "/nonexistent/python3",
							     .runner_dir = "/nonexistent"};
	struct outcome outcome = {0};
	kagent_worker_client_t *worker = NULL;
	uv_loop_t loop;
	char *cause = NULL;

	CHECK_INT(uv_loop_init(&loop), 0);
	CHECK_INT(kagent_worker_client_spawn(&loop, &options, on_ready, &outcome, &worker, &cause),
		  -ENOENT);
	CHECK(worker == NULL);
	CHECK_CONTAINS(cause, "cannot start the worker (/nonexistent/python3");
	free(cause);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(uv_loop_close(&loop), 0);
}

static void
test_socket(void)
{
	char *directory = kagent_test_make_directory(), *runner = fake_runner();
	char *path = kagent_asprintf("%s/w.sock", directory), *cause = NULL;
	struct outcome outcome = {.deadline_ms = 20000};
	struct stat info;
	uv_loop_t loop;
	pid_t child;
	int tries;

	setenv("FAKE_WORKER_MODE", "normal", 1);
	setenv("PYTHONPATH", runner, 1);
	setenv("FAKE_WORKER_HELLO_DELAY", "0.3", 1);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		execlp("python3", "python3", "-m", "kagent_runner.worker", "--socket", path,
		       (char *)NULL);
		_exit(127);
	}
	unsetenv("FAKE_WORKER_HELLO_DELAY");
	for (tries = 0; tries < 100 && stat(path, &info) != 0; tries++)
		usleep(50000);
	CHECK_INT(uv_loop_init(&loop), 0);
	/* 0: the default hello timeout, as the daemon's sessions ask; the hello comes late. */
	CHECK_INT(kagent_worker_client_connect(&loop, path, 0, on_ready, &outcome, &outcome.worker,
					       &cause),
		  0);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(outcome.ready_status, 0);
	CHECK_INT(outcome.response_status, 0);
	CHECK_STRING(json_string_value(json_object_get(outcome.response, "id")), "req-1");
	CHECK_INT(outcome.closed, 1);
	CHECK_INT(uv_loop_close(&loop), 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	outcome_free(&outcome);
	kagent_paths_remove_tree(directory, NULL);
	free(path);
	free(runner);
	free(directory);
}

static void
test_socket_refused(void)
{
	struct outcome outcome = {0};
	uv_loop_t loop;
	char *cause = NULL;

	CHECK_INT(uv_loop_init(&loop), 0);
	CHECK_INT(kagent_worker_client_connect(&loop, "/nonexistent/kagent.sock", 5000, on_ready,
					       &outcome, &outcome.worker, &cause),
		  0);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(outcome.ready_status, -ENOENT);
	CHECK_CONTAINS(outcome.ready_message,
		       "cannot connect to worker at /nonexistent/kagent.sock");
	CHECK_INT(outcome.closed, 1);
	CHECK_INT(uv_loop_close(&loop), 0);
	outcome_free(&outcome);
}

static void
on_ready_close(kagent_worker_client_t *worker, int status, const json_t *hello, const char *message,
	       void *data)
{
	struct outcome *outcome = data;

	(void)hello;
	outcome->ready_status = status;
	outcome->ready_message = message ? kagent_strdup(message) : NULL;
	kagent_worker_client_close(worker, on_closed, outcome);
}

/* A worker whose listen backlog is full (many sessions connecting at once) is connected to
 * once it accepts again, not reported as unreachable (EAGAIN). */
static void
test_socket_backlog_full(void)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_asprintf("%s/w.sock", directory), *cause = NULL;
	struct outcome outcome = {0};
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	int listener, fillers[8], filled = 0, index;
	uv_loop_t loop;
	pid_t child;

	snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
	listener = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(listener >= 0);
	CHECK_INT(bind(listener, (struct sockaddr *)&address, sizeof address), 0);
	CHECK_INT(listen(listener, 0), 0);
	for (index = 0; index < 8; index++) {
		fillers[index] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (connect(fillers[index], (struct sockaddr *)&address, sizeof address) != 0) {
			CHECK_INT(errno, EAGAIN);
			close(fillers[index]);
			break;
		}
		filled++;
	}
	CHECK(filled > 0 && filled < 8); /* the backlog is full now */
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		/* The worker: accepts after a while, says hello on every connection. */
		const char *hello = "{\"type\": \"hello\", \"protocol\": 1}\n";

		usleep(300000);
		for (index = 0; index <= filled; index++) {
			int connection = accept(listener, NULL, NULL);

			if (connection < 0 || write(connection, hello, strlen(hello)) < 0)
				_exit(1);
		}
		pause();
		_exit(0);
	}
	CHECK_INT(uv_loop_init(&loop), 0);
	CHECK_INT(kagent_worker_client_connect(&loop, path, 5000, on_ready_close, &outcome,
					       &outcome.worker, &cause),
		  0);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT(outcome.ready_status, 0);
	CHECK_INT(outcome.closed, 1);
	CHECK_INT(uv_loop_close(&loop), 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	for (index = 0; index < filled; index++)
		close(fillers[index]);
	close(listener);
	outcome_free(&outcome);
	kagent_paths_remove_tree(directory, NULL);
	free(path);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"echo", test_echo},
    {"bad_hello", test_bad_hello},
    {"no_hello", test_no_hello},
    {"garbage", test_garbage},
    {"exit_mid_request", test_exit_mid_request},
    {"hang", test_hang},
    {"stubborn_close", test_stubborn_close},
    {"missing_python", test_missing_python},
    {"socket", test_socket},
    {"socket_refused", test_socket_refused},
    {"socket_backlog_full", test_socket_backlog_full},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
