/*
 * Renders trace records as the lines a person scans (see include/kagent/cli/terminal_view.h):
 * one line per event, a status line redrawn in place on a terminal, and a compact status
 * after each turn elsewhere. Everything shown comes from records a model or a candidate
 * influenced, so control characters are replaced before they reach the terminal.
 */
#include "kagent/cli/terminal_view.h"

#include "kagent/base/units.h"
#include "kagent/base/alloc.h"
#include "kagent/base/buffer.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* How much of a string one line shows. */
#define VIEW_SNIPPET_BYTES 160
#define VIEW_ARGUMENT_BYTES 40
#define VIEW_BAR_CELLS 10

struct kagent_terminal_view {
	FILE *stream;
	int verbose;
	int live;		 /* live requested and the stream is a terminal */
	int status_shown;	 /* the status line is on screen, under the cursor */
	long long turn;		 /* the latest turn a record named */
	long long stream_events; /* stream records since the last reply, for verbose */
	/* The best variant so far. */
	char *best_variant;
	double best_speedup;
	int have_best;
	/* Totals and limits, from run_start's config and each turn_end (0: no limit). */
	long long turns, input_tokens, output_tokens, max_turns, max_tokens;
	double cost, wall_seconds, gpu_seconds, max_cost, max_wall_seconds, max_gpu_seconds;
};

struct kagent_terminal_view *
kagent_terminal_view_create(FILE *stream, const struct kagent_terminal_view_options *options)
{
	struct kagent_terminal_view *view = kagent_calloc(1, sizeof *view);
	int fd = fileno(stream);

	view->stream = stream;
	view->verbose = options != NULL && options->verbose;
	view->live = options != NULL && options->live && fd >= 0 && isatty(fd);
	return view;
}

void
kagent_terminal_view_free(struct kagent_terminal_view *view)
{
	if (view == NULL)
		return;
	free(view->best_variant);
	free(view);
}

/* Field access that never fails: a missing or mistyped field reads as absent. */

static const char *
terminal_view__string(const json_t *object, const char *key)
{
	return json_string_value(json_object_get(object, key));
}

static int
terminal_view__number(const json_t *object, const char *key, double *out)
{
	json_t *value = json_object_get(object, key);

	if (!json_is_number(value))
		return 0;
	*out = json_number_value(value);
	return 1;
}

static double
terminal_view__number_or(const json_t *object, const char *key, double fallback)
{
	double value;

	return terminal_view__number(object, key, &value) ? value : fallback;
}

/*
 * Text for one line of a terminal: control characters (escape sequences above all, and the
 * C1 controls U+0080 to U+009F, which some terminals obey) become '?', newlines spaces.
 */
static void
terminal_view__append_clean(struct kagent_buffer *buffer, const char *text, size_t length)
{
	for (size_t i = 0; i < length; i++) {
		unsigned char byte = (unsigned char)text[i];
		char shown = (char)byte;

		if (byte == '\n')
			shown = ' ';
		else if ((byte < 0x20 && byte != '\t') || byte == 0x7f)
			shown = '?';
		else if (byte == 0xc2 && i + 1 < length && (unsigned char)text[i + 1] >= 0x80 &&
			 (unsigned char)text[i + 1] <= 0x9f) {
			shown = '?';
			i++;
		}
		kagent_buffer_append(buffer, &shown, 1);
	}
}

/* The first line of text, at most cap bytes (cut at a character boundary), then "...". */
static void
terminal_view__append_first_line(struct kagent_buffer *buffer, const char *text, size_t cap)
{
	size_t length = strcspn(text, "\n");
	int cut = text[length] != '\0' && text[length + 1] != '\0';

	if (length > cap) {
		length = cap;
		while (length > 0 && ((unsigned char)text[length] & 0xc0) == 0x80)
			length--;
		cut = 1;
	}
	terminal_view__append_clean(buffer, text, length);
	if (cut)
		kagent_buffer_append_string(buffer, "...");
}

/* "12k" or "12k/100k": a value and its limit, when there is one. */
static void
terminal_view__append_used(struct kagent_buffer *buffer, void (*format)(char *, size_t, double),
			   double used, double limit)
{
	char text[32];

	format(text, sizeof text, used);
	kagent_buffer_append_string(buffer, text);
	if (limit > 0) {
		format(text, sizeof text, limit);
		kagent_buffer_appendf(buffer, "/%s", text);
	}
}

