#!/usr/bin/env python3
"""kagentd's event streams end to end without a GPU (docs/daemon-api.md): the daemon of
tests/agent/daemon_cases.py (CPU device, scripted model, stand-in evaluator), its SSE routes
read over the Unix socket with raw sockets, and the command line's `kagent watch` on them.
Checks replay and follow against the trace file, Last-Event-ID and ?after resume, unknown ids,
clients that leave mid-stream or read nothing for a while, /v1/events, 1,000 concurrent
clients on one session with the daemon's memory measured, and `kagent watch`.
Prints TAP ending with a line `N passed, N failed`.
Run: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/agent/live_cases.py"""
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_cases  # noqa: E402 - the daemon harness lives beside this file
from daemon_cases import KAGENT, RELU, SECRET, Daemon, chat_reply, candidate  # noqa: E402
from tap_cases import run_cases  # noqa: E402 - the shared TAP runner, beside this file


def slow_script(delay_ms, content=""):
    """Turn 1 evaluates a 2x candidate (its reply carrying content), turn 2 finishes; each
    reply starts after delay_ms, so a session runs long enough to be watched live."""
    first = chat_reply([("evaluate", {"source": candidate({"speedup": 2.0})})], delay_ms=delay_ms)
    if content:
        first["sse"].insert(1, {"data": {"choices": [{"index": 0, "delta": {
            "content": content}}]}})
    return {"by_turn": [first, chat_reply([("finish", {"summary": "done"})], delay_ms=delay_ms)]}


def open_stream(daemon, path, headers=None):
    """A raw GET on the daemon's socket; the caller reads the response."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(daemon.socket)  # blocking: waits while the daemon's backlog is full
    connection.settimeout(60)
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    connection.sendall(f"GET {path} HTTP/1.1\r\nHost: kagentd\r\n{extra}\r\n".encode())
    return connection


class EventReader:
    """HTTP/1.1 head, chunked body, then SSE events, from bytes fed in any pieces."""

    def __init__(self):
        self.raw = b""
        self.status = None
        self.headers = {}
        self.body = b""
        self.text = ""
        self.events = []  # (id, event, data text)
        self.arrivals = []  # when each event was parsed (time.monotonic())
        self.finished = False  # the last chunk came

    def feed(self, data):
        self.raw += data
        if self.status is None:
            head, found, rest = self.raw.partition(b"\r\n\r\n")
            if not found:
                return
            lines = head.decode().split("\r\n")
            self.status = int(lines[0].split()[1])
            self.headers = {k.lower(): v.strip() for k, _, v in
                            (line.partition(":") for line in lines[1:])}
            self.raw = rest
        if self.headers.get("transfer-encoding") != "chunked":
            self.body += self.raw
            self.raw = b""
            return
        while True:
            size_line, found, rest = self.raw.partition(b"\r\n")
            if not found:
                return
            size = int(size_line, 16)
            if len(rest) < size + 2:
                return
            self.text += rest[:size].decode()
            self.raw = rest[size + 2:]
            self.parse()
            if size == 0:
                self.finished = True
                return

    def parse(self):
        while "\n\n" in self.text:
            block, _, self.text = self.text.partition("\n\n")
            fields = {}
            for line in block.split("\n"):
                if line.startswith(":"):
                    continue  # a comment: the stream's opening line
                name, _, value = line.partition(": ")
                fields[name] = value
            if not fields:
                continue
            self.events.append((fields.get("id"), fields.get("event"), fields.get("data")))
            self.arrivals.append(time.monotonic())

    def spread(self):
        """Seconds between the first event and the last."""
        return self.arrivals[-1] - self.arrivals[0] if self.arrivals else 0.0

    def json(self):
        return json.loads(self.body or b"null")


def read_stream(connection, timeout=60, limit=None, until=None, reader=None):
    """Reads a stream until its end, limit events, until(reader) holds, or timeout seconds;
    returns the EventReader (reader, to go on with one)."""
    reader = reader or EventReader()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        connection.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = connection.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        reader.feed(data)
        if reader.finished or (limit is not None and len(reader.events) >= limit) or \
                (until is not None and until(reader)):
            break
        if reader.status is not None and reader.status != 200 and \
                reader.headers.get("content-length") is not None and \
                len(reader.body) >= int(reader.headers["content-length"]):
            break
    return reader


def get_stream(daemon, path, headers=None, timeout=60):
    connection = open_stream(daemon, path, headers)
    try:
        return read_stream(connection, timeout=timeout)
    finally:
        connection.close()


def trace_lines(path):
    with open(path) as f:
        return [line[:-1] for line in f if line.endswith("\n")]


def session_of(daemon, batch):
    status, reply = daemon.request("GET", f"/v1/batches/{batch}")
    return reply["sessions"][0]


def check_records(events, lines, first_seq=1):
    """The record events are exactly the trace's lines from first_seq on, then one end."""
    problems = []
    records = [event for event in events if event[1] == "record"]
    expected = [line for line in lines if json.loads(line)["seq"] >= first_seq]
    if [data for _, _, data in records] != expected:
        problems.append(f"{len(records)} records, not the trace's {len(expected)} lines from "
                        f"seq {first_seq}: ids {[i for i, _, _ in records][:40]}")
    if any(event_id != str(json.loads(data)["seq"]) for event_id, _, data in records):
        problems.append("an event's id is not its record's seq")
    if not events or events[-1][1] != "end":
        problems.append(f"the stream did not end with an end event: {events[-1:]}")
    return problems


