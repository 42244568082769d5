/*
 * Tests of the session state machine as a library: two runs on one libuv loop, against the
 * scripted model server and the stand-in evaluator (the fake worker in scripted mode), to
 * show that one process drives several sessions at once. The command-level behaviour (tools,
 * faults, budgets, resume) is tested end to end by tests/agent/optimize_cases.py.
 */
#include "kagent/session/session.h"

#include "kagent/base/alloc.h"
#include "kagent/records/config.h"
#include "kagent/llm/http_client.h"
#include "llm_server.h"
#include "test.h"

#include <stdlib.h>

struct observed {
	json_t *types; /* "A:request", "B:reply", ... in the order they happened */
	int done;
	json_t *finals[2];
};

struct session_slot {
	struct observed *observed;
	const char *label;
	int index;
};

static void
observe(const json_t *record, void *data)
{
	struct session_slot *slot = data;
	const char *type = json_string_value(json_object_get(record, "type"));
	char *entry = kagent_asprintf("%s:%s", slot->label, type);

	json_array_append_new(slot->observed->types, json_string(entry));
	free(entry);
}

static void
done(struct kagent_session *session, int status, const json_t *summary, void *data)
{
	struct session_slot *slot = data;

	slot->observed->finals[slot->index] = json_incref((json_t *)summary);
	slot->observed->done++;
	CHECK_INT(status, 0);
}

/* The position of the first entry equal to text, or -1. */
static long
first_index(const json_t *types, const char *text)
{
	const json_t *item;
	size_t index;

	json_array_foreach(types, index, item)
	{
		if (strcmp(json_string_value(item), text) == 0)
			return (long)index;
	}
	return -1;
}

/* One Chat Completions reply calling evaluate with a candidate 2x faster than eager. */
static json_t *
evaluate_reply(void)
{
	const char *source = "# fake-judge: {\"speedup\": 2.0}\nimport torch\n\n\n"
			     "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
			     "        return torch.relu(x)\n";
	json_t *arguments = json_pack("{s:s}", "source", source);
	char *arguments_text = json_dumps(arguments, JSON_COMPACT);
	json_t *reply =
	    json_pack("{s:i, s:i, s:[{s:{s:[{s:i, s:{s:[{s:i, s:s, s:s, s:{s:s, s:s}}]}}]}}, "
		      "{s:{s:[{s:i, s:{}, s:s}], s:{s:i, s:i}}}, {s:s}]}",
		      "status", 200, "delay_ms", 1000, "sse", "data", "choices", "index", 0,
		      "delta", "tool_calls", "index", 0, "id", "call_1", "type", "function",
		      "function", "name", "evaluate", "arguments", arguments_text, "data",
		      "choices", "index", 0, "delta", "finish_reason", "tool_calls", "usage",
		      "prompt_tokens", 100, "completion_tokens", 10, "data", "[DONE]");

	json_decref(arguments);
	free(arguments_text);
	return reply;
}

