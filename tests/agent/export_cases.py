#!/usr/bin/env python3
"""Runs as data (issue 19): `kagent export` and `kagent replay` on runs recorded here, with the
scripted model server (tests/fixtures/llm_server.py) as tests/agent/optimize_cases.py drives
it. Export of a run folder, a trace, and a batch and a session of kagentd's store, as JSON lines
and Parquet read back with pyarrow and Hugging Face `datasets`; deduplication, --only, the
conversation that produced each variant, and the API key never reaching a record; bad
operands. Replay on the CPU device with the real evaluator reproduces the statuses with the
recorded seeds (a case returns its problems, or a string saying why it is skipped). Run in the runner's Python (pyarrow, datasets, torch):
KAGENT=build/kagent KAGENT_SOURCE_DIR=. .venv/bin/python3 tests/agent/export_cases.py
Prints TAP ending with a line `N passed, N failed`."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_cases  # noqa: E402 - the kagentd driver, beside this file
import optimize_cases  # noqa: E402 - the scripted runs, beside this file
from optimize_cases import KAGENT, SECRET, SOURCE, Run, candidate, chat_reply  # noqa: E402
from tap_cases import run_cases  # noqa: E402 - the shared TAP runner, beside this file

CANDIDATES = os.path.join(SOURCE, "tests", "fixtures", "candidates")
SLOW = candidate({"speedup": 1.2}, "slow")
FAST = candidate({"speedup": 2.0}, "fast")
WRONG = candidate({"status": "incorrect"}, "wrong")


def kagent(run, *arguments, timeout=300):
    environment = dict(run.environment)
    environment["HF_DATASETS_CACHE"] = os.path.join(run.folder, "hf-cache")
    environment["HF_HUB_OFFLINE"] = "1"
    if arguments[0] == "export":  # the real runner's folder, where export_parquet.py is
        environment.pop("KAGENT_RUNNER_DIR", None)
    return subprocess.run([KAGENT, *arguments], cwd=run.folder, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def recorded_run():
    """v1 slow, v2 fast, v3 the same source as v1, v4 incorrect; then finish."""
    run = Run([chat_reply([("read_problem", {}), ("evaluate", {"source": SLOW})]),
               chat_reply([("evaluate", {"source": FAST})], text="Trying a faster one."),
               chat_reply([("evaluate", {"source": SLOW})]),
               chat_reply([("evaluate", {"source": WRONG})]),
               chat_reply([("finish", {"summary": "done"})])])
    run.optimize("--target", "0", "--max-turns", "4")
    return run


def read_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def export_jsonl():
    """Four variants, three sources: three records with their conversation, parents,
    verdicts and no key; --only; the run folder and the trace give the same records."""
    run = recorded_run()
    try:
        if not run.final or not run.final.get("trace"):
            return ["the run did not end: " + run.describe()]
        problems = []
        output = os.path.join(run.folder, "all.jsonl")
        result = kagent(run, "export", run.output, "-o", output)
        if result.returncode != 0:
            return [f"export: exit {result.returncode}: {result.stderr}"]
        if "3 records from 1 run" not in result.stderr or "1 duplicate" not in result.stderr:
            problems.append(f"the summary line: {result.stderr}")
        records = read_lines(output)
        if [r["variant"] for r in records] != ["v1", "v2", "v4"]:
            problems.append(f"variants {[r['variant'] for r in records]}, expected v1 v2 v4")
            return problems
        v1, v2, v4 = records
        if [r["parent"] for r in records] != [None, "v1", "v3"]:
            problems.append(f"parents {[r['parent'] for r in records]}")
        if v2["source"] != FAST or v1["source"] != SLOW:
            problems.append("a record's source is not the evaluated one")
        with open(optimize_cases.PROBLEM) as f:
            if v1["problem_source"] != f.read():
                problems.append("problem_source is not the problem file")
        if v1["id"] == v2["id"] or len(v1["id"]) != 64 or len(v1["problem_id"]) != 64:
            problems.append(f"ids {v1['id']} {v2['id']} {v1['problem_id']}")
        if (v2["status"], v4["status"]) != ("correct", "incorrect") or not v2["credited"] \
                or v4["credited"] or abs(v2["speedup_vs_eager"] - 2.0) > 1e-6:
            problems.append(f"verdict fields: {v2['status']} {v2['credited']} "
                            f"{v2['speedup_vs_eager']} / {v4['status']} {v4['credited']}")
        if json.loads(v2["verdict"]).get("status") != "correct" \
                or v2["environment"].get("device") != "cpu":
            problems.append("the whole verdict or its environment is missing")
        if (v2["model"], v2["provider"]) != ("scripted-model", "chat_completions"):
            problems.append(f"model and provider: {v2['model']} {v2['provider']}")
        last = v2["messages"][-1]
        calls = last.get("tool_calls") or []
        if v2["messages"][0]["role"] != "system" or last["role"] != "assistant" \
                or last["content"] != "Trying a faster one." \
                or not calls or json.loads(calls[0]["arguments"])["source"] != FAST:
            problems.append(f"v2's conversation does not end in the reply that wrote it: "
                            f"{json.dumps(v2['messages'][-2:])[:600]}")
        if not any(m["role"] == "tool" and m["name"] == "evaluate" and "v1 correct" in
                   (m["content"] or "") for m in v2["messages"]):
            problems.append("v2's conversation lacks v1's verdict")
        with open(output) as f:
            if SECRET in f.read():
                problems.append("the API key is in the export")
        # no GPU (no driver here, whatever the machine has): exit 2 before any variant
        run.environment["KAGENT_LIBCUDA"] = "/nonexistent/libcuda.so.1"
        result = kagent(run, "replay", run.final["trace"], "--device", "cuda", "--json")
        if result.returncode != 2 or "add --device cpu" not in result.stderr \
                or json.loads(result.stdout or "{}").get("error") != "no_gpu":
            problems.append(f"replay without a GPU: exit {result.returncode}: {result.stdout}")
        del run.environment["KAGENT_LIBCUDA"]
        # a run that cannot be read after one that can: no file, not even a temporary one
        garbage = os.path.join(SOURCE, "tests", "fixtures", "traces", "garbage.jsonl")
        for form in ("jsonl", "parquet"):
            broken = os.path.join(run.folder, "broken." + form)
            result = kagent(run, "export", run.final["trace"], garbage, "--format", form, "-o",
                            broken)
            left = [name for name in os.listdir(run.folder) if name.startswith("broken.")]
            if result.returncode != 2 or left:
                problems.append(f"a failed {form} export: exit {result.returncode}, left {left}")
        correct = os.path.join(run.folder, "correct.jsonl")
        result = kagent(run, "export", run.final["trace"], "--only", "correct", "-o", correct)
        if result.returncode != 0 or [r["variant"] for r in read_lines(correct)] != ["v1", "v2"]:
            problems.append(f"--only correct: {result.stderr}")
        result = kagent(run, "export", run.final["trace"], run.final["trace"], "--only",
                        "credited")
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        if result.returncode != 0 or [r["variant"] for r in lines] != ["v1", "v2"] \
                or "4 duplicate sources" not in result.stderr:
            problems.append(f"the same trace twice to stdout: {result.stderr}")
        return problems
    finally:
        run.close()


def export_parquet():
    """The same records as Parquet: pyarrow reads them back with the JSON lines' columns and
    values, and `datasets` loads both files unchanged."""
    run = recorded_run()
    try:
        problems = []
        jsonl = os.path.join(run.folder, "runs.jsonl")
        parquet = os.path.join(run.folder, "runs.parquet")
        first = kagent(run, "export", run.output, "-o", jsonl)
        result = kagent(run, "export", run.output, "--format", "parquet", "-o", parquet)
        try:
            import pyarrow.parquet
        except ImportError:
            if result.returncode != 2 or "needs pyarrow" not in result.stderr:
                problems.append(f"without pyarrow: exit {result.returncode}: {result.stderr}")
            return problems + ["pyarrow is not installed in the runner's Python: run .ci/setup"]
        if first.returncode != 0 or result.returncode != 0:
            return [f"export: {first.stderr} {result.stderr}"]
        # a Python without pyarrow (-S: no site-packages): what to install, and no file
        bare = os.path.join(run.folder, "bare-python")
        with open(bare, "w") as f:
            f.write(f"#!/bin/sh\nexec {shutil.which('python3')} -S \"$@\"\n")
        os.chmod(bare, 0o755)
        run.environment["KAGENT_PYTHON"] = bare
        result = kagent(run, "export", run.output, "--format", "parquet", "-o", parquet + ".no")
        del run.environment["KAGENT_PYTHON"]
        left = [name for name in os.listdir(run.folder) if name.startswith("runs.parquet.no")]
        if result.returncode != 2 or f"needs pyarrow in the runner's Python ({bare})" \
                not in result.stderr or left:
            problems.append(f"without pyarrow: exit {result.returncode}, left {left}: "
                            f"{result.stderr}")
        table = pyarrow.parquet.read_table(parquet)
        records = read_lines(jsonl)
        if table.column_names != list(records[0].keys()):
            problems.append(f"columns {table.column_names} against {list(records[0])}")
        if table.to_pylist() != records:
            problems.append("the Parquet rows differ from the JSON lines")
        if table.schema.field("speedup_vs_eager_ci95").type != pyarrow.list_(pyarrow.float64()):
            problems.append(f"schema: {table.schema}")
        if SECRET.encode() in open(parquet, "rb").read():
            problems.append("the API key is in the Parquet file")
        try:
            import datasets
        except ImportError:
            return problems + ["datasets is not installed in the runner's Python: run .ci/setup"]
        datasets.disable_progress_bars()
        cache = os.path.join(run.folder, "hf-cache")
        from_parquet = datasets.load_dataset("parquet", data_files=parquet, cache_dir=cache,
                                             split="train")
        from_json = datasets.load_dataset("json", data_files=jsonl, cache_dir=cache,
                                          split="train")
        if from_parquet.num_rows != 3 or from_json.num_rows != 3 \
                or from_parquet[1]["source"] != FAST or from_json[1]["status"] != "correct" \
                or from_parquet[1]["messages"][-1]["role"] != "assistant":
            problems.append(f"datasets: {from_parquet} {from_json}")
        return problems
    finally:
        run.close()


def bad_operands():
    """Missing paths, files that are no trace, unknown ids and bad options: exit 2 and a
    message that says what is wrong, and no output file."""
    run = Run([])
    try:
        problems = []
        garbage = os.path.join(SOURCE, "tests", "fixtures", "traces", "garbage.jsonl")
        no_start = os.path.join(run.folder, "no_start.jsonl")
        with open(no_start, "w") as f:
            f.write('{"type": "message", "seq": 1, "role": "user", "content": "hi"}\n')
        empty = os.path.join(run.folder, "empty")
        os.makedirs(empty)
        store = f"sqlite:{os.path.join(run.folder, 'store.db')}"
        output = os.path.join(run.folder, "never.jsonl")
        cases = [
            (("export", "/nonexistent/run.jsonl", "-o", output), "no such file or folder"),
            (("export", garbage, "-o", output), "garbage.jsonl"),
            (("export", no_start, "-o", output), "not the trace of a run"),
            (("export", optimize_cases.PROBLEM, "-o", output), "not a JSON object"),
            (("export", empty, "-o", output), "not a run folder"),
            (("export", "b-20261125-000000-deadbeef", "--store", store, "-o", output),
             "b-20261125-000000-deadbeef"),
            (("export", "20261125-000000-deadbeef-0001", "-o", output), "no kagentd store"),
            (("export", empty, "--format", "csv"), "--format must be jsonl or parquet"),
            (("export", empty, "--format", "parquet"), "needs -o FILE"),
            (("export", empty, "--only", "fast"), "--only must be correct or credited"),
            (("export", empty, "--json"), "the records need -o FILE"),
            (("export",), "name at least one"),
            (("replay", "/nonexistent/run.jsonl", "--json"), "no such file or folder"),
            (("replay", garbage, "--json"), "garbage.jsonl"),
            (("replay", "20261125-000000-deadbeef-0001", "--store", store, "--json"),
             "20261125-000000-deadbeef-0001"),
            (("replay", empty, "--device", "tpu"), "--device must be cuda or cpu"),
        ]
        environment_home = os.path.join(run.folder, "state")
        run.environment["XDG_STATE_HOME"] = environment_home
        # no daemon answers on the default socket, whatever runs on this machine
        run.environment["KAGENT_DAEMON_SOCKET"] = os.path.join(run.folder, "no-daemon.sock")
        for arguments, needle in cases:
            result = kagent(run, *arguments)
            if result.returncode != 2 or needle not in result.stderr:
                problems.append(f"{' '.join(arguments)}: exit {result.returncode}, stderr "
                                f"{result.stderr.strip()[:300]!r}, expected {needle!r}")
            if "--json" in arguments:
                try:
                    error = json.loads(result.stdout)
                    if not error.get("error") or not error.get("message"):
                        problems.append(f"{' '.join(arguments)}: error object {error}")
                except ValueError:
                    problems.append(f"{' '.join(arguments)}: stdout is no JSON: "
                                    f"{result.stdout[:200]!r}")
        if os.path.exists(output):
            problems.append("a failed export left its output file")
        if os.path.exists(environment_home):
            problems.append("looking for kagentd's default store created it")
        return problems
    finally:
        run.close()


def export_from_store():
    """kagentd's store, and the running daemon's API, resolve a batch to its sessions' traces
    and a session to its own."""
    daemon = daemon_cases.Daemon(daemon_cases.script()).start()
    try:
        status, created = daemon.post_batch([daemon_cases.RELU, daemon_cases.SOFTMAX])
        if status != 201:
            return [f"POST /v1/batches: {status} {created}"]
        batch = daemon.wait_batch(created["batch"])
        store = f"sqlite:{daemon.database}"
        output = os.path.join(daemon.folder, "batch.jsonl")
        result = subprocess.run([KAGENT, "export", created["batch"], "--store", store, "-o",
                                 output], env=daemon.environment, capture_output=True,
                                text=True, timeout=120)
        if result.returncode != 0:
            return [f"export of the batch: {result.stderr}"]
        problems = []
        names = sorted(r["problem_name"] for r in read_lines(output))
        if names != ["relu", "softmax_wide"]:
            problems.append(f"the batch's records are of {names}")
        session = batch["sessions"][0]["id"]
        result = subprocess.run([KAGENT, "export", session, "--store", store],
                                env=daemon.environment, capture_output=True, text=True,
                                timeout=120)
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        if result.returncode != 0 or [r["run_id"] for r in lines] != [session]:
            problems.append(f"export of session {session}: {result.stderr}")
        # the running daemon's API: the same records, and its 404 in the message
        result = subprocess.run([KAGENT, "export", created["batch"], "--socket", daemon.socket,
                                 "-o", output + ".api", "--json"], env=daemon.environment,
                                capture_output=True, text=True, timeout=120)
        summary = json.loads(result.stdout or "{}")
        if result.returncode != 0 or summary.get("records") != 2 \
                or read_lines(output + ".api") != read_lines(output):
            problems.append(f"export through the API: {result.stdout} {result.stderr}")
        result = subprocess.run([KAGENT, "export", "b-20261125-000000-deadbeef", "--socket",
                                 daemon.socket, "-o", output + ".none"], env=daemon.environment,
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 2 or "404" not in result.stderr:
            problems.append(f"an unknown batch through the API: {result.stderr}")
        # kagentd's default store, found through XDG_STATE_HOME as the daemon finds it
        environment = dict(daemon.environment)
        environment["KAGENT_DAEMON_SOCKET"] = daemon.socket  # the API, found by default
        result = subprocess.run([KAGENT, "export", session], env=environment,
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0 or len(result.stdout.splitlines()) != 1:
            problems.append(f"export through the daemon on its default socket: {result.stderr}")
        environment["KAGENT_DAEMON_SOCKET"] = os.path.join(daemon.folder, "no-daemon.sock")
        environment["XDG_STATE_HOME"] = os.path.dirname(os.path.dirname(daemon.database))
        os.makedirs(os.path.join(environment["XDG_STATE_HOME"], "kagent"), exist_ok=True)
        os.symlink(daemon.database, os.path.join(environment["XDG_STATE_HOME"], "kagent",
                                                 "kagent.db"))
        result = subprocess.run([KAGENT, "export", session], env=environment,
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0 or len(result.stdout.splitlines()) != 1:
            problems.append(f"export through the default store: {result.stderr}")
        return problems
    finally:
        daemon.close()


def replay_cpu():
    """A run judged by the real evaluator on the CPU (one correct, one incorrect variant),
    replayed: both statuses again, with the seeds the verdicts record."""
    if os.environ.get("KAGENT_SANITIZE", "none") != "none":
        return "a sanitized build: the real runner cannot load its sandbox library"
    sources = []
    for name in ("relu_correct", "relu_wrong_shape"):
        with open(os.path.join(CANDIDATES, name + ".py")) as f:
            sources.append(f.read())
    run = Run([chat_reply([("evaluate", {"source": sources[0]})]),
               chat_reply([("evaluate", {"source": sources[1]})]),
               chat_reply([("finish", {"summary": "done"})])])
    for name in ("KAGENT_RUNNER_DIR", "FAKE_WORKER_MODE", "FAKE_WORKER_LOG"):
        run.environment.pop(name)
    try:
        run.optimize("--target", "0", "--max-turns", "2", timeout=300)
        if "No module named 'torch'" in run.stdout + run.stderr:
            if os.environ.get("KAGENT_REQUIRE_TORCH") == "1":
                return ["the runner's Python has no torch"]
            return "the runner's Python has no torch"
        if not run.final or not run.final.get("trace"):
            return ["the run did not end: " + run.describe()]
        trace = run.final["trace"]
        result = kagent(run, "replay", trace, "--device", "cpu", "--json")
        try:
            replay = json.loads(result.stdout)
        except ValueError:
            return [f"replay --json: exit {result.returncode}: {result.stdout[:500]} "
                    f"{result.stderr[-1500:]}"]
        problems = []
        rows = replay.get("variants", [])
        if result.returncode != 0 or not replay.get("reproduced") \
                or [(r["status_then"], r["status_now"]) for r in rows] != [
                    ("correct", "correct"), ("incorrect", "incorrect")]:
            problems.append(f"exit {result.returncode}: {json.dumps(replay)[:1500]}")
        originals = {}
        for record in run.trace():
            if record["type"] == "verdict" and record["purpose"] == "evaluate":
                originals[record["variant"]] = [t["seed"] for t in record["verdict"]["trials"]]
        for row in rows:
            seeds = [t["seed"] for t in (row.get("verdict") or {}).get("trials", [])]
            if seeds != originals.get(row["variant"]):
                problems.append(f"{row['variant']}: seeds {seeds}, then "
                                f"{originals.get(row['variant'])}")
        if replay.get("best", {}).get("then") != "v1" or replay.get("schema") != "kagent.replay/1":
            problems.append(f"best: {replay.get('best')}")
        return problems
    finally:
        run.close()


CASES = [
    ("export: JSON lines of a run folder and a trace, deduplicated, --only", export_jsonl),
    ("export: Parquet read back with pyarrow and datasets", export_parquet),
    ("export and replay: bad operands and options give clear errors", bad_operands),
    ("export: a batch and a session of kagentd's store", export_from_store),
    ("replay on the CPU reproduces the statuses with the recorded seeds", replay_cpu),
]


def main():
    return run_cases(CASES)


if __name__ == "__main__":
    sys.exit(main())
