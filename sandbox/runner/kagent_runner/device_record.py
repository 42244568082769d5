"""The device record of timed calls (docs/verdict.md, "The sealed boundary").

A timed child (the candidate, or the reference's eager and torch.compile arms) records every
kernel, memcpy and memset its process runs through libkagent-trace.so, opened before any
untrusted code exists, and the library writes the records to the judge over a descriptor of
their own, each line marked with a key the judge sent. The judge owns the clock: it notes
when each call started and ended (CLOCK_REALTIME, CUPTI's clock on Linux) and decides from
the records alone what each call cost on the device, and whether any device work ran outside
its calls. Pure functions below the reader, so the rules are tested on recorded data
(tests/runner/test_device_record.py).
"""
import bisect
import ctypes
import json
import os
import threading
import time

# Records within this much of a call's window belong to it: CUPTI converts the GPU's
# timestamps to the host clock, and the two drift by microseconds. A record is counted whole
# in the call it overlaps most, so the margin decides only what is called "outside".
WINDOW_MARGIN_NS = 200_000
# At most this many records of device work outside the calls are named in the verdict.
OUTSIDE_EXAMPLES = 3


class RecordError(Exception):
    """The record is missing, malformed or not the library's: the message says which."""


def now_ns():
    """The judge's clock, the one CUPTI stamps its records with on Linux."""
    return time.clock_gettime_ns(time.CLOCK_REALTIME)


# -- the child's side ------------------------------------------------------------------------
class ChildRecorder:
    """libkagent-trace.so's device record in a timed child. Opened before the candidate is
    imported, so the key the judge sent is read by the library, not by Python code."""

    def __init__(self, library_path, fd):
        self.library = None
        self.error = None
        if not library_path or not os.path.exists(library_path):
            self.error = "libkagent-trace.so was not built (no CUPTI in the CUDA toolkit)"
            return
        library = ctypes.CDLL(library_path)
        cause = ctypes.create_string_buffer(1024)
        if library.kagent_device_record_open(int(fd), cause, ctypes.sizeof(cause)) != 0:
            self.error = cause.value.decode(errors="replace")
            return
        self.library = library

    def _call(self, name):
        if self.library is None:
            return self.error
        cause = ctypes.create_string_buffer(1024)
        if getattr(self.library, name)(cause, ctypes.sizeof(cause)) != 0:
            return cause.value.decode(errors="replace")
        return None

    def start(self):
        """None, or why there is no record."""
        return self._call("kagent_device_record_start")

    def flush(self):
        return self._call("kagent_device_record_flush")

    def stop(self):
        return self._call("kagent_device_record_stop")


# -- the judge's side -----------------------------------------------------------------------
class JudgeReader:
    """Reads the library's lines from the judge's end of the record descriptor. A thread drains
    the socket all the time: the library writes from CUPTI's thread as buffers fill, and a
    socket nobody reads would stall that thread and with it the child's launches (a level 3
    model fills a buffer within a few calls)."""

    # what a child may send between two flushes before the judge stops listening to it
    LIMIT = 512 << 20

    def __init__(self, sock, key):
        self.sock = sock
        self.key = "%016x" % int.from_bytes(key, "little")
        self.buffer = bytearray()
        self.records = []
        self.flushes = 0
        self.dropped = 0
        self.ended = None  # why the drain stopped: closed, or over the limit
        self.ready = threading.Condition()
        threading.Thread(target=self._drain, daemon=True).start()

    @staticmethod
    def new_key():
        return os.urandom(8)

    def _drain(self):
        while True:
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError as error:
                chunk, reason = b"", f"the device record's descriptor failed: {error}"
            else:
                reason = "the device record's descriptor was closed"
            with self.ready:
                if not chunk:
                    self.ended = reason
                elif len(self.buffer) + len(chunk) > self.LIMIT:
                    self.ended = "the device record sent more than 512 MiB between flushes"
                else:
                    self.buffer += chunk
                self.ready.notify_all()
                if self.ended:
                    return

    def _lines(self, deadline):
        with self.ready:
            while b"\n" not in self.buffer:
                if self.ended:
                    raise RecordError(self.ended)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RecordError("the device record did not answer a flush in time")
                self.ready.wait(remaining)
            index = self.buffer.index(b"\n")
            line = bytes(self.buffer[:index])
            del self.buffer[:index + 1]
            return line

    def collect(self, timeout):
        """Reads until the next flush marker; returns the records that came with it."""
        deadline = time.monotonic() + timeout
        taken = []
        while True:
            try:
                message = json.loads(self._lines(deadline))
            except ValueError:
                raise RecordError("the device record sent a line that is not JSON") from None
            if not isinstance(message, dict) or message.get("key") != self.key:
                raise RecordError("a line on the device record's descriptor was not written "
                                  "by the library (wrong or missing key)")
            if "flushed" in message:
                self.flushes += 1
                self.dropped = int(message.get("dropped") or 0)
                return taken
            records = message.get("records")
            if not isinstance(records, list):
                raise RecordError("the device record sent a line without records")
            for record in records:
                taken.append(parse_record(record))


