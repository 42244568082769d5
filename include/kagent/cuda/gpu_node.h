/*
 * Which device node and UUID belong to one GPU, read from the NVIDIA driver's
 * /proc/driver/nvidia/gpus (one folder per GPU, named by its PCI address, each with an
 * "information" file) without loading CUDA, so a worker learns them before any context
 * exists. The worker names its GPU to CUDA by UUID and the sandbox lets the candidate open
 * that GPU's /dev/nvidia<minor> only (docs/sandbox.md, "Other GPUs of the host").
 */
#ifndef KAGENT_CUDA_GPU_NODE_H
#define KAGENT_CUDA_GPU_NODE_H

/* Where the driver lists its GPUs. */
#define KAGENT_GPU_NODE_PROC_DIRECTORY "/proc/driver/nvidia/gpus"

struct kagent_gpu_node {
	int minor;     /* /dev/nvidia<minor> */
	char name[32]; /* "nvidia<minor>" */
	char uuid[48]; /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
	char bus[32];  /* "0000:00:07.0" */
};

/*
 * Fills *out for the GPU `entry` names, as a CUDA_VISIBLE_DEVICES entry does with
 * CUDA_DEVICE_ORDER=PCI_BUS_ID: an index in PCI address order, or a GPU UUID (or a unique
 * prefix of one). directory is KAGENT_GPU_NODE_PROC_DIRECTORY (tests pass another). Returns
 * 0; -ENOENT with *cause when the directory, the GPU or its facts are missing; -EINVAL for
 * an entry that names no whole GPU this way (a MIG instance, a negative index).
 */
int kagent_gpu_node_find(const char *directory, const char *entry, struct kagent_gpu_node *out,
			 char **cause);

/*
 * Whether directory (/dev; tests pass another) holds node->name as the character device of
 * node->minor: a container may list the host's GPUs in /proc but give itself other nodes.
 * Returns 0, or -ENODEV with *cause.
 */
int kagent_gpu_node_check(const char *directory, const struct kagent_gpu_node *node, char **cause);

#endif
