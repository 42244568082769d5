#!/usr/bin/env python3
"""End-to-end `kagent eval --device cpu` on the fixture problems and adversarial
candidates: the real worker, judge, sandbox and verdict, everything but the GPU; and
`kagent optimize` refusing the bad problems before its first request. Prints TAP. Needs
torch in the runner's Python; without it the suite skips (exit 77) unless
KAGENT_REQUIRE_TORCH=1, as in CI."""
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "sandbox", "runner"))
from eval_suite import SANDBOX_UID, Case, Suite, sandbox_processes  # noqa: E402
from kagent_runner import processes  # noqa: E402 - /proc readings only, no torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import memory_stand_in  # noqa: E402 - a problem that holds a lock while it is loaded

ESCAPE = "/tmp/kagent-sandbox-escape"


def no_escape(verdict):
    return ["the candidate wrote outside its scratch folder"] if os.path.exists(ESCAPE) else []


def nothing_left(verdict):
    time.sleep(0.5)
    left = sandbox_processes(spare_kept=True)
    return [f"{left} sandbox processes outlived the evaluation"] if left else []


def baselines_cached(verdict):
    """Cached baselines, and so the candidate timed alone: its order is sequential."""
    timing = verdict["timing"]
    if not timing["baselines_cached"]:
        return ["baselines were measured again"]
    return [] if timing["order"] == "sequential" else [f"order {timing['order']} when cached"]


STOPS = ("fine", "tight", "time_cap", "call_cap")


def timed_together(verdict):
    """A small problem on the CPU: every arm timed in alternating rounds (docs/verdict.md),
    each with a stop reason of the rule's."""
    timing = verdict["timing"]
    arms = [timing[arm] for arm in ("candidate", "eager", "compile")]
    if timing["order"] != "interleaved" or None in arms:
        return [f"order {timing['order']}, arms measured {[arm is not None for arm in arms]}"]
    return [] if all(arm["stop"] in STOPS for arm in arms) else \
        [f"stop reasons {[arm['stop'] for arm in arms]}"]


def generalises(expected):
    """The generalisation gate's outcome (docs/verdict.md): True, False or None (unchecked)."""

    def check(verdict):
        outcome = verdict.get("generalisation") or {}
        if outcome.get("generalises") is not expected or outcome.get("checked") is not (
                expected is not None):
            return [f"generalisation {outcome}, expected generalises {expected}"]
        return []

    return check


def load_steps(verdict):
    """The candidate's own account of its start (candidate.py, load_steps) reaches the
    verdict's phase_seconds, each step once, none longer than the judge's whole wait."""
    phases = verdict.get("phase_seconds") or {}
    steps = {step: phases.get("candidate_" + step) for step in
             ("sandbox", "context", "record", "setup_wait", "import", "build")}
    if not all(isinstance(value, float) and value >= 0 for value in steps.values()):
        return [f"load steps {steps}"]
    waited = phases.get("load_candidate")
    inside = steps["import"] + steps["build"]
    return [] if isinstance(waited, float) and inside <= waited + 0.01 else \
        [f"import + build {inside} s past the judge's wait {waited}"]


def timed_in_processes(count):
    """The eager arm and the candidate's each timed in `count` processes (docs/verdict.md,
    "Processes per arm"): the verdict says so, each arm's samples are its processes'
    together, each with calls of its own, and every further candidate process was sealed
    and its windows counted as the first's."""

    def check(verdict):
        timing = verdict["timing"]
        processes = timing.get("processes") or {}
        problems = []
        if (processes.get("candidate"), processes.get("eager"), processes.get("dropped")) != \
                (count, count, []):
            problems.append(f"processes {processes}")
        for arm in ("candidate", "eager"):
            summary = timing["wall"][arm] or {}
            calls = summary.get("process_calls") or []
            if len(calls) != count or sum(calls) != summary.get("calls") or min(calls) < 10 \
                    or len(summary.get("process_medians_ms") or []) != count:
                problems.append(f"{arm}: calls {summary.get('calls')} in processes {calls}")
        boundary = timing["boundary"]
        others = boundary.get("processes") or []
        if len(others) != count - 1 or not all(item.get("sealed") for item in others):
            problems.append(f"further processes' boundaries {others}"[:300])
        windows = (boundary.get("windows") or 0) - sum(item.get("windows") or 0
                                                       for item in others)
        if windows <= 0:
            problems.append(f"windows {boundary.get('windows')} for all processes")
        return problems + nothing_left(verdict)

    return check


