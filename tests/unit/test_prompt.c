/*
 * Tests of the prompt templates: the renderer (variables, includes, the errors a user who
 * edits a prompt will meet) and the real prompts/ folder, each file rendered with exactly the
 * variables docs/prompts.md lists for it.
 */
#include "kagent/records/prompt.h"

#include "kagent/base/alloc.h"
#include "kagent/base/paths.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

static const struct kagent_prompt_variable variables[] = {
    {"name", "kagent"},
    {"speedup", "1.5x"},
    {"braces", "{{not_a_tag}}"},
};
#define VARIABLE_COUNT (sizeof variables / sizeof variables[0])

/* Renders text as main.md in directory; returns the status, the text or the error. */
static int
render_text(const char *directory, const char *text, char **out)
{
	char *error = NULL, *rendered = NULL;
	int status;

	free(kagent_test_write_file(directory, "main.md", text));
	status = kagent_prompt_render(directory, "main.md", variables, VARIABLE_COUNT, &rendered,
				      &error);
	if (status == 0) {
		CHECK(error == NULL);
		*out = rendered;
	} else {
		CHECK(rendered == NULL);
		CHECK(error != NULL);
		*out = error;
	}
	return status;
}

static void
check_renders(const char *directory, const char *text, const char *expected)
{
	char *out = NULL;

	CHECK_INT(render_text(directory, text, &out), 0);
	CHECK_STRING(out, expected);
	free(out);
}

static void
check_fails(const char *directory, const char *text, int expected_status, const char *message)
{
	char *out = NULL;

	CHECK_INT(render_text(directory, text, &out), expected_status);
	CHECK_CONTAINS(out, message);
	free(out);
}

static void
test_variables(void)
{
	char *directory = kagent_test_make_directory();

	check_renders(directory, "", "");
	check_renders(directory, "no tags at all\n", "no tags at all\n");
	check_renders(directory, "{{name}} aims for {{speedup}}; {{name}}!",
		      "kagent aims for 1.5x; kagent!");
	/* Values are inserted as they are, never rendered again. */
	check_renders(directory, "[{{braces}}]", "[{{not_a_tag}}]");
	/* Single braces and a lone "}}" are text. */
	check_renders(directory, "{x} }} {", "{x} }} {");
	free(directory);
}

static void
test_spaces_inside_braces(void)
{
	char *directory = kagent_test_make_directory();

	check_renders(directory, "{{ name }}/{{\tspeedup\t}}/{{name }}", "kagent/1.5x/kagent");
	free(kagent_test_write_file(directory, "part.md", "part"));
	check_renders(directory, "<{{>part.md}}|{{ > part.md }}|{{>   part.md}}>",
		      "<part|part|part>");
	free(directory);
}

static void
test_escape(void)
{
	char *directory = kagent_test_make_directory();

	check_renders(directory, "a \\{{name}} b", "a {{name}} b");
	check_renders(directory, "\\{{", "{{");
	free(directory);
}

static void
test_includes(void)
{
	char *directory = kagent_test_make_directory();
	char *tools = kagent_asprintf("%s/tools", directory);
	char *out = NULL, *error = NULL;

	free(kagent_test_write_file(directory, "guide.md", "guide for {{name}} {{> tail.md}}"));
	free(kagent_test_write_file(directory, "tail.md", "(end)"));
	check_renders(directory, "start\n{{> guide.md}}\nstop",
		      "start\nguide for kagent (end)\nstop");

	/* A template in a subfolder includes from its own folder. */
	CHECK(mkdir(tools, 0700) == 0);
	free(kagent_test_write_file(tools, "evaluate.md", "Evaluates. {{> common.md}}"));
	free(kagent_test_write_file(tools, "common.md", "Costs GPU time."));
	CHECK_INT(kagent_prompt_render(directory, "tools/evaluate.md", NULL, 0, &out, &error), 0);
	CHECK_STRING(out, "Evaluates. Costs GPU time.");
	free(out);
	free(tools);
	free(directory);
}

