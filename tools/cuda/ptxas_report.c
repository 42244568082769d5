/*
 * Parses the ptxas -v resource report (see include/kagent/cuda/ptxas_report.h).
 *
 * The report is line oriented:
 *   ptxas info    : Compiling entry function '_Z6kernelPfi' for 'sm_90a'
 *   ptxas info    : Function properties for _Z6kernelPfi
 *   ptxas         .     296 bytes stack frame, 356 bytes spill stores, 356 bytes spill loads
 *   ptxas info    : Used 32 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
 *   ptxas info    : Compile time = 17.775 ms
 * "Function properties" also appears for non-inlined device functions, which
 * are not kernels: the properties line is applied to the function it names,
 * and the "Used" line to the entry function being compiled. The parser never
 * trusts the log: every number is range checked, names are capped, and
 * anything unrecognised is skipped.
 */
#include "kagent/cuda/ptxas_report.h"

#include "kagent/base/alloc.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct ptxas_report__line {
	const char *start;
	size_t length;
};

static bool
ptxas_report__line_starts_with(const struct ptxas_report__line *line, const char *prefix,
			       size_t *offset)
{
	size_t length = strlen(prefix);

	if (line->length < length || memcmp(line->start, prefix, length) != 0)
		return false;
	*offset = length;
	return true;
}

static const char *
ptxas_report__line_find(const struct ptxas_report__line *line, size_t from, const char *needle)
{
	size_t length = strlen(needle), index;

	for (index = from; index + length <= line->length; index++) {
		if (memcmp(line->start + index, needle, length) == 0)
			return line->start + index;
	}
	return NULL;
}

/* The text after "ptxas <word> :", or false if this is not a ptxas line of that kind. */
static bool
ptxas_report__payload(const struct ptxas_report__line *line, const char *kind,
		      struct ptxas_report__line *payload)
{
	size_t offset, kind_length = strlen(kind);

	if (!ptxas_report__line_starts_with(line, "ptxas", &offset))
		return false;
	while (offset < line->length && line->start[offset] == ' ')
		offset++;
	if (line->length - offset < kind_length ||
	    memcmp(line->start + offset, kind, kind_length) != 0)
		return false;
	offset += kind_length;
	while (offset < line->length && line->start[offset] == ' ')
		offset++;
	if (offset < line->length && line->start[offset] == ':')
		offset++;
	else if (strcmp(kind, ".") != 0)
		return false;
	while (offset < line->length && line->start[offset] == ' ')
		offset++;
	payload->start = line->start + offset;
	payload->length = line->length - offset;
	return true;
}

/* A quoted name 'like this' starting at or after from; -EINVAL if absent or unterminated. */
static int
ptxas_report__quoted(const struct ptxas_report__line *line, size_t from, char **name_out,
		     size_t *end_out)
{
	const char *open, *close;
	size_t length;

	open = ptxas_report__line_find(line, from, "'");
	if (open == NULL)
		return -EINVAL;
	close = ptxas_report__line_find(line, (size_t)(open - line->start) + 1, "'");
	if (close == NULL)
		return -EINVAL;
	length = (size_t)(close - open - 1);
	if (length == 0 || length > KAGENT_PTXAS_REPORT_MAX_NAME)
		return -EINVAL;
	*name_out = kagent_strndup(open + 1, length);
	*end_out = (size_t)(close - line->start) + 1;
	return 0;
}

/* Parses a non-negative decimal at *cursor within end; caps at LLONG_MAX / 2. */
static bool
ptxas_report__number(const char **cursor, const char *end, long long *value)
{
	const char *p = *cursor;
	long long total = 0;

	while (p < end && *p == ' ')
		p++;
	if (p >= end || !isdigit((unsigned char)*p))
		return false;
	while (p < end && isdigit((unsigned char)*p)) {
		if (total > LLONG_MAX / 20)
			return false;
		total = total * 10 + (*p - '0');
		p++;
	}
	*cursor = p;
	*value = total;
	return true;
}

static bool
ptxas_report__item_is(const char *start, const char *end, const char *word)
{
	size_t length = strlen(word);

	while (start < end && *start == ' ')
		start++;
	while (end > start && (end[-1] == ' ' || end[-1] == '\r'))
		end--;
	return (size_t)(end - start) == length && memcmp(start, word, length) == 0;
}

