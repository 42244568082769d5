#!/usr/bin/env python3
"""The processes the worker keeps and its hand-over of an evaluation to them (kagent_runner/
handover.py), and the rules of the prepared candidate process (kagent_runner/prepared.py)
that need no sandbox: which evaluations it serves, which candidates are new, where its
folders go and which abandoned folders are removed. The prepared process itself, sandboxed,
is tested end to end in tests/cpu/eval_cases.py. Prints TAP."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
from tap import test  # noqa: E402

from kagent_runner import handover, prepared  # noqa: E402

REQUEST = {"device": "cuda", "device_ordinal": 0, "sandbox_uid": 2147400001,
           "limits": {"wall_seconds": 300, "max_processes": 256},
           "sandbox_library": "/lib/libkagent-sandbox.so", "trace_library": "/lib/t.so",
           "cuda_library": "/lib/c.so", "judge_cache_directory": "/var/tmp/k/judge-gpu1",
           "cache_directory": "/nonexistent/candidates/abc", "scratch_directory": "/j/scratch"}


@test
def a_message_arrives_with_its_descriptors_by_name():
    worker, kept = socket.socketpair()
    read_end, write_end = os.pipe()
    other, _ = socket.socketpair()
    try:
        handover.send(worker, {"request": {"id": "x" * 100000}}, {"pipe": write_end,
                                                                    "sock": other})
        message, fds = handover.receive(kept)
        assert message["request"]["id"] == "x" * 100000 and message["fds"] == ["pipe", "sock"]
        assert sorted(fds) == ["pipe", "sock"], fds
        os.write(fds["pipe"], b"through the passed descriptor")
        assert os.read(read_end, 100) == b"through the passed descriptor"
        for fd in fds.values():
            os.close(fd)
    finally:
        for item in (worker, kept, other):
            item.close()
        os.close(read_end)
        os.close(write_end)


@test
def a_receiver_that_closes_once_it_has_read_everything_is_no_error():
    """The prepared process closes its end as soon as it has the evaluation: a sender that
    then still wrote (even nothing) failed with EPIPE and ended a process that had taken it."""
    worker, kept = socket.socketpair()
    real = socket.send_fds

    def send_then_receiver_closes(sock, buffers, fds):
        sent = real(sock, buffers, fds)
        message, received = handover.receive(kept)
        for fd in received.values():
            os.close(fd)
        kept.close()
        assert message == {"request": {"id": 1}, "fds": ["pipe"]}, message
        return sent

    read_end, write_end = os.pipe()
    socket.send_fds = send_then_receiver_closes
    try:
        handover.send(worker, {"request": {"id": 1}}, {"pipe": write_end})
    finally:
        socket.send_fds = real
        worker.close()
        os.close(read_end)
        os.close(write_end)


@test
def a_closed_or_cut_short_connection_is_no_message():
    worker, kept = socket.socketpair()
    worker.close()
    assert handover.receive(kept) == (None, {})
    kept.close()
    worker, kept = socket.socketpair()
    worker.sendall((1000).to_bytes(8, "big") + b"{\"partial")
    worker.close()
    assert handover.receive(kept) == (None, {})
    kept.close()


@test
def a_kept_process_ends_with_its_group_and_is_reaped_once():
    worker, kept = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.fork()  # a process of its group, ended with it
        time.sleep(60)
        os._exit(0)
    process = handover.KeptProcess(pid, worker)
    try:
        time.sleep(0.1)
        assert process.alive()
        process.end()
        assert not process.alive() and os.WIFSIGNALED(process.status), process.status
        assert worker.fileno() == -1
        process.end()  # again: nothing left to end, no error
    finally:
        kept.close()


@test
def a_prepared_process_serves_only_evaluations_like_the_one_it_was_made_for():
    same = dict(REQUEST, id="other", candidate_path="/x.py", scratch_directory="/k/scratch",
                cache_directory="/k/cache", seeds=[1, 2])
    assert prepared.key(same) == prepared.key(REQUEST)
    for change in ({"device_ordinal": 1}, {"sandbox_uid": 2147400257},
                   {"limits": {"wall_seconds": 300, "max_processes": 64}},
                   {"sandbox_library": "/other.so"}, {"trace_library": None},
                   {"cuda_library": "/other/c.so"}, {"device": "cpu"}):
        assert prepared.key(dict(REQUEST, **change)) != prepared.key(REQUEST), change


@test
def only_a_candidate_without_a_cache_is_new():
    folder = tempfile.mkdtemp()
    try:
        cache = os.path.join(folder, "candidates", "abc")
        assert prepared.new_candidate(dict(REQUEST, cache_directory=cache))
        os.makedirs(cache)
        assert prepared.new_candidate(dict(REQUEST, cache_directory=cache))
        os.makedirs(os.path.join(cache, "triton"))
        assert not prepared.new_candidate(dict(REQUEST, cache_directory=cache))
    finally:
        shutil.rmtree(folder)


@test
def the_folders_go_beside_the_uids_caches_and_none_without_them():
    assert prepared.folder_for(REQUEST) == "/var/tmp/k/prepared-uid2147400001"
    assert prepared.folder_for(dict(REQUEST, judge_cache_directory=None)) is None


@test
def the_folders_of_a_gone_worker_are_removed_and_a_live_ones_kept():
    base = tempfile.mkdtemp()
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        live = os.path.join(base, f"{os.getpid()}-1")
        dead = os.path.join(base, f"{gone.pid}-2")
        other = os.path.join(base, "not-a-worker")
        for path in (live, dead, other):
            os.makedirs(os.path.join(path, "scratch"))
        prepared._remove_abandoned(base)
        assert sorted(os.listdir(base)) == sorted([os.path.basename(live), "not-a-worker"])
    finally:
        shutil.rmtree(base)


sys.exit(tap.run())
