#!/usr/bin/env python3
"""kagentd end to end without a GPU: `kagent daemon --device cpu` on a private socket and
store, driven over its Unix socket (and TCP with a token) with http.client, its sessions
talking to the scripted model server in its stateless by_turn mode (tests/fixtures/
llm_server.py: every conversation gets the reply for its turn) and evaluated by the stand-in
evaluator (the fake worker in scripted mode, which checks a problem's syntax and judges a
candidate by its `# fake-judge:` line), as tests/agent/optimize_cases.py does.
Checks a batch with a broken problem, bad input, the token on TCP, kill -9 then restart
(every problem ends once), SIGTERM (exit 0, nothing left behind), and the reward service's
evaluation lanes (POST /v1/evaluations; tests/agent/reward_cases.py judges real candidates).
Prints TAP ending with a line `N passed, N failed`.
Run: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/agent/daemon_cases.py"""
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

from tap_cases import run_cases

KAGENT = os.path.abspath(os.environ["KAGENT"])
SOURCE = os.path.abspath(os.environ["KAGENT_SOURCE_DIR"])
sys.path.insert(0, os.path.join(SOURCE, "tests", "fixtures"))
import daemon_process  # noqa: E402 - starting kagentd, shared with bench/daemon_load.py
from scripted_replies import chat_reply  # noqa: E402 - the scripted model's replies
PROBLEMS = os.path.join(SOURCE, "tests", "fixtures", "problems")
RELU = os.path.join(PROBLEMS, "relu.py")
SOFTMAX = os.path.join(PROBLEMS, "softmax_wide.py")
SCALE = os.path.join(PROBLEMS, "scale_rows.py")
BROKEN = os.path.join(PROBLEMS, "syntax_error.py")
SECRET = "sk-kagent-test-secret-0123456789"
TOKEN = "kagentd-test-token-0123456789abcdef"