def sanitized():
    """Whether kagent was built with AddressSanitizer (build-asan/)."""
    with open(KAGENT, "rb") as f:
        return b"__asan_init" in f.read()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ---- scenarios: each returns a list of problems (empty: passed) ----

def replay_and_follow():
    """A stream opened while the session is queued follows it live to its end: every record of
    the trace as written, in order, ids = seq, then end {"state": "done"}; no API key; a
    /v1/events?batch= stream sees the session start and end and the batch end."""
    daemon = Daemon(slow_script(1000))
    try:
        daemon.start()
        status, created = daemon.post_batch([RELU])
        if status != 201:
            return [f"POST: {status} {created}"]
        batch = created["batch"]
        session = session_of(daemon, batch)
        state_stream = open_stream(daemon, f"/v1/events?batch={batch}")
        stream = open_stream(daemon, f"/v1/sessions/{session['id']}/events")
        reader = read_stream(stream)
        stream.close()
        problems = []
        if reader.spread() < 0.5:
            problems.append(f"the records came within {reader.spread():.2f} s: the stream did "
                            f"not follow a session whose model takes 1 s to answer")
        if reader.status != 200 or reader.headers.get("content-type") != "text/event-stream":
            problems.append(f"status {reader.status} {reader.headers}")
        session = session_of(daemon, batch)
        lines = trace_lines(session["trace_path"])
        problems += check_records(reader.events, lines)
        if reader.events and reader.events[-1][2] != '{"state":"done"}':
            problems.append(f"end: {reader.events[-1]}")
        if SECRET in reader.text or any(SECRET in (data or "") for _, _, data in
                                         reader.events):
            problems.append("the API key reached the stream")
        states = read_stream(state_stream, timeout=20, until=lambda reader: any(
            name == "batch" and json.loads(data)["state"] == "done"
            for _, name, data in reader.events))
        state_stream.close()
        sessions = [json.loads(data) for _, name, data in states.events if name == "session"]
        batches = [json.loads(data) for _, name, data in states.events if name == "batch"]
        if not sessions or sessions[0]["state"] not in ("queued", "running"):
            problems.append(f"/v1/events did not start with the session's state: "
                            f"{states.events[:3]}")
        if not any(s["state"] == "done" and s["best"] and s["best"]["variant"] == "v1" and
                   s["turns"] >= 1 and s["gpu"] == "cpu" for s in sessions):
            problems.append(f"/v1/events never showed the session done with its best: "
                            f"{sessions}")
        if not batches or batches[-1]["state"] != "done" or batches[-1]["counts"]["done"] != 1:
            problems.append(f"/v1/events batches: {batches}")
        if set(sessions[0]) != {"id", "batch", "problem", "state", "gpu", "best", "turns",
                                "cost"}:
            problems.append(f"a session event's fields: {sorted(sessions[0])}")
        return problems
    finally:
        daemon.close()


