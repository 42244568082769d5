/* Unit tests for agent/records/config.c: defaults, the YAML reader and its errors, flags,
 * environment. */
#include "kagent/records/config.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"
#include "kagent/base/paths.h"
#include "test.h"

#include <errno.h>
#include <unistd.h>

/* Every key, as the file and kagent_config_set name them. */
static const char *const all_keys[] = {
    "provider.api",
    "provider.base_url",
    "provider.model",
    "provider.api_key_env",
    "provider.temperature",
    "provider.top_p",
    "provider.max_output_tokens",
    "provider.reasoning_effort",
    "provider.thinking_budget_tokens",
    "provider.prices.input",
    "provider.prices.cached_input",
    "provider.prices.output",
    "provider.connect_timeout_ms",
    "provider.stall_seconds",
    "provider.max_retries",
    "budget.max_turns",
    "budget.max_tokens",
    "budget.max_cost",
    "budget.max_wall_seconds",
    "budget.max_gpu_seconds",
    "target.speedup",
    "target.baseline",
    "evaluation.device",
    "evaluation.gpu",
    "evaluation.call_timeout_seconds",
    "evaluation.measure_compile",
    "evaluation.compile_timeout_seconds",
    "evaluation.device_queues",
    "evaluation.timing_processes",
    "evaluation.credit_threshold",
    "evaluation.speedup_basis",
    "evaluation.worker_socket",
    "telemetry.otlp_endpoint",
    "telemetry.otlp_headers",
    "output_directory",
    "prompts_directory",
};

/* The SDK variables a developer's shell may carry into the test. */
static void
clear_environment(void)
{
	unsetenv("OPENAI_BASE_URL");
	unsetenv("OPENAI_API_KEY");
	unsetenv("ANTHROPIC_BASE_URL");
	unsetenv("ANTHROPIC_API_KEY");
	unsetenv("KAGENT_CONFIG");
	unsetenv("OTEL_EXPORTER_OTLP_HEADERS");
}

/* Writes text to <fresh folder>/kagent.yaml and loads it into config; returns the status. */
static int
load_text(struct kagent_config *config, const char *text, char **cause)
{
	char *directory = kagent_test_make_directory();
	char *path = kagent_test_write_file(directory, "kagent.yaml", text);
	char *detail = NULL;
	int status = kagent_config_load_file(config, path, cause);

	CHECK_INT(kagent_paths_remove_tree(directory, &detail), 0);
	free(path);
	free(directory);
	return status;
}

static void
test_defaults(void)
{
	struct kagent_config config;

	kagent_config_init(&config);
	CHECK_INT(config.provider.format, KAGENT_LLM_FORMAT_CHAT_COMPLETIONS);
	CHECK(config.provider.base_url == NULL);
	CHECK(config.provider.model == NULL);
	CHECK(config.provider.api_key_env == NULL);
	CHECK(config.provider.api_key == NULL);
	CHECK(config.provider.temperature < 0);
	CHECK(config.provider.top_p < 0);
	CHECK_INT(config.provider.max_output_tokens, 0);
	CHECK(config.provider.reasoning_effort == NULL);
	CHECK_INT(config.provider.connect_timeout_ms, 10000);
	CHECK_INT(config.provider.stall_seconds, 120);
	CHECK_INT(config.provider.max_retries, 6);
	CHECK_INT(config.budget.max_turns, 40);
	CHECK_INT(config.budget.max_tokens, 0);
	CHECK(config.budget.max_wall_seconds == 3600);
	CHECK(config.target.speedup == 1.5);
	CHECK_INT(config.target.baseline, KAGENT_TARGET_BEST);
	CHECK_STRING(config.evaluation.device, "cuda");
	CHECK_INT(config.evaluation.gpu_index, 0);
	CHECK_INT(config.evaluation.measure_compile, 1);
	CHECK(config.evaluation.credit_threshold == 0.05);
	CHECK_INT(config.evaluation.device_queues, 0);
	CHECK_INT(config.evaluation.speedup_basis, KAGENT_VERDICT_BASIS_DEVICE);
	CHECK(config.evaluation.worker_socket == NULL);
	CHECK_STRING(config.output_directory, "kagent-runs");
	CHECK(config.prompts_directory == NULL);
	CHECK(config.source_path == NULL);
	kagent_config_clear(&config);
}

