/*
 * CUPTI kernel tracing and hardware counters for the candidate child (see
 * include/kagent/sandbox/kernel_trace.h). Records arrive in buffers that CUPTI fills and hands
 * back, possibly on its own thread, so what they feed (the per-name totals of a trace, the launch
 * list of a counters pass) is guarded by a mutex.
 */
#include "ctypes_buffer.h"
#include "kagent/sandbox/kernel_trace.h"

#include "kagent/base/alloc.h"
#include "kagent/cuda/demangle.h"

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_BUFFER_BYTES (4u << 20)
#define TRACE_MAX_KERNELS 512
#define TRACE_MAX_STREAMS 4
/* Kernels a counters pass can tell apart; later launches are counted as uncounted. */
#define COUNTERS_MAX_RANGES 2048
/* Launch records kept during a counters pass (a replayed kernel may be recorded again). */
#define COUNTERS_MAX_LAUNCHES (8 * COUNTERS_MAX_RANGES)

struct kernel_trace__kernel {
	char *name;
	unsigned long long count;
	unsigned long long nanoseconds;
	unsigned grid[3], block[3];
	unsigned registers, shared_bytes;
	/* the streams it ran on (a few; kernels on several streams overlap) */
	uint32_t streams[TRACE_MAX_STREAMS];
	unsigned stream_count;
};

/* A launch seen during a counters pass: its correlation id orders it among the ranges. */
struct kernel_trace__counters_launch {
	uint32_t correlation;
	char *name;
};

/* What the activity records feed: nothing, a trace, a counters pass, or the device record. */
enum kernel_trace__mode { TRACE_IDLE, TRACE_KERNELS, TRACE_COUNTERS, TRACE_DEVICE_RECORD };

static void kernel_trace__device_record_write(const uint8_t *buffer, size_t valid);

static pthread_mutex_t kernel_trace__lock = PTHREAD_MUTEX_INITIALIZER;
static struct kernel_trace__kernel kernel_trace__kernels[TRACE_MAX_KERNELS];
static size_t kernel_trace__kernel_count;
static unsigned long long kernel_trace__dropped;
static enum kernel_trace__mode kernel_trace__mode;
static uint32_t kernel_trace__counters_context_id;
static struct kernel_trace__counters_launch *kernel_trace__counters_launches;
static size_t kernel_trace__counters_launch_count;

static const char *const kernel_trace__counters_metrics[] = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum",
};
#define COUNTERS_METRIC_COUNT                                                                      \
	(sizeof kernel_trace__counters_metrics / sizeof kernel_trace__counters_metrics[0])

/* The profiler's state between start and stop. */
static struct {
	CUpti_Profiler_Host_Object *host;
	CUpti_RangeProfiler_Object *profiler;
	uint8_t *config;
	size_t config_size;
	uint8_t *data;
	size_t data_size;
} kernel_trace__counters_session;

static int
kernel_trace__cupti_fail(char *cause, size_t cause_size, const char *call, CUptiResult result)
{
	const char *name = NULL, *message = NULL;

	cuptiGetResultString(result, &name);
	cuptiGetErrorMessage(result, &message);
	return kagent_ctypes_buffer_error(
	    cause, cause_size, -EIO, "%s failed: %s (%s)%s", call, name ? name : "?",
	    message ? message : "no description",
	    result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
		? ": profiling needs admin on this machine (the NVIDIA driver's "
		  "RmProfilingAdminOnly=1); an administrator can allow it with the module "
		  "option NVreg_RestrictProfilingToAdminUsers=0"
		: "");
}

static void
kernel_trace__note_stream(struct kernel_trace__kernel *kernel, uint32_t stream)
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
kernel_trace__counters_add_launch(const CUpti_ActivityKernel10 *record)
{
	char *name;

	/* the range profiler sees one context; a kernel elsewhere has no range */
	if (record->contextId != kernel_trace__counters_context_id)
		return;
	if (kernel_trace__counters_launch_count == COUNTERS_MAX_LAUNCHES ||
	    (name = strdup(record->name)) == NULL) {
		kernel_trace__dropped++;
		return;
	}
	kernel_trace__counters_launches[kernel_trace__counters_launch_count].correlation =
	    record->correlationId;
	kernel_trace__counters_launches[kernel_trace__counters_launch_count].name = name;
	kernel_trace__counters_launch_count++;
}