def resume_and_errors():
    """A finished session: Last-Event-ID and ?after resume after that seq (the header wins),
    past the last record only "end" comes; without its file, the store's copy is replayed; a
    bad seq is 400, unknown ids 404 (JSON)."""
    daemon = Daemon(slow_script(0))
    try:
        daemon.start()
        status, created = daemon.post_batch([RELU])
        batch = daemon.wait_batch(created["batch"])
        session = batch["sessions"][0]
        lines = trace_lines(session["trace_path"])
        path = f"/v1/sessions/{session['id']}/events"
        problems = []
        problems += check_records(get_stream(daemon, path).events, lines, 1)
        problems += check_records(get_stream(daemon, path, {"Last-Event-ID": "5"}).events,
                                  lines, 6)
        problems += check_records(get_stream(daemon, path + "?after=10").events, lines, 11)
        problems += check_records(
            get_stream(daemon, path + "?after=2", {"Last-Event-ID": "7"}).events, lines, 8)
        last = get_stream(daemon, path + f"?after={len(lines)}")
        if [name for _, name, _ in last.events] != ["end"]:
            problems.append(f"after the last record: {last.events}")
        for bad in ("?after=x", "?after=-1"):
            reader = get_stream(daemon, path + bad)
            if reader.status != 400 or "error" not in reader.json():
                problems.append(f"{bad}: {reader.status} {reader.body[:200]}")
        # The file gone from this machine (a session another daemon ran on a shared store):
        # the store's copy of the trace, which keeps every record but the stream ones.
        os.rename(session["trace_path"], session["trace_path"] + ".moved")
        reader = get_stream(daemon, path)
        expected = [json.loads(line) for line in lines if json.loads(line)["type"] != "stream"]
        got = [json.loads(data) for _, name, data in reader.events if name == "record"]
        if got != expected or reader.events[-1] != (None, "end", '{"state":"done"}'):
            problems.append(f"from the store's copy: {len(got)} records, expected "
                            f"{len(expected)}; last event {reader.events[-1:]}")
        for unknown in ("/v1/sessions/no-such-session/events", "/v1/events?batch=b-none"):
            reader = get_stream(daemon, unknown)
            if reader.status != 404 or "error" not in reader.json():
                problems.append(f"{unknown}: {reader.status} {reader.body[:200]}")
        return problems
    finally:
        daemon.close()


def queued_then_cancelled():
    """A stream opened on a queued session waits; when its batch is cancelled the stream ends
    with {"state": "cancelled"} and no record, and /v1/events shows the session and the batch
    cancelled."""
    daemon = Daemon(slow_script(3000), max_sessions=1)
    try:
        daemon.start()
        status, first = daemon.post_batch([RELU])
        status, second = daemon.post_batch([RELU])
        waiting_session = session_of(daemon, second["batch"])
        problems = []
        if waiting_session["state"] != "queued":
            problems.append(f"the second batch's session is {waiting_session['state']}")
        waiting = open_stream(daemon, f"/v1/sessions/{waiting_session['id']}/events")
        states = open_stream(daemon, f"/v1/events?batch={second['batch']}")
        early = read_stream(waiting, timeout=0.5)
        if early.status != 200 or early.events:
            problems.append(f"a queued session's stream: {early.status} {early.events}")
        status, _ = daemon.request("DELETE", f"/v1/batches/{second['batch']}")
        started = time.monotonic()
        reader = read_stream(waiting, timeout=10, reader=early)
        if [name for _, name, _ in reader.events] != ["end"] or \
                reader.events[0][2] != '{"state":"cancelled"}' or \
                time.monotonic() - started > 5:
            problems.append(f"after the cancel: {reader.events} "
                            f"({time.monotonic() - started:.1f} s)")
        seen = read_stream(states, timeout=10, until=lambda r: any(
            name == "batch" and json.loads(data)["state"] == "cancelled"
            for _, name, data in r.events))
        sessions = [json.loads(data) for _, name, data in seen.events if name == "session"]
        if not sessions or sessions[0]["state"] != "queued" or \
                sessions[-1]["state"] != "cancelled":
            problems.append(f"/v1/events?batch=: {seen.events}")
        waiting.close()
        states.close()
        return problems
    finally:
        daemon.close()