def parse_record(record):
    """(kind, start_ns, end_ns, stream, name, bytes, direction) from the library's list form,
    checked: a kernel has a name and 0 bytes, a memcpy its bytes and direction ("DtoH", ...),
    a memset its bytes."""
    if (not isinstance(record, list) or len(record) != 7 or record[0] not in ("k", "c", "s")
            or not all(isinstance(value, int) and not isinstance(value, bool)
                       for value in record[1:4] + record[5:6])
            or record[2] < record[1] or record[5] < 0
            or not all(value is None or isinstance(value, str) for value in record[4:7:2])):
        raise RecordError(f"malformed device record {str(record)[:120]}")
    return tuple(record)


def union_ns(intervals):
    """The length of the union of [start, end) intervals."""
    total = 0
    current_start = current_end = None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def assign(records, windows, margin=WINDOW_MARGIN_NS):
    """Splits records among the calls' windows [(start_ns, end_ns)]: each record goes to a
    window that holds it once widened by the margin (the clocks' skew), the one it overlaps
    most as measured (not widened): a short kernel at the very end of a call belongs to that
    call, not to the next call starting within the margin. Returns (per-window record
    lists, records outside every window)."""
    order = sorted(range(len(windows)), key=lambda index: windows[index][0])
    starts = [windows[index][0] for index in order]
    per_window = [[] for _ in windows]
    outside = []
    for record in records:
        start, end = record[1], record[2]
        position = bisect.bisect_right(starts, end + margin)
        best, best_overlap = None, -1
        for candidate in (position - 1, position - 2):
            if candidate < 0:
                continue
            index = order[candidate]
            low, high = windows[index][0] - margin, windows[index][1] + margin
            overlap = min(end, windows[index][1]) - max(start, windows[index][0])
            if start >= low and end <= high and (best is None or overlap > best_overlap):
                best, best_overlap = index, overlap
        if best is None:
            outside.append(record)
        else:
            per_window[best].append(record)
    return per_window, outside


def call_summary(records):
    """What one call ran: device milliseconds (the union of its records' intervals), kernel
    count, and kernel names in order of start."""
    kernels = sorted((record for record in records if record[0] == "k"), key=lambda r: r[1])
    return {"device_ms": union_ns((record[1], record[2]) for record in records) / 1e6,
            "kernels": len(kernels), "names": [record[4] for record in kernels]}


def describe_outside(record, windows):
    """One outside record for a person: what ran, how long, and where it fell."""
    kind = {"k": "kernel", "c": "memcpy", "s": "memset"}[record[0]]
    name = (f" {record[4][:80]}" if record[4] else "") if record[0] == "k" else \
        f" of {record[5]} bytes" + (f" {record[6]}" if record[6] else "")
    after = [window for window in windows if window[1] <= record[1]]
    where = ("before the first call" if not after else
             f"{(record[1] - max(window[1] for window in after)) / 1e3:.0f} us after a call ended")
    return f"{kind}{name} ({(record[2] - record[1]) / 1e3:.1f} us) {where}"


def analyse(records, windows, timed, discovery_kernels, margin=WINDOW_MARGIN_NS):
    """The boundary's verdict on one arm. windows: every call's (start_ns, end_ns) in the
    order they ran; timed: the indices of the timed calls among them; discovery_kernels: the
    kernel count of the discovery call (the last warm-up). Returns (device samples in ms for
    the timed calls, findings: what broke the boundary, details)."""
    per_window, outside = assign(records, windows, margin)
    findings = []
    if outside:
        examples = "; ".join(describe_outside(record, windows)
                             for record in outside[:OUTSIDE_EXAMPLES])
        findings.append(f"{len(outside)} device operation(s) ran outside the timed calls "
                        f"(between calls, at delivery, from a thread or at exit): {examples}")
    samples, mismatched, empty = [], [], 0
    for index in timed:
        summary = call_summary(per_window[index])
        samples.append(summary["device_ms"])
        if summary["kernels"] != discovery_kernels:
            mismatched.append(summary["kernels"])
        if not per_window[index]:
            empty += 1
    if mismatched:
        findings.append(f"the kernel sequence changed between calls: the discovery call ran "
                        f"{discovery_kernels} kernel(s), {len(mismatched)} timed call(s) ran "
                        f"another number (e.g. {mismatched[0]})")
    if timed and empty == len(timed):
        findings.append("no device work was recorded in any timed call: the record was "
                        "stopped, or the outputs were not computed on the device")
    details = {"records": len(records), "outside": len(outside),
               "discovery_kernels": discovery_kernels, "mismatched_calls": len(mismatched),
               "empty_calls": empty}
    return samples, findings, details
