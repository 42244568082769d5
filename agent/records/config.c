/*
 * The configuration of `kagent optimize` (see include/kagent/records/config.h). One
 * table describes every key: its dotted name, its kind, where it lives in
 * struct kagent_config and a line of help. The YAML reader, kagent_config_set
 * (the flags), kagent_config_to_json and kagent_config_clear all walk that
 * table, so a key added there is read, settable, traced and freed at once.
 * The API key has no entry on purpose: it can be neither set nor written out.
 */
#include "kagent/records/config.h"

#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"
#include "kagent/base/fileio.h"
#include "kagent/evaluator/evaluation.h"
#include "kagent/evaluator/verdict.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <yaml.h>

/*
 * A config file is a page of keys. Past the size cap, the work the reader does
 * is bounded by the schema: it enters only known sections (so nesting stops at
 * provider.prices), takes each key once and refuses aliases, so any file is
 * accepted or refused within a hundred or so libyaml events.
 */
#define CONFIG_FILE_CAP ((size_t)1 << 20)
/* How much of a bad value an error message quotes. */
#define CONFIG_QUOTE_CAP 80
/* The most headers telemetry.otlp_headers may name. */
#define CONFIG_HEADERS_CAP 32

enum config__kind {
	CONFIG__TEXT,	     /* char *; with choices, one of them */
	CONFIG__URL,	     /* char *: an http:// or https:// URL */
	CONFIG__ENUMERATION, /* an enum: the index of its name in choices */
	CONFIG__INTEGER,     /* int, long or long long (by the field's size), from minimum */
	CONFIG__NUMBER,	     /* double from minimum to maximum */
	CONFIG__BOOLEAN,     /* int: 0 or 1 */
	CONFIG__HEADERS,     /* char *: "Name=value,..." (kagent_config_parse_headers); a secret */
};

struct config__key {
	const char *name; /* dotted, as in the file and kagent_config_set */
	enum config__kind kind;
	size_t offset; /* of the field in struct kagent_config */
	size_t size;   /* of the field */
	/* TEXT: the allowed values (NULL: any); ENUMERATION: the names, by value. */
	const char *const *choices;
	/* TEXT, URL: null or empty unsets the value (NULL). NUMBER: null stores -1, "not sent". */
	int optional;
	/* INTEGER: maximum 0 means the field's type bounds it */
	double minimum, maximum;
	const char *help;
};

static const char *const config__baseline_names[] = {
    [KAGENT_TARGET_EAGER] = "eager",
    [KAGENT_TARGET_COMPILE] = "compile",
    [KAGENT_TARGET_BEST] = "best",
    [KAGENT_TARGET_BEST + 1] = NULL,
};
static const char *const config__effort_names[] = {"minimal", "low", "medium", "high", NULL};
static const char *const config__device_names[] = {"cuda", "cpu", NULL};
/* By value, as the verdict's basis names; here because records does not link the evaluator. */
static const char *const config__basis_names[] = {
    [KAGENT_VERDICT_BASIS_DEVICE] = "device",
    [KAGENT_VERDICT_BASIS_WALL] = "wall",
    [KAGENT_VERDICT_BASIS_COUNT] = NULL,
};

/* An ENUMERATION field is written and read as an int. */
_Static_assert(sizeof(enum kagent_llm_format) == sizeof(int), "enum size");
_Static_assert(sizeof(enum kagent_target_baseline) == sizeof(int), "enum size");
_Static_assert(sizeof(enum kagent_verdict_basis) == sizeof(int), "enum size");
/* An INTEGER field is either as wide as int or as long long. */
_Static_assert(sizeof(long) == sizeof(int) || sizeof(long) == sizeof(long long), "long size");

#define CONFIG__FIELD(member)                                                                      \
	.offset = offsetof(struct kagent_config, member),                                          \
	.size = sizeof(((struct kagent_config *)NULL)->member)