static void
test_depth_cap(void)
{
	char *directory = kagent_test_make_directory();
	char *out = NULL;

	/* main.md -> level1 -> ... -> level4: four nested includes are allowed. */
	free(kagent_test_write_file(directory, "level1.md", "1{{> level2.md}}"));
	free(kagent_test_write_file(directory, "level2.md", "2{{> level3.md}}"));
	free(kagent_test_write_file(directory, "level3.md", "3{{> level4.md}}"));
	free(kagent_test_write_file(directory, "level4.md", "4"));
	check_renders(directory, "0{{> level1.md}}", "01234");

	/* A fifth is refused, naming where it is and how it was reached. */
	free(kagent_test_write_file(directory, "level4.md", "4\n{{> level5.md}}"));
	free(kagent_test_write_file(directory, "level5.md", "5"));
	CHECK_INT(render_text(directory, "0{{> level1.md}}", &out), -ELOOP);
	CHECK_CONTAINS(out, "level4.md:2: cannot include level5.md: includes nest deeper than 4");
	CHECK_CONTAINS(out, "(included from level3.md:1) (included from level2.md:1) "
			    "(included from level1.md:1) (included from main.md:1)");
	free(out);

	/* A cycle ends at the cap instead of recursing forever. */
	free(kagent_test_write_file(directory, "self.md", "again {{> self.md}}"));
	check_fails(directory, "{{> self.md}}", -ELOOP, "nest deeper than 4");
	free(directory);
}

static void
test_unknown_variable_names_line(void)
{
	char *directory = kagent_test_make_directory();

	check_fails(directory, "line one\nline two\n  target {{ speedpu }}\n", -EINVAL,
		    "main.md:3: unknown variable {{speedpu}} (known: name, speedup, braces)");
	/* Inside an included file: the included file's line, then where it was included. */
	free(kagent_test_write_file(directory, "part.md", "ok\n\n{{oops}}"));
	check_fails(directory, "a\n{{> part.md}}", -EINVAL,
		    "part.md:3: unknown variable {{oops}} (known: name, speedup, braces) "
		    "(included from main.md:2)");
	free(directory);
}

static void
test_no_variables_known(void)
{
	char *directory = kagent_test_make_directory();
	char *out = NULL, *error = NULL;

	free(kagent_test_write_file(directory, "tool.md", "Reads {{problem}}."));
	CHECK_INT(kagent_prompt_render(directory, "tool.md", NULL, 0, &out, &error), -EINVAL);
	CHECK(out == NULL);
	CHECK_STRING(error, "tool.md:1: unknown variable {{problem}} (known: none)");
	free(error);
	free(directory);
}

static void
test_null_value(void)
{
	char *directory = kagent_test_make_directory();
	const struct kagent_prompt_variable unset[] = {{"gpu", NULL}};
	char *out = NULL, *error = NULL;

	free(kagent_test_write_file(directory, "main.md", "on {{gpu}}"));
	CHECK_INT(kagent_prompt_render(directory, "main.md", unset, 1, &out, &error), -EINVAL);
	CHECK_STRING(error, "main.md:1: variable {{gpu}} has no value");
	free(error);
	free(directory);
}

static void
test_malformed_tags(void)
{
	char *directory = kagent_test_make_directory();

	check_fails(directory, "x\n{{name\n}}", -EINVAL,
		    "main.md:2: \"{{\" is not closed by \"}}\" on the same line");
	check_fails(directory, "{{name", -EINVAL, "main.md:1: \"{{\" is not closed");
	check_fails(directory, "{{ target speedup }}", -EINVAL,
		    "main.md:1: malformed tag {{target speedup}}");
	check_fails(directory, "{{na-me}}", -EINVAL, "malformed tag {{na-me}}");
	check_fails(directory, "a {{ }} b", -EINVAL, "main.md:1: empty tag");
	check_fails(directory, "{{>}}", -EINVAL, "main.md:1: {{>}} names no file");
	free(directory);
}

static void
test_missing_include(void)
{
	char *directory = kagent_test_make_directory();

	check_fails(directory, "one\ntwo {{> nowhere.md}}", -ENOENT,
		    "main.md:2: cannot include nowhere.md: cannot open");
	free(directory);
}

static void
test_missing_template(void)
{
	char *directory = kagent_test_make_directory();
	char *out = NULL, *error = NULL;

	CHECK_INT(kagent_prompt_render(directory, "absent.md", NULL, 0, &out, &error), -ENOENT);
	CHECK(out == NULL);
	CHECK_CONTAINS(error, "prompt template absent.md: cannot open");
	free(error);
	free(directory);
}

