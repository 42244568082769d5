/*
 * A GPU's device node and UUID from /proc/driver/nvidia/gpus (see
 * include/kagent/cuda/gpu_node.h). The folders are named by PCI address in a fixed-width
 * form ("0000:00:07.0"), so their sorted order is the PCI order CUDA's PCI_BUS_ID uses.
 */
#include "kagent/cuda/gpu_node.h"
#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* An information file is a few hundred bytes. */
#define GPU_NODE_INFORMATION_CAP 65536

/* The value of "key:" in an information file, spaces and tabs trimmed, into value[size]. */
static int
gpu_node__field(const char *text, const char *key, char *value, size_t size)
{
	size_t key_length = strlen(key);
	const char *line = text, *end, *start;

	while (line != NULL && *line != '\0') {
		end = strchr(line, '\n');
		if (strncmp(line, key, key_length) == 0 && line[key_length] == ':') {
			start = line + key_length + 1;
			if (end == NULL)
				end = start + strlen(start);
			while (start < end && (*start == ' ' || *start == '\t'))
				start++;
			while (end > start &&
			       (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
				end--;
			if ((size_t)(end - start) >= size || end == start)
				return -ENOENT;
			memcpy(value, start, (size_t)(end - start));
			value[end - start] = '\0';
			return 0;
		}
		line = end != NULL ? end + 1 : NULL;
	}
	return -ENOENT;
}

/* Fills *out from the information file of the GPU at PCI address bus. */
static int
gpu_node__read(const char *directory, const char *bus, struct kagent_gpu_node *out, char **cause)
{
	char *path = kagent_asprintf("%s/%s/information", directory, bus), *text = NULL, *end;
	char minor[16];
	size_t size;
	long number;
	int error;

	error = kagent_fileio_read(path, GPU_NODE_INFORMATION_CAP, &text, &size, cause);
	if (error < 0)
		goto out;
	if (gpu_node__field(text, "Device Minor", minor, sizeof minor) < 0 ||
	    gpu_node__field(text, "GPU UUID", out->uuid, sizeof out->uuid) < 0) {
		*cause = kagent_asprintf("%s names no device minor or no GPU UUID", path);
		error = -ENOENT;
		goto out;
	}
	errno = 0;
	number = strtol(minor, &end, 10);
	if (errno != 0 || *end != '\0' || number < 0 || number > 255) {
		*cause = kagent_asprintf("%s: device minor \"%s\" is not a number from 0 to 255",
					 path, minor);
		error = -ENOENT;
		goto out;
	}
	if (strlen(bus) >= sizeof out->bus) {
		*cause = kagent_asprintf("%s/%.64s is not named by a PCI address", directory, bus);
		error = -ENOENT;
		goto out;
	}
	out->minor = (int)number;
	snprintf(out->name, sizeof out->name, "nvidia%d", out->minor);
	memcpy(out->bus, bus, strlen(bus) + 1);
out:
	free(text);
	free(path);
	return error;
}

static int
gpu_node__not_hidden(const struct dirent *entry)
{
	return entry->d_name[0] != '.';
}

int
kagent_gpu_node_find(const char *directory, const char *entry, struct kagent_gpu_node *out,
		     char **cause)
{
	struct dirent **buses = NULL;
	struct kagent_gpu_node candidate;
	long index = -1;
	char *end;
	int count, error = -ENOENT, found = 0;

	*cause = NULL;
	memset(out, 0, sizeof *out);
	if (entry == NULL || entry[0] == '\0') {
		*cause = kagent_strdup("no GPU named");
		return -EINVAL;
	}
	if (strncasecmp(entry, "GPU-", 4) != 0) {
		errno = 0;
		index = strtol(entry, &end, 10);
		if (errno != 0 || *end != '\0' || index < 0) {
			*cause = kagent_asprintf("\"%.64s\" is neither a GPU index nor a GPU UUID",
						 entry);
			return -EINVAL;
		}
	}
	count = scandir(directory, &buses, gpu_node__not_hidden, alphasort);
	if (count < 0) {
		*cause = kagent_asprintf("cannot list %s: %s", directory, strerror(errno));
		return -ENOENT;
	}
	if (index >= count) {
		*cause =
		    kagent_asprintf("there is no GPU %ld: %s lists %d", index, directory, count);
		goto out;
	}
	for (int position = 0; position < count; position++) {
		char *why = NULL;

		if (index >= 0 && position != index)
			continue;
		error = gpu_node__read(directory, buses[position]->d_name, &candidate, &why);
		if (error < 0) {
			free(*cause);
			*cause = why;
			if (index >= 0)
				goto out;
			continue;
		}
		if (index < 0 && strncasecmp(candidate.uuid, entry, strlen(entry)) != 0)
			continue;
		if (found++ > 0) {
			free(*cause);
			*cause = kagent_asprintf(
			    "\"%.64s\" is the start of more than one GPU's UUID", entry);
			error = -EINVAL;
			goto out;
		}
		*out = candidate;
	}
	if (found == 0 && index < 0) {
		free(*cause);
		*cause = kagent_asprintf("no GPU in %s has the UUID \"%.64s\"", directory, entry);
		error = -ENOENT;
		goto out;
	}
	free(*cause);
	*cause = NULL;
	error = 0;
out:
	for (int position = 0; position < count; position++)
		free(buses[position]);
	free(buses);
	return error;
}

int
kagent_gpu_node_check(const char *directory, const struct kagent_gpu_node *node, char **cause)
{
	char *path = kagent_asprintf("%s/%s", directory, node->name);
	struct stat status;
	int error = 0;

	*cause = NULL;
	if (stat(path, &status) != 0) {
		*cause = kagent_asprintf("%s: %s", path, strerror(errno));
		error = -ENODEV;
	} else if (!S_ISCHR(status.st_mode)) {
		*cause = kagent_asprintf("%s is not a character device", path);
		error = -ENODEV;
	} else if ((int)minor(status.st_rdev) != node->minor) {
		*cause = kagent_asprintf("%s is device minor %u, not %d", path,
					 minor(status.st_rdev), node->minor);
		error = -ENODEV;
	}
	free(path);
	return error;
}