static void
kernel_trace__add(const CUpti_ActivityKernel10 *record)
{
	struct kernel_trace__kernel *kernel = NULL;
	size_t index;

	if (record->name == NULL)
		return;
	pthread_mutex_lock(&kernel_trace__lock);
	if (kernel_trace__mode == TRACE_COUNTERS) {
		kernel_trace__counters_add_launch(record);
		pthread_mutex_unlock(&kernel_trace__lock);
		return;
	}
	for (index = 0; index < kernel_trace__kernel_count; index++) {
		if (strcmp(kernel_trace__kernels[index].name, record->name) == 0) {
			kernel = &kernel_trace__kernels[index];
			break;
		}
	}
	if (kernel == NULL && kernel_trace__kernel_count < TRACE_MAX_KERNELS) {
		kernel = &kernel_trace__kernels[kernel_trace__kernel_count];
		kernel->name = strdup(record->name);
		if (kernel->name != NULL)
			kernel_trace__kernel_count++;
		else
			kernel = NULL;
	}
	if (kernel == NULL) {
		kernel_trace__dropped++;
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
		kernel_trace__note_stream(kernel, record->streamId);
	}
	pthread_mutex_unlock(&kernel_trace__lock);
}

static void CUPTIAPI
kernel_trace__buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(8, TRACE_BUFFER_BYTES);
	*size = *buffer != NULL ? TRACE_BUFFER_BYTES : 0;
	*max_records = 0;
}

static void CUPTIAPI
kernel_trace__buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size,
			       size_t valid)
{
	CUpti_Activity *record = NULL;

	(void)context;
	(void)stream;
	(void)size;
	if (kernel_trace__mode == TRACE_DEVICE_RECORD) {
		kernel_trace__device_record_write(buffer, valid);
		free(buffer);
		return;
	}
	while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
		if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
		    record->kind == CUPTI_ACTIVITY_KIND_KERNEL)
			kernel_trace__add((const CUpti_ActivityKernel10 *)record);
	}
	free(buffer);
}

static void
kernel_trace__reset(void)
{
	size_t index;

	pthread_mutex_lock(&kernel_trace__lock);
	for (index = 0; index < kernel_trace__kernel_count; index++)
		free(kernel_trace__kernels[index].name);
	memset(kernel_trace__kernels, 0, sizeof kernel_trace__kernels);
	kernel_trace__kernel_count = 0;
	kernel_trace__dropped = 0;
	pthread_mutex_unlock(&kernel_trace__lock);
}

static void
kernel_trace__set_mode(enum kernel_trace__mode mode)
{
	pthread_mutex_lock(&kernel_trace__lock);
	kernel_trace__mode = mode;
	pthread_mutex_unlock(&kernel_trace__lock);
}

/* Starts kernel records flowing to whatever `mode` feeds. */
static int
kernel_trace__enable_records(enum kernel_trace__mode mode, char *cause, size_t cause_size)
{
	static int callbacks_registered;
	CUptiResult result;

	if (!callbacks_registered) {
		result = cuptiActivityRegisterCallbacks(kernel_trace__buffer_requested,
							kernel_trace__buffer_completed);
		if (result != CUPTI_SUCCESS)
			return kernel_trace__cupti_fail(cause, cause_size,
							"cuptiActivityRegisterCallbacks", result);
		callbacks_registered = 1;
	}
	kernel_trace__set_mode(mode);
	/* Concurrent records keep kernels on different streams overlapping, as they ran. */
	result = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (result != CUPTI_SUCCESS) {
		kernel_trace__set_mode(TRACE_IDLE);
		return kernel_trace__cupti_fail(cause, cause_size, "cuptiActivityEnable", result);
	}
	return 0;
}

/* Delivers every pending record, then stops them. */
static CUptiResult
kernel_trace__disable_records(void)
{
	CUptiResult result = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);

	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	kernel_trace__set_mode(TRACE_IDLE);
	return result;
}

int
kagent_kernel_trace_start(char *cause, size_t cause_size)
{
	if (kernel_trace__mode != TRACE_IDLE)
		return kagent_ctypes_buffer_error(cause, cause_size, -EBUSY,
						  "a kernel trace or counters pass is already "
						  "running");
	kernel_trace__reset();
	return kernel_trace__enable_records(TRACE_KERNELS, cause, cause_size);
}

static int
kernel_trace__compare_time(const void *first, const void *second)
{
	const struct kernel_trace__kernel *a = first, *b = second;

	return a->nanoseconds < b->nanoseconds ? 1 : a->nanoseconds > b->nanoseconds ? -1 : 0;
}

