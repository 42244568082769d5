/* Tests of the tool table: the definitions offered to the model, the argument checks
 * every call passes before a handler runs, and the tools acting through a stand-in host. */
#include "kagent/model_tools/tool_table.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "kagent/records/variant_repository.h"
#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

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

/* Equal definitions are one shared value; an edited description makes new ones. */
static void
test_equal_definitions_are_shared(void)
{
	char *source = prompts_directory(), *directory = kagent_test_make_directory();
	char *tools = kagent_asprintf("%s/tools", directory), *path, *text, *error = NULL;
	const struct kagent_tool *const *entry;
	json_t *first, *second, *edited;
	size_t length;

	CHECK_INT(mkdir(tools, 0700), 0);
	for (entry = kagent_tool_table; *entry != NULL; entry++) {
		path = kagent_asprintf("%s/tools/%s.md", source, (*entry)->name);
		CHECK_INT(kagent_fileio_read(path, 1 << 20, &text, &length, &error), 0);
		free(path);
		path = kagent_asprintf("%s/%s.md", tools, (*entry)->name);
		CHECK_INT(kagent_fileio_write_atomic(path, text, length, &error), 0);
		free(path);
		free(text);
	}
	first = kagent_tool_definitions(directory, &error);
	second = kagent_tool_definitions(directory, &error);
	CHECK(first != NULL && first == second);
	path = kagent_asprintf("%s/read_problem.md", tools);
	CHECK_INT(kagent_fileio_write_atomic(path, "Reads it again.\n", 16, &error), 0);
	edited = kagent_tool_definitions(directory, &error);
	CHECK(edited != NULL && edited != first);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(edited, 0), "description")),
		     "Reads it again.");
	CHECK(!json_equal(first, edited));
	json_decref(first);
	json_decref(second);
	json_decref(edited);
	kagent_paths_remove_tree(directory, NULL);
	free(path);
	free(tools);
	free(directory);
	free(source);
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
call_on(struct kagent_tool_host *host, const char *tool, const char *arguments_text)
{
	struct finished finished = {0};
	json_t *arguments = json_loads(arguments_text, JSON_DECODE_ANY, NULL);
	struct kagent_tool_call call = {
	    .host = host,
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
	struct finished finished = call_on(NULL, tool, arguments);

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

/* A stand-in for the session: a real store of variants, and evaluations answered at once. */
struct fake_host {
	struct kagent_tool_host host;
	char *directory;
	char *worktree;
	struct kagent_variant_repository *repository;
	int evaluations;
	enum kagent_variants_purpose purpose;
	int evaluation_status; /* what the evaluations answer: 0 and a verdict, or an error */
	json_t *answer;
	char *finish_summary;
};

static int
fake_turn(void *data)
{
	(void)data;
	return 7;
}

static void
fake_evaluate(void *data, struct kagent_variant *variant, enum kagent_variants_purpose purpose,
	      kagent_variants_verdict_callback callback, void *callback_data)
{
	struct fake_host *fake = data;

	(void)variant;
	fake->evaluations++;
	fake->purpose = purpose;
	callback(fake->evaluation_status, fake->answer, callback_data);
}

static char *
fake_budget_line(void *data)
{
	(void)data;
	return kagent_strdup("(budget: fake)\n");
}

static void
fake_request_finish(void *data, const char *summary)
{
	struct fake_host *fake = data;

	free(fake->finish_summary);
	fake->finish_summary = kagent_strdup(summary);
}

static void
fake_record(void *data, const char *type, json_t *fields)
{
	(void)data;
	(void)type;
	json_decref(fields);
}

#define FAKE_PROBLEM "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"

static void
fake_host_open(struct fake_host *fake)
{
	struct kagent_variants_options options = {
	    .run_id = "r1",
	    .baseline = KAGENT_TARGET_BEST,
	    .evaluate = fake_evaluate,
	    .record = fake_record,
	    .data = fake,
	};
	char *cause = NULL;

	memset(fake, 0, sizeof *fake);
	fake->directory = kagent_test_make_directory();
	CHECK_INT(kagent_variant_repository_open(fake->directory, "relu", FAKE_PROBLEM,
						 &fake->repository, &cause),
		  0);
	CHECK_INT(
	    kagent_variant_repository_start_run(fake->repository, "r1", 0, &fake->worktree, &cause),
	    0);
	options.repository = fake->repository;
	options.worktree = fake->worktree;
	fake->host = (struct kagent_tool_host){
	    .problem_name = "relu",
	    .problem_source = FAKE_PROBLEM,
	    .turn = fake_turn,
	    .evaluate = fake_evaluate,
	    .budget_line = fake_budget_line,
	    .request_finish = fake_request_finish,
	    .data = fake,
	};
	CHECK_INT(kagent_variants_create(&options, &fake->host.variants, &cause), 0);
	fake->answer = json_pack("{s:s, s:s}", "status", "correct", "reason", "all trials passed");
}

static void
fake_host_close(struct fake_host *fake)
{
	char *cause = NULL;

	kagent_variants_free(fake->host.variants);
	kagent_variant_repository_close(fake->repository);
	CHECK_INT(kagent_paths_remove_tree(fake->directory, &cause), 0);
	json_decref(fake->answer);
	free(fake->finish_summary);
	free(fake->worktree);
	free(fake->directory);
}

/* Runs a call of tool on the host, which must finish at once; returns its content. */
static char *
host_call(struct fake_host *fake, const char *tool, const char *arguments_text, int is_error)
{
	struct finished finished = call_on(&fake->host, tool, arguments_text);

	CHECK_INT(finished.calls, 1);
	if (finished.is_error != is_error) {
		fprintf(stderr, "%s: '%s'\n", tool, finished.content);
		abort();
	}
	return finished.content;
}

static void
test_tools_act_through_the_host(void)
{
	const char *source = "{\"source\": \"import torch\\nclass ModelNew: pass\\n\", "
			     "\"note\": \"first\"}";
	struct fake_host fake;
	struct kagent_variant *variant;
	char *content;

	fake_host_open(&fake);
	content = host_call(&fake, "read_problem", "{}", 0);
	CHECK_CONTAINS(content, "problem relu:");
	CHECK_CONTAINS(content, "class Model(torch.nn.Module)");
	free(content);

	/* evaluate adds v1 in the host's turn, has the host evaluate it and adds the budget. */
	content = host_call(&fake, "evaluate", source, 0);
	CHECK_CONTAINS(content, "v1 correct: all trials passed");
	CHECK_CONTAINS(content, "(budget: fake)");
	free(content);
	CHECK_INT(fake.evaluations, 1);
	CHECK_INT(fake.purpose, KAGENT_VARIANTS_EVALUATE);
	variant = kagent_variants_find(fake.host.variants, "v1");
	CHECK(variant != NULL);
	CHECK_INT(variant->turn, 7);
	CHECK_STRING(variant->note, "first");
	content = host_call(&fake, "evaluate", "{\"source\": \"import torch\\n\"}", 1);
	CHECK_CONTAINS(content, "no class ModelNew");
	free(content);

	content = host_call(&fake, "read_variant", "{\"variant\": \"latest\"}", 0);
	CHECK_CONTAINS(content, "v1 (turn 7), note: first:");
	free(content);
	content = host_call(&fake, "diff", "{\"variant\": \"v1\"}", 0);
	CHECK_CONTAINS(content, "+++ b/v1.py");
	CHECK_CONTAINS(content, "--- a/reference.py");
	free(content);
	content = host_call(&fake, "diff", "{\"variant\": \"v1\", \"against\": \"v4\"}", 1);
	CHECK_STRING(content, "no variant v4");
	free(content);

	/* The host's verdict was not kept (the session keeps it), so v1 cannot become best. */
	content = host_call(&fake, "commit", "{\"variant\": \"v1\"}", 0);
	CHECK_CONTAINS(content, "v1 cannot become the best");
	free(content);
	CHECK_INT(fake.evaluations, 1);

	fake.evaluation_status = -EIO;
	json_decref(fake.answer);
	fake.answer = json_pack("{s:s, s:s}", "error", "worker", "message", "no worker");
	content = host_call(&fake, "profile", "{\"variant\": \"v1\"}", 1);
	CHECK_STRING(content, "the profile did not run: no worker");
	free(content);
	CHECK_INT(fake.purpose, KAGENT_VARIANTS_PROFILE);
	content = host_call(&fake, "profile", "{\"variant\": \"v2\"}", 1);
	CHECK_CONTAINS(content, "no variant v2 to profile");
	free(content);

	content = host_call(&fake, "finish", "{\"summary\": \"done\"}", 0);
	CHECK_CONTAINS(content, "finishing");
	free(content);
	CHECK_STRING(fake.finish_summary, "done");
	fake_host_close(&fake);
}

static const struct kagent_test tests[] = {
    {"definitions_cover_the_table", test_definitions_cover_the_table},
    {"equal_definitions_are_shared", test_equal_definitions_are_shared},
    {"missing_description_is_an_error", test_missing_description_is_an_error},
    {"arguments_are_checked", test_arguments_are_checked},
    {"render_verdict", test_render_verdict},
    {"long_results_are_cut", test_long_results_are_cut},
    {"tools_act_through_the_host", test_tools_act_through_the_host},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
