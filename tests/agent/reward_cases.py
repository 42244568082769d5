#!/usr/bin/env python3
"""The reward service end to end on the CPU device (docs/reward-service.md): `kagent daemon
--device cpu` on a private socket, real evaluations by the real runner (torch on the CPU),
driven through the Python client (clients/python, installed with pip into a scratch folder
when setuptools is there, else from the checkout). Checks good and bad candidates in one
request (order kept, baselines measured once), async ids, caps and malformed JSON, the client's
reward() on completions (tests/agent/reward_client_cases.py checks the client without torch),
`kagent eval` through the daemon (same status as --no-daemon), the timing windows in the
verdicts and the daemon's log (bench/timing_windows.py finds no overlap), and SIGTERM with evaluations waiting. Starts the sandboxed runner: run under the sandbox lock.
Prints TAP ending with a line `N passed, N failed`.
Run: KAGENT=build/kagent KAGENT_SOURCE_DIR=. .venv/bin/python3 tests/agent/reward_cases.py"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tap_cases import run_cases

KAGENT = os.path.abspath(os.environ["KAGENT"])
SOURCE = os.path.abspath(os.environ["KAGENT_SOURCE_DIR"])
PROBLEMS = os.path.join(SOURCE, "tests", "fixtures", "problems")
CANDIDATES = os.path.join(SOURCE, "tests", "fixtures", "candidates")
RELU = os.path.join(PROBLEMS, "relu.py")
sys.path.insert(0, os.path.join(SOURCE, "tests", "fixtures"))
import memory_stand_in  # noqa: E402 - a problem that fits only alone
FAST = {"trials": 1, "signed_trials": 0, "no_compile_baseline": True}


def read(path):
    with open(path) as handle:
        return handle.read()


def client_package(folder):
    """kagent_reward installed with pip into folder (setuptools there), else the checkout."""
    package = os.path.join(SOURCE, "clients", "python")
    target = os.path.join(folder, "site")
    try:
        import setuptools  # noqa: F401 - only whether pip can build without the network
        # a copy: a build leaves build/ and *.egg-info beside the sources
        copy = shutil.copytree(package, os.path.join(folder, "client"))
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--target", target, copy], check=True,
                       capture_output=True, text=True, timeout=300)
        where = target
    except (ImportError, subprocess.CalledProcessError) as error:
        print(f"# pip install of the client failed or cannot build here ({error}); "
              f"using the checkout", file=sys.stderr)
        where = package
    sys.path.insert(0, where)
    import kagent_reward

    return kagent_reward, where


class Daemon:
    def __init__(self, folder, lanes=2, arguments=()):
        self.folder = folder
        self.socket = os.path.join(folder, "kagentd.sock")
        self.config = os.path.join(folder, "kagent.yaml")
        with open(self.config, "w") as handle:
            handle.write("provider:\n  model: none\n")
        self.environment = dict(os.environ)
        for name in ("KAGENT_CONFIG", "KAGENT_SOCKET", "KAGENT_RUNNER_DIR"):
            self.environment.pop(name, None)
        self.environment.update({
            "KAGENT_DAEMON_SOCKET": self.socket,
            "KAGENT_WORKER_SOCKET": os.path.join(folder, "none.sock"),
            "KAGENT_CACHE_DIR": os.path.join(folder, "cache"),
            "XDG_CONFIG_HOME": os.path.join(folder, "config"),
            "XDG_STATE_HOME": os.path.join(folder, "state")})
        self.lanes = lanes
        self.arguments = list(arguments)
        self.process = None
        self.log_path = os.path.join(folder, "daemon.log")

    def start(self):
        self.log_file = open(self.log_path, "a")
        self.process = subprocess.Popen(
            [KAGENT, "daemon", "--device", "cpu", "--socket", self.socket, "--store",
             f"sqlite:{self.folder}/kagent.db", "--config", self.config,
             "--evaluation-lanes", str(self.lanes), *self.arguments],
            env=self.environment, stdout=self.log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not os.path.exists(self.socket):
            if self.process.poll() is not None:
                raise RuntimeError(f"the daemon exited: {self.log()}")
            time.sleep(0.05)
        return self

    def log(self):
        with open(self.log_path) as handle:
            return handle.read()[-3000:]

    def stop(self, timeout=60):
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return "killed"


def raw(client, method, path, data):
    """A request with a body as bytes: what the client would never send."""
    connection = client._connection()
    try:
        connection.request(method, path, body=data, headers={"Content-Type":
                                                             "application/json"})
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
    finally:
        connection.close()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text


def good_and_bad(kagent_reward, client, daemon):
    """One synchronous request, good and bad candidates: verdicts in order, the first correct
    one measures the baselines and the second reads them from the cache."""
    names = ["relu_correct.py", "not_python.py", "relu_wrong_shape.py", "relu_raises.py",
             "relu_correct.py"]
    answer = client.request("POST", "/v1/evaluations", {
        "problem_source": read(RELU), "options": FAST,
        "candidates": [read(os.path.join(CANDIDATES, name)) for name in names]})
    statuses = [verdict.get("status") for verdict in answer["verdicts"]]
    problems = []
    expected = ["correct", "compile_error", "incorrect", "runtime_error", "correct"]
    if statuses != expected:
        problems.append(f"statuses {statuses}, expected {expected}")
    if answer.get("state") != "done" or len(answer.get("ids", [])) != len(names):
        problems.append(f"answer: {dict(answer, verdicts='...')}")
    cached = [(verdict.get("timing") or {}).get("baselines_cached")
              for verdict in answer["verdicts"]]
    if cached[0] is not False or cached[4] is not True:
        problems.append(f"baselines_cached per verdict: {cached} (measured once, then cached)")
    if answer.get("gpu_utilization", {}).get("available") is not False:
        problems.append(f"gpu_utilization on the CPU: {answer.get('gpu_utilization')}")
    for verdict in answer["verdicts"]:
        if verdict.get("schema") != "kagent.verdict/1":
            problems.append(f"not a verdict: {json.dumps(verdict)[:300]}")
    # without --prepare-candidates every candidate's process is made when its evaluation comes
    prepared = [verdict.get("candidate_prepared") for verdict in answer["verdicts"]]
    if prepared != [False] * len(names):
        problems.append(f"candidate_prepared per verdict: {prepared}")
    return problems


def async_ids(kagent_reward, client, daemon):
    """async: 202 with ids at once; each id and the request's id read back; unknown ids 404."""
    started = time.monotonic()
    request_id = client.submit(RELU, [read(os.path.join(CANDIDATES, "relu_wrong_shape.py")),
                                      read(os.path.join(CANDIDATES, "relu_correct.py"))],
                               FAST)
    problems = []
    if time.monotonic() - started > 5:
        problems.append("the async POST did not answer at once")
    first = client.get(request_id)
    if first.get("ids") != [f"{request_id}-0", f"{request_id}-1"]:
        problems.append(f"ids: {first.get('ids')}")
    done = client.wait(request_id, timeout=240)
    one = client.get(f"{request_id}-1")
    if one.get("state") != "done" or (one.get("verdict") or {}).get("status") != "correct":
        problems.append(f"{request_id}-1: {json.dumps(one)[:300]}")
    if [v.get("status") for v in done["verdicts"]] != ["incorrect", "correct"]:
        problems.append(f"statuses {[v.get('status') for v in done['verdicts']]}")
    for missing in ("nope", f"{request_id}-2", f"{request_id}-x"):
        try:
            client.get(missing)
            problems.append(f"GET {missing} did not fail")
        except kagent_reward.DaemonError as error:
            if error.status != 404:
                problems.append(f"GET {missing}: {error}")
    return problems


