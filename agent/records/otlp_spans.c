/*
 * Trace records as OpenTelemetry GenAI spans (see include/kagent/records/otlp_spans.h and
 * docs/telemetry.md). A run has at most one span of each kind open at a time, because the
 * session does one thing at a time: the root from run_start to final, a chat span from a
 * turn's first request to its reply (or llm_error), a tool span from tool_call to tool_result.
 * Verdicts, commits and best moves land as kagent.* attributes on the tool span that caused
 * them, and as events on whichever span is open (the root for confirmations and the final
 * check).
 */
#include "kagent/records/otlp_spans.h"

#include "kagent/base/alloc.h"
#include "kagent/llm/provider.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define OTLP_SPANS_TRACE_ID_SIZE 16
#define OTLP_SPANS_SPAN_ID_SIZE 8
/* How much of a failed tool's answer becomes its span's status message. */
#define OTLP_SPANS_MESSAGE_CAP 512
/* The agent's name in gen_ai.agent.name and the span names. */
#define OTLP_SPANS_AGENT "kagent"

/* OTLP's enums (opentelemetry/proto/trace/v1/trace.proto), as numbers in its JSON. */
enum otlp_spans__kind {
	OTLP_SPANS_KIND_INTERNAL = 1,
	OTLP_SPANS_KIND_CLIENT = 3,
};
enum otlp_spans__status {
	OTLP_SPANS_STATUS_ERROR = 2,
};

struct kagent_otlp_spans {
	kagent_otlp_random_function random;
	void *random_data;
	char trace_id[OTLP_SPANS_TRACE_ID_SIZE * 2 + 1];
	json_t *root; /* open spans, in OTLP's shape, or NULL */
	json_t *chat;
	json_t *tool;
	/* From run_start's config, for every chat span. */
	char *provider;
	char *model;
	json_t *provider_config; /* run_start's config.provider: the request's settings */
	json_t *tools;		 /* run_start's tool definitions, for their descriptions */
	char *server_address;
	long long server_port;
	char *run_id;
	long long input_tokens, output_tokens;
};

static void
otlp_spans__getrandom(void *bytes, size_t size, void *data)
{
	(void)data;
	if (getrandom(bytes, size, 0) != (ssize_t)size) {
		/* Never in practice (a few bytes from an initialised pool); unique enough. */
		for (size_t index = 0; index < size; index++)
			((unsigned char *)bytes)[index] = (unsigned char)(rand() ^ getpid());
	}
}

struct kagent_otlp_spans *
kagent_otlp_spans_create(kagent_otlp_random_function random, void *random_data)
{
	struct kagent_otlp_spans *spans = kagent_calloc(1, sizeof *spans);

	spans->random = random != NULL ? random : otlp_spans__getrandom;
	spans->random_data = random_data;
	return spans;
}

void
kagent_otlp_spans_free(struct kagent_otlp_spans *spans)
{
	if (spans == NULL)
		return;
	json_decref(spans->root);
	json_decref(spans->chat);
	json_decref(spans->tool);
	free(spans->provider);
	free(spans->model);
	json_decref(spans->provider_config);
	json_decref(spans->tools);
	free(spans->server_address);
	free(spans->run_id);
	free(spans);
}

/* A random id of size bytes in lower-case hex; all zeros is invalid in OTLP, so never that. */
static void
otlp_spans__id(struct kagent_otlp_spans *spans, char *hex, size_t size)
{
	unsigned char bytes[OTLP_SPANS_TRACE_ID_SIZE];
	int zero;

	do {
		spans->random(bytes, size, spans->random_data);
		zero = 1;
		for (size_t index = 0; index < size; index++)
			zero &= bytes[index] == 0;
	} while (zero);
	for (size_t index = 0; index < size; index++)
		snprintf(hex + 2 * index, 3, "%02x", bytes[index]);
}

