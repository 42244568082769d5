/*
 * The NVIDIA driver probe (see include/kagent/cuda/cuda_driver.h). The CUDA types are
 * declared here by their ABI (CUresult and CUdevice are ints, CUuuid is 16
 * bytes) so that building kagent needs no CUDA headers either.
 */
#include "kagent/cuda/cuda_driver.h"
#include "kagent/base/alloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_DRIVER_SUCCESS 0
#define CUDA_DRIVER_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CUDA_DRIVER_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

typedef int cuda_driver__result_t;
typedef struct {
	unsigned char bytes[16];
} cuda_driver__uuid_t;

struct cuda_driver__api {
	void *library;
	cuda_driver__result_t (*init)(unsigned int flags);
	cuda_driver__result_t (*driver_get_version)(int *version);
	cuda_driver__result_t (*device_get_count)(int *count);
	cuda_driver__result_t (*device_get)(int *device, int ordinal);
	cuda_driver__result_t (*device_get_name)(char *name, int length, int device);
	cuda_driver__result_t (*device_get_attribute)(int *value, int attribute, int device);
	cuda_driver__result_t (*device_get_uuid)(cuda_driver__uuid_t *uuid, int device);
	cuda_driver__result_t (*get_error_string)(cuda_driver__result_t result,
						  const char **string);
};

/* The driver's own words for an error code, when it can give them. */
static char *
cuda_driver__describe(const struct cuda_driver__api *api, const char *call,
		      cuda_driver__result_t result)
{
	const char *text = NULL;

	if (api->get_error_string == NULL || api->get_error_string(result, &text) != 0 ||
	    text == NULL)
		text = "unknown error";
	return kagent_asprintf("%s failed with CUDA error %d (%s)", call, result, text);
}

static int
cuda_driver__load(struct cuda_driver__api *api, char **cause)
{
	const char *name = getenv("KAGENT_LIBCUDA");
	int error = 0;

	memset(api, 0, sizeof *api);
	if (name == NULL || name[0] == '\0')
		name = "libcuda.so.1";
	api->library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (api->library == NULL) {
		error = -ENODEV;
		*cause = kagent_asprintf("no NVIDIA driver found (%s could not be loaded): this "
					 "machine has no usable GPU",
					 name);
		goto out;
	}
	/* dlsym returns void *; POSIX guarantees the conversion to a function pointer works. */
#define CUDA_DRIVER_RESOLVE(field, symbol) *(void **)(&api->field) = dlsym(api->library, symbol)
	CUDA_DRIVER_RESOLVE(init, "cuInit");
	CUDA_DRIVER_RESOLVE(driver_get_version, "cuDriverGetVersion");
	CUDA_DRIVER_RESOLVE(device_get_count, "cuDeviceGetCount");
	CUDA_DRIVER_RESOLVE(device_get, "cuDeviceGet");
	CUDA_DRIVER_RESOLVE(device_get_name, "cuDeviceGetName");
	CUDA_DRIVER_RESOLVE(device_get_attribute, "cuDeviceGetAttribute");
	CUDA_DRIVER_RESOLVE(device_get_uuid, "cuDeviceGetUuid_v2");
	if (api->device_get_uuid == NULL)
		CUDA_DRIVER_RESOLVE(device_get_uuid, "cuDeviceGetUuid");
	CUDA_DRIVER_RESOLVE(get_error_string, "cuGetErrorString");
#undef CUDA_DRIVER_RESOLVE
	if (api->init == NULL || api->driver_get_version == NULL || api->device_get_count == NULL ||
	    api->device_get == NULL || api->device_get_name == NULL ||
	    api->device_get_attribute == NULL) {
		error = -ENOSYS;
		*cause = kagent_asprintf("%s is not a usable NVIDIA driver: it lacks the CUDA "
					 "driver API entry points",
					 name);
		goto out;
	}
out:
	return error;
}

int
kagent_cuda_driver_probe(struct kagent_gpu_info *out, int gpu_index, char **cause)
{
	struct cuda_driver__api api;
	cuda_driver__result_t result;
	cuda_driver__uuid_t uuid;
	char *detail = NULL;
	int device = 0, error = 0;

	memset(out, 0, sizeof *out);
	out->index = gpu_index;
	error = cuda_driver__load(&api, cause);
	if (error != 0)
		goto out;
	if ((result = api.init(0)) != CUDA_DRIVER_SUCCESS) {
		detail = cuda_driver__describe(&api, "cuInit", result);
		*cause = kagent_asprintf("the NVIDIA driver could not be initialised: %s: this "
					 "machine has no usable GPU",
					 detail);
		error = -ENODEV;
		goto out;
	}
	if (api.driver_get_version(&out->driver_version) == CUDA_DRIVER_SUCCESS)
		snprintf(out->driver, sizeof out->driver, "%d.%d", out->driver_version / 1000,
			 (out->driver_version % 1000) / 10);
	if ((result = api.device_get_count(&out->device_count)) != CUDA_DRIVER_SUCCESS) {
		detail = cuda_driver__describe(&api, "cuDeviceGetCount", result);
		*cause = kagent_asprintf("cannot count GPUs: %s", detail);
		error = -ENODEV;
		goto out;
	}
	if (out->device_count == 0) {
		*cause =
		    kagent_strdup("the NVIDIA driver sees no GPU: this machine has no usable GPU");
		error = -ENODEV;
		goto out;
	}
	if (gpu_index < 0 || gpu_index >= out->device_count) {
		*cause = kagent_asprintf("there is no GPU %d: the driver sees %d (0 to %d)",
					 gpu_index, out->device_count, out->device_count - 1);
		error = -ENODEV;
		goto out;
	}
	if ((result = api.device_get(&device, gpu_index)) != CUDA_DRIVER_SUCCESS) {
		detail = cuda_driver__describe(&api, "cuDeviceGet", result);
		*cause = kagent_asprintf("cannot open GPU %d: %s", gpu_index, detail);
		error = -ENODEV;
		goto out;
	}
	if (api.device_get_name(out->name, (int)sizeof out->name - 1, device) !=
	    CUDA_DRIVER_SUCCESS)
		snprintf(out->name, sizeof out->name, "unknown GPU");
	api.device_get_attribute(&out->compute_major,
				 CUDA_DRIVER_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
	api.device_get_attribute(&out->compute_minor,
				 CUDA_DRIVER_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
	snprintf(out->compute_capability, sizeof out->compute_capability, "%d.%d",
		 out->compute_major, out->compute_minor);
	if (api.device_get_uuid != NULL &&
	    api.device_get_uuid(&uuid, device) == CUDA_DRIVER_SUCCESS) {
		const unsigned char *b = uuid.bytes;

		/* The spelling nvidia-smi and CUDA_VISIBLE_DEVICES use. */
		snprintf(out->uuid, sizeof out->uuid,
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
			 b[12], b[13], b[14], b[15]);
	}
out:
	free(detail);
	if (api.library != NULL)
		dlclose(api.library);
	return error;
}

json_t *
kagent_cuda_driver_info_to_json(const struct kagent_gpu_info *info)
{
	return json_pack("{s:i, s:s, s:s, s:i, s:s, s:s, s:i}", "index", info->index, "name",
			 info->name, "driver", info->driver, "driver_version", info->driver_version,
			 "compute_capability", info->compute_capability, "uuid", info->uuid,
			 "device_count", info->device_count);
}