def clients_that_leave_or_stall():
    """Mid-stream, one client hangs up and another stops reading (the session writes over
    2 MiB: more than a stream's 1 MiB cap and the socket's buffer): the session is not
    slowed, the daemon does not crash, the stalled client later gets every record once, in
    order (resynced from the trace), and SIGTERM still exits 0 at once with a client open."""
    daemon = Daemon(slow_script(700, content="k" * 1_000_000))
    try:
        daemon.start()
        status, created = daemon.post_batch([RELU])
        session = session_of(daemon, created["batch"])
        path = f"/v1/sessions/{session['id']}/events"
        leaving = open_stream(daemon, path)
        stalled = open_stream(daemon, path)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        first = read_stream(leaving, limit=2)
        leaving.close()
        problems = []
        if len(first.events) < 2:
            problems.append(f"the leaving client got {first.events}")
        batch = daemon.wait_batch(created["batch"])
        lines = trace_lines(batch["sessions"][0]["trace_path"])
        size = sum(len(line) for line in lines)
        if size < 2_000_000:
            problems.append(f"the trace holds only {size} bytes: no overflow was tested")
        problems += check_records(read_stream(stalled).events, lines)
        stalled.close()
        # A client still open when the daemon stops: its stream ends, the daemon exits 0.
        waiting = open_stream(daemon, path + f"?after={len(lines)}")
        status, again = daemon.post_batch([RELU])
        queued = open_stream(daemon, f"/v1/sessions/{session_of(daemon, again['batch'])['id']}"
                                     f"/events")
        time.sleep(0.3)
        started = time.monotonic()
        code = daemon.stop(signal.SIGTERM)
        if code != 0 or time.monotonic() - started > 10:
            problems.append(f"SIGTERM with streams open: exit {code}: {daemon.log()}")
        waiting.close()
        queued.close()
        return problems
    finally:
        daemon.close()


def thousand_clients():
    """1,000 clients on one running session: each gets every record and the end, and the
    daemon's resident memory grows by less than 100 MiB while they are connected (not held
    under AddressSanitizer, whose shadow memory and quarantine are not the daemon's)."""
    count = 1000
    daemon = Daemon(slow_script(8000))
    try:
        daemon.start()
        status, created = daemon.post_batch([RELU])
        session = session_of(daemon, created["batch"])
        path = f"/v1/sessions/{session['id']}/events"
        before = rss_kib(daemon.process.pid)
        selector = selectors.DefaultSelector()
        readers = {}
        for _ in range(count):
            connection = open_stream(daemon, path)
            connection.setblocking(False)
            readers[connection] = EventReader()
            selector.register(connection, selectors.EVENT_READ)
        peak = rss_kib(daemon.process.pid)
        problems = []
        state = daemon.request("GET", f"/v1/sessions/{session['id']}")[1]["state"]
        if state != "running":
            problems.append(f"the session was {state} once the clients had connected: they "
                            f"replayed it rather than follow it live")
        open_connections = count
        deadline = time.monotonic() + 120
        while open_connections and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1):
                connection = key.fileobj
                try:
                    data = connection.recv(65536)
                except BlockingIOError:
                    continue
                if data:
                    readers[connection].feed(data)
                if not data or readers[connection].finished:
                    selector.unregister(connection)
                    connection.close()
                    open_connections -= 1
            peak = max(peak, rss_kib(daemon.process.pid))
        if open_connections:
            problems.append(f"{open_connections} clients did not see the end")
        batch = daemon.wait_batch(created["batch"])
        lines = trace_lines(batch["sessions"][0]["trace_path"])
        wrong = [reader for reader in readers.values()
                 if check_records(reader.events, lines)]
        if wrong:
            problems.append(f"{len(wrong)} clients got the wrong records: "
                            f"{check_records(wrong[0].events, lines)}")
        growth = (peak - before) / 1024
        print(f"# 1,000 clients: daemon RSS {before / 1024:.1f} MiB before, "
              f"{peak / 1024:.1f} MiB at the peak (+{growth:.1f} MiB)")
        if growth > 100 and not sanitized():
            problems.append(f"the daemon grew by {growth:.1f} MiB with {count} clients")
        if daemon.request("GET", "/v1/health")[0] != 200:
            problems.append("the daemon does not answer after the clients left")
        return problems
    finally:
        daemon.close()