/* clang-format off */
static const struct config__key config__keys[] = {
	{.name = "provider.api", .kind = CONFIG__ENUMERATION, CONFIG__FIELD(provider.format),
	 .choices = kagent_llm_format_names,
	 .help = "the wire format: chat_completions, responses (OpenAI) or anthropic"},
	{.name = "provider.base_url", .kind = CONFIG__URL, CONFIG__FIELD(provider.base_url),
	 .optional = 1,
	 .help = "the endpoint; unset: OPENAI_BASE_URL or ANTHROPIC_BASE_URL, else the official one"},
	{.name = "provider.model", .kind = CONFIG__TEXT, CONFIG__FIELD(provider.model),
	 .optional = 1, .help = "the model the endpoint serves, e.g. gpt-5"},
	{.name = "provider.api_key_env", .kind = CONFIG__TEXT, CONFIG__FIELD(provider.api_key_env),
	 .optional = 1,
	 .help = "the environment variable holding the API key; unset: OPENAI_API_KEY or "
		 "ANTHROPIC_API_KEY"},
	{.name = "provider.temperature", .kind = CONFIG__NUMBER, CONFIG__FIELD(provider.temperature),
	 .optional = 1, .maximum = 2, .help = "sampling temperature, 0 to 2; unset: not sent"},
	{.name = "provider.top_p", .kind = CONFIG__NUMBER, CONFIG__FIELD(provider.top_p),
	 .optional = 1, .maximum = 1, .help = "nucleus sampling, 0 to 1; unset: not sent"},
	{.name = "provider.max_output_tokens", .kind = CONFIG__INTEGER,
	 CONFIG__FIELD(provider.max_output_tokens),
	 .help = "the most tokens in one reply; 0: not sent (16384 for anthropic)"},
	{.name = "provider.reasoning_effort", .kind = CONFIG__TEXT,
	 CONFIG__FIELD(provider.reasoning_effort), .choices = config__effort_names, .optional = 1,
	 .help = "minimal, low, medium or high; unset: not sent"},
	{.name = "provider.thinking_budget_tokens", .kind = CONFIG__INTEGER,
	 CONFIG__FIELD(provider.thinking_budget_tokens),
	 .help = "Anthropic extended thinking budget in tokens, 1024 or more and below the "
		 "reply's max_tokens; 0: off"},
	{.name = "provider.prices.input", .kind = CONFIG__NUMBER, CONFIG__FIELD(provider.input_price),
	 .maximum = DBL_MAX, .help = "US dollars per million input tokens; 0: unknown"},
	{.name = "provider.prices.cached_input", .kind = CONFIG__NUMBER,
	 CONFIG__FIELD(provider.cached_input_price), .maximum = DBL_MAX,
	 .help = "US dollars per million cached input tokens"},
	{.name = "provider.prices.output", .kind = CONFIG__NUMBER, CONFIG__FIELD(provider.output_price),
	 .maximum = DBL_MAX, .help = "US dollars per million output tokens"},
	{.name = "provider.connect_timeout_ms", .kind = CONFIG__INTEGER,
	 CONFIG__FIELD(provider.connect_timeout_ms), .minimum = 1,
	 .help = "milliseconds allowed to connect to the endpoint"},
	{.name = "provider.stall_seconds", .kind = CONFIG__INTEGER,
	 CONFIG__FIELD(provider.stall_seconds), .minimum = 1,
	 .help = "seconds without a byte from the endpoint before an attempt is abandoned"},
	{.name = "provider.max_retries", .kind = CONFIG__INTEGER, CONFIG__FIELD(provider.max_retries),
	 .help = "retries of a failed model call"},
	{.name = "budget.max_turns", .kind = CONFIG__INTEGER, CONFIG__FIELD(budget.max_turns),
	 .help = "model turns; 0: no limit"},
	{.name = "budget.max_tokens", .kind = CONFIG__INTEGER, CONFIG__FIELD(budget.max_tokens),
	 .help = "input plus output tokens over the run; 0: no limit"},
	{.name = "budget.max_cost", .kind = CONFIG__NUMBER, CONFIG__FIELD(budget.max_cost),
	 .maximum = DBL_MAX, .help = "US dollars over the run; 0: no limit"},
	{.name = "budget.max_wall_seconds", .kind = CONFIG__NUMBER,
	 CONFIG__FIELD(budget.max_wall_seconds), .maximum = DBL_MAX,
	 .help = "seconds of wall time; 0: no limit"},
	{.name = "budget.max_gpu_seconds", .kind = CONFIG__NUMBER,
	 CONFIG__FIELD(budget.max_gpu_seconds), .maximum = DBL_MAX,
	 .help = "seconds spent in evaluations and profiles; 0: no limit"},
	{.name = "target.speedup", .kind = CONFIG__NUMBER, CONFIG__FIELD(target.speedup),
	 .maximum = DBL_MAX, .help = "the speedup to reach; 0: no target, run until the budget ends"},
	{.name = "target.baseline", .kind = CONFIG__ENUMERATION, CONFIG__FIELD(target.baseline),
	 .choices = config__baseline_names,
	 .help = "what the speedup is measured against: eager, compile or best"},
	{.name = "evaluation.device", .kind = CONFIG__TEXT, CONFIG__FIELD(evaluation.device),
	 .choices = config__device_names, .help = "where candidates run: cuda or cpu"},
	{.name = "evaluation.gpu", .kind = CONFIG__INTEGER, CONFIG__FIELD(evaluation.gpu_index),
	 .help = "the index of the GPU to use"},
	{.name = "evaluation.call_timeout_seconds", .kind = CONFIG__INTEGER,
	 CONFIG__FIELD(evaluation.call_timeout_seconds),
	 .help = "seconds one evaluation may take; 0: the evaluator's default"},
	{.name = "evaluation.measure_compile", .kind = CONFIG__BOOLEAN,
	 CONFIG__FIELD(evaluation.measure_compile),
	 .help = "also time torch.compile as a baseline: true or false"},
	{.name = "evaluation.compile_timeout_seconds", .kind = CONFIG__INTEGER,
	 CONFIG__FIELD(evaluation.compile_timeout_seconds),
	 .help = "seconds an evaluation waits for the torch.compile baseline before it goes "
		 "without it (the verdict says why), up to 240; 0: the evaluator's default, 60"},
	{.name = "evaluation.device_queues", .kind = CONFIG__INTEGER,
	 CONFIG__FIELD(evaluation.device_queues), .maximum = KAGENT_EVALUATION_DEVICE_QUEUES_MAX,
	 .help = "hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) of each sandboxed child's CUDA "
		 "context, every arm alike, up to 32; 0: the evaluator's default, 1"},
	{.name = "evaluation.timing_processes", .kind = CONFIG__INTEGER,
	 CONFIG__FIELD(evaluation.timing_processes),
	 .maximum = KAGENT_EVALUATION_TIMING_PROCESSES_MAX,
	 .help = "processes the eager arm and the candidate's are each timed in (on a GPU where "
		 "the reference's call is under 0.1 ms), up to 8; 0: the evaluator's default, 4 on "
		 "a GPU and 1 on the CPU"},
	{.name = "evaluation.credit_threshold", .kind = CONFIG__NUMBER,
	 CONFIG__FIELD(evaluation.credit_threshold), .maximum = 1,
	 .help = "the share of GPU time a candidate's own kernels need for its speedup to count "
		 "(toward best, the target, reports), 0 to 1; 0: the evaluator's default, 0.05"},
	{.name = "evaluation.speedup_basis", .kind = CONFIG__ENUMERATION,
	 CONFIG__FIELD(evaluation.speedup_basis), .choices = config__basis_names,
	 .help = "the clock speedups are read in: device (CUPTI's kernel and copy time per call; "
		 "wall where none was measured) or wall (the judge's clock around each call)"},
	{.name = "evaluation.worker_socket", .kind = CONFIG__TEXT,
	 CONFIG__FIELD(evaluation.worker_socket), .optional = 1,
	 .help = "the socket of a running kagent worker; unset: the default socket, or a new worker"},
	{.name = "telemetry.otlp_endpoint", .kind = CONFIG__URL,
	 CONFIG__FIELD(telemetry.otlp_endpoint), .optional = 1,
	 .help = "an OTLP/HTTP receiver: spans go to ENDPOINT/v1/traces as JSON; unset: no export"},
	{.name = "telemetry.otlp_headers", .kind = CONFIG__HEADERS,
	 CONFIG__FIELD(telemetry.otlp_headers), .optional = 1,
	 .help = "headers sent with the spans, Name=value pairs separated by commas, values "
		 "percent-encoded; unset: $OTEL_EXPORTER_OTLP_HEADERS. Never traced"},
	{.name = "output_directory", .kind = CONFIG__TEXT, CONFIG__FIELD(output_directory),
	 .help = "where the problem repositories go"},
	{.name = "prompts_directory", .kind = CONFIG__TEXT, CONFIG__FIELD(prompts_directory),
	 .optional = 1, .help = "the folder of system prompts; unset: the installed prompts"},
};
/* clang-format on */
#define CONFIG_KEY_COUNT (sizeof config__keys / sizeof config__keys[0])