static void
test_two_sessions_share_one_loop(void)
{
	const char *source = getenv("KAGENT_SOURCE_DIR");
	char *folder = kagent_test_make_directory(), *error = NULL, *runner, *cache, *socket_path;
	char *problem, *base_url, *script_text, *outputs[2];
	json_t *script = json_pack("{s:[o, o]}", "exchanges", evaluate_reply(), evaluate_reply());
	struct kagent_test_llm_server server;
	struct kagent_config configs[2];
	struct kagent_session *sessions[2];
	struct observed observed = {.types = json_array()};
	struct session_slot slots[2] = {{&observed, "A", 0}, {&observed, "B", 1}};
	struct kagent_http_client *http = NULL;
	uv_loop_t loop;
	int index;

	CHECK(source != NULL);
	runner = kagent_asprintf("%s/tests/fixtures/fake_runner", source);
	cache = kagent_asprintf("%s/cache", folder);
	socket_path = kagent_asprintf("%s/none.sock", folder);
	setenv("KAGENT_RUNNER_DIR", runner, 1);
	setenv("FAKE_WORKER_MODE", "scripted", 1);
	setenv("KAGENT_CACHE_DIR", cache, 1);
	setenv("KAGENT_WORKER_SOCKET", socket_path, 1);
	script_text = json_dumps(script, JSON_COMPACT);
	kagent_test_llm_server_start(&server, script_text);
	base_url = kagent_test_llm_server_url(&server, "/v1");
	problem = kagent_asprintf("%s/tests/fixtures/problems/relu.py", source);

	uv_loop_init(&loop);
	CHECK_INT(kagent_http_client_create(&loop, &http, &error), 0);
	for (index = 0; index < 2; index++) {
		struct kagent_session_options options = {
		    .loop = &loop,
		    .http = http,
		    .config = &configs[index],
		    .problem_path = problem,
		    .observer = observe,
		    .done = done,
		    .data = &slots[index],
		};

		outputs[index] = kagent_asprintf("%s/runs-%d", folder, index);
		kagent_config_init(&configs[index]);
		CHECK_INT(kagent_config_set(&configs[index], "provider.model", "scripted", &error),
			  0);
		CHECK_INT(kagent_config_set(&configs[index], "provider.base_url", base_url, &error),
			  0);
		CHECK_INT(kagent_config_set(&configs[index], "evaluation.device", "cpu", &error),
			  0);
		CHECK_INT(
		    kagent_config_set(&configs[index], "output_directory", outputs[index], &error),
		    0);
		kagent_config_apply_environment(&configs[index]);
		if (kagent_session_create(&options, &sessions[index], &error) != 0) {
			fprintf(stderr, "%s\n", error);
			abort();
		}
	}
	kagent_session_start(sessions[0]);
	kagent_session_start(sessions[1]);
	while (observed.done < 2)
		uv_run(&loop, UV_RUN_ONCE);

	/* Each checked its problem before its first request. */
	CHECK(first_index(observed.types, "A:problem_check") >= 0);
	CHECK(first_index(observed.types, "A:problem_check") <
	      first_index(observed.types, "A:request"));
	CHECK(first_index(observed.types, "B:problem_check") >= 0);
	CHECK(first_index(observed.types, "B:problem_check") <
	      first_index(observed.types, "B:request"));
	/* Both asked the model before either reply came back (the server holds each 1 s). */
	CHECK(first_index(observed.types, "A:request") >= 0);
	CHECK(first_index(observed.types, "B:request") >= 0);
	CHECK(first_index(observed.types, "A:request") < first_index(observed.types, "A:reply"));
	CHECK(first_index(observed.types, "B:request") < first_index(observed.types, "A:reply"));
	CHECK(first_index(observed.types, "A:request") < first_index(observed.types, "B:reply"));
	for (index = 0; index < 2; index++) {
		CHECK_STRING(json_string_value(json_object_get(observed.finals[index], "variant")),
			     "v1");
		CHECK_STRING(
		    json_string_value(json_object_get(observed.finals[index], "stop_reason")),
		    "target_reached");
		CHECK(json_is_true(json_object_get(observed.finals[index], "confirmed")));
		/* What the daemon's batch report reads (agent/daemon/report.c). */
		{
			const json_t *confirmation =
			    json_object_get(observed.finals[index], "confirmation");

			CHECK_STRING(json_string_value(json_object_get(confirmation, "status")),
				     "correct");
			CHECK(json_is_number(json_object_get(confirmation, "speedup_vs_eager")));
			CHECK(json_object_get(confirmation, "speedup_vs_compile") != NULL);
			CHECK(json_is_true(json_object_get(confirmation, "credited")));
		}
		kagent_session_free(sessions[index]);
		json_decref(observed.finals[index]);
	}
	kagent_http_client_free(http);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK_INT(uv_loop_close(&loop), 0);
	for (index = 0; index < 2; index++) {
		kagent_config_clear(&configs[index]);
		free(outputs[index]);
	}
	kagent_test_llm_server_stop(&server);
	json_decref(observed.types);
	json_decref(script);
	free(script_text);
	free(base_url);
	free(problem);
	free(runner);
	free(cache);
	free(socket_path);
	free(folder);
}

static const struct kagent_test tests[] = {
    {"two_sessions_share_one_loop", test_two_sessions_share_one_loop},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 120)
