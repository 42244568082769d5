/*
 * Kernel tracing with CUPTI's activity API, for the sandboxed candidate child: which
 * kernels a forward launched and how much GPU time each took. It subscribes to kernel
 * records only, so it starts in a fraction of the time torch.profiler needs (which
 * enables every activity kind). And hardware counters with CUPTI's range profiler: DRAM and
 * SM throughput of each kernel, for `kagent profile`. Built as libkagent-trace.so and called
 * through ctypes; one trace or counters pass at a time per process.
 */
#ifndef KAGENT_KERNEL_TRACE_H
#define KAGENT_KERNEL_TRACE_H

#include <stddef.h>

/* Starts recording kernel launches. Returns 0 or a negative errno with a message. */
int kagent_kernel_trace_start(char *cause, size_t cause_size);
/*
 * Stops recording (after the caller synchronised the device) and writes a JSON array, one
 * object per kernel name: {"name", "mangled", "count", "ms", "grid", "block", "registers",
 * "shared_bytes", "streams"} (grid to shared_bytes from the kernel's latest launch; streams:
 * the ids of up to four streams it ran on), names demangled where
 * possible, longest total time first. Returns the length written or a negative errno
 * (-ENOSPC when the buffer is too small).
 */
int kagent_kernel_trace_stop(char *buffer, size_t buffer_size, char *cause, size_t cause_size);

/*
 * Starts a counters pass on the CUDA context current on the calling thread: one range per
 * kernel (auto range), each kernel replayed by CUPTI until every counter is collected (kernel
 * replay), so the calls in between run several times slower and must never be timed. Needs
 * profiling permission (root, or the driver's RmProfilingAdminOnly=0). Returns 0 or a
 * negative errno with a message naming the CUPTI call and its error
 * ("cuptiRangeProfilerEnable failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (...)").
 */
int kagent_kernel_counters_start(char *cause, size_t cause_size);
/*
 * Ends the pass (after the caller synchronised the device) and writes a JSON object:
 * {"kernels": [{"name", "mangled", "count", "ms", "dram_percent", "sm_percent"}], "uncounted":
 * launches past the range limit}, one entry per kernel name, longest total time first; the
 * percentages are of the peak sustained throughput over the kernel's elapsed time, averaged
 * over its launches weighted by their time, and ms is the replayed kernels' own GPU time.
 * Returns the length written or a negative errno (-ENOSPC when the buffer is too small).
 */
int kagent_kernel_counters_stop(char *buffer, size_t buffer_size, char *cause, size_t cause_size);

/*
 * The device record of timed calls (docs/verdict.md, "The sealed boundary"): every kernel,
 * memcpy and memset the process runs, on any stream and from any thread, sent to the judge
 * as JSON lines over a descriptor of its own, each line marked with a key only this library
 * holds. Open before the candidate is imported: it reads the 8-byte key the judge wrote
 * first. Start before the first timed call; flush writes everything recorded so far followed
 * by {"flushed": n, "dropped": n}; stop flushes and ends recording. Each returns 0 or a
 * negative errno with a message. A line: {"key", "records": [[kind, start_ns, end_ns, stream,
 * name], ...]}, kind "k" (kernel, mangled name), "c" (memcpy) or "s" (memset), times in
 * CUPTI's clock (CLOCK_REALTIME on Linux).
 */
int kagent_device_record_open(int fd, char *cause, size_t cause_size);
int kagent_device_record_start(char *cause, size_t cause_size);
int kagent_device_record_flush(char *cause, size_t cause_size);
int kagent_device_record_stop(char *cause, size_t cause_size);

#endif