static json_t *
otlp_spans__nanos(long long unix_nanos)
{
	char text[32];

	snprintf(text, sizeof text, "%lld", unix_nanos);
	return json_string(text);
}

/* ---- attributes: OTLP's KeyValue list ---- */

/* Sets key to value (an AnyValue, stolen) in a KeyValue list, replacing an earlier value. */
static void
otlp_spans__set(json_t *attributes, const char *key, json_t *value)
{
	size_t index;
	json_t *pair;

	json_array_foreach(attributes, index, pair)
	{
		if (strcmp(json_string_value(json_object_get(pair, "key")), key) == 0) {
			json_object_set_new(pair, "value", value);
			return;
		}
	}
	json_array_append_new(attributes, json_pack("{s:s, s:o}", "key", key, "value", value));
}

static void
otlp_spans__string(json_t *attributes, const char *key, const char *value)
{
	if (value != NULL)
		otlp_spans__set(attributes, key, json_pack("{s:s}", "stringValue", value));
}

/* OTLP's JSON carries 64-bit integers as decimal strings. */
static void
otlp_spans__integer(json_t *attributes, const char *key, long long value)
{
	char text[32];

	snprintf(text, sizeof text, "%lld", value);
	otlp_spans__set(attributes, key, json_pack("{s:s}", "intValue", text));
}

static void
otlp_spans__double(json_t *attributes, const char *key, double value)
{
	otlp_spans__set(attributes, key, json_pack("{s:f}", "doubleValue", value));
}

static void
otlp_spans__boolean(json_t *attributes, const char *key, int value)
{
	otlp_spans__set(attributes, key, json_pack("{s:b}", "boolValue", value));
}

static void
otlp_spans__strings(json_t *attributes, const char *key, const char *const *values, size_t count)
{
	json_t *list = json_array();

	for (size_t index = 0; index < count; index++)
		json_array_append_new(list, json_pack("{s:s}", "stringValue", values[index]));
	otlp_spans__set(attributes, key, json_pack("{s:{s:o}}", "arrayValue", "values", list));
}

/* A field of a record as an attribute of the same JSON type; absent or null: nothing. */
static void
otlp_spans__field(json_t *attributes, const char *key, const json_t *record, const char *field)
{
	const json_t *value = json_object_get(record, field);

	if (json_is_string(value))
		otlp_spans__string(attributes, key, json_string_value(value));
	else if (json_is_integer(value))
		otlp_spans__integer(attributes, key, json_integer_value(value));
	else if (json_is_real(value))
		otlp_spans__double(attributes, key, json_real_value(value));
	else if (json_is_boolean(value))
		otlp_spans__boolean(attributes, key, json_is_true(value));
}

/* ---- spans ---- */

static json_t *
otlp_spans__start(struct kagent_otlp_spans *spans, const char *name, enum otlp_spans__kind kind,
		  long long unix_nanos)
{
	char span_id[OTLP_SPANS_SPAN_ID_SIZE * 2 + 1];
	json_t *span;

	otlp_spans__id(spans, span_id, OTLP_SPANS_SPAN_ID_SIZE);
	span = json_pack("{s:s, s:s, s:s, s:i, s:o, s:[], s:[]}", "traceId", spans->trace_id,
			 "spanId", span_id, "name", name, "kind", kind, "startTimeUnixNano",
			 otlp_spans__nanos(unix_nanos), "attributes", "events");
	if (spans->root != NULL)
		json_object_set(span, "parentSpanId", json_object_get(spans->root, "spanId"));
	return span;
}

static json_t *
otlp_spans__attributes(json_t *span)
{
	return json_object_get(span, "attributes");
}

/* Marks a span failed: error.type (a low-cardinality class) and the status with a message. */
static void
otlp_spans__fail(json_t *span, const char *type, const char *message)
{
	otlp_spans__string(otlp_spans__attributes(span), "error.type", type);
	json_object_set_new(span, "status",
			    json_pack("{s:i, s:s}", "code", OTLP_SPANS_STATUS_ERROR, "message",
				      message != NULL ? message : type));
}

