#!/usr/bin/env python3
"""The OTLP span export end to end (docs/telemetry.md): `kagent optimize --device cpu` against
the scripted model (tests/fixtures/llm_server.py) and the stand-in evaluator, with
telemetry.otlp_endpoint pointing at a receiver of our own (tests/fixtures/otlp_receiver.py)
that checks every request against the OTLP JSON encoding and the GenAI semantic conventions.
Checks the spans of a run (one invoke_agent root, a chat span per model call with its usage, an
execute_tool span per tool call with the variant's verdict), the headers, that the header
secret never reaches the trace, and that a refusing, unreachable or slow collector changes
nothing in the run, and that kagentd's sessions export the same way. Prints TAP ending with a line `N passed, N failed`.
Run: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/agent/otlp_cases.py"""
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.environ["KAGENT_SOURCE_DIR"], "tests", "fixtures"))

from daemon_cases import RELU, SCALE, Daemon, script  # noqa: E402
from optimize_cases import Run, candidate, chat_reply  # noqa: E402
from otlp_receiver import attribute_map, check_trace  # noqa: E402
from tap_cases import run_cases  # noqa: E402 - the shared TAP runner, beside this file

RECEIVER = os.path.join(os.environ["KAGENT_SOURCE_DIR"], "tests", "fixtures", "otlp_receiver.py")
# Langfuse's form: Basic auth, percent-encoded space, as OTEL_EXPORTER_OTLP_HEADERS carries it.
AUTHORIZATION = "Basic cGstbGYtdGVzdDpzay1sZi1zZWNyZXQ="
HEADERS = "Authorization=Basic%20cGstbGYtdGVzdDpzay1sZi1zZWNyZXQ=, X-Team = kernels"