static void
test_paths_refused(void)
{
	char *directory = kagent_test_make_directory();
	char *inner = kagent_asprintf("%s/inner", directory);
	char *out = NULL, *error = NULL;

	CHECK(mkdir(inner, 0700) == 0);
	free(kagent_test_write_file(directory, "secret.md", "secret"));
	free(kagent_test_write_file(inner, "nested.md", "nested"));
	free(kagent_test_write_file(inner, "up.md", "{{> ../secret.md}}"));
	check_fails(directory, "{{> inner/nested.md}}", -EINVAL,
		    "cannot include \"inner/nested.md\"");
	check_fails(directory, "{{> /etc/passwd}}", -EINVAL, "cannot include \"/etc/passwd\"");
	CHECK_INT(kagent_prompt_render(directory, "inner/up.md", NULL, 0, &out, &error), -EINVAL);
	CHECK_CONTAINS(error, "inner/up.md:1: cannot include \"../secret.md\"");
	free(error);
	error = NULL;
	CHECK_INT(kagent_prompt_render(inner, "../secret.md", NULL, 0, &out, &error), -EINVAL);
	CHECK(out == NULL);
	CHECK_CONTAINS(error, "without \"..\"");
	free(error);
	error = NULL;
	CHECK_INT(kagent_prompt_render(directory, "/etc/passwd", NULL, 0, &out, &error), -EINVAL);
	free(error);
	free(inner);
	free(directory);
}

static void
test_caps(void)
{
	char *directory = kagent_test_make_directory();
	size_t size = KAGENT_PROMPT_MAX_BYTES / 2 + 1;
	char *half = kagent_malloc(size + 1);
	char *big = kagent_malloc(2 * size + 1);
	struct kagent_prompt_variable large[] = {{"half", half}};
	char *out = NULL, *error = NULL;

	memset(half, 'h', size);
	half[size] = '\0';
	memset(big, 'b', 2 * size);
	big[2 * size] = '\0';
	/* One file over the cap. */
	free(kagent_test_write_file(directory, "big.md", big));
	CHECK_INT(kagent_prompt_render(directory, "big.md", NULL, 0, &out, &error), -EFBIG);
	CHECK_CONTAINS(error, "big.md");
	free(error);
	error = NULL;
	/* Small files whose rendering passes the cap. */
	free(kagent_test_write_file(directory, "twice.md", "{{half}}\n{{half}}"));
	CHECK_INT(kagent_prompt_render(directory, "twice.md", large, 1, &out, &error), -EFBIG);
	CHECK_CONTAINS(error, "twice.md:2: the rendered prompt grows past");
	free(error);
	error = NULL;
	/* Once is fine. */
	free(kagent_test_write_file(directory, "once.md", "{{half}}"));
	CHECK_INT(kagent_prompt_render(directory, "once.md", large, 1, &out, &error), 0);
	CHECK_INT(strlen(out), size);
	free(out);
	free(big);
	free(half);
	free(directory);
}

static void
test_prompts_dir_lookup(void)
{
	char *path = NULL, *cause = NULL, *system_path;
	struct stat info;

	setenv("KAGENT_PROMPTS_DIR", "/opt/my-prompts", 1);
	CHECK_INT(kagent_paths_prompts_dir(&path, &cause), 0);
	CHECK_STRING(path, "/opt/my-prompts");
	free(path);
	/* Unset (or empty): beside the build folder, or the compiled default; both the source's. */
	setenv("KAGENT_PROMPTS_DIR", "", 1);
	CHECK_INT(kagent_paths_prompts_dir(&path, &cause), 0);
	system_path = kagent_asprintf("%s/system.md", path);
	CHECK(stat(system_path, &info) == 0);
	free(system_path);
	free(path);
}

/* The real prompts/ folder: each file with exactly the variables docs/prompts.md gives it. */
#define PROMPT_VARIABLES_MAX 6
static const struct {
	const char *name;
	const char *variables[PROMPT_VARIABLES_MAX];
} prompt_files[] = {
    {"system.md", {"target_speedup", "target_baseline", "max_turns"}},
    {"problem.md",
     {"problem_name", "problem_source", "gpu", "input_summary", "target_speedup",
      "target_baseline"}},
    {"guide_triton.md", {NULL}},
    {"guide_cuda.md", {NULL}},
    {"tools/read_problem.md", {NULL}},
    {"tools/compile.md", {NULL}},
    {"tools/evaluate.md", {NULL}},
    {"tools/profile.md", {NULL}},
    {"tools/diff.md", {NULL}},
    {"tools/commit.md", {NULL}},
    {"tools/read_variant.md", {NULL}},
    {"tools/finish.md", {NULL}},
};
#define PROMPT_FILE_COUNT (sizeof prompt_files / sizeof prompt_files[0])

