#!/usr/bin/env python3
"""The sealed boundary's rules (kagent_runner/device_record.py) on recorded data, without a
GPU or torch: device time per call as the union of intervals, records outside the calls named,
kernel counts checked against the discovery call, the judge's reader refusing lines without
the library's key; and the real libkagent-trace.so reading the key first. Prints TAP."""
import ctypes
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner",
                                "kagent_runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device_record  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402

US = 1000  # nanoseconds
MS = 1000 * US


def kernel(start, end, name="relu_kernel", stream=7):
    return ("k", start, end, stream, name, 0, None)


def copy(start, end, size=4, direction="DtoH", stream=7):
    return ("c", start, end, stream, None, size, direction)


@test
def union():
    """device time is the union of a call's intervals, on any stream"""
    records = [kernel(0, 10 * US), kernel(5 * US, 12 * US, stream=9),
               copy(20 * US, 25 * US, size=1 << 20, direction="DtoD")]
    summary = device_record.call_summary(records)
    assert abs(summary["device_ms"] - 0.017) < 1e-12, summary
    assert summary["kernels"] == 2 and summary["names"] == ["relu_kernel", "relu_kernel"]
    assert device_record.union_ns([]) == 0


# three calls 1 ms long, 5 ms apart; the first is the discovery call, two are timed
WINDOWS = [(0, 1 * MS), (5 * MS, 6 * MS), (10 * MS, 11 * MS)]


def honest():
    return [kernel(start + 100 * US, start + 300 * US) for start, _ in WINDOWS]


@test
def honest_arm():
    """an honest arm: one sample per timed call, nothing outside, no finding"""
    samples, findings, details = device_record.analyse(honest(), WINDOWS, [1, 2], 1)
    assert findings == [], findings
    assert [round(s, 6) for s in samples] == [0.2, 0.2], samples
    assert details["outside"] == 0 and details["mismatched_calls"] == 0


@test
def deferred():
    """work deferred past a call (a thread, delivery, exit) is outside and named"""
    records = honest() + [kernel(7 * MS, 9 * MS, name="late_work")]
    _, findings, details = device_record.analyse(records, WINDOWS, [1, 2], 1)
    assert details["outside"] == 1, details
    assert any("outside the timed calls" in f and "late_work" in f and "after a call ended" in f
               for f in findings), findings


@test
def straddle():
    """work that straddles a call's end is counted whole in that call"""
    records = honest()
    records[1] = kernel(5 * MS + 100 * US, 6 * MS + 150 * US)  # within the margin
    samples, findings, _ = device_record.analyse(records, WINDOWS, [1, 2], 1)
    assert findings == [] and abs(samples[0] - 1.05) < 1e-9, (samples, findings)


@test
def close_calls():
    """a short kernel at the end of a call stays in that call when the next call starts
    within the margin (the null round trips follow the discovery call at once)"""
    windows = [(0, 1 * MS), (1 * MS + 50 * US, 1 * MS + 60 * US)]
    records = [kernel(100 * US, 300 * US), kernel(990 * US, 995 * US, name="last")]
    per_window, outside = device_record.assign(records, windows)
    assert outside == [] and [len(calls) for calls in per_window] == [2, 0], per_window


@test
def kernel_count():
    """a call whose kernel count differs from the discovery call is named"""
    records = honest() + [kernel(10 * MS + 400 * US, 10 * MS + 500 * US, name="extra")]
    _, findings, details = device_record.analyse(records, WINDOWS, [1, 2], 1)
    assert details["mismatched_calls"] == 1, details
    assert any("kernel sequence changed" in f for f in findings), findings


@test
def empty():
    """no record in any timed call is a finding (the record stopped)"""
    _, findings, _ = device_record.analyse([kernel(100 * US, 300 * US)], WINDOWS, [1, 2], 1)
    assert any("no device work was recorded" in f for f in findings), findings


@test
def before():
    """records before the first call are outside"""
    windows = [(5 * MS, 6 * MS)]
    per_window, outside = device_record.assign([kernel(0, 1 * MS)], windows)
    assert per_window == [[]] and len(outside) == 1
    assert "before the first call" in device_record.describe_outside(outside[0], windows)
    # a copy is named by its bytes and direction: what it moved, where to
    described = device_record.describe_outside(copy(7 * MS, 7 * MS + 20 * US, size=4 << 20),
                                               windows)
    assert described.startswith("memcpy of 4194304 bytes DtoH (20.0 us) "), described


