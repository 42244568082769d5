/*
 * A probe of the NVIDIA driver through libcuda.so.1, loaded with dlopen at run
 * time (kagent never links libcuda: a machine without a GPU must still run every
 * command that does not need one, and a build machine has only a stub).
 * KAGENT_LIBCUDA names another library to load (tests use it to avoid a real driver).
 */
#ifndef KAGENT_CUDA_DRIVER_H
#define KAGENT_CUDA_DRIVER_H

#include <jansson.h>

struct kagent_gpu_info {
	int index;	    /* the device ordinal probed */
	int device_count;   /* devices the driver sees */
	char name[256];	    /* "NVIDIA H100 80GB HBM3" */
	int driver_version; /* cuDriverGetVersion: 13000 */
	char driver[32];    /* "13.0" */
	int compute_major, compute_minor;
	char compute_capability[16]; /* "9.0" */
	char uuid[48];		     /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
};

/*
 * Loads the driver, initialises it and fills *out for device gpu_index. Returns 0, or
 * -ENODEV with *cause when there is no driver library, cuInit fails, or there is no such
 * device; -ENOSYS when the library lacks a needed entry point.
 */
int kagent_cuda_driver_probe(struct kagent_gpu_info *out, int gpu_index, char **cause);
/* {"index", "name", "driver", "driver_version", "compute_capability", "uuid", "device_count"}. */
json_t *kagent_cuda_driver_info_to_json(const struct kagent_gpu_info *info);

#endif
