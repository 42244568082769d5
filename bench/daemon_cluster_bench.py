#!/usr/bin/env python3
"""Real kagentd daemons on one PostgreSQL as their number grows (issue 14, docs/benchmarks.md).

bench/store_claims.py measures the store's claim with stand-in clients; this runs the real
thing: for N = 1, 5, 10, 25, 50, 100, N `kagent daemon --device cpu --store postgresql://...`
processes (each its own folder, socket and output folder, as on N machines) share one batch of
many copies of tests/fixtures/problems/relu.py. Their sessions talk to one scripted model
server (tests/fixtures/llm_server.py, stateless by_turn mode: turn 1 evaluates a 2x candidate,
turn 2 finishes, each answer after --delay-ms) and are judged by one shared stand-in evaluator
(`kagent worker` running tests/fixtures/fake_runner in scripted mode, the config's
evaluation.worker_socket). A session lasts two turns, so daemons claim again and again.

Per N it reports: claims per second in the middle 80 % of the claims (by the time the
daemon's log line arrived), sessions per second over the whole batch, the claim's latency as
the daemon logs it (`session ID claimed in X ms (Y queued on the pool, Z in the store, W
waiting for the loop)`, median and p99 of each part), the latency of GET /v1/health on a few
daemons during the batch (the event loop's lag, on top of the HTTP round trip), the server's
committed transactions per session (pg_stat_database), and where the
CPU went (the daemons, the PostgreSQL server's processes, the model server and the worker).
It checks that every session was claimed exactly once, ended done with one final record in
the store, and that no variant was committed twice.

The server is a throw-away one from tests/fixtures/postgres_server.py (the script runs itself
under it) unless KAGENT_TEST_POSTGRES_URL names one; the public schema is emptied between
rounds. Python 3 standard library only; not a CI test.

Run: python3 bench/daemon_cluster_bench.py [--daemons 1,5,10,25,50,100]
     [--sessions-per-daemon 10] [--min-sessions 50] [--slots 2] [--delay-ms 100]
     (KAGENT=build/kagent by default; run from the source tree)"""
import argparse
import json
import os
import re
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
POSTGRES_SERVER = os.path.join(SOURCE, "tests", "fixtures", "postgres_server.py")
os.environ.setdefault("KAGENT", os.path.join(SOURCE, "build", "kagent"))
os.environ.setdefault("KAGENT_SOURCE_DIR", SOURCE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "agent"))
import daemon_cases  # noqa: E402  (the scripted model's replies)
import daemon_load  # noqa: E402  (requests over the Unix socket, /proc samples)
import store_claims  # noqa: E402  (percentile, the schema reset)

CLAIM_LINE = re.compile(r"session (\S+) claimed in ([\d.]+) ms \(([\d.]+) queued on the pool, "
                        r"([\d.]+) in the store, ([\d.]+) waiting for the loop\)")
PROBES = 5  # daemons whose /v1/health is probed during a batch


class LogReader(threading.Thread):
    """Reads every daemon's output as it comes, each line stamped with its arrival."""

    def __init__(self):
        super().__init__(daemon=True)
        self.selector = selectors.DefaultSelector()
        self.lines = []  # (monotonic seconds, daemon index, text)
        self.lock = threading.Lock()
        self.stopping = False

    def add(self, index, stream):
        os.set_blocking(stream.fileno(), False)
        with self.lock:
            self.selector.register(stream, selectors.EVENT_READ, [index, b""])

    def run(self):
        while not self.stopping:
            with self.lock:
                if not self.selector.get_map():
                    events = []
                else:
                    events = self.selector.select(timeout=0.05)
            if not events:
                time.sleep(0.05)
            for key, _ in events:
                stamp = time.monotonic()
                try:
                    data = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not data:
                    with self.lock:
                        self.selector.unregister(key.fileobj)
                    continue
                index, pending = key.data
                *whole, key.data[1] = (pending + data).split(b"\n")
                with self.lock:
                    self.lines.extend((stamp, index, line.decode("utf-8", "replace"))
                                      for line in whole)

    def taken(self):
        with self.lock:
            lines, self.lines = self.lines, []
        return lines


