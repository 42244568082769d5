/*
 * Fuzzes the demangler through its public header (include/kagent/cuda/demangle.h), whatever
 * implements it: the input, NUL-terminated, is the mangled name.
 */
#include "fuzz.h"

#include "kagent/cuda/demangle.h"

#include <stdlib.h>
#include <string.h>

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *mangled = malloc(size + 1), *demangled = NULL, *display;
	int exact;

	memcpy(mangled, data, size);
	mangled[size] = '\0';
	if (kagent_demangle_itanium(mangled, &demangled) == 0 && demangled == NULL)
		abort();
	free(demangled);
	display = kagent_demangle_display(mangled, &exact);
	if (display == NULL)
		abort();
	free(display);
	free(mangled);
	return 0;
}