def bad_input(kagent_reward, client, daemon):
    """Malformed JSON and bad keys 400, caps 413, with clear messages; the daemon lives on."""
    problems = []
    cases = [
        (b"{\"candidates\": [", 400, "malformed JSON"),
        (json.dumps({"candidates": ["x"]}).encode(), 400, "problem_source"),
        (json.dumps({"problem_path": "relu.py", "candidates": ["x"]}).encode(), 400,
         "absolute"),
        (json.dumps({"problem_path": "/nonexistent/p.py", "candidates": ["x"]}).encode(), 400,
         "no problem file"),
        (json.dumps({"problem_path": RELU, "candidates": []}).encode(), 400, "candidates"),
        (json.dumps({"problem_path": RELU, "candidates": [3]}).encode(), 400, "not a string"),
        (json.dumps({"problem_path": RELU, "candidates": ["x"], "extra": 1}).encode(), 400,
         "unknown key"),
        (json.dumps({"problem_path": RELU, "candidates": ["x"],
                     "options": {"trials": 0}}).encode(), 400, "trials"),
        (json.dumps({"problem_path": RELU, "candidates": ["x"],
                     "options": {"device": "cuda"}}).encode(), 400, "cpu device"),
        (json.dumps({"problem_path": RELU, "candidates": ["x"],
                     "options": {"device_queues": 33}}).encode(), 400, "device_queues 1-32"),
        (json.dumps({"problem_path": RELU, "candidates": ["x"],
                     "options": {"timing_processes": 9}}).encode(), 400,
         "timing_processes 1-8"),
        (json.dumps({"problem_path": RELU, "candidates": ["x"] * 513}).encode(), 413,
         "at most 512"),
        (json.dumps({"problem_path": RELU, "candidates": ["#" * ((1 << 20) + 1)]}).encode(), 413,
         "over 1048576 bytes"),
        (json.dumps({"problem_source": "#" * ((1 << 20) + 1), "candidates": ["x"]}).encode(), 413,
         "over 1048576 bytes"),
    ]
    for data, status, words in cases:
        got, body = raw(client, "POST", "/v1/evaluations", data)
        if got != status or words not in json.dumps(body):
            problems.append(f"{data[:60]!r}: {got} {str(body)[:200]} (expected {status}, "
                            f"'{words}')")
    got, _ = raw(client, "PUT", "/v1/evaluations", b"{}")
    if got != 405:
        problems.append(f"PUT: {got}")
    health = client.health()
    if health.get("evaluations", {}).get("lanes_per_gpu") != daemon.lanes:
        problems.append(f"health: {health}")
    return problems