/* Adds an event to the innermost open span. */
static void
otlp_spans__event(struct kagent_otlp_spans *spans, const char *name, long long unix_nanos,
		  json_t *attributes)
{
	json_t *span = spans->tool != NULL   ? spans->tool
		       : spans->chat != NULL ? spans->chat
					     : spans->root;

	json_array_append_new(json_object_get(span, "events"),
			      json_pack("{s:s, s:o, s:o}", "name", name, "timeUnixNano",
					otlp_spans__nanos(unix_nanos), "attributes", attributes));
}

/* Ends *slot's span at unix_nanos and moves it to finished. */
static void
otlp_spans__end(json_t **slot, long long unix_nanos, json_t *finished)
{
	json_t *span = *slot;

	if (span == NULL)
		return;
	json_object_set_new(span, "endTimeUnixNano", otlp_spans__nanos(unix_nanos));
	if (json_array_size(json_object_get(span, "events")) == 0)
		json_object_del(span, "events");
	json_array_append_new(finished, span);
	*slot = NULL;
}

/* The GenAI provider name of kagent's wire formats: OpenAI's two APIs are "openai". */
static const char *
otlp_spans__provider(const char *api)
{
	if (api == NULL)
		return "_OTHER";
	return strcmp(api, "anthropic") == 0 ? "anthropic" : "openai";
}

/* server.address and server.port from an http(s) URL. */
static void
otlp_spans__server(struct kagent_otlp_spans *spans, const char *url)
{
	const char *start = url != NULL ? strstr(url, "://") : NULL;
	size_t length;
	const char *colon;

	if (start == NULL)
		return;
	start += 3;
	length = strcspn(start, "/?#");
	if (memchr(start, '@', length) != NULL) {
		const char *at = memrchr(start, '@', length);

		length -= (size_t)(at + 1 - start);
		start = at + 1;
	}
	colon = start[0] == '[' ? memchr(start, ']', length) : start;
	colon = colon != NULL ? memchr(colon, ':', length - (size_t)(colon - start)) : NULL;
	spans->server_address =
	    kagent_strndup(start, colon != NULL ? (size_t)(colon - start) : length);
	spans->server_port = colon != NULL		     ? strtoll(colon + 1, NULL, 10)
			     : strncmp(url, "https", 5) == 0 ? 443
							     : 80;
}

/* What every GenAI span of the run carries. */
static void
otlp_spans__common(const struct kagent_otlp_spans *spans, json_t *attributes, const char *operation)
{
	otlp_spans__string(attributes, "gen_ai.operation.name", operation);
	otlp_spans__string(attributes, "gen_ai.provider.name", spans->provider);
	/* The name before semantic conventions 1.37, which some backends still read. */
	otlp_spans__string(attributes, "gen_ai.system", spans->provider);
	otlp_spans__string(attributes, "gen_ai.conversation.id", spans->run_id);
}

