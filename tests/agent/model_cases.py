#!/usr/bin/env python3
"""`kagent model` end to end on the CPU with the real worker, judge and sandbox: bad models,
factories and input functions refused with clear errors; the hot spots of an attention block
built by a factory (--entry, --inputs) written as sub-problems (--plan); the composition of the
MLP with a stand-in variant, judged correct, and with a wrong one, judged incorrect; and the
whole path with the scripted model server (tests/fixtures/llm_server.py) proposing a variant
for the MLP's hottest layer through `kagent optimize`. Uses the sandbox: run it under
/tmp/kagent-sandbox.lock (docs/whole-models.md). Prints TAP.
Run: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/agent/model_cases.py"""
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

KAGENT = os.path.abspath(os.environ["KAGENT"])
SOURCE = os.path.abspath(os.environ["KAGENT_SOURCE_DIR"])
MODELS = os.path.join(SOURCE, "tests", "fixtures", "models")
SERVER = os.path.join(SOURCE, "tests", "fixtures", "llm_server.py")
MLP = os.path.join(MODELS, "mlp.py")
ATTENTION = os.path.join(MODELS, "attention.py")
BAD = os.path.join(MODELS, "bad_factories.py")
# the judge's own rules, read in the runner's package (this runs on the runner's Python)
sys.path.insert(0, os.path.join(SOURCE, "sandbox", "runner"))
from kagent_runner import problem  # noqa: E402
from tap_cases import Tap  # noqa: E402 - the shared TAP runner, beside this file
sys.path.insert(0, os.path.dirname(SERVER))
from scripted_replies import chat_reply  # noqa: E402 - the scripted model's replies
FOLDER = tempfile.mkdtemp(prefix="kagent-model-cases-")
# as root, the judge runs as the sandbox's uid and reads the model's files where they lie
os.chmod(FOLDER, 0o755)
SOCKET = os.path.join(FOLDER, "worker.sock")
ENVIRONMENT = dict(os.environ, KAGENT_CACHE_DIR=os.path.join(FOLDER, "cache"),
                   XDG_CONFIG_HOME=os.path.join(FOLDER, "config"),
                   KAGENT_WORKER_SOCKET=os.path.join(FOLDER, "none.sock"),
                   # no kagentd of the machine's: the runs go to one only where a test says
                   KAGENT_SOCKET=os.path.join(FOLDER, "no-kagentd.sock"),
                   KAGENT_DAEMON_SOCKET=os.path.join(FOLDER, "no-kagentd.sock"))
for name in ("KAGENT_CONFIG", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "KAGENT_RUNNER_DIR"):
    ENVIRONMENT.pop(name, None)

TAP = Tap()  # the plan comes last: the cases are learned as they run
# A sanitized build's sandbox library cannot be loaded by the real runner's Python, so the
# cases that judge a candidate are skipped there (the analysis and the sub-problems still run).
SANITIZED = os.environ.get("KAGENT_SANITIZE", "none") != "none"
SANITIZED_REASON = "a sanitized build: the real runner cannot load its sandbox library"


def skip(name):
    TAP.skip(name, SANITIZED_REASON)


def check(name, condition, detail=""):
    TAP.report(bool(condition), name, [] if condition else [detail], tail=True)


def model(*arguments, timeout=300):
    return subprocess.run([KAGENT, "model", *arguments], cwd=FOLDER, env=ENVIRONMENT,
                          capture_output=True, text=True, timeout=timeout)


def output(name):
    return os.path.join(FOLDER, name)


def last_json(text):
    try:
        return json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def usage_errors():
    cases = [
        (["/nonexistent/model.py"], "cannot read the model /nonexistent/model.py"),
        ([MLP, "--entry", "not a name"], "'not a name' is not a Python function name"),
        ([MLP, "--entry", "/nonexistent/f.py:make"], "--entry /nonexistent/f.py:make: cannot "
                                                      "read /nonexistent/f.py"),
        ([MLP, "--inputs", "f.py:"], "--inputs f.py:: name a function"),
        ([MLP, "--top", "0", "--plan"], "--top must be a number from 1 to 32"),
        ([MLP, "--plan", "--compose"], "--plan, --batch, --here and --compose exclude each "
                                       "other"),
        ([MLP, "--compose", "--output", output("never-analysed")], "analysis.json"),
    ]
    for arguments, expected in cases:
        run = model(*arguments, "--device", "cpu")
        check(f"refused: {' '.join(arguments[1:]) or arguments[0]}",
              run.returncode == 2 and expected in run.stderr, run.stderr)