def device_queues(kagent_reward, client, daemon):
    """The device_queues option reaches every sandboxed child's environment: the candidate
    that is correct only with one queue (the default) turns incorrect with two."""
    source = read(os.path.join(CANDIDATES, "relu_device_queues.py"))
    statuses = []
    for options in (FAST, dict(FAST, device_queues=2)):
        answer = client.request("POST", "/v1/evaluations", {
            "problem_source": read(RELU), "options": options, "candidates": [source]})
        statuses.append(answer["verdicts"][0].get("status"))
    return [] if statuses == ["correct", "incorrect"] else [
        f"statuses without and with device_queues 2: {statuses}"]


def timing_processes(kagent_reward, client, daemon):
    """The timing_processes option reaches the judge: a call of microseconds (scale_rows) has
    its eager arm and the candidate's timed in three processes, each with calls of its own."""
    answer = client.request("POST", "/v1/evaluations", {
        "problem_source": read(os.path.join(PROBLEMS, "scale_rows.py")),
        "options": dict(FAST, timing_processes=3, no_cache=True),
        "candidates": [read(os.path.join(CANDIDATES, "scale_rows_shape.py"))]})
    verdict = answer["verdicts"][0]
    timing = verdict.get("timing") or {}
    processes = timing.get("processes") or {}
    calls = [((timing.get("wall") or {}).get(arm) or {}).get("process_calls")
             for arm in ("candidate", "eager")]
    if verdict.get("status") != "correct" or (processes.get("candidate"),
                                               processes.get("eager")) != (3, 3) or \
            any(not isinstance(item, list) or len(item) != 3 for item in calls):
        return [f"status {verdict.get('status')}, processes {processes}, calls {calls}"]
    return []


def client_reward(kagent_reward, client, daemon):
    """reward() on completions: code in fences (chat messages too), none, broken, rejected."""
    correct = read(os.path.join(CANDIDATES, "relu_correct.py"))
    completions = [
        f"Here is the kernel.\n\n```python\n{correct}```\nIt should be fast.",
        "I cannot write this kernel.",
        [{"role": "assistant", "content": "```python\nclass ModelNew(:\n    pass\n```"}],
        f"draft:\n```python\nimport torch\n```\nfinal:\n```python\n{correct}```",
    ]
    rewards, verdicts = kagent_reward.score(RELU, completions, client=client, options=FAST)
    problems = []
    statuses = [None if v is None else v.get("status") for v in verdicts]
    if statuses != ["correct", None, "compile_error", "correct"]:
        problems.append(f"statuses {statuses}")
    mapping = kagent_reward.RewardMapping()
    if not (rewards[0] >= mapping.correct + mapping.speedup_floor and
            rewards[1] == mapping.no_code and rewards[2] == mapping.compile_error):
        problems.append(f"rewards {rewards}")
    # several problems in one call (TRL passes one per completion): one request each
    two = kagent_reward.reward([RELU, read(RELU)], completions[:1] * 2, client=client,
                               options=FAST)
    if len(two) != 2 or min(two) < mapping.correct + mapping.speedup_floor:
        problems.append(f"rewards over two problems: {two}")
    return problems