CASES = [
    Case("relu", "relu_correct", "correct", check=load_steps),
    Case("relu", "relu_identity", "incorrect", "output_mismatch", "signed"),
    Case("softmax_wide", "softmax_zeros", "incorrect", "output_mismatch", "norm-relative"),
    Case("softmax_wide", "softmax_correct", "correct"),
    Case("relu", "relu_wrong_dtype", "incorrect", "dtype_mismatch"),
    Case("relu", "relu_wrong_shape", "incorrect", "shape_mismatch"),
    Case("relu", "relu_mutates_input", "incorrect", "input_mutation"),
    Case("relu", "relu_mutates_one_element", "incorrect", "input_mutation"),
    Case("relu", "relu_nan", "incorrect", "nonfinite_output"),
    Case("relu", "relu_raises", "runtime_error", needle="not finished"),
    Case("relu", "relu_exit_zero", "crashed", needle="status 0"),
    Case("relu", "relu_segfault", "crashed", needle="signal 11"),
    Case("relu", "relu_hang", "timeout"),
    Case("relu", "relu_correct", "correct"),  # the next evaluation is fine
    Case("relu", "relu_network", "correct"),
    # every sandboxed child makes its context with the request's hardware queues (one)
    Case("relu", "relu_device_queues", "correct"),
    Case("relu", "relu_write_outside", "correct", check=no_escape),
    # forking up to the sandbox's 256 processes from one that holds torch took 4-7 s on a busy
    # 2-core CI machine, past the suite's 5 s: this case is about the process limit, not time
    Case("relu", "relu_fork_bomb", "runtime_error", check=nothing_left,
         arguments=("--call-timeout", "30")),
    Case("relu", "relu_timer_patch", "rejected", "timer_tampering"),
    Case("relu", "relu_runner_patch", "rejected", "timer_tampering", "CandidateRunner.synchronize"),
    # work deferred to a thread after the call: the judge read the outputs when it ended
    Case("relu", "relu_deferred_thread", "rejected", "timed_output_mismatch"),
    Case("relu", "relu_fake_verdict", "incorrect", "output_mismatch"),
    Case("relu", "relu_pointer_cache", "incorrect", "output_mismatch"),
    Case("relu", "relu_subclass", "incorrect", needle="subclass"),
    Case("relu", "not_python", "compile_error", needle="not valid Python"),
    Case("relu", "no_modelnew", "runtime_error", needle="ModelNew"),
    Case("linear", "linear_correct", "correct"),
    Case("tuple_outputs", "tuple_correct", "correct"),
    Case("tuple_outputs", "tuple_wrong_index", "incorrect", "output_mismatch", "output[1]"),
    Case("row_sum_softmax", "row_sum_ones", "correct", needle="degenerate"),
    Case("relu", "relu_correct", "correct", check=baselines_cached),
    # the generalisation gate: sizes halved and made odd (batch_size 16 -> 9, features 256 -> 129)
    Case("scale_rows", "scale_rows_shape", "correct", needle="features 256 -> 129",
         check=generalises(True), arguments=("--generalise",)),
    Case("scale_rows", "scale_rows_fixed", "correct", needle="is invalid for input",
         check=generalises(False), arguments=("--generalise",)),
    Case("tuple_outputs", "tuple_correct", "correct", needle="read no integer size",
         check=generalises(None), arguments=("--generalise",)),
    Case("scale_rows", "scale_rows_fixed", "correct", check=generalises(None)),  # not asked
    # a call of microseconds: each arm in three processes, their calls in blocks of each round
    Case("scale_rows", "scale_rows_shape", "correct", check=timed_in_processes(3),
         arguments=("--timing-processes", "3", "--no-cache")),
]
BAD_PROBLEMS = [("not_python", "not valid Python"), ("syntax_error", "not valid Python"),
                ("no_model", "no class Model"),
                ("import_error", "does not import"), ("returns_nothing", "returned nothing"),
                ("no_get_inputs", "no function get_inputs()"),
                ("inputs_raise", "get_inputs() failed: ValueError: no inputs today"),
                # a problem larger than the device: how much it needs, not a bare error
                ("too_large", "needs about 32.2 GB (inputs 6.44 GB, outputs 6.44 GB")]


