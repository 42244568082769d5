#!/usr/bin/env python3
"""Two kagentd daemons, two processes, one PostgreSQL queue (docs/store.md, docs/deploy.md).

Both run `kagent daemon --device cpu --store $KAGENT_TEST_POSTGRES_URL --lease 3` with
their own socket, model server and log. In the first case each has its own output folder (two
machines with nothing shared but the database): a batch of 8 problems is posted to the first;
once both daemons run sessions and one of the first's has a commit on its branch and in the
store (the first's model never finishes a session in time, so that one is still running), the
first is killed with -9. The survivor must take the dead daemon's sessions over within its
lease (plus one heartbeat), rebuild their runs from the store (trace, variants, runs/ and best/ branches
with the same commit ids) and resume them, and end every problem exactly once: one result, one
final record, no variant committed twice. The survivor's API sees the whole batch (it was
posted to the other daemon) and its report has all 8 rows; the store holds every session's
trace. The second case (a partition) shares one output folder.

Run under tests/fixtures/postgres_server.py (tests/meson.build does), which starts the
server and sets KAGENT_TEST_POSTGRES_URL. Prints TAP.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_cases  # noqa: E402  (the Daemon harness, the scripted model)
from tap_cases import run_cases  # noqa: E402 - the shared TAP runner, beside this file

URL = os.environ.get("KAGENT_TEST_POSTGRES_URL", "")
LEASE = 3.0
PROBLEM_COUNT = 8


class ClusterDaemon(daemon_cases.Daemon):
    """A daemon of the harness on the shared PostgreSQL store, with the output folder runs
    (shared with another daemon), or its own when runs is None (another machine)."""

    def __init__(self, model_script, runs=None):
        super().__init__(model_script, max_sessions=2)
        self.output = runs if runs is not None else os.path.join(self.folder, "runs")
        with open(self.config) as f:
            text = f.read()
        with open(self.config, "w") as f:
            f.write(text.replace(f"output_directory: {self.folder}/runs",
                                 f"output_directory: {self.output}"))

    def command(self, *extra):
        return [daemon_cases.KAGENT, "daemon", "--device", "cpu", "--socket", self.socket,
                "--store", URL, "--lease", str(LEASE), "--config", self.config,
                "--max-sessions", str(self.max_sessions), *extra]


def psql(sql):
    """Rows of a query on the shared store, each a list of text fields."""
    output = subprocess.run(["psql", URL, "-At", "-F", "\t", "-c", sql], check=True,
                            capture_output=True, text=True).stdout
    return [line.split("\t") for line in output.splitlines() if line]


def git(repository, *arguments):
    """The lines git prints for a command on a run's bare repository."""
    return subprocess.run(["git", "--git-dir", repository, *arguments], check=True,
                          capture_output=True, text=True).stdout.split()


def run_commits(runs, problem, run_id):
    """The commits of runs/RUN_ID in the problem's repository under runs, oldest first; none
    when the run has no branch there (a session killed before it started its branch, or a
    repository of another run of the same problem)."""
    repository = os.path.join(runs, problem, "repository.git")
    if not os.path.isdir(repository):
        return []
    try:
        return git(repository, "rev-list", "--reverse", f"runs/{run_id}", "^problem")
    except subprocess.CalledProcessError:
        return []