static void
terminal_view__format_dollars(char *out, size_t size, double dollars)
{
	snprintf(out, size, "$%.2f", dollars);
}

static void
terminal_view__append_best(const struct kagent_terminal_view *view, struct kagent_buffer *buffer)
{
	if (view->have_best)
		kagent_buffer_appendf(buffer, "best %.2fx (%s)", view->best_speedup,
				      view->best_variant != NULL ? view->best_variant : "?");
	else
		kagent_buffer_append_string(buffer, "best none yet");
}

/* The largest fraction of any budget spent, or -1 when nothing is limited. */
static double
terminal_view__budget_fraction(const struct kagent_terminal_view *view)
{
	const double used[] = {(double)view->turns,
			       (double)(view->input_tokens + view->output_tokens), view->cost,
			       view->wall_seconds, view->gpu_seconds};
	const double limit[] = {(double)view->max_turns, (double)view->max_tokens, view->max_cost,
				view->max_wall_seconds, view->max_gpu_seconds};
	double most = -1;

	for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
		if (limit[i] > 0 && used[i] / limit[i] > most)
			most = used[i] / limit[i];
	}
	return most > 1 ? 1 : most;
}

static void
terminal_view__erase_status(struct kagent_terminal_view *view)
{
	if (!view->status_shown)
		return;
	fputs("\r\033[K", view->stream);
	view->status_shown = 0;
}

static void
terminal_view__draw_status(struct kagent_terminal_view *view)
{
	struct kagent_buffer line = {0};
	double fraction = terminal_view__budget_fraction(view);
	long long turn = view->turn > view->turns ? view->turn : view->turns;
	struct winsize size;
	size_t shown;

	terminal_view__erase_status(view);
	terminal_view__append_best(view, &line);
	kagent_buffer_appendf(&line, " | turn %lld", turn);
	if (view->max_turns > 0)
		kagent_buffer_appendf(&line, "/%lld", view->max_turns);
	kagent_buffer_append_string(&line, " | tokens ");
	terminal_view__append_used(&line, kagent_units_format_tokens,
				   (double)(view->input_tokens + view->output_tokens),
				   (double)view->max_tokens);
	kagent_buffer_append_string(&line, " | ");
	terminal_view__append_used(&line, terminal_view__format_dollars, view->cost,
				   view->max_cost);
	kagent_buffer_append_string(&line, " | ");
	terminal_view__append_used(&line, kagent_units_format_duration, view->wall_seconds,
				   view->max_wall_seconds);
	if (view->max_gpu_seconds > 0) {
		kagent_buffer_append_string(&line, " | gpu ");
		terminal_view__append_used(&line, kagent_units_format_duration, view->gpu_seconds,
					   view->max_gpu_seconds);
	}
	if (fraction >= 0) {
		int filled = (int)(fraction * VIEW_BAR_CELLS + 0.5);

		kagent_buffer_append_string(&line, " | [");
		for (int cell = 0; cell < VIEW_BAR_CELLS; cell++)
			kagent_buffer_append(&line, cell < filled ? "#" : "-", 1);
		kagent_buffer_append_string(&line, "]");
	}
	/* A status line that wrapped could not be erased with one \r: keep it to the width. */
	shown = line.length;
	if (ioctl(fileno(view->stream), TIOCGWINSZ, &size) == 0 && size.ws_col > 1 &&
	    shown >= size.ws_col)
		shown = size.ws_col - 1u;
	fwrite(line.data, 1, shown, view->stream);
	fflush(view->stream);
	view->status_shown = 1;
	kagent_buffer_free(&line);
}

/* Prints text (one or more lines) above the status line. */
static void
terminal_view__emit(struct kagent_terminal_view *view, const char *text)
{
	terminal_view__erase_status(view);
	fputs(text, view->stream);
	fputc('\n', view->stream);
	if (view->live)
		terminal_view__draw_status(view);
	else
		fflush(view->stream);
}