static void
otlp_spans__run_start(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos)
{
	const json_t *provider = json_object_get(json_object_get(record, "config"), "provider");
	const json_t *target = json_object_get(json_object_get(record, "config"), "target");
	json_t *attributes;

	otlp_spans__id(spans, spans->trace_id, OTLP_SPANS_TRACE_ID_SIZE);
	spans->provider = kagent_strdup(
	    otlp_spans__provider(json_string_value(json_object_get(provider, "api"))));
	if (json_is_string(json_object_get(provider, "model")))
		spans->model = kagent_strdup(json_string_value(json_object_get(provider, "model")));
	spans->provider_config = json_incref((json_t *)provider);
	spans->tools = json_incref(json_object_get(record, "tools"));
	otlp_spans__server(spans, json_string_value(json_object_get(provider, "base_url")));
	if (json_is_string(json_object_get(record, "run_id")))
		spans->run_id = kagent_strdup(json_string_value(json_object_get(record, "run_id")));
	spans->root = otlp_spans__start(spans, "invoke_agent " OTLP_SPANS_AGENT,
					OTLP_SPANS_KIND_INTERNAL, unix_nanos);
	attributes = otlp_spans__attributes(spans->root);
	otlp_spans__common(spans, attributes, "invoke_agent");
	otlp_spans__string(attributes, "gen_ai.agent.name", OTLP_SPANS_AGENT);
	otlp_spans__string(attributes, "gen_ai.request.model", spans->model);
	/* Langfuse and Phoenix group traces into sessions by this one. */
	otlp_spans__string(attributes, "session.id", spans->run_id);
	otlp_spans__field(attributes, "kagent.run_id", record, "run_id");
	otlp_spans__field(attributes, "kagent.problem", record, "problem_name");
	otlp_spans__field(attributes, "kagent.problem_sha256", record, "problem_sha256");
	otlp_spans__field(attributes, "kagent.resumed", record, "resumed");
	otlp_spans__field(attributes, "kagent.version", record, "kagent_version");
	otlp_spans__field(attributes, "kagent.target.speedup", target, "speedup");
	otlp_spans__field(attributes, "kagent.target.baseline", target, "baseline");
}

/* The sampling settings the requests carry (unset ones are not sent, so not reported). */
static void
otlp_spans__request_settings(const struct kagent_otlp_spans *spans, json_t *attributes)
{
	const json_t *provider = spans->provider_config;
	json_int_t max_tokens = json_integer_value(json_object_get(provider, "max_output_tokens"));

	otlp_spans__field(attributes, "gen_ai.request.temperature", provider, "temperature");
	otlp_spans__field(attributes, "gen_ai.request.top_p", provider, "top_p");
	/* 0 sends none, except to Anthropic, which requires one (llm_request.c). */
	if (max_tokens <= 0 && strcmp(spans->provider, "anthropic") == 0)
		max_tokens = KAGENT_PROVIDER_ANTHROPIC_MAX_TOKENS;
	if (max_tokens > 0)
		otlp_spans__integer(attributes, "gen_ai.request.max_tokens", max_tokens);
}

static void
otlp_spans__request(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos)
{
	json_t *attributes;
	char *name;

	if (spans->chat != NULL) /* a retry's attempt: the same model call */
		return;
	name = kagent_asprintf("chat %s", spans->model != NULL ? spans->model : "");
	spans->chat = otlp_spans__start(spans, name, OTLP_SPANS_KIND_CLIENT, unix_nanos);
	free(name);
	attributes = otlp_spans__attributes(spans->chat);
	otlp_spans__common(spans, attributes, "chat");
	otlp_spans__string(attributes, "gen_ai.request.model", spans->model);
	otlp_spans__request_settings(spans, attributes);
	otlp_spans__string(attributes, "server.address", spans->server_address);
	if (spans->server_address != NULL)
		otlp_spans__integer(attributes, "server.port", spans->server_port);
	otlp_spans__field(attributes, "kagent.turn", record, "turn");
}

static void
otlp_spans__reply(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos,
		  json_t *finished)
{
	const json_t *usage = json_object_get(record, "usage");
	const char *finish = json_string_value(json_object_get(record, "finish"));
	json_t *attributes;

	if (spans->chat == NULL)
		return;
	attributes = otlp_spans__attributes(spans->chat);
	otlp_spans__field(attributes, "gen_ai.usage.input_tokens", usage, "input_tokens");
	otlp_spans__field(attributes, "gen_ai.usage.output_tokens", usage, "output_tokens");
	if (json_integer_value(json_object_get(usage, "cached_tokens")) > 0)
		otlp_spans__field(attributes, "gen_ai.usage.cache_read.input_tokens", usage,
				  "cached_tokens");
	if (finish != NULL)
		otlp_spans__strings(attributes, "gen_ai.response.finish_reasons", &finish, 1);
	otlp_spans__field(attributes, "kagent.cost", record, "cost");
	otlp_spans__field(attributes, "kagent.attempts", record, "attempts");
	spans->input_tokens += json_integer_value(json_object_get(usage, "input_tokens"));
	spans->output_tokens += json_integer_value(json_object_get(usage, "output_tokens"));
	otlp_spans__end(&spans->chat, unix_nanos, finished);
}