int
kagent_kernel_trace_stop(char *buffer, size_t buffer_size, char *cause, size_t cause_size)
{
	json_t *kernels = NULL;
	CUptiResult result;
	size_t index;
	int status;

	if (kernel_trace__mode != TRACE_KERNELS)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "no kernel trace is running");
	result = kernel_trace__disable_records();
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(cause, cause_size, "cuptiActivityFlushAll", result);
	kernels = json_array();
	pthread_mutex_lock(&kernel_trace__lock);
	qsort(kernel_trace__kernels, kernel_trace__kernel_count, sizeof kernel_trace__kernels[0],
	      kernel_trace__compare_time);
	for (index = 0; index < kernel_trace__kernel_count; index++) {
		const struct kernel_trace__kernel *kernel = &kernel_trace__kernels[index];
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
	pthread_mutex_unlock(&kernel_trace__lock);
	status = kagent_ctypes_buffer_json(kernels, buffer, buffer_size, cause, cause_size);
	json_decref(kernels);
	return status;
}

/* -------------------------------------------------------------------------------------- */
/* Hardware counters: the range profiler, one range per kernel, kernel replay              */

/* libcuda is not linked (the library must load where no driver is): the two calls that name
 * the current context come from dlopen, where torch has already loaded the driver
 * (KAGENT_LIBCUDA names another, as for libkagent-cuda.so). */
static int
kernel_trace__counters_current_context(CUcontext *context_out, CUdevice *device_out, char *cause,
				       size_t cause_size)
{
	CUresult (*get_current)(CUcontext *) = NULL;
	CUresult (*get_device)(CUdevice *) = NULL;
	const char *name = getenv("KAGENT_LIBCUDA");
	void *driver;
	int status = 0;

	if (name == NULL || name[0] == '\0')
		name = "libcuda.so.1";
	driver = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (driver == NULL)
		return kagent_ctypes_buffer_error(cause, cause_size, -ENODEV,
						  "no NVIDIA driver (%s): %s", name, dlerror());
	*(void **)(&get_current) = dlsym(driver, "cuCtxGetCurrent");
	*(void **)(&get_device) = dlsym(driver, "cuCtxGetDevice");
	*context_out = NULL;
	if (get_current == NULL || get_device == NULL)
		status = kagent_ctypes_buffer_error(
		    cause, cause_size, -ENOSYS, "%s lacks cuCtxGetCurrent or cuCtxGetDevice", name);
	else if (get_current(context_out) != CUDA_SUCCESS || *context_out == NULL)
		status = kagent_ctypes_buffer_error(
		    cause, cause_size, -ENODEV,
		    "no CUDA context is current on this thread: run one CUDA call first");
	else if (get_device(device_out) != CUDA_SUCCESS)
		status =
		    kagent_ctypes_buffer_error(cause, cause_size, -ENODEV, "cuCtxGetDevice failed");
	dlclose(driver);
	return status;
}

