"""The device gate of the candidate's first trial call (docs/worker-protocol.md, "The device
gate"). The judge holds the GPU's timing lock shared while the candidate's trials run on the
device, but the first call mostly compiles (Triton's JIT): holding the lock through it makes
every evaluation waiting to time its candidate wait for that compile too. So the first call
runs without the lock, and libkagent-trace.so, in the candidate's process, asks the judge for
it at the call's first device work, waiting until the judge holds it. A candidate that skips
the asking gains nothing: its work only loses the lock's protection from other evaluations'
timing, as work outside its calls always has."""
import ctypes
import os
import time


class ChildGate:
    """The candidate's side: the library's callback, armed for one call on the descriptor
    the worker gave this child."""

    def __init__(self, library_path, fd):
        self.library = None
        self.fd = fd
        self.armed = False
        if library_path and os.path.exists(library_path):
            self.library = ctypes.CDLL(library_path)

    def arm(self):
        """None, or why the gate could not be armed (the judge then keeps the lock)."""
        if self.library is None:
            return "libkagent-trace.so was not built (no CUPTI in the CUDA toolkit)"
        cause = ctypes.create_string_buffer(1024)
        if self.library.kagent_device_gate_arm(int(self.fd), cause, ctypes.sizeof(cause)) != 0:
            return cause.value.decode(errors="replace")
        self.armed = True
        return None

    def disarm(self):
        """After the call: later calls run while the judge holds the lock anyway. What the
        judge believes about the asking is only what it saw on its own descriptor."""
        if self.armed:
            self.armed = False
            self.library.kagent_device_gate_disarm()


class JudgeGate:
    """The judge's side: while it waits for the first call's answer it grants the lock the
    moment the candidate asks (Channel.receive's watch), and notes when that was."""

    def __init__(self, sock, timing_lock):
        self.sock = sock
        self.timing_lock = timing_lock
        self.used = False  # the judge's first trial call went through the gate (or tried)
        self.opened = None
        self.asked_after = None

    def watch(self):
        """The (descriptor, handler) pair for Channel.receive, from the call's start."""
        self.opened = time.monotonic()
        return (self.sock.fileno(), self.grant)

    def grant(self):
        try:
            request = self.sock.recv(64)
        except OSError:
            request = b""
        if not request:
            return False  # the candidate's end closed: nothing more to grant
        if self.asked_after is None:
            self.asked_after = time.monotonic() - self.opened
        self.timing_lock.shared()
        try:
            self.sock.sendall(b"G")
        except OSError:
            return False
        return True
