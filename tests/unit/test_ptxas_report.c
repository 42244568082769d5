/* Unit tests for the ptxas -v report parser (tools/cuda/ptxas_report.c), on literal text. */
#include "kagent/cuda/ptxas_report.h"

#include "test.h"

#include <errno.h>

static struct kagent_ptxas_report *
parse(const char *text)
{
	struct kagent_ptxas_report *report = NULL;
	char *cause = NULL;

	CHECK_INT(kagent_ptxas_report_parse(text, strlen(text), &report, &cause), 0);
	CHECK(cause == NULL);
	CHECK(report != NULL);
	return report;
}

/* Real NVRTC 13.0 output for three kernels, one spilling, one a template. */
static const char *const three_kernels =
    "ptxas info    : Overriding maximum register limit 256 for 'plain' with  32 of maxrregcount "
    "option\n"
    "ptxas warning : Registers are spilled to local memory in function '_Z6kernelPfi', 356 bytes "
    "spill stores, 356 bytes spill loads\n"
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'plain' for 'sm_90a'\n"
    "ptxas info    : Function properties for plain\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 8 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 5.187 ms\n"
    "ptxas info    : Compiling entry function '_Z6kernelPfi' for 'sm_90a'\n"
    "ptxas info    : Function properties for _Z6kernelPfi\n"
    "ptxas         .     296 bytes stack frame, 356 bytes spill stores, 356 bytes spill loads\n"
    "ptxas info    : Used 32 registers, used 1 barriers, 296 bytes cumulative stack size, 1024 "
    "bytes smem\n"
    "ptxas info    : Compile time = 17.775 ms\n"
    "ptxas info    : Compiling entry function '_Z5scaleIfEvPT_i' for 'sm_90a'\n"
    "ptxas info    : Function properties for _Z5scaleIfEvPT_i\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 8 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 1.597 ms\n";

static void
test_three_kernels(void)
{
	struct kagent_ptxas_report *report = parse(three_kernels);

	CHECK_INT(report->kernel_count, 3);
	CHECK_INT(report->global_bytes, 0);
	CHECK_STRING(report->kernels[0].mangled_name, "plain");
	CHECK_STRING(report->kernels[0].arch, "sm_90a");
	CHECK_INT(report->kernels[0].registers, 8);
	CHECK_INT(report->kernels[0].barriers, 0);
	CHECK_INT(report->kernels[0].shared_bytes, 0);
	CHECK_INT(report->kernels[0].constant_bytes, 0);
	CHECK_STRING(report->kernels[1].mangled_name, "_Z6kernelPfi");
	CHECK_INT(report->kernels[1].registers, 32);
	CHECK_INT(report->kernels[1].barriers, 1);
	CHECK_INT(report->kernels[1].stack_frame_bytes, 296);
	CHECK_INT(report->kernels[1].spill_store_bytes, 356);
	CHECK_INT(report->kernels[1].spill_load_bytes, 356);
	CHECK_INT(report->kernels[1].cumulative_stack_bytes, 296);
	CHECK_INT(report->kernels[1].shared_bytes, 1024);
	CHECK(report->kernels[1].compile_ms > 17.7 && report->kernels[1].compile_ms < 17.8);
	CHECK_STRING(report->kernels[2].mangled_name, "_Z5scaleIfEvPT_i");
	CHECK_INT(report->kernels[2].spill_store_bytes, 0);
	kagent_ptxas_report_free(report);
}

/* Older ptxas formats: cmem banks, lmem, CRLF line ends, odd spacing. */
static void
test_older_format_and_spacing(void)
{
	struct kagent_ptxas_report *report = parse(
	    "ptxas info    : Compiling entry function '_Z3addPfS_S_' for 'sm_80'\r\n"
	    "ptxas info    : Function properties for _Z3addPfS_S_\r\n"
	    "    ptxas .  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\r\n"
	    "ptxas         .  16 bytes stack frame ,  4 bytes spill stores,8 bytes spill loads\r\n"
	    "ptxas info:Used   10 registers,  380 bytes cmem[0], 8 bytes cmem[2], 12 bytes "
	    "lmem\r\n");

	CHECK_INT(report->kernel_count, 1);
	CHECK_STRING(report->kernels[0].arch, "sm_80");
	CHECK_INT(report->kernels[0].registers, 10);
	CHECK_INT(report->kernels[0].constant_bytes, 388);
	CHECK_INT(report->kernels[0].local_bytes, 12);
	/* The indented line is not a ptxas line; the second one is. */
	CHECK_INT(report->kernels[0].stack_frame_bytes, 16);
	CHECK_INT(report->kernels[0].spill_store_bytes, 4);
	CHECK_INT(report->kernels[0].spill_load_bytes, 8);
	CHECK_INT(report->kernels[0].barriers, 0);
	CHECK_INT(report->kernels[0].shared_bytes, 0);
	CHECK(report->kernels[0].compile_ms < 0);
	kagent_ptxas_report_free(report);
}