static void
test_full_file(void)
{
	struct kagent_config config;
	char *error = NULL;

	kagent_config_init(&config);
	CHECK_INT(load_text(&config,
			    "# every key\n"
			    "provider:\n"
			    "  api: anthropic\n"
			    "  base_url: http://localhost:8000/v1\n"
			    "  model: claude-sonnet-4-5\n"
			    "  api_key_env: MY_KEY\n"
			    "  temperature: 0.7\n"
			    "  top_p: 0.95\n"
			    "  max_output_tokens: 32000\n"
			    "  reasoning_effort: minimal\n"
			    "  thinking_budget_tokens: 2048\n"
			    "  prices: {input: 1.25, cached_input: 0.125, output: 10.0}\n"
			    "  connect_timeout_ms: 5000\n"
			    "  stall_seconds: 60\n"
			    "  max_retries: 3\n"
			    "budget: {max_turns: 12, max_tokens: 1000000, max_cost: 2.5,\n"
			    "         max_wall_seconds: 600, max_gpu_seconds: 120}\n"
			    "target:\n"
			    "  speedup: 2\n"
			    "  baseline: compile\n"
			    "evaluation:\n"
			    "  device: cpu\n"
			    "  gpu: 3\n"
			    "  call_timeout_seconds: 90\n"
			    "  measure_compile: false\n"
			    "  worker_socket: /tmp/w.sock\n"
			    "output_directory: runs\n"
			    "prompts_directory: '/opt/prompts'\n",
			    &error),
		  0);
	CHECK(error == NULL);
	CHECK_INT(config.provider.format, KAGENT_LLM_FORMAT_ANTHROPIC);
	CHECK_STRING(config.provider.base_url, "http://localhost:8000/v1");
	CHECK_STRING(config.provider.model, "claude-sonnet-4-5");
	CHECK_STRING(config.provider.api_key_env, "MY_KEY");
	CHECK(config.provider.api_key == NULL);
	CHECK(config.provider.temperature == 0.7);
	CHECK(config.provider.top_p == 0.95);
	CHECK_INT(config.provider.max_output_tokens, 32000);
	CHECK_STRING(config.provider.reasoning_effort, "minimal");
	CHECK_INT(config.provider.thinking_budget_tokens, 2048);
	CHECK(config.provider.input_price == 1.25);
	CHECK(config.provider.cached_input_price == 0.125);
	CHECK(config.provider.output_price == 10.0);
	CHECK_INT(config.provider.connect_timeout_ms, 5000);
	CHECK_INT(config.provider.stall_seconds, 60);
	CHECK_INT(config.provider.max_retries, 3);
	CHECK_INT(config.budget.max_turns, 12);
	CHECK_INT(config.budget.max_tokens, 1000000);
	CHECK(config.budget.max_cost == 2.5);
	CHECK(config.budget.max_wall_seconds == 600);
	CHECK(config.budget.max_gpu_seconds == 120);
	CHECK(config.target.speedup == 2);
	CHECK_INT(config.target.baseline, KAGENT_TARGET_COMPILE);
	CHECK_STRING(config.evaluation.device, "cpu");
	CHECK_INT(config.evaluation.gpu_index, 3);
	CHECK_INT(config.evaluation.call_timeout_seconds, 90);
	CHECK_INT(config.evaluation.measure_compile, 0);
	CHECK_STRING(config.evaluation.worker_socket, "/tmp/w.sock");
	CHECK_STRING(config.output_directory, "runs");
	CHECK_STRING(config.prompts_directory, "/opt/prompts");
	CHECK_CONTAINS(config.source_path, "/kagent.yaml");
	kagent_config_clear(&config);
}

/* A file over the current values: what it leaves out keeps its value; null unsets. */
static void
test_file_over_values(void)
{
	struct kagent_config config;
	char *error = NULL;

	kagent_config_init(&config);
	CHECK_INT(kagent_config_set(&config, "provider.reasoning_effort", "high", &error), 0);
	CHECK_INT(kagent_config_set(&config, "provider.temperature", "0.5", &error), 0);
	CHECK_INT(load_text(&config,
			    "provider:\n  reasoning_effort: null\n  temperature: ~\n"
			    "  model: m\nbudget:\ntarget: {}\n",
			    &error),
		  0);
	CHECK(config.provider.reasoning_effort == NULL);
	CHECK(config.provider.temperature < 0);
	CHECK_STRING(config.provider.model, "m");
	CHECK_INT(config.budget.max_turns, 40);
	kagent_config_clear(&config);

	/* Empty files and files of comments only change nothing. */
	kagent_config_init(&config);
	CHECK_INT(load_text(&config, "", &error), 0);
	CHECK_INT(load_text(&config, "# nothing yet\n---\n", &error), 0);
	CHECK_INT(config.budget.max_turns, 40);
	CHECK(config.source_path != NULL);
	kagent_config_clear(&config);
}

