"""The timing lock of one device (docs/worker-protocol.md, "timing_lock"): evaluations on one
GPU run side by side (each in a worker of its own, as kagentd's evaluation lanes do), and this
keeps what they measure apart. The correctness trials hold the lock shared, the timed calls
hold it exclusive, so no other evaluation's trials or timing run on the device while one is
timed. A writer-preferring read-write lock from two flock(2) files: the gate, taken briefly by
readers and for the whole window by the writer, keeps a stream of trials from starving a timer.
The files are opened before the judge drops its privileges; the locks go with the process."""
import fcntl
import os
import time


def _open(path):
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


class TimingLock:
    """Opened on `path` (and `path`.gate); None as a path gives a lock that does nothing."""

    def __init__(self, path):
        self.files = None if not path else (_open(path + ".gate"), _open(path))
        self.held = None
        # seconds spent blocked in shared() and exclusive(): where a phase's time went
        self.waited = 0.0

    def shared(self):
        """For work on the device that is not timed (the trials)."""
        if self.files is None or self.held:
            return
        gate, main = self.files
        started = time.monotonic()
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(main, fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
            self.waited += time.monotonic() - started
        self.held = "shared"

    def exclusive(self):
        """For the timed calls: waits for the trials in flight, holds back new ones."""
        if self.files is None or self.held:
            return
        gate, main = self.files
        started = time.monotonic()
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(main, fcntl.LOCK_EX)
        self.waited += time.monotonic() - started
        self.held = "exclusive"

    def yield_to_timer(self):
        """Between two pieces of shared work (two trials): when a timer waits (the gate is
        held: a timer holds it from its wait to its window's end), let the lock go and queue
        behind it, so that a timer waits for one trial in flight, not for the rest of every
        trial phase in flight. Returns whether it yielded."""
        if self.files is None or self.held != "shared":
            return False
        gate, _ = self.files
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.release()
            self.shared()
            return True
        fcntl.flock(gate, fcntl.LOCK_UN)
        return False

    def release(self):
        if self.files is None or not self.held:
            return
        gate, main = self.files
        fcntl.flock(main, fcntl.LOCK_UN)
        fcntl.flock(gate, fcntl.LOCK_UN)
        self.held = None
