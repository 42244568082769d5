"""The kernels one call launches, with their GPU time: through libkagent-trace.so (CUPTI
kernel records only, quick to start) where it was built, else torch.profiler (whose first
session in a process costs seconds). Used by the candidate child for the own-kernel check and
by the judge to profile the reference. Also their DRAM and SM throughput, through the same
library's CUPTI range profiler, for `kagent profile`."""
import ctypes
import json
import os
import sys

import torch


def trace(run, library_path, profile=torch.profiler.profile):
    """Calls run() once (it must synchronise the device) and returns
    [{"name", "count", "ms", ...}], longest total time first."""
    if library_path and os.path.exists(library_path):
        library = ctypes.CDLL(library_path)
        error = ctypes.create_string_buffer(1024)
        if library.kagent_kernel_trace_start(error, ctypes.sizeof(error)) == 0:
            run()
            output = ctypes.create_string_buffer(4 << 20)
            length = library.kagent_kernel_trace_stop(output, ctypes.sizeof(output), error,
                                                      ctypes.sizeof(error))
            if length >= 0:
                return json.loads(output.value.decode("utf-8", errors="replace"))
        print(f"kagent: kernel trace unavailable ({error.value.decode(errors='replace')}); "
              "using torch.profiler", file=sys.stderr)
    with profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as recorder:
        run()
    kernels = {}
    for event in recorder.events():
        if getattr(event, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        duration = getattr(event, "device_time", None)
        if duration is None:
            duration = getattr(event, "cuda_time", 0.0)
        entry = kernels.setdefault(event.name, {"name": event.name, "count": 0, "ms": 0.0})
        entry["count"] += 1
        entry["ms"] += float(duration) / 1000.0
    return sorted(kernels.values(), key=lambda entry: -entry["ms"])


class CountersUnavailable(Exception):
    """No hardware counters were collected; the message says why."""


def counters(run, library_path):
    """Calls run() once (it must synchronise the device) with every kernel replayed under
    CUPTI's range profiler, so that call is slow and never timed, and returns
    {"kernels": [{"name", "mangled", "count", "ms", "dram_percent", "sm_percent"}],
    "uncounted": launches past the profiler's range limit}, longest total time first.
    Raises CountersUnavailable naming the CUPTI call that failed and its error."""
    if not library_path or not os.path.exists(library_path):
        raise CountersUnavailable("libkagent-trace.so was not built (no CUPTI range profiler "
                                  "in the CUDA toolkit at build time)")
    library = ctypes.CDLL(library_path)
    error = ctypes.create_string_buffer(2048)
    if library.kagent_kernel_counters_start(error, ctypes.sizeof(error)) != 0:
        raise CountersUnavailable(error.value.decode(errors="replace"))
    output = ctypes.create_string_buffer(4 << 20)
    try:
        run()
    finally:
        # the profiler is released even when run() failed; its error then wins
        length = library.kagent_kernel_counters_stop(output, ctypes.sizeof(output), error,
                                                     ctypes.sizeof(error))
    if length < 0:
        raise CountersUnavailable(error.value.decode(errors="replace"))
    return json.loads(output.value.decode("utf-8", errors="replace"))
