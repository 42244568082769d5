/*
 * The configuration of `kagent optimize`: the model endpoint, sampling and
 * reasoning options, budgets, the speedup target and the evaluation settings.
 * It is read from a YAML file (libyaml), then the SDK environment variables
 * (OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY) and
 * then command-line flags override it, in that order. The API key itself is
 * read from the environment variable the config names and is never written
 * anywhere: traces store the variable's name, not its value.
 * config/kagent.example.yaml documents every key.
 */
#ifndef KAGENT_CONFIG_H
#define KAGENT_CONFIG_H

#include "kagent/llm_stream.h"

/* What the speedup target is measured against. */
enum kagent_target_baseline {
	KAGENT_TARGET_EAGER,   /* eager PyTorch */
	KAGENT_TARGET_COMPILE, /* torch.compile */
	KAGENT_TARGET_BEST,    /* the faster of the two */
};

struct kagent_provider_config {
	enum kagent_llm_format format; /* provider.api: chat_completions, responses, anthropic */
	char *base_url;		       /* e.g. https://api.openai.com/v1; NULL until resolved */
	char *model;		       /* NULL when not configured */
	char *api_key_env;	       /* the variable holding the key; NULL: the format's default */
	char *api_key;		       /* resolved from api_key_env at load; NULL when unset */
	double temperature;	       /* < 0: not sent */
	double top_p;		       /* < 0: not sent */
	long long max_output_tokens;   /* 0: not sent (Anthropic requires one: 16384 then) */
	char *reasoning_effort;	       /* "low", "medium", "high" or NULL: not sent */
	long long thinking_budget_tokens; /* Anthropic extended thinking; 0: off */
	/* Prices in US dollars per million tokens; 0 when unknown (cost is then reported as 0). */
	double input_price;
	double cached_input_price;
	double output_price;
	/* HTTP behaviour. */
	long connect_timeout_ms; /* default 10000 */
	long stall_seconds;	 /* no byte for this long aborts the attempt; default 120 */
	int max_retries;	 /* default 6 */
};

struct kagent_budget_config {
	/* 0 means no limit, for each. */
	long long max_turns;	   /* default 40 */
	long long max_tokens;	   /* input + output tokens over the run */
	double max_cost;	   /* US dollars */
	double max_wall_seconds;   /* default 3600 */
	double max_gpu_seconds;	   /* seconds spent in evaluations and profiles */
};

struct kagent_target_config {
	double speedup;				/* default 1.5; 0: no target, run until the budget */
	enum kagent_target_baseline baseline;	/* default best */
};

struct kagent_evaluation_config {
	char *device;		  /* "cuda" (default) or "cpu" */
	int gpu_index;		  /* default 0 */
	int call_timeout_seconds; /* 0: the evaluator's default */
	int measure_compile;	  /* time torch.compile as a baseline; default 1 */
	char *worker_socket;	  /* NULL: the default socket, or a new worker */
};

struct kagent_config {
	struct kagent_provider_config provider;
	struct kagent_budget_config budget;
	struct kagent_target_config target;
	struct kagent_evaluation_config evaluation;
	char *output_directory;	 /* where problem repositories go; default "kagent-runs" */
	char *prompts_directory; /* NULL: kagent_paths_prompts_dir() */
	char *source_path;	 /* the file the config came from; NULL when none */
};

/* Fills config with the defaults above. */
void kagent_config_init(struct kagent_config *config);
/*
 * Reads a YAML file over the current values. Unknown keys, wrong types and
 * out-of-range values are errors naming the file, line and key. Returns 0 or
 * a negative errno with *error set (the caller frees it).
 */
int kagent_config_load_file(struct kagent_config *config, const char *path, char **error);
/*
 * The file to read when --config is not given: $KAGENT_CONFIG, else
 * ./kagent.yaml, else $XDG_CONFIG_HOME/kagent/config.yaml (or ~/.config/...),
 * the first that exists. Returns a new string or NULL when there is none.
 */
char *kagent_config_default_path(void);
/*
 * Applies OPENAI_BASE_URL / ANTHROPIC_BASE_URL (when the file set no base_url)
 * and resolves the key from api_key_env (OPENAI_API_KEY or ANTHROPIC_API_KEY
 * by default), as the official SDKs do, then fills the format's default
 * base_url. Call after the file and before the flags.
 */
void kagent_config_apply_environment(struct kagent_config *config);
/* Sets one value from a flag: key is a dotted path ("provider.model"). Same errors as load. */
int kagent_config_set(struct kagent_config *config, const char *key, const char *value,
		      char **error);
/*
 * Checks that a run can start: an endpoint and a model. The error says exactly
 * what to set (the YAML key, the environment variable or the flag). An empty
 * key is allowed (local servers need none).
 */
int kagent_config_validate(const struct kagent_config *config, char **error);
/* The config as JSON for traces: everything but the key's value. The caller releases it. */
json_t *kagent_config_to_json(const struct kagent_config *config);
void kagent_config_clear(struct kagent_config *config);

const char *kagent_llm_format_name(enum kagent_llm_format format);
int kagent_llm_format_parse(const char *name, enum kagent_llm_format *format_out);
const char *kagent_target_baseline_name(enum kagent_target_baseline baseline);

#endif
