/*
 * A recursive-descent reader for the subset of the Itanium C++ ABI mangling
 * that CUDA kernels use (see include/kagent/cuda/demangle.h). Every substitutable
 * component is recorded in order as the ABI requires, so S_/S0_ and T_
 * references resolve to the right text. Recursion depth, table sizes and the
 * output are capped so hostile input cannot exhaust the stack or memory.
 */
#include "kagent/cuda/demangle.h"

#include "kagent/base/alloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TABLE 256
#define MAX_DEPTH 64
#define MAX_OUTPUT 16384

struct text {
	char *data;
	size_t length;
};

struct reader {
	const char *p;
	const char *end;
	int depth;
	int error; /* first error: -EINVAL or -E2BIG */
	struct text substitutions[MAX_TABLE];
	size_t substitution_count;
	struct text template_args[MAX_TABLE]; /* the outermost function's, for T_ */
	size_t template_arg_count;
	bool last_name_template;    /* the function name ended with template args */
	struct text last_component; /* unqualified name of the function */
};

static void
text_append(struct reader *reader, struct text *text, const char *data, size_t length)
{
	if (text->length + length > MAX_OUTPUT) {
		if (reader->error == 0)
			reader->error = -E2BIG;
		return;
	}
	text->data = kagent_realloc(text->data, text->length + length + 1);
	memcpy(text->data + text->length, data, length);
	text->length += length;
	text->data[text->length] = '\0';
}

static void
text_add(struct reader *reader, struct text *text, const char *string)
{
	text_append(reader, text, string, strlen(string));
}

static struct text
text_copy(const struct text *text)
{
	struct text copy = {NULL, text->length};

	copy.data = kagent_strndup(text->data != NULL ? text->data : "", text->length);
	return copy;
}

static void
fail(struct reader *reader)
{
	if (reader->error == 0)
		reader->error = -EINVAL;
}

static void
remember(struct reader *reader, const struct text *text)
{
	if (reader->substitution_count == MAX_TABLE) {
		if (reader->error == 0)
			reader->error = -E2BIG;
		return;
	}
	reader->substitutions[reader->substitution_count++] = text_copy(text);
}

static bool
peek(struct reader *reader, char c)
{
	return reader->p < reader->end && *reader->p == c;
}

static bool
eat(struct reader *reader, char c)
{
	if (!peek(reader, c))
		return false;
	reader->p++;
	return true;
}

/* <seq-id> _ in base 36 (digits and upper-case letters); empty means -1. */
static long
seq_id(struct reader *reader)
{
	long value = 0;

	if (eat(reader, '_'))
		return 0;
	while (reader->p < reader->end && *reader->p != '_') {
		char c = *reader->p++;

		if (isdigit((unsigned char)c))
			value = value * 36 + (c - '0');
		else if (c >= 'A' && c <= 'Z')
			value = value * 36 + (c - 'A' + 10);
		else {
			fail(reader);
			return -1;
		}
		if (value > MAX_TABLE) {
			fail(reader);
			return -1;
		}
	}
	if (!eat(reader, '_')) {
		fail(reader);
		return -1;
	}
	return value + 1;
}

static bool
source_name(struct reader *reader, struct text *out)
{
	size_t length = 0;

	if (reader->p >= reader->end || !isdigit((unsigned char)*reader->p)) {
		fail(reader);
		return false;
	}
	while (reader->p < reader->end && isdigit((unsigned char)*reader->p)) {
		length = length * 10 + (size_t)(*reader->p++ - '0');
		if (length > KAGENT_DEMANGLE_MAX_INPUT) {
			fail(reader);
			return false;
		}
	}
	if (length == 0 || (size_t)(reader->end - reader->p) < length) {
		fail(reader);
		return false;
	}
	text_append(reader, out, reader->p, length);
	reader->p += length;
	return true;
}

static bool type(struct reader *reader, struct text *out);

static bool
template_args(struct reader *reader, struct text *out, bool record)
{
	bool first = true;

	if (!eat(reader, 'I')) {
		fail(reader);
		return false;
	}
	if (record) {
		size_t index;

		for (index = 0; index < reader->template_arg_count; index++)
			free(reader->template_args[index].data);
		reader->template_arg_count = 0;
	}
	text_add(reader, out, "<");
	while (reader->error == 0 && !eat(reader, 'E')) {
		struct text argument = {NULL, 0};

		if (reader->p >= reader->end) {
			fail(reader);
			break;
		}
		if (!first)
			text_add(reader, out, ", ");
		first = false;
		if (eat(reader, 'L')) {
			/* An integer literal: L <type> [n] <digits> E. */
			char kind = reader->p < reader->end ? *reader->p++ : '\0';
			bool negative = eat(reader, 'n');
			const char *digits = reader->p;

			while (reader->p < reader->end && isdigit((unsigned char)*reader->p))
				reader->p++;
			if (reader->p == digits || !eat(reader, 'E')) {
				fail(reader);
				break;
			}
			if (kind == 'b') {
				text_add(reader, &argument, digits[0] == '0' ? "false" : "true");
			} else {
				if (negative)
					text_add(reader, &argument, "-");
				text_append(reader, &argument, digits,
					    (size_t)(reader->p - 1 - digits));
				switch (kind) {
				case 'i':
					break;
				case 'j':
					text_add(reader, &argument, "u");
					break;
				case 'l':
					text_add(reader, &argument, "l");
					break;
				case 'm':
					text_add(reader, &argument, "ul");
					break;
				case 'x':
					text_add(reader, &argument, "ll");
					break;
				case 'y':
					text_add(reader, &argument, "ull");
					break;
				default:
					fail(reader);
				}
			}
		} else if (!type(reader, &argument)) {
			free(argument.data);
			break;
		}
		if (argument.data != NULL)
			text_append(reader, out, argument.data, argument.length);
		if (record && reader->template_arg_count < MAX_TABLE)
			reader->template_args[reader->template_arg_count++] = argument;
		else
			free(argument.data);
	}
	if (out->length > 0 && out->data[out->length - 1] == '>')
		text_add(reader, out, " ");
	text_add(reader, out, ">");
	return reader->error == 0;
}

