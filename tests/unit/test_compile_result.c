/* Unit tests for the compile result's JSON form (tools/cuda/compile_result.c). */
#include "kagent/cuda/compile_result.h"

#include "kagent/base/alloc.h"

#include "test.h"

#include <errno.h>

static struct kagent_compile_result *
sample(void)
{
	struct kagent_compile_result *result = kagent_calloc(1, sizeof *result);

	result->success = true;
	result->file_name = kagent_strdup("k.cu");
	result->arch = kagent_strdup("sm_90a");
	result->nvrtc_version = kagent_strdup("13.0");
	result->key = kagent_strdup("ab");
	result->options = kagent_calloc(1, sizeof *result->options);
	result->options[result->option_count++] = kagent_strdup("-arch=sm_90a");
	result->log = kagent_strdup("log \xff\xfe bytes");
	result->diagnostics = kagent_calloc(1, sizeof *result->diagnostics);
	result->diagnostics[0].file = kagent_strdup("k.cu");
	result->diagnostics[0].line = 3;
	result->diagnostics[0].severity = KAGENT_NVRTC_WARNING;
	result->diagnostics[0].code = kagent_strdup("177-D");
	result->diagnostics[0].message = kagent_strdup("unused");
	result->diagnostic_count = 1;
	result->kernels = kagent_calloc(1, sizeof *result->kernels);
	result->kernels[0].mangled_name = kagent_strdup("_Z1kv");
	result->kernels[0].demangled_name = kagent_strdup("k()");
	result->kernels[0].demangle = KAGENT_COMPILE_DEMANGLE_DEMANGLER;
	result->kernels[0].registers = 12;
	result->kernels[0].barriers = -1;
	result->kernels[0].stack_frame_bytes = 0;
	result->kernels[0].spill_store_bytes = 4;
	result->kernels[0].spill_load_bytes = 8;
	result->kernels[0].shared_bytes = 1024;
	result->kernels[0].constant_bytes = -1;
	result->kernels[0].local_bytes = -1;
	result->kernel_count = 1;
	result->cubin_size = 5;
	result->compile_seconds = 0.25;
	return result;
}

static void
test_round_trip(void)
{
	struct kagent_compile_result *result = sample(), *back = NULL;
	json_t *object = kagent_compile_result_to_json(result), *kernel;
	char *cause = NULL;

	CHECK(json_is_true(json_object_get(object, "success")));
	CHECK_CONTAINS(json_string_value(json_object_get(object, "log")), "log ?? bytes");
	kernel = json_array_get(json_object_get(object, "kernels"), 0);
	CHECK_INT(json_integer_value(json_object_get(kernel, "registers")), 12);
	CHECK(json_is_null(json_object_get(kernel, "barriers")));
	CHECK_STRING(json_string_value(json_object_get(kernel, "demangle")), "demangler");
	CHECK_INT(kagent_compile_result_from_json(object, &back, &cause), 0);
	CHECK_STRING(back->arch, "sm_90a");
	CHECK_INT(back->cubin_size, 5);
	CHECK_INT(back->kernel_count, 1);
	CHECK_INT(back->kernels[0].registers, 12);
	CHECK_INT(back->kernels[0].barriers, -1);
	CHECK_INT(back->kernels[0].shared_bytes, 1024);
	CHECK_INT(back->diagnostic_count, 1);
	CHECK_INT(back->diagnostics[0].severity, KAGENT_NVRTC_WARNING);
	CHECK_STRING(back->diagnostics[0].code, "177-D");
	CHECK_STRING(back->options[0], "-arch=sm_90a");
	kagent_compile_result_free(back);
	kagent_compile_result_free(result);
	json_decref(object);
}

static void
test_malformed(void)
{
	struct kagent_compile_result *result = sample(), *back = NULL;
	json_t *object = kagent_compile_result_to_json(result), *kernel;
	char *cause = NULL;

	kernel = json_array_get(json_object_get(object, "kernels"), 0);
	json_object_set_new(kernel, "registers", json_string("many"));
	CHECK_INT(kagent_compile_result_from_json(object, &back, &cause), -EBADMSG);
	CHECK(back == NULL);
	CHECK_CONTAINS(cause, "malformed");
	free(cause);
	cause = NULL;
	json_object_set_new(kernel, "registers", json_integer(3));
	json_object_set_new(kernel, "demangle", json_string("magic"));
	CHECK_INT(kagent_compile_result_from_json(object, &back, &cause), -EBADMSG);
	free(cause);
	cause = NULL;
	json_object_del(object, "kernels");
	CHECK_INT(kagent_compile_result_from_json(object, &back, &cause), -EBADMSG);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_compile_result_from_json(json_object_get(object, "arch"), &back, &cause),
		  -EBADMSG);
	free(cause);
	kagent_compile_result_free(result);
	json_decref(object);
}

static const struct kagent_test tests[] = {
    {"round_trip", test_round_trip},
    {"malformed", test_malformed},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
