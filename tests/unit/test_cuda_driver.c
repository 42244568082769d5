/* Unit tests for tools/cuda/cuda_driver.c: the probe fails cleanly without a driver. */
#include "kagent/cuda/cuda_driver.h"
#include "test.h"

#include <errno.h>

static void
test_missing_override(void)
{
	struct kagent_gpu_info info;
	char *cause = NULL;

	setenv("KAGENT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	CHECK_INT(kagent_cuda_driver_probe(&info, 0, &cause), -ENODEV);
	CHECK_CONTAINS(cause, "no NVIDIA driver found");
	CHECK_CONTAINS(cause, "/nonexistent/libcuda.so.1 could not be loaded");
	CHECK_CONTAINS(cause, "no usable GPU");
	free(cause);
}

static void
test_not_a_driver(void)
{
	struct kagent_gpu_info info;
	char *cause = NULL;

	/* A real library without the driver API: libjansson is loaded already. */
	setenv("KAGENT_LIBCUDA", "libjansson.so.4", 1);
	CHECK_INT(kagent_cuda_driver_probe(&info, 0, &cause), -ENOSYS);
	CHECK_CONTAINS(cause, "lacks the CUDA driver API");
	free(cause);
}

static void
test_no_driver_here(void)
{
	struct kagent_gpu_info info;
	char *cause = NULL;
	int error;

	unsetenv("KAGENT_LIBCUDA");
	error = kagent_cuda_driver_probe(&info, 0, &cause);
	if (error == 0)
		kagent_test_skip("this machine has a GPU");
	CHECK_INT(error, -ENODEV);
	CHECK_STRING(cause, "no NVIDIA driver found (libcuda.so.1 could not be loaded): this "
			    "machine has no usable GPU");
	free(cause);
}

static void
test_to_json(void)
{
	struct kagent_gpu_info info = {.index = 1, .device_count = 2, .driver_version = 13000};
	json_t *object;

	snprintf(info.name, sizeof info.name, "NVIDIA H200");
	snprintf(info.driver, sizeof info.driver, "13.0");
	snprintf(info.compute_capability, sizeof info.compute_capability, "9.0");
	object = kagent_cuda_driver_info_to_json(&info);
	CHECK_STRING(json_string_value(json_object_get(object, "name")), "NVIDIA H200");
	CHECK_STRING(json_string_value(json_object_get(object, "driver")), "13.0");
	CHECK_INT(json_integer_value(json_object_get(object, "index")), 1);
	json_decref(object);
}

static const struct kagent_test tests[] = {
    {"missing_override", test_missing_override},
    {"not_a_driver", test_not_a_driver},
    {"no_driver_here", test_no_driver_here},
    {"to_json", test_to_json},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
