#!/usr/bin/env python3
"""The agent loop end to end without a GPU: `kagent optimize` against the scripted model
server (tests/fixtures/llm_server.py) speaking OpenAI Chat Completions, the Responses API and
Anthropic Messages, with the stand-in evaluator (the fake worker in scripted mode, which judges
a candidate by its `# fake-judge:` line). Checks the loop, tool errors, retries, budgets and
stop rules, confirmation on unseen seeds, the git history, the trace, --resume, and that
every way a run ends (a signal, a closed stdout, kill -9) leaves no process or socket behind.
Prints TAP ending with a line `N passed, N failed`.
Run: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/agent/optimize_cases.py"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from tap_cases import run_cases

KAGENT = os.path.abspath(os.environ["KAGENT"])
SOURCE = os.path.abspath(os.environ["KAGENT_SOURCE_DIR"])
SERVER = os.path.join(SOURCE, "tests", "fixtures", "llm_server.py")
sys.path.insert(0, os.path.dirname(SERVER))
import scripted_replies  # noqa: E402 - the scripted model's Chat Completions replies
PROBLEM = os.path.join(SOURCE, "tests", "fixtures", "problems", "relu.py")
SECRET = "sk-kagent-test-secret-0123456789"
GIT = shutil.which("git")


def candidate(judge, tag):
    return (f"# fake-judge: {json.dumps(judge)}\nimport torch\n\n\n"
            f"class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            f"        return torch.relu(x)  # {tag}\n")


PIECE = 17  # characters of a tool call's arguments per streamed event


def pieces(text, size=PIECE):
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def arguments_text(arguments):
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


# ---- one model reply in each wire format: (name, arguments) calls, arguments split ----

def chat_reply(calls, text="", usage=(1000, 200)):
    return scripted_replies.chat_reply(calls, text, usage, piece_size=PIECE)


def anthropic_reply(calls, text="", usage=(1000, 200)):
    events = [{"event": "message_start", "data": {"type": "message_start", "message": {
        "id": "msg_1", "model": "scripted", "usage": {"input_tokens": usage[0],
                                                      "output_tokens": 1}}}}]
    block = 0
    if text:
        events += [{"event": "content_block_start", "data": {
            "type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}},
            {"event": "content_block_delta", "data": {
                "type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}},
            {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": 0}}]
        block = 1
    for offset, (name, arguments) in enumerate(calls):
        index = block + offset
        events.append({"event": "content_block_start", "data": {
            "type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": f"toolu_{index}", "name": name,
                              "input": {}}}})
        for piece in pieces(arguments_text(arguments)):
            events.append({"event": "content_block_delta", "data": {
                "type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}}})
        events.append({"event": "content_block_stop",
                       "data": {"type": "content_block_stop", "index": index}})
    events.append({"event": "message_delta", "data": {
        "type": "message_delta", "delta": {"stop_reason": "tool_use" if calls else "end_turn"},
        "usage": {"output_tokens": usage[1]}}})
    events.append({"event": "message_stop", "data": {"type": "message_stop"}})
    return {"status": 200, "sse": events}


def responses_reply(calls, text="", usage=(1000, 200)):
    events = [{"event": "response.created", "data": {
        "type": "response.created", "response": {"id": "resp_1", "model": "scripted"}}}]
    for index, (name, arguments) in enumerate(calls):
        item = {"type": "function_call", "id": f"fc_{index}", "call_id": f"call_{index}",
                "name": name, "arguments": ""}
        events.append({"event": "response.output_item.added", "data": {
            "type": "response.output_item.added", "output_index": index, "item": item}})
        for piece in pieces(arguments_text(arguments)):
            events.append({"event": "response.function_call_arguments.delta", "data": {
                "type": "response.function_call_arguments.delta", "item_id": f"fc_{index}",
                "output_index": index, "delta": piece}})
    events.append({"event": "response.completed", "data": {
        "type": "response.completed", "response": {
            "id": "resp_1", "status": "completed",
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}}})
    return {"status": 200, "sse": events}


FORMATS = {"chat_completions": chat_reply, "anthropic": anthropic_reply,
           "responses": responses_reply}


class Run:
    """A scratch folder, the scripted server and one kagent optimize process."""

    def __init__(self, exchanges, api="chat_completions"):
        self.folder = tempfile.mkdtemp(prefix="kagent-optimize-")
        self.api = api
        self.script = os.path.join(self.folder, "script.json")
        self.server_log = os.path.join(self.folder, "server.jsonl")
        self.worker_log = os.path.join(self.folder, "worker.jsonl")
        self.output = os.path.join(self.folder, "runs")
        with open(self.script, "w") as f:
            json.dump({"exchanges": exchanges}, f)
        self.server = subprocess.Popen([sys.executable, SERVER, "--script", self.script,
                                        "--log", self.server_log, "--port", "0"],
                                       stdout=subprocess.PIPE, text=True)
        line = self.server.stdout.readline()
        self.port = int(line.split()[1])
        self.environment = dict(os.environ)
        for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                     "KAGENT_CONFIG"):
            self.environment.pop(name, None)
        self.environment.update({
            "KAGENT_RUNNER_DIR": os.path.join(SOURCE, "tests", "fixtures", "fake_runner"),
            "FAKE_WORKER_MODE": "scripted", "FAKE_WORKER_LOG": self.worker_log,
            "KAGENT_WORKER_SOCKET": os.path.join(self.folder, "none.sock"),
            "KAGENT_CACHE_DIR": os.path.join(self.folder, "cache"),
            "XDG_CONFIG_HOME": os.path.join(self.folder, "config"),
            "OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET})

    def base_url(self):
        suffix = "" if self.api == "anthropic" else "/v1"
        return f"http://127.0.0.1:{self.port}{suffix}"

    def command(self, *extra, problem=PROBLEM):
        return [KAGENT, "optimize", problem, "--device", "cpu", "--base-url", self.base_url(),
                "--model", "scripted-model", "--api", self.api, "--output", self.output,
                "--json", *extra]

    def optimize(self, *extra, problem=PROBLEM, timeout=120):
        result = subprocess.run(self.command(*extra, problem=problem), cwd=self.folder,
                                env=self.environment, capture_output=True, text=True,
                                timeout=timeout)
        self.code, self.stdout, self.stderr = result.returncode, result.stdout, result.stderr
        try:
            self.final = json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.final = None
        return self

    def requests(self):
        if not os.path.exists(self.server_log):
            return []
        with open(self.server_log) as f:
            return [json.loads(line) for line in f]

    def evaluations(self):
        """How many evaluate requests reached the worker (the problem check is not one)."""
        if not os.path.exists(self.worker_log):
            return 0
        with open(self.worker_log) as f:
            return sum(1 for line in f if json.loads(line).get("type") == "evaluate")

    def trace(self):
        path = (self.final or {}).get("trace")
        if not path or not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]

    def types(self):
        return [record["type"] for record in self.trace()]

    def git(self, *arguments):
        repository = os.path.join(self.output, "relu", "repository.git")
        return subprocess.run([GIT, "--git-dir", repository, *arguments], capture_output=True,
                              text=True).stdout

    def close(self):
        self.server.terminate()
        self.server.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)

    def describe(self):
        return (f"exit {self.code}\nstdout: {self.stdout[-1500:]}\nstderr: {self.stderr[-2500:]}"
                f"\ntypes: {self.types()}")


# ---- scenarios: each returns a list of problems (empty: passed) ----

def happy_path(api):
    def scenario():
        reply = FORMATS[api]
        slow, fast = candidate({"speedup": 1.2}, "v1"), candidate({"speedup": 2.0}, "v2")
        run = Run([reply([("read_problem", {}), ("evaluate", {"source": slow, "note": "first"})]),
                   reply([("evaluate", {"source": fast})], text="Trying a faster one."),
                   reply([("finish", {"summary": "done"})])], api=api)
        try:
            run.optimize("--target", "1.5")
            problems = []
            final = run.final or {}
            if run.code != 0 or final.get("variant") != "v2" or not final.get("confirmed"):
                problems.append("v2 should be confirmed as the best: " + run.describe())
                return problems
            if final.get("stop_reason") != "target_reached":
                problems.append(f"stop reason {final.get('stop_reason')}")
            with open(final["path"]) as f:
                if f.read() != fast:
                    problems.append("best.py is not v2's source")
            types = run.types()
            for needed in ("run_start", "message", "request", "stream", "reply", "tool_call",
                           "tool_result", "verdict", "commit", "best", "turn_end", "stop",
                           "final"):
                if needed not in types:
                    problems.append(f"the trace lacks a {needed} record")
            with open(final["trace"]) as f:
                if SECRET in f.read():
                    problems.append("the API key reached the trace")
            requests = run.requests()
            if len(requests) != 2:
                problems.append(f"{len(requests)} model requests, expected 2 (target reached)")
            headers = requests[0]["headers"] if requests else {}
            if SECRET not in json.dumps(headers):
                problems.append("the key was not sent to the endpoint")
            second = json.dumps(requests[1]["body"]) if len(requests) > 1 else ""
            if "v1 correct" not in second:
                problems.append("the second request does not carry v1's verdict")
            # request records carry only the new part of the message list ("earlier"), and
            # the bodies rebuilt from them are the bodies the endpoint received
            recorded = [r for r in run.trace() if r.get("type") == "request"]
            previous, previous_tools = [], None
            for index, record in enumerate(recorded):
                body = dict(record["body"])
                key = "messages" if "messages" in body else "input"
                body[key] = previous[:record.get("earlier", 0)] + body[key]
                previous = body[key]
                if record.get("tools_earlier"):
                    if "tools" in body:
                        problems.append(f"request record {index + 1} repeats the tools")
                    body["tools"] = previous_tools
                previous_tools = body.get("tools")
                if index < len(requests) and body != requests[index]["body"]:
                    problems.append(f"request {index + 1} rebuilt from the trace differs "
                                    "from the body sent")
            if len(recorded) > 1 and not recorded[1].get("earlier"):
                problems.append("the second request record repeats the whole conversation")
            if len(recorded) > 1 and not recorded[1].get("tools_earlier"):
                problems.append("the second request record repeats the tool definitions")
            if GIT:
                log = run.git("log", "--format=%s%n%b", f"runs/{final['run_id']}")
                if log.count("Kagent-Status: correct") != 2:
                    problems.append("runs/ branch lacks two commits with verdict trailers:\n"
                                    + log)
                best = run.git("rev-parse", f"best/{final['run_id']}").strip()
                if best != final.get("commit"):
                    problems.append(f"best/ ref {best} is not v2's commit {final.get('commit')}")
            return problems
        finally:
            run.close()
    return scenario


def faults():
    """429 with Retry-After, a 500, a stream cut in the middle, arguments split into
    single bytes, malformed arguments, an unknown tool and a missing argument."""
    good = candidate({"speedup": 1.6}, "good")
    bad_arguments = chat_reply([("evaluate", '{"source": "unterminated')])
    unknown = chat_reply([("launch_rockets", {}), ("evaluate", {})])
    cut = dict(chat_reply([("read_problem", {})]), cut_after=2)
    split = dict(chat_reply([("evaluate", {"source": good})]), chunk_bytes=1)
    run = Run([{"status": 429, "headers": {"retry-after": "1"},
                "body": {"error": {"message": "slow down", "type": "rate_limit"}}},
               bad_arguments,
               {"status": 500, "body": {"error": {"message": "boom"}}},
               unknown,
               cut, chat_reply([("read_problem", {})]),
               split,
               chat_reply([("finish", {"summary": "ok"})])])
    try:
        started = time.monotonic()
        run.optimize("--target", "1.5")
        problems = []
        if run.code != 0 or not (run.final or {}).get("confirmed"):
            return ["the run should survive every fault: " + run.describe()]
        if time.monotonic() - started < 1.0:
            problems.append("Retry-After: 1 was not waited for")
        trace = run.trace()
        retries = [record for record in trace if record["type"] == "retry"]
        if len(retries) < 3:
            problems.append(f"{len(retries)} retry records, expected 429, 500 and the cut")
        errors = [record["content"] for record in trace
                  if record["type"] == "tool_result" and record["is_error"]]
        for needle in ("not valid JSON", "no tool \"launch_rockets\"", "needs the argument"):
            if not any(needle in error for error in errors):
                problems.append(f"no tool error saying {needle!r}: {errors}")
        return problems
    finally:
        run.close()


def budget_turns():
    """Out of turns without reaching the target: the fastest correct variant is checked
    and announced, exit status 1."""
    slow = candidate({"speedup": 1.1}, "slow")
    slower = candidate({"speedup": 0.9}, "slower")
    run = Run([chat_reply([("evaluate", {"source": slow})]),
               chat_reply([("evaluate", {"source": slower})]),
               chat_reply([("finish", {"summary": "never reached"})])])
    try:
        run.optimize("--target", "3", "--max-turns", "2")
        final = run.final or {}
        problems = []
        if run.code != 1 or final.get("stop_reason") != "budget_turns":
            return ["expected a budget_turns stop with exit 1: " + run.describe()]
        if final.get("variant") != "v1" or not final.get("confirmed"):
            problems.append(f"the fastest correct variant v1 should be announced: {final}")
        if len(run.requests()) != 2:
            problems.append(f"{len(run.requests())} requests with --max-turns 2")
        return problems
    finally:
        run.close()


def hard_coded_shape():
    """The final check asks for the generalisation gate (and only it does): a best variant
    that fails at other sizes is still the best, but the final summary says it does not
    generalise, in the JSON and in the text."""
    fixed = candidate({"speedup": 2.0, "generalises": False}, "fixed")
    run = Run([chat_reply([("evaluate", {"source": fixed})]),
               chat_reply([("finish", {"summary": "done"})])])
    try:
        run.optimize("--target", "1.5")
        final = run.final or {}
        if run.code != 0 or not final.get("confirmed"):
            return ["the variant should be confirmed: " + run.describe()]
        problems = []
        outcome = (final.get("confirmation") or {}).get("generalisation") or {}
        if outcome.get("generalises") is not False or "dim 4096 -> 2049" not in str(
                outcome.get("reason")):
            problems.append(f"the final summary's generalisation: {outcome}")
        if "does not generalise: at sizes batch_size 64 -> 33" not in run.stderr:
            problems.append("the final line does not say it: " + run.stderr[-1500:])
        with open(run.worker_log) as f:
            asked = [json.loads(line).get("generalisation") for line in f]
        if asked.count(True) != 1 or asked[-1] is not True:
            problems.append(f"only the final check should ask for it: {asked}")
        return problems
    finally:
        run.close()


def budget_cost():
    """Prices from the config make each turn cost $1.20: a $1 budget stops after one turn,
    and the cost is accounted in the reply and the totals."""
    run = Run([chat_reply([("evaluate", {"source": candidate({"speedup": 1.1}, "a")})]),
               chat_reply([("finish", {"summary": "x"})])])
    try:
        with open(os.path.join(run.folder, "kagent.yaml"), "w") as f:
            f.write("provider:\n  prices: {input: 1000, output: 1000}\n")
        run.optimize("--target", "3", "--max-cost", "1")
        final = run.final or {}
        if final.get("stop_reason") != "budget_cost" or len(run.requests()) != 1:
            return ["expected a budget_cost stop after one request: " + run.describe()]
        replies = [r for r in run.trace() if r["type"] == "reply"]
        if abs(replies[0]["cost"] - 1.2) > 1e-9 or abs(final["totals"]["cost"] - 1.2) > 1e-9:
            return [f"cost {replies[0]['cost']}, totals {final['totals']}, expected 1.2"]
        return []
    finally:
        run.close()


def unconfirmed_target():
    """A variant fast in its evaluation but not on unseen seeds does not end the run."""
    lucky = candidate({"speedups": [2.0, 1.0]}, "lucky")
    run = Run([chat_reply([("evaluate", {"source": lucky})]),
               chat_reply([("commit", {"variant": "v1", "message": "try"}),
                           ("finish", {"summary": "gave up"})])])
    try:
        run.optimize("--target", "1.5")
        problems = []
        if run.final is None or run.final.get("stop_reason") != "model_finished":
            return ["the run should go on and end when the model finishes: " + run.describe()]
        requests = run.requests()
        if len(requests) != 2 or "not when re-checked on unseen seeds" not in json.dumps(
                requests[1]["body"]):
            problems.append("the model was not told that v1 failed its confirmation")
        if run.code != 1:
            problems.append(f"exit {run.code}, expected 1 (target not reached)")
        return problems
    finally:
        run.close()


def no_model_configured():
    run = Run([])
    try:
        command = [KAGENT, "optimize", PROBLEM, "--device", "cpu", "--output", run.output]
        result = subprocess.run(command, cwd=run.folder, env=run.environment,
                                capture_output=True, text=True, timeout=60)
        if result.returncode != 2 or "provider.model" not in result.stderr:
            return [f"exit {result.returncode}: {result.stderr}"]
        return []
    finally:
        run.close()


def refused_key():
    run = Run([{"status": 401, "body": {"error": {"message": "Incorrect API key provided",
                                                  "type": "invalid_request_error"}}}])
    try:
        run.optimize()
        text = run.stderr + run.stdout
        if run.code != 2 or "OPENAI_API_KEY" not in text or "Incorrect API key" not in text:
            return ["a refused key should say what to set: " + run.describe()]
        if len(run.requests()) != 1:
            return ["a 401 must not be retried"]
        return []
    finally:
        run.close()


def no_gpu():
    run = Run([chat_reply([("finish", {"summary": "x"})])])
    try:
        run.environment["KAGENT_LIBCUDA"] = os.path.join(run.folder, "no-libcuda.so")
        command = run.command()
        command[command.index("cpu")] = "cuda"
        result = subprocess.run(command, cwd=run.folder, env=run.environment,
                                capture_output=True, text=True, timeout=60)
        if result.returncode != 2 or "no GPU" not in result.stderr:
            return [f"exit {result.returncode}: {result.stderr}"]
        if run.requests():
            return ["tokens were spent without a GPU"]
        return []
    finally:
        run.close()


def malformed_problem():
    run = Run([])
    try:
        bad = os.path.join(run.folder, "bad.py")
        with open(bad, "w") as f:
            f.write("print('no model here')\n")
        run.optimize(problem=bad)
        if run.code != 2 or "defines no class Model" not in run.stderr or run.requests():
            return ["a problem without Model should be refused before any request: "
                    + run.describe()]
        return []
    finally:
        run.close()


BAD_PROBLEMS = {
    "syntax": ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x)\n"
               "        return x\n\n\ndef get_inputs():\n    return [torch.rand(4)]\n",
               "not valid Python: "),
    "no_inputs": ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                  "        return x\n\n\ndef get_init_inputs():\n    return []\n",
                  "defines no function get_inputs()"),
    "inputs_raise": ("class Model:\n    def forward(self, x):\n        return x\n\n\n"
                     "def get_inputs():\n    raise ValueError('no inputs today')\n",
                     "get_inputs() failed: ValueError: no inputs today"),
}


def bad_problem(name):
    """A problem that cannot be used is refused before the first request, as `kagent eval`
    refuses it: exit 2, the reason on stderr, one error object with --json, and the check in
    the trace; --resume of such a run is refused the same way."""
    def scenario():
        source, needle = BAD_PROBLEMS[name]
        run = Run([chat_reply([("finish", {"summary": "x"})])])
        try:
            path = os.path.join(run.folder, f"{name}.py")
            with open(path, "w") as f:
                f.write(source)
            run.optimize(problem=path)
            problems = []
            error = run.final or {}
            if (run.code != 2 or needle not in run.stderr or error.get("error") != "problem"
                    or needle not in error.get("message", "")):
                problems.append("the problem should be refused with exit 2: " + run.describe())
            if run.requests():
                problems.append(f"{len(run.requests())} requests reached the model")
            if run.evaluations():
                problems.append("a candidate was evaluated")
            traces = os.path.join(run.output, name, "traces")
            names = sorted(os.listdir(traces)) if os.path.isdir(traces) else []
            if not names:
                return problems + ["the refused run left no trace"]
            with open(os.path.join(traces, names[0])) as f:
                records = [json.loads(line) for line in f]
            types = [record["type"] for record in records]
            checks = [r for r in records if r["type"] == "problem_check"]
            stops = [r for r in records if r["type"] == "stop"]
            if (not checks or checks[0].get("status") != "bad_problem"
                    or not stops or stops[0].get("reason") != "bad_problem"
                    or "message" in types or needle not in stops[0].get("detail", "")):
                problems.append(f"the trace does not record the refusal: {records}")
            run.optimize("--resume", names[0][:-len(".jsonl")], problem=path)
            if run.code != 2 or needle not in run.stderr or run.requests():
                problems.append("--resume should be refused the same way: " + run.describe())
            return problems
        finally:
            run.close()
    return scenario


def stalled_reply():
    """A reply that stops arriving is abandoned after provider.stall_seconds and retried."""
    stalled = dict(chat_reply([("finish", {"summary": "x"})]), stall_after=1, stall_ms=8000)
    run = Run([stalled, chat_reply([("finish", {"summary": "x"})])])
    try:
        with open(os.path.join(run.folder, "kagent.yaml"), "w") as f:
            f.write("provider:\n  stall_seconds: 1\n")
        run.optimize()
        retries = [r for r in run.trace() if r["type"] == "retry"]
        if not retries or retries[0].get("failure") != "stalled":
            return ["a stalled reply should be retried: " + run.describe()]
        return []
    finally:
        run.close()


def resume_after_kill():
    """kill -9 in the middle of the evaluation of v2, then --resume: the conversation,
    variants and numbering continue, the open tool call gets an answer, and the run ends
    normally."""
    first = candidate({"speedup": 1.1}, "first")
    stuck = candidate({"speedup": 1.2, "delay_seconds": 60}, "stuck")
    third = candidate({"speedup": 1.9}, "third")
    run = Run([chat_reply([("evaluate", {"source": first})]),
               chat_reply([("evaluate", {"source": stuck})])])
    try:
        process = subprocess.Popen(run.command("--target", "1.5"), cwd=run.folder,
                                   env=run.environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and run.evaluations() < 2:
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        traces = os.path.join(run.output, "relu", "traces")
        names = [name for name in os.listdir(traces) if name.endswith(".jsonl")] \
            if os.path.isdir(traces) else []
        if not names:
            return ["no trace after the first turn"]
        run_id = names[0][:-len(".jsonl")]
        run.server.terminate()
        run.server.wait(timeout=10)
        with open(run.script, "w") as f:
            json.dump({"exchanges": [chat_reply([("evaluate", {"source": third})]),
                                     chat_reply([("finish", {"summary": "x"})])]}, f)
        os.unlink(run.server_log)
        run.server = subprocess.Popen([sys.executable, SERVER, "--script", run.script, "--log",
                                       run.server_log, "--port", "0"],
                                      stdout=subprocess.PIPE, text=True)
        run.port = int(run.server.stdout.readline().split()[1])
        run.optimize("--target", "1.5", "--resume", run_id)
        final = run.final or {}
        problems = []
        if run.code != 0 or final.get("variant") != "v3" or final.get("run_id") != run_id:
            return ["the resumed run should confirm v3: " + run.describe()]
        body = json.dumps(run.requests()[0]["body"])
        if "v1 correct" not in body or "interrupted before this call finished" not in body:
            problems.append("the resumed conversation lacks v1's verdict or the answer to "
                            "the interrupted call")
        sequence = [record["seq"] for record in run.trace()]
        if sequence != list(range(1, len(sequence) + 1)):
            problems.append("trace numbering does not continue across the resume")
        if [r for r in run.trace() if r["type"] == "run_start"][-1].get("resumed") is not True:
            problems.append("the second run_start is not marked resumed")
        if GIT:
            log = run.git("log", "--format=%s", f"runs/{run_id}")
            if [line.split(":")[0] for line in log.splitlines()][:2] != ["v3", "v1"]:
                problems.append(f"the run branch should hold v1 then v3: {log}")
        return problems
    finally:
        run.close()


def interrupted():
    """Ctrl-C during an evaluation: the run stops after that step, keeps its trace and says
    how to resume."""
    slow = candidate({"speedup": 1.2, "delay_seconds": 3}, "slow")
    run = Run([chat_reply([("evaluate", {"source": slow})]),
               chat_reply([("finish", {"summary": "x"})])])
    try:
        process = subprocess.Popen(run.command("--target", "1.5"), cwd=run.folder,
                                   env=run.environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and run.evaluations() < 1:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
        run.code, run.stdout, run.stderr = process.returncode, stdout, stderr
        run.final = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
        final = run.final or {}
        if final.get("stop_reason") != "interrupted" or "--resume" not in stderr \
                or run.code != 130:
            return ["an interrupted run should stop, say how to resume and exit 130: "
                    + run.describe()]
        if len(run.requests()) != 1:
            return [f"{len(run.requests())} model requests after Ctrl-C, expected 1"]
        verdicts = [r for r in run.trace() if r["type"] == "verdict"]
        if not verdicts or verdicts[0]["status"] != "correct":
            return ["the evaluation in flight should finish and be traced"]
        return []
    finally:
        run.close()


def leftovers(run, sockets=True):
    """The processes of the run still alive (all carry its FAKE_WORKER_LOG), and its socket
    files, after waiting up to a few seconds for them to go."""
    marker = f"FAKE_WORKER_LOG={run.worker_log}".encode()
    deadline = time.monotonic() + 5
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
        files = [name for name in os.listdir(run.folder) if sockets and
                 (name.startswith("session-") or name.endswith(".bind"))]
        if not (processes or files) or time.monotonic() > deadline:
            return [f"left behind: {entry}" for entry in processes + files]
        time.sleep(0.1)


def start_and_wait(run, command):
    """Starts kagent optimize and waits until its first evaluation has begun."""
    process = subprocess.Popen(command, cwd=run.folder, env=run.environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # An evaluate request, not the worker log: the problem check writes the log first.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and run.evaluations() < 1:
        time.sleep(0.05)
    return process


def terminated():
    """SIGTERM during an evaluation: the run stops after that step like Ctrl-C, exits 143
    (128 + SIGTERM) with its summary, and leaves no process and no socket behind."""
    slow = candidate({"speedup": 1.2, "delay_seconds": 3}, "slow")
    run = Run([chat_reply([("evaluate", {"source": slow})]),
               chat_reply([("finish", {"summary": "x"})])])
    try:
        process = start_and_wait(run, run.command("--target", "1.5"))
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
        run.code, run.stdout, run.stderr = process.returncode, stdout, stderr
        run.final = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
        if run.code != 143 or (run.final or {}).get("stop_reason") != "interrupted" \
                or "SIGTERM" not in stderr or "--resume" not in stderr:
            return ["SIGTERM should stop the run with exit 143 and say how to resume: "
                    + run.describe()]
        return leftovers(run)
    finally:
        run.close()


def stdout_closed():
    """kagent optimize | head -3: once its reader is gone the run stops at the next safe
    point (exit 141, 128 + SIGPIPE) instead of running on unread, and leaves nothing behind."""
    slow = candidate({"speedup": 1.2, "delay_seconds": 3}, "slow")
    run = Run([chat_reply([("evaluate", {"source": slow})]),
               chat_reply([("evaluate", {"source": slow})]),
               chat_reply([("finish", {"summary": "x"})])])
    try:
        command = [argument for argument in run.command("--target", "1.5")
                   if argument != "--json"]
        process = subprocess.Popen(command, cwd=run.folder, env=run.environment,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3):
            process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read()
        process.wait(timeout=60)
        run.code, run.stdout, run.stderr = process.returncode, "", stderr
        if run.code != 141 or "stdout was closed" not in stderr:
            return ["a closed stdout should stop the run with exit 141: " + run.describe()]
        if len(run.requests()) > 2:
            return [f"{len(run.requests())} model requests after stdout closed"]
        return leftovers(run)
    finally:
        run.close()


def killed():
    """kill -9 of kagent during an evaluation: its worker ends within seconds (it dies with
    its parent), and the next run removes the socket the killed one left, but not a socket
    something still listens on."""
    stuck = candidate({"speedup": 1.2, "delay_seconds": 60}, "stuck")
    run = Run([chat_reply([("evaluate", {"source": stuck})]),
               chat_reply([("finish", {"summary": "x"})]),
               chat_reply([("finish", {"summary": "x"})])])
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        process = start_and_wait(run, run.command())
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        problems = leftovers(run, sockets=False)
        crashed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        crashed.bind(os.path.join(run.folder, "session-crashed.sock"))
        crashed.close()
        stale = [name for name in os.listdir(run.folder) if name.startswith("session-")]
        live_path = os.path.join(run.folder, "session-live.sock")
        live.bind(live_path)
        live.listen(1)
        run.optimize()
        if run.final is None:
            problems.append("the next run failed: " + run.describe())
        if not os.path.exists(live_path):
            problems.append("the next run removed a socket something listens on")
        left = [name for name in stale if os.path.exists(os.path.join(run.folder, name))]
        if left:
            problems.append(f"the next run kept the killed run's socket {left}")
        return problems
    finally:
        live.close()
        run.close()


def trace_renders():
    run = Run([chat_reply([("evaluate", {"source": candidate({"speedup": 2.0}, "x")})]),
               chat_reply([("finish", {"summary": "x"})])])
    try:
        run.optimize("--target", "1.5")
        if run.final is None:
            return ["no run: " + run.describe()]
        result = subprocess.run([KAGENT, "trace", run.final["trace"]], capture_output=True,
                                text=True, timeout=60)
        missing = [needle for needle in ("evaluate v1", "correct", "target reached", "best")
                   if needle not in result.stdout]
        if result.returncode != 0 or missing:
            return [f"kagent trace lacks {missing}: {result.stdout[-1500:]} {result.stderr}"]
        return []
    finally:
        run.close()


CASES = [
    ("happy path over Chat Completions", happy_path("chat_completions")),
    ("happy path over the Responses API", happy_path("responses")),
    ("happy path over Anthropic Messages", happy_path("anthropic")),
    ("faults: 429, 500, a cut stream, split and malformed tool calls", faults),
    ("turn budget ends the run; the fastest correct variant is confirmed", budget_turns),
    ("a target missed on unseen seeds does not end the run", unconfirmed_target),
    ("the final summary says when the best variant does not generalise", hard_coded_shape),
    ("the cost budget, from the configured prices, ends the run", budget_cost),
    ("no model configured: says what to set", no_model_configured),
    ("a refused key: says what to set, no retry", refused_key),
    ("no GPU: says so before any token", no_gpu),
    ("a malformed problem is refused", malformed_problem),
    ("a problem with a syntax error is refused before any request", bad_problem("syntax")),
    ("a problem without get_inputs is refused before any request", bad_problem("no_inputs")),
    ("a problem whose get_inputs raises is refused before any request",
     bad_problem("inputs_raise")),
    ("a stalled reply is retried", stalled_reply),
    ("kill -9 then --resume", resume_after_kill),
    ("Ctrl-C stops after the current step", interrupted),
    ("SIGTERM stops after the current step, leaving nothing behind", terminated),
    ("a closed stdout stops the run, leaving nothing behind", stdout_closed),
    ("kill -9: the worker dies with kagent; its socket goes at the next start", killed),
    ("kagent trace renders a run", trace_renders),
]


def main():
    return run_cases(CASES)


if __name__ == "__main__":
    sys.exit(main())
