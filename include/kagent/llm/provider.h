/*
 * What the LLM stack needs to know of one model endpoint: its wire format, URL,
 * model, key, sampling and reasoning options, prices and HTTP behaviour. The
 * config (agent/records/config.c) fills it from YAML, flags and the
 * environment; the LLM stack only reads it, so it knows nothing of the config.
 */
#ifndef KAGENT_PROVIDER_H
#define KAGENT_PROVIDER_H

/* The wire format of an endpoint. */
enum kagent_llm_format {
	KAGENT_LLM_FORMAT_CHAT_COMPLETIONS,
	KAGENT_LLM_FORMAT_RESPONSES,
	KAGENT_LLM_FORMAT_ANTHROPIC,
};

/* Anthropic requires max_tokens: this is sent when max_output_tokens is 0. */
#define KAGENT_PROVIDER_ANTHROPIC_MAX_TOKENS 16384

struct kagent_provider_config {
	enum kagent_llm_format format; /* provider.api: chat_completions, responses, anthropic */
	char *base_url;		       /* e.g. https://api.openai.com/v1; NULL until resolved */
	char *model;		       /* NULL when not configured */
	char *api_key_env;	     /* the variable holding the key; NULL: the format's default */
	char *api_key;		     /* from api_key_env by apply_environment; NULL when unset */
	double temperature;	     /* < 0: not sent */
	double top_p;		     /* < 0: not sent */
	long long max_output_tokens; /* 0: not sent (Anthropic requires one: 16384 then) */
	char *reasoning_effort;	     /* "low", "medium", "high" or NULL: not sent */
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

/* The formats' names as the config spells them, indexed by the enum, NULL-terminated. */
extern const char *const kagent_llm_format_names[];

const char *kagent_llm_format_name(enum kagent_llm_format format);
int kagent_llm_format_parse(const char *name, enum kagent_llm_format *format_out);

#endif