/* A verbose block: a label line (when label is set), then text indented, cleaned. */
static void
terminal_view__append_block(struct kagent_buffer *buffer, const char *label, const char *text)
{
	const char *line = text;
	const char *indent = label != NULL ? "\n    " : "\n  ";

	if (text == NULL || text[0] == '\0')
		return;
	if (label != NULL)
		kagent_buffer_appendf(buffer, "\n  %s:", label);
	while (*line != '\0') {
		size_t length = strcspn(line, "\n");

		kagent_buffer_append_string(buffer, indent);
		terminal_view__append_clean(buffer, line, length);
		line += length;
		if (*line == '\n')
			line++;
	}
}

/* What a speedup target is measured against, in words. */
static const char *
terminal_view__baseline_words(const char *baseline)
{
	if (baseline != NULL && strcmp(baseline, "eager") == 0)
		return "eager";
	if (baseline != NULL && strcmp(baseline, "compile") == 0)
		return "compile";
	return "best of eager and compile";
}

static void
terminal_view__run_start(struct kagent_terminal_view *view, const json_t *record,
			 struct kagent_buffer *line)
{
	const json_t *config = json_object_get(record, "config");
	const json_t *provider = json_object_get(config, "provider");
	const json_t *target = json_object_get(config, "target");
	const json_t *budget = json_object_get(config, "budget");
	const char *name = terminal_view__string(record, "problem_name");
	const char *path = terminal_view__string(record, "problem");
	const char *model = terminal_view__string(provider, "model");
	const char *api = terminal_view__string(provider, "api");
	const char *baseline = terminal_view__string(target, "baseline");
	const char *separator = ": ";
	double speedup;

	kagent_buffer_appendf(line, "run %s",
			      terminal_view__string(record, "run_id")
				  ? terminal_view__string(record, "run_id")
				  : "(no id)");
	if (json_is_true(json_object_get(record, "resumed")))
		kagent_buffer_append_string(line, " (resumed)");
	if (name != NULL || path != NULL) {
		kagent_buffer_append_string(line, separator);
		terminal_view__append_first_line(line, name != NULL ? name : path,
						 VIEW_SNIPPET_BYTES);
		if (name != NULL && path != NULL) {
			kagent_buffer_append_string(line, " (");
			terminal_view__append_first_line(line, path, VIEW_SNIPPET_BYTES);
			kagent_buffer_append_string(line, ")");
		}
		separator = ", ";
	}
	if (api == NULL)
		api = terminal_view__string(provider, "format");
	if (model != NULL) {
		kagent_buffer_append_string(line, separator);
		kagent_buffer_append_string(line, "model ");
		terminal_view__append_first_line(line, model, VIEW_SNIPPET_BYTES);
		if (api != NULL) {
			kagent_buffer_append_string(line, " via ");
			terminal_view__append_first_line(line, api, VIEW_SNIPPET_BYTES);
		}
		separator = ", ";
	}
	if (terminal_view__number(target, "speedup", &speedup)) {
		kagent_buffer_append_string(line, separator);
		if (speedup <= 0)
			kagent_buffer_append_string(line, "no target");
		else
			kagent_buffer_appendf(line, "target %.2fx vs %s", speedup,
					      terminal_view__baseline_words(baseline));
	}
	view->max_turns = (long long)terminal_view__number_or(budget, "max_turns", 0);
	view->max_tokens = (long long)terminal_view__number_or(budget, "max_tokens", 0);
	view->max_cost = terminal_view__number_or(budget, "max_cost", 0);
	view->max_wall_seconds = terminal_view__number_or(budget, "max_wall_seconds", 0);
	view->max_gpu_seconds = terminal_view__number_or(budget, "max_gpu_seconds", 0);
}

static void
terminal_view__request(struct kagent_terminal_view *view, const json_t *record,
		       struct kagent_buffer *line)
{
	const json_t *body = json_object_get(record, "body");
	size_t bytes = body != NULL ? json_dumpb(body, NULL, 0, JSON_COMPACT) : 0;

	view->stream_events = 0;
	kagent_buffer_appendf(line, "request, attempt %lld",
			      (long long)terminal_view__number_or(record, "attempt", 1));
	if (terminal_view__string(record, "url") != NULL) {
		kagent_buffer_append_string(line, " to ");
		terminal_view__append_first_line(line, terminal_view__string(record, "url"),
						 VIEW_SNIPPET_BYTES);
	}
	if (bytes >= 1000000)
		kagent_buffer_appendf(line, ", %.1f MB", (double)bytes / 1e6);
	else
		kagent_buffer_appendf(line, ", %.1f kB", (double)bytes / 1e3);
}

