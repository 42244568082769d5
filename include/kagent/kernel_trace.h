/*
 * Kernel tracing with CUPTI's activity API, for the sandboxed candidate child: which
 * kernels a forward launched and how much GPU time each took. It subscribes to kernel
 * records only, so it starts in a fraction of the time torch.profiler needs (which
 * enables every activity kind). Built as libkagent-trace.so and called through ctypes;
 * one trace at a time per process.
 */
#ifndef KAGENT_KERNEL_TRACE_H
#define KAGENT_KERNEL_TRACE_H

#include <stddef.h>

/* Starts recording kernel launches. Returns 0 or a negative errno with a message. */
int kagent_kernel_trace_start(char *error, size_t error_size);
/*
 * Stops recording (after the caller synchronised the device) and writes a JSON array, one
 * object per kernel name: {"name", "mangled", "count", "ms", "grid", "block", "registers",
 * "shared_bytes", "streams"} (grid to shared_bytes from the kernel's latest launch; streams:
 * the ids of up to four streams it ran on), names demangled where
 * possible, longest total time first. Returns the length written or a negative errno
 * (-ENOSPC when the buffer is too small).
 */
int kagent_kernel_trace_stop(char *buffer, size_t buffer_size, char *error, size_t error_size);

#endif