/* Properties of a non-inlined device function must not land on the kernel. */
static void
test_device_function_properties(void)
{
	struct kagent_ptxas_report *report = parse(
	    "ptxas info    : Function properties for _Z6helperi\n"
	    "ptxas         .     48 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
	    "ptxas info    : Compiling entry function '_ZN2ns6kernelIiLi4EEEvPT_' for 'sm_90a'\n"
	    "ptxas info    : Function properties for _ZN2ns6kernelIiLi4EEEvPT_\n"
	    "ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
	    "ptxas info    : Function properties for _Z6helperi\n"
	    "ptxas         .     48 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
	    "ptxas info    : Used 20 registers, used 0 barriers, 8 bytes cumulative stack size\n");

	CHECK_INT(report->kernel_count, 1);
	CHECK_STRING(report->kernels[0].mangled_name, "_ZN2ns6kernelIiLi4EEEvPT_");
	CHECK_INT(report->kernels[0].stack_frame_bytes, 8);
	CHECK_INT(report->kernels[0].registers, 20);
	kagent_ptxas_report_free(report);
}

static void
test_no_report(void)
{
	struct kagent_ptxas_report *report = parse("kernel.cu(2): error: oops\n\n");

	CHECK_INT(report->kernel_count, 0);
	CHECK_INT(report->global_bytes, -1);
	kagent_ptxas_report_free(report);
	report = parse("");
	CHECK_INT(report->kernel_count, 0);
	kagent_ptxas_report_free(report);
}

static void
test_kernel_cap(void)
{
	const char *line = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n";
	size_t length = strlen(line), count = KAGENT_PTXAS_REPORT_MAX_KERNELS + 1, index;
	char *text = malloc(length * count + 1);
	struct kagent_ptxas_report *report = NULL;
	char *cause = NULL;

	CHECK(text != NULL);
	for (index = 0; index < count; index++)
		memcpy(text + index * length, line, length);
	text[length * count] = '\0';
	CHECK_INT(kagent_ptxas_report_parse(text, length * count, &report, &cause), -E2BIG);
	CHECK(report == NULL);
	CHECK_CONTAINS(cause, "more than");
	free(cause);
	free(text);
}

/* Every prefix of a real report, and byte-level garbage: never crash, never leak. */
static void
test_truncated_and_garbage(void)
{
	size_t length = strlen(three_kernels), cut;
	unsigned seed = 12345;
	int round;

	for (cut = 0; cut <= length; cut++) {
		struct kagent_ptxas_report *report = NULL;
		char *copy = malloc(cut + 1), *cause = NULL;

		CHECK(copy != NULL);
		memcpy(copy, three_kernels, cut);
		/* No NUL: the parser must respect the length. */
		CHECK_INT(kagent_ptxas_report_parse(copy, cut, &report, &cause), 0);
		CHECK(report->kernel_count <= 3);
		kagent_ptxas_report_free(report);
		free(copy);
	}
	for (round = 0; round < 2000; round++) {
		struct kagent_ptxas_report *report = NULL;
		char *copy = malloc(length), *cause = NULL;
		int flips;

		CHECK(copy != NULL);
		memcpy(copy, three_kernels, length);
		for (flips = 0; flips < 1 + round % 16; flips++) {
			seed = seed * 1103515245 + 12345;
			copy[(seed >> 8) % length] = (char)(seed >> 20);
		}
		CHECK_INT(kagent_ptxas_report_parse(copy, length, &report, &cause), 0);
		kagent_ptxas_report_free(report);
		free(copy);
	}
}

static void
test_huge_numbers(void)
{
	struct kagent_ptxas_report *report =
	    parse("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
		  "ptxas info    : Used 99999999999999999999999999 registers, 4294967296 barriers, "
		  "9223372036854775807 bytes smem\n"
		  "ptxas info    : Compile time = 1e999 ms\n"
		  "ptxas info    : Compiling entry function '' for 'sm_90a'\n"
		  "ptxas info    : Compiling entry function 'unterminated\n");

	CHECK_INT(report->kernel_count, 1);
	CHECK_INT(report->kernels[0].registers, -1);
	CHECK(report->kernels[0].barriers > 0);
	CHECK(report->kernels[0].shared_bytes <= 0);
	CHECK(report->kernels[0].compile_ms < 0);
	kagent_ptxas_report_free(report);
}

static const struct kagent_test tests[] = {
    {"three_kernels", test_three_kernels},
    {"older_format_and_spacing", test_older_format_and_spacing},
    {"device_function_properties", test_device_function_properties},
    {"no_report", test_no_report},
    {"kernel_cap", test_kernel_cap},
    {"truncated_and_garbage", test_truncated_and_garbage},
    {"huge_numbers", test_huge_numbers},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