def eval_through_daemon(kagent_reward, client, daemon):
    """kagent eval asks the running daemon (same statuses and exit codes as --no-daemon)."""
    problems = []
    for name, code in (("relu_correct.py", 0), ("relu_wrong_shape.py", 1)):
        path = os.path.join(CANDIDATES, name)
        outputs = []
        for extra in ([], ["--no-daemon"]):
            before = daemon.log().count("queued")
            run = subprocess.run([KAGENT, "eval", "--device", "cpu", "--json", "--trials", "1",
                                  "--signed-trials", "0", "--no-compile-baseline", *extra,
                                  RELU, path], env=daemon.environment, capture_output=True,
                                 text=True, timeout=300)
            through = daemon.log().count("queued") > before
            verdict = json.loads(run.stdout) if run.stdout.strip() else {}
            outputs.append((run.returncode, verdict.get("status"),
                            (verdict.get("candidate") or {}).get("path"), through))
        if outputs[0][:3] != outputs[1][:3] or outputs[0][0] != code:
            problems.append(f"{name}: through the daemon {outputs[0]}, here {outputs[1]}")
        if not outputs[0][3] or outputs[1][3]:
            problems.append(f"{name}: the daemon was used {outputs[0][3]}, with --no-daemon "
                            f"{outputs[1][3]}")
    return problems


def crowded_error_again_alone(kagent_reward, client, daemon):
    """Two candidates on two lanes of one device, for a problem that fits only alone: the one
    that ends in a memory error beside the other is evaluated again alone, and both are
    correct (the lanes share a GPU's memory: docs/reward-service.md)."""
    folder = tempfile.mkdtemp(prefix="kagent-crowded-")
    try:
        path, _ = memory_stand_in.write(folder, hold_seconds=3)
        answer = client.request("POST", "/v1/evaluations", {
            "problem_source": read(path), "options": dict(FAST, no_cache=True),
            "candidates": [read(os.path.join(CANDIDATES, "relu_correct.py"))] * 2})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    problems = []
    outcomes = [verdict.get("status") or f"{verdict.get('error')}: {verdict.get('message')}"
                for verdict in answer["verdicts"]]
    if outcomes != ["correct", "correct"]:
        problems.append(f"outcomes {outcomes}")
    log = daemon.log()
    if "evaluating it again alone" not in log:
        problems.append(f"no evaluation was tried again alone: {log[-1500:]}")
    return problems


def timing_windows(kagent_reward, client, daemon):
    """Four correct candidates on two lanes of one device: each verdict says when it held the
    device's timing lock alone, kagentd logs each window, and bench/timing_windows.py finds
    none overlapping in the log (and finds the overlap in a copy with a forged line)."""
    answer = client.request("POST", "/v1/evaluations", {
        "problem_source": read(RELU), "options": FAST,
        "candidates": [read(os.path.join(CANDIDATES, "relu_correct.py"))] * 4})
    problems = []
    windows = [verdict.get("timing_window") or {} for verdict in answer["verdicts"]]
    if not all(window.get("device") == "cpu" and window.get("gpu_index") is None and
               0 < window.get("start_unix", 0) < window.get("end_unix", 0) for window in windows):
        problems.append(f"timing windows in the verdicts: {windows}")
    log = daemon.log()
    for index in range(4):
        if f"(evaluations {answer['id']}, candidate {index})" not in log:
            problems.append(f"no timing window logged for candidate {index}: {log[-1500:]}")
    checker = os.path.join(SOURCE, "bench", "timing_windows.py")
    checked = subprocess.run([sys.executable, checker, daemon.log_path], capture_output=True,
                             text=True, timeout=60)
    if checked.returncode != 0 or not checked.stdout.startswith("CPU: "):
        problems.append(f"timing_windows.py: exit {checked.returncode}: {checked.stdout}"
                        f"{checked.stderr}")
    forged = os.path.join(daemon.folder, "forged.log")
    start, end = windows[0].get("start_unix", 0), windows[0].get("end_unix", 0)
    with open(forged, "w") as handle:
        handle.write(read(daemon.log_path) + "kagentd: timing window on the CPU: "
                     f"{start + (end - start) / 2:.6f} to {end + 1:.6f} (a forged one)\n")
    checked = subprocess.run([sys.executable, checker, forged], capture_output=True, text=True,
                             timeout=60)
    if checked.returncode != 1 or "and a forged one (" not in checked.stdout:
        problems.append(f"an overlap not found: exit {checked.returncode}: {checked.stdout}")
    return problems


