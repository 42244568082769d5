#!/usr/bin/env python3
"""The Python client (clients/python, package kagent_reward) without torch: the extraction of
a candidate from completions and the reward mapping on their own, then reward() and score()
against `kagent daemon --device cpu` whose workers are the stand-in evaluator (the fake worker
in scripted mode, tests/fixtures/fake_runner: a candidate's `# fake-judge:` line is its
verdict), over the Unix socket and over TCP with the token. tests/agent/reward_cases.py runs
the same client against real CPU evaluations. Prints TAP ending with `N passed, N failed`.
Run: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/agent/reward_client_cases.py"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

KAGENT = os.path.abspath(os.environ["KAGENT"])
SOURCE = os.path.abspath(os.environ["KAGENT_SOURCE_DIR"])
RELU = os.path.join(SOURCE, "tests", "fixtures", "problems", "relu.py")
TOKEN = "kagentd-reward-token-0123456789abcdef"
sys.path.insert(0, os.path.join(SOURCE, "clients", "python"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "fixtures"))
import daemon_process  # noqa: E402 - starting kagentd, shared with tests/agent/daemon_cases.py
import kagent_reward  # noqa: E402
from tap_cases import run_cases  # noqa: E402 - the shared TAP runner, beside this file


def fake_candidate(judge):
    return (f"# fake-judge: {json.dumps(judge)}\nimport torch\n\n\n"
            f"class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            f"        return torch.relu(x)\n")


def fenced(source, before="Here it is.", after="Done."):
    return f"{before}\n\n```python\n{source}```\n{after}"


class Daemon:
    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="kagent-reward-client-")
        self.socket = os.path.join(self.folder, "kagentd.sock")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        token_file = os.path.join(self.folder, "token")
        config = os.path.join(self.folder, "kagent.yaml")
        with open(token_file, "w") as handle:
            handle.write(TOKEN + "\n")
        with open(config, "w") as handle:
            handle.write("provider:\n  model: none\n")
        self.log_path = os.path.join(self.folder, "daemon.log")
        self.log_file = open(self.log_path, "w")
        try:
            self.process = daemon_process.start_daemon(
                daemon_process.daemon_command(
                    KAGENT, self.socket, f"sqlite:{self.folder}/kagent.db", config, 2,
                    "--listen", f"127.0.0.1:{self.port}", "--token-file", token_file,
                    "--evaluation-lanes", "2"),
                self.folder, daemon_process.environment(self.folder), self.log_file)
        except RuntimeError as error:
            raise RuntimeError(f"the daemon did not start: {error}: {self.log()}") from None

    def log(self):
        with open(self.log_path) as handle:
            return handle.read()[-3000:]

    def close(self):
        daemon_process.stop_daemon(self.process)
        self.log_file.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def extraction(daemon):
    """The candidate is the last fenced block that defines ModelNew (chat messages too)."""
    problems = []
    extract = kagent_reward.extract_source
    cases = [
        ("```python\nclass ModelNew:\n    pass\n```", "class ModelNew:\n    pass\n"),
        ("```\nclass ModelNew: pass\n```", "class ModelNew: pass\n"),
        ("class ModelNew: pass", "class ModelNew: pass\n"),
        ("```python\nprint(1)\n```", None),
        ("no code", None),
        ("```python\nclass ModelNew: a\n```\nbetter:\n```python\nclass ModelNew: b\n```",
         "class ModelNew: b\n"),
        ([{"role": "user", "content": "```python\nclass ModelNew: x\n```"}], None),
        ({"role": "assistant", "content": [{"type": "text",
                                            "text": "```py\nclass ModelNew: y\n```"}]},
         "class ModelNew: y\n"),
    ]
    for completion, expected in cases:
        if extract(completion) != expected:
            problems.append(f"extract({completion!r}) = {extract(completion)!r}")
    return problems


def mapping(daemon):
    """Each outcome's reward, as docs/reward-service.md tables it."""
    value = kagent_reward.reward_from_verdict
    fast = {"status": "correct", "timing": {"speedup_vs_eager": 4.0},
            "credit": {"credited": True}}
    table = [(None, 0.0), ({"status": "compile_error"}, 0.0), ({"status": "timeout"}, 0.1),
             ({"status": "crashed"}, 0.1), ({"status": "incorrect"}, 0.2),
             ({"status": "rejected"}, -1.0), ({"schema": "x", "error": "worker"}, 0.0),
             (fast, 2.0), (dict(fast, credit={"credited": False}), 1.0),
             (dict(fast, timing={"speedup_vs_eager": 1000.0}), 3.0),
             (dict(fast, timing={"speedup_vs_eager": 0.01}), 0.5),
             (dict(fast, timing={"speedup_vs_eager": None}), 1.0)]
    problems = []
    for verdict, expected in table:
        if abs(value(verdict) - expected) > 1e-9:
            problems.append(f"reward_from_verdict({verdict}) = {value(verdict)}, "
                            f"expected {expected}")
    custom = kagent_reward.RewardMapping(incorrect=-0.5, speedup_weight=1.0)
    if value({"status": "incorrect"}, custom) != -0.5 or value(fast, custom) != 3.0:
        problems.append("a custom mapping is not used")
    return problems