/*
 * <nested-name> ::= N [CV] <prefix>... E, or an unscoped name with optional
 * template args. is_function: the whole name is the function's own, which the
 * ABI does not make substitutable; template args then become T_ targets.
 */
static bool
name(struct reader *reader, struct text *out, bool is_function)
{
	struct text full = {NULL, 0};
	bool nested = eat(reader, 'N'), ok = true;

	if (nested && (peek(reader, 'K') || peek(reader, 'V') || peek(reader, 'r'))) {
		fail(reader); /* cv-qualified member functions: not kernels */
		return false;
	}
	if (!nested && peek(reader, 'S') && reader->p + 1 < reader->end && reader->p[1] == 't') {
		reader->p += 2;
		text_add(reader, &full, "std::");
	}
	for (;;) {
		struct text component = {NULL, 0};
		bool last, substituted = false;

		if (peek(reader, 'S')) {
			long id;

			reader->p++;
			id = seq_id(reader);
			if (id < 0 || (size_t)id >= reader->substitution_count) {
				fail(reader);
				ok = false;
				break;
			}
			text_append(reader, &full, reader->substitutions[id].data,
				    reader->substitutions[id].length);
			substituted = true; /* already in the table: not added again */
		} else {
			if (full.length > 0 && full.data[full.length - 1] != ':')
				text_add(reader, &full, "::");
			if (!source_name(reader, &component)) {
				ok = false;
				break;
			}
			free(reader->last_component.data);
			reader->last_component = text_copy(&component);
			text_append(reader, &full, component.data, component.length);
			free(component.data);
		}
		reader->last_name_template = false;
		if (peek(reader, 'I')) {
			/* The template name itself is substitutable, then the template-id. */
			remember(reader, &full);
			/* The last args recorded are the function's own, which T_ names. */
			if (!template_args(reader, &full, is_function)) {
				ok = false;
				break;
			}
			reader->last_name_template = true;
			substituted = false;
		}
		last = !nested || peek(reader, 'E');
		if (!substituted && !(last && is_function) &&
		    !(!nested && !reader->last_name_template && is_function))
			remember(reader, &full);
		if (last)
			break;
		text_add(reader, &full, "::");
	}
	if (ok && nested && !eat(reader, 'E')) {
		fail(reader);
		ok = false;
	}
	if (full.data != NULL)
		text_append(reader, out, full.data, full.length);
	free(full.data);
	return ok && reader->error == 0;
}

static const char *
builtin(char c)
{
	switch (c) {
	case 'v':
		return "void";
	case 'w':
		return "wchar_t";
	case 'b':
		return "bool";
	case 'c':
		return "char";
	case 'a':
		return "signed char";
	case 'h':
		return "unsigned char";
	case 's':
		return "short";
	case 't':
		return "unsigned short";
	case 'i':
		return "int";
	case 'j':
		return "unsigned int";
	case 'l':
		return "long";
	case 'm':
		return "unsigned long";
	case 'x':
		return "long long";
	case 'y':
		return "unsigned long long";
	case 'n':
		return "__int128";
	case 'o':
		return "unsigned __int128";
	case 'f':
		return "float";
	case 'd':
		return "double";
	case 'e':
		return "long double";
	case 'z':
		return "...";
	default:
		return NULL;
	}
}

