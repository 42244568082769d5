/*
 * CUPTI kernel tracing for the candidate child (see include/kagent/kernel_trace.h).
 * Records arrive in buffers that CUPTI fills and hands back, possibly on its own thread,
 * so the per-name totals are guarded by a mutex.
 */
#include "kagent/ctypes_buffer.h"
#include "kagent/kernel_trace.h"

#include "kagent/demangle.h"

#include <cupti.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_BUFFER_BYTES (4u << 20)
#define TRACE_MAX_KERNELS 512
#define TRACE_MAX_STREAMS 4

struct trace_kernel {
	char *name;
	unsigned long long count;
	unsigned long long nanoseconds;
	unsigned grid[3], block[3];
	unsigned registers, shared_bytes;
	/* the streams it ran on (a few; kernels on several streams overlap) */
	uint32_t streams[TRACE_MAX_STREAMS];
	unsigned stream_count;
};

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static struct trace_kernel trace_kernels[TRACE_MAX_KERNELS];
static size_t trace_kernel_count;
static unsigned long long trace_dropped;
static int trace_running;

static int
trace_cupti_fail(char *error, size_t error_size, const char *call, CUptiResult result)
{
	const char *text = NULL;

	cuptiGetResultString(result, &text);
	return kagent_ctypes_buffer_error(error, error_size, -EIO, "%s failed: %s", call,
					  text ? text : "?");
}

static void
trace_note_stream(struct trace_kernel *kernel, uint32_t stream)
{
	unsigned index;

	for (index = 0; index < kernel->stream_count; index++) {
		if (kernel->streams[index] == stream)
			return;
	}
	if (kernel->stream_count < TRACE_MAX_STREAMS)
		kernel->streams[kernel->stream_count++] = stream;
}

static void
trace_add(const CUpti_ActivityKernel10 *record)
{
	struct trace_kernel *kernel = NULL;
	size_t index;

	if (record->name == NULL)
		return;
	pthread_mutex_lock(&trace_lock);
	for (index = 0; index < trace_kernel_count; index++) {
		if (strcmp(trace_kernels[index].name, record->name) == 0) {
			kernel = &trace_kernels[index];
			break;
		}
	}
	if (kernel == NULL && trace_kernel_count < TRACE_MAX_KERNELS) {
		kernel = &trace_kernels[trace_kernel_count];
		kernel->name = strdup(record->name);
		if (kernel->name != NULL)
			trace_kernel_count++;
		else
			kernel = NULL;
	}
	if (kernel == NULL) {
		trace_dropped++;
	} else {
		kernel->count++;
		kernel->nanoseconds += record->end - record->start;
		kernel->grid[0] = (unsigned)record->gridX;
		kernel->grid[1] = (unsigned)record->gridY;
		kernel->grid[2] = (unsigned)record->gridZ;
		kernel->block[0] = (unsigned)record->blockX;
		kernel->block[1] = (unsigned)record->blockY;
		kernel->block[2] = (unsigned)record->blockZ;
		kernel->registers = record->registersPerThread;
		kernel->shared_bytes = record->staticSharedMemory + record->dynamicSharedMemory;
		trace_note_stream(kernel, record->streamId);
	}
	pthread_mutex_unlock(&trace_lock);
}

static void CUPTIAPI
trace_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(8, TRACE_BUFFER_BYTES);
	*size = *buffer != NULL ? TRACE_BUFFER_BYTES : 0;
	*max_records = 0;
}

static void CUPTIAPI
trace_buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size,
		       size_t valid)
{
	CUpti_Activity *record = NULL;

	(void)context;
	(void)stream;
	(void)size;
	while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
		if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
		    record->kind == CUPTI_ACTIVITY_KIND_KERNEL)
			trace_add((const CUpti_ActivityKernel10 *)record);
	}
	free(buffer);
}

static void
trace_reset(void)
{
	size_t index;

	pthread_mutex_lock(&trace_lock);
	for (index = 0; index < trace_kernel_count; index++)
		free(trace_kernels[index].name);
	memset(trace_kernels, 0, sizeof trace_kernels);
	trace_kernel_count = 0;
	trace_dropped = 0;
	pthread_mutex_unlock(&trace_lock);
}

int
kagent_kernel_trace_start(char *error, size_t error_size)
{
	static int callbacks_registered;
	CUptiResult result;

	if (trace_running)
		return kagent_ctypes_buffer_error(error, error_size, -EBUSY,
						  "a kernel trace is already running");
	trace_reset();
	if (!callbacks_registered) {
		result =
		    cuptiActivityRegisterCallbacks(trace_buffer_requested, trace_buffer_completed);
		if (result != CUPTI_SUCCESS)
			return trace_cupti_fail(error, error_size, "cuptiActivityRegisterCallbacks",
						result);
		callbacks_registered = 1;
	}
	/* Concurrent records keep kernels on different streams overlapping, as they ran. */
	result = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (result != CUPTI_SUCCESS)
		return trace_cupti_fail(error, error_size, "cuptiActivityEnable", result);
	trace_running = 1;
	return 0;
}

static int
trace_compare_time(const void *first, const void *second)
{
	const struct trace_kernel *a = first, *b = second;

	return a->nanoseconds < b->nanoseconds ? 1 : a->nanoseconds > b->nanoseconds ? -1 : 0;
}

int
kagent_kernel_trace_stop(char *buffer, size_t buffer_size, char *error, size_t error_size)
{
	json_t *kernels = NULL;
	CUptiResult result;
	size_t index;
	int status;

	if (!trace_running)
		return kagent_ctypes_buffer_error(error, error_size, -EINVAL,
						  "no kernel trace is running");
	result = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	trace_running = 0;
	if (result != CUPTI_SUCCESS)
		return trace_cupti_fail(error, error_size, "cuptiActivityFlushAll", result);
	kernels = json_array();
	pthread_mutex_lock(&trace_lock);
	qsort(trace_kernels, trace_kernel_count, sizeof trace_kernels[0], trace_compare_time);
	for (index = 0; index < trace_kernel_count; index++) {
		const struct trace_kernel *kernel = &trace_kernels[index];
		int exact = 0;
		char *shown = kagent_demangle_display(kernel->name, &exact);
		json_t *streams = json_array();
		unsigned stream;

		for (stream = 0; stream < kernel->stream_count; stream++)
			json_array_append_new(streams, json_integer(kernel->streams[stream]));
		json_array_append_new(
		    kernels,
		    json_pack("{s:s, s:s, s:I, s:f, s:[i,i,i], s:[i,i,i], s:i, s:i, s:o}", "name",
			      shown != NULL ? shown : kernel->name, "mangled", kernel->name,
			      "count", (json_int_t)kernel->count, "ms",
			      (double)kernel->nanoseconds / 1e6, "grid", kernel->grid[0],
			      kernel->grid[1], kernel->grid[2], "block", kernel->block[0],
			      kernel->block[1], kernel->block[2], "registers", kernel->registers,
			      "shared_bytes", kernel->shared_bytes, "streams", streams));
		free(shown);
	}
	pthread_mutex_unlock(&trace_lock);
	status = kagent_ctypes_buffer_json(kernels, buffer, buffer_size, error, error_size);
	json_decref(kernels);
	return status;
}