@test
def malformed():
    """malformed records are refused, not trusted"""
    for bad in (["k", 5, 1, 0, "x", 0, None], ["q", 0, 1, 0, None, 0, None],
                ["k", "0", 1, 0, None, 0, None], ["k", 0, 1], {"k": 1},
                ["k", True, 1, 0, None, 0, None], ["k", 0, 1, 0, "x"],
                ["c", 0, 1, 0, None, -4, "DtoH"], ["c", 0, 1, 0, None, "4", "DtoH"],
                ["c", 0, 1, 0, None, 4, 2], ["c", 0, 1, 0, None, True, "DtoH"]):
        try:
            device_record.parse_record(bad)
        except device_record.RecordError:
            continue
        raise AssertionError(f"accepted {bad}")


def reader_pair():
    judge, child = socket.socketpair()
    key = device_record.JudgeReader.new_key()
    return device_record.JudgeReader(judge, key), child


@test
def reader_flush():
    """the reader returns the records up to the flush marker"""
    reader, child = reader_pair()
    line = ('{"key": "%s", "records": [["k", 1, 2, 7, "a", 0, null], '
            '["s", 3, 4, 7, null, 64, null], ["c", 5, 6, 7, null, 4, "DtoH"]]}\n'
            '{"key": "%s", "flushed": 1, "dropped": 0}\n') % (reader.key, reader.key)
    child.sendall(line.encode())
    records = reader.collect(5)
    assert records == [("k", 1, 2, 7, "a", 0, None), ("s", 3, 4, 7, None, 64, None),
                       ("c", 5, 6, 7, None, 4, "DtoH")], records
    assert reader.flushes == 1


@test
def reader_drains():
    """the judge drains the record while nobody collects: a child writing many records
    between two flushes never blocks (a level 3 model's calls fill CUPTI's buffers)"""
    reader, child = reader_pair()
    line = ('{"key": "%s", "records": [%s]}\n' % (
        reader.key, ", ".join(['["k", 1, 2, 7, "a_long_kernel_name_%d", 0, null]' % i
                               for i in range(2000)]))).encode()
    done = threading.Event()

    def write():
        for _ in range(100):  # about 9 MB, far beyond a socket's buffer
            child.sendall(line)
        child.sendall(('{"key": "%s", "flushed": 1, "dropped": 0}\n' % reader.key).encode())
        done.set()

    threading.Thread(target=write, daemon=True).start()
    assert done.wait(10), "the writer blocked: nobody drained the record"
    assert len(reader.collect(5)) == 200000


@test
def reader_forged():
    """a line without the library's key is refused (forged by Python code in the child)"""
    reader, child = reader_pair()
    child.sendall(b'{"key": "0000000000000000", "records": []}\n')
    try:
        reader.collect(5)
    except device_record.RecordError as error:
        assert "key" in str(error)
        return
    raise AssertionError("a forged line was accepted")


@test
def reader_closed():
    """a closed record descriptor is an error, not a hang"""
    reader, child = reader_pair()
    child.close()
    try:
        reader.collect(5)
    except device_record.RecordError as error:
        assert "closed" in str(error)
        return
    raise AssertionError("no error")


@test
def library_key():
    """libkagent-trace.so reads the judge's key before anything else, and refuses a second open"""
    path = os.environ.get("KAGENT_TRACE_LIBRARY")
    if not path or not os.path.exists(path):
        raise tap.Skip("libkagent-trace.so was not built")
    library = ctypes.CDLL(path)
    judge, child = socket.socketpair()
    cause = ctypes.create_string_buffer(512)
    result = []
    thread = threading.Thread(target=lambda: result.append(
        library.kagent_device_record_open(child.fileno(), cause, 512)))
    thread.start()
    thread.join(0.3)
    assert thread.is_alive(), "open returned before the key arrived"
    judge.sendall(os.urandom(8))
    thread.join(5)
    assert result == [0], (result, cause.value)
    assert library.kagent_device_record_open(child.fileno(), cause, 512) != 0
    assert b"already open" in cause.value
    # without a GPU, starting fails with CUPTI's reason instead of crashing
    if library.kagent_device_record_start(cause, 512) != 0:
        assert cause.value, "no reason given"


if __name__ == "__main__":
    sys.exit(tap.run())