static bool
type(struct reader *reader, struct text *out)
{
	struct text inner = {NULL, 0};
	const char *simple;
	bool ok = false;
	char c;

	if (++reader->depth > MAX_DEPTH || reader->p >= reader->end) {
		fail(reader);
		goto out;
	}
	c = *reader->p;
	simple = builtin(c);
	if (simple != NULL) {
		reader->p++;
		text_add(reader, out, simple);
		ok = true;
		goto out;
	}
	if (c == 'D' && reader->p + 1 < reader->end) {
		const char *name_text = NULL;

		switch (reader->p[1]) {
		case 'h':
			name_text = "half";
			break;
		case 'n':
			name_text = "decltype(nullptr)";
			break;
		case 's':
			name_text = "char16_t";
			break;
		case 'i':
			name_text = "char32_t";
			break;
		}
		if (name_text == NULL) {
			fail(reader);
			goto out;
		}
		reader->p += 2;
		text_add(reader, out, name_text);
		ok = true;
		goto out;
	}
	if (c == 'P' || c == 'R' || c == 'O' || c == 'K' || c == 'V' || c == 'r') {
		const char *suffix = c == 'P'	? "*"
				     : c == 'R' ? "&"
				     : c == 'O' ? "&&"
				     : c == 'K' ? " const"
				     : c == 'V' ? " volatile"
						: " __restrict";

		reader->p++;
		if (!type(reader, &inner))
			goto out;
		text_append(reader, &inner, suffix, strlen(suffix));
		remember(reader, &inner);
		text_append(reader, out, inner.data, inner.length);
		ok = reader->error == 0;
		goto out;
	}
	if (c == 'T') {
		long id;

		reader->p++;
		id = seq_id(reader);
		if (id < 0 || (size_t)id >= reader->template_arg_count) {
			fail(reader);
			goto out;
		}
		text_append(reader, &inner, reader->template_args[id].data,
			    reader->template_args[id].length);
		remember(reader, &inner);
		text_append(reader, out, inner.data, inner.length);
		ok = reader->error == 0;
		goto out;
	}
	if (c == 'S' && !(reader->p + 1 < reader->end && reader->p[1] == 't')) {
		long id;

		reader->p++;
		id = seq_id(reader);
		if (id < 0 || (size_t)id >= reader->substitution_count) {
			fail(reader);
			goto out;
		}
		text_append(reader, &inner, reader->substitutions[id].data,
			    reader->substitutions[id].length);
		if (peek(reader, 'I')) {
			if (!template_args(reader, &inner, false))
				goto out;
			remember(reader, &inner);
		}
		text_append(reader, out, inner.data, inner.length);
		ok = reader->error == 0;
		goto out;
	}
	if (isdigit((unsigned char)c) || c == 'N' || c == 'S') {
		ok = name(reader, out, false);
		goto out;
	}
	fail(reader);
out:
	free(inner.data);
	reader->depth--;
	return ok;
}

static void
reader_clear(struct reader *reader)
{
	size_t index;

	for (index = 0; index < reader->substitution_count; index++)
		free(reader->substitutions[index].data);
	for (index = 0; index < reader->template_arg_count; index++)
		free(reader->template_args[index].data);
	free(reader->last_component.data);
}

/* Parses a whole mangled name; fills *function_name with the unqualified name even on failure. */
static int
demangle(const char *mangled, char **demangled_out, char **function_name)
{
	struct reader reader;
	struct text function = {NULL, 0}, result = {NULL, 0};
	bool first = true;
	size_t length = strlen(mangled);
	int status = 0;

	memset(&reader, 0, sizeof reader);
	*demangled_out = NULL;
	if (function_name != NULL)
		*function_name = NULL;
	if (length > KAGENT_DEMANGLE_MAX_INPUT) {
		status = -E2BIG;
		goto out;
	}
	if (length < 3 || memcmp(mangled, "_Z", 2) != 0) {
		status = -EINVAL;
		goto out;
	}
	reader.p = mangled + 2;
	reader.end = mangled + length;
	if (!name(&reader, &function, true)) {
		status = reader.error != 0 ? reader.error : -EINVAL;
		goto out;
	}
	if (reader.last_name_template) {
		/* Template functions encode their return type first. */
		if (!type(&reader, &result)) {
			status = reader.error != 0 ? reader.error : -EINVAL;
			goto out;
		}
		text_add(&reader, &result, " ");
	}
	text_append(&reader, &result, function.data, function.length);
	text_add(&reader, &result, "(");
	if (reader.p == reader.end) {
		status = -EINVAL;
		goto out;
	}
	if (reader.end - reader.p == 1 && *reader.p == 'v') {
		reader.p++;
	}
	while (reader.p < reader.end) {
		if (!first)
			text_add(&reader, &result, ", ");
		first = false;
		if (!type(&reader, &result)) {
			status = reader.error != 0 ? reader.error : -EINVAL;
			goto out;
		}
	}
	text_add(&reader, &result, ")");
	if (reader.error != 0) {
		status = reader.error;
		goto out;
	}
	*demangled_out = result.data;
	result.data = NULL;
out:
	if (function_name != NULL && reader.last_component.data != NULL)
		*function_name = kagent_strdup(reader.last_component.data);
	free(function.data);
	free(result.data);
	reader_clear(&reader);
	return status;
}

int
kagent_demangle_itanium(const char *mangled, char **demangled_out)
{
	return demangle(mangled, demangled_out, NULL);
}

char *
kagent_demangle_display(const char *mangled, int *exact_out)
{
	char *demangled = NULL, *function_name = NULL;

	*exact_out = 0;
	if (demangle(mangled, &demangled, &function_name) == 0) {
		free(function_name);
		*exact_out = 1;
		return demangled;
	}
	if (function_name != NULL)
		return function_name;
	return kagent_strdup(mangled);
}