def bad_factories():
    cases = [
        (["--entry", f"{BAD}:missing"], f"--entry {BAD}:missing: {BAD} defines no function "
                                        "missing"),
        (["--entry", f"{BAD}:returns_number", "--inputs", f"{BAD}:linear"],
         f"--entry {BAD}:returns_number: it returned an object of type int, not a torch.nn.Module"),
        (["--entry", f"{BAD}:raises"], f"--entry {BAD}:raises failed: ValueError: no weights "
                                       "here"),
        (["--entry", f"{BAD}:linear", "--inputs", f"{BAD}:inputs_divide_by_zero"],
         f"--inputs {BAD}:inputs_divide_by_zero failed: ZeroDivisionError"),
    ]
    for arguments, expected in cases:
        run = model(MLP, *arguments, "--device", "cpu", "--plan", "--worker", SOCKET,
                    "--output", output("bad"), "--json")
        answer = last_json(run.stdout) or {}
        check(f"bad factory refused: {' '.join(arguments)}",
              run.returncode == 2 and expected in run.stderr
              and answer.get("error") == "problem", run.stderr + run.stdout)


def attention_plan():
    folder = output("attention")
    run = model(ATTENTION, "--entry", "make_model", "--inputs", "make_inputs", "--top", "2",
                "--device", "cpu", "--worker", SOCKET, "--plan", "--output", folder, "--json")
    analysis = last_json(run.stdout) or {}
    chosen = analysis.get("chosen") or [{}]
    check("--entry/--inputs: the wrapper problem is written",
          run.returncode == 0 and os.path.exists(os.path.join(folder, "model_problem.py"))
          and analysis.get("problem_path") == os.path.join(folder, "model_problem.py"),
          run.stderr)
    check("the attention block is the first hot spot, its mask passed by keyword",
          chosen[0].get("path") == "attention" and chosen[0].get("tensor_keywords") == ["mask"],
          json.dumps(chosen)[:2000])
    written = [spot.get("problem") for spot in chosen]
    check("each chosen hot spot is a sub-problem that reproduces the model's activations",
          len(chosen) == 2 and all(spot.get("check", {}).get("exact") for spot in chosen)
          and all(path and os.path.exists(path) for path in written), json.dumps(chosen)[:2000])
    table = run.stderr
    check("the table names modules, classes, operators and the Amdahl bound",
          "attention" in table and "Attention" in table and "aten::" in table
          and "Amdahl bound" in table, table)
    if not written[0]:
        return
    if SANITIZED:
        skip("the attention sub-problem is judged as any problem (a stand-in is correct)")
        return
    candidate = os.path.join(MODELS, "candidates", "attention.py")
    evaluation = subprocess.run([KAGENT, "eval", written[0], candidate, "--device", "cpu",
                                 "--worker", SOCKET, "--json"], cwd=FOLDER, env=ENVIRONMENT,
                                capture_output=True, text=True, timeout=300)
    try:
        verdict = json.loads(evaluation.stdout)
    except ValueError:
        verdict = {}
    check("the attention sub-problem is judged as any problem (a stand-in is correct)",
          verdict.get("status") == "correct",
          f"{verdict.get('status')}: {verdict.get('reason') or verdict.get('message')}\n"
          + evaluation.stderr)


def compose(variants, folder):
    """The MLP analysed, then composed as if the runs of its hot spots {path: variant} had
    confirmed those variants (the others did not finish)."""
    run = model(MLP, "--top", "2", "--device", "cpu", "--worker", SOCKET, "--plan",
                "--output", folder)
    if run.returncode != 0:
        return run, None
    os.makedirs(os.path.join(folder, "runs"), exist_ok=True)
    with open(os.path.join(folder, "analysis.json")) as handle:
        # the rank, so the file's number, of two layers this close is the clock's to decide
        files = {spot["path"]: spot["file"] for spot in json.load(handle)["chosen"]}
    for path, variant in variants.items():
        with open(os.path.join(folder, "runs", files[path].replace(".py", ".json")),
                  "w") as handle:
            json.dump({"path": variant, "confirmation": {"credited": True,
                                                         "speedup_vs_eager": 1.5,
                                                         "speedup_vs_compile": 1.2}}, handle)
    run = model(MLP, "--compose", "--device", "cpu", "--worker", SOCKET, "--output", folder,
                "--json")
    return run, last_json(run.stdout)