/*
 * One comma-separated item: "N registers", "used N barriers", "N bytes smem",
 * "N bytes cmem[0]", "N bytes stack frame", "N bytes spill stores", ...
 */
static void
ptxas_report__apply_item(struct kagent_ptxas_kernel *kernel, const char *start, const char *end)
{
	const char *p = start;
	long long value;

	while (p < end && *p == ' ')
		p++;
	if ((size_t)(end - p) >= 5 && memcmp(p, "Used ", 5) == 0)
		p += 5;
	else if ((size_t)(end - p) >= 5 && memcmp(p, "used ", 5) == 0)
		p += 5;
	if (!ptxas_report__number(&p, end, &value))
		return;
	if (ptxas_report__item_is(p, end, "registers") ||
	    ptxas_report__item_is(p, end, "register")) {
		kernel->registers = value > INT_MAX ? INT_MAX : (int)value;
		return;
	}
	if (ptxas_report__item_is(p, end, "barriers") || ptxas_report__item_is(p, end, "barrier")) {
		kernel->barriers = value > INT_MAX ? INT_MAX : (int)value;
		return;
	}
	while (p < end && *p == ' ')
		p++;
	if ((size_t)(end - p) < 6 || memcmp(p, "bytes ", 6) != 0)
		return;
	p += 6;
	if (ptxas_report__item_is(p, end, "stack frame"))
		kernel->stack_frame_bytes = value;
	else if (ptxas_report__item_is(p, end, "spill stores"))
		kernel->spill_store_bytes = value;
	else if (ptxas_report__item_is(p, end, "spill loads"))
		kernel->spill_load_bytes = value;
	else if (ptxas_report__item_is(p, end, "cumulative stack size"))
		kernel->cumulative_stack_bytes = value;
	else if (ptxas_report__item_is(p, end, "smem"))
		kernel->shared_bytes = value;
	else if (ptxas_report__item_is(p, end, "lmem"))
		kernel->local_bytes = value;
	else if ((size_t)(end - p) >= 5 && memcmp(p, "cmem[", 5) == 0)
		kernel->constant_bytes =
		    (kernel->constant_bytes < 0 ? 0 : kernel->constant_bytes) + value;
}

static void
ptxas_report__apply_items(struct kagent_ptxas_kernel *kernel,
			  const struct ptxas_report__line *payload)
{
	const char *p = payload->start, *end = payload->start + payload->length;

	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *item_end = comma != NULL ? comma : end;

		ptxas_report__apply_item(kernel, p, item_end);
		p = item_end + (comma != NULL ? 1 : 0);
	}
}

/* ptxas leaves zero-valued items out of the "Used" line: absent there means 0. */
static void
ptxas_report__apply_used(struct kagent_ptxas_kernel *kernel,
			 const struct ptxas_report__line *payload)
{
	ptxas_report__apply_items(kernel, payload);
	if (kernel->barriers < 0)
		kernel->barriers = 0;
	if (kernel->shared_bytes < 0)
		kernel->shared_bytes = 0;
	if (kernel->constant_bytes < 0)
		kernel->constant_bytes = 0;
	if (kernel->local_bytes < 0)
		kernel->local_bytes = 0;
}

static void
ptxas_report__kernel_init(struct kagent_ptxas_kernel *kernel, char *name)
{
	memset(kernel, 0, sizeof *kernel);
	kernel->mangled_name = name;
	kernel->registers = -1;
	kernel->barriers = -1;
	kernel->stack_frame_bytes = -1;
	kernel->spill_store_bytes = -1;
	kernel->spill_load_bytes = -1;
	kernel->cumulative_stack_bytes = -1;
	kernel->shared_bytes = -1;
	kernel->constant_bytes = -1;
	kernel->local_bytes = -1;
	kernel->compile_ms = -1;
}

static struct kagent_ptxas_kernel *
ptxas_report__find_kernel(struct kagent_ptxas_report *report, const char *name, size_t length)
{
	size_t index;

	for (index = report->kernel_count; index > 0; index--) {
		struct kagent_ptxas_kernel *kernel = &report->kernels[index - 1];

		if (strlen(kernel->mangled_name) == length &&
		    memcmp(kernel->mangled_name, name, length) == 0)
			return kernel;
	}
	return NULL;
}