static void
terminal_view__retry(struct kagent_terminal_view *view, const json_t *record,
		     struct kagent_buffer *line)
{
	const char *reason = terminal_view__string(record, "reason");
	const char *failure = terminal_view__string(record, "failure");
	double status = terminal_view__number_or(record, "status", 0);

	kagent_buffer_appendf(line, "retry %lld after ",
			      (long long)terminal_view__number_or(record, "attempt", 1));
	if (reason != NULL)
		terminal_view__append_first_line(line, reason, VIEW_SNIPPET_BYTES);
	else if (status > 0)
		kagent_buffer_appendf(line, "HTTP %.0f", status);
	else if (failure != NULL)
		terminal_view__append_first_line(line, failure, VIEW_SNIPPET_BYTES);
	else
		kagent_buffer_append_string(line, "a failure");
	kagent_buffer_appendf(line, ": waiting %.1f s",
			      terminal_view__number_or(record, "delay_ms", 0) / 1000);
}

static void
terminal_view__reply(struct kagent_terminal_view *view, const json_t *record,
		     struct kagent_buffer *line)
{
	const json_t *usage = json_object_get(record, "usage");
	const json_t *message = json_object_get(record, "message");
	const json_t *calls = json_object_get(message, "tool_calls");
	const char *finish = terminal_view__string(record, "finish");
	char input[32], output[32];
	double value;
	size_t index;
	json_t *call;

	kagent_units_format_tokens(input, sizeof input,
				   terminal_view__number_or(usage, "input_tokens", 0));
	kagent_units_format_tokens(output, sizeof output,
				   terminal_view__number_or(usage, "output_tokens", 0));
	kagent_buffer_appendf(line, "%s in / %s out tokens", input, output);
	if (terminal_view__number(record, "cost", &value))
		kagent_buffer_appendf(line, ", $%.4f", value);
	if (terminal_view__number(record, "seconds", &value))
		kagent_buffer_appendf(line, ", %.1f s", value);
	if (terminal_view__number(record, "attempts", &value) && value > 1)
		kagent_buffer_appendf(line, ", %.0f attempts", value);
	if (json_array_size(calls) > 0) {
		kagent_buffer_append_string(line, "; calls ");
		json_array_foreach(calls, index, call)
		{
			const char *name = terminal_view__string(call, "name");

			if (index > 0)
				kagent_buffer_append_string(line, ", ");
			terminal_view__append_first_line(line, name != NULL ? name : "?",
							 VIEW_ARGUMENT_BYTES);
		}
	} else {
		kagent_buffer_append_string(line, "; no tool call");
	}
	if (finish != NULL && strcmp(finish, "length") == 0)
		kagent_buffer_append_string(line, " (cut at the output limit)");
	if (view->verbose) {
		terminal_view__append_block(line, "reasoning",
					    terminal_view__string(message, "reasoning"));
		terminal_view__append_block(line, "text",
					    terminal_view__string(message, "content"));
		if (view->stream_events > 0)
			kagent_buffer_appendf(line, "\n  (%lld stream events)",
					      view->stream_events);
	}
	view->stream_events = 0;
}

static void
terminal_view__llm_error(struct kagent_terminal_view *view, const json_t *record,
			 struct kagent_buffer *line)
{
	const char *failure = terminal_view__string(record, "failure");
	const char *message = terminal_view__string(record, "message");
	double status = terminal_view__number_or(record, "http_status", 0);

	kagent_buffer_appendf(line, "model error (%s", failure != NULL ? failure : "unknown");
	if (status > 0)
		kagent_buffer_appendf(line, ", HTTP %.0f", status);
	kagent_buffer_append_string(line, ")");
	if (message != NULL) {
		kagent_buffer_append_string(line, ": ");
		terminal_view__append_first_line(line, message, VIEW_SNIPPET_BYTES);
	}
}

