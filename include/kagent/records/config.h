/*
 * The configuration of `kagent optimize`: the model endpoint, sampling and
 * reasoning options, budgets, the speedup target and the evaluation settings.
 * The CLI calls, in this order: kagent_config_init, kagent_config_load_file
 * (YAML, libyaml), kagent_config_set for each flag (flags override the file),
 * kagent_config_apply_environment (the SDK variables OPENAI_BASE_URL,
 * ANTHROPIC_BASE_URL and the API key fill only what is still unset, so an
 * explicit base_url wins as an explicit SDK argument does), then
 * kagent_config_validate. The API key itself is read from the environment
 * variable the config names and is never written anywhere: traces store the
 * variable's name, not its value. config/kagent.example.yaml documents every key.
 */
#ifndef KAGENT_CONFIG_H
#define KAGENT_CONFIG_H

#include "kagent/evaluator/verdict.h"
#include "kagent/llm/provider.h"

#include <jansson.h>

/* What the speedup target is measured against. */
enum kagent_target_baseline {
	KAGENT_TARGET_EAGER,   /* eager PyTorch */
	KAGENT_TARGET_COMPILE, /* torch.compile */
	KAGENT_TARGET_BEST,    /* the faster of the two */
};

struct kagent_budget_config {
	/* 0 means no limit, for each. */
	long long max_turns;	 /* default 40 */
	long long max_tokens;	 /* input + output tokens over the run */
	double max_cost;	 /* US dollars */
	double max_wall_seconds; /* default 3600 */
	double max_gpu_seconds;	 /* seconds spent in evaluations and profiles */
};

struct kagent_target_config {
	double speedup;			      /* default 1.5; 0: no target, run until the budget */
	enum kagent_target_baseline baseline; /* default best */
};

struct kagent_evaluation_config {
	char *device;		  /* "cuda" (default) or "cpu" */
	int gpu_index;		  /* default 0 */
	int call_timeout_seconds; /* 0: the evaluator's default */
	int measure_compile;	  /* time torch.compile as a baseline; default 1 */
	/* the cap on waiting for the torch.compile baseline; 0: the evaluator's default */
	int compile_timeout_seconds;
	/* hardware queues of each sandboxed child's CUDA context; 0: the evaluator's default */
	int device_queues;
	/* processes each of the eager and candidate arms is timed in; 0: the default */
	int timing_processes;
	/* the own-kernel share of GPU time a speedup needs to be credited; default 0.05 */
	double credit_threshold;
	/* the clock the speedups are read in (docs/verdict.md); default device */
	enum kagent_verdict_basis speedup_basis;
	char *worker_socket; /* NULL: the default socket, or a new worker */
};

/* Export of the run's spans to an OpenTelemetry collector (docs/telemetry.md). */
struct kagent_telemetry_config {
	char *otlp_endpoint; /* NULL: no export; spans go to <endpoint>/v1/traces */
	char *otlp_headers;  /* "Name=value,..." (a secret: traces show "[redacted]"), or NULL */
};

struct kagent_config {
	struct kagent_provider_config provider;
	struct kagent_budget_config budget;
	struct kagent_target_config target;
	struct kagent_evaluation_config evaluation;
	struct kagent_telemetry_config telemetry;
	char *output_directory;	 /* where problem repositories go; default "kagent-runs" */
	char *prompts_directory; /* NULL: kagent_paths_prompts_dir() */
	char *source_path;	 /* the file the config came from; NULL when none */
};

/* Fills config with the defaults above. */
void kagent_config_init(struct kagent_config *config);
/*
 * Reads a YAML file (at most 1 MiB) over the current values. Unknown keys,
 * duplicate keys, wrong types, out-of-range values and YAML aliases are errors
 * naming the file, line and dotted key ("kagent.yaml:7: budget.max_turns:
 * expected a non-negative integer, got 'many'"). Returns 0 or a negative errno
 * with *cause set (the caller frees it); on error config may hold some of the
 * file's values. Sets source_path on success.
 */
int kagent_config_load_file(struct kagent_config *config, const char *path, char **cause);
/*
 * The file to read when --config is not given: $KAGENT_CONFIG (whether or not
 * it exists: a name given explicitly must not be skipped silently), else the
 * first that exists of ./kagent.yaml, $XDG_CONFIG_HOME/kagent/config.yaml and
 * ~/.config/kagent/config.yaml. Returns a new string or NULL when there is none.
 */
char *kagent_config_default_path(void);
/*
 * Fills what the file and the flags left unset, as the official SDKs do:
 * base_url from OPENAI_BASE_URL (chat_completions, responses) or
 * ANTHROPIC_BASE_URL (anthropic), else the format's official endpoint;
 * api_key_env as OPENAI_API_KEY or ANTHROPIC_API_KEY; then api_key from the
 * variable api_key_env names (NULL when unset or empty). Empty variables count
 * as unset. Call after the file and the flags, before validate.
 */
void kagent_config_apply_environment(struct kagent_config *config);
/*
 * Sets one value from a flag: key is a dotted path as in the file
 * ("provider.model"), value is converted and checked as the file's would be
 * (empty, "~" or "null" unsets an optional key). Errors read "KEY: message".
 */
int kagent_config_set(struct kagent_config *config, const char *key, const char *value,
		      char **cause);
/*
 * Checks that a run can start: a model, an http:// or https:// endpoint and,
 * for the official hosts (api.openai.com, api.anthropic.com), an API key. The
 * error says exactly what to set (the YAML key, the environment variable or
 * the flag). Other endpoints need no key (local servers).
 */
int kagent_config_validate(const struct kagent_config *config, char **cause);
/*
 * The config as JSON for traces, nested as in the file, plus "source_path":
 * everything but the key's value (api_key_env is there). Unset values are
 * null. The caller releases it.
 */
json_t *kagent_config_to_json(const struct kagent_config *config);
/* Makes *to an independent copy of *from (the daemon gives each session its own); clear both. */
void kagent_config_copy(struct kagent_config *to, const struct kagent_config *from);
void kagent_config_clear(struct kagent_config *config);
/*
 * Parses headers in OTEL_EXPORTER_OTLP_HEADERS' format, "Name=value,Name=value" with
 * percent-encoded values, into NULL-terminated "Name: value" lines for the HTTP client
 * (kagent_config_free_headers frees them). Errors name the item, never a value.
 */
int kagent_config_parse_headers(const char *text, char ***lines_out, char **cause);
void kagent_config_free_headers(char **lines);
/* A one-line description of a dotted key, for usage texts; NULL for an unknown key. */
const char *kagent_config_key_help(const char *key);

const char *kagent_target_baseline_name(enum kagent_target_baseline baseline);

#endif