def prepared_candidates(kagent_reward, client, daemon):
    """kagent daemon --prepare-candidates: a lane's worker makes the next candidate's process
    during the current evaluation, so that every new candidate after the lane's first runs in
    one (docs/worker-protocol.md); the verdicts are those of processes made when they came."""
    folder = tempfile.mkdtemp(prefix="kagent-prepared-")
    preparing = Daemon(folder, lanes=1, arguments=["--prepare-candidates"])
    problems = []
    try:
        preparing.start()
        other = kagent_reward.Client(preparing.socket, timeout=600)
        source = read(os.path.join(CANDIDATES, "relu_correct.py"))
        # new candidates: a candidate judged before runs in a process made for it
        candidates = [source + f"\n# variant {index} {time.time_ns()}\n" for index in range(3)]
        candidates.insert(2, read(os.path.join(CANDIDATES, "relu_wrong_shape.py"))
                          + f"\n# {time.time_ns()}\n")
        answer = other.request("POST", "/v1/evaluations", {
            "problem_source": read(RELU), "options": FAST, "candidates": candidates})
        outcomes = [(verdict.get("status"), verdict.get("candidate_prepared"))
                    for verdict in answer["verdicts"]]
        expected = [("correct", False), ("correct", True), ("incorrect", True),
                    ("correct", True)]
        if outcomes != expected:
            problems.append(f"(status, candidate_prepared) {outcomes}, expected {expected}")
    finally:
        if preparing.stop() != 0:
            problems.append(f"the daemon did not stop cleanly: {preparing.log()}")
        shutil.rmtree(folder, ignore_errors=True)
    return problems


def sigterm(kagent_reward, client, daemon):
    """SIGTERM with evaluations queued: exit 0 soon, lane workers gone, socket removed."""
    client.submit(RELU, [read(os.path.join(CANDIDATES, "relu_correct.py"))] * 6, FAST)
    time.sleep(1.0)
    started = time.monotonic()
    code = daemon.stop(timeout=60)
    problems = []
    if code != 0 or time.monotonic() - started > 30:
        problems.append(f"exit {code} after {time.monotonic() - started:.1f} s: {daemon.log()}")
    if os.path.exists(daemon.socket):
        problems.append("the socket is still there")
    left = subprocess.run(["pgrep", "-f", f"kagentd-{daemon.process.pid}-lane"],
                          capture_output=True, text=True).stdout.split()
    if left:
        problems.append(f"lane workers left: {left}")
    return problems


CASES = [
    ("good and bad candidates in one request: order kept, baselines measured once",
     good_and_bad),
    ("async: 202 with ids, each id and the request read back, 404 for others", async_ids),
    ("bad input: malformed JSON and bad keys 400, caps 413, 405", bad_input),
    ("the device_queues option reaches the candidate's process", device_queues),
    ("the timing_processes option reaches the judge", timing_processes),
    ("the client: reward() and score() on completions", client_reward),
    ("kagent eval through the daemon, and --no-daemon, agree", eval_through_daemon),
    ("an error beside another evaluation on the device is tried again alone",
     crowded_error_again_alone),
    ("timing windows: in each verdict and the log, none overlapping on the device",
     timing_windows),
    ("--prepare-candidates: each new candidate after a lane's first runs in a prepared "
     "process", prepared_candidates),
    ("SIGTERM with evaluations queued: exit 0, nothing left", sigterm),
]


def main():
    import importlib.util

    # run in the runner's Python (tests/meson.build): without torch there, nothing evaluates
    if importlib.util.find_spec("torch") is None:
        if os.environ.get("KAGENT_REQUIRE_TORCH") == "1":
            print("1..1\nnot ok 1 - the runner's Python has torch")
            return 1
        print("1..0 # SKIP the runner's Python has no torch (run .ci/setup)")
        return 77
    folder = tempfile.mkdtemp(prefix="kagent-reward-")
    daemon = Daemon(folder)
    try:
        kagent_reward, where = client_package(folder)
        print(f"# kagent_reward from {where}")
        daemon.start()
        # a synchronous request waits for all its verdicts: far longer than one call
        client = kagent_reward.Client(daemon.socket, timeout=600)
        return run_cases(CASES, kagent_reward, client, daemon)
    finally:
        daemon.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