int
kagent_ptxas_report_parse(const char *log, size_t length, struct kagent_ptxas_report **report_out,
			  char **cause)
{
	struct kagent_ptxas_report *report = kagent_calloc(1, sizeof *report);
	struct kagent_ptxas_kernel *current = NULL;    /* entry function being compiled */
	struct kagent_ptxas_kernel *properties = NULL; /* target of the next "." line */
	size_t capacity = 0, position = 0;
	int result = 0;

	report->global_bytes = -1;
	*report_out = NULL;
	while (position < length) {
		const char *newline = memchr(log + position, '\n', length - position);
		struct ptxas_report__line line, payload;
		size_t offset;

		line.start = log + position;
		line.length = newline != NULL ? (size_t)(newline - line.start) : length - position;
		position += line.length + 1;
		if (line.length > 0 && line.start[line.length - 1] == '\r')
			line.length--;

		if (ptxas_report__payload(&line, "info", &payload)) {
			if (ptxas_report__line_starts_with(&payload, "Compiling entry function ",
							   &offset)) {
				char *name = NULL, *arch = NULL;
				size_t end;

				if (ptxas_report__quoted(&payload, offset, &name, &end) < 0)
					continue;
				if (report->kernel_count == KAGENT_PTXAS_REPORT_MAX_KERNELS) {
					free(name);
					result = -E2BIG;
					*cause = kagent_asprintf(
					    "ptxas report lists more than %d kernels",
					    KAGENT_PTXAS_REPORT_MAX_KERNELS);
					goto out;
				}
				if (report->kernel_count == capacity) {
					capacity = capacity == 0 ? 8 : capacity * 2;
					report->kernels = kagent_realloc(
					    report->kernels, capacity * sizeof *report->kernels);
				}
				current = &report->kernels[report->kernel_count++];
				ptxas_report__kernel_init(current, name);
				if (ptxas_report__line_find(&payload, end, " for ") != NULL &&
				    ptxas_report__quoted(&payload, end, &arch, &end) == 0)
					current->arch = arch;
				properties = NULL;
			} else if (ptxas_report__line_starts_with(
				       &payload, "Function properties for ", &offset)) {
				const char *name = payload.start + offset;
				size_t name_length = payload.length - offset;

				while (name_length > 0 && name[name_length - 1] == ' ')
					name_length--;
				/* Device functions have properties too; only kernels are kept. */
				properties = ptxas_report__find_kernel(report, name, name_length);
			} else if (ptxas_report__line_starts_with(&payload, "Used ", &offset)) {
				if (current != NULL)
					ptxas_report__apply_used(current, &payload);
			} else if (ptxas_report__line_starts_with(&payload,
								  "Compile time = ", &offset)) {
				if (current != NULL) {
					char buffer[32];
					size_t copy = payload.length - offset;

					if (copy >= sizeof buffer)
						copy = sizeof buffer - 1;
					memcpy(buffer, payload.start + offset, copy);
					buffer[copy] = '\0';
					current->compile_ms = strtod(buffer, NULL);
					if (!(current->compile_ms >= 0 &&
					      current->compile_ms < 1e12))
						current->compile_ms = -1;
				}
			} else {
				const char *p = payload.start,
					   *end = payload.start + payload.length;
				long long value;

				if (ptxas_report__number(&p, end, &value) &&
				    ptxas_report__item_is(p, end, "bytes gmem"))
					report->global_bytes = value;
			}
		} else if (ptxas_report__payload(&line, ".", &payload)) {
			if (properties != NULL)
				ptxas_report__apply_items(properties, &payload);
		}
	}
	*report_out = report;
	report = NULL;
out:
	kagent_ptxas_report_free(report);
	return result;
}

void
kagent_ptxas_report_free(struct kagent_ptxas_report *report)
{
	size_t index;

	if (report == NULL)
		return;
	for (index = 0; index < report->kernel_count; index++) {
		free(report->kernels[index].mangled_name);
		free(report->kernels[index].arch);
	}
	free(report->kernels);
	free(report);
}