/* The config image (which counters to collect, in which passes) for this chip's metrics. */
static int
kernel_trace__counters_configure(const char *chip, char *cause, size_t cause_size)
{
	CUpti_Profiler_Host_Initialize_Params initialize = {
	    .structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE,
	    .profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER,
	    .pChipName = chip};
	CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
	    .structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE,
	    .ppMetricNames = (const char **)kernel_trace__counters_metrics,
	    .numMetrics = COUNTERS_METRIC_COUNT};
	CUpti_Profiler_Host_GetConfigImageSize_Params size = {
	    .structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
	CUpti_Profiler_Host_GetConfigImage_Params image = {
	    .structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
	CUptiResult result;

	result = cuptiProfilerHostInitialize(&initialize);
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(cause, cause_size, "cuptiProfilerHostInitialize",
						result);
	kernel_trace__counters_session.host = initialize.pHostObject;
	add.pHostObject = kernel_trace__counters_session.host;
	result = cuptiProfilerHostConfigAddMetrics(&add);
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(cause, cause_size,
						"cuptiProfilerHostConfigAddMetrics", result);
	size.pHostObject = kernel_trace__counters_session.host;
	result = cuptiProfilerHostGetConfigImageSize(&size);
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(cause, cause_size,
						"cuptiProfilerHostGetConfigImageSize", result);
	kernel_trace__counters_session.config_size = size.configImageSize;
	kernel_trace__counters_session.config = kagent_calloc(1, size.configImageSize);
	image.pHostObject = kernel_trace__counters_session.host;
	image.configImageSize = kernel_trace__counters_session.config_size;
	image.pConfigImage = kernel_trace__counters_session.config;
	result = cuptiProfilerHostGetConfigImage(&image);
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(cause, cause_size,
						"cuptiProfilerHostGetConfigImage", result);
	return 0;
}

/* The counter data image the decoded ranges go to, and the profiler's configuration. */
static int
kernel_trace__counters_set_config(char *cause, size_t cause_size)
{
	CUpti_RangeProfiler_GetCounterDataSize_Params size = {
	    .structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE,
	    .pRangeProfilerObject = kernel_trace__counters_session.profiler,
	    .pMetricNames = (const char **)kernel_trace__counters_metrics,
	    .numMetrics = COUNTERS_METRIC_COUNT,
	    .maxNumOfRanges = COUNTERS_MAX_RANGES,
	    .maxNumRangeTreeNodes = COUNTERS_MAX_RANGES};
	CUpti_RangeProfiler_CounterDataImage_Initialize_Params initialize = {
	    .structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE,
	    .pRangeProfilerObject = kernel_trace__counters_session.profiler};
	CUpti_RangeProfiler_SetConfig_Params config = {
	    .structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE,
	    .pRangeProfilerObject = kernel_trace__counters_session.profiler,
	    .range = CUPTI_AutoRange,
	    .replayMode = CUPTI_KernelReplay,
	    .maxRangesPerPass = COUNTERS_MAX_RANGES,
	    .numNestingLevels = 1,
	    .minNestingLevel = 1};
	CUptiResult result;

	result = cuptiRangeProfilerGetCounterDataSize(&size);
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(cause, cause_size,
						"cuptiRangeProfilerGetCounterDataSize", result);
	kernel_trace__counters_session.data_size = size.counterDataSize;
	kernel_trace__counters_session.data = kagent_calloc(1, size.counterDataSize);
	initialize.counterDataSize = kernel_trace__counters_session.data_size;
	initialize.pCounterData = kernel_trace__counters_session.data;
	result = cuptiRangeProfilerCounterDataImageInitialize(&initialize);
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(
		    cause, cause_size, "cuptiRangeProfilerCounterDataImageInitialize", result);
	config.configSize = kernel_trace__counters_session.config_size;
	config.pConfig = kernel_trace__counters_session.config;
	config.counterDataImageSize = kernel_trace__counters_session.data_size;
	config.pCounterDataImage = kernel_trace__counters_session.data;
	result = cuptiRangeProfilerSetConfig(&config);
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(cause, cause_size, "cuptiRangeProfilerSetConfig",
						result);
	return 0;
}

/* Ends a counters pass, whatever state it reached. */
static void
kernel_trace__counters_release(void)
{
	size_t index;

	if (kernel_trace__mode == TRACE_COUNTERS)
		kernel_trace__disable_records();
	if (kernel_trace__counters_session.profiler != NULL) {
		CUpti_RangeProfiler_Disable_Params disable = {
		    .structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE,
		    .pRangeProfilerObject = kernel_trace__counters_session.profiler};

		cuptiRangeProfilerDisable(&disable);
	}
	if (kernel_trace__counters_session.host != NULL) {
		CUpti_Profiler_Host_Deinitialize_Params deinitialize = {
		    .structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE,
		    .pHostObject = kernel_trace__counters_session.host};

		cuptiProfilerHostDeinitialize(&deinitialize);
	}
	free(kernel_trace__counters_session.config);
	free(kernel_trace__counters_session.data);
	memset(&kernel_trace__counters_session, 0, sizeof kernel_trace__counters_session);
	pthread_mutex_lock(&kernel_trace__lock);
	for (index = 0; index < kernel_trace__counters_launch_count; index++)
		free(kernel_trace__counters_launches[index].name);
	kernel_trace__counters_launch_count = 0;
	pthread_mutex_unlock(&kernel_trace__lock);
}

int
kagent_kernel_counters_start(char *cause, size_t cause_size)
{
	static int profiler_initialized;
	CUpti_Profiler_Initialize_Params initialize = {
	    .structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
	CUpti_Device_GetChipName_Params chip = {.structSize =
						    CUpti_Device_GetChipName_Params_STRUCT_SIZE};
	CUpti_RangeProfiler_Enable_Params enable = {
	    .structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
	CUpti_RangeProfiler_Start_Params start = {.structSize =
						      CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
	CUptiResult result;
	CUcontext context;
	CUdevice device = 0;
	int status;

	if (kernel_trace__mode != TRACE_IDLE)
		return kagent_ctypes_buffer_error(cause, cause_size, -EBUSY,
						  "a kernel trace or counters pass is already "
						  "running");
	status = kernel_trace__counters_current_context(&context, &device, cause, cause_size);
	if (status < 0)
		return status;
	if (!profiler_initialized) {
		result = cuptiProfilerInitialize(&initialize);
		if (result != CUPTI_SUCCESS)
			return kernel_trace__cupti_fail(cause, cause_size,
							"cuptiProfilerInitialize", result);
		profiler_initialized = 1;
	}
	if (kernel_trace__counters_launches == NULL)
		kernel_trace__counters_launches =
		    kagent_calloc(COUNTERS_MAX_LAUNCHES, sizeof kernel_trace__counters_launches[0]);
	chip.deviceIndex = (size_t)device;
	result = cuptiDeviceGetChipName(&chip);
	if (result != CUPTI_SUCCESS) {
		status =
		    kernel_trace__cupti_fail(cause, cause_size, "cuptiDeviceGetChipName", result);
		goto out;
	}
	status = kernel_trace__counters_configure(chip.pChipName, cause, cause_size);
	if (status < 0)
		goto out;
	enable.ctx = context;
	result = cuptiRangeProfilerEnable(&enable);
	if (result != CUPTI_SUCCESS) {
		status =
		    kernel_trace__cupti_fail(cause, cause_size, "cuptiRangeProfilerEnable", result);
		goto out;
	}
	kernel_trace__counters_session.profiler = enable.pRangeProfilerObject;
	status = kernel_trace__counters_set_config(cause, cause_size);
	if (status < 0)
		goto out;
	result = cuptiGetContextId(context, &kernel_trace__counters_context_id);
	if (result != CUPTI_SUCCESS) {
		status = kernel_trace__cupti_fail(cause, cause_size, "cuptiGetContextId", result);
		goto out;
	}
	/* kernel records name the ranges, which auto range only numbers */
	status = kernel_trace__enable_records(TRACE_COUNTERS, cause, cause_size);
	if (status < 0)
		goto out;
	start.pRangeProfilerObject = kernel_trace__counters_session.profiler;
	result = cuptiRangeProfilerStart(&start);
	if (result != CUPTI_SUCCESS)
		status =
		    kernel_trace__cupti_fail(cause, cause_size, "cuptiRangeProfilerStart", result);
out:
	if (status < 0)
		kernel_trace__counters_release();
	return status;
}

static int
kernel_trace__counters_compare_launch(const void *first, const void *second)
{
	const struct kernel_trace__counters_launch *a = first, *b = second;

	return a->correlation < b->correlation ? -1 : a->correlation > b->correlation ? 1 : 0;
}

/* Launch order, each launch once (a replayed kernel may have been recorded again). */
static size_t
kernel_trace__counters_unique_launches(void)
{
	size_t index, kept = 0;

	qsort(kernel_trace__counters_launches, kernel_trace__counters_launch_count,
	      sizeof kernel_trace__counters_launches[0], kernel_trace__counters_compare_launch);
	for (index = 0; index < kernel_trace__counters_launch_count; index++) {
		if (kept > 0 && kernel_trace__counters_launches[kept - 1].correlation ==
				    kernel_trace__counters_launches[index].correlation) {
			free(kernel_trace__counters_launches[index].name);
			continue;
		}
		kernel_trace__counters_launches[kept++] = kernel_trace__counters_launches[index];
	}
	kernel_trace__counters_launch_count = kept;
	return kept;
}

struct kernel_trace__counters_kernel {
	const char *name;
	unsigned long long count;
	double nanoseconds, dram_weighted, sm_weighted;
};

static int
kernel_trace__counters_compare_time(const void *first, const void *second)
{
	const struct kernel_trace__counters_kernel *a = first, *b = second;

	return a->nanoseconds < b->nanoseconds ? 1 : a->nanoseconds > b->nanoseconds ? -1 : 0;
}

/* The metrics of each range, added up per kernel name: {"kernels": [...], "uncounted": n}. */
static int
kernel_trace__counters_evaluate(size_t ranges, json_t **result_out, char *cause, size_t cause_size)
{
	struct kernel_trace__counters_kernel *kernels =
	    kagent_calloc(ranges + 1, sizeof kernels[0]);
	size_t launches = kernel_trace__counters_unique_launches(), kernel_count = 0, index, search;
	json_t *list = json_array();
	int status = 0;

	/* launches past the counter data image's ranges are dropped, never shifted */
	if (launches < ranges || (launches > ranges && ranges < COUNTERS_MAX_RANGES)) {
		status = kagent_ctypes_buffer_error(
		    cause, cause_size, -EPROTO,
		    "CUPTI recorded %zu kernel launches but the range profiler %zu ranges: "
		    "kernels and counters cannot be matched",
		    launches, ranges);
		goto out;
	}
	for (index = 0; index < ranges; index++) {
		double values[COUNTERS_METRIC_COUNT] = {0};
		CUpti_Profiler_Host_EvaluateToGpuValues_Params evaluate = {
		    .structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE,
		    .pHostObject = kernel_trace__counters_session.host,
		    .pCounterDataImage = kernel_trace__counters_session.data,
		    .counterDataImageSize = kernel_trace__counters_session.data_size,
		    .rangeIndex = index,
		    .ppMetricNames = (const char **)kernel_trace__counters_metrics,
		    .numMetrics = COUNTERS_METRIC_COUNT,
		    .pMetricValues = values};
		CUptiResult result = cuptiProfilerHostEvaluateToGpuValues(&evaluate);
		struct kernel_trace__counters_kernel *kernel = NULL;
		double weight;

		if (result != CUPTI_SUCCESS) {
			status = kernel_trace__cupti_fail(
			    cause, cause_size, "cuptiProfilerHostEvaluateToGpuValues", result);
			goto out;
		}
		for (search = 0; search < kernel_count; search++) {
			if (strcmp(kernels[search].name,
				   kernel_trace__counters_launches[index].name) == 0) {
				kernel = &kernels[search];
				break;
			}
		}
		if (kernel == NULL) {
			kernel = &kernels[kernel_count++];
			kernel->name = kernel_trace__counters_launches[index].name;
		}
		/* percentages of launches averaged by their time; 1 ns keeps empty ones */
		weight = isfinite(values[2]) && values[2] > 1.0 ? values[2] : 1.0;
		kernel->count++;
		kernel->nanoseconds += weight;
		kernel->dram_weighted += (isfinite(values[0]) ? values[0] : 0.0) * weight;
		kernel->sm_weighted += (isfinite(values[1]) ? values[1] : 0.0) * weight;
	}
	qsort(kernels, kernel_count, sizeof kernels[0], kernel_trace__counters_compare_time);
	for (index = 0; index < kernel_count; index++) {
		const struct kernel_trace__counters_kernel *kernel = &kernels[index];
		int exact = 0;
		char *shown = kagent_demangle_display(kernel->name, &exact);

		json_array_append_new(
		    list,
		    json_pack("{s:s, s:s, s:I, s:f, s:f, s:f}", "name",
			      shown != NULL ? shown : kernel->name, "mangled", kernel->name,
			      "count", (json_int_t)kernel->count, "ms", kernel->nanoseconds / 1e6,
			      "dram_percent", kernel->dram_weighted / kernel->nanoseconds,
			      "sm_percent", kernel->sm_weighted / kernel->nanoseconds));
		free(shown);
	}
	*result_out =
	    json_pack("{s:O, s:I}", "kernels", list, "uncounted", (json_int_t)(launches - ranges));
out:
	json_decref(list);
	free(kernels);
	return status;
}

int
kagent_kernel_counters_stop(char *buffer, size_t buffer_size, char *cause, size_t cause_size)
{
	CUpti_RangeProfiler_Stop_Params stop = {.structSize =
						    CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
	CUpti_RangeProfiler_DecodeData_Params decode = {
	    .structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
	CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
	    .structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
	json_t *result_json = NULL;
	CUptiResult result;
	int status = 0;

	if (kernel_trace__mode != TRACE_COUNTERS)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "no counters pass is running");
	stop.pRangeProfilerObject = kernel_trace__counters_session.profiler;
	result = cuptiRangeProfilerStop(&stop);
	if (result != CUPTI_SUCCESS) {
		status =
		    kernel_trace__cupti_fail(cause, cause_size, "cuptiRangeProfilerStop", result);
		goto out;
	}
	if (!stop.isAllPassSubmitted) {
		status = kagent_ctypes_buffer_error(
		    cause, cause_size, -EPROTO,
		    "cuptiRangeProfilerStop: kernel replay left counter passes unsubmitted");
		goto out;
	}
	decode.pRangeProfilerObject = kernel_trace__counters_session.profiler;
	result = cuptiRangeProfilerDecodeData(&decode);
	if (result != CUPTI_SUCCESS) {
		status = kernel_trace__cupti_fail(cause, cause_size, "cuptiRangeProfilerDecodeData",
						  result);
		goto out;
	}
	result = kernel_trace__disable_records();
	if (result != CUPTI_SUCCESS) {
		status =
		    kernel_trace__cupti_fail(cause, cause_size, "cuptiActivityFlushAll", result);
		goto out;
	}
	info.pCounterDataImage = kernel_trace__counters_session.data;
	info.counterDataImageSize = kernel_trace__counters_session.data_size;
	result = cuptiRangeProfilerGetCounterDataInfo(&info);
	if (result != CUPTI_SUCCESS) {
		status = kernel_trace__cupti_fail(cause, cause_size,
						  "cuptiRangeProfilerGetCounterDataInfo", result);
		goto out;
	}
	status =
	    kernel_trace__counters_evaluate(info.numTotalRanges, &result_json, cause, cause_size);
	if (status == 0)
		status =
		    kagent_ctypes_buffer_json(result_json, buffer, buffer_size, cause, cause_size);
out:
	json_decref(result_json);
	kernel_trace__counters_release();
	return status;
}

/* -------------------------------------------------------------------------------------- */
/* The device record of timed calls: every kernel, memcpy and memset, written to the judge  */

/* Written by kagent_device_record_open before the candidate is imported: the judge's end and
 * the key that marks each line as this library's (Python code in the process cannot read it
 * without reading this library's memory). */
static int device_record__fd = -1;
static uint64_t device_record__key;
static unsigned long long device_record__dropped, device_record__flushes;

static const CUpti_ActivityKind device_record__kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_MEMCPY2};
#define DEVICE_RECORD_KIND_COUNT (sizeof device_record__kinds / sizeof device_record__kinds[0])

/* The whole line, or nothing more: a short write of a stream socket is resumed. */
static void
device_record__send(const char *text, size_t length)
{
	while (length > 0) {
		ssize_t written = write(device_record__fd, text, length);

		if (written < 0 && errno == EINTR)
			continue;
		if (written <= 0)
			return; /* the judge is gone: the evaluation ends without this record */
		text += written;
		length -= (size_t)written;
	}
}

static void
device_record__send_json(json_t *line)
{
	char key[17];
	char *text;

	snprintf(key, sizeof key, "%016llx", (unsigned long long)device_record__key);
	json_object_set_new(line, "key", json_string(key));
	text = json_dumps(line, JSON_COMPACT);
	if (text == NULL) {
		device_record__dropped++;
		return;
	}
	device_record__send(text, strlen(text));
	device_record__send("\n", 1);
	free(text);
}

/* A memcpy's direction by CUPTI's copy kind: with its bytes, what a finding about a copy
 * outside the timed calls names (device_record.describe_outside). */
static const char *
device_record__direction(uint8_t copy_kind)
{
	switch (copy_kind) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
		return "HtoD";
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
		return "DtoH";
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
		return "DtoD";
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
		return "HtoH";
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
		return "PtoP";
	default:
		return "other";
	}
}

/* One record as [kind, start, end, stream, name, bytes, direction]: "k" kernel (mangled name,
 * 0 bytes), "c" memcpy (bytes copied and direction), "s" memset (bytes set); times in CUPTI's
 * clock (CLOCK_REALTIME nanoseconds on Linux, as the judge's). */
static json_t *
device_record__entry(const CUpti_Activity *record)
{
	switch (record->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL: {
		const CUpti_ActivityKernel10 *kernel = (const CUpti_ActivityKernel10 *)record;

		return json_pack("[s, I, I, I, s?, i, n]", "k", (json_int_t)kernel->start,
				 (json_int_t)kernel->end, (json_int_t)kernel->streamId,
				 kernel->name, 0);
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *copy = (const CUpti_ActivityMemcpy6 *)record;

		return json_pack("[s, I, I, I, n, I, s]", "c", (json_int_t)copy->start,
				 (json_int_t)copy->end, (json_int_t)copy->streamId,
				 (json_int_t)copy->bytes, device_record__direction(copy->copyKind));
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *copy = (const CUpti_ActivityMemcpyPtoP4 *)record;

		return json_pack("[s, I, I, I, n, I, s]", "c", (json_int_t)copy->start,
				 (json_int_t)copy->end, (json_int_t)copy->streamId,
				 (json_int_t)copy->bytes, device_record__direction(copy->copyKind));
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *set = (const CUpti_ActivityMemset4 *)record;

		return json_pack("[s, I, I, I, n, I, n]", "s", (json_int_t)set->start,
				 (json_int_t)set->end, (json_int_t)set->streamId,
				 (json_int_t)set->bytes);
	}
	default:
		return NULL;
	}
}

/* A completed buffer, as one line to the judge (CUPTI's thread or a flush's). */
static void
kernel_trace__device_record_write(const uint8_t *buffer, size_t valid)
{
	CUpti_Activity *record = NULL;
	json_t *records = json_array(), *entry;

	while (cuptiActivityGetNextRecord((uint8_t *)buffer, valid, &record) == CUPTI_SUCCESS) {
		entry = device_record__entry(record);
		if (entry != NULL)
			json_array_append_new(records, entry);
	}
	pthread_mutex_lock(&kernel_trace__lock);
	if (json_array_size(records) > 0)
		device_record__send_json(json_pack("{s:o}", "records", records));
	else
		json_decref(records);
	pthread_mutex_unlock(&kernel_trace__lock);
}

int
kagent_device_record_open(int fd, char *cause, size_t cause_size)
{
	uint8_t key[8];
	size_t have = 0;

	if (device_record__fd >= 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -EBUSY,
						  "the device record is already open");
	while (have < sizeof key) {
		ssize_t got = read(fd, key + have, sizeof key - have);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return kagent_ctypes_buffer_error(
			    cause, cause_size, -EPROTO,
			    "the judge sent no key on the device record's descriptor");
		have += (size_t)got;
	}
	memcpy(&device_record__key, key, sizeof key);
	device_record__fd = fd;
	return 0;
}

int
kagent_device_record_start(char *cause, size_t cause_size)
{
	static int callbacks_registered;
	CUptiResult result;
	size_t index;

	if (device_record__fd < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "the device record was not opened");
	if (kernel_trace__mode != TRACE_IDLE)
		return kagent_ctypes_buffer_error(cause, cause_size, -EBUSY,
						  "a kernel trace or counters pass is running");
	if (!callbacks_registered) {
		result = cuptiActivityRegisterCallbacks(kernel_trace__buffer_requested,
							kernel_trace__buffer_completed);
		if (result != CUPTI_SUCCESS)
			return kernel_trace__cupti_fail(cause, cause_size,
							"cuptiActivityRegisterCallbacks", result);
		callbacks_registered = 1;
	}
	kernel_trace__set_mode(TRACE_DEVICE_RECORD);
	for (index = 0; index < DEVICE_RECORD_KIND_COUNT; index++) {
		result = cuptiActivityEnable(device_record__kinds[index]);
		if (result != CUPTI_SUCCESS) {
			while (index-- > 0)
				cuptiActivityDisable(device_record__kinds[index]);
			kernel_trace__set_mode(TRACE_IDLE);
			return kernel_trace__cupti_fail(cause, cause_size, "cuptiActivityEnable",
							result);
		}
	}
	return 0;
}

int
kagent_device_record_flush(char *cause, size_t cause_size)
{
	CUptiResult result;

	if (kernel_trace__mode != TRACE_DEVICE_RECORD)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "the device record is not running");
	/* Forced: every buffer, even half full, is completed (and written) before this returns. */
	result = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (result != CUPTI_SUCCESS)
		return kernel_trace__cupti_fail(cause, cause_size, "cuptiActivityFlushAll", result);
	pthread_mutex_lock(&kernel_trace__lock);
	device_record__send_json(json_pack("{s:I, s:I}", "flushed",
					   (json_int_t)++device_record__flushes, "dropped",
					   (json_int_t)device_record__dropped));
	pthread_mutex_unlock(&kernel_trace__lock);
	return 0;
}

int
kagent_device_record_stop(char *cause, size_t cause_size)
{
	size_t index;
	int status;

	status = kagent_device_record_flush(cause, cause_size);
	if (status != 0)
		return status;
	for (index = 0; index < DEVICE_RECORD_KIND_COUNT; index++)
		cuptiActivityDisable(device_record__kinds[index]);
	kernel_trace__set_mode(TRACE_IDLE);
	return 0;
}