/* Each kind of error, with the line and the dotted key. */
static void
test_errors(void)
{
	static const struct {
		const char *text;
		const char *expected;
	} cases[] = {
	    {"provider:\n  model: m\n\nbudget:\n  max_cost: 1\n\n  max_turns: many\n",
	     "kagent.yaml:7: budget.max_turns: expected a non-negative integer, got 'many'"},
	    {"budget:\n  max_turns: -1\n",
	     ":2: budget.max_turns: expected a non-negative integer, got '-1'"},
	    {"budget:\n  max_turns: 1.5\n",
	     ":2: budget.max_turns: expected a non-negative integer, got '1.5'"},
	    {"budget:\n  max_tokens: 99999999999999999999\n",
	     ":2: budget.max_tokens: 99999999999999999999 is too large (at most "},
	    {"evaluation:\n  gpu: 4294967296\n", ":2: evaluation.gpu: 4294967296 is too large"},
	    {"provider:\n  stall_seconds: 0\n",
	     ":2: provider.stall_seconds: expected a positive integer, got '0'"},
	    {"provider:\n  temperature: 3\n",
	     ":2: provider.temperature: expected a number from 0 to 2, got '3'"},
	    {"budget:\n  max_cost: nan\n",
	     ":2: budget.max_cost: expected a non-negative number, got 'nan'"},
	    {"budget:\n  max_cost: 0x10\n",
	     ":2: budget.max_cost: expected a non-negative number, got '0x10'"},
	    {"provider:\n  api: grpc\n",
	     ":2: provider.api: expected one of chat_completions, responses, anthropic, got "
	     "'grpc'"},
	    {"target:\n  baseline: fastest\n",
	     ":2: target.baseline: expected one of eager, compile, best, got 'fastest'"},
	    {"provider:\n  reasoning_effort: extreme\n",
	     ":2: provider.reasoning_effort: expected one of minimal, low, medium, high"},
	    {"evaluation:\n  device: tpu\n", ":2: evaluation.device: expected one of cuda, cpu"},
	    {"evaluation:\n  device:\n", ":2: evaluation.device: expected one of cuda, cpu, "
					 "got nothing"},
	    {"output_directory: ''\n", ":1: output_directory: expected a non-empty string, got ''"},
	    {"evaluation:\n  measure_compile: sometimes\n",
	     ":2: evaluation.measure_compile: expected true or false, got 'sometimes'"},
	    {"provider:\n  base_url: localhost:8000\n",
	     ":2: provider.base_url: expected an http:// or https:// URL, got 'localhost:8000'"},
	    {"provider:\n  modle: gpt-5\n",
	     ":2: provider.modle: unknown key (known keys under provider: api, base_url, model, "
	     "api_key_env, temperature, top_p, max_output_tokens, reasoning_effort, "
	     "thinking_budget_tokens, prices, connect_timeout_ms"},
	    {"provider:\n  prices:\n    input: 1\n    outptu: 2\n",
	     ":4: provider.prices.outptu: unknown key (known keys under provider.prices: input, "
	     "cached_input, output)"},
	    {"budget: {}\nmodel: gpt-5\n",
	     ":2: model: unknown key (known top-level keys: provider, budget, target, "
	     "evaluation, telemetry, output_directory, prompts_directory)"},
	    {"provider:\n  model:\n    name: gpt-5\n",
	     ":3: provider.model: expected a non-empty string, got a mapping"},
	    {"budget:\n  max_turns: [1, 2]\n",
	     ":2: budget.max_turns: expected a non-negative integer, got a list"},
	    {"provider:\n  - model\n", ":2: provider: expected a mapping, got a list"},
	    {"provider: gpt-5\n", ":1: provider: expected a mapping, got 'gpt-5'"},
	    {"- provider\n", ":1: expected a mapping of keys such as provider: and budget:, got a "
			     "list"},
	    {"just text\n", ":1: expected a mapping of keys such as provider: and budget:, got "
			    "'just text'"},
	    {"provider:\n  model: \"a\\0b\"\n", ":2: provider.model: a NUL character is not "
						"allowed"},
	    {"provider:\n  model: a\n budget: 1\n", ":3: invalid YAML: "},
	    {"provider:\n  model: \"gpt-5\n", "invalid YAML: found unexpected end of stream"},
	    {"provider:\n  model: &name gpt-5\n  api_key_env: *name\n",
	     ":3: YAML aliases (*name) are not supported"},
	    {"provider: {model: a}\n---\nbudget: {}\n", ":2: only one YAML document is allowed"},
	    {"? [a, b]\n: 1\n", ":1: a key must be a plain name"},
	};
	struct kagent_config config;
	char *error = NULL;

	for (size_t index = 0; index < sizeof cases / sizeof cases[0]; index++) {
		kagent_config_init(&config);
		CHECK_INT(load_text(&config, cases[index].text, &error), -EINVAL);
		if (getenv("SHOW") != NULL || strstr(error, cases[index].expected) == NULL)
			fprintf(stderr, "case %zu: %s\n", index, error);
		CHECK_CONTAINS(error, cases[index].expected);
		/* The path comes first, as the compiler's own errors do. */
		CHECK(error[0] == '/');
		CHECK(config.source_path == NULL);
		free(error);
		error = NULL;
		kagent_config_clear(&config);
	}
}

static void
test_duplicate_keys(void)
{
	struct kagent_config config;
	char *error = NULL;

	kagent_config_init(&config);
	CHECK_INT(
	    load_text(&config, "provider:\n  model: a\n  api: responses\n  model: b\n", &error),
	    -EINVAL);
	CHECK_CONTAINS(error, ":4: provider.model: duplicate key (first set at line 2)");
	free(error);
	CHECK_INT(load_text(&config, "budget: {max_turns: 1}\ntarget: {}\nbudget: {}\n", &error),
		  -EINVAL);
	CHECK_CONTAINS(error, ":3: budget: duplicate key (first set at line 1)");
	free(error);
	/* A dotted key at the top is the same key as the nested one. */
	CHECK_INT(load_text(&config, "provider:\n  model: a\nprovider.model: b\n", &error),
		  -EINVAL);
	CHECK_CONTAINS(error, ":3: provider.model: duplicate key (first set at line 2)");
	free(error);
	kagent_config_clear(&config);
}

static void
test_file_limits(void)
{
	struct kagent_config config;
	size_t size = ((size_t)1 << 20) + 16;
	char *text = kagent_malloc(size + 1), *error = NULL;

	kagent_config_init(&config);
	/* Over 1 MiB, however harmless. */
	memset(text, '#', size);
	text[size] = '\0';
	CHECK_INT(load_text(&config, text, &error), -EFBIG);
	CHECK_CONTAINS(error, "larger than");
	free(error);

	/* Deep nesting ends at the first level no key has. */
	size = 500000;
	for (size_t index = 0; index < size; index++)
		text[index] = "[{"[index % 2];
	text[size] = '\0';
	CHECK_INT(load_text(&config, text, &error), -EINVAL);
	CHECK_CONTAINS(error, "got a list");
	free(error);

	/* A billion laughs stops at its first alias. */
	CHECK_INT(load_text(&config,
			    "a: &a [x, x, x, x, x, x, x, x, x]\n"
			    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
			    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
			    &error),
		  -EINVAL);
	CHECK_CONTAINS(error, ":1: a: unknown key");
	free(error);
	CHECK_INT(load_text(&config,
			    "provider:\n  model: &a x\n  prices: {input: *a}\n"
			    "  connect_timeout_ms: [*a, *a, *a]\n",
			    &error),
		  -EINVAL);
	CHECK_CONTAINS(error, ":3: YAML aliases (*name) are not supported");
	free(error);

	/* Not UTF-8. */
	CHECK_INT(load_text(&config, "provider:\n  model: \xff\xfe\n", &error), -EINVAL);
	CHECK_CONTAINS(error, "at byte");
	free(error);

	CHECK_INT(kagent_config_load_file(&config, "/nonexistent/kagent.yaml", &error), -ENOENT);
	CHECK_CONTAINS(error, "/nonexistent/kagent.yaml");
	free(error);
	free(text);
	kagent_config_clear(&config);
}

