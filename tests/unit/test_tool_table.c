/* Tests of the tool table: the definitions offered to the model and the argument checks
 * every call passes before a handler runs. */
#include "kagent/model_tools/tool.h"

#include "kagent/base/alloc.h"
#include "test.h"

#include <stdlib.h>

static char *
prompts_directory(void)
{
	const char *source = getenv("KAGENT_SOURCE_DIR");

	CHECK(source != NULL);
	return kagent_asprintf("%s/prompts", source);
}

static void
test_definitions_cover_the_table(void)
{
	char *directory = prompts_directory(), *error = NULL;
	json_t *definitions = kagent_tool_definitions(directory, &error);
	const struct kagent_tool *const *entry;
	size_t count = 0;

	CHECK(definitions != NULL);
	for (entry = kagent_tool_table; *entry != NULL; entry++) {
		json_t *definition = json_array_get(definitions, count++);

		CHECK_STRING(json_string_value(json_object_get(definition, "name")),
			     (*entry)->name);
		CHECK(strlen(json_string_value(json_object_get(definition, "description"))) > 40);
		CHECK_STRING(json_string_value(json_object_get(
				 json_object_get(definition, "parameters"), "type")),
			     "object");
		CHECK(kagent_tool_find((*entry)->name) == *entry);
	}
	CHECK_INT(json_array_size(definitions), count);
	CHECK(count >= 7);
	CHECK(kagent_tool_find("launch_rockets") == NULL);
	json_decref(definitions);
	free(directory);
}

static void
test_missing_description_is_an_error(void)
{
	char *directory = kagent_test_make_directory(), *error = NULL;

	CHECK(kagent_tool_definitions(directory, &error) == NULL);
	CHECK(error != NULL && strstr(error, "read_problem.md") != NULL);
	free(error);
	free(directory);
}

struct finished {
	int calls;
	int is_error;
	char *content;
};

static void
record_finish(struct kagent_tool_call *call, void *data)
{
	struct finished *finished = data;

	finished->calls++;
	finished->is_error = call->is_error;
	finished->content = call->content;
}

/* Starts a call of tool with arguments (JSON text) and returns what it finished with. */
static struct finished
call_with(const char *tool, const char *arguments_text)
{
	struct finished finished = {0};
	json_t *arguments = json_loads(arguments_text, JSON_DECODE_ANY, NULL);
	struct kagent_tool_call call = {
	    .tool = kagent_tool_find(tool),
	    .id = "call_1",
	    .arguments = arguments,
	    .done = record_finish,
	    .data = &finished,
	};

	kagent_tool_call_start(&call);
	json_decref(arguments);
	return finished;
}

static void
check_refused(const char *tool, const char *arguments, const char *needle)
{
	struct finished finished = call_with(tool, arguments);

	CHECK_INT(finished.calls, 1);
	CHECK_INT(finished.is_error, 1);
	if (strstr(finished.content, needle) == NULL) {
		fprintf(stderr, "'%s' lacks '%s'\n", finished.content, needle);
		abort();
	}
	free(finished.content);
}

static void
test_arguments_are_checked(void)
{
	check_refused("launch_rockets", "{}", "no such tool");
	check_refused("evaluate", "[1, 2]", "one JSON object");
	check_refused("evaluate", "{}", "needs the argument \"source\"");
	check_refused("evaluate", "{\"source\": 42}", "\"source\" must be a string, not a integer");
	check_refused("evaluate", "{\"source\": \"x\", \"speed\": 1}",
		      "takes no argument \"speed\"");
	check_refused("profile", "{\"variant\": null}", "must be a string, not a null");
	check_refused("finish", "{}", "needs the argument \"summary\"");
}

static void
test_long_results_are_cut(void)
{
	struct finished finished = {0};
	struct kagent_tool_call call = {.id = "call_1", .done = record_finish, .data = &finished};
	char *content = kagent_malloc(100001);

	/* 2-byte characters, so a cut at an odd byte must back up to a boundary. */
	for (size_t index = 0; index < 100000; index += 2) {
		content[index] = (char)0xC3;
		content[index + 1] = (char)0xA9;
	}
	content[100000] = '\0';
	kagent_tool_call_finish(&call, 0, content);
	CHECK(strlen(finished.content) < 33 * 1024);
	CHECK(strstr(finished.content, "more bytes cut") != NULL);
	CHECK(((unsigned char)finished
		   .content[strstr(finished.content, "\n[...") - finished.content - 1] == 0xA9));
	free(finished.content);
	finished = (struct finished){0};
	kagent_tool_call_finish(&call, 1, kagent_strdup("short"));
	CHECK_STRING(finished.content, "short");
	CHECK_INT(finished.is_error, 1);
	free(finished.content);
}

static void
render_status_and_reason(const json_t *verdict, FILE *stream)
{
	fprintf(stream, "%s/%s", json_string_value(json_object_get(verdict, "status")),
		json_string_value(json_object_get(verdict, "reason")));
}

static void
test_render_verdict(void)
{
	json_t *verdict = json_pack("{s:s, s:s}", "status", "correct", "reason", "fine");
	char *text = kagent_tool_render_verdict(render_status_and_reason, verdict);

	CHECK_STRING(text, "correct/fine");
	free(text);
	json_decref(verdict);
}

static const struct kagent_test tests[] = {
    {"definitions_cover_the_table", test_definitions_cover_the_table},
    {"missing_description_is_an_error", test_missing_description_is_an_error},
    {"arguments_are_checked", test_arguments_are_checked},
    {"render_verdict", test_render_verdict},
    {"long_results_are_cut", test_long_results_are_cut},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