def candidate(judge):
    return (f"# fake-judge: {json.dumps(judge)}\nimport torch\n\n\n"
            f"class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            f"        return torch.relu(x)\n")


def script(delay_ms=0, evaluation_seconds=0):
    """Turn 1 evaluates a 2x candidate, turn 2 finishes (stateless: any number of sessions)."""
    judge = {"speedup": 2.0}
    if evaluation_seconds:
        judge["delay_seconds"] = evaluation_seconds
    return {"by_turn": [
        chat_reply([("evaluate", {"source": candidate(judge)})], delay_ms=delay_ms),
        chat_reply([("finish", {"summary": "done"})], delay_ms=delay_ms)]}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Daemon:
    """A scratch folder, the scripted model server and one kagent daemon (restartable)."""

    def __init__(self, model_script, max_sessions=2):
        self.folder = tempfile.mkdtemp(prefix="kagent-daemon-")
        self.socket = os.path.join(self.folder, "kagentd.sock")
        self.database = os.path.join(self.folder, "state", "kagent.db")
        self.worker_log = os.path.join(self.folder, "worker.jsonl")
        self.max_sessions = max_sessions
        self.process = None
        self.log_file = None
        self.runs = 0
        with open(os.path.join(self.folder, "script.json"), "w") as f:
            json.dump(model_script, f)
        self.server, port = daemon_process.start_model_server(
            os.path.join(self.folder, "script.json"), os.path.join(self.folder, "server.jsonl"))
        self.config = os.path.join(self.folder, "kagent.yaml")
        daemon_process.write_config(self.config, port, f"{self.folder}/runs")
        self.environment = daemon_process.environment(
            self.folder, FAKE_WORKER_LOG=self.worker_log, OPENAI_API_KEY=SECRET)

    def command(self, *extra):
        return daemon_process.daemon_command(KAGENT, self.socket, f"sqlite:{self.database}",
                                             self.config, self.max_sessions, *extra)

    def start(self, *extra):
        self.runs += 1
        self.log_path = os.path.join(self.folder, f"daemon-{self.runs}.log")
        self.log_file = open(self.log_path, "w")
        try:
            self.process = daemon_process.start_daemon(self.command(*extra), self.folder,
                                                       self.environment, self.log_file)
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {self.log()}") from None
        return self

    def log(self):
        with open(self.log_path) as f:
            return f.read()[-3000:]

    def request(self, method, path, body=None, raw=None):
        return daemon_process.request(self.socket, method, path, body, raw)

    def post_batch(self, problems, **settings):
        body = {"problems": problems, "settings": {"max_turns": 2, **settings}}
        return self.request("POST", "/v1/batches", body)

    def wait_batch(self, batch, timeout=90, until=("done", "cancelled")):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, reply = self.request("GET", f"/v1/batches/{batch}")
            if status == 200 and reply["state"] in until:
                return reply
            time.sleep(0.2)
        raise RuntimeError(f"batch {batch} did not end: {reply}\n{self.log()}")

    def wait_running(self, batch, count=1, timeout=60):
        """Until count sessions run and the model has been asked at least once per session."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, reply = self.request("GET", f"/v1/batches/{batch}")
            running = [s for s in reply.get("sessions", []) if s["state"] == "running" and
                       s.get("trace_path")]
            if len(running) >= count and self.model_requests() >= count:
                return running
            time.sleep(0.1)
        raise RuntimeError(f"no session of {batch} ran: {reply}\n{self.log()}")

    def model_requests(self):
        path = os.path.join(self.folder, "server.jsonl")
        if not os.path.exists(path):
            return 0
        with open(path) as f:
            return sum(1 for _ in f)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        return daemon_process.stop_daemon(self.process, sig, timeout)

    def store_rows(self):
        connection = sqlite3.connect(self.database)
        try:
            return connection.execute("SELECT id, state, attempts, result IS NOT NULL"
                                      " FROM sessions ORDER BY position").fetchall()
        finally:
            connection.close()

    def stored_trace_seqs(self, session_id):
        connection = sqlite3.connect(self.database)
        try:
            return [row[0] for row in connection.execute(
                "SELECT seq FROM trace_records WHERE session_id = ? ORDER BY seq",
                (session_id,))]
        finally:
            connection.close()

    def close(self):
        self.stop(signal.SIGKILL, timeout=10)
        if self.log_file:
            self.log_file.close()
        daemon_process.stop_model_server(self.server)
        if not os.environ.get("KAGENT_TEST_KEEP"):  # keep the folder to debug a failure
            shutil.rmtree(self.folder, ignore_errors=True)


def leftovers(daemon, timeout=5):
    """Processes still carrying the daemon's FAKE_WORKER_LOG (the daemon, its workers), after
    waiting up to timeout seconds for them to go."""
    marker = f"FAKE_WORKER_LOG={daemon.worker_log}".encode()
    deadline = time.monotonic() + timeout
    while True:
        processes = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        with open(f"/proc/{pid}/cmdline", "rb") as f:
                            command = f.read().replace(b"\0", b" ").decode()
                        processes.append(f"{pid}: {command}")
            except OSError:
                pass
        if not processes or time.monotonic() > deadline:
            return [f"left behind: {entry}" for entry in processes]
        time.sleep(0.1)


def trace_records(path, record_type):
    with open(path) as f:
        return [record for record in (json.loads(line) for line in f if line.endswith("\n"))
                if record["type"] == record_type]


# ---- scenarios: each returns a list of problems (empty: passed) ----

def batch_with_broken_problem():
    """Health, then a batch of three (one that does not parse): the broken one fails with its
    reason, the others finish, the report has a row each, and the API shows them."""
    daemon = Daemon(script()).start()
    try:
        problems = []
        status, health = daemon.request("GET", "/v1/health")
        if status != 200 or health.get("status") != "ok" or health.get("device") != "cpu" \
                or health.get("max_sessions") != 2 or health.get("gpus") != []:
            problems.append(f"health: {status} {health}")
        status, created = daemon.post_batch([RELU, BROKEN, SOFTMAX], target=1.5)
        if status != 201 or created.get("sessions") != 3:
            return problems + [f"POST /v1/batches: {status} {created}"]
        # Health answers from the loop with the queued count it read last, but reads it again
        # after a batch was queued here: with two slots, one of the three is still queued.
        status, health = daemon.request("GET", "/v1/health")
        if status != 200 or not 1 <= health.get("sessions_queued", 0) <= 3:
            problems.append(f"health right after the POST: {status} {health}")
        batch = daemon.wait_batch(created["batch"])
        deadline = time.monotonic() + 10
        while daemon.request("GET", "/v1/health")[1].get("sessions_queued") != 0:
            if time.monotonic() > deadline:
                problems.append("health still counts queued sessions of a finished batch")
                break
            time.sleep(0.2)
        states = {s["problem"]: s for s in batch["sessions"]}
        broken = states.get("syntax_error", {})
        reason = (broken.get("result") or {}).get("stop_reason")
        detail = (broken.get("result") or {}).get("stop_detail", "")
        if broken.get("state") != "failed" or reason != "bad_problem" or not detail:
            problems.append(f"the broken problem: {broken}")
        for name in ("relu", "softmax_wide"):
            session = states.get(name, {})
            if session.get("state") != "done" or session.get("attempt") != 1:
                problems.append(f"{name}: {session}\n{daemon.log()}")
            elif session.get("best_speedup") is None:
                problems.append(f"{name} has no best_speedup: {session.get('result')}")
        if batch["state"] != "done":
            problems.append(f"batch state {batch['state']}")
        # The store holds the trace's records but its stream records (which the file keeps).
        relu = states.get("relu", {})
        if relu.get("trace_path"):
            with open(relu["trace_path"]) as f:
                records = [json.loads(line) for line in f if line.strip()]
            expected = sorted(r["seq"] for r in records if r["type"] != "stream")
            stored = daemon.stored_trace_seqs(relu["id"])
            if not any(r["type"] == "stream" for r in records) or stored != expected:
                problems.append(f"stored trace seqs {stored}, expected {expected}")
        # each timed verdict's window in the log, named by session, variant and purpose
        with open(daemon.log_path) as f:
            logged = f.read()
        if "timing window on the CPU: " not in logged or \
                f"(session {relu.get('id')}, v1 evaluate)" not in logged:
            problems.append(f"no timing window logged for relu's v1: {logged[-1500:]}")
        status, report = daemon.request("GET", f"/v1/batches/{created['batch']}/report")
        rows = (report or {}).get("rows", []) if status == 200 else []
        if sorted(row["problem"] for row in rows) != ["relu", "softmax_wide", "syntax_error"]:
            problems.append(f"report: {status} {report}")
        status, listing = daemon.request("GET", "/v1/batches")
        if status != 200 or [b["id"] for b in listing["batches"]] != [created["batch"]]:
            problems.append(f"GET /v1/batches: {status} {listing}")
        session_id = states.get("relu", {}).get("id", "x")
        status, session = daemon.request("GET", f"/v1/sessions/{session_id}")
        if status != 200 or session.get("state") != "done":
            problems.append(f"GET /v1/sessions/{session_id}: {status} {session}")
        status, reply = daemon.request("DELETE", f"/v1/batches/{created['batch']}")
        if status != 409:
            problems.append(f"cancel of a finished batch: {status} {reply}")
        status, reply = daemon.request("DELETE", f"/v1/sessions/{session_id}")
        if status != 409:
            problems.append(f"cancel of a finished session: {status} {reply}")
        code = daemon.stop()
        if code != 0:
            problems.append(f"SIGTERM when idle: exit {code}")
        return problems
    finally:
        daemon.close()


def bad_input():
    """Garbage gets 4xx and never stops the daemon; a cancel reaches queued sessions."""
    daemon = Daemon(script(delay_ms=3000), max_sessions=1).start()
    try:
        problems = []
        empty = os.path.join(daemon.folder, "empty")
        os.mkdir(empty)
        cases = [
            ("POST", "/v1/batches", None, b"{not json", 400),
            ("POST", "/v1/batches", None, b"[1, 2]", 400),
            ("POST", "/v1/batches", {"folder": empty}, None, 400),
            ("POST", "/v1/batches", {"problems": ["relative/relu.py"]}, None, 400),
            ("POST", "/v1/batches", {"problems": [RELU], "settings": {"colour": "red"}},
             None, 400),
            ("POST", "/v1/batches", {"problems": [RELU], "settings": {"max_turns": "many"}},
             None, 400),
            ("POST", "/v1/batches", {"problems": [RELU], "extra": 1}, None, 400),
            # over the daemon's 64 MiB body cap (POST /v1/evaluations carries many sources)
            ("POST", "/v1/batches", None, b"{\"problems\": [\"" + b"x" * (65 << 20) + b"\"]}",
             413),
            ("GET", "/v1/batches/b-nope", None, None, 404),
            ("GET", "/v1/batches/b-nope/report", None, None, 404),
            ("DELETE", "/v1/batches/b-nope", None, None, 404),
            ("GET", "/v1/sessions/nope", None, None, 404),
            ("DELETE", "/v1/sessions/nope", None, None, 404),
            ("GET", "/v1/nothing", None, None, 404),
            ("PUT", "/v1/batches", None, None, 405),
        ]
        for method, path, body, raw, expected in cases:
            try:
                status, reply = daemon.request(method, path, body, raw)
            except OSError as error:  # h2o may close after a 413 before the body is read
                status, reply = (413, str(error)) if expected == 413 else (0, str(error))
            if status != expected:
                problems.append(f"{method} {path} {str(body or raw)[:60]}: {status} {reply}, "
                                f"expected {expected}")
            elif expected != 413 and not (isinstance(reply, dict) and reply.get("error")):
                problems.append(f"{method} {path}: no error message: {reply}")
        # A folder with problems: a batch; cancelling it stops the running one and the
        # queued ones at once (one session at a time).
        status, created = daemon.request("POST", "/v1/batches", {
            "folder": PROBLEMS, "filter": "[rs]*.py", "settings": {"max_turns": 2}})
        if status != 201 or created.get("sessions", 0) < 3:
            return problems + [f"POST a folder: {status} {created}"]
        daemon.wait_running(created["batch"])
        status, cancelled = daemon.request("DELETE", f"/v1/batches/{created['batch']}")
        if status != 200 or cancelled.get("state") != "cancelled" or \
                len(cancelled.get("interrupted", [])) != 1:
            problems.append(f"cancel: {status} {cancelled}")
        batch = daemon.wait_batch(created["batch"], until=("cancelled",))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
                s["state"] in ("queued", "running") for s in batch["sessions"]):
            time.sleep(0.2)
            batch = daemon.request("GET", f"/v1/batches/{created['batch']}")[1]
        left = [s["state"] for s in batch["sessions"] if s["state"] != "cancelled"]
        if left:
            problems.append(f"after the cancel, sessions still {left}")
        status, health = daemon.request("GET", "/v1/health")
        if status != 200:
            problems.append(f"the daemon stopped answering: {status}")
        return problems
    finally:
        daemon.close()


def tcp_token():
    """TCP only behind the token: none or a wrong one 401, the right one 200; --listen
    without --token-file is refused at start."""
    daemon = Daemon(script())
    try:
        refused = subprocess.run(daemon.command("--listen", "127.0.0.1:1"), cwd=daemon.folder,
                                 env=daemon.environment, capture_output=True, text=True,
                                 timeout=30)
        problems = []
        if refused.returncode != 2 or "--token-file" not in refused.stderr:
            problems.append(f"--listen without a token: exit {refused.returncode}: "
                            f"{refused.stderr}")
        token_file = os.path.join(daemon.folder, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        port = free_port()
        daemon.start("--listen", f"127.0.0.1:{port}", "--token-file", token_file)
        for token, expected in ((None, 401), ("wrong-token-0123456789", 401), (TOKEN, 200)):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            connection.request("GET", "/v1/health", headers=headers)
            status = connection.getresponse().status
            connection.close()
            if status != expected:
                problems.append(f"token {token!r}: {status}, expected {expected}")
        return problems
    finally:
        daemon.close()


def crash_and_resume():
    """kill -9 mid-batch, then a new daemon on the same store: every problem ends with exactly
    one result, the interrupted ones resumed (attempt 2, one final record in their trace)."""
    daemon = Daemon(script(delay_ms=1500))
    try:
        daemon.start()
        status, created = daemon.post_batch([RELU, SOFTMAX, SCALE])
        if status != 201:
            return [f"POST: {status} {created}"]
        running = daemon.wait_running(created["batch"], count=2)
        daemon.process.send_signal(signal.SIGKILL)
        daemon.process.wait(timeout=10)
        problems = leftovers(daemon)
        daemon.start()
        batch = daemon.wait_batch(created["batch"], timeout=120)
        interrupted = {s["id"] for s in running}
        for session in batch["sessions"]:
            expected = 2 if session["id"] in interrupted else 1
            if session["state"] != "done" or session["attempt"] != expected:
                problems.append(f"{session['problem']}: {session['state']}, attempt "
                                f"{session['attempt']}, expected done after {expected}")
                continue
            finals = trace_records(session["trace_path"], "final")
            starts = trace_records(session["trace_path"], "run_start")
            if len(finals) != 1:
                problems.append(f"{session['problem']}: {len(finals)} final records")
            if [s["resumed"] for s in starts] != ([False, True] if expected == 2 else [False]):
                problems.append(f"{session['problem']}: run_start records "
                                f"{[s['resumed'] for s in starts]}")
        rows = daemon.store_rows()
        if len(rows) != 3 or any(not row[3] for row in rows):
            problems.append(f"store rows: {rows}")
        status, report = daemon.request("GET", f"/v1/batches/{created['batch']}/report")
        if status != 200 or len(report["rows"]) != 3:
            problems.append(f"report: {status} {report}")
        if "2 recovered" not in daemon.log():
            problems.append("the second daemon did not say it recovered 2: " + daemon.log())
        return problems
    finally:
        daemon.close()


def evaluations(daemon):
    """How many evaluate requests reached the fake worker (the problem check is not one)."""
    if not os.path.exists(daemon.worker_log):
        return 0
    with open(daemon.worker_log) as f:
        return sum(1 for line in f if json.loads(line).get("type") == "evaluate")


def sigterm_mid_batch():
    """SIGTERM while sessions evaluate (3 s each): the evaluation in flight ends, then the
    daemon exits 0 within seconds with no worker left, the sessions stay running in the store,
    and the next daemon resumes and finishes them."""
    daemon = Daemon(script(evaluation_seconds=3))
    try:
        daemon.start()
        status, created = daemon.post_batch([RELU, SOFTMAX, SCALE])
        if status != 201:
            return [f"POST: {status} {created}"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and evaluations(daemon) < 1:
            time.sleep(0.05)
        started = time.monotonic()
        code = daemon.stop(signal.SIGTERM, timeout=30)
        seconds = time.monotonic() - started
        problems = []
        if code != 0 or seconds > 10:
            problems.append(f"exit {code} after {seconds:.1f} s: {daemon.log()}")
        problems += leftovers(daemon)
        if os.path.exists(daemon.socket):
            problems.append("the socket file is still there")
        states = sorted(row[1] for row in daemon.store_rows())
        if states.count("running") < 1 or "done" in states:
            problems.append(f"store states after SIGTERM: {states}")
        daemon.start()
        batch = daemon.wait_batch(created["batch"], timeout=120)
        if [s["state"] for s in batch["sessions"]] != ["done"] * 3:
            problems.append(f"after a restart: {[s['state'] for s in batch['sessions']]}")
        return problems
    finally:
        daemon.close()


def reward_lanes():
    """POST /v1/evaluations on two lanes (docs/reward-service.md) with the stand-in evaluator:
    verdicts in order, the first correct candidate alone (it measures the baselines), then
    two at a time; a synchronous client that leaves drops the candidates not yet started."""
    daemon = Daemon(script(), max_sessions=1)
    try:
        daemon.start("--evaluation-lanes", "2")
        slow = [{"delay_seconds": 1.5}, {"delay_seconds": 1.5, "status": "incorrect"},
                {"delay_seconds": 1.5, "status": "compile_error"}, {"delay_seconds": 1.5}]
        # (the stand-in's import failure reads as a runtime error)
        body = {"problem_path": RELU, "candidates": [candidate(judge) for judge in
                                                     [{"speedup": 2.0}] + slow]}
        started = time.monotonic()
        status, answer = daemon.request("POST", "/v1/evaluations", body)
        seconds = time.monotonic() - started
        problems = []
        statuses = [v.get("status") for v in (answer or {}).get("verdicts", [])]
        if status != 200 or statuses != ["correct", "correct", "incorrect", "runtime_error",
                                          "correct"]:
            problems.append(f"{status}: {statuses} {str(answer)[:300]}")
        # four slow ones on two lanes: two rounds of 1.5 s, not four
        if not 3.0 <= seconds < 5.5:
            problems.append(f"five evaluations on two lanes took {seconds:.1f} s")
        cached = [(v.get("timing") or {}).get("baselines_cached")
                  for v in answer.get("verdicts", [])]
        if cached[0] is not False or cached[1] is not True:
            problems.append(f"baselines_cached: {cached}")
        before = evaluations(daemon)
        connection = daemon_process.UnixConnection(daemon.socket, timeout=0.5)
        try:
            connection.request("POST", "/v1/evaluations", body=json.dumps(
                {"problem_path": RELU, "candidates": [candidate({"delay_seconds": 1.5})] * 8}),
                headers={"Content-Type": "application/json"})
            connection.getresponse()
        except OSError:
            pass  # the client gives up after 0.5 s
        finally:
            connection.close()
        time.sleep(4.5)
        ran = evaluations(daemon) - before
        if not 1 <= ran <= 4 or "the client left" not in daemon.log():
            problems.append(f"{ran} of 8 evaluated after the client left: {daemon.log()}")
        status, health = daemon.request("GET", "/v1/health")
        if (health or {}).get("evaluations", {}).get("queued") != 0:
            problems.append(f"health: {health}")
        return problems
    finally:
        daemon.close()


CASES = [
    ("a batch with a broken problem: it fails, the others finish, one report row each",
     batch_with_broken_problem),
    ("bad input: 400, 404, 405, 413; a cancel stops running and queued sessions", bad_input),
    ("TCP: 401 without the token, 200 with it; no TCP without a token file", tcp_token),
    ("kill -9 mid-batch, restart: every problem ends once, interrupted ones resumed",
     crash_and_resume),
    ("SIGTERM mid-evaluation: exit 0 in seconds, nothing left, sessions resumed later",
     sigterm_mid_batch),
    ("POST /v1/evaluations on two lanes: order kept, baselines first, a leaving client",
     reward_lanes),
]


def main():
    return run_cases(CASES)


if __name__ == "__main__":
    sys.exit(main())