static void
otlp_spans__llm_error(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos,
		      json_t *finished)
{
	const char *failure = json_string_value(json_object_get(record, "failure"));

	if (spans->chat == NULL) /* refused before any request: the root tells it */
		return;
	otlp_spans__field(otlp_spans__attributes(spans->chat), "kagent.http_status", record,
			  "http_status");
	otlp_spans__fail(spans->chat, failure != NULL ? failure : "_OTHER",
			 json_string_value(json_object_get(record, "message")));
	otlp_spans__end(&spans->chat, unix_nanos, finished);
}

static void
otlp_spans__tool_call(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos)
{
	const char *tool = json_string_value(json_object_get(record, "name"));
	json_t *attributes, *definition;
	size_t index;
	char *name;

	if (tool == NULL)
		tool = "";
	name = kagent_asprintf("execute_tool %s", tool);
	json_decref(spans->tool); /* a call never answered (cannot happen in one process) */
	spans->tool = otlp_spans__start(spans, name, OTLP_SPANS_KIND_INTERNAL, unix_nanos);
	free(name);
	attributes = otlp_spans__attributes(spans->tool);
	otlp_spans__common(spans, attributes, "execute_tool");
	otlp_spans__string(attributes, "gen_ai.tool.name", tool);
	otlp_spans__field(attributes, "gen_ai.tool.call.id", record, "id");
	otlp_spans__string(attributes, "gen_ai.tool.type", "function");
	json_array_foreach(spans->tools, index, definition)
	{
		const char *defined = json_string_value(json_object_get(definition, "name"));

		if (defined != NULL && strcmp(defined, tool) == 0)
			otlp_spans__field(attributes, "gen_ai.tool.description", definition,
					  "description");
	}
	otlp_spans__field(attributes, "kagent.turn", record, "turn");
}

static void
otlp_spans__tool_result(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos,
			json_t *finished)
{
	if (spans->tool == NULL)
		return;
	otlp_spans__field(otlp_spans__attributes(spans->tool), "kagent.gpu_seconds", record,
			  "gpu_seconds");
	/* The content is what the model reads: the reason it was refused, shortened. */
	if (json_is_true(json_object_get(record, "is_error"))) {
		const char *content = json_string_value(json_object_get(record, "content"));
		size_t length;
		char *message;

		if (content == NULL)
			content = "";
		length = strnlen(content, OTLP_SPANS_MESSAGE_CAP);
		/* Cut between UTF-8 characters, never inside one. */
		while (length > 0 && ((unsigned char)content[length] & 0xc0) == 0x80)
			length--;
		message = kagent_strndup(content, length);

		otlp_spans__fail(spans->tool, "tool_error", message);
		free(message);
	}
	otlp_spans__end(&spans->tool, unix_nanos, finished);
}

/* The fields of a verdict record that say what happened to the variant. */
static json_t *
otlp_spans__verdict_attributes(const json_t *record)
{
	json_t *attributes = json_array();

	otlp_spans__field(attributes, "kagent.variant.id", record, "variant");
	otlp_spans__field(attributes, "kagent.variant.parent", record, "parent");
	otlp_spans__field(attributes, "kagent.verdict.purpose", record, "purpose");
	otlp_spans__field(attributes, "kagent.verdict.status", record, "status");
	otlp_spans__field(attributes, "kagent.verdict.reason", record, "reason");
	otlp_spans__field(attributes, "kagent.speedup", record, "speedup");
	otlp_spans__field(attributes, "kagent.speedup_vs_eager", record, "speedup_vs_eager");
	otlp_spans__field(attributes, "kagent.speedup_vs_compile", record, "speedup_vs_compile");
	otlp_spans__field(attributes, "kagent.candidate_ms", record, "candidate_ms");
	otlp_spans__field(attributes, "kagent.credited", record, "credited");
	return attributes;
}