def rewards_over_socket(daemon):
    """score() over the Unix socket: one reward and verdict per completion, in order."""
    client = kagent_reward.Client(daemon.socket)
    completions = [fenced(fake_candidate({"speedup": 2.0})),
                   "I give up.",
                   fenced(fake_candidate({"status": "incorrect"})),
                   [{"role": "assistant", "content": fenced(fake_candidate({"speedup": 4.0}))}]]
    rewards, verdicts = kagent_reward.score(RELU, completions, client=client)
    problems = []
    statuses = [None if v is None else v.get("status") for v in verdicts]
    if statuses != ["correct", None, "incorrect", "correct"]:
        problems.append(f"statuses {statuses}")
    expected = [1.5, 0.0, 0.2, 2.0]
    if any(abs(a - b) > 1e-6 for a, b in zip(rewards, expected)):
        problems.append(f"rewards {rewards}, expected {expected}")
    # one problem per completion, as TRL passes a column: two problems, two requests
    with open(RELU) as handle:
        source = handle.read()
    two = kagent_reward.reward([RELU, source, RELU], [completions[0]] * 3, client=client)
    if any(abs(value - 1.5) > 1e-6 for value in two):
        problems.append(f"rewards over two problems: {two}")
    if daemon.log().count("queued") < 3:
        problems.append("fewer requests than problems: " + daemon.log())
    return problems


def rewards_over_tcp(daemon):
    """The same over TCP: the token from KAGENT_TOKEN; a wrong one is a DaemonError 401."""
    os.environ["KAGENT_TOKEN"] = TOKEN
    try:
        client = kagent_reward.Client(f"http://127.0.0.1:{daemon.port}")
        rewards = kagent_reward.reward(RELU, [fenced(fake_candidate({"speedup": 2.0}))],
                                       client=client)
    finally:
        del os.environ["KAGENT_TOKEN"]
    problems = [] if rewards == [1.5] else [f"over TCP: {rewards}"]
    try:
        kagent_reward.Client(f"http://127.0.0.1:{daemon.port}", token="wrong").health()
        problems.append("a wrong token was accepted")
    except kagent_reward.DaemonError as error:
        if error.status != 401:
            problems.append(f"a wrong token: {error}")
    return problems


def errors(daemon):
    """A daemon's refusal and a missing daemon are DaemonErrors that say what to do."""
    problems = []
    client = kagent_reward.Client(daemon.socket)
    try:
        client.evaluate("/nonexistent/problem.py", ["class ModelNew: pass"])
        problems.append("a missing problem file was accepted")
    except kagent_reward.DaemonError as error:
        if error.status != 400 or "no problem file" not in str(error):
            problems.append(f"a missing problem file: {error}")
    try:
        kagent_reward.Client(os.path.join(daemon.folder, "absent.sock")).health()
        problems.append("no error without a daemon")
    except kagent_reward.DaemonError as error:
        if "kagent daemon" not in str(error):
            problems.append(f"the error without a daemon: {error}")
    if client.evaluate(RELU, []) != []:
        problems.append("no candidates is not an empty list")
    return problems