# Ends the `down` stand-in written for the composition: a backslash, quotes in runs of three
# and a quote as the file's last character, which the inlined literal must keep as they are.
TRICKY = r'TRICKY = "a backslash \\, a tab \t, three quotes \"\"\" and a last quote \""'
TRICKY_VALUE = 'a backslash \\, a tab \t, three quotes """ and a last quote "'


def inlined(folder, variants):
    """optimized_model.py loaded here as the judge loads a candidate: its own kernel names
    (the judge's rule, kagent_runner.problem.own_kernel_names, on its text), and each swapped
    variant a module of its own whose source, read back through inspect as Triton reads it, is
    the variant's file."""
    composed = os.path.join(folder, "optimized_model.py")
    with open(composed) as handle:
        names = set(problem.own_kernel_names(handle.read()))
    expected = set()
    for variant in variants.values():
        with open(variant) as handle:
            expected |= set(problem.own_kernel_names(handle.read()))
    check("optimized_model.py inlines the variants: its own kernel names are both variants' "
          "(the same names in both, and one of each's own)",
          names == expected and {"scale", "bias_add", "up_only", "down_only"} <= names,
          f"{sorted(names)} != {sorted(expected)}")
    sys.path.insert(0, MODELS)
    try:
        module = problem.load_module(composed, "kagent_composed_check")
        built = module.ModelNew(256, 1024)
        sources = {}
        for path, variant in variants.items():
            swapped = built.get_submodule(path).variant
            own = sys.modules[type(swapped).__module__]
            with open(variant) as handle:  # universal newlines, as Python reads a file
                sources[path] = (inspect.getsource(own) == handle.read(), own)
        up, down = sources["up"][1], sources["down"][1]
        check("each variant is a module of its own, its source intact (CRLF line ends, "
              "backslashes, runs of quotes, a last quote)",
              all(same for same, _ in sources.values()) and up is not down
              and up.SHAPE == (256, 1024) and down.SHAPE == (1024, 256)
              and getattr(down, "TRICKY", None) == TRICKY_VALUE,
              json.dumps({path: same for path, (same, _) in sources.items()}))
    except Exception as error:  # noqa: B902 - the check reports it
        check("each variant is a module of its own, its source intact", False,
              f"{type(error).__name__}: {error}")
    finally:
        sys.path.remove(MODELS)


def composition():
    folder = output("mlp-compose")
    down = os.path.join(FOLDER, "mlp_down_tricky.py")
    with open(os.path.join(MODELS, "candidates", "mlp_down_kernels.py")) as handle:
        text = handle.read() + TRICKY
    with open(down, "w", newline="\r\n") as handle:
        handle.write(text)
    variants = {"up": os.path.join(MODELS, "candidates", "mlp_up_kernels.py"), "down": down}
    run, report = compose(variants, folder)
    report = report or {}
    spots = {spot["path"]: spot for spot in report.get("hotspots", [])}
    check("composed with two stand-in variants whose names meet: correct end to end, exit 0",
          run.returncode == 0 and report.get("end_to_end", {}).get("correct") is True,
          run.stdout[-3000:] + run.stderr)
    check("the report: both variants swapped in, with their runs' speedups",
          all((spots.get(path, {}).get("variant") or "").endswith(f"_{path}.py")
              and spots.get(path, {}).get("speedup_vs_eager") == 1.5 for path in variants),
          json.dumps(report)[:3000])
    check("the report times eager and torch.compile and states the Amdahl bound",
          report.get("end_to_end", {}).get("eager") is not None
          and "compile" in report.get("end_to_end", {})
          and report.get("amdahl_bound", 0) > 1
          and os.path.exists(os.path.join(folder, "report.md"))
          and os.path.exists(os.path.join(folder, "optimized_model.py")), json.dumps(report)[:3000])
    inlined(folder, variants)
    run, report = compose({"down": os.path.join(MODELS, "candidates", "mlp_down_no_bias.py")},
                          output("mlp-wrong"))
    report = report or {}
    spots = {spot["path"]: spot for spot in report.get("hotspots", [])}
    check("composed with a wrong variant: judged incorrect, exit 1",
          run.returncode == 1 and report.get("end_to_end", {}).get("status") == "incorrect",
          run.stdout[-3000:] + run.stderr)
    check("the report: a hot spot without a result kept with its reason",
          "did not finish" in (spots.get("up", {}).get("kept") or ""), json.dumps(report)[:3000])


