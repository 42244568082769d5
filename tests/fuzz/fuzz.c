/*
 * The harnesses' shared half (fuzz.h): logging off, a scratch folder, input cut into pieces.
 */
#include "fuzz.h"

#include "kagent/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

/* The names handed out, so the folder can be emptied at exit. */
#define FUZZ_NAME_CAP 4

static char *fuzz__folder;
static char *fuzz__paths[FUZZ_NAME_CAP];
static size_t fuzz__path_count;

static void
fuzz__remove_folder(void)
{
	for (size_t index = 0; index < fuzz__path_count; index++) {
		unlink(fuzz__paths[index]);
		free(fuzz__paths[index]);
	}
	rmdir(fuzz__folder);
	free(fuzz__folder);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* A warning per malformed input would drown libFuzzer's own report. */
	kagent_log_verbosity = -1;
	return 0;
}

const char *
kagent_fuzz_path(const char *name)
{
	const char *parent = getenv("TMPDIR");
	char *path;

	for (size_t index = 0; index < fuzz__path_count; index++) {
		if (strcmp(strrchr(fuzz__paths[index], '/') + 1, name) == 0)
			return fuzz__paths[index];
	}
	if (fuzz__folder == NULL) {
		/* Memory, where there is some: on a disk the trace's syncs cost 10x the executions.
		 */
		if (parent == NULL || parent[0] == '\0')
			parent = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		if (asprintf(&fuzz__folder, "%s/kagent-fuzz-XXXXXX", parent) < 0 ||
		    mkdtemp(fuzz__folder) == NULL) {
			perror("kagent-fuzz: cannot make a scratch folder");
			abort();
		}
		atexit(fuzz__remove_folder);
	}
	if (fuzz__path_count == FUZZ_NAME_CAP || asprintf(&path, "%s/%s", fuzz__folder, name) < 0)
		abort();
	fuzz__paths[fuzz__path_count++] = path;
	return path;
}

const char *
kagent_fuzz_write_input(const uint8_t *data, size_t size)
{
	const char *path = kagent_fuzz_path("input");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		perror("kagent-fuzz: cannot write the input file");
		abort();
	}
	close(fd);
	return path;
}

int
kagent_fuzz_feed(const uint8_t *data, size_t size, uint8_t stride,
		 kagent_fuzz_piece_function function, void *target)
{
	uint32_t state = stride;
	size_t start = 0, length;
	int result;

	while (start < size) {
		/* A linear congruential generator: cheap, and the same cuts for the same input. */
		state = state * 1103515245u + 12345u;
		length = stride == 0 ? size - start : 1 + (state >> 16) % stride;
		if (length > size - start)
			length = size - start;
		if ((result = function(target, data + start, length)) != 0)
			return result;
		start += length;
	}
	return 0;
}