static void
test_flags_override_file(void)
{
	struct kagent_config config;
	char *error = NULL;

	kagent_config_init(&config);
	CHECK_INT(load_text(&config,
			    "provider: {model: a, api: responses}\nbudget: {max_turns: 5}\n",
			    &error),
		  0);
	CHECK_INT(kagent_config_set(&config, "provider.model", "gpt-5", &error), 0);
	CHECK_INT(kagent_config_set(&config, "budget.max_turns", "7", &error), 0);
	CHECK_INT(kagent_config_set(&config, "provider.api", "anthropic", &error), 0);
	CHECK_INT(kagent_config_set(&config, "provider.prices.output", "15", &error), 0);
	CHECK_INT(kagent_config_set(&config, "evaluation.measure_compile", "no", &error), 0);
	CHECK_INT(kagent_config_set(&config, "target.baseline", "eager", &error), 0);
	CHECK_STRING(config.provider.model, "gpt-5");
	CHECK_INT(config.budget.max_turns, 7);
	CHECK_INT(config.provider.format, KAGENT_LLM_FORMAT_ANTHROPIC);
	CHECK(config.provider.output_price == 15);
	CHECK_INT(config.evaluation.measure_compile, 0);
	CHECK_INT(config.target.baseline, KAGENT_TARGET_EAGER);
	CHECK_INT(kagent_config_set(&config, "evaluation.credit_threshold", "0.2", &error), 0);
	CHECK(config.evaluation.credit_threshold == 0.2);
	CHECK_INT(kagent_config_set(&config, "evaluation.credit_threshold", "1.5", &error),
		  -EINVAL);
	CHECK_STRING(error,
		     "evaluation.credit_threshold: expected a number from 0 to 1, got '1.5'");
	free(error);
	CHECK_INT(kagent_config_set(&config, "evaluation.device_queues", "8", &error), 0);
	CHECK_INT(config.evaluation.device_queues, 8);
	CHECK_INT(kagent_config_set(&config, "evaluation.device_queues", "33", &error), -EINVAL);
	CHECK_STRING(error, "evaluation.device_queues: 33 is too large (at most 32)");
	free(error);
	CHECK_INT(kagent_config_set(&config, "evaluation.device_queues", "-1", &error), -EINVAL);
	CHECK_STRING(error, "evaluation.device_queues: expected an integer from 0 to 32, got '-1'");
	free(error);
	CHECK_INT(config.evaluation.device_queues, 8);
	CHECK_INT(kagent_config_set(&config, "evaluation.timing_processes", "3", &error), 0);
	CHECK_INT(config.evaluation.timing_processes, 3);
	CHECK_INT(kagent_config_set(&config, "evaluation.timing_processes", "9", &error), -EINVAL);
	CHECK_STRING(error, "evaluation.timing_processes: 9 is too large (at most 8)");
	free(error);
	CHECK_INT(kagent_config_set(&config, "evaluation.speedup_basis", "wall", &error), 0);
	CHECK_INT(config.evaluation.speedup_basis, KAGENT_VERDICT_BASIS_WALL);
	CHECK_INT(kagent_config_set(&config, "evaluation.speedup_basis", "cpu", &error), -EINVAL);
	CHECK_STRING(error, "evaluation.speedup_basis: expected one of device, wall, got 'cpu'");
	free(error);
	CHECK_INT(config.evaluation.speedup_basis, KAGENT_VERDICT_BASIS_WALL);
	CHECK_INT(load_text(&config, "evaluation: {speedup_basis: device}\n", &error), 0);
	CHECK_INT(config.evaluation.speedup_basis, KAGENT_VERDICT_BASIS_DEVICE);
	CHECK_INT(load_text(&config, "evaluation: {speedup_basis: gpu}\n", &error), -EINVAL);
	CHECK_CONTAINS(error, "evaluation.speedup_basis: expected one of device, wall, got 'gpu'");
	free(error);

	/* The same checks and messages as the file, without a line. */
	CHECK_INT(kagent_config_set(&config, "budget.max_turns", "many", &error), -EINVAL);
	CHECK_STRING(error, "budget.max_turns: expected a non-negative integer, got 'many'");
	free(error);
	CHECK_INT(config.budget.max_turns, 7);
	CHECK_INT(kagent_config_set(&config, "provider.modle", "x", &error), -EINVAL);
	CHECK_CONTAINS(error, "provider.modle: unknown key (known keys under provider: api,");
	free(error);
	CHECK_INT(kagent_config_set(&config, "nonsense", "x", &error), -EINVAL);
	CHECK_CONTAINS(error, "nonsense: unknown key (known top-level keys: provider,");
	free(error);
	CHECK_INT(kagent_config_set(&config, "provider.prices", "1", &error), -EINVAL);
	CHECK_STRING(error, "provider.prices: is a section, not a value; its keys: input, "
			    "cached_input, output");
	free(error);
	CHECK_INT(kagent_config_set(&config, "output_directory", "", &error), -EINVAL);
	CHECK_STRING(error, "output_directory: expected a non-empty string, got nothing");
	free(error);
	/* An empty value unsets an optional key. */
	CHECK_INT(kagent_config_set(&config, "provider.model", "", &error), 0);
	CHECK(config.provider.model == NULL);
	kagent_config_clear(&config);
}

