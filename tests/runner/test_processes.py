#!/usr/bin/env python3
"""What the runner reads from /proc (kagent_runner/processes.py), on processes of our own: a
process's descendants and children, a uid's live processes, a process group that still runs,
threads; and the compile child's end
of torch.compile's workers (candidate._stop_compile_workers) killing every process below it
at once. Prints TAP."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
from tap import test  # noqa: E402

from kagent_runner import processes  # noqa: E402


def alive(pid):
    fields = processes._stat_fields(pid)
    return fields is not None and fields[0] != "Z"


@test
def descendants_are_children_and_their_children():
    child = subprocess.Popen([sys.executable, "-c",
                              "import subprocess, sys, time\n"
                              "p = subprocess.Popen(['sleep', '30'])\n"
                              "print(p.pid, flush=True)\n"
                              "time.sleep(30)\n"], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        found = processes.descendants(os.getpid())
        assert child.pid in found and grandchild in found, (found, child.pid, grandchild)
        assert processes.descendants(grandchild) == []
        assert os.getpid() not in found
    finally:
        os.kill(grandchild, signal.SIGKILL)
        child.kill()
        child.wait()


def zombie():
    """A child of ours that has ended and is not yet reaped."""
    ended = subprocess.Popen(["true"])
    for _ in range(100):
        if not alive(ended.pid):
            break
        time.sleep(0.01)
    return ended


@test
def children_are_direct_children_zombies_included():
    # what the worker's reaping spares (the kept judge): its own children, by parent pid
    child = subprocess.Popen([sys.executable, "-c",
                              "import subprocess, sys\n"
                              "p = subprocess.Popen(['sleep', '30'])\n"
                              "print(p.pid, flush=True)\n"
                              "sys.stdin.read()\n"
                              "p.kill()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    grandchild = int(child.stdout.readline())
    quick = zombie()
    try:
        found = processes.children(os.getpid())
        assert child.pid in found and quick.pid in found, found
        assert grandchild not in found and os.getpid() not in found, found
    finally:
        quick.wait()
        child.stdin.close()
        child.wait(10)


@test
def a_users_processes_are_the_live_ones_of_that_uid():
    # what the worker's sweep of a sandbox uid ends, one by one: live processes of the uid
    sleeper = subprocess.Popen(["sleep", "30"])
    ended = zombie()
    try:
        found = processes.user_processes(os.getuid())
        assert os.getpid() in found and sleeper.pid in found, found
        assert ended.pid not in found, "a zombie is no live process"
        assert sleeper.pid not in processes.user_processes(os.getuid() + 12345)
    finally:
        sleeper.kill()
        sleeper.wait()
        ended.wait()


@test
def a_group_runs_until_its_last_process_ends():
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    assert processes.group_running(child.pid)
    child.kill()
    child.wait()
    assert not processes.group_running(child.pid)


@test
def threads_are_counted():
    status = processes.process_status(os.getpid())
    assert status["threads"] is not None and status["threads"] >= 1, status
    assert processes.process_status(2 ** 22 + 7) == {"threads": None, "seccomp_filters": None}


@test
def the_compile_child_kills_every_process_below_it():
    from kagent_runner import candidate

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        pool = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
        started = time.monotonic()
        candidate._stop_compile_workers()
        for process in pool:
            process.wait()
        seconds = time.monotonic() - started
        os.write(write, f"{' '.join(str(p.pid) for p in pool)} {seconds:.2f}".encode())
        os._exit(0)
    os.close(write)
    answer = os.read(read, 256).decode().split()
    os.waitpid(pid, 0)
    pids, seconds = [int(p) for p in answer[:-1]], float(answer[-1])
    assert len(pids) == 3 and not any(alive(p) for p in pids), answer
    assert seconds < 10, seconds  # killed, not waited for to end by themselves (30 s)


if __name__ == "__main__":
    sys.exit(tap.run())