class Prober(threading.Thread):
    """GET /v1/health on a few daemons in turn, the latency of each answer."""

    def __init__(self, sockets, period=0.1):
        super().__init__(daemon=True)
        self.sockets, self.period = sockets, period
        self.latencies, self.failures, self.stopping = [], 0, False

    def run(self):
        turn = 0
        while not self.stopping:
            started = time.monotonic()
            try:
                status, _ = daemon_load.request(self.sockets[turn % len(self.sockets)], "GET",
                                                "/v1/health")
                if status == 200:
                    self.latencies.append(1000 * (time.monotonic() - started))
                else:
                    self.failures += 1
            except OSError:
                self.failures += 1
            turn += 1
            time.sleep(self.period)


def cpu_seconds(pid):
    try:
        return daemon_load.proc_sample(pid)[0]
    except (OSError, ValueError, IndexError, KeyError):
        return None


def server_processes(port):
    """The PostgreSQL server of this port: its postmaster and the postmaster's children."""
    postmaster = None
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if "postgres" in command and f"port={port} " in command + " ":
            postmaster = int(entry)
            break
    return [] if postmaster is None else [postmaster, *daemon_load.children_of(postmaster)]


def cpu_of(groups):
    """{group: {pid: cpu seconds}} for {group: [pid, ...]}."""
    return {name: {pid: cpu_seconds(pid) for pid in pids} for name, pids in groups.items()}


def cpu_used(before, after):
    """Seconds of CPU per group between two cpu_of samples (processes that appeared count
    whole: a server backend started in between)."""
    used = {}
    for name, pids in after.items():
        total = 0.0
        for pid, seconds in pids.items():
            if seconds is not None:
                total += seconds - (before.get(name, {}).get(pid) or 0.0)
        used[name] = total
    return used


class Round:
    """N daemons of one round, each in a folder of its own under the bench's scratch folder."""

    def __init__(self, bench, daemons):
        self.bench, self.count = bench, daemons
        self.processes, self.sockets = [], []

    def start(self):
        for index in range(self.count):
            folder = os.path.join(self.bench.folder, f"round-{self.count}", f"daemon-{index:03d}")
            os.makedirs(folder)
            config = os.path.join(folder, "kagent.yaml")
            with open(config, "w") as f:
                f.write(f"provider:\n  model: scripted-model\n  api: chat_completions\n"
                        f"  base_url: http://127.0.0.1:{self.bench.model_port}/v1\n"
                        f"output_directory: {folder}/runs\n"
                        f"evaluation:\n  worker_socket: {self.bench.worker_socket}\n")
            socket_path = os.path.join(folder, "kagentd.sock")
            process = subprocess.Popen(
                [self.bench.kagent, "daemon", "--device", "cpu", "--socket", socket_path,
                 "--store", self.bench.url, "--config", config, "--max-sessions",
                 str(self.bench.slots)],
                cwd=folder, env=self.bench.environment, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT)
            self.processes.append(process)
            self.sockets.append(socket_path)
            self.bench.reader.add(index, process.stdout)
        deadline = time.monotonic() + 60 + self.count
        for process, socket_path in zip(self.processes, self.sockets):
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"a daemon exited {process.returncode}")
                try:
                    if daemon_load.request(socket_path, "GET", "/v1/health")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("a daemon did not answer")
                time.sleep(0.05)

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        failed = 0
        for process in self.processes:
            try:
                failed += process.wait(timeout=60) != 0
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                failed += 1
        return failed