static void
test_environment_precedence(void)
{
	struct kagent_config config;
	char *error = NULL;

	clear_environment();
	/* Nothing set: the official endpoint and variable. */
	kagent_config_init(&config);
	setenv("OPENAI_API_KEY", "sk-one", 1);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.base_url, "https://api.openai.com/v1");
	CHECK_STRING(config.provider.api_key_env, "OPENAI_API_KEY");
	CHECK_STRING(config.provider.api_key, "sk-one");
	kagent_config_clear(&config);

	/* The environment fills an unset base_url. */
	setenv("OPENAI_BASE_URL", "http://localhost:9000/v1", 1);
	kagent_config_init(&config);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.base_url, "http://localhost:9000/v1");
	kagent_config_clear(&config);

	/* The file's base_url wins over the environment, and so does a flag's. */
	kagent_config_init(&config);
	CHECK_INT(load_text(&config, "provider: {base_url: 'http://file:1/v1'}\n", &error), 0);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.base_url, "http://file:1/v1");
	kagent_config_clear(&config);
	kagent_config_init(&config);
	CHECK_INT(load_text(&config, "provider: {base_url: 'http://file:1/v1'}\n", &error), 0);
	CHECK_INT(kagent_config_set(&config, "provider.base_url", "http://flag:2/v1", &error), 0);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.base_url, "http://flag:2/v1");
	kagent_config_clear(&config);

	/* Anthropic reads its own variables only. */
	setenv("ANTHROPIC_API_KEY", "sk-ant", 1);
	kagent_config_init(&config);
	CHECK_INT(kagent_config_set(&config, "provider.api", "anthropic", &error), 0);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.base_url, "https://api.anthropic.com");
	CHECK_STRING(config.provider.api_key_env, "ANTHROPIC_API_KEY");
	CHECK_STRING(config.provider.api_key, "sk-ant");
	kagent_config_clear(&config);
	setenv("ANTHROPIC_BASE_URL", "https://proxy.example/anthropic", 1);
	kagent_config_init(&config);
	CHECK_INT(kagent_config_set(&config, "provider.api", "anthropic", &error), 0);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.base_url, "https://proxy.example/anthropic");
	kagent_config_clear(&config);

	/* A named variable, empty counting as unset. */
	setenv("MY_KEY", "", 1);
	kagent_config_init(&config);
	CHECK_INT(kagent_config_set(&config, "provider.api_key_env", "MY_KEY", &error), 0);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.api_key_env, "MY_KEY");
	CHECK(config.provider.api_key == NULL);
	setenv("MY_KEY", "sk-mine", 1);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.api_key, "sk-mine");
	kagent_config_clear(&config);

	setenv("OPENAI_BASE_URL", "", 1);
	kagent_config_init(&config);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.base_url, "https://api.openai.com/v1");
	kagent_config_clear(&config);
}

/* Runs apply_environment and validate on a config built by flags; returns the error or NULL. */
static char *
validate_with(const char *const *settings, size_t count)
{
	struct kagent_config config;
	char *error = NULL;

	kagent_config_init(&config);
	for (size_t index = 0; index + 1 < count; index += 2)
		CHECK_INT(kagent_config_set(&config, settings[index], settings[index + 1], &error),
			  0);
	kagent_config_apply_environment(&config);
	if (kagent_config_validate(&config, &error) == 0)
		CHECK(error == NULL);
	else
		CHECK(error != NULL);
	kagent_config_clear(&config);
	return error;
}

static void
test_validate(void)
{
	static const char *const no_model[] = {"provider.api", "responses"};
	static const char *const official[] = {"provider.model", "gpt-5"};
	static const char *const official_named[] = {"provider.model", "gpt-5",
						     "provider.api_key_env", "TEAM_KEY"};
	static const char *const anthropic[] = {"provider.model", "claude", "provider.api",
						"anthropic"};
	static const char *const local[] = {"provider.model", "qwen", "provider.base_url",
					    "http://127.0.0.1:8000/v1"};
	static const char *const disguised[] = {"provider.model", "gpt-5", "provider.base_url",
						"https://user@API.OpenAI.com:443/v1"};
	struct kagent_config config;
	char *error;

	clear_environment();
	unsetenv("TEAM_KEY");
	error = validate_with(no_model, 2);
	CHECK_STRING(error, "no model configured: set provider.model in kagent.yaml, or pass "
			    "--model NAME");
	free(error);
	error = validate_with(official, 2);
	CHECK_STRING(error, "OPENAI_API_KEY is not set: export OPENAI_API_KEY=... or name another "
			    "variable in provider.api_key_env");
	free(error);
	error = validate_with(official_named, 4);
	CHECK_STRING(error, "TEAM_KEY is not set: export TEAM_KEY=... or name another variable in "
			    "provider.api_key_env");
	free(error);
	error = validate_with(anthropic, 4);
	CHECK_CONTAINS(error, "ANTHROPIC_API_KEY is not set");
	free(error);
	error = validate_with(disguised, 4);
	CHECK_CONTAINS(error, "OPENAI_API_KEY is not set");
	free(error);
	/* Local servers need no key. */
	CHECK(validate_with(local, 4) == NULL);
	setenv("ANTHROPIC_API_KEY", "sk-ant", 1);
	CHECK(validate_with(anthropic, 4) == NULL);
	setenv("OPENAI_API_KEY", "sk-two", 1);
	CHECK(validate_with(official, 2) == NULL);

	/* A base_url from the environment is checked here, not when set. */
	setenv("OPENAI_BASE_URL", "ftp://example.com", 1);
	error = validate_with(official, 2);
	CHECK_CONTAINS(error, "'ftp://example.com'");
	CHECK_CONTAINS(error, "must start with http:// or https://");
	free(error);

	/* Without apply_environment there is no endpoint yet. */
	kagent_config_init(&config);
	CHECK_INT(kagent_config_set(&config, "provider.model", "m", &error), 0);
	CHECK_INT(kagent_config_validate(&config, &error), -EINVAL);
	CHECK_CONTAINS(error, "no endpoint configured");
	free(error);
	kagent_config_clear(&config);
}

