/* Runs tests/fixtures/llm_server.py for a test (see llm_server.h). */
#include "llm_server.h"

#include "kagent/base/alloc.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Python starts in well under a second; a loaded machine gets room. */
#define LLM_SERVER_START_TIMEOUT_MS 30000

/* Reads the "port N" line the server prints once it listens. */
static int
llm_server__read_port(int fd)
{
	char line[64];
	size_t used = 0;
	struct pollfd watch = {.fd = fd, .events = POLLIN};
	ssize_t got;
	int port = -1;

	while (used < sizeof line - 1 && memchr(line, '\n', used) == NULL) {
		CHECK(poll(&watch, 1, LLM_SERVER_START_TIMEOUT_MS) == 1);
		got = read(fd, line + used, sizeof line - 1 - used);
		CHECK(got > 0);
		used += (size_t)got;
	}
	line[used] = '\0';
	CHECK(sscanf(line, "port %d", &port) == 1);
	CHECK(port > 0);
	return port;
}

void
kagent_test_llm_server_start(struct kagent_test_llm_server *server, const char *script)
{
	const char *source = getenv("KAGENT_SOURCE_DIR");
	posix_spawn_file_actions_t actions;
	int input[2], output[2];
	char *program;

	CHECK(source != NULL);
	memset(server, 0, sizeof *server);
	server->directory = kagent_test_make_directory();
	server->script_path = kagent_test_write_file(server->directory, "script.json", script);
	server->log_path = kagent_asprintf("%s/log.jsonl", server->directory);
	program = kagent_asprintf("%s/tests/fixtures/llm_server.py", source);

	CHECK(pipe2(input, O_CLOEXEC) == 0);
	CHECK(pipe2(output, O_CLOEXEC) == 0);
	CHECK(posix_spawn_file_actions_init(&actions) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&actions, input[0], 0) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&actions, output[1], 1) == 0);
	char *arguments[] = {"python3", program,	  "--script",	       server->script_path,
			     "--log",	server->log_path, "--exit-with-stdin", NULL};
	CHECK(posix_spawnp(&server->pid, "python3", &actions, NULL, arguments, environ) == 0);
	posix_spawn_file_actions_destroy(&actions);
	close(input[0]);
	close(output[1]);
	server->stdin_fd = input[1];
	server->port = llm_server__read_port(output[0]);
	close(output[0]);
	free(program);
}

char *
kagent_test_llm_server_url(const struct kagent_test_llm_server *server, const char *path)
{
	return kagent_asprintf("http://127.0.0.1:%d%s", server->port, path);
}

json_t *
kagent_test_llm_server_log(const struct kagent_test_llm_server *server)
{
	json_t *entries = json_array();
	FILE *file = fopen(server->log_path, "r");
	char *line = NULL;
	size_t capacity = 0;
	json_error_t error;

	if (file == NULL)
		return entries;
	while (getline(&line, &capacity, file) > 0) {
		json_t *entry = json_loads(line, 0, &error);

		if (entry == NULL)
			fprintf(stderr, "bad log line: %s (%s)\n", line, error.text);
		CHECK(entry != NULL);
		json_array_append_new(entries, entry);
	}
	free(line);
	fclose(file);
	return entries;
}

void
kagent_test_llm_server_stop(struct kagent_test_llm_server *server)
{
	int status;

	close(server->stdin_fd);
	kill(server->pid, SIGTERM);
	while (waitpid(server->pid, &status, 0) < 0 && errno == EINTR)
		;
	unlink(server->script_path);
	unlink(server->log_path);
	rmdir(server->directory);
	free(server->script_path);
	free(server->log_path);
	free(server->directory);
	memset(server, 0, sizeof *server);
}
