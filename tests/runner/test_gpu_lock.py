#!/usr/bin/env python3
"""The device's timing lock (kagent_runner/gpu_lock.py) across processes, as judges of several
workers hold it: trials share it, timed calls exclude everything, and a waiting timer holds
back new trials. Pure Python, no torch. Prints TAP for meson."""
import multiprocessing
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner",
                                "kagent_runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_lock  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402

FOLDER = tempfile.mkdtemp(prefix="kagent-gpu-lock-")


def path(name):
    return os.path.join(FOLDER, name)


def hold(lock_path, mode, seconds, log, start_after=0.0):
    """In a child: wait start_after, take the lock in mode, log when held and let go."""
    time.sleep(start_after)
    lock = gpu_lock.TimingLock(lock_path)
    getattr(lock, mode)()
    log.put((mode, "in", time.monotonic()))
    time.sleep(seconds)
    log.put((mode, "out", time.monotonic()))
    lock.release()


def run(lock_path, plan):
    """plan: (mode, seconds, start_after) per child; returns the log sorted by time."""
    return run_children([(hold, (lock_path, mode, seconds, after)) for mode, seconds, after in
                         plan])


def run_children(plan):
    """plan: (target, args) per child, each called as target(*args[:-1], log, args[-1])
    (the log before the last argument, the start delay); returns the log sorted by time."""
    log = multiprocessing.Queue()
    children = [multiprocessing.Process(target=target, args=(*args[:-1], log, args[-1]))
                for target, args in plan]
    for child in children:
        child.start()
    for child in children:
        child.join(30)
    events = []
    while not log.empty():
        events.append(log.get())
    return sorted(events, key=lambda event: event[2])


def overlaps(events):
    """The most holders at once, by mode: {mode: max}, and whether exclusive ever shared."""
    inside, most, shared_with_exclusive = {}, {}, False
    for mode, edge, _ in events:
        inside[mode] = inside.get(mode, 0) + (1 if edge == "in" else -1)
        most[mode] = max(most.get(mode, 0), inside[mode])
        if inside.get("exclusive", 0) > 0 and (inside.get("shared", 0) > 0 or
                                               inside["exclusive"] > 1):
            shared_with_exclusive = True
    return most, shared_with_exclusive


@test
def trials_share_the_device():
    most, mixed = overlaps(run(path("a.lock"), [("shared", 0.5, 0)] * 3))
    assert most["shared"] == 3 and not mixed, (most, mixed)


@test
def timed_calls_exclude_everything():
    plan = [("exclusive", 0.3, 0), ("exclusive", 0.3, 0), ("shared", 0.3, 0.05),
            ("shared", 0.3, 0.1), ("exclusive", 0.3, 0.15)]
    events = run(path("b.lock"), plan)
    most, mixed = overlaps(events)
    assert len(events) == 10 and not mixed, events


@test
def the_lock_counts_the_time_spent_waiting_for_it():
    # a timer holds the device for 0.4 s; a trial asking meanwhile waits about that long, and
    # the trial's lock says so (phase_seconds.trials_lock_wait); a free lock adds nothing
    log = multiprocessing.Queue()
    timer = multiprocessing.Process(target=hold, args=(path("w.lock"), "exclusive", 0.4, log))
    timer.start()
    assert log.get(timeout=10)[:2] == ("exclusive", "in")
    lock = gpu_lock.TimingLock(path("w.lock"))
    lock.shared()
    timer.join(10)
    assert 0.2 < lock.waited < 5, lock.waited
    waited = lock.waited
    lock.release()
    lock.shared()
    assert lock.waited - waited < 0.1, lock.waited
    lock.release()


@test
def a_waiting_timer_holds_back_new_trials():
    # a trial holds the lock; a timer waits for it; a later trial must wait for the timer
    events = run(path("c.lock"), [("shared", 0.6, 0), ("exclusive", 0.2, 0.15),
                                  ("shared", 0.1, 0.3)])
    order = [(mode, edge) for mode, edge, _ in events]
    assert order.index(("exclusive", "in")) < order.index(("shared", "in"), 1), order


def trials_yielding(lock_path, trials, seconds, log, start_after=0.0):
    """In a child: `trials` pieces of shared work of `seconds` each, yielding between them."""
    time.sleep(start_after)
    lock = gpu_lock.TimingLock(lock_path)
    lock.shared()
    for index in range(trials):
        if index and lock.yield_to_timer():
            log.put(("shared", "yielded", time.monotonic()))
        log.put(("shared", "in", time.monotonic()))
        time.sleep(seconds)
        log.put(("shared", "out", time.monotonic()))
    lock.release()


@test
def a_timer_waits_for_one_trial_of_a_yielding_phase():
    # a phase of five 0.2 s trials holds the lock; a timer asks during the first: it times
    # after that trial, not after all five, and the trials go on after its window
    events = run_children([(trials_yielding, (path("e.lock"), 5, 0.2, 0.0)),
                           (hold, (path("e.lock"), "exclusive", 0.2, 0.1))])
    order = [(mode, edge) for mode, edge, _ in events]
    timer_in = order.index(("exclusive", "in"))
    assert order[:timer_in].count(("shared", "out")) == 1, order
    assert ("shared", "yielded") in order and order.count(("shared", "out")) == 5, order
    assert not overlaps([event for event in events if event[1] != "yielded"])[1], order


@test
def no_path_is_no_lock():
    lock = gpu_lock.TimingLock(None)
    lock.exclusive()
    lock.release()
    lock.shared()
    lock.release()
    assert lock.files is None


if __name__ == "__main__":
    status = tap.run()
    shutil.rmtree(FOLDER, ignore_errors=True)
    sys.exit(status)