/* Runs validate on an Anthropic config with extended thinking and the given settings. */
static char *
validate_thinking(const char *budget, const char *max_output_tokens, const char *temperature,
		  const char *top_p)
{
	const char *settings[] = {"provider.model",
				  "claude",
				  "provider.api",
				  "anthropic",
				  "provider.thinking_budget_tokens",
				  budget,
				  "provider.max_output_tokens",
				  max_output_tokens,
				  "provider.temperature",
				  temperature,
				  "provider.top_p",
				  top_p};
	/* The sampling settings only when given: unset means not sent. */
	size_t count = top_p != NULL ? 12 : temperature != NULL ? 10 : 8;

	return validate_with(settings, count);
}

/* Extended thinking is checked against what Anthropic refuses, before a request is spent. */
static void
test_validate_anthropic_thinking(void)
{
	char *error;

	clear_environment();
	setenv("ANTHROPIC_API_KEY", "sk-ant", 1);
	/* max_output_tokens 0 sends 16384. */
	CHECK(validate_thinking("2048", "0", NULL, NULL) == NULL);
	CHECK(validate_thinking("1024", "0", "1", "0.95") == NULL);
	CHECK(validate_thinking("31999", "32000", "1.0", "1") == NULL);
	/* Off: nothing to check. */
	CHECK(validate_thinking("0", "0", "0.2", "0.5") == NULL);

	error = validate_thinking("2048", "0", "0.7", NULL);
	CHECK_STRING(error, "provider.temperature is 0.7, but Anthropic's extended thinking "
			    "(provider.thinking_budget_tokens) allows only the default: unset "
			    "provider.temperature or set it to 1");
	free(error);
	error = validate_thinking("2048", "0", "0", NULL);
	CHECK_CONTAINS(error, "provider.temperature is 0,");
	free(error);
	error = validate_thinking("2048", "0", "1", "0.9");
	CHECK_STRING(error, "provider.top_p is 0.9, but Anthropic's extended thinking "
			    "(provider.thinking_budget_tokens) allows only 0.95 to 1: unset "
			    "provider.top_p or raise it");
	free(error);
	error = validate_thinking("1023", "0", NULL, NULL);
	CHECK_STRING(error, "provider.thinking_budget_tokens is 1023, but Anthropic needs at "
			    "least 1024 (or 0: thinking off)");
	free(error);
	error = validate_thinking("16384", "0", NULL, NULL);
	CHECK_STRING(error,
		     "provider.thinking_budget_tokens (16384) must be less than the "
		     "reply's max_tokens (16384, sent when provider.max_output_tokens is 0), "
		     "which counts the thinking too: raise provider.max_output_tokens or "
		     "lower the budget");
	free(error);
	error = validate_thinking("4096", "4000", NULL, NULL);
	CHECK_STRING(error,
		     "provider.thinking_budget_tokens (4096) must be less than the "
		     "reply's max_tokens (4000, provider.max_output_tokens), which counts the "
		     "thinking too: raise provider.max_output_tokens or lower the budget");
	free(error);
}

static void
test_json_never_holds_the_key(void)
{
	struct kagent_config config;
	char *error = NULL, *text;
	json_t *json;

	clear_environment();
	setenv("OPENAI_API_KEY", "sk-very-secret-value", 1);
	kagent_config_init(&config);
	CHECK_INT(load_text(&config, "provider: {model: gpt-5, prices: {input: 1.25}}\n", &error),
		  0);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.provider.api_key, "sk-very-secret-value");
	json = kagent_config_to_json(&config);
	text = json_dumps(json, JSON_COMPACT);
	CHECK(text != NULL);
	CHECK(strstr(text, "sk-very-secret") == NULL);
	CHECK(strstr(text, "\"api_key\"") == NULL);
	CHECK_CONTAINS(text, "\"api_key_env\":\"OPENAI_API_KEY\"");
	CHECK_STRING(json_string_value(json_object_get(json_object_get(json, "provider"), "api")),
		     "chat_completions");
	CHECK(json_real_value(json_object_get(
		  json_object_get(json_object_get(json, "provider"), "prices"), "input")) == 1.25);
	CHECK(json_is_null(json_object_get(json_object_get(json, "provider"), "temperature")));
	CHECK(json_is_null(json_object_get(json_object_get(json, "provider"), "reasoning_effort")));
	CHECK_INT(json_integer_value(json_object_get(json_object_get(json, "budget"), "max_turns")),
		  40);
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(json, "target"), "baseline")),
	    "best");
	CHECK(
	    json_is_true(json_object_get(json_object_get(json, "evaluation"), "measure_compile")));
	CHECK_INT(json_integer_value(json_object_get(json_object_get(json, "evaluation"), "gpu")),
		  0);
	CHECK_STRING(json_string_value(json_object_get(json, "output_directory")), "kagent-runs");
	CHECK_CONTAINS(json_string_value(json_object_get(json, "source_path")), "/kagent.yaml");
	free(text);
	json_decref(json);
	kagent_config_clear(&config);
}