static void
otlp_spans__verdict(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos)
{
	json_t *attributes = otlp_spans__verdict_attributes(record);
	const char *purpose = json_string_value(json_object_get(record, "purpose"));

	/* The tool span that made the variant carries its verdict; a confirmation (another
	 * purpose) only adds an event. */
	if (spans->tool != NULL) {
		json_t *pair;
		size_t index;

		if (purpose == NULL || strcmp(purpose, "confirm") != 0) {
			json_array_foreach(attributes, index, pair)
			    otlp_spans__set(otlp_spans__attributes(spans->tool),
					    json_string_value(json_object_get(pair, "key")),
					    json_incref(json_object_get(pair, "value")));
		}
	}
	otlp_spans__event(spans, "kagent.verdict", unix_nanos, attributes);
}

static void
otlp_spans__best(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos)
{
	json_t *attributes = json_array();

	otlp_spans__field(attributes, "kagent.variant.id", record, "variant");
	otlp_spans__field(attributes, "kagent.speedup", record, "speedup");
	otlp_spans__field(attributes, "kagent.speedup.previous", record, "previous");
	otlp_spans__event(spans, "kagent.best", unix_nanos, attributes);
	otlp_spans__field(otlp_spans__attributes(spans->root), "kagent.best.variant", record,
			  "variant");
	otlp_spans__field(otlp_spans__attributes(spans->root), "kagent.best.speedup", record,
			  "speedup");
}

static void
otlp_spans__final(struct kagent_otlp_spans *spans, const json_t *record, long long unix_nanos,
		  json_t *finished)
{
	static const char *const failures[] = {"llm_error", "evaluator_error", "bad_problem"};
	const char *reason = json_string_value(json_object_get(record, "stop_reason"));
	const json_t *confirmation = json_object_get(record, "confirmation");
	const json_t *totals = json_object_get(record, "totals");
	json_t *attributes = otlp_spans__attributes(spans->root);

	otlp_spans__end(&spans->chat, unix_nanos, finished);
	otlp_spans__end(&spans->tool, unix_nanos, finished);
	/* On an agent span the usage is the run's whole: its chat spans summed. */
	otlp_spans__integer(attributes, "gen_ai.usage.input_tokens", spans->input_tokens);
	otlp_spans__integer(attributes, "gen_ai.usage.output_tokens", spans->output_tokens);
	otlp_spans__field(attributes, "kagent.variant.id", record, "variant");
	otlp_spans__field(attributes, "kagent.commit", record, "commit");
	otlp_spans__field(attributes, "kagent.confirmed", record, "confirmed");
	otlp_spans__field(attributes, "kagent.target_reached", record, "target_reached");
	otlp_spans__field(attributes, "kagent.stop_reason", record, "stop_reason");
	otlp_spans__field(attributes, "kagent.stop_detail", record, "stop_detail");
	otlp_spans__field(attributes, "kagent.verdict.status", confirmation, "status");
	otlp_spans__field(attributes, "kagent.speedup", confirmation, "speedup");
	otlp_spans__field(attributes, "kagent.turns", totals, "turns");
	otlp_spans__field(attributes, "kagent.cost", totals, "cost");
	otlp_spans__field(attributes, "kagent.gpu_seconds", totals, "gpu_seconds");
	for (size_t index = 0; reason != NULL && index < sizeof failures / sizeof failures[0];
	     index++) {
		if (strcmp(reason, failures[index]) == 0)
			otlp_spans__fail(spans->root, reason,
					 json_string_value(json_object_get(record, "stop_detail")));
	}
	otlp_spans__end(&spans->root, unix_nanos, finished);
}