static int
prompt_file_index(const char *name)
{
	for (size_t index = 0; index < PROMPT_FILE_COUNT; index++)
		if (strcmp(prompt_files[index].name, name) == 0)
			return (int)index;
	return -1;
}

/* Every regular file of folder (relative to prompts) must be one the table lists. */
static void
check_listed(const char *prompts, const char *folder, int *seen)
{
	char *path = kagent_asprintf("%s/%s", prompts, folder);
	DIR *directory = opendir(path);
	struct dirent *entry;

	CHECK(directory != NULL);
	while ((entry = readdir(directory)) != NULL) {
		char *name, *full;
		struct stat info;
		int index;

		if (entry->d_name[0] == '.')
			continue;
		name = folder[0] != '\0' ? kagent_asprintf("%s/%s", folder, entry->d_name)
					 : kagent_strdup(entry->d_name);
		full = kagent_asprintf("%s/%s", prompts, name);
		CHECK(stat(full, &info) == 0);
		if (S_ISREG(info.st_mode)) {
			index = prompt_file_index(name);
			if (index < 0)
				fprintf(
				    stderr,
				    "prompts/%s is not listed in this test or docs/prompts.md\n",
				    name);
			CHECK(index >= 0);
			seen[index] = 1;
		}
		free(full);
		free(name);
	}
	closedir(directory);
	free(path);
}

static void
test_real_prompts(void)
{
	const char *source = getenv("KAGENT_SOURCE_DIR");
	int seen[PROMPT_FILE_COUNT] = {0};
	char *prompts;

	if (source == NULL)
		kagent_test_skip("KAGENT_SOURCE_DIR is not set");
	prompts = kagent_asprintf("%s/prompts", source);
	check_listed(prompts, "", seen);
	check_listed(prompts, "tools", seen);
	for (size_t index = 0; index < PROMPT_FILE_COUNT; index++) {
		struct kagent_prompt_variable given[PROMPT_VARIABLES_MAX];
		char *values[PROMPT_VARIABLES_MAX] = {0};
		char *out = NULL, *error = NULL;
		size_t count = 0;

		if (!seen[index])
			fprintf(stderr, "prompts/%s is missing\n", prompt_files[index].name);
		CHECK(seen[index]);
		for (; count < PROMPT_VARIABLES_MAX && prompt_files[index].variables[count] != NULL;
		     count++) {
			values[count] =
			    kagent_asprintf("<value of %s>", prompt_files[index].variables[count]);
			given[count].name = prompt_files[index].variables[count];
			given[count].value = values[count];
		}
		if (kagent_prompt_render(prompts, prompt_files[index].name, given, count, &out,
					 &error) != 0)
			fprintf(stderr, "%s\n", error);
		CHECK(error == NULL);
		CHECK(strlen(out) > 100);
		/* Each variable a file is given is used: the list is not larger than needed. */
		for (size_t value = 0; value < count; value++)
			CHECK_CONTAINS(out, values[value]);
		if (strcmp(prompt_files[index].name, "system.md") == 0) {
			CHECK_CONTAINS(out, "@triton.jit");
			CHECK_CONTAINS(out, "cuda.compile(SOURCE");
		}
		for (size_t value = 0; value < count; value++)
			free(values[value]);
		free(out);
	}
	free(prompts);
}

static const struct kagent_test tests[] = {
    {"variables", test_variables},
    {"spaces_inside_braces", test_spaces_inside_braces},
    {"escape", test_escape},
    {"includes", test_includes},
    {"depth_cap", test_depth_cap},
    {"unknown_variable_names_line", test_unknown_variable_names_line},
    {"no_variables_known", test_no_variables_known},
    {"null_value", test_null_value},
    {"malformed_tags", test_malformed_tags},
    {"missing_include", test_missing_include},
    {"missing_template", test_missing_template},
    {"paths_refused", test_paths_refused},
    {"caps", test_caps},
    {"prompts_dir_lookup", test_prompts_dir_lookup},
    {"real_prompts", test_real_prompts},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