class Bench:
    def __init__(self, arguments, url):
        self.arguments, self.url = arguments, url
        self.slots = arguments.slots
        self.kagent = os.path.abspath(os.environ["KAGENT"])
        self.folder = tempfile.mkdtemp(prefix="kagent-cluster-bench-")
        self.worker_socket = os.path.join(self.folder, "worker.sock")
        self.marker = f"KAGENT_CLUSTER_BENCH={self.folder}".encode()
        self.environment = dict(os.environ)
        for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "KAGENT_CONFIG",
                     "KAGENT_DAEMON_SOCKET"):
            self.environment.pop(name, None)
        backlog = str(max(64, 4 * arguments.slots * max(arguments.counts)))
        self.environment.update({
            "KAGENT_CLUSTER_BENCH": self.folder,
            "KAGENT_RUNNER_DIR": os.path.join(SOURCE, "tests", "fixtures", "fake_runner"),
            "FAKE_WORKER_MODE": "scripted", "FAKE_WORKER_BACKLOG": backlog,
            "FAKE_WORKER_THREADS": "1",
            "KAGENT_WORKER_SOCKET": self.worker_socket,
            "KAGENT_CACHE_DIR": os.path.join(self.folder, "cache"),
            "XDG_CONFIG_HOME": os.path.join(self.folder, "config"),
            "XDG_STATE_HOME": os.path.join(self.folder, "xdg-state"),
            "OPENAI_API_KEY": "sk-kagent-bench-0123456789abcdef"})
        self.helpers = []
        self.reader = LogReader()
        self.reader.start()
        script = os.path.join(self.folder, "script.json")
        with open(script, "w") as f:
            json.dump(daemon_cases.script(delay_ms=arguments.delay_ms), f)
        server, self.model_port = daemon_load.daemon_process.start_model_server(
            script, "/dev/null", stderr=open(os.path.join(self.folder, "server.log"), "w"),
            backlog=backlog, env=self.environment)
        self.helpers.append(server)
        worker = subprocess.Popen([self.kagent, "worker", "--socket", self.worker_socket],
                                  env=self.environment, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(self.folder, "worker.log"), "w"))
        self.helpers.append(worker)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.worker_socket):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the fake worker did not start")
            time.sleep(0.05)
        port = re.search(r":(\d+)/", url)
        self.server_port = port.group(1) if port else None

    def psql(self, sql):
        output = subprocess.run(["psql", self.url, "-At", "-F", "\t", "-c", sql], check=True,
                                capture_output=True, text=True).stdout
        return [line.split("\t") for line in output.splitlines() if line]

    def run_round(self, daemons):
        sessions = max(self.arguments.min_sessions, daemons * self.arguments.sessions_per_daemon)
        store_claims.reset(self.url)
        problems_folder = os.path.join(self.folder, f"round-{daemons}", "problems")
        os.makedirs(problems_folder)
        problems = []
        for index in range(sessions):
            path = os.path.join(problems_folder, f"relu_{index:04d}.py")
            shutil.copyfile(daemon_cases.RELU, path)
            problems.append(path)
        cluster = Round(self, daemons)
        failures = []
        try:
            cluster.start()
            self.reader.taken()  # the start's lines
            groups = {"daemons": [p.pid for p in cluster.processes],
                      "postgresql": server_processes(self.server_port),
                      "model and worker": [p.pid for p in self.helpers]}
            prober = Prober(cluster.sockets[:PROBES])
            # Idle first: what N daemons cost the server with nothing to do (heartbeats).
            idle_before = cpu_of(groups)
            time.sleep(self.arguments.idle_window)
            before = cpu_of(groups)
            idle = cpu_used(idle_before, before)
            commits_before = self.commits()
            posted = time.monotonic()
            status, created = daemon_load.request(cluster.sockets[0], "POST", "/v1/batches", {
                "problems": problems, "settings": {"max_turns": 2}})
            if status != 201:
                raise RuntimeError(f"POST /v1/batches: {status} {created}")
            batch = created["batch"]
            prober.start()
            deadline = posted + self.arguments.timeout
            ended = None
            while True:
                status, view = daemon_load.request(cluster.sockets[0], "GET",
                                                   f"/v1/batches/{batch}")
                if status == 200 and view["state"] in ("done", "cancelled"):
                    ended = ended or time.monotonic()
                    break
                if status == 200 and all(s["state"] not in ("queued", "running")
                                         for s in view["sessions"]):
                    ended = ended or time.monotonic()
                    # The batch's state follows its last session's end at once.
                    if time.monotonic() - ended > 5:
                        failures.append(f"the batch stays {view['state']} with every"
                                        f" session ended")
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the batch did not end in {self.arguments.timeout} s")
                time.sleep(0.5)
            groups["postgresql"] = server_processes(self.server_port)
            after = cpu_of(groups)
            prober.stopping = True
            prober.join()
            time.sleep(1.5)  # the server publishes its counters at most once a second
            commits = self.commits() - commits_before
            rss = [daemon_load.proc_sample(p.pid)[1] for p in cluster.processes]
        finally:
            failed_exits = cluster.stop()
        time.sleep(0.3)
        lines = self.reader.taken()
        if failed_exits:
            failures.append(f"{failed_exits} daemons did not exit 0 on SIGTERM")
        claims = []
        for stamp, index, text in lines:
            match = CLAIM_LINE.search(text)
            if match:
                claims.append((stamp, index, match.group(1),
                               *(float(match.group(g)) for g in range(2, 6))))
        failures += self.check(sessions, claims, view)
        stamps = sorted(c[0] for c in claims)
        low, high = stamps[len(stamps) // 10], stamps[(len(stamps) * 9) // 10]
        middle = sum(1 for s in stamps if low <= s <= high)
        used = cpu_used(before, after)
        seconds = ended - posted

        def spread(values):
            return statistics.median(values), store_claims.percentile(values, 0.99)
        return {
            "daemons": daemons, "sessions": sessions, "seconds": seconds,
            "claims_per_second": middle / (high - low) if high > low else float("nan"),
            "sessions_per_second": sessions / seconds,
            "claim_ms": spread([c[3] for c in claims]),
            "pool_ms": spread([c[4] for c in claims]),
            "store_ms": spread([c[5] for c in claims]),
            "loop_ms": spread([c[6] for c in claims]),
            "health_ms": spread(prober.latencies) if prober.latencies else (float("nan"),) * 2,
            "health_failures": prober.failures,
            "daemons_that_claimed": len({c[1] for c in claims}),
            "transactions_per_session": commits / sessions,
            "transactions_per_second": commits / seconds,
            "cpu_percent": {name: 100 * value / seconds for name, value in used.items()},
            "idle_cpu_percent": {name: 100 * value / self.arguments.idle_window
                                 for name, value in idle.items()},
            "rss_mib": statistics.mean(rss) / 1024,
            "failures": failures}

    def commits(self):
        """The server's committed transactions so far (the bench's own queries included)."""
        return int(self.psql("SELECT xact_commit FROM pg_stat_database"
                             " WHERE datname = current_database()")[0][0])

    def check(self, sessions, claims, view):
        """Every session claimed once and ended done once; no variant committed twice."""
        failures = []
        ids = [c[2] for c in claims]
        if len(ids) != sessions or len(set(ids)) != sessions:
            failures.append(f"{len(ids)} claims of {len(set(ids))} sessions for {sessions}")
        states = {}
        for session in view["sessions"]:
            states[session["state"]] = states.get(session["state"], 0) + 1
        if states != {"done": sessions}:
            failures.append(f"session states {states}")
        rows = self.psql("SELECT COUNT(*), COUNT(result), SUM(CASE WHEN attempts = 1 THEN 1"
                         " ELSE 0 END) FROM sessions WHERE state = 'done'")
        if rows != [[str(sessions)] * 3]:
            failures.append(f"the store's sessions (done, with a result, one attempt): {rows}")
        finals = self.psql("SELECT COUNT(*), COUNT(DISTINCT session_id) FROM trace_records"
                           " WHERE record LIKE '{\"type\":\"final\"%'")
        if finals != [[str(sessions)] * 2]:
            failures.append(f"final records in the store (all, sessions): {finals}")
        doubled = self.psql("SELECT session_id, variant_id FROM variants GROUP BY 1, 2"
                            " HAVING SUM(committed) > 1")
        committed = self.psql("SELECT COUNT(DISTINCT session_id) FROM variants"
                              " WHERE committed = 1")
        if doubled:
            failures.append(f"committed twice: {doubled}")
        if committed != [[str(sessions)]]:
            failures.append(f"sessions with a committed variant: {committed}")
        return failures

    def close(self):
        self.reader.stopping = True
        daemon_load.daemon_process.stop_processes(self.helpers)
        time.sleep(0.5)
        left = daemon_load.marked(self.marker)
        if self.arguments.keep:
            print(f"# kept {self.folder}")
        else:
            shutil.rmtree(self.folder, ignore_errors=True)
        return left


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemons", default="1,5,10,25,50,100")
    parser.add_argument("--sessions-per-daemon", type=int, default=10)
    parser.add_argument("--min-sessions", type=int, default=50)
    parser.add_argument("--slots", type=int, default=2, help="--max-sessions of each daemon")
    parser.add_argument("--delay-ms", type=int, default=100, help="the model's answer delay")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a batch may take")
    parser.add_argument("--idle-window", type=float, default=5,
                        help="seconds of CPU sampled before the batch, the daemons idle")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    arguments = parser.parse_args()
    arguments.counts = [int(n) for n in arguments.daemons.split(",")]
    url = os.environ.get("KAGENT_TEST_POSTGRES_URL")
    if not url:
        # Under a server of our own, with room for every daemon's two connections.
        return subprocess.run([sys.executable, POSTGRES_SERVER, "--max-connections",
                               str(max(arguments.counts) * 3 + 20), "run", "--",
                               sys.executable, os.path.abspath(__file__),
                               *sys.argv[1:]]).returncode
    bench = Bench(arguments, url)
    rows, code = [], 0
    try:
        print(f"# {os.cpu_count()} cores; {arguments.slots} sessions a daemon at once; the "
              f"model answers after {arguments.delay_ms} ms; load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        print("| daemons | sessions | s | claims/s | sessions/s | claim median / p99 (ms) |"
              " pool queue median / p99 | store median / p99 | loop wait median / p99 |"
              " GET /v1/health median / p99 (ms) | CPU % daemons / PostgreSQL /"
              " model+worker | server ms CPU / session | transactions / session |"
              " idle CPU % daemons / PostgreSQL | daemon RSS (MiB) |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
              " ---: | ---: | ---: | ---: |")
        for daemons in arguments.counts:
            row = bench.run_round(daemons)
            rows.append(row)
            cpu, idle = row["cpu_percent"], row["idle_cpu_percent"]
            print(f"| {daemons} | {row['sessions']} | {row['seconds']:.0f} |"
                  f" {row['claims_per_second']:.1f} | {row['sessions_per_second']:.1f} |"
                  + "".join(f" {row[k][0]:.1f} / {row[k][1]:.1f} |"
                            for k in ("claim_ms", "pool_ms", "store_ms", "loop_ms",
                                      "health_ms"))
                  + f" {cpu['daemons']:.0f} / {cpu['postgresql']:.0f} /"
                  f" {cpu['model and worker']:.0f} |"
                  f" {10 * cpu['postgresql'] * row['seconds'] / row['sessions']:.1f} |"
                  f" {row['transactions_per_session']:.1f} | {idle['daemons']:.1f} /"
                  f" {idle['postgresql']:.1f} | {row['rss_mib']:.1f} |", flush=True)
            for failure in row["failures"]:
                print(f"# FAILED at {daemons} daemons: {failure}", flush=True)
                code = 1
    finally:
        left = bench.close()
        if left:
            print("# left behind:\n" + "\n".join(f"#   {entry}" for entry in left))
            code = code or 5
    if arguments.json:
        with open(arguments.json, "w") as f:
            json.dump(rows, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main())
