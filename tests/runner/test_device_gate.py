#!/usr/bin/env python3
"""The device gate of the candidate's first trial call (kagent_runner/device_gate.py): the
judge, waiting for the call's answer, grants the timing lock when the candidate asks, after an
evaluation being timed lets go, and before the answer arrives; libkagent-trace.so's rule of
which API calls put work on the device. No GPU, no torch. Prints TAP for meson."""
import ctypes
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner",
                                "kagent_runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import channel  # noqa: E402
import device_gate  # noqa: E402
import gpu_lock  # noqa: E402
from tap import Skip, test  # noqa: E402
import tap  # noqa: E402

FOLDER = tempfile.mkdtemp(prefix="kagent-device-gate-")
LIBRARY = os.environ.get("KAGENT_TRACE_LIBRARY")


def candidate(gate_end, channel_end, compile_seconds, log):
    """A candidate's first call: it compiles (sleeps), asks at its first device work, waits
    for the grant, then answers the judge."""
    time.sleep(compile_seconds)
    log.put(("asked", time.monotonic()))
    gate_end.sendall(b"L")
    assert gate_end.recv(1) == b"G"
    log.put(("granted", time.monotonic()))
    channel.Channel(channel_end, accept_pickles=False).send_json({"op": "result"})


def timer(lock_path, seconds, log):
    """Another evaluation's timed calls: the lock exclusive for `seconds`."""
    lock = gpu_lock.TimingLock(lock_path)
    lock.exclusive()
    log.put(("timed", time.monotonic()))
    time.sleep(seconds)
    log.put(("timer_done", time.monotonic()))
    lock.release()


def first_call(lock_path, compile_seconds, timer_seconds=None):
    """The judge's side of one gated call beside an optional timer; the events by name and the
    judge's lock and gate afterwards."""
    judge_gate, candidate_gate = socket.socketpair()
    judge_channel, candidate_channel = socket.socketpair()
    log = multiprocessing.Queue()
    lock = gpu_lock.TimingLock(lock_path)
    gate = device_gate.JudgeGate(judge_gate, lock)
    processes = [multiprocessing.Process(target=candidate, args=(
        candidate_gate, candidate_channel, compile_seconds, log))]
    if timer_seconds is not None:
        processes.append(multiprocessing.Process(target=timer,
                                                 args=(lock_path, timer_seconds, log)))
    for process in processes:
        process.start()
    reply = channel.Channel(judge_channel, accept_pickles=True).receive(10, gate.watch())
    log.put(("answered", time.monotonic()))
    held = lock.held
    lock.release()
    for process in processes:
        process.join(10)
    events = {}
    # every event by count (Queue.empty() may not yet see a put of this very process)
    for _ in range(3 + (2 if timer_seconds is not None else 0)):
        name, moment = log.get(timeout=10)
        events[name] = moment
    return reply, held, gate, events


@test
def the_lock_is_granted_at_the_first_device_work():
    reply, held, gate, events = first_call(os.path.join(FOLDER, "a.lock"), 0.3)
    assert reply == {"op": "result"}, reply
    assert held == "shared", held
    # the compile ran without the lock: the judge saw the ask after it
    assert gate.asked_after is not None and gate.asked_after >= 0.25, gate.asked_after
    assert events["asked"] <= events["granted"] <= events["answered"], events


@test
def a_timer_runs_during_the_compile_and_the_grant_waits_for_it():
    # the timer takes the lock while the candidate compiles (it would have waited for the
    # whole compile with the lock held through the call); the grant waits for its window
    reply, held, gate, events = first_call(os.path.join(FOLDER, "b.lock"), 0.3, 0.6)
    assert reply == {"op": "result"} and held == "shared", (reply, held)
    assert events["timed"] < events["asked"], events
    assert events["granted"] >= events["timer_done"], events


@test
def a_closed_gate_stops_being_watched():
    judge_gate, candidate_gate = socket.socketpair()
    judge_channel, candidate_channel = socket.socketpair()
    lock = gpu_lock.TimingLock(os.path.join(FOLDER, "c.lock"))
    gate = device_gate.JudgeGate(judge_gate, lock)
    candidate_gate.close()
    channel.Channel(candidate_channel, accept_pickles=False).send_json({"op": "result"})
    reply = channel.Channel(judge_channel, accept_pickles=True).receive(5, gate.watch())
    assert reply == {"op": "result"} and lock.held is None and gate.asked_after is None


def library():
    if not LIBRARY or not os.path.exists(LIBRARY):
        raise Skip("libkagent-trace.so was not built")
    loaded = ctypes.CDLL(LIBRARY)
    loaded.kagent_device_gate_is_device_work.argtypes = [ctypes.c_char_p]
    return loaded


@test
def device_work_is_launches_copies_and_sets():
    loaded = library()
    work = ["cudaLaunchKernel_v7000", "cudaLaunchKernelExC_v11060", "cudaMemcpyAsync_v3020",
            "cudaMemsetAsync_v3020", "cudaGraphLaunch_v10000", "cuLaunchKernel",
            "cuLaunchKernelEx", "cuMemcpyHtoDAsync_v2", "cuMemsetD32Async", "cuGraphLaunch"]
    other = ["cudaMalloc_v3020", "cudaFree_v3020", "cudaStreamSynchronize_v3020",
             "cudaGetDevice_v3020", "cuModuleLoadData", "cuCtxGetCurrent", "cuMemAlloc_v2",
             "cuFuncGetAttribute", "cuEventRecord", ""]
    assert [name for name in work if not loaded.kagent_device_gate_is_device_work(
        name.encode())] == []
    assert [name for name in other if loaded.kagent_device_gate_is_device_work(
        name.encode())] == []
    assert loaded.kagent_device_gate_is_device_work(None) == 0


@test
def the_child_gate_says_why_it_cannot_arm():
    missing = device_gate.ChildGate("/nonexistent/libkagent-trace.so", 0)
    assert "not built" in missing.arm() and not missing.armed
    if not LIBRARY or not os.path.exists(LIBRARY):
        raise Skip("libkagent-trace.so was not built")
    # a descriptor of -1 is refused before CUPTI is asked
    refused = device_gate.ChildGate(LIBRARY, -1)
    assert "no descriptor" in refused.arm() and not refused.armed


if __name__ == "__main__":
    try:
        status = tap.run()
    finally:
        shutil.rmtree(FOLDER, ignore_errors=True)
    sys.exit(status)
