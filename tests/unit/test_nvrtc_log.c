/* Unit tests for the NVRTC log diagnostics parser (tools/cuda/nvrtc_log.c). */
#include "kagent/cuda/nvrtc_log.h"

#include "test.h"

static const char *const error_log =
    "kernel.cu(2): error: identifier \"y\" is undefined\n"
    "    x[0] = y;\n"
    "           ^\n"
    "\n"
    "kernel.cu(3): warning #177-D: variable \"unused\" was declared but never referenced\n"
    "    int unused;\n"
    "        ^\n"
    "\n"
    "Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n"
    "\n"
    "/usr/local/cuda/include/foo(bar).h(120): catastrophic error: cannot open source file "
    "\"nope.h\"\n"
    "1 error detected in the compilation of \"kernel.cu\".\n"
    "nvrtc: error: invalid value for --gpu-architecture (-arch)\n"
    "ptxas fatal   : Unknown option '-bogus'\n"
    "ptxas warning : Registers are spilled to local memory in function 'k', 4 bytes spill "
    "stores, 4 bytes spill loads\n"
    "ptxas info    : Used 8 registers\n";

static void
test_diagnostics(void)
{
	struct kagent_nvrtc_diagnostic *d = NULL;
	size_t count = 0;
	char *cause = NULL;

	CHECK_INT(kagent_nvrtc_log_parse(error_log, strlen(error_log), &d, &count, &cause), 0);
	CHECK_INT(count, 6);
	CHECK_STRING(d[0].file, "kernel.cu");
	CHECK_INT(d[0].line, 2);
	CHECK_INT(d[0].severity, KAGENT_NVRTC_ERROR);
	CHECK(d[0].code == NULL);
	CHECK_STRING(d[0].message, "identifier \"y\" is undefined");
	CHECK_INT(d[1].line, 3);
	CHECK_INT(d[1].severity, KAGENT_NVRTC_WARNING);
	CHECK_STRING(d[1].code, "177-D");
	CHECK_STRING(d[1].message, "variable \"unused\" was declared but never referenced");
	CHECK_STRING(d[2].file, "/usr/local/cuda/include/foo(bar).h");
	CHECK_INT(d[2].line, 120);
	CHECK_INT(d[2].severity, KAGENT_NVRTC_ERROR);
	CHECK_STRING(d[3].file, "nvrtc");
	CHECK_INT(d[3].line, 0);
	CHECK_STRING(d[3].message, "invalid value for --gpu-architecture (-arch)");
	CHECK_STRING(d[4].file, "ptxas");
	CHECK_INT(d[4].severity, KAGENT_NVRTC_ERROR);
	CHECK_STRING(d[4].message, "Unknown option '-bogus'");
	CHECK_INT(d[5].severity, KAGENT_NVRTC_WARNING);
	CHECK_CONTAINS(d[5].message, "Registers are spilled");
	kagent_nvrtc_log_free(d, count);
}

static void
test_severity_names(void)
{
	enum kagent_nvrtc_severity severity;

	CHECK_STRING(kagent_nvrtc_log_severity_name(KAGENT_NVRTC_NOTE), "note");
	CHECK_INT(kagent_nvrtc_log_severity_parse("warning", &severity), 0);
	CHECK_INT(severity, KAGENT_NVRTC_WARNING);
	CHECK(kagent_nvrtc_log_severity_parse("fatal", &severity) < 0);
}

static void
test_garbage(void)
{
	size_t length = strlen(error_log), cut;
	unsigned seed = 7;
	int round;

	for (cut = 0; cut <= length; cut++) {
		struct kagent_nvrtc_diagnostic *d = NULL;
		size_t count = 0;
		char *copy = malloc(cut + 1), *cause = NULL;

		CHECK(copy != NULL);
		memcpy(copy, error_log, cut);
		CHECK_INT(kagent_nvrtc_log_parse(copy, cut, &d, &count, &cause), 0);
		kagent_nvrtc_log_free(d, count);
		free(copy);
	}
	for (round = 0; round < 2000; round++) {
		struct kagent_nvrtc_diagnostic *d = NULL;
		size_t count = 0;
		char *copy = malloc(length), *cause = NULL;
		int flips;

		CHECK(copy != NULL);
		memcpy(copy, error_log, length);
		for (flips = 0; flips < 1 + round % 16; flips++) {
			seed = seed * 1103515245 + 12345;
			copy[(seed >> 8) % length] = (char)(seed >> 20);
		}
		CHECK_INT(kagent_nvrtc_log_parse(copy, length, &d, &count, &cause), 0);
		kagent_nvrtc_log_free(d, count);
		free(copy);
	}
}

static void
test_cap(void)
{
	const char *line = "k.cu(1): error: x\n";
	size_t length = strlen(line), count = KAGENT_NVRTC_LOG_MAX_DIAGNOSTICS + 50, index, found;
	char *text = malloc(length * count), *cause = NULL;
	struct kagent_nvrtc_diagnostic *d = NULL;

	CHECK(text != NULL);
	for (index = 0; index < count; index++)
		memcpy(text + index * length, line, length);
	CHECK_INT(kagent_nvrtc_log_parse(text, length * count, &d, &found, &cause), 0);
	CHECK_INT(found, KAGENT_NVRTC_LOG_MAX_DIAGNOSTICS);
	kagent_nvrtc_log_free(d, found);
	free(text);
}

static const struct kagent_test tests[] = {
    {"diagnostics", test_diagnostics},
    {"severity_names", test_severity_names},
    {"garbage", test_garbage},
    {"cap", test_cap},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