/* One argument for the call line: sources by their size, strings short, the rest in brief. */
static void
terminal_view__append_argument(struct kagent_buffer *line, const char *key, const json_t *value)
{
	const char *text = json_string_value(value);

	terminal_view__append_first_line(line, key, VIEW_ARGUMENT_BYTES);
	kagent_buffer_append_string(line, ": ");
	if (text != NULL && strcmp(key, "source") == 0) {
		size_t length = strlen(text), lines = length > 0 && text[length - 1] != '\n';

		for (const char *at = text; (at = strchr(at, '\n')) != NULL; at++)
			lines++;
		kagent_buffer_appendf(line, "%zu line%s", lines, lines == 1 ? "" : "s");
	} else if (text != NULL) {
		kagent_buffer_append_string(line, "\"");
		terminal_view__append_first_line(line, text, VIEW_ARGUMENT_BYTES);
		kagent_buffer_append_string(line, "\"");
	} else if (json_is_object(value)) {
		size_t count = json_object_size(value);

		kagent_buffer_appendf(line, "{%zu key%s}", count, count == 1 ? "" : "s");
	} else if (json_is_array(value)) {
		size_t count = json_array_size(value);

		kagent_buffer_appendf(line, "[%zu item%s]", count, count == 1 ? "" : "s");
	} else {
		char *dumped = json_dumps(value, JSON_ENCODE_ANY);

		kagent_buffer_append_string(line, dumped != NULL ? dumped : "?");
		free(dumped);
	}
}

static void
terminal_view__tool_call(struct kagent_terminal_view *view, const json_t *record,
			 struct kagent_buffer *line)
{
	const json_t *arguments = json_object_get(record, "arguments");
	const char *name = terminal_view__string(record, "name");
	json_t *parsed = NULL;

	kagent_buffer_append_string(line, "call ");
	terminal_view__append_first_line(line, name != NULL ? name : "?", VIEW_ARGUMENT_BYTES);
	if (json_is_string(arguments)) {
		parsed = json_loads(json_string_value(arguments), 0, NULL);
		arguments = parsed;
		if (parsed == NULL) {
			kagent_buffer_append_string(line, " (arguments that are not JSON: ");
			terminal_view__append_first_line(
			    line, terminal_view__string(record, "arguments"), VIEW_ARGUMENT_BYTES);
			kagent_buffer_append_string(line, ")");
		}
	}
	if (json_object_size(arguments) > 0) {
		const char *key;
		json_t *value;
		int first = 1;

		kagent_buffer_append_string(line, " {");
		json_object_foreach((json_t *)arguments, key, value)
		{
			if (!first)
				kagent_buffer_append_string(line, ", ");
			terminal_view__append_argument(line, key, value);
			first = 0;
		}
		kagent_buffer_append_string(line, "}");
	}
	json_decref(parsed);
}

static void
terminal_view__tool_result(struct kagent_terminal_view *view, const json_t *record,
			   struct kagent_buffer *line)
{
	const char *name = terminal_view__string(record, "name");
	const char *content = terminal_view__string(record, "content");
	double seconds;

	terminal_view__append_first_line(line, name != NULL ? name : "tool", VIEW_ARGUMENT_BYTES);
	kagent_buffer_append_string(
	    line, json_is_true(json_object_get(record, "is_error")) ? " failed" : " returned");
	if (terminal_view__number(record, "seconds", &seconds))
		kagent_buffer_appendf(line, " in %.1f s", seconds);
	if (content == NULL || content[0] == '\0')
		return;
	kagent_buffer_append_string(line, ":");
	if (view->verbose) {
		terminal_view__append_block(line, NULL, content);
	} else {
		kagent_buffer_append_string(line, " ");
		terminal_view__append_first_line(line, content, VIEW_SNIPPET_BYTES);
	}
}

static void
terminal_view__verdict(struct kagent_terminal_view *view, const json_t *record,
		       struct kagent_buffer *line)
{
	const char *purpose = terminal_view__string(record, "purpose");
	const char *variant = terminal_view__string(record, "variant");
	const char *status = terminal_view__string(record, "status");
	const char *reason = terminal_view__string(record, "reason");
	double value;