def owner_pid(session):
    owner = session.get("owner") or ""
    parts = owner.rsplit(":", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def two_daemons_one_killed():
    runs_folder = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"kagent-cluster-{os.getpid()}")
    os.makedirs(runs_folder, exist_ok=True)
    problems_folder = os.path.join(runs_folder, "problems")
    os.makedirs(problems_folder, exist_ok=True)
    problems = []
    for index in range(1, PROBLEM_COUNT + 1):
        path = os.path.join(problems_folder, f"relu_{index}.py")
        shutil.copy(daemon_cases.RELU, path)
        problems.append(path)
    # Turn 1 evaluates and commits. On the first daemon the candidate is 1.2x, below the
    # target (a 2x one ends the session at once: target_reached), and the model then takes
    # longer to finish than the test waits (and less than the stall limit, 120 s): a session
    # of the first daemon with a commit is still running when it is killed, however loaded
    # the machine, so the survivor rebuilds a branch every time. The survivor's model
    # answers in 1.5 s.
    model = daemon_cases.script(delay_ms=1500)
    slow = {"by_turn": [
        daemon_cases.chat_reply([("evaluate", {"source": daemon_cases.candidate(
            {"speedup": 1.2})})], delay_ms=1500),
        daemon_cases.chat_reply([("finish", {"summary": "done"})], delay_ms=100000)]}
    first = ClusterDaemon(slow)
    second = ClusterDaemon(model)
    failures = []
    try:
        first.start()
        second.start()
        status, created = first.post_batch(problems)
        if status != 201:
            return [f"POST: {status} {created}"]
        batch_id = created["batch"]
        # Until each daemon runs a session whose trace is known (so it resumes, not restarts)
        # and one of the first's has a commit both on its branch and in the store (so the
        # survivor rebuilds that branch from the store).
        deadline = time.monotonic() + 90
        batch = None
        committed = None
        while time.monotonic() < deadline and committed is None:
            batch = second.request("GET", f"/v1/batches/{batch_id}")[1]
            running = [s for s in batch["sessions"]
                       if s["state"] == "running" and s.get("trace_path")]
            theirs = [s for s in running if owner_pid(s) == second.process.pid]
            for s in running if theirs else []:
                if owner_pid(s) == first.process.pid and run_commits(
                        first.output, s["problem"], s["id"]) and psql(
                        "SELECT 1 FROM trace_records WHERE record LIKE"
                        f" '{{\"type\":\"commit\"%' AND session_id = '{s['id']}'"):
                    committed = s["id"]
                    break
            else:
                time.sleep(0.1)
        if committed is None:
            return [f"both daemons never ran at once with a commit on the first: {batch}\n"
                    f"{first.log()}\n{second.log()}"]
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=10)
        killed_at = time.monotonic()
        # What it ran when it died (one of them may have ended since the check above); the
        # store stays so for a lease.
        at_kill = second.request("GET", f"/v1/batches/{batch_id}")[1]
        mine = [s for s in at_kill["sessions"]
                if s["state"] == "running" and owner_pid(s) == first.process.pid]
        killed = {s["id"] for s in mine}
        # What the store held of each killed session's trace, and the commits it names (the
        # first machine may have made more, after its last copy): the survivor's rebuilt
        # branch must start with those, under the ids the first machine gave them.
        stored = {session: int(psql(f"SELECT COUNT(*) FROM trace_records"
                                    f" WHERE session_id = '{session}'")[0][0])
                  for session in killed}
        first_commits = {}
        for s in mine:
            named = [json.loads(row[0])["commit"] for row in psql(
                "SELECT record FROM trace_records WHERE record LIKE '{\"type\":\"commit\"%'"
                f" AND session_id = '{s['id']}' ORDER BY seq")]
            made = run_commits(first.output, s["problem"], s["id"])
            if made[:len(named)] != named:
                failures.append(f"{s['problem']}: the store names {named}, the first made {made}")
            first_commits[s["id"]] = named

        # The survivor takes them over once their leases run out.
        taken = {}
        while time.monotonic() < killed_at + 4 * LEASE + 20 and len(taken) < len(killed):
            batch = second.request("GET", f"/v1/batches/{batch_id}")[1]
            for session in batch["sessions"]:
                if session["id"] in killed and session["id"] not in taken and (
                        owner_pid(session) == second.process.pid or
                        session["state"] != "running"):
                    taken[session["id"]] = time.monotonic() - killed_at
            time.sleep(0.1)
        if len(taken) < len(killed):
            failures.append(f"not taken over: {killed - set(taken)}\n{second.log()}")
        # The lease, one heartbeat, and a claim on 2 busy cores: up to 4.8 s was seen with the
        # 100 daemons of bench/daemon_cluster_bench.py on the same 2 cores.
        limit = LEASE + LEASE / 3 + 3.0
        slow = {session: round(seconds, 1) for session, seconds in taken.items()
                if seconds > limit}
        if slow:
            failures.append(f"taken over later than {limit:.1f} s: {slow}")
        print(f"# killed {len(killed)} running session(s); taken over after "
              f"{sorted(round(s, 1) for s in taken.values())} s (lease {LEASE:g} s)")

        batch = second.wait_batch(batch_id, timeout=240)
        if len(batch["sessions"]) != PROBLEM_COUNT:
            failures.append(f"{len(batch['sessions'])} sessions")
        rebuilt = []
        for session in batch["sessions"]:
            name = session["problem"]
            resumed = session["id"] in killed
            if session["state"] != "done":
                failures.append(f"{name}: {session['state']} {session.get('result')}")
                continue
            if resumed and session["attempt"] != 2:
                failures.append(f"{name}: taken over, yet attempt {session['attempt']}")
            finals = daemon_cases.trace_records(session["trace_path"], "final")
            starts = daemon_cases.trace_records(session["trace_path"], "run_start")
            commits = daemon_cases.trace_records(session["trace_path"], "commit")
            if len(finals) != 1:
                failures.append(f"{name}: {len(finals)} final records")
            # Rebuilt from the store, the run resumes (a second run_start); one none of whose
            # trace reached the store starts afresh under its id on the survivor.
            expected = [False, True] if resumed and stored[session["id"]] else [False]
            if [s["resumed"] for s in starts] != expected:
                failures.append(f"{name}: run_start records {[s['resumed'] for s in starts]}"
                                f", expected {expected}")
            variants = [c["variant"] for c in commits]
            if len(variants) != len(set(variants)):
                failures.append(f"{name}: a variant committed twice: {variants}")
            if not resumed:
                continue
            if not session["trace_path"].startswith(second.output + "/"):
                failures.append(f"{name}: trace {session['trace_path']} not on the survivor")
            # The survivor's branch: every commit the trace names, once, in order, and the
            # first machine's commits among them under the same ids.
            branch = run_commits(second.output, session["problem"], session["id"])
            if branch != [c["commit"] for c in commits]:
                failures.append(f"{name}: runs/{session['id']} has {branch}, the trace "
                                f"{[c['commit'] for c in commits]}")
            before = first_commits[session["id"]]
            if branch[:len(before)] != before:
                failures.append(f"{name}: rebuilt {branch[:len(before)]}, the store named "
                                f"{before}")
            rebuilt.append(len(before))
        # The store: one result per session, at most one committed row per variant, and
        # each session's trace copied (its final record included).
        rows = psql("SELECT id, state, result IS NOT NULL FROM sessions ORDER BY position")
        if len(rows) != PROBLEM_COUNT or any(r[1] != "done" or r[2] != "t" for r in rows):
            failures.append(f"store sessions: {rows}")
        doubled = psql("SELECT session_id, variant_id FROM variants GROUP BY 1, 2"
                       " HAVING SUM(committed) > 1")
        if doubled:
            failures.append(f"committed twice: {doubled}")
        finals = psql("SELECT COUNT(*) FROM trace_records"
                      " WHERE record LIKE '{\"type\":\"final\"%'")
        if int(finals[0][0]) != PROBLEM_COUNT:
            failures.append(f"final records in the store: {finals}")
        if committed not in killed:
            failures.append(f"the session with a commit, {committed}, was not running when "
                            f"the first daemon was killed: {killed}\n"
                            f"{[s for s in at_kill['sessions'] if s['id'] == committed]}\n"
                            f"{first.log()}\n{second.log()}")
        if not any(rebuilt):
            failures.append(f"no taken-over run had a commit to rebuild: {rebuilt}")
        print(f"# commits of the first machine rebuilt on the survivor, per taken-over run: "
              f"{rebuilt}")
        status, report = second.request("GET", f"/v1/batches/{batch_id}/report")
        if status != 200 or len(report.get("rows", [])) != PROBLEM_COUNT:
            failures.append(f"report on the survivor: {status} {report}")
        if second.stop() != 0:
            failures.append("the survivor did not exit 0 on SIGTERM")
        return failures
    finally:
        first.close()
        second.close()
        if not os.environ.get("KAGENT_TEST_KEEP"):
            shutil.rmtree(runs_folder, ignore_errors=True)


