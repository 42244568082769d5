#!/usr/bin/env python3
"""kagentd under load (issue 11): N sessions in flight against the scripted model server
answering every turn after 1 s, with the stand-in evaluator (one shared fake worker), and
the daemon's CPU time and memory per waiting session, and the API's requests per second
under that load. Python 3 standard library only; not a CI test.

Sets up, in a scratch folder: tests/fixtures/llm_server.py in its stateless by_turn mode
(every turn calls read_problem after delay_ms, so a session only ever waits on the model),
one `kagent worker` running the fake runner (tests/fixtures/fake_runner, scripted mode) that
every session shares through the config's evaluation.worker_socket, and
`kagent daemon --device cpu --max-sessions N`. Then: the daemon's RSS idle, a batch of N
copies of tests/fixtures/problems/relu.py, a wait until N sessions run, a quiet window
sampling /proc/PID/stat (utime + stime) and /proc/PID/status (VmRSS, VmHWM), then a window
hammering GET /v1/health and one hammering GET /v1/batches/ID over the Unix socket.
Cancels the batch, SIGTERMs the daemon, stops the worker and the server, and checks that no
process it started is left.

Run: python3 bench/daemon_load.py [--sessions 1000] [--window 20] [--delay-ms 1000]
     (KAGENT=build/kagent by default; run from the source tree)"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "fixtures"))
import daemon_process  # noqa: E402 - starting kagentd, shared with tests/agent/daemon_cases.py
from scripted_replies import chat_reply  # noqa: E402 - the scripted model's replies
from daemon_process import UnixConnection, request  # noqa: E402

RELU = os.path.join(SOURCE, "tests", "fixtures", "problems", "relu.py")
TICKS = os.sysconf("SC_CLK_TCK")
GOAL_KB = 100          # per waiting session
GOAL_CORE_PERCENT = 0.1  # of one core, per waiting session


def proc_sample(pid):
    """(cpu seconds, VmRSS KB, VmHWM KB, threads) of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            status[name] = value.split()[0] if value.split() else ""
    return cpu, int(status["VmRSS"]), int(status["VmHWM"]), int(status["Threads"])


def children_of(pid):
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            pass
    return found


