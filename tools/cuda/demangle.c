/*
 * Kernel names through libiberty's Itanium demangler (see
 * include/kagent/cuda/demangle.h). libiberty's callback interface prints into
 * a sink of ours without allocating, so the sink can stop a name whose text
 * outgrows the cap by jumping out of the printer: nothing of libiberty's is
 * left to free, its state lives on the stack the jump unwinds.
 */
#include "kagent/cuda/demangle.h"

#include "kagent/base/alloc.h"

#include <ctype.h>
#include <errno.h>
#include <libiberty/demangle.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/* c++filt's options: parameters, cv-qualifiers, standard names spelled out. */
#define DEMANGLE__OPTIONS (DMGL_PARAMS | DMGL_ANSI | DMGL_VERBOSE)

struct demangle__sink {
	char *text; /* NUL-terminated, at most KAGENT_DEMANGLE_MAX_OUTPUT bytes */
	size_t length;
	jmp_buf too_long;
};

static void
demangle__append(const char *piece, size_t length, void *opaque)
{
	struct demangle__sink *sink = opaque;

	if (length > KAGENT_DEMANGLE_MAX_OUTPUT - sink->length)
		longjmp(sink->too_long, 1);
	sink->text = kagent_realloc(sink->text, sink->length + length + 1);
	memcpy(sink->text + sink->length, piece, length);
	sink->length += length;
	sink->text[sink->length] = '\0';
}

/*
 * setjmp in a function of its own: the sink is the caller's, so what the
 * printer appended before a jump stays readable (and freeable) after it.
 */
static int
demangle__print(const char *mangled, struct demangle__sink *sink)
{
	if (setjmp(sink->too_long) != 0)
		return -E2BIG;
	if (!cplus_demangle_v3_callback(mangled, DEMANGLE__OPTIONS, demangle__append, sink))
		return -EINVAL;
	return 0;
}

int
kagent_demangle_itanium(const char *mangled, char **demangled_out)
{
	struct demangle__sink sink = {.text = NULL, .length = 0};
	size_t length = strnlen(mangled, KAGENT_DEMANGLE_MAX_INPUT + 1);
	int status;

	*demangled_out = NULL;
	if (length > KAGENT_DEMANGLE_MAX_INPUT)
		return -E2BIG;
	if (length < 3 || memcmp(mangled, "_Z", 2) != 0)
		return -EINVAL;
	status = demangle__print(mangled, &sink);
	if (status == 0 && sink.text == NULL)
		status = -EINVAL; /* nothing printed: no name to show */
	if (status < 0) {
		free(sink.text);
		return status;
	}
	*demangled_out = sink.text;
	return 0;
}

/*
 * The last <source-name> of the function's own name (`_Z6kernel...`,
 * `_ZN2ns6kernelE...`), read up to its template arguments or the end of the
 * nesting; NULL where the mangling does not start that way.
 */
static char *
demangle__function_name(const char *mangled)
{
	const char *p = mangled + 2, *end = mangled + strnlen(mangled, KAGENT_DEMANGLE_MAX_INPUT);
	const char *name = NULL;
	size_t name_length = 0;
	int nested;

	if (end - mangled < 3 || memcmp(mangled, "_Z", 2) != 0)
		return NULL;
	nested = *p == 'N';
	if (nested)
		p++;
	while (p < end && strchr("rVKL", *p) != NULL) /* cv-qualifiers, internal linkage */
		p++;
	while (p < end && isdigit((unsigned char)*p)) {
		size_t length = 0;

		while (p < end && isdigit((unsigned char)*p) && length <= KAGENT_DEMANGLE_MAX_INPUT)
			length = length * 10 + (size_t)(*p++ - '0');
		if (length == 0 || length > (size_t)(end - p))
			break;
		name = p;
		name_length = length;
		p += length;
		if (!nested)
			break;
		while (p < end && *p == 'L')
			p++;
	}
	return name != NULL ? kagent_strndup(name, name_length) : NULL;
}

char *
kagent_demangle_display(const char *mangled, int *exact_out)
{
	char *shown = NULL;

	*exact_out = kagent_demangle_itanium(mangled, &shown) == 0;
	if (shown == NULL)
		shown = demangle__function_name(mangled);
	return shown != NULL ? shown : kagent_strdup(mangled);
}