def optimize_refuses(suite, problem, needle):
    """`kagent optimize` checks the problem on its own warm worker (the real one) and refuses
    it as `kagent eval` does, before the model server hears a single request."""
    folder = tempfile.mkdtemp(prefix="kagent-cpu-optimize-")
    script, log = os.path.join(folder, "script.json"), os.path.join(folder, "server.jsonl")
    with open(script, "w") as f:
        json.dump({"exchanges": []}, f)
    server = subprocess.Popen([sys.executable, os.path.join(
        os.environ["KAGENT_SOURCE_DIR"], "tests", "fixtures", "llm_server.py"), "--script",
        script, "--log", log, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline().split()[1])
        environment = dict(os.environ, OPENAI_API_KEY="sk-test",
                           KAGENT_WORKER_SOCKET=os.path.join(folder, "none.sock"),
                           XDG_CONFIG_HOME=os.path.join(folder, "config"))
        environment.pop("KAGENT_CONFIG", None)
        result = subprocess.run(
            [suite.kagent, "optimize", os.path.join(suite.problems, problem + ".py"),
             "--device", "cpu", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
             "--output", os.path.join(folder, "runs"), "--json"],
            cwd=folder, env=environment, capture_output=True, text=True, timeout=600)
        try:
            error = json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            error = {}
        requests = os.path.exists(log) and os.path.getsize(log) > 0
        ok = (result.returncode == 2 and error.get("error") == "problem"
              and needle in error.get("message", "") and not requests)
        suite.report(ok, f"optimize refuses {problem} before any request",
                     f"exit {result.returncode}, requests: {requests}\n{result.stdout[-600:]}"
                     f"\n{result.stderr[-600:]}")
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


EVIDENCE_KEYS = {"schema", "verdict", "status", "problem", "candidate", "seeds", "options",
                 "environment", "samples", "speedup", "kernels", "credit", "roofline"}


def evidence_cases(suite):
    """kagent eval --evidence writes a whole bundle, kagent verify re-runs it (on the CPU only
    the status must match: docs/verdict.md), and a bundle whose candidate was edited is
    refused with exit 2 and the reason."""
    folder = tempfile.mkdtemp(prefix="kagent-evidence-")
    bundle = os.path.join(folder, "bundle")
    try:
        code, verdict, log, _ = suite.evaluate("relu", "relu_correct",
                                               ("--no-compile-baseline", "--evidence", bundle))
        try:
            with open(os.path.join(bundle, "evidence.json")) as stream:
                evidence = json.load(stream)
            with open(os.path.join(bundle, "verdict.json")) as stream:
                saved = json.load(stream)
            candidate = evidence["samples"]["candidate"]
            whole = (EVIDENCE_KEYS <= set(evidence) and evidence["schema"] == "kagent.evidence/1"
                     and saved == verdict and evidence["status"] == "correct"
                     and evidence["seeds"]["base"] == verdict["trials"][0]["seed"]
                     and len(candidate["samples_ms"]) == candidate["calls"] >= 10
                     and candidate["stop"] in STOPS
                     and evidence["environment"]["torch"]
                     and os.path.exists(os.path.join(bundle, "problem.py"))
                     and os.path.exists(os.path.join(bundle, "candidate.py")))
        except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
            whole, log = False, f"{log}\n{error}"
        suite.report(code == 0 and whole, "eval --evidence writes a whole bundle", log[-800:])
        command = [suite.kagent, "verify", "--json", "--worker", suite.socket_path, bundle]
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
        try:
            comparison = json.loads(result.stdout)
        except ValueError:
            comparison = {}
        suite.report(result.returncode == 0 and comparison.get("verified") is True
                     and comparison.get("status_now") == "correct",
                     "verify re-runs the bundle and the status matches",
                     result.stdout[-600:] + result.stderr[-600:])
        with open(os.path.join(bundle, "candidate.py"), "a") as stream:
            stream.write("\n# edited after the verdict\n")
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
        suite.report(result.returncode == 2 and "does not match its sha256" in result.stderr,
                     "verify refuses an edited bundle", result.stdout + result.stderr)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def worker_children(worker_pid, name):
    """The worker's live children of this process name (kagent-judge: kept judges;
    kagent-prepared: prepared candidate processes)."""
    found = []
    for pid in processes.children(worker_pid):
        try:
            with open(f"/proc/{pid}/comm") as handle:
                named = handle.read().strip() == name
            with open(f"/proc/{pid}/stat") as handle:
                live = handle.read().rpartition(")")[2].split()[0] != "Z"
        except OSError:
            continue
        if named and live:
            found.append(pid)
    return found


def kept_judges(worker_pid):
    return worker_children(worker_pid, "kagent-judge")


def released_before_the_verdict(suite):
    """An evaluation's result comes once its kept judge has let go of the problem: what the
    problem's module holds (here a lock, for device memory) is free when `kagent eval`
    returns, so an evaluation after it finds it free (kagentd's retry alone counts on it)."""
    folder = tempfile.mkdtemp(prefix="kagent-held-")
    try:
        path, lock = memory_stand_in.write(folder)
        free = []
        for _ in range(2):
            code, verdict, log, _ = suite.evaluate(path[:-3], "relu_correct",
                                                   ("--no-compile-baseline",))
            with open(lock, "rb") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    free.append(verdict.get("status") if verdict else log[-300:])
                except BlockingIOError:
                    free.append("held after the verdict")
        suite.report(free == ["correct", "correct"],
                     "an evaluation's verdict comes once its kept judge let go of the problem",
                     f"{free}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def kept_judge_cases(suite):
    """The kept judge (docs/worker-protocol.md): one judge process judges one problem's
    evaluations one after another; another problem gets a new one; a kept judge that was
    killed between evaluations (another worker's sweep of the uid) is replaced; a verdict
    comes only once the kept judge let go of its evaluation; the worker's end ends it (the
    suite's last check)."""
    worker = suite.worker.pid
    verdicts, judges = [], []
    for problem, candidate in (("relu", "relu_correct"), ("relu", "relu_correct"),
                               ("linear", "linear_correct")):
        code, verdict, log, _ = suite.evaluate(problem, candidate, ("--no-compile-baseline",))
        verdicts.append(verdict.get("status") if verdict else log[-300:])
        judges.append(kept_judges(worker))
    suite.report(verdicts == ["correct"] * 3 and len(judges[0]) == 1 and judges[1] == judges[0]
                 and len(judges[2]) == 1 and judges[2] != judges[0],
                 "one kept judge judges a problem's evaluations; another problem, another judge",
                 f"{verdicts} {judges}")
    if judges[2]:
        os.kill(judges[2][0], signal.SIGKILL)
        time.sleep(0.2)
    code, verdict, log, _ = suite.evaluate("linear", "linear_correct", ("--no-compile-baseline",))
    now = kept_judges(worker)
    suite.report(verdict is not None and verdict.get("status") == "correct" and len(now) == 1
                 and now != judges[2],
                 "a kept judge killed between evaluations is replaced",
                 f"{now} {judges[2]} " + (json.dumps(verdict)[:400] if verdict else log[-400:]))
    released_before_the_verdict(suite)


def landlock_abi():
    """The kernel's Landlock ABI (0 without Landlock): from 6 on, its signal scope keeps a
    candidate from signalling processes outside its own sandbox, a prepared one included."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(abi, 0)


def prepared_candidate_cases(suite, folder):
    """Prepared candidate processes (docs/worker-protocol.md): a worker started with
    --prepare-candidates makes the next evaluation's process during the current one,
    sandboxed before it is used; the next new candidate runs in it; a killed one is replaced
    by a process made as before; a candidate judged before runs in a new process (it finds
    its cache); a candidate cannot signal the prepared process beside it."""
    worker = suite.worker.pid
    with open(os.path.join(suite.candidates, "relu_correct.py")) as handle:
        source = handle.read()

    def new_candidate(number):
        # a candidate never judged before: a cache of its own, empty
        # (bytes never seen before: the candidate caches outlive the suite)
        unique = f"{number}_{os.getpid()}_{time.time_ns()}"
        path = os.path.join(folder, f"relu_new_{unique}")
        with open(path + ".py", "w") as handle:
            handle.write(source + f"\n# new candidate {unique}\n")
        return path

    def evaluate(candidate):
        code, verdict, log, _ = suite.evaluate("relu", candidate, ("--no-compile-baseline",))
        if verdict is None:
            return (None, None, log[-300:])
        return (verdict.get("status"), verdict.get("candidate_prepared"),
                verdict.get("reason"))

    first = evaluate(new_candidate(1))
    ready = worker_children(worker, "kagent-prepared")
    sandboxed = []
    for pid in ready:
        status = processes.process_status(pid)
        sandboxed.append((os.stat(f"/proc/{pid}").st_uid == SANDBOX_UID,
                          (status["seccomp_filters"] or 0) >= 1,
                          os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")))
    suite.report(first[0] == "correct" and len(ready) == 1
                 and sandboxed == [(True, True, True)],
                 "a preparing worker leaves the next evaluation's process ready: the sandbox "
                 "uid, a seccomp filter, a network namespace of its own",
                 f"{first} {ready} {sandboxed}")
    second = evaluate(new_candidate(2))
    now = worker_children(worker, "kagent-prepared")
    suite.report(second[:2] == ("correct", True) and len(now) == 1 and now != ready,
                 "the next new candidate runs in the prepared process, and another is made",
                 f"{second} {ready} -> {now}\n{suite.worker_log_tail()}")
    for pid in now:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    again = new_candidate(3)
    third = evaluate(again)
    suite.report(third[:2] == ("correct", False) and len(worker_children(
        worker, "kagent-prepared")) == 1,
                 "a prepared process killed between evaluations: a process made as before",
                 f"{third}")
    waiting = worker_children(worker, "kagent-prepared")
    fourth = evaluate(again)
    suite.report(fourth[:2] == ("correct", False)
                 and worker_children(worker, "kagent-prepared") == waiting,
                 "a candidate judged before runs in a new process, which finds its cache; the "
                 "prepared one waits for the next new candidate", f"{fourth} {waiting}")
    code, verdict, log, _ = suite.evaluate("relu", "relu_signals_prepared",
                                           ("--no-compile-baseline",))
    printed = (verdict or {}).get("candidate_output", {}).get("stdout", log[-300:])
    fifth = evaluate(new_candidate(4))
    if landlock_abi() >= 6:
        refused = ("sent" not in printed and "SIGKILL to" in printed
                   and "Operation not permitted" in printed)
        suite.report((verdict or {}).get("status") == "correct" and refused
                     and fifth[:2] == ("correct", True),
                     "a candidate cannot signal the prepared process beside it (Landlock's "
                     "signal scope); the next candidate runs in it",
                     f"{printed!r} {fifth}\n{suite.worker_log_tail()}")
    else:
        suite.report((verdict or {}).get("status") == "correct" and fifth[0] == "correct",
                     "without Landlock's signal scope, a prepared process a candidate ended "
                     "is replaced by a process made as before", f"{printed!r} {fifth}")


def main():
    suite = Suite("cpu", os.path.join(os.environ["KAGENT_SOURCE_DIR"], "tests", "fixtures"),
                  call_timeout=5)
    print(f"1..{14 + len(CASES) + 2 * len(BAD_PROBLEMS) - 2}")
    # no cache: the baselines of an earlier run would leave the candidate's arm to time alone
    code, verdict, log, _ = suite.evaluate("relu", "relu_correct", ("--cold", "--no-cache"),
                                           worker=False)
    status = suite.without_torch(verdict, log)
    if status is not None:
        return status
    problems = timed_together(verdict) if code == 0 else []
    suite.report(code == 0 and verdict["status"] == "correct" and not problems,
                 "cold evaluation: a fresh worker and the torch.compile baseline, the arms "
                 "timed in alternating rounds",
                 f"{problems} {verdict['warnings'] if code == 0 else ''} "
                 + json.dumps(verdict)[:800] + log[-800:])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    os.environ["KAGENT_TEST_PORT"] = str(listener.getsockname()[1])
    if os.path.exists(ESCAPE):
        os.unlink(ESCAPE)
    # the judge's chunked work (comparison, input fingerprint) over many small chunks
    os.environ["KAGENT_JUDGE_CHUNK_ELEMENTS"] = "4096"
    suite.start_worker(("--prepare-candidates",))
    for case in CASES:
        case.arguments = ("--no-compile-baseline",) + case.arguments
        suite.run_case(case)
    for problem, needle in BAD_PROBLEMS:
        suite.run_bad_problem(problem, needle, "relu_correct")
    # (a file without the words "class Model" is refused before a worker starts, while the
    # run is set up: tests/agent/optimize_cases.py)
    refused = [(problem, needle) for problem, needle in BAD_PROBLEMS
               if "class Model" in open(os.path.join(suite.problems, problem + ".py")).read()]
    for problem, needle in refused:
        optimize_refuses(suite, problem, needle)
    evidence_cases(suite)
    # kagent profile: the reference's FLOPs (a 32x256 by 256x128 product: 2*32*256*128)
    code, verdict, log, _ = suite.evaluate("linear", "linear_correct", ("--no-compile-baseline",),
                                           command_name="profile")
    suite.report(code == 0 and verdict is not None
                 and (verdict.get("compute") or {}).get("flops") == 2 * 32 * 256 * 128,
                 "kagent profile counts the reference's FLOPs", json.dumps(verdict)[:600] + log)
    kept_judge_cases(suite)
    folder = tempfile.mkdtemp(prefix="kagent-prepared-")
    try:
        prepared_candidate_cases(suite, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    suite.stop_worker()
    listener.close()
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