def marked(marker):
    """Processes carrying this run's marker in their environment."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        command = f.read().replace(b"\0", b" ").decode()
                    found.append(f"{entry}: {command}")
        except OSError:
            pass
    return found


def live_turns(socket_path, batch):
    """(sum of the sessions' live turn counters, the time between the request's ends)."""
    started = time.monotonic()
    status, view = request(socket_path, "GET", f"/v1/batches/{batch}")
    ended = time.monotonic()
    total = sum(((s.get("live") or {}).get("turn") or 0) for s in view.get("sessions", []))
    return total, (started + ended) / 2


def hammer(socket_path, path, seconds):
    """Requests per second of one client loop on a kept-alive connection, and failures."""
    connection = UnixConnection(socket_path)
    count = failures = 0
    latencies = []
    end = time.monotonic() + seconds
    while True:
        started = time.monotonic()
        if started >= end:
            break
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                count += 1
                latencies.append(time.monotonic() - started)
            else:
                failures += 1
        except (OSError, http.client.HTTPException):
            failures += 1
            connection.close()
            connection = UnixConnection(socket_path)
    connection.close()
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000 if latencies else float("nan")
    p99 = latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan")
    return count / seconds, failures, p50, p99


class Sampler(threading.Thread):
    def __init__(self, pid, period=0.5):
        super().__init__(daemon=True)
        self.pid, self.period, self.samples, self.stopping = pid, period, [], False

    def run(self):
        while not self.stopping:
            try:
                self.samples.append((time.monotonic(), *proc_sample(self.pid)))
            except OSError:
                return
            time.sleep(self.period)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--window", type=float, default=20, help="seconds of each window")
    parser.add_argument("--delay-ms", type=int, default=1000)
    parser.add_argument("--ramp-timeout", type=float, default=600)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    arguments = parser.parse_args()
    kagent = os.path.abspath(os.environ.get("KAGENT", os.path.join(SOURCE, "build", "kagent")))
    n = arguments.sessions

    folder = tempfile.mkdtemp(prefix="kagent-load-")
    marker = f"KAGENT_LOAD_BENCH={folder}".encode()
    worker_socket = os.path.join(folder, "worker.sock")
    environment = daemon_process.environment(
        folder, worker_socket, KAGENT_LOAD_BENCH=folder,
        FAKE_WORKER_BACKLOG=str(max(64, 2 * n)),
        OPENAI_API_KEY="sk-kagent-bench-0123456789abcdef")
    processes = []
    server = daemon = None
    code = 1
    try:
        problems_dir = os.path.join(folder, "problems")
        os.mkdir(problems_dir)
        problems = []
        for index in range(n):
            path = os.path.join(problems_dir, f"relu_{index:04d}.py")
            shutil.copyfile(RELU, path)
            problems.append(path)
        with open(os.path.join(folder, "script.json"), "w") as f:
            # read_problem: a cheap tool call, no evaluation
            json.dump({"by_turn": [chat_reply([("read_problem", {})], usage=(100, 10),
                                              delay_ms=arguments.delay_ms)]}, f)
        server, port = daemon_process.start_model_server(
            os.path.join(folder, "script.json"), "/dev/null",
            # Its tracebacks for the model calls that the cancel and SIGTERM cut off.
            stderr=open(os.path.join(folder, "server.log"), "w"), backlog=max(64, 2 * n),
            env=environment)
        worker = subprocess.Popen([kagent, "worker", "--socket", worker_socket],
                                  env=environment, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(folder, "worker.log"), "w"))
        processes.append(worker)
        deadline = time.monotonic() + 30
        while not os.path.exists(worker_socket):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the fake worker did not start")
            time.sleep(0.05)
        config = os.path.join(folder, "kagent.yaml")
        daemon_process.write_config(config, port, f"{folder}/runs", worker_socket)
        socket_path = os.path.join(folder, "kagentd.sock")
        log_path = os.path.join(folder, "daemon.log")
        daemon = daemon_process.start_daemon(
            daemon_process.daemon_command(kagent, socket_path, f"sqlite:{folder}/state/kagent.db",
                                          config, n),
            folder, environment, open(log_path, "w"))
        processes.append(daemon)
        time.sleep(1)
        _, idle_rss, idle_hwm, idle_threads = proc_sample(daemon.pid)

        posted = time.monotonic()
        status, created = request(socket_path, "POST", "/v1/batches", {
            "problems": problems,
            "settings": {"max_turns": 0, "max_seconds": 3600, "max_tokens": 0}})
        if status != 201:
            raise RuntimeError(f"POST /v1/batches: {status} {created}")
        batch = created["batch"]
        running = last = 0
        while time.monotonic() - posted < arguments.ramp_timeout:
            status, health = request(socket_path, "GET", "/v1/health")
            running = health.get("sessions_running", 0) if status == 200 else 0
            if running >= n or (status == 200 and health.get("sessions_queued") == 0 and
                                time.monotonic() - posted > 10 and running == last):
                break
            last = running
            if daemon.poll() is not None:
                raise RuntimeError(f"the daemon exited {daemon.returncode} during the ramp")
            time.sleep(0.5)
        ramp = time.monotonic() - posted
        # Let every session reach its first model call before measuring.
        time.sleep(min(5, arguments.window))
        status, view = request(socket_path, "GET", f"/v1/batches/{batch}")
        states = {}
        for session in view.get("sessions", []):
            states[session["state"]] = states.get(session["state"], 0) + 1
        print(f"# {running} sessions running after {ramp:.1f} s; states {states}", flush=True)

        # The quiet window: only the sampler (and one health probe at each end); the turns
        # taken in it from the sessions' live views just before and just after.
        turns_before = live_turns(socket_path, batch)
        sampler = Sampler(daemon.pid)
        sampler.start()
        time.sleep(arguments.window)
        quiet = list(sampler.samples)
        turns_after = live_turns(socket_path, batch)
        _, health_end = request(socket_path, "GET", "/v1/health")
        in_flight = health_end.get("sessions_running", 0)
        # The API windows, sampled too.
        health_rate = hammer(socket_path, "/v1/health", arguments.window / 2)
        batch_rate = hammer(socket_path, f"/v1/batches/{batch}", arguments.window / 2)
        sampler.stopping = True
        sampler.join()
        loaded = sampler.samples[len(quiet):]
        _, health_after = request(socket_path, "GET", "/v1/health")

        cpu_quiet = (quiet[-1][1] - quiet[0][1]) / (quiet[-1][0] - quiet[0][0])
        cpu_api = (loaded[-1][1] - loaded[0][1]) / (loaded[-1][0] - loaded[0][0]) \
            if len(loaded) > 1 else float("nan")
        peak_rss = max(s[2] for s in sampler.samples)
        hwm = sampler.samples[-1][3]
        rss_start, rss_end = quiet[0][2], quiet[-1][2]
        threads = max(s[4] for s in sampler.samples)
        per_session_kb = (peak_rss - idle_rss) / max(1, in_flight)
        per_session_core = 100 * cpu_quiet / max(1, in_flight)
        # Turns per second per session over the quiet window (its ends are those of the
        # live views, a little wider than the samples).
        turn_rate = (turns_after[0] - turns_before[0]) / (turns_after[1] - turns_before[1]) \
            / max(1, in_flight)
        ms_per_turn = 1000 * cpu_quiet / max(1e-9, turn_rate * max(1, in_flight))
        model_turns = sum(1 for line in open(log_path) if "session" in line)  # noqa: SIM115
        children = children_of(daemon.pid)

        rows = [
            ("sessions queued / in flight (health, end of quiet window)",
             f"{n} / {in_flight}", f"{n} in flight"),
            ("ramp: POST to all running", f"{ramp:.1f} s", ""),
            ("daemon RSS idle (no batch)", f"{idle_rss / 1024:.1f} MiB", ""),
            ("daemon RSS, quiet window start -> end",
             f"{rss_start / 1024:.1f} -> {rss_end / 1024:.1f} MiB", ""),
            ("daemon RSS peak sampled / VmHWM", f"{peak_rss / 1024:.1f} / {hwm / 1024:.1f} MiB",
             ""),
            ("(peak RSS - idle) / session", f"{per_session_kb:.1f} KB", f"<= {GOAL_KB} KB"),
            ("daemon CPU, quiet window", f"{100 * cpu_quiet:.1f} % of a core", ""),
            ("daemon CPU / waiting session", f"{per_session_core:.4f} % of a core",
             f"<= {GOAL_CORE_PERCENT} %"),
            ("model turns / s / session, quiet window", f"{turn_rate:.2f}", "1 (nominal)"),
            ("daemon CPU / model turn", f"{ms_per_turn:.2f} ms", ""),
            ("daemon CPU / session at 1 turn/s (projected)",
             f"{ms_per_turn / 10:.3f} % of a core", f"<= {GOAL_CORE_PERCENT} %"),
            ("daemon CPU while the API is hammered", f"{100 * cpu_api:.1f} % of a core", ""),
            ("daemon threads (max) / child processes", f"{threads} / {len(children)}", ""),
            ("GET /v1/health (1 client, keep-alive)",
             f"{health_rate[0]:.0f} req/s, p50 {health_rate[2]:.1f} ms, p99 "
             f"{health_rate[3]:.1f} ms, {health_rate[1]} failed", ""),
            (f"GET /v1/batches/ID ({n} sessions)",
             f"{batch_rate[0]:.1f} req/s, p50 {batch_rate[2]:.1f} ms, p99 "
             f"{batch_rate[3]:.1f} ms, {batch_rate[1]} failed", ""),
            ("sessions running after the API windows",
             f"{health_after.get('sessions_running')}", ""),
        ]
        print("| measure | value | goal |")
        print("| --- | --- | --- |")
        for name, value, goal in rows:
            print(f"| {name} | {value} | {goal} |")
        memory_ok = per_session_kb <= GOAL_KB
        cpu_ok = per_session_core <= GOAL_CORE_PERCENT
        projected_ok = ms_per_turn / 10 <= GOAL_CORE_PERCENT
        print(f"# goals: memory {'met' if memory_ok else 'NOT met'}; CPU "
              f"{'met' if cpu_ok else 'NOT met'} as measured ({turn_rate:.2f} turns/s a "
              f"session), {'met' if projected_ok else 'NOT met'} projected to 1 turn/s; "
              f"{model_turns} session log lines")
        code = 0 if in_flight >= n else 3

        status, cancelled = request(socket_path, "DELETE", f"/v1/batches/{batch}")
        print(f"# cancel: {status}, {len((cancelled or {}).get('interrupted', []))} interrupted",
              flush=True)
    finally:
        if daemon is not None and daemon.poll() is None:
            started = time.monotonic()
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=120)
                print(f"# daemon exit {daemon.returncode} {time.monotonic() - started:.1f} s "
                      f"after SIGTERM")
            except subprocess.TimeoutExpired:
                print("# the daemon did not stop in 120 s after SIGTERM: killed")
                daemon.kill()
                daemon.wait()
                code = code or 4
        daemon_process.stop_processes(processes)
        if server is not None:
            daemon_process.stop_model_server(server)
        time.sleep(0.5)
        left = marked(marker)
        if left:
            print("# left behind:\n" + "\n".join(f"#   {entry}" for entry in left))
            code = code or 5
        else:
            print("# nothing left running")
        if arguments.keep:
            print(f"# kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