	kagent_buffer_appendf(line, "%s %s -> ", purpose != NULL ? purpose : "evaluate",
			      variant != NULL ? variant : "?");
	terminal_view__append_first_line(line, status != NULL ? status : "no status",
					 VIEW_ARGUMENT_BYTES);
	if (status != NULL && strcmp(status, "correct") == 0) {
		if (terminal_view__number(record, "speedup_vs_eager", &value))
			kagent_buffer_appendf(line, ", %.2fx eager", value);
		if (terminal_view__number(record, "speedup_vs_compile", &value))
			kagent_buffer_appendf(line, ", %.2fx compile", value);
		if (terminal_view__number(record, "candidate_ms", &value))
			kagent_buffer_appendf(line, " (%.4f ms)", value);
	} else if (reason != NULL) {
		kagent_buffer_append_string(line, ": ");
		terminal_view__append_first_line(line, reason, VIEW_SNIPPET_BYTES);
	}
}

static void
terminal_view__commit(struct kagent_terminal_view *view, const json_t *record,
		      struct kagent_buffer *line)
{
	const char *variant = terminal_view__string(record, "variant");
	const char *commit = terminal_view__string(record, "commit");
	const char *branch = terminal_view__string(record, "branch");

	kagent_buffer_appendf(line, "commit %s", variant != NULL ? variant : "?");
	if (commit != NULL)
		kagent_buffer_appendf(line, " %.7s", commit);
	if (branch != NULL) {
		kagent_buffer_append_string(line, " on ");
		terminal_view__append_first_line(line, branch, VIEW_SNIPPET_BYTES);
	}
}

/* Remembers the best variant (from a best record, or turn_end's best). */
static void
terminal_view__set_best(struct kagent_terminal_view *view, const json_t *best)
{
	const char *variant = terminal_view__string(best, "variant");
	double speedup;

	if (!terminal_view__number(best, "speedup", &speedup))
		return;
	free(view->best_variant);
	view->best_variant = variant != NULL ? kagent_strdup(variant) : NULL;
	view->best_speedup = speedup;
	view->have_best = 1;
}

static void
terminal_view__best(struct kagent_terminal_view *view, const json_t *record,
		    struct kagent_buffer *line)
{
	const char *variant = terminal_view__string(record, "variant");
	const char *baseline = terminal_view__string(record, "baseline");
	double value;

	kagent_buffer_appendf(line, "best %s", variant != NULL ? variant : "?");
	if (terminal_view__number(record, "speedup", &value))
		kagent_buffer_appendf(line, " %.2fx", value);
	if (baseline != NULL &&
	    (strcmp(baseline, "eager") == 0 || strcmp(baseline, "compile") == 0))
		kagent_buffer_appendf(line, " vs %s", baseline);
	if (terminal_view__number(record, "previous", &value))
		kagent_buffer_appendf(line, " (was %.2fx)", value);
	else
		kagent_buffer_append_string(line, " (was none)");
	terminal_view__set_best(view, record);
}

static void
terminal_view__turn_end(struct kagent_terminal_view *view, const json_t *record,
			struct kagent_buffer *line)
{
	const json_t *totals = json_object_get(record, "totals");
	const json_t *limits = json_object_get(record, "limits");

	view->turns = (long long)terminal_view__number_or(totals, "turns", (double)view->turns);
	view->input_tokens =
	    (long long)terminal_view__number_or(totals, "input_tokens", (double)view->input_tokens);
	view->output_tokens = (long long)terminal_view__number_or(totals, "output_tokens",
								  (double)view->output_tokens);
	view->cost = terminal_view__number_or(totals, "cost", view->cost);
	view->wall_seconds = terminal_view__number_or(totals, "wall_seconds", view->wall_seconds);
	view->gpu_seconds = terminal_view__number_or(totals, "gpu_seconds", view->gpu_seconds);
	view->max_turns =
	    (long long)terminal_view__number_or(limits, "max_turns", (double)view->max_turns);
	view->max_tokens =
	    (long long)terminal_view__number_or(limits, "max_tokens", (double)view->max_tokens);
	view->max_cost = terminal_view__number_or(limits, "max_cost", view->max_cost);
	view->max_wall_seconds =
	    terminal_view__number_or(limits, "max_wall_seconds", view->max_wall_seconds);
	view->max_gpu_seconds =
	    terminal_view__number_or(limits, "max_gpu_seconds", view->max_gpu_seconds);
	terminal_view__set_best(view, json_object_get(record, "best"));
	if (view->live)
		return; /* the status line says it all */
	kagent_buffer_appendf(
	    line, "turn %lld done: ",
	    (long long)terminal_view__number_or(record, "turn", (double)view->turns));
	terminal_view__append_best(view, line);
	kagent_buffer_appendf(line, "; budget: turns %lld", view->turns);
	if (view->max_turns > 0)
		kagent_buffer_appendf(line, "/%lld", view->max_turns);
	kagent_buffer_append_string(line, ", tokens ");
	terminal_view__append_used(line, kagent_units_format_tokens,
				   (double)(view->input_tokens + view->output_tokens),
				   (double)view->max_tokens);
	kagent_buffer_append_string(line, ", ");
	terminal_view__append_used(line, terminal_view__format_dollars, view->cost, view->max_cost);
	kagent_buffer_append_string(line, ", ");
	terminal_view__append_used(line, kagent_units_format_duration, view->wall_seconds,
				   view->max_wall_seconds);
	if (view->max_gpu_seconds > 0 || view->gpu_seconds > 0) {
		kagent_buffer_append_string(line, ", gpu ");
		terminal_view__append_used(line, kagent_units_format_duration, view->gpu_seconds,
					   view->max_gpu_seconds);
	}
}