void
kagent_otlp_spans_record(struct kagent_otlp_spans *spans, const json_t *record,
			 long long unix_nanos, json_t *finished)
{
	const char *type = json_string_value(json_object_get(record, "type"));

	if (type == NULL)
		return;
	if (strcmp(type, "run_start") == 0) {
		if (spans->root == NULL && spans->trace_id[0] == '\0')
			otlp_spans__run_start(spans, record, unix_nanos);
		return;
	}
	if (spans->root == NULL) /* before run_start, or after final */
		return;
	if (strcmp(type, "request") == 0) {
		otlp_spans__request(spans, record, unix_nanos);
	} else if (strcmp(type, "retry") == 0 && spans->chat != NULL) {
		json_t *attributes = json_array();

		otlp_spans__field(attributes, "kagent.attempt", record, "attempt");
		otlp_spans__field(attributes, "kagent.http_status", record, "status");
		otlp_spans__field(attributes, "kagent.failure", record, "failure");
		otlp_spans__field(attributes, "kagent.reason", record, "reason");
		otlp_spans__field(attributes, "kagent.delay_ms", record, "delay_ms");
		otlp_spans__event(spans, "kagent.retry", unix_nanos, attributes);
	} else if (strcmp(type, "reply") == 0) {
		otlp_spans__reply(spans, record, unix_nanos, finished);
	} else if (strcmp(type, "llm_error") == 0) {
		otlp_spans__llm_error(spans, record, unix_nanos, finished);
	} else if (strcmp(type, "tool_call") == 0) {
		otlp_spans__tool_call(spans, record, unix_nanos);
	} else if (strcmp(type, "tool_result") == 0) {
		otlp_spans__tool_result(spans, record, unix_nanos, finished);
	} else if (strcmp(type, "verdict") == 0) {
		otlp_spans__verdict(spans, record, unix_nanos);
	} else if (strcmp(type, "commit") == 0 && spans->tool != NULL) {
		otlp_spans__field(otlp_spans__attributes(spans->tool), "kagent.commit", record,
				  "commit");
	} else if (strcmp(type, "best") == 0) {
		otlp_spans__best(spans, record, unix_nanos);
	} else if (strcmp(type, "problem_check") == 0) {
		json_t *attributes = json_array();

		otlp_spans__field(attributes, "kagent.status", record, "status");
		otlp_spans__field(attributes, "kagent.seconds", record, "seconds");
		otlp_spans__field(attributes, "kagent.message", record, "message");
		otlp_spans__event(spans, "kagent.problem_check", unix_nanos, attributes);
	} else if (strcmp(type, "final") == 0) {
		otlp_spans__final(spans, record, unix_nanos, finished);
	}
}

void
kagent_otlp_spans_end_all(struct kagent_otlp_spans *spans, long long unix_nanos, json_t *finished)
{
	json_t **slots[] = {&spans->tool, &spans->chat, &spans->root};

	for (size_t index = 0; index < sizeof slots / sizeof slots[0]; index++) {
		if (*slots[index] == NULL)
			continue;
		otlp_spans__fail(*slots[index], "unfinished", "the run stopped before this ended");
		otlp_spans__end(slots[index], unix_nanos, finished);
	}
}

json_t *
kagent_otlp_spans_request(const json_t *spans)
{
	return json_pack("{s:[{s:{s:[{s:s, s:{s:s}}]}, s:[{s:{s:s, s:s}, s:O}]}]}", "resourceSpans",
			 "resource", "attributes", "key", "service.name", "value", "stringValue",
			 OTLP_SPANS_AGENT, "scopeSpans", "scope", "name", OTLP_SPANS_AGENT,
			 "version", KAGENT_VERSION, "spans", spans);
}