def watch_command(daemon, *arguments):
    environment = dict(daemon.environment, KAGENT_SOCKET=daemon.socket)
    return subprocess.Popen([KAGENT, "watch", *arguments], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kagent_watch():
    """`kagent watch SESSION` attached to a running session prints what `kagent trace` prints
    of its trace, and exits 0 when it ends; `kagent watch BATCH` ends with the batch's line;
    Ctrl-C detaches (exit 0) and the session goes on; an unknown id exits 1."""
    daemon = Daemon(slow_script(1500))
    try:
        daemon.start()
        status, created = daemon.post_batch([RELU, daemon_cases.SOFTMAX])
        batch = created["batch"]
        session = session_of(daemon, batch)
        deadline = time.monotonic() + 30
        while session["state"] != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
            session = session_of(daemon, batch)
        watching = watch_command(daemon, session["id"])
        watching_batch = watch_command(daemon, batch)
        problems = []
        time.sleep(0.3)
        if session_of(daemon, batch)["state"] != "running":
            problems.append("the session ended before kagent watch was attached")
        out, err = watching.communicate(timeout=60)
        session = session_of(daemon, batch)
        rendered = subprocess.run([KAGENT, "trace", session["trace_path"]],
                                  capture_output=True, text=True).stdout
        if watching.returncode != 0 or out != rendered:
            problems.append(f"watch SESSION: exit {watching.returncode}, its lines and trace's "
                            f"differ:\n{out}\n--- trace:\n{rendered}\n{err}")
        if f"session {session['id']} ended: done" not in err:
            problems.append(f"watch SESSION's stderr: {err}")
        out, err = watching_batch.communicate(timeout=60)
        lines = out.splitlines()
        if watching_batch.returncode != 0 or not lines or \
                not lines[-1].startswith(f"batch {batch} done: 0 queued, 0 running, 2 done"):
            problems.append(f"watch BATCH: exit {watching_batch.returncode}:\n{out}\n{err}")
        if not any(line.startswith(session["id"]) and " done " in line and "best v1 2.00x"
                   in line for line in lines):
            problems.append(f"watch BATCH lacks the session's line, done:\n{out}")
        # Ctrl-C: detached, exit 0, the session not stopped.
        status, again = daemon.post_batch([RELU])
        other = session_of(daemon, again["batch"])
        detaching = watch_command(daemon, other["id"])
        time.sleep(1)
        detaching.send_signal(signal.SIGINT)
        out, err = detaching.communicate(timeout=10)
        if detaching.returncode != 0 or "detached" not in err:
            problems.append(f"Ctrl-C: exit {detaching.returncode}: {err}")
        if daemon.wait_batch(again["batch"])["sessions"][0]["state"] != "done":
            problems.append("the session did not finish after kagent watch detached")
        unknown = watch_command(daemon, "no-such-session")
        out, err = unknown.communicate(timeout=10)
        if unknown.returncode != 1 or "no session" not in err:
            problems.append(f"an unknown id: exit {unknown.returncode}: {err}")
        return problems
    finally:
        daemon.close()


CASES = [
    ("a session's stream replays and follows its trace to the end; /v1/events follows it",
     replay_and_follow),
    ("Last-Event-ID and ?after resume; the store's copy without the file; 400; 404s",
     resume_and_errors),
    ("a queued session's stream waits, then ends as cancelled; /v1/events shows the cancel",
     queued_then_cancelled),
    ("a client that hangs up, one that stalls past the cap (resynced), SIGTERM with streams",
     clients_that_leave_or_stall),
    ("1,000 concurrent clients on one session: all records to each, memory bounded",
     thousand_clients),
    ("kagent watch: a running session as trace shows it, a batch, Ctrl-C detaches",
     kagent_watch),
]


def main():
    # 1,000 clients need as many descriptors here (the daemon raises its own limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > 4096:
        hard = max(soft, 4096)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, hard), hard))
    return run_cases(CASES)


if __name__ == "__main__":
    sys.exit(main())