static void
terminal_view__stop(struct kagent_terminal_view *view, const json_t *record,
		    struct kagent_buffer *line)
{
	static const char *const reasons[][2] = {
	    {"target_reached", "target reached"},  {"model_finished", "the model finished"},
	    {"budget_turns", "turn budget spent"}, {"budget_tokens", "token budget spent"},
	    {"budget_cost", "cost budget spent"},  {"budget_wall", "time budget spent"},
	    {"budget_gpu", "GPU budget spent"},	   {"llm_error", "model error"},
	    {"interrupted", "interrupted"},	   {"bad_problem", "bad problem"},
	};
	const char *reason = terminal_view__string(record, "reason");
	const char *detail = terminal_view__string(record, "detail");
	const char *words = reason;

	for (size_t i = 0; reason != NULL && i < sizeof reasons / sizeof reasons[0]; i++) {
		if (strcmp(reason, reasons[i][0]) == 0)
			words = reasons[i][1];
	}
	kagent_buffer_append_string(line, "stop: ");
	terminal_view__append_first_line(line, words != NULL ? words : "unknown reason",
					 VIEW_SNIPPET_BYTES);
	if (detail != NULL && detail[0] != '\0') {
		kagent_buffer_append_string(line, " (");
		terminal_view__append_first_line(line, detail, VIEW_SNIPPET_BYTES);
		kagent_buffer_append_string(line, ")");
	}
}

static void
terminal_view__final(struct kagent_terminal_view *view, const json_t *record,
		     struct kagent_buffer *line)
{
	const json_t *confirmation = json_object_get(record, "confirmation");
	const json_t *generalisation = json_object_get(confirmation, "generalisation");
	const json_t *totals = json_object_get(record, "totals");
	const char *variant = terminal_view__string(record, "variant");
	const char *path = terminal_view__string(record, "path");
	const char *status = terminal_view__string(confirmation, "status");
	const char *reason = terminal_view__string(confirmation, "reason");
	char tokens[32], wall[32];
	double value;

	kagent_buffer_append_string(line, "final: ");
	if (variant == NULL) {
		kagent_buffer_append_string(line, "no correct variant");
	} else if (json_is_true(json_object_get(record, "confirmed"))) {
		kagent_buffer_appendf(line, "%s confirmed on unseen seeds", variant);
		if (terminal_view__number(confirmation, "speedup", &value))
			kagent_buffer_appendf(line, ", %.2fx", value);
	} else {
		kagent_buffer_appendf(line, "%s not confirmed on unseen seeds", variant);
		if (status != NULL) {
			kagent_buffer_append_string(line, " (");
			terminal_view__append_first_line(line, status, VIEW_ARGUMENT_BYTES);
			if (reason != NULL) {
				kagent_buffer_append_string(line, ": ");
				terminal_view__append_first_line(line, reason, VIEW_SNIPPET_BYTES);
			}
			kagent_buffer_append_string(line, ")");
		}
	}
	if (json_is_false(json_object_get(generalisation, "generalises")) &&
	    terminal_view__string(generalisation, "reason") != NULL) {
		kagent_buffer_append_string(line, "; does not generalise: ");
		terminal_view__append_first_line(
		    line, terminal_view__string(generalisation, "reason"), VIEW_SNIPPET_BYTES);
	}
	if (path != NULL) {
		kagent_buffer_append_string(line, "; best kernel: ");
		terminal_view__append_first_line(line, path, 4096);
	}
	if (json_is_object(totals)) {
		kagent_units_format_tokens(
		    tokens, sizeof tokens,
		    terminal_view__number_or(totals, "input_tokens", 0) +
			terminal_view__number_or(totals, "output_tokens", 0));
		kagent_units_format_duration(wall, sizeof wall,
					     terminal_view__number_or(totals, "wall_seconds", 0));
		kagent_buffer_appendf(line, "\ntotals: %.0f turns, %s tokens, $%.2f, %s",
				      terminal_view__number_or(totals, "turns", 0), tokens,
				      terminal_view__number_or(totals, "cost", 0), wall);
		if (terminal_view__number(totals, "gpu_seconds", &value) && value > 0) {
			kagent_units_format_duration(wall, sizeof wall, value);
			kagent_buffer_appendf(line, ", gpu %s", wall);
		}
	}
	if (view->verbose)
		terminal_view__append_block(line, "summary",
					    terminal_view__string(record, "summary"));
}