static void
test_example_file(void)
{
	const char *source = getenv("KAGENT_SOURCE_DIR");
	char *path, *data, *error = NULL, *needle;
	struct kagent_config config;
	FILE *file;
	long size;

	CHECK(source != NULL);
	path = kagent_asprintf("%s/config/kagent.example.yaml", source);
	kagent_config_init(&config);
	CHECK_INT(kagent_config_load_file(&config, path, &error), 0);
	CHECK(error == NULL);
	CHECK_STRING(config.provider.model, "gpt-5");
	CHECK_INT(config.budget.max_turns, 40);
	kagent_config_clear(&config);

	/* Every key is documented there (set, or commented out) and has help. */
	file = fopen(path, "r");
	CHECK(file != NULL);
	CHECK(fseek(file, 0, SEEK_END) == 0);
	size = ftell(file);
	rewind(file);
	data = kagent_calloc(1, (size_t)size + 1);
	CHECK(fread(data, 1, (size_t)size, file) == (size_t)size);
	fclose(file);
	for (size_t index = 0; index < sizeof all_keys / sizeof all_keys[0]; index++) {
		const char *leaf = strrchr(all_keys[index], '.');

		needle = kagent_asprintf("%s:", leaf != NULL ? leaf + 1 : all_keys[index]);
		CHECK_CONTAINS(data, needle);
		free(needle);
		CHECK(kagent_config_key_help(all_keys[index]) != NULL);
	}
	CHECK(kagent_config_key_help("provider.api_key") == NULL);
	CHECK(kagent_config_key_help("provider") == NULL);
	free(data);
	free(path);
}

/* Every key takes a value through set, and the JSON has a place for each. */
static void
test_every_key_settable(void)
{
	struct kagent_config config;
	char *error = NULL;
	json_t *json;

	kagent_config_init(&config);
	json = kagent_config_to_json(&config);
	for (size_t index = 0; index < sizeof all_keys / sizeof all_keys[0]; index++) {
		const char *key = all_keys[index];
		const char *value = strstr(key, "url") != NULL || strstr(key, "endpoint") != NULL
					? "http://h/"
				    : strstr(key, "headers") != NULL   ? "A=b"
				    : strcmp(key, "provider.api") == 0 ? "responses"
				    : strstr(key, "baseline") != NULL  ? "eager"
				    : strstr(key, "effort") != NULL    ? "low"
				    : strstr(key, "basis") != NULL     ? "wall"
				    : strstr(key, "queues") != NULL    ? "1"
				    : strstr(key, "device") != NULL    ? "cpu"
				    : strstr(key, "measure_compile")   ? "true"
								       : "1";
		json_t *node = json;
		char *copy = kagent_strdup(key), *part, *rest = copy;

		CHECK_INT(kagent_config_set(&config, key, value, &error), 0);
		while ((part = strsep(&rest, ".")) != NULL) {
			node = json_object_get(node, part);
			CHECK(node != NULL);
		}
		free(copy);
	}
	/* Top-level keys, sections and source_path, nothing more. */
	CHECK_INT(json_object_size(json), 8);
	json_decref(json);
	kagent_config_clear(&config);
}

/* telemetry.otlp_headers: OTEL_EXPORTER_OTLP_HEADERS' format, checked when set, never written
 * out, never quoted in an error; the variable fills it when the file did not. */
static void
test_telemetry_headers(void)
{
	static const struct {
		const char *text;
		const char *lines[4]; /* NULL-terminated; all NULL: an error, below */
		const char *error;
	} cases[] = {
	    {"Authorization=Basic%20cGs6c2s=", {"Authorization: Basic cGs6c2s="}, NULL},
	    {" A = b , X-Y=c%2Cd,", {"A: b", "X-Y: c,d"}, NULL},
	    {"A=b  c%20", {"A: b  c"}, NULL},
	    {"", {NULL}, NULL},
	    {"A=b,secret-token", {NULL}, "header 2 has no '=' between a name and a value"},
	    {"=secret", {NULL}, "header 1 has no name before its '='"},
	    {"Bad Name=secret", {NULL}, "header 1 has a name that is not an HTTP header name"},
	    {"A=sec%2", {NULL}, "header 1 has a '%' that is not followed by two hex digits"},
	    {"A=sec%0aret", {NULL}, "header 1 has a line break or NUL in its value"},
	    {"A= ", {NULL}, "header 1 has no value after its '='"},
	};
	struct kagent_config config;
	char **lines, *error = NULL, *text;
	json_t *json;

	for (size_t index = 0; index < sizeof cases / sizeof cases[0]; index++) {
		int status = kagent_config_parse_headers(cases[index].text, &lines, &error);
		size_t count = 0;

		if (cases[index].error != NULL) {
			CHECK_INT(status, -EINVAL);
			CHECK(lines == NULL);
			CHECK_STRING(error, cases[index].error);
			free(error);
			error = NULL;
			continue;
		}
		CHECK_INT(status, 0);
		for (; lines[count] != NULL; count++)
			CHECK_STRING(lines[count], cases[index].lines[count]);
		CHECK(cases[index].lines[count] == NULL);
		kagent_config_free_headers(lines);
	}

	clear_environment();
	kagent_config_init(&config);
	CHECK_INT(load_text(&config, "telemetry:\n  otlp_headers: \"Auth=secret-one\"\n", &error),
		  0);
	CHECK_INT(kagent_config_set(&config, "telemetry.otlp_headers", "Auth", &error), -EINVAL);
	CHECK_STRING(error,
		     "telemetry.otlp_headers: header 1 has no '=' between a name and a value");
	free(error);
	error = NULL;
	/* The file's value wins over the variable. */
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "Auth=secret-two", 1);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.telemetry.otlp_headers, "Auth=secret-one");
	json = kagent_config_to_json(&config);
	text = json_dumps(json, JSON_COMPACT);
	CHECK(strstr(text, "secret") == NULL);
	CHECK_CONTAINS(text,
		       "\"telemetry\":{\"otlp_endpoint\":null,\"otlp_headers\":\"[redacted]\"}");
	free(text);
	json_decref(json);
	kagent_config_clear(&config);

	/* Unset in the file: the variable's, checked by validate without quoting it. */
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "secret-three", 1);
	kagent_config_init(&config);
	CHECK_INT(kagent_config_set(&config, "provider.model", "m", &error), 0);
	CHECK_INT(kagent_config_set(&config, "provider.base_url", "http://local:1/v1", &error), 0);
	kagent_config_apply_environment(&config);
	CHECK_STRING(config.telemetry.otlp_headers, "secret-three");
	CHECK_INT(kagent_config_validate(&config, &error), -EINVAL);
	CHECK_STRING(error, "telemetry.otlp_headers (or OTEL_EXPORTER_OTLP_HEADERS): header 1 has "
			    "no '=' between a name and a value");
	free(error);
	error = NULL;
	kagent_config_clear(&config);
	CHECK_INT(kagent_config_set(&config, "telemetry.otlp_endpoint", "collector:4318", &error),
		  -EINVAL);
	free(error);
	unsetenv("OTEL_EXPORTER_OTLP_HEADERS");
}

