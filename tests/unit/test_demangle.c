/* Unit tests for the kernel-name demangler (tools/cuda/demangle.c); expected strings from c++filt.
 */
#include "kagent/cuda/demangle.h"

#include "test.h"

#include <errno.h>

static void
check(const char *mangled, const char *expected)
{
	char *demangled = NULL;
	int status = kagent_demangle_itanium(mangled, &demangled);

	if (status != 0)
		fprintf(stderr, "%s: status %d\n", mangled, status);
	CHECK_INT(status, 0);
	CHECK_STRING(demangled, expected);
	free(demangled);
}

static void
test_plain_functions(void)
{
	check("_Z6kernelPfi", "kernel(float*, int)");
	check("_Z3addPfS_S_", "add(float*, float*, float*)");
	check("_Z4noopv", "noop()");
	check("_Z1fPKfPjyRd", "f(float const*, unsigned int*, unsigned long long, double&)");
	check("_Z5sgemmiiifPKfS0_fPf",
	      "sgemm(int, int, int, float, float const*, float const*, float, float*)");
	check("_Z1gPK6__halfPS_", "g(__half const*, __half*)");
}

static void
test_namespaces_and_templates(void)
{
	check("_ZN2ns3fooEPKfS1_", "ns::foo(float const*, float const*)");
	check("_Z5scaleIfEvPT_i", "void scale<float>(float*, int)");
	check("_Z1fILi32ELj4EEvPN4cute5TupleIiiEE", "void f<32, 4u>(cute::Tuple<int, int>*)");
	check("_ZN2ns6kernelIiLi4EEEvPT_", "void ns::kernel<int, 4>(int*)");
	check("_Z7softmaxILi256ELb1EEvPKfPfi",
	      "void softmax<256, true>(float const*, float*, int)");
	check("_Z1hIN2ns3VecIfEEEvPT_S3_",
	      "void h<ns::Vec<float> >(ns::Vec<float>*, ns::Vec<float>)");
}

static void
test_refused(void)
{
	char *demangled = NULL;

	CHECK_INT(kagent_demangle_itanium("plain", &demangled), -EINVAL);
	CHECK_INT(kagent_demangle_itanium("_Z", &demangled), -EINVAL);
	CHECK_INT(kagent_demangle_itanium("_Z3foo", &demangled), -EINVAL);
	CHECK_INT(kagent_demangle_itanium("_Z99foo", &demangled), -EINVAL);
	/* A function pointer parameter: unsupported, so refused rather than guessed. */
	CHECK_INT(kagent_demangle_itanium("_Z1fPFviE", &demangled), -EINVAL);
	CHECK_INT(kagent_demangle_itanium("_Z1fS_", &demangled), -EINVAL);
	CHECK(demangled == NULL);
}

static void
test_display(void)
{
	int exact = -1;
	char *name;

	name = kagent_demangle_display("_Z6kernelPfi", &exact);
	CHECK_STRING(name, "kernel(float*, int)");
	CHECK_INT(exact, 1);
	free(name);
	name = kagent_demangle_display("_Z6kernelPFviE", &exact);
	CHECK_STRING(name, "kernel");
	CHECK_INT(exact, 0);
	free(name);
	name = kagent_demangle_display("plain", &exact);
	CHECK_STRING(name, "plain");
	CHECK_INT(exact, 0);
	free(name);
}

static void
test_hostile(void)
{
	char buffer[KAGENT_DEMANGLE_MAX_INPUT + 64], *demangled = NULL;
	unsigned seed = 99;
	int round, index;

	/* Deep nesting must hit the depth cap, not the stack. */
	strcpy(buffer, "_Z1f");
	for (index = 0; index < 2000; index++)
		strcat(buffer, "P");
	strcat(buffer, "i");
	CHECK(kagent_demangle_itanium(buffer, &demangled) < 0);
	memset(buffer, 'P', sizeof buffer - 1);
	buffer[sizeof buffer - 1] = '\0';
	CHECK_INT(kagent_demangle_itanium(buffer, &demangled), -E2BIG);
	for (round = 0; round < 20000; round++) {
		const char *base = "_Z1hIN2ns3VecIfEEEvPT_S3_Li4ELj7EEvPKfS0_";
		size_t length = strlen(base);
		int flips;

		memcpy(buffer, base, length + 1);
		for (flips = 0; flips < 1 + round % 6; flips++) {
			seed = seed * 1103515245 + 12345;
			buffer[2 + (seed >> 8) % (length - 2)] =
			    "_0123456789IELNSPKTRfijvn"[(seed >> 16) % 25];
		}
		if (kagent_demangle_itanium(buffer, &demangled) == 0)
			free(demangled);
		demangled = NULL;
	}
}

static const struct kagent_test tests[] = {
    {"plain_functions", test_plain_functions},
    {"namespaces_and_templates", test_namespaces_and_templates},
    {"refused", test_refused},
    {"display", test_display},
    {"hostile", test_hostile},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