class Receiver:
    """otlp_receiver.py on a free port, logging into folder."""

    def __init__(self, folder, *extra):
        self.log = os.path.join(folder, "otlp.jsonl")
        self.process = subprocess.Popen([sys.executable, RECEIVER, "--log", self.log,
                                         "--exit-with-stdin", *extra],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = int(self.process.stdout.readline().split()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def spans(self):
        return [span for request in self.requests() for resource in
                (request["body"] or {}).get("resourceSpans", [])
                for scope in resource.get("scopeSpans", []) for span in scope.get("spans", [])]

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=10)


def configure(run, endpoint, headers=None):
    with open(os.path.join(run.folder, "kagent.yaml"), "w") as f:
        f.write(f"telemetry:\n  otlp_endpoint: {endpoint}\n")
        if headers is not None:
            f.write(f"  otlp_headers: \"{headers}\"\n")


def two_variants():
    """A run of three turns: read_problem and v1 (1.2x), v2 (2.0x, the target), finish."""
    slow, fast = candidate({"speedup": 1.2}, "v1"), candidate({"speedup": 2.0}, "v2")
    return Run([chat_reply([("read_problem", {}), ("evaluate", {"source": slow})]),
                chat_reply([("evaluate", {"source": fast})], usage=(1500, 300)),
                chat_reply([("finish", {"summary": "done"})])])


def run_start_record(run):
    return next(record for record in run.trace() if record["type"] == "run_start")


def attributes(span):
    return attribute_map(span.get("attributes", []), span["name"], [])


def spans_follow_conventions():
    run = two_variants()
    receiver = Receiver(run.folder)
    try:
        configure(run, receiver.endpoint + "/", HEADERS)
        run.optimize("--target", "1.5")
        final = run.final or {}
        if run.code != 0 or final.get("variant") != "v2":
            return ["the run should confirm v2 as usual: " + run.describe()]
        problems = []
        requests = receiver.requests()
        for request in requests:
            problems += [f"receiver: {problem}" for problem in request["problems"]]
            if request["headers"].get("authorization") != AUTHORIZATION:
                problems.append(f"authorization header {request['headers'].get('authorization')!r}")
            if request["headers"].get("x-team") != "kernels":
                problems.append("the X-Team header did not arrive")
        # Spans go out at each turn's end, not all at the run's end.
        if len(requests) < 2:
            problems.append(f"{len(requests)} export requests, expected one per turn or so")
        spans = receiver.spans()
        problems += check_trace(spans)
        by_operation = {}
        for span in spans:
            by_operation.setdefault(attributes(span).get("gen_ai.operation.name"), []).append(span)
        chats, tools = by_operation.get("chat", []), by_operation.get("execute_tool", [])
        roots = by_operation.get("invoke_agent", [])
        if len(chats) != len(run.requests()) or len(chats) != 2:
            problems.append(f"{len(chats)} chat spans for {len(run.requests())} model calls")
        if [attributes(span)["gen_ai.tool.name"] for span in tools] != \
                ["read_problem", "evaluate", "evaluate"]:
            problems.append(f"tool spans {[span['name'] for span in tools]}")
        if not all(attributes(span).get("gen_ai.tool.description") for span in tools):
            problems.append("a tool span lacks the tool's description")
        call_ids = [record["id"] for record in run.trace() if record["type"] == "tool_call"]
        if [attributes(span).get("gen_ai.tool.call.id") for span in tools] != call_ids:
            problems.append("the tool spans' gen_ai.tool.call.id are not the trace's call ids")
        usage = [(attributes(span).get("gen_ai.usage.input_tokens"),
                  attributes(span).get("gen_ai.usage.output_tokens")) for span in chats]
        if usage != [(1000, 200), (1500, 300)]:
            problems.append(f"chat usage {usage}")
        for span in chats:
            values = attributes(span)
            if values.get("gen_ai.request.model") != "scripted-model" \
                    or values.get("gen_ai.provider.name") != "openai" \
                    or values.get("gen_ai.response.finish_reasons") != ["tool_calls"] \
                    or values.get("server.port") != run.port:
                problems.append(f"chat span attributes {values}")
        evaluated = {attributes(span).get("kagent.variant.id"): attributes(span)
                     for span in tools if attributes(span)["gen_ai.tool.name"] == "evaluate"}
        v1, v2 = evaluated.get("v1", {}), evaluated.get("v2", {})
        if v1.get("kagent.verdict.status") != "correct" or v2.get("kagent.verdict.status") \
                != "correct":
            problems.append(f"verdict status on the evaluate spans: {evaluated}")
        if abs(v1.get("kagent.speedup", 0) - 1.2) > 1e-6 or \
                abs(v2.get("kagent.speedup", 0) - 2.0) > 1e-6:
            problems.append(f"speedups on the evaluate spans: {evaluated}")
        if "kagent.variant.parent" in v1 or v2.get("kagent.variant.parent") != "v1":
            problems.append("v2's parent should be v1, the fastest correct variant before it")
        if not v2.get("kagent.commit"):
            problems.append("v2's span lacks its commit")
        root = attributes(roots[0]) if len(roots) == 1 else {}
        expected = {"gen_ai.agent.name": "kagent", "gen_ai.conversation.id": final["run_id"],
                    "gen_ai.usage.input_tokens": 2500, "gen_ai.usage.output_tokens": 500,
                    "kagent.variant.id": "v2", "kagent.confirmed": True,
                    "kagent.stop_reason": "target_reached", "kagent.problem": "relu"}
        for key, value in expected.items():
            if root.get(key) != value:
                problems.append(f"root {key} is {root.get(key)!r}, expected {value!r}")
        with open(final["trace"]) as f:
            text = f.read()
        if "cGstbGYtdGVzdDpzay1sZi1zZWNyZXQ=" in text:
            problems.append("an OTLP header's value reached the trace")
        # A short value is no credential: redacting it would blank the word all over the trace.
        if "[redacted]" in json.dumps(run_start_record(run)["system"]):
            problems.append("the short header value X-Team=kernels was redacted from the trace")
        telemetry = run_start_record(run)["config"].get("telemetry", {})
        if telemetry != {"otlp_endpoint": receiver.endpoint + "/",
                         "otlp_headers": "[redacted]"}:
            problems.append(f"run_start's config telemetry is {telemetry}")
        return problems
    finally:
        receiver.close()
        run.close()


def broken_collectors():
    """A collector answering 500, and one that is not there: the run is the same, the export
    failure is one log line each time."""
    problems = []
    for name in ("refusing", "absent"):
        run = two_variants()
        receiver = Receiver(run.folder, "--status", "500")
        try:
            endpoint = receiver.endpoint
            if name == "absent":
                receiver.close()  # the port is now closed: connections are refused
            configure(run, endpoint)
            run.optimize("--target", "1.5")
            final = run.final or {}
            if run.code != 0 or final.get("variant") != "v2" or not final.get("confirmed"):
                problems.append(f"{name} collector: the run changed: " + run.describe())
            if "OTLP export to" not in run.stderr:
                problems.append(f"{name} collector: no log line says the export failed")
            if name == "refusing" and not receiver.requests():
                problems.append("the refusing collector got no request")
        finally:
            if name == "refusing":
                receiver.close()
            run.close()
    return problems


def slow_collector():
    """A collector that answers after 3 s: the session never waits for it (the next turn's
    request follows the turn's end, which sends that turn's spans, at once); only the
    process's exit waits for the last request, and the collector still gets the whole trace."""
    run = two_variants()
    receiver = Receiver(run.folder, "--delay-ms", "3000")
    try:
        configure(run, receiver.endpoint)
        started = time.monotonic()
        run.optimize("--target", "1.5")
        elapsed = time.monotonic() - started
        final = run.final or {}
        if run.code != 0 or final.get("variant") != "v2":
            return ["the run should confirm v2 as usual: " + run.describe()]
        problems = []
        trace = run.trace()
        turn_end = next(r for r in trace if r["type"] == "turn_end" and r["turn"] == 1)
        request = next(r for r in trace if r["type"] == "request" and r["turn"] == 2)
        gap = (datetime.datetime.fromisoformat(request["time"].replace("Z", "+00:00"))
               - datetime.datetime.fromisoformat(turn_end["time"].replace("Z", "+00:00")))
        if gap.total_seconds() > 1.5:
            problems.append(f"turn 2 began {gap.total_seconds():.1f} s after turn 1 ended: "
                            "the session waited for the collector")
        if elapsed > 60:
            problems.append(f"the process took {elapsed:.0f} s to exit")
        spans = receiver.spans()
        if len(spans) != 6 or check_trace(spans):
            problems.append(f"the slow collector got {len(spans)} spans: "
                            + "; ".join(check_trace(spans)))
        return problems
    finally:
        receiver.close()
        run.close()


def stalled_collector():
    """A collector that accepts and never answers: the first export stalls (5 s), the rest
    of the run's spans are dropped with a log line, and the exit waits for that one stall."""
    run = two_variants()
    receiver = Receiver(run.folder, "--delay-ms", "30000")
    try:
        configure(run, receiver.endpoint)
        started = time.monotonic()
        run.optimize("--target", "1.5")
        elapsed = time.monotonic() - started
        final = run.final or {}
        if run.code != 0 or final.get("variant") != "v2":
            return ["the run should confirm v2 as usual: " + run.describe()]
        problems = []
        if "stalled" not in run.stderr or "did not answer lately" not in run.stderr:
            problems.append("no log line says the export stalled and spans were dropped: "
                            + run.stderr[-1500:])
        if elapsed > 9.5:
            problems.append(f"the process took {elapsed:.1f} s to exit: more than one stall")
        if len(receiver.requests()) != 1:
            problems.append(f"{len(receiver.requests())} requests reached the stalled collector")
        return problems
    finally:
        receiver.close()
        run.close()


def malformed_headers():
    """Malformed headers are refused before anything is sent, without quoting the value."""
    run = two_variants()
    try:
        configure(run, "http://127.0.0.1:9", "Authorization=Bearer%2 secret-value")
        run.optimize()
        if run.code == 0 or "otlp_headers" not in run.stderr + run.stdout:
            return ["malformed headers should be refused naming the key: " + run.describe()]
        if "secret-value" in run.stderr + run.stdout:
            return ["the error quotes the header's value"]
        if run.requests():
            return ["a model request went out despite the bad config"]
        return []
    finally:
        run.close()


def daemon_sessions():
    """kagentd's sessions export as `kagent optimize` does: two sessions of a batch, two
    traces, each whole and following the conventions."""
    daemon = Daemon(script())
    receiver = Receiver(daemon.folder)
    try:
        with open(daemon.config, "a") as f:
            f.write(f"telemetry:\n  otlp_endpoint: {receiver.endpoint}\n")
        daemon.start()
        status, created = daemon.post_batch([RELU, SCALE])
        if status != 201:
            return [f"POST /v1/batches answered {status}: {created}"]
        batch = daemon.wait_batch(created["batch"])
        # The last export may still be out when the batch reads done.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            roots = [span for span in receiver.spans() if "parentSpanId" not in span]
            if len(roots) == 2:
                break
            time.sleep(0.2)
        problems = []
        for request in receiver.requests():
            problems += [f"receiver: {problem}" for problem in request["problems"]]
        traces = {}
        for span in receiver.spans():
            traces.setdefault(span["traceId"], []).append(span)
        if len(traces) != 2:
            return problems + [f"{len(traces)} traces for 2 sessions: {batch}\n{daemon.log()}"]
        problems_seen = set()
        for spans in traces.values():
            problems += check_trace(spans)
            root = next(attributes(span) for span in spans if "parentSpanId" not in span)
            problems_seen.add(root.get("kagent.problem"))
            verdicts = [attributes(span).get("kagent.verdict.status") for span in spans
                        if attributes(span).get("gen_ai.tool.name") == "evaluate"]
            if verdicts != ["correct"]:
                problems.append(f"evaluate spans' verdicts {verdicts}")
        if problems_seen != {"relu", "scale_rows"}:
            problems.append(f"the traces' problems are {problems_seen}")
        return problems
    finally:
        receiver.close()
        daemon.close()


CASES = [
    ("a run's spans reach the receiver and follow the GenAI conventions",
     spans_follow_conventions),
    ("a refusing or absent collector changes nothing in the run", broken_collectors),
    ("a slow collector does not slow the session", slow_collector),
    ("a stalled collector costs one wait, and its spans are dropped", stalled_collector),
    ("malformed telemetry.otlp_headers are refused without quoting them", malformed_headers),
    ("kagentd's sessions export their spans as kagent optimize does", daemon_sessions),
]


def main():
    return run_cases(CASES)


if __name__ == "__main__":
    sys.exit(main())
