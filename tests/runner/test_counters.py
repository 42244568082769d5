#!/usr/bin/env python3
"""Hardware counters without a GPU: the judge's check of a counters answer (which comes from
the untrusted candidate), and kagent_runner.kernel_trace.counters failing with a reason
(no library; libkagent-trace.so loaded where no driver is, which it must survive). The
counters themselves need a GPU: tests/gpu/eval_cases.py and tests/gpu/counters_check.py.
Prints TAP for meson. With KAGENT_TRACE_LIBRARY unset (kagent built without CUPTI) the
library tests skip."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Skip, test  # noqa: E402
import tap  # noqa: E402

try:
    from kagent_runner import judge, kernel_trace
except ImportError as error:  # the CPU suite needs torch; without it everything skips
    judge = kernel_trace = None
    IMPORT_ERROR = str(error)

def need_runner():
    if judge is None:
        raise Skip(f"the runner does not import: {IMPORT_ERROR}")


def need_library():
    need_runner()
    path = os.environ.get("KAGENT_TRACE_LIBRARY")
    if not path:
        raise Skip("libkagent-trace.so was not built")
    return path


def record(**fields):
    base = {"name": "relu_kernel", "count": 1, "ms": 0.5, "dram_percent": 88.0,
            "sm_percent": 6.0}
    base.update(fields)
    return base


@test
def summary_keeps_good_records():
    need_runner()
    summary = judge.counters_summary(
        {"kernels": [record(), record(name="void at::native::copy_kernel", ms=0.1)],
         "uncounted": 3}, ["relu_kernel"])
    assert summary["uncounted"] == 3, summary
    assert [kernel["own"] for kernel in summary["kernels"]] == [True, False], summary
    assert summary["kernels"][0] == {"name": "relu_kernel", "count": 1, "ms": 0.5,
                                     "dram_percent": 88.0, "sm_percent": 6.0, "own": True}


@test
def summary_drops_malformed_records():
    need_runner()
    bad = [record(dram_percent=True), record(sm_percent="90"), record(dram_percent=float("nan")),
           record(sm_percent=None), record(ms=-1.0), record(ms=float("inf")), record(count=1.5),
           record(count=False), "not a record", None]
    summary = judge.counters_summary({"kernels": bad + [record(name="kept")]}, [])
    assert [kernel["name"] for kernel in summary["kernels"]] == ["kept"], summary


@test
def summary_holds_percentages_to_0_100():
    need_runner()
    summary = judge.counters_summary(
        {"kernels": [record(dram_percent=1e9, sm_percent=-4.0, name="x" * 5000)]}, [])
    kernel = summary["kernels"][0]
    assert (kernel["dram_percent"], kernel["sm_percent"]) == (100.0, 0.0), kernel
    assert len(kernel["name"]) == 500


@test
def summary_caps_records_and_uncounted():
    need_runner()
    summary = judge.counters_summary({"kernels": [record()] * 1000, "uncounted": True}, [])
    assert len(summary["kernels"]) == 200 and summary["uncounted"] == 0, len(summary["kernels"])
    assert judge.counters_summary({"kernels": [], "uncounted": -7}, [])["uncounted"] == 0
    huge = judge.counters_summary({"kernels": [record(count=10 ** 40)], "uncounted": 10 ** 40}, [])
    assert huge["kernels"][0]["count"] == 1 << 31 and huge["uncounted"] == 1 << 31, huge


@test
def summary_of_errors_and_garbage():
    need_runner()
    assert judge.counters_summary(None, []) == {"error": "the counters pass returned nothing"}
    assert judge.counters_summary({"kernels": "many"}, []) == {
        "error": "the counters pass returned no kernel list"}
    long_error = judge.counters_summary({"error": "E" * 5000}, [])
    assert long_error == {"error": "E" * 1000}, long_error


@test
def no_library_is_a_reason():
    need_runner()
    for path in (None, "/nonexistent/libkagent-trace.so"):
        try:
            kernel_trace.counters(lambda: None, path)
        except kernel_trace.CountersUnavailable as error:
            assert "was not built" in str(error), error
        else:
            raise AssertionError("no CountersUnavailable")


@test
def no_driver_is_a_reason_and_the_call_is_not_made():
    path = need_library()
    calls = []
    try:
        kernel_trace.counters(lambda: calls.append(1), path)
    except kernel_trace.CountersUnavailable as error:
        assert "no NVIDIA driver (/nonexistent/libcuda.so.1)" in str(error), error
    else:
        raise AssertionError("counters without a driver")
    assert calls == [], calls


@test
def stop_without_start_is_refused():
    path = need_library()
    library = ctypes.CDLL(path)
    output = ctypes.create_string_buffer(64)
    error = ctypes.create_string_buffer(256)
    status = library.kagent_kernel_counters_stop(output, ctypes.sizeof(output), error,
                                                 ctypes.sizeof(error))
    assert status < 0 and error.value == b"no counters pass is running", (status, error.value)


if __name__ == "__main__":
    sys.exit(tap.run())
