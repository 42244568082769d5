/* Unit tests for tools/cuda/gpu_node.c: GPUs named by index or UUID, in a stand-in for the
 * driver's /proc/driver/nvidia/gpus. */
#include "kagent/cuda/gpu_node.h"
#include "kagent/base/paths.h"
#include "test.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* One GPU's folder, named by its PCI address, as the driver writes it. */
static void
add_gpu(const char *directory, const char *bus, int minor, const char *uuid)
{
	char folder[512], text[512];

	snprintf(folder, sizeof folder, "%s/%s", directory, bus);
	CHECK(mkdir(folder, 0755) == 0);
	snprintf(text, sizeof text,
		 "Model: \t\t NVIDIA H200\nIRQ:   \t\t 36\nGPU UUID: \t %s\n"
		 "Video BIOS: \t 96.00.af.00.01\nBus Type: \t PCIe\nBus Location: \t %s\n"
		 "Device Minor: \t %d\nGPU Excluded:\t No\n",
		 uuid, bus, minor);
	free(kagent_test_write_file(folder, "information", text));
}

/* Four GPUs whose minor numbers do not follow their PCI order. */
static char *
four_gpus(void)
{
	char *directory = kagent_test_make_directory();

	add_gpu(directory, "0000:00:09.0", 3, "GPU-dddd0000-0000-0000-0000-000000000003");
	add_gpu(directory, "0000:00:06.0", 1, "GPU-aaaa0000-0000-0000-0000-000000000000");
	add_gpu(directory, "0000:00:08.0", 0, "GPU-cccc0000-0000-0000-0000-000000000002");
	add_gpu(directory, "0000:00:07.0", 2, "GPU-bbbb0000-0000-0000-0000-000000000001");
	return directory;
}

static void
test_index_counts_in_pci_order(void)
{
	char *directory = four_gpus(), *cause = NULL;
	struct kagent_gpu_node node;

	CHECK_INT(kagent_gpu_node_find(directory, "0", &node, &cause), 0);
	CHECK_STRING(node.bus, "0000:00:06.0");
	CHECK_INT(node.minor, 1);
	CHECK_STRING(node.name, "nvidia1");
	CHECK_STRING(node.uuid, "GPU-aaaa0000-0000-0000-0000-000000000000");
	CHECK_INT(kagent_gpu_node_find(directory, "2", &node, &cause), 0);
	CHECK_STRING(node.bus, "0000:00:08.0");
	CHECK_STRING(node.name, "nvidia0");
	CHECK_INT(kagent_gpu_node_find(directory, "4", &node, &cause), -ENOENT);
	CHECK_CONTAINS(cause, "there is no GPU 4");
	free(cause);
	kagent_paths_remove_tree(directory, NULL);
	free(directory);
}

static void
test_uuid_and_unique_prefix(void)
{
	char *directory = four_gpus(), *cause = NULL;
	struct kagent_gpu_node node;

	CHECK_INT(kagent_gpu_node_find(directory, "GPU-dddd0000-0000-0000-0000-000000000003", &node,
				       &cause),
		  0);
	CHECK_STRING(node.name, "nvidia3");
	/* CUDA takes a unique prefix, in either case */
	CHECK_INT(kagent_gpu_node_find(directory, "gpu-BBBB", &node, &cause), 0);
	CHECK_STRING(node.bus, "0000:00:07.0");
	CHECK_INT(kagent_gpu_node_find(directory, "GPU-", &node, &cause), -EINVAL);
	CHECK_CONTAINS(cause, "more than one GPU");
	free(cause);
	CHECK_INT(kagent_gpu_node_find(directory, "GPU-eeee", &node, &cause), -ENOENT);
	CHECK_CONTAINS(cause, "no GPU in");
	free(cause);
	kagent_paths_remove_tree(directory, NULL);
	free(directory);
}

static void
test_bad_entries_and_folders(void)
{
	char *directory = four_gpus(), *cause = NULL, folder[512];
	struct kagent_gpu_node node;
	const char *bad[] = {"MIG-5b2e0000-0000-0000-0000-000000000000", "-1", "1x", ""};

	for (size_t index = 0; index < sizeof bad / sizeof *bad; index++) {
		CHECK_INT(kagent_gpu_node_find(directory, bad[index], &node, &cause), -EINVAL);
		CHECK(cause != NULL);
		free(cause);
	}
	CHECK_INT(kagent_gpu_node_find("/nonexistent/gpus", "0", &node, &cause), -ENOENT);
	CHECK_CONTAINS(cause, "cannot list /nonexistent/gpus");
	free(cause);
	/* a GPU whose file names no minor: refused by index, skipped when looking for a UUID */
	snprintf(folder, sizeof folder, "%s/0000:00:05.0", directory);
	CHECK(mkdir(folder, 0755) == 0);
	free(kagent_test_write_file(folder, "information", "Model: \t NVIDIA H200\n"));
	CHECK_INT(kagent_gpu_node_find(directory, "0", &node, &cause), -ENOENT);
	CHECK_CONTAINS(cause, "names no device minor");
	free(cause);
	CHECK_INT(kagent_gpu_node_find(directory, "GPU-cccc", &node, &cause), 0);
	CHECK_STRING(node.name, "nvidia0");
	kagent_paths_remove_tree(directory, NULL);
	free(directory);
}

static void
test_device_node_must_be_the_gpus(void)
{
	char *directory = kagent_test_make_directory(), *cause = NULL, path[512];
	struct kagent_gpu_node node = {.minor = 1};

	snprintf(node.name, sizeof node.name, "nvidia1");
	CHECK_INT(kagent_gpu_node_check(directory, &node, &cause), -ENODEV);
	CHECK_CONTAINS(cause, "No such file");
	free(cause);
	free(kagent_test_write_file(directory, "nvidia1", ""));
	CHECK_INT(kagent_gpu_node_check(directory, &node, &cause), -ENODEV);
	CHECK_CONTAINS(cause, "not a character device");
	free(cause);
	if (geteuid() != 0) {
		kagent_paths_remove_tree(directory, NULL);
		free(directory);
		kagent_test_skip("making a character device needs root");
	}
	snprintf(path, sizeof path, "%s/nvidia1", directory);
	CHECK(unlink(path) == 0);
	/* the NVIDIA driver's major, 195; minor 2 where the GPU's is 1: another GPU's node */
	if (mknod(path, S_IFCHR | 0600, makedev(195, 2)) != 0) {
		CHECK_INT(errno, EPERM); /* a container without CAP_MKNOD */
		kagent_paths_remove_tree(directory, NULL);
		free(directory);
		kagent_test_skip("this root may not make device nodes");
	}
	CHECK_INT(kagent_gpu_node_check(directory, &node, &cause), -ENODEV);
	CHECK_CONTAINS(cause, "device minor 2, not 1");
	free(cause);
	CHECK(unlink(path) == 0);
	CHECK(mknod(path, S_IFCHR | 0600, makedev(195, 1)) == 0);
	CHECK_INT(kagent_gpu_node_check(directory, &node, &cause), 0);
	CHECK(cause == NULL);
	kagent_paths_remove_tree(directory, NULL);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"index_counts_in_pci_order", test_index_counts_in_pci_order},
    {"uuid_and_unique_prefix", test_uuid_and_unique_prefix},
    {"bad_entries_and_folders", test_bad_entries_and_folders},
    {"device_node_must_be_the_gpus", test_device_node_must_be_the_gpus},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