def partitioned_daemon():
    """A daemon frozen (SIGSTOP) for longer than its lease, as behind a network partition: the
    other takes its sessions over; thawed, it finds them held by the other at its heartbeat
    and stops them (or its end is refused), and every problem still ends once."""
    runs_folder = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                               f"kagent-cluster-{os.getpid()}-partition")
    problems_folder = os.path.join(runs_folder, "problems")
    os.makedirs(problems_folder, exist_ok=True)
    problems = []
    for index in range(1, 5):
        path = os.path.join(problems_folder, f"scale_{index}.py")
        shutil.copy(daemon_cases.SCALE, path)
        problems.append(path)
    psql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    model = daemon_cases.script(delay_ms=2000)
    first = ClusterDaemon(model, runs_folder)
    second = ClusterDaemon(model, runs_folder)
    failures = []
    try:
        first.start()
        second.start()
        status, created = first.post_batch(problems)
        if status != 201:
            return [f"POST: {status} {created}"]
        batch_id = created["batch"]
        deadline = time.monotonic() + 90
        mine = []
        while time.monotonic() < deadline and not mine:
            batch = second.request("GET", f"/v1/batches/{batch_id}")[1]
            mine = [s for s in batch["sessions"] if s["state"] == "running" and
                    s.get("trace_path") and owner_pid(s) == first.process.pid]
            time.sleep(0.1)
        if not mine:
            return [f"the first daemon never ran a session: {first.log()}"]
        first.process.send_signal(signal.SIGSTOP)
        time.sleep(2 * LEASE + 2)
        first.process.send_signal(signal.SIGCONT)
        batch = second.wait_batch(batch_id, timeout=240)
        for session in batch["sessions"]:
            if session["state"] != "done":
                failures.append(f"{session['problem']}: {session['state']}")
            elif len(daemon_cases.trace_records(session["trace_path"], "final")) < 1:
                failures.append(f"{session['problem']}: no final record")
        rows = psql("SELECT id, state FROM sessions WHERE state <> 'done'")
        if rows:
            failures.append(f"store: {rows}")
        time.sleep(LEASE)  # a heartbeat of the thawed daemon
        log = first.log()
        if "another daemon holds it now" not in log and "another daemon took it over" not in log:
            failures.append("the thawed daemon did not give its sessions up: " + log)
        return failures
    finally:
        first.close()
        second.close()
        if not os.environ.get("KAGENT_TEST_KEEP"):
            shutil.rmtree(runs_folder, ignore_errors=True)


CASES = [
    ("two daemons share a batch of 8 on PostgreSQL; one killed -9: the survivor takes over "
     "within the lease, every problem ends once, nothing committed twice",
     two_daemons_one_killed),
    ("a daemon frozen past its lease (a partition): the other takes over; thawed, it stops "
     "the sessions it lost; every problem ends once", partitioned_daemon),
]


def main():
    if not URL:
        print("1..0 # SKIP KAGENT_TEST_POSTGRES_URL is not set (run under "
              "tests/fixtures/postgres_server.py)")
        return 77
    return run_cases(CASES, lines=60)


if __name__ == "__main__":
    sys.exit(main())
