#!/usr/bin/env python3
"""End-to-end `kagent eval --device cpu` on the fixture problems and adversarial
candidates: the real worker, judge, sandbox and verdict, everything but the GPU.
Prints TAP. Needs torch in the runner's Python; without it the suite skips (exit 77)
unless KAGENT_REQUIRE_TORCH=1, as in CI."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

KAGENT = os.environ["KAGENT"]
SOURCE = os.environ["KAGENT_SOURCE_DIR"]
PROBLEMS = os.path.join(SOURCE, "tests", "fixtures", "problems")
CANDIDATES = os.path.join(SOURCE, "tests", "fixtures", "candidates")
SANDBOX_UID = 2147400000

# (problem, candidate, expected status, a violation that must be named or None, extra check)
CASES = [
    ("relu", "relu_correct", "correct", None, None),
    ("relu", "relu_identity", "incorrect", "output_mismatch", "signed"),
    ("softmax_wide", "softmax_zeros", "incorrect", "output_mismatch", "norm-relative"),
    ("softmax_wide", "softmax_correct", "correct", None, None),
    ("relu", "relu_wrong_dtype", "incorrect", "dtype_mismatch", None),
    ("relu", "relu_wrong_shape", "incorrect", "shape_mismatch", None),
    ("relu", "relu_mutates_input", "incorrect", "input_mutation", None),
    ("relu", "relu_nan", "incorrect", "nonfinite_output", None),
    ("relu", "relu_raises", "runtime_error", None, "not finished"),
    ("relu", "relu_exit_zero", "crashed", None, "status 0"),
    ("relu", "relu_segfault", "crashed", None, "signal 11"),
    ("relu", "relu_hang", "timeout", None, None),
    ("relu", "relu_correct", "correct", None, None),  # the next evaluation is fine
    ("relu", "relu_network", "correct", None, None),
    ("relu", "relu_write_outside", "correct", None, None),
    ("relu", "relu_fork_bomb", "runtime_error", None, None),
    ("relu", "relu_timer_patch", "rejected", "timer_tampering", None),
    ("relu", "relu_fake_verdict", "incorrect", "output_mismatch", None),
    ("relu", "relu_pointer_cache", "incorrect", "output_mismatch", None),
    ("relu", "relu_subclass", "incorrect", None, "subclass"),
    ("relu", "not_python", "compile_error", None, "not valid Python"),
    ("relu", "no_modelnew", "runtime_error", None, "ModelNew"),
    ("linear", "linear_correct", "correct", None, None),
    ("tuple_outputs", "tuple_correct", "correct", None, None),
    ("tuple_outputs", "tuple_wrong_index", "incorrect", "output_mismatch", "output[1]"),
    ("row_sum_softmax", "row_sum_ones", "correct", None, "degenerate"),
]
# problem files that cannot be used: exit 2 and an error object, never a verdict
BAD_PROBLEMS = [
    ("not_python", "not valid Python"),
    ("no_model", "no class Model"),
    ("import_error", "does not import"),
    ("returns_nothing", "returned nothing"),
]


def runner_has_torch():
    probe = subprocess.run([KAGENT, "eval", "--device", "cpu", "--json", "--cold",
                            os.path.join(PROBLEMS, "relu.py"),
                            os.path.join(CANDIDATES, "relu_correct.py")],
                           capture_output=True, text=True, timeout=600)
    return "No module named 'torch'" not in probe.stdout + probe.stderr, probe


def sandbox_processes():
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == SANDBOX_UID:
                    count += 1
            except OSError:
                pass
    return count


def evaluate(socket_path, problem, candidate, extra=()):
    command = [KAGENT, "eval", "--device", "cpu", "--json", "--no-compile-baseline",
               "--worker", socket_path, "--call-timeout", "5", *extra, problem, candidate]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    try:
        return result.returncode, json.loads(result.stdout), result.stderr
    except ValueError:
        return result.returncode, None, result.stdout + result.stderr


def main():
    has_torch, probe = runner_has_torch()
    if not has_torch:
        if os.environ.get("KAGENT_REQUIRE_TORCH") == "1":
            print("1..1\nnot ok 1 - the runner's Python has no torch\n# " + probe.stdout[-500:])
            return 1
        print("1..0 # SKIP the runner's Python has no torch (run .ci/setup)")
        return 77
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    os.environ["KAGENT_TEST_PORT"] = str(listener.getsockname()[1])
    escape = "/tmp/kagent-sandbox-escape"
    if os.path.exists(escape):
        os.unlink(escape)
    folder = tempfile.mkdtemp(prefix="kagent-cpu-suite-")
    socket_path = os.path.join(folder, "worker.sock")
    worker = subprocess.Popen([KAGENT, "worker", "--socket", socket_path],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(600):
        if os.path.exists(socket_path):
            break
        time.sleep(0.1)
    total = 1 + len(CASES) + len(BAD_PROBLEMS) + 2
    print(f"1..{total}")
    failures = 0
    number = 0

    def report(ok, name, detail=""):
        nonlocal failures, number
        number += 1
        failures += 0 if ok else 1
        print(f"{'ok' if ok else 'not ok'} {number} - {name}")
        if not ok and detail:
            for line in str(detail).splitlines()[:20]:
                print(f"# {line}")
        sys.stdout.flush()

    verdict = json.loads(probe.stdout) if probe.stdout.strip().startswith("{") else None
    report(probe.returncode == 0 and verdict and verdict["status"] == "correct"
           and verdict["timing"]["compile"] is not None,
           "cold evaluation with a fresh worker and the torch.compile baseline",
           probe.stdout[-800:] + probe.stderr[-800:])
    for problem, candidate, status, violation, needle in CASES:
        code, verdict, log = evaluate(socket_path, os.path.join(PROBLEMS, problem + ".py"),
                                      os.path.join(CANDIDATES, candidate + ".py"))
        problems = []
        if verdict is None:
            problems.append(f"no verdict (exit {code}): {log[-600:]}")
        else:
            if verdict.get("status") != status:
                problems.append(f"status {verdict.get('status')}, expected {status}: "
                                f"{verdict.get('reason')}")
            if (code == 0) != (status == "correct"):
                problems.append(f"exit status {code}")
            checks = [v.get("check") for v in verdict.get("violations", [])]
            if violation and violation not in checks:
                problems.append(f"violations {checks} lack {violation}")
            text = json.dumps(verdict)
            if needle and needle not in text:
                problems.append(f"the verdict does not mention {needle!r}")
            if status == "correct" and not (verdict["timing"]["candidate"]["median_ms"] > 0
                                            and verdict["timing"]["speedup_vs_eager"] > 0):
                problems.append("a correct verdict without timings")
        if candidate == "relu_write_outside" and os.path.exists(escape):
            problems.append("the candidate wrote outside its scratch folder")
        if candidate == "relu_fork_bomb":
            time.sleep(0.5)
            if sandbox_processes():
                problems.append(f"{sandbox_processes()} sandbox processes outlived the evaluation")
        report(not problems, f"{problem} / {candidate} -> {status}", "\n".join(problems))
    for problem, needle in BAD_PROBLEMS:
        code, verdict, log = evaluate(socket_path, os.path.join(PROBLEMS, problem + ".py"),
                                      os.path.join(CANDIDATES, "relu_correct.py"))
        ok = (code == 2 and verdict is not None and verdict.get("error") == "problem"
              and needle in verdict.get("message", ""))
        report(ok, f"bad problem {problem} -> error", json.dumps(verdict) + log[-400:])
    code, verdict, log = evaluate(socket_path, os.path.join(PROBLEMS, "relu.py"),
                                  os.path.join(CANDIDATES, "relu_correct.py"))
    report(code == 0 and verdict["timing"]["baselines_cached"] is True,
           "a second evaluation of a problem reuses its cached baselines", json.dumps(verdict)[:800])
    worker.terminate()
    worker.wait(timeout=30)
    report(sandbox_processes() == 0, "no process of the sandbox uid is left")
    listener.close()
    print(f"# {total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