/* A key the file has set, with its line, to report duplicates. */
struct config__seen {
	char *name;
	size_t line;
};

struct config__reader {
	yaml_parser_t parser;
	struct kagent_config *config;
	const char *path;
	struct config__seen seen[CONFIG_KEY_COUNT * 2]; /* every key and section, at most once */
	size_t seen_count;
	char *error;
};

/* Whether the key's field is a char * the config owns. */
static int
config__is_string(const struct config__key *key)
{
	return key->kind == CONFIG__TEXT || key->kind == CONFIG__URL ||
	       key->kind == CONFIG__HEADERS;
}

static void *
config__field(const struct kagent_config *config, const struct config__key *key)
{
	return (char *)config + key->offset;
}

static const struct config__key *
config__find_key(const char *name)
{
	for (size_t index = 0; index < CONFIG_KEY_COUNT; index++)
		if (strcmp(config__keys[index].name, name) == 0)
			return &config__keys[index];
	return NULL;
}

/* Whether some key lies under name ("provider", "provider.prices"). */
static int
config__is_section(const char *name)
{
	size_t length = strlen(name);

	for (size_t index = 0; index < CONFIG_KEY_COUNT; index++)
		if (strncmp(config__keys[index].name, name, length) == 0 &&
		    config__keys[index].name[length] == '.')
			return 1;
	return 0;
}

/* "a, b, c" from a NULL-terminated list. */
static char *
config__join(const char *const *names)
{
	struct kagent_buffer buffer = {0};

	for (size_t index = 0; names[index] != NULL; index++) {
		if (index > 0)
			kagent_buffer_append(&buffer, ", ", 2);
		kagent_buffer_append(&buffer, names[index], strlen(names[index]));
	}
	return kagent_buffer_take(&buffer);
}

/* The names directly under section (NULL: the top level), comma-separated. */
static char *
config__children(const char *section)
{
	struct kagent_buffer buffer = {0};
	size_t prefix_length = section != NULL ? strlen(section) + 1 : 0;

	for (size_t index = 0; index < CONFIG_KEY_COUNT; index++) {
		const char *name = config__keys[index].name;
		size_t length;
		int repeated = 0;

		if (section != NULL && (strncmp(name, section, prefix_length - 1) != 0 ||
					name[prefix_length - 1] != '.'))
			continue;
		name += prefix_length;
		length = strcspn(name, ".");
		/* Sections appear once for each of their keys; list them once. */
		for (size_t earlier = 0; earlier < index && !repeated; earlier++) {
			const char *other = config__keys[earlier].name;

			repeated =
			    strncmp(other, config__keys[index].name, prefix_length + length) == 0 &&
			    (other[prefix_length + length] == '.' ||
			     other[prefix_length + length] == '\0');
		}
		if (repeated)
			continue;
		if (buffer.length > 0)
			kagent_buffer_append(&buffer, ", ", 2);
		kagent_buffer_append(&buffer, name, length);
	}
	return kagent_buffer_take(&buffer);
}

/* Why name is no key, and what the keys near it are. */
static char *
config__unknown_key_message(const char *name)
{
	char *section = kagent_strdup(name), *children, *message;
	char *dot;

	if (config__is_section(name)) {
		children = config__children(name);
		message = kagent_asprintf("is a section, not a value; its keys: %s", children);
		goto out;
	}
	/* The longest known section name starts with. */
	while ((dot = strrchr(section, '.')) != NULL) {
		*dot = '\0';
		if (config__is_section(section))
			break;
	}
	if (dot == NULL) {
		children = config__children(NULL);
		message = kagent_asprintf("unknown key (known top-level keys: %s)", children);
	} else {
		children = config__children(section);
		message =
		    kagent_asprintf("unknown key (known keys under %s: %s)", section, children);
	}
out:
	free(children);
	free(section);
	return message;
}

/* What a key takes, for "expected ..., got ..." messages. */
static char *
config__describe(const struct config__key *key)
{
	char *choices, *description;

	switch (key->kind) {
	case CONFIG__TEXT:
	case CONFIG__ENUMERATION:
		if (key->choices == NULL)
			return kagent_strdup("a non-empty string");
		choices = config__join(key->choices);
		description = kagent_asprintf("one of %s", choices);
		free(choices);
		return description;
	case CONFIG__URL:
		return kagent_strdup("an http:// or https:// URL");
	case CONFIG__INTEGER:
		if (key->maximum > 0)
			return kagent_asprintf("an integer from %g to %g", key->minimum,
					       key->maximum);
		return kagent_strdup(key->minimum > 0 ? "a positive integer"
						      : "a non-negative integer");
	case CONFIG__NUMBER:
		if (key->maximum == DBL_MAX)
			return kagent_strdup("a non-negative number");
		return kagent_asprintf("a number from %g to %g", key->minimum, key->maximum);
	case CONFIG__BOOLEAN:
		return kagent_strdup("true or false");
	case CONFIG__HEADERS:
		return kagent_strdup("Name=value pairs separated by commas");
	}
	return kagent_strdup("a value");
}