def batch():
    """Where kagentd listens (here the stand-in of tests/fixtures), DIR/problems goes to it as
    a batch with the settings, and --compose asks it for the batch's sessions (which the
    stand-in does not know: a clear error, exit 2)."""
    socket_path = os.path.join(FOLDER, "kagentd.sock")
    log = os.path.join(FOLDER, "kagentd.jsonl")
    daemon = subprocess.Popen([sys.executable, os.path.join(SOURCE, "tests", "fixtures",
                                                            "fake_kagentd.py"),
                               socket_path, log])
    folder = output("mlp-batch")
    try:
        for _ in range(100):
            if os.path.exists(socket_path + ".ready"):
                break
            time.sleep(0.1)
        run = model(MLP, "--top", "1", "--device", "cpu", "--worker", SOCKET,
                    "--socket", socket_path, "--output", folder, "--model", "gpt-test",
                    "--max-turns", "7")
        with open(log) as handle:
            posts = [json.loads(line) for line in handle if '"POST"' in line]
        body = (posts or [{}])[-1].get("body") or {}
        with open(os.path.join(folder, "batch.json")) as handle:
            queued = json.load(handle)
        check("kagentd runs: the sub-problems queued there with the run's settings",
              run.returncode == 0 and body.get("folder") == os.path.join(folder, "problems")
              and body.get("settings") == {"model": "gpt-test", "max_turns": 7}
              and queued.get("batch") == "b-20250101-000000-new00003",
              run.stdout + run.stderr + json.dumps(posts))
        run = model(MLP, "--compose", "--device", "cpu", "--socket", socket_path, "--output",
                    folder)
        check("--compose after --batch: kagentd asked for the batch; unknown there, a clear "
              "error", run.returncode == 2 and "did not describe the batch" in run.stderr,
              run.stderr)
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def whole_path():
    with open(os.path.join(MODELS, "candidates", "mlp_down.py")) as handle:
        variant = handle.read()
    script = os.path.join(FOLDER, "script.json")
    with open(script, "w") as handle:
        json.dump({"by_turn": [chat_reply([("evaluate", {"source": variant,
                                                         "note": "addmm"})]),
                               chat_reply([("finish", {"summary": "addmm for down"})])]},
                  handle)
    server = subprocess.Popen([sys.executable, SERVER, "--script", script, "--log",
                               os.path.join(FOLDER, "server.jsonl"), "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline().split()[1])
    folder = output("mlp-whole")
    try:
        # --only: which of the two layers is the hotter is the clock's to decide
        run = model(MLP, "--only", "down", "--top", "1", "--device", "cpu", "--worker", SOCKET,
                    "--output",
                    folder, "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "scripted",
                    "--api", "chat_completions", "--target", "0", "--max-turns", "4", "--json",
                    timeout=600)
    finally:
        server.terminate()
        server.wait(timeout=10)
    report = last_json(run.stdout) or {}
    spots = report.get("hotspots") or [{}]
    check("the whole path: optimize ran on the hot spot and wrote its summary",
          os.path.isdir(os.path.join(folder, "runs")) and any(
              name.endswith("_down.json") for name in os.listdir(os.path.join(folder, "runs"))),
          run.stderr[-3000:])
    check("the whole path: the confirmed variant is composed, correct end to end",
          run.returncode == 0 and spots[0].get("path") == "down" and spots[0].get("variant")
          and report.get("end_to_end", {}).get("correct") is True,
          run.stdout[-3000:] + run.stderr[-3000:])


def main():
    worker = subprocess.Popen([KAGENT, "worker", "--socket", SOCKET], env=ENVIRONMENT,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if os.path.exists(SOCKET):
                break
            time.sleep(0.1)
        usage_errors()
        bad_factories()
        attention_plan()
        if SANITIZED:
            skip("composition judged end to end, with a stand-in and with a wrong variant")
        else:
            composition()
        batch()
        if SANITIZED:
            skip("the whole path: the confirmed variant is composed, correct end to end")
        else:
            whole_path()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        shutil.rmtree(FOLDER, ignore_errors=True)
    return TAP.finish()


if __name__ == "__main__":
    sys.exit(main())
