/*
 * Starts tests/fixtures/llm_server.py (a scripted HTTP server) for C tests of
 * the HTTP client, the LLM client and the agent loop, and reads its request log.
 * Every failure is a CHECK failure: a test cannot go on without its server.
 */
#ifndef KAGENT_TEST_LLM_SERVER_H
#define KAGENT_TEST_LLM_SERVER_H

#include <jansson.h>
#include <sys/types.h>

struct kagent_test_llm_server {
	pid_t pid;
	int port;
	int stdin_fd; /* the server exits when this closes, even if the test crashes */
	char *directory;
	char *script_path;
	char *log_path;
};

/* script: the JSON script (see the fixture's header). Found via $KAGENT_SOURCE_DIR. */
void kagent_test_llm_server_start(struct kagent_test_llm_server *server, const char *script);
/* "http://127.0.0.1:PORT" followed by path; the caller frees it. */
char *kagent_test_llm_server_url(const struct kagent_test_llm_server *server, const char *path);
/* The requests logged so far, as a JSON array; the caller decrefs it. */
json_t *kagent_test_llm_server_log(const struct kagent_test_llm_server *server);
/* Stops the server and removes its files. */
void kagent_test_llm_server_stop(struct kagent_test_llm_server *server);

#endif