/* "expected <what key takes>, got '<text>'", the text cut short. */
static char *
config__expected(const struct config__key *key, const char *got)
{
	char *description = config__describe(key);
	char *message;

	if (got == NULL)
		message = kagent_asprintf("expected %s, got nothing", description);
	else
		message =
		    kagent_asprintf("expected %s, got '%.*s%s'", description, CONFIG_QUOTE_CAP, got,
				    strlen(got) > CONFIG_QUOTE_CAP ? "..." : "");
	free(description);
	return message;
}

/* YAML's null: an empty plain scalar, ~ or null. */
static int
config__is_null_text(const char *text)
{
	return text == NULL || text[0] == '\0' || strcmp(text, "~") == 0 ||
	       strcmp(text, "null") == 0 || strcmp(text, "Null") == 0 || strcmp(text, "NULL") == 0;
}

static int
config__index_of(const char *const *names, const char *text)
{
	for (int index = 0; names[index] != NULL; index++)
		if (strcmp(names[index], text) == 0)
			return index;
	return -1;
}

static int
config__is_http_url(const char *text)
{
	return (strncasecmp(text, "http://", 7) == 0 && text[7] != '\0') ||
	       (strncasecmp(text, "https://", 8) == 0 && text[8] != '\0');
}

/* Decimal digits only: no sign, exponent, hex or space, which strtoll would let through. */
static int
config__parse_integer(const char *text, long long *out)
{
	char *end;

	if (text[0] < '0' || text[0] > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoll(text, &end, 10);
	if (*end != '\0')
		return -EINVAL;
	return errno == ERANGE ? -ERANGE : 0;
}

/* A finite decimal number; strtod's hex, inf and nan are refused. */
static int
config__parse_number(const char *text, double *out)
{
	char *end;

	if (strchr("0123456789.+-", text[0]) == NULL || text[0] == '\0' ||
	    strpbrk(text, "xXnN") != NULL)
		return -EINVAL;
	*out = strtod(text, &end);
	return *end == '\0' && isfinite(*out) ? 0 : -EINVAL;
}

static int
config__parse_boolean(const char *text, int *out)
{
	static const char *const truths[] = {"true", "yes", "on", NULL};
	static const char *const falsehoods[] = {"false", "no", "off", NULL};

	for (size_t index = 0; truths[index] != NULL; index++) {
		if (strcasecmp(text, truths[index]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(text, falsehoods[index]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

static void
config__store_integer(void *field, size_t size, long long value)
{
	if (size == sizeof(int)) {
		int narrow = (int)value;

		memcpy(field, &narrow, sizeof narrow);
	} else {
		memcpy(field, &value, sizeof value);
	}
}

static long long
config__load_integer(const void *field, size_t size)
{
	long long wide;
	int narrow;

	if (size == sizeof(int)) {
		memcpy(&narrow, field, sizeof narrow);
		return narrow;
	}
	memcpy(&wide, field, sizeof wide);
	return wide;
}

/*
 * Converts text (null: YAML's null) to the key's kind and stores it: the one
 * place where a file's value and a flag's value are checked. Returns 0, or
 * -EINVAL with *cause set.
 */
static int
config__assign(struct kagent_config *config, const struct config__key *key, const char *text,
	       int null, char **cause)
{
	void *field = config__field(config, key);
	long long integer;
	double number;
	int boolean, index, status = 0;
	char **string = field;

	*cause = NULL;
	if (null || text[0] == '\0') {
		if (!key->optional)
			goto invalid;
		if (key->kind == CONFIG__NUMBER) {
			number = -1;
			memcpy(field, &number, sizeof number);
		} else {
			free(*string);
			*string = NULL;
		}
		goto out;
	}
	switch (key->kind) {
	case CONFIG__TEXT:
	case CONFIG__URL:
		if ((key->kind == CONFIG__URL && !config__is_http_url(text)) ||
		    (key->choices != NULL && config__index_of(key->choices, text) < 0))
			goto invalid;
		free(*string);
		*string = kagent_strdup(text);
		break;
	case CONFIG__ENUMERATION:
		if ((index = config__index_of(key->choices, text)) < 0)
			goto invalid;
		memcpy(field, &index, sizeof index);
		break;
	case CONFIG__INTEGER: {
		long long maximum = key->maximum > 0	       ? (long long)key->maximum
				    : key->size == sizeof(int) ? INT_MAX
							       : LLONG_MAX;

		status = config__parse_integer(text, &integer);
		if (status == -ERANGE || (status == 0 && integer > maximum)) {
			*cause = kagent_asprintf("%.*s is too large (at most %lld)",
						 CONFIG_QUOTE_CAP, text, maximum);
			status = -EINVAL;
			goto out;
		}
		if (status < 0 || integer < key->minimum)
			goto invalid;
		config__store_integer(field, key->size, integer);
		break;
	}
	case CONFIG__NUMBER:
		if (config__parse_number(text, &number) < 0 || number < key->minimum ||
		    number > key->maximum)
			goto invalid;
		memcpy(field, &number, sizeof number);
		break;
	case CONFIG__BOOLEAN:
		if (config__parse_boolean(text, &boolean) < 0)
			goto invalid;
		memcpy(field, &boolean, sizeof boolean);
		break;
	case CONFIG__HEADERS: {
		char **lines;

		/* Its own message, which never quotes the text: it holds secrets. */
		if ((status = kagent_config_parse_headers(text, &lines, cause)) < 0)
			goto out;
		kagent_config_free_headers(lines);
		free(*string);
		*string = kagent_strdup(text);
		break;
	}
	}
	goto out;
invalid:
	*cause = config__expected(key, null ? NULL : text);
	status = -EINVAL;
out:
	return status;
}

/* Records "path:line: key: message" (line 0: none) as the reader's error; returns -EINVAL. */
static int config__fail(struct config__reader *reader, size_t line, const char *key,
			const char *format, ...) __attribute__((format(printf, 4, 5)));

static int
config__fail(struct config__reader *reader, size_t line, const char *key, const char *format, ...)
{
	va_list arguments;
	char *message, *location;

	va_start(arguments, format);
	message = kagent_vasprintf(format, arguments);
	va_end(arguments);
	location =
	    line > 0 ? kagent_asprintf("%s:%zu", reader->path, line) : kagent_strdup(reader->path);
	free(reader->error);
	if (key != NULL)
		reader->error = kagent_asprintf("%s: %s: %s", location, key, message);
	else
		reader->error = kagent_asprintf("%s: %s", location, message);
	free(location);
	free(message);
	return -EINVAL;
}

static size_t
config__line(const yaml_event_t *event)
{
	return event->start_mark.line + 1;
}

/* Reads the next event; a syntax error or an alias is an error. */
static int
config__next(struct config__reader *reader, yaml_event_t *event)
{
	yaml_parser_t *parser = &reader->parser;
	size_t line;

	if (!yaml_parser_parse(parser, event)) {
		/* The reader (bytes to characters) knows no line, only an offset. */
		if (parser->error == YAML_READER_ERROR)
			return config__fail(reader, 0, NULL, "%s at byte %zu", parser->problem,
					    parser->problem_offset);
		if (parser->context != NULL)
			return config__fail(reader, parser->problem_mark.line + 1, NULL,
					    "invalid YAML: %s (%s at line %zu)", parser->problem,
					    parser->context, parser->context_mark.line + 1);
		return config__fail(reader, parser->problem_mark.line + 1, NULL, "invalid YAML: %s",
				    parser->problem != NULL ? parser->problem : "unknown error");
	}
	if (event->type == YAML_ALIAS_EVENT) {
		/* No key needs one, and refusing them rules out alias bombs. */
		line = config__line(event);
		yaml_event_delete(event);
		return config__fail(reader, line, NULL, "YAML aliases (*name) are not supported");
	}
	return 0;
}

/* A scalar's text; one with a NUL inside (from a "\0" escape) is refused. */
static int
config__scalar_text(struct config__reader *reader, const yaml_event_t *event, const char *key,
		    const char **text)
{
	*text = (const char *)event->data.scalar.value;
	if (strlen(*text) != event->data.scalar.length)
		return config__fail(reader, config__line(event), key,
				    "a NUL character is not allowed");
	return 0;
}

static int
config__is_null_event(const yaml_event_t *event)
{
	return event->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       config__is_null_text((const char *)event->data.scalar.value);
}

static int config__read_mapping(struct config__reader *reader, const char *prefix);

/* Reads the value of name: a key's (key) or, with key NULL, a section's. */
static int
config__read_value(struct config__reader *reader, const char *name, const struct config__key *key)
{
	yaml_event_t event;
	const char *text;
	char *message = NULL, *expected;
	size_t line;
	int status;

	if ((status = config__next(reader, &event)) < 0)
		return status;
	line = config__line(&event);
	switch (event.type) {
	case YAML_MAPPING_START_EVENT:
		if (key == NULL) {
			status = config__read_mapping(reader, name);
			break;
		}
		expected = config__describe(key);
		status = config__fail(reader, line, name, "expected %s, got a mapping", expected);
		free(expected);
		break;
	case YAML_SEQUENCE_START_EVENT:
		expected = key != NULL ? config__describe(key) : kagent_strdup("a mapping");
		status = config__fail(reader, line, name, "expected %s, got a list", expected);
		free(expected);
		break;
	case YAML_SCALAR_EVENT:
		if ((status = config__scalar_text(reader, &event, name, &text)) < 0)
			break;
		if (key == NULL) {
			/* "provider:" with nothing under it is an empty section. */
			if (!config__is_null_event(&event))
				status = config__fail(reader, line, name,
						      "expected a mapping, got '%.*s'",
						      CONFIG_QUOTE_CAP, text);
			break;
		}
		status = config__assign(reader->config, key, text, config__is_null_event(&event),
					&message);
		if (status < 0)
			config__fail(reader, line, name, "%s", message);
		break;
	default:
		status = config__fail(reader, line, name, "unexpected YAML");
		break;
	}
	free(message);
	yaml_event_delete(&event);
	return status;
}

/* Reads the pairs of a mapping whose start was just read; prefix is its dotted name or NULL. */
static int
config__read_mapping(struct config__reader *reader, const char *prefix)
{
	const struct config__key *key;
	yaml_event_t event;
	const char *text;
	char *name = NULL, *message;
	size_t line;
	int status;

	for (;;) {
		if ((status = config__next(reader, &event)) < 0)
			goto out;
		line = config__line(&event);
		if (event.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&event);
			goto out;
		}
		if (event.type != YAML_SCALAR_EVENT) {
			status = config__fail(reader, line, prefix, "a key must be a plain name");
		} else if ((status = config__scalar_text(reader, &event, prefix, &text)) == 0) {
			name = prefix != NULL ? kagent_asprintf("%s.%s", prefix, text)
					      : kagent_strdup(text);
		}
		yaml_event_delete(&event);
		if (status < 0)
			goto out;
		key = config__find_key(name);
		if (key == NULL && !config__is_section(name)) {
			message = config__unknown_key_message(name);
			status = config__fail(reader, line, name, "%s", message);
			free(message);
			goto out;
		}
		for (size_t index = 0; index < reader->seen_count; index++) {
			if (strcmp(reader->seen[index].name, name) == 0) {
				status = config__fail(reader, line, name,
						      "duplicate key (first set at line %zu)",
						      reader->seen[index].line);
				goto out;
			}
		}
		reader->seen[reader->seen_count++] = (struct config__seen){name, line};
		status = config__read_value(reader, name, key);
		name = NULL; /* owned by seen */
		if (status < 0)
			goto out;
	}
out:
	free(name);
	return status;
}

/* Reads the stream: nothing, or one document whose top is a mapping (or null). */
static int
config__read_stream(struct config__reader *reader)
{
	const char *top = "expected a mapping of keys such as provider: and budget:";
	yaml_event_type_t type;
	yaml_event_t event;
	int documents = 0, status;

	do {
		if ((status = config__next(reader, &event)) < 0)
			return status;
		switch (event.type) {
		case YAML_DOCUMENT_START_EVENT:
			if (++documents > 1)
				status = config__fail(reader, config__line(&event), NULL,
						      "only one YAML document is allowed");
			break;
		case YAML_MAPPING_START_EVENT:
			status = config__read_mapping(reader, NULL);
			break;
		case YAML_SEQUENCE_START_EVENT:
			status =
			    config__fail(reader, config__line(&event), NULL, "%s, got a list", top);
			break;
		case YAML_SCALAR_EVENT:
			if (!config__is_null_event(&event))
				status = config__fail(reader, config__line(&event), NULL,
						      "%s, got '%.*s'", top, CONFIG_QUOTE_CAP,
						      event.data.scalar.value);
			break;
		default: /* the stream's start and end, a document's end */
			break;
		}
		type = event.type;
		yaml_event_delete(&event);
	} while (status == 0 && type != YAML_STREAM_END_EVENT);
	return status;
}

void
kagent_config_init(struct kagent_config *config)
{
	*config = (struct kagent_config){
	    .provider =
		{
		    .format = KAGENT_LLM_FORMAT_CHAT_COMPLETIONS,
		    .temperature = -1,
		    .top_p = -1,
		    .connect_timeout_ms = 10000,
		    .stall_seconds = 120,
		    .max_retries = 6,
		},
	    .budget = {.max_turns = 40, .max_wall_seconds = 3600},
	    .target = {.speedup = 1.5, .baseline = KAGENT_TARGET_BEST},
	    .evaluation = {.device = kagent_strdup("cuda"),
			   .measure_compile = 1,
			   .credit_threshold = KAGENT_VERDICT_CREDIT_THRESHOLD,
			   .speedup_basis = KAGENT_VERDICT_BASIS_DEVICE},
	    .output_directory = kagent_strdup("kagent-runs"),
	};
}

int
kagent_config_load_file(struct kagent_config *config, const char *path, char **cause)
{
	struct config__reader reader = {.config = config, .path = path};
	int parser_ready = 0, status;
	char *data = NULL;
	size_t size;

	*cause = NULL;
	status = kagent_fileio_read(path, CONFIG_FILE_CAP, &data, &size, cause);
	if (status < 0)
		goto out;
	if (!yaml_parser_initialize(&reader.parser)) {
		status = -ENOMEM;
		*cause = kagent_asprintf("%s: cannot start the YAML parser", path);
		goto out;
	}
	parser_ready = 1;
	yaml_parser_set_input_string(&reader.parser, (const unsigned char *)data, size);
	status = config__read_stream(&reader);
	if (status < 0) {
		*cause = reader.error;
		reader.error = NULL;
		goto out;
	}
	free(config->source_path);
	config->source_path = kagent_strdup(path);
out:
	if (parser_ready)
		yaml_parser_delete(&reader.parser);
	for (size_t index = 0; index < reader.seen_count; index++)
		free(reader.seen[index].name);
	free(reader.error);
	free(data);
	return status;
}

/* An empty variable counts as unset, as a shell user who wrote VAR= expects. */
static const char *
config__getenv(const char *name)
{
	const char *value = getenv(name);

	return value != NULL && value[0] != '\0' ? value : NULL;
}

char *
kagent_config_default_path(void)
{
	const char *value = config__getenv("KAGENT_CONFIG");
	char *candidates[2] = {NULL, NULL};
	char *found = NULL;

	/* Named explicitly, so a missing file is an error when it is read, not skipped. */
	if (value != NULL)
		return kagent_strdup(value);
	if (access("kagent.yaml", F_OK) == 0)
		return kagent_strdup("kagent.yaml");
	if ((value = config__getenv("XDG_CONFIG_HOME")) != NULL)
		candidates[0] = kagent_asprintf("%s/kagent/config.yaml", value);
	if ((value = config__getenv("HOME")) != NULL)
		candidates[1] = kagent_asprintf("%s/.config/kagent/config.yaml", value);
	for (size_t index = 0; index < 2; index++) {
		if (found == NULL && candidates[index] != NULL &&
		    access(candidates[index], F_OK) == 0) {
			found = candidates[index];
			candidates[index] = NULL;
		}
		free(candidates[index]);
	}
	return found;
}

static const char *
config__default_key_env(enum kagent_llm_format format)
{
	return format == KAGENT_LLM_FORMAT_ANTHROPIC ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
}

void
kagent_config_apply_environment(struct kagent_config *config)
{
	struct kagent_provider_config *provider = &config->provider;
	int anthropic = provider->format == KAGENT_LLM_FORMAT_ANTHROPIC;
	const char *value;

	if (provider->base_url == NULL) {
		value = config__getenv(anthropic ? "ANTHROPIC_BASE_URL" : "OPENAI_BASE_URL");
		if (value == NULL)
			value =
			    anthropic ? "https://api.anthropic.com" : "https://api.openai.com/v1";
		provider->base_url = kagent_strdup(value);
	}
	if (provider->api_key_env == NULL)
		provider->api_key_env = kagent_strdup(config__default_key_env(provider->format));
	free(provider->api_key);
	value = config__getenv(provider->api_key_env);
	provider->api_key = value != NULL ? kagent_strdup(value) : NULL;
	/* The OpenTelemetry SDKs' variable, so that a secret need not sit in a file. */
	if (config->telemetry.otlp_headers == NULL &&
	    (value = config__getenv("OTEL_EXPORTER_OTLP_HEADERS")) != NULL)
		config->telemetry.otlp_headers = kagent_strdup(value);
}

int
kagent_config_set(struct kagent_config *config, const char *key_name, const char *value,
		  char **cause)
{
	const struct config__key *key = config__find_key(key_name);
	char *message = NULL;
	int status;

	*cause = NULL;
	if (key == NULL) {
		message = config__unknown_key_message(key_name);
		status = -EINVAL;
	} else {
		status = config__assign(config, key, value, config__is_null_text(value), &message);
	}
	if (status < 0)
		*cause = kagent_asprintf("%s: %s", key_name, message);
	free(message);
	return status;
}

/* The host of an http(s) URL, lower-case: between "://" (and any user@) and the port or path. */
static char *
config__url_host(const char *url)
{
	const char *start = strstr(url, "://") + 3;
	size_t length = strcspn(start, "/?#");
	const char *at = memrchr(start, '@', length);
	char *host;

	if (at != NULL) {
		length -= (size_t)(at + 1 - start);
		start = at + 1;
	}
	host = kagent_strndup(start, length);
	host[strcspn(host, ":")] = '\0';
	for (char *character = host; *character != '\0'; character++)
		if (*character >= 'A' && *character <= 'Z')
			*character = (char)(*character - 'A' + 'a');
	return host;
}

/* What Anthropic refuses when extended thinking is on, said before a request is spent on it;
 * NULL when the settings fit. */
static char *
config__check_anthropic_thinking(const struct kagent_provider_config *provider)
{
	long long budget = provider->thinking_budget_tokens;
	long long max_tokens = provider->max_output_tokens > 0
				   ? provider->max_output_tokens
				   : KAGENT_PROVIDER_ANTHROPIC_MAX_TOKENS;

	if (provider->temperature >= 0 && provider->temperature != 1)
		return kagent_asprintf("provider.temperature is %g, but Anthropic's extended "
				       "thinking (provider.thinking_budget_tokens) allows only the "
				       "default: unset provider.temperature or set it to 1",
				       provider->temperature);
	if (provider->top_p >= 0 && provider->top_p < 0.95)
		return kagent_asprintf("provider.top_p is %g, but Anthropic's extended thinking "
				       "(provider.thinking_budget_tokens) allows only 0.95 to 1: "
				       "unset provider.top_p or raise it",
				       provider->top_p);
	if (budget < 1024)
		return kagent_asprintf("provider.thinking_budget_tokens is %lld, but Anthropic "
				       "needs at least 1024 (or 0: thinking off)",
				       budget);
	if (budget >= max_tokens)
		return kagent_asprintf(
		    "provider.thinking_budget_tokens (%lld) must be less than the reply's "
		    "max_tokens (%lld%s), which counts the thinking too: raise "
		    "provider.max_output_tokens or lower the budget",
		    budget, max_tokens,
		    provider->max_output_tokens > 0
			? ", provider.max_output_tokens"
			: ", sent when provider.max_output_tokens is 0");
	return NULL;
}

int
kagent_config_validate(const struct kagent_config *config, char **cause)
{
	const struct kagent_provider_config *provider = &config->provider;
	const char *key_env = provider->api_key_env != NULL
				  ? provider->api_key_env
				  : config__default_key_env(provider->format);
	char *host = NULL;
	int status = -EINVAL;

	*cause = NULL;
	if (provider->model == NULL) {
		*cause = kagent_strdup("no model configured: set provider.model in kagent.yaml, or "
				       "pass --model NAME");
		goto out;
	}
	if (provider->base_url == NULL) {
		*cause = kagent_strdup("no endpoint configured: set provider.base_url in "
				       "kagent.yaml, or pass --base-url URL");
		goto out;
	}
	/* The file and the flags are checked when set; OPENAI_BASE_URL is not. */
	if (!config__is_http_url(provider->base_url)) {
		*cause = kagent_asprintf("the endpoint '%s' (provider.base_url, --base-url or "
					 "the *_BASE_URL variable) must start with http:// or "
					 "https://",
					 provider->base_url);
		goto out;
	}
	host = config__url_host(provider->base_url);
	if (provider->api_key == NULL &&
	    (strcmp(host, "api.openai.com") == 0 || strcmp(host, "api.anthropic.com") == 0)) {
		*cause = kagent_asprintf("%s is not set: export %s=... or name another variable in "
					 "provider.api_key_env",
					 key_env, key_env);
		goto out;
	}
	if (provider->format == KAGENT_LLM_FORMAT_ANTHROPIC &&
	    provider->thinking_budget_tokens > 0 &&
	    (*cause = config__check_anthropic_thinking(provider)) != NULL)
		goto out;
	/* The file and the flags are checked when set; OTEL_EXPORTER_OTLP_HEADERS is not. */
	if (config->telemetry.otlp_headers != NULL) {
		char **lines, *problem = NULL;

		if (kagent_config_parse_headers(config->telemetry.otlp_headers, &lines, &problem) <
		    0) {
			*cause = kagent_asprintf("telemetry.otlp_headers (or "
						 "OTEL_EXPORTER_OTLP_HEADERS): %s",
						 problem);
			free(problem);
			goto out;
		}
		kagent_config_free_headers(lines);
	}
	status = 0;
out:
	free(host);
	return status;
}

/* RFC 9110's token characters, what a header name is made of. */
static int
config__is_token_character(char character)
{
	return (character >= 'a' && character <= 'z') || (character >= 'A' && character <= 'Z') ||
	       (character >= '0' && character <= '9') ||
	       (character != '\0' && strchr("!#$%&'*+-.^_`|~", character) != NULL);
}

static int
config__hex_digit(char character)
{
	if (character >= '0' && character <= '9')
		return character - '0';
	if (character >= 'a' && character <= 'f')
		return character - 'a' + 10;
	if (character >= 'A' && character <= 'F')
		return character - 'A' + 10;
	return -1;
}

/* One "Name=value" item, spaces around either trimmed, as a "Name: value" line; NULL and
 * *problem set when it is malformed (the message names no value: values are secrets). */
static char *
config__header_line(const char *item, size_t length, const char **problem)
{
	const char *equals = memchr(item, '=', length), *end = item + length, *name_end, *value;
	struct kagent_buffer line = {0};

	if (equals == NULL) {
		*problem = "has no '=' between a name and a value";
		return NULL;
	}
	name_end = equals;
	while (name_end > item && name_end[-1] == ' ')
		name_end--;
	if (name_end == item) {
		*problem = "has no name before its '='";
		return NULL;
	}
	for (const char *character = item; character < name_end; character++) {
		if (!config__is_token_character(*character)) {
			*problem = "has a name that is not an HTTP header name";
			return NULL;
		}
	}
	kagent_buffer_append(&line, item, (size_t)(name_end - item));
	kagent_buffer_append(&line, ": ", 2);
	value = equals + 1;
	while (value < end && *value == ' ')
		value++;
	for (const char *character = value; character < end; character++) {
		char decoded = *character;

		if (decoded == '%') {
			int high = character + 2 < end ? config__hex_digit(character[1]) : -1;
			int low = high >= 0 ? config__hex_digit(character[2]) : -1;

			if (low < 0) {
				*problem = "has a '%' that is not followed by two hex digits";
				goto fail;
			}
			decoded = (char)(high * 16 + low);
			character += 2;
		}
		if (decoded == '\r' || decoded == '\n' || decoded == '\0') {
			*problem = "has a line break or NUL in its value";
			goto fail;
		}
		kagent_buffer_append(&line, &decoded, 1);
	}
	while (line.data[line.length - 1] == ' ')
		line.data[--line.length] = '\0';
	/* "Name:" alone would tell libcurl to drop a header, not to send one. */
	if (line.data[line.length - 1] == ':') {
		*problem = "has no value after its '='";
		goto fail;
	}
	return kagent_buffer_take(&line);
fail:
	kagent_buffer_free(&line);
	return NULL;
}

int
kagent_config_parse_headers(const char *text, char ***lines_out, char **cause)
{
	size_t count = 0, number = 0;
	char **lines = kagent_calloc(CONFIG_HEADERS_CAP + 1, sizeof *lines);
	const char *item = text, *problem = NULL;
	int status = 0;

	*lines_out = NULL;
	while (*item != '\0') {
		size_t length = strcspn(item, ",");

		number++;
		while (length > 0 && *item == ' ') {
			item++;
			length--;
		}
		/* Empty items (a trailing comma) are allowed, as the OpenTelemetry SDKs allow. */
		if (length > 0) {
			if (count == CONFIG_HEADERS_CAP) {
				*cause =
				    kagent_asprintf("more than %d headers", CONFIG_HEADERS_CAP);
				status = -EINVAL;
				goto out;
			}
			lines[count] = config__header_line(item, length, &problem);
			if (lines[count] == NULL) {
				*cause = kagent_asprintf("header %zu %s", number, problem);
				status = -EINVAL;
				goto out;
			}
			count++;
		}
		item += length;
		if (*item == ',')
			item++;
	}
	*lines_out = lines;
	lines = NULL;
out:
	kagent_config_free_headers(lines);
	return status;
}

void
kagent_config_free_headers(char **lines)
{
	if (lines == NULL)
		return;
	for (size_t index = 0; lines[index] != NULL; index++)
		free(lines[index]);
	free(lines);
}

/* A string as JSON; NULL, or text that is not UTF-8 (a flag can pass any bytes), as null. */
static json_t *
config__string_json(const char *text)
{
	json_t *value = text != NULL ? json_string(text) : NULL;

	return value != NULL ? value : json_null();
}

static json_t *
config__value_json(const struct kagent_config *config, const struct config__key *key)
{
	const void *field = config__field(config, key);
	double number;
	int integer;

	switch (key->kind) {
	case CONFIG__TEXT:
	case CONFIG__URL:
		return config__string_json(*(char *const *)field);
	case CONFIG__ENUMERATION:
		memcpy(&integer, field, sizeof integer);
		return json_string(key->choices[integer]);
	case CONFIG__INTEGER:
		return json_integer(config__load_integer(field, key->size));
	case CONFIG__NUMBER:
		memcpy(&number, field, sizeof number);
		/* Below the range means "not sent" (temperature and top_p). */
		return number < key->minimum ? json_null() : json_real(number);
	case CONFIG__BOOLEAN:
		memcpy(&integer, field, sizeof integer);
		return json_boolean(integer);
	case CONFIG__HEADERS:
		/* Whether headers are set, never what they say (an Authorization). */
		return *(char *const *)field != NULL ? json_string("[redacted]") : json_null();
	}
	return json_null();
}

json_t *
kagent_config_to_json(const struct kagent_config *config)
{
	json_t *root = json_object();

	for (size_t index = 0; index < CONFIG_KEY_COUNT; index++) {
		const char *name = config__keys[index].name, *dot;
		json_t *parent = root;

		/* Each dotted section becomes a nested object, as in the file. */
		while ((dot = strchr(name, '.')) != NULL) {
			char *section = kagent_strndup(name, (size_t)(dot - name));
			json_t *child = json_object_get(parent, section);

			if (child == NULL) {
				child = json_object();
				json_object_set_new(parent, section, child);
			}
			free(section);
			parent = child;
			name = dot + 1;
		}
		json_object_set_new(parent, name, config__value_json(config, &config__keys[index]));
	}
	json_object_set_new(root, "source_path", config__string_json(config->source_path));
	return root;
}

void
kagent_config_copy(struct kagent_config *to, const struct kagent_config *from)
{
	*to = *from;
	/* Every string the table knows, then the two it does not: each copy owns its own. */
	for (size_t index = 0; index < CONFIG_KEY_COUNT; index++) {
		const struct config__key *key = &config__keys[index];
		char **string = config__field(to, key);

		if (config__is_string(key) && *string != NULL)
			*string = kagent_strdup(*string);
	}
	if (to->provider.api_key != NULL)
		to->provider.api_key = kagent_strdup(to->provider.api_key);
	if (to->source_path != NULL)
		to->source_path = kagent_strdup(to->source_path);
}

void
kagent_config_clear(struct kagent_config *config)
{
	for (size_t index = 0; index < CONFIG_KEY_COUNT; index++) {
		const struct config__key *key = &config__keys[index];

		if (config__is_string(key))
			free(*(char **)config__field(config, key));
	}
	free(config->provider.api_key);
	free(config->source_path);
	memset(config, 0, sizeof *config);
}

const char *
kagent_config_key_help(const char *key_name)
{
	const struct config__key *key = config__find_key(key_name);

	return key != NULL ? key->help : NULL;
}

const char *
kagent_target_baseline_name(enum kagent_target_baseline baseline)
{
	if ((unsigned)baseline > KAGENT_TARGET_BEST)
		return "unknown";
	return config__baseline_names[baseline];
}