static void
test_default_path(void)
{
	char *directory = kagent_test_make_directory(), *path, *expected, *cause = NULL;
	char *home = kagent_asprintf("%s/home", directory);
	char *xdg = kagent_asprintf("%s/xdg", directory);
	char *work = kagent_asprintf("%s/work", directory);

	CHECK_INT(kagent_fileio_make_directories(work, 0700, &cause), 0);
	CHECK(chdir(work) == 0);
	clear_environment();
	setenv("HOME", home, 1);
	setenv("XDG_CONFIG_HOME", xdg, 1);
	CHECK(kagent_config_default_path() == NULL);

	expected = kagent_asprintf("%s/.config/kagent", home);
	CHECK_INT(kagent_fileio_make_directories(expected, 0700, &cause), 0);
	free(kagent_test_write_file(expected, "config.yaml", ""));
	free(expected);
	path = kagent_config_default_path();
	CHECK_CONTAINS(path, "/home/.config/kagent/config.yaml");
	free(path);

	expected = kagent_asprintf("%s/kagent", xdg);
	CHECK_INT(kagent_fileio_make_directories(expected, 0700, &cause), 0);
	free(kagent_test_write_file(expected, "config.yaml", ""));
	free(expected);
	path = kagent_config_default_path();
	CHECK_CONTAINS(path, "/xdg/kagent/config.yaml");
	free(path);

	free(kagent_test_write_file(work, "kagent.yaml", ""));
	path = kagent_config_default_path();
	CHECK_STRING(path, "kagent.yaml");
	free(path);

	/* Named explicitly: returned even when missing, so that reading it fails loudly. */
	setenv("KAGENT_CONFIG", "/nowhere/mine.yaml", 1);
	path = kagent_config_default_path();
	CHECK_STRING(path, "/nowhere/mine.yaml");
	free(path);

	CHECK(chdir("/") == 0);
	CHECK_INT(kagent_paths_remove_tree(directory, &cause), 0);
	free(work);
	free(xdg);
	free(home);
	free(directory);
}

static void
test_names(void)
{
	enum kagent_llm_format format;

	CHECK_STRING(kagent_llm_format_name(KAGENT_LLM_FORMAT_CHAT_COMPLETIONS),
		     "chat_completions");
	CHECK_STRING(kagent_llm_format_name(KAGENT_LLM_FORMAT_RESPONSES), "responses");
	CHECK_STRING(kagent_llm_format_name(KAGENT_LLM_FORMAT_ANTHROPIC), "anthropic");
	CHECK_INT(kagent_llm_format_parse("anthropic", &format), 0);
	CHECK_INT(format, KAGENT_LLM_FORMAT_ANTHROPIC);
	CHECK_INT(kagent_llm_format_parse("responses", &format), 0);
	CHECK_INT(format, KAGENT_LLM_FORMAT_RESPONSES);
	CHECK_INT(kagent_llm_format_parse("openai", &format), -EINVAL);
	CHECK_STRING(kagent_target_baseline_name(KAGENT_TARGET_EAGER), "eager");
	CHECK_STRING(kagent_target_baseline_name(KAGENT_TARGET_COMPILE), "compile");
	CHECK_STRING(kagent_target_baseline_name(KAGENT_TARGET_BEST), "best");
}

/* A copy owns its strings: changing or clearing one leaves the other as it was. */
static void
test_copy(void)
{
	struct kagent_config config, copy;
	char *cause = NULL;

	kagent_config_init(&config);
	CHECK_INT(kagent_config_set(&config, "provider.model", "m1", &cause), 0);
	CHECK_INT(kagent_config_set(&config, "budget.max_turns", "7", &cause), 0);
	config.provider.api_key = kagent_strdup("secret");
	kagent_config_copy(&copy, &config);
	CHECK_INT(kagent_config_set(&config, "provider.model", "m2", &cause), 0);
	CHECK_STRING(copy.provider.model, "m1");
	CHECK_INT(copy.budget.max_turns, 7);
	CHECK(copy.provider.api_key != config.provider.api_key);
	CHECK_STRING(copy.provider.api_key, "secret");
	CHECK(copy.output_directory != config.output_directory);
	kagent_config_clear(&config);
	CHECK_STRING(copy.evaluation.device, "cuda");
	kagent_config_clear(&copy);
}

static const struct kagent_test tests[] = {
    {"defaults", test_defaults},
    {"full_file", test_full_file},
    {"file_over_values", test_file_over_values},
    {"errors", test_errors},
    {"duplicate_keys", test_duplicate_keys},
    {"file_limits", test_file_limits},
    {"flags_override_file", test_flags_override_file},
    {"environment_precedence", test_environment_precedence},
    {"validate", test_validate},
    {"validate_anthropic_thinking", test_validate_anthropic_thinking},
    {"json_never_holds_the_key", test_json_never_holds_the_key},
    {"example_file", test_example_file},
    {"every_key_settable", test_every_key_settable},
    {"telemetry_headers", test_telemetry_headers},
    {"default_path", test_default_path},
    {"names", test_names},
    {"copy", test_copy},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