def sigterm(daemon):
    """SIGTERM with evaluations running and waiting: exit 0 (under ASan: nothing leaked)."""
    client = kagent_reward.Client(daemon.socket)
    client.submit(RELU, [fake_candidate({"delay_seconds": 2})] * 5)
    time.sleep(0.5)
    daemon.process.send_signal(signal.SIGTERM)
    try:
        code = daemon.process.wait(30)
    except subprocess.TimeoutExpired:
        return ["no exit 30 s after SIGTERM: " + daemon.log()]
    return [] if code == 0 else [f"exit {code}: {daemon.log()}"]


def lanes_serve_their_gpu(daemon):
    """kagent daemon --device cuda --gpus 0,1, on the stand-in driver (two devices) and the
    stand-in evaluator: each lane's worker is started for its GPU alone (kagent worker --gpu),
    and every evaluation it is given names that GPU (docs/reward-service.md)."""
    fake_driver = os.environ.get("KAGENT_FAKE_LIBCUDA")
    if not fake_driver:
        return "no stand-in driver (it is built with the CUDA toolkit)"
    folder = tempfile.mkdtemp(prefix="kagent-reward-gpus-")
    worker_log = os.path.join(folder, "worker.jsonl")
    config = os.path.join(folder, "kagent.yaml")
    with open(config, "w") as handle:
        handle.write("provider:\n  model: none\n")
    command = daemon_process.daemon_command(
        KAGENT, os.path.join(folder, "kagentd.sock"), f"sqlite:{folder}/kagent.db", config, 2,
        "--evaluation-lanes", "1")
    command[command.index("cpu")] = "cuda"
    command += ["--gpus", "0,1"]
    environment = daemon_process.environment(folder, KAGENT_LIBCUDA=fake_driver,
                                             FAKE_CUDA_DEVICE_COUNT="2",
                                             FAKE_WORKER_GPU_LOG=worker_log)
    log_file = open(os.path.join(folder, "daemon.log"), "w")
    process = None
    problems = []
    try:
        process = daemon_process.start_daemon(command, folder, environment, log_file)
        client = kagent_reward.Client(command[command.index("--socket") + 1], timeout=60)
        verdicts = client.evaluate(RELU, [fake_candidate({"speedup": 1.0 + index / 10})
                                          for index in range(4)])
        if [verdict.get("status") for verdict in verdicts] != ["correct"] * 4:
            problems.append(f"verdicts {verdicts}")
        with open(worker_log) as handle:
            asked = [json.loads(line) for line in handle]
        pairs = sorted((request.get("gpu_index"), request.get("worker_gpu"))
                       for request in asked if request.get("type") == "evaluate")
        if len(pairs) != 4 or {pair[0] for pair in pairs} != {0, 1} or any(
                str(gpu) != worker for gpu, worker in pairs):
            problems.append(f"(request's GPU, worker's --gpu) {pairs}")
    except RuntimeError as error:
        problems.append(str(error))
    finally:
        if daemon_process.stop_daemon(process) != 0:
            problems.append("the daemon did not stop cleanly")
        log_file.close()
        if problems:
            with open(os.path.join(folder, "daemon.log")) as handle:
                problems.append(handle.read()[-2000:])
        shutil.rmtree(folder, ignore_errors=True)
    return problems


CASES = [
    ("extract_source: the last fenced block defining ModelNew", extraction),
    ("reward_from_verdict: the documented mapping", mapping),
    ("score() over the Unix socket, and one request per problem", rewards_over_socket),
    ("reward() over TCP with the token", rewards_over_tcp),
    ("errors: a refusal, no daemon, nothing to judge", errors),
    ("a CUDA daemon's lanes: each worker serves its GPU alone", lanes_serve_their_gpu),
    ("SIGTERM with evaluations running: exit 0", sigterm),
]


def main():
    daemon = Daemon()
    try:
        return run_cases(CASES, daemon)
    finally:
        daemon.close()


if __name__ == "__main__":
    sys.exit(main())