static void
terminal_view__message(struct kagent_terminal_view *view, const json_t *record,
		       struct kagent_buffer *line)
{
	kagent_buffer_append_string(line, "message to the model:");
	terminal_view__append_block(line, NULL, terminal_view__string(record, "content"));
}

static void
terminal_view__stream(struct kagent_terminal_view *view, const json_t *record,
		      struct kagent_buffer *line)
{
	view->stream_events++;
}

/* One renderer per record type; each appends its line (or nothing) and updates the state. */
static const struct terminal_view__renderer {
	const char *type;
	void (*render)(struct kagent_terminal_view *view, const json_t *record,
		       struct kagent_buffer *line);
	int per_turn;	  /* the line starts with "turn N: " */
	int verbose_only; /* shown (and counted) only with verbose */
} terminal_view__renderers[] = {
    {"run_start", terminal_view__run_start, 0, 0},
    {"message", terminal_view__message, 1, 1},
    {"request", terminal_view__request, 1, 1},
    {"stream", terminal_view__stream, 0, 0},
    {"retry", terminal_view__retry, 1, 0},
    {"reply", terminal_view__reply, 1, 0},
    {"llm_error", terminal_view__llm_error, 1, 0},
    {"tool_call", terminal_view__tool_call, 1, 0},
    {"tool_result", terminal_view__tool_result, 1, 0},
    {"verdict", terminal_view__verdict, 1, 0},
    {"commit", terminal_view__commit, 1, 0},
    {"best", terminal_view__best, 1, 0},
    {"turn_end", terminal_view__turn_end, 0, 0},
    {"stop", terminal_view__stop, 0, 0},
    {"final", terminal_view__final, 0, 0},
};

void
kagent_terminal_view_record(struct kagent_terminal_view *view, const json_t *record)
{
	const char *type = terminal_view__string(record, "type");
	json_t *turn = json_object_get(record, "turn");
	const struct terminal_view__renderer *renderer = NULL;
	struct kagent_buffer line = {0};

	for (size_t i = 0; type != NULL &&
			   i < sizeof terminal_view__renderers / sizeof terminal_view__renderers[0];
	     i++) {
		if (strcmp(type, terminal_view__renderers[i].type) == 0)
			renderer = &terminal_view__renderers[i];
	}
	if (renderer == NULL || (renderer->verbose_only && !view->verbose))
		return;
	if (json_is_integer(turn) && json_integer_value(turn) > view->turn)
		view->turn = json_integer_value(turn);
	if (renderer->per_turn && json_is_integer(turn))
		kagent_buffer_appendf(&line, "turn %lld: ", (long long)json_integer_value(turn));
	renderer->render(view, record, &line);
	if (line.length > 0)
		terminal_view__emit(view, kagent_buffer_string(&line));
	else if (view->live && renderer->render != terminal_view__stream)
		terminal_view__draw_status(view); /* the state may have changed (turn_end) */
	kagent_buffer_free(&line);
}

void
kagent_terminal_view_finish(struct kagent_terminal_view *view)
{
	terminal_view__erase_status(view);
	fflush(view->stream);
}
