"""The driver shared by the end-to-end suites (tests/cpu/eval_cases.py on any machine,
tests/gpu/eval_cases.py on a GPU machine): it starts `kagent worker` on a private socket,
runs `kagent eval --json` on each case, checks status, violations and extra conditions,
and prints TAP ending with a line `N passed, N failed`."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# The GPU the suite runs on (KAGENT_SUITE_GPU, GPU 0 by default): its worker serves that GPU
# as sessions' and kagentd's lanes do (`kagent worker --gpu N`), so on a host of several GPUs
# the sandbox leaves each candidate its own GPU's device node only (docs/sandbox.md).
SUITE_GPU = os.environ.get("KAGENT_SUITE_GPU", "0")
# evaluation.c's sandbox uid base, plus the GPU's number
SANDBOX_UID = 2147400000 + int(SUITE_GPU)


class Case:
    def __init__(self, problem, candidate, status, violation=None, needle=None, check=None,
                 arguments=()):
        self.problem, self.candidate, self.status = problem, candidate, status
        self.violation, self.needle, self.check = violation, needle, check
        self.arguments = tuple(arguments)


# What the worker keeps running as the sandbox uid between evaluations, by process name: its
# kept judge (docs/worker-protocol.md, "The kept judge") and the candidate process it prepared
# for the next evaluation ("Prepared candidate processes"); it ends both when it ends.
WORKER_KEPT = ("kagent-judge", "kagent-prepared")


def sandbox_processes(spare_kept=False):
    """Processes of the sandbox uid; with spare_kept, less one of each WORKER_KEPT name (a
    second of a name is a process left behind)."""
    count, spared = 0, set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid != SANDBOX_UID:
                    continue
                if spare_kept:
                    with open(f"/proc/{entry}/comm") as handle:
                        name = handle.read().strip()
                    if name in WORKER_KEPT and name not in spared:
                        spared.add(name)
                        continue
                count += 1
            except OSError:
                pass
    return count


class Suite:
    def __init__(self, device, fixtures, call_timeout):
        self.kagent = os.environ["KAGENT"]
        self.device = device
        self.problems = os.path.join(fixtures, "problems")
        self.candidates = os.path.join(fixtures, "candidates")
        self.call_timeout = call_timeout
        self.number = 0
        self.failures = 0
        self.socket_path = None
        self.worker = None
        # each candidate is judged as a copy marked with this run, so that a run on a machine
        # where the suite ran before sees new candidates, as a fresh machine does: a candidate
        # judged before finds its cache and takes no prepared process (docs/worker-protocol.md)
        self.run_mark = f"# kagent suite run {os.getpid()}-{time.time_ns()}\n"
        self.copies = tempfile.mkdtemp(prefix=f"kagent-{device}-suite-candidates-")

    def candidate_copy(self, path):
        """This run's copy of the candidate at path (made at its first use), under its own
        name, in a folder per folder of the originals."""
        folder = os.path.join(self.copies, os.path.abspath(os.path.dirname(path)).strip("/")
                              .replace("/", "_"))
        os.makedirs(folder, exist_ok=True)
        copy = os.path.join(folder, os.path.basename(path))
        if not os.path.exists(copy):
            with open(path, "rb") as source:
                text = source.read()
            with open(copy, "wb") as target:
                target.write(text + (b"" if text.endswith(b"\n") else b"\n")
                             + self.run_mark.encode())
        return copy

    def report(self, ok, name, detail=""):
        self.number += 1
        self.failures += 0 if ok else 1
        print(f"{'ok' if ok else 'not ok'} {self.number} - {name}")
        if not ok and detail:
            for line in str(detail).splitlines()[:30]:
                print(f"# {line}")
        sys.stdout.flush()

    def without_torch(self, verdict, log):
        """The exit status when the runner's Python has no torch (1 where the caller asked
        for torch, else 77, skip), or None when it has."""
        if "No module named 'torch'" not in log + json.dumps(verdict):
            return None
        if os.environ.get("KAGENT_REQUIRE_TORCH") == "1":
            self.report(False, "the runner's Python has torch", log)
            return 1
        print("# SKIP the runner's Python has no torch (run .ci/setup)")
        return 77

    def gpu_arguments(self):
        """The suite's GPU for any kagent command that takes --gpu (on the CUDA device)."""
        return ["--gpu", SUITE_GPU] if self.device == "cuda" else []

    def evaluate(self, problem, candidate, arguments=(), worker=True, command_name="eval"):
        command = [self.kagent, command_name, "--device", self.device, "--json",
                   "--call-timeout", str(self.call_timeout), *arguments]
        command += self.gpu_arguments()
        if worker:
            command += ["--worker", self.socket_path]
        command += [os.path.join(self.problems, problem + ".py"),
                    self.candidate_copy(os.path.join(self.candidates, candidate + ".py"))]
        started = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
        seconds = time.monotonic() - started
        try:
            return result.returncode, json.loads(result.stdout), result.stderr, seconds
        except ValueError:
            return result.returncode, None, result.stdout + result.stderr, seconds

    def start_worker(self, arguments=()):
        folder = self.worker_folder = tempfile.mkdtemp(prefix=f"kagent-{self.device}-suite-")
        self.socket_path = os.path.join(folder, "worker.sock")
        self.worker_log = os.path.join(folder, "worker.log")
        with open(self.worker_log, "w") as log:
            self.worker = subprocess.Popen([self.kagent, "worker", "--socket",
                                            self.socket_path, *self.gpu_arguments(),
                                            *arguments],
                                           stdout=subprocess.DEVNULL, stderr=log)
        for _ in range(1200):
            if os.path.exists(self.socket_path):
                return
            time.sleep(0.1)

    def worker_log_tail(self, size=1500):
        """The end of the suite's worker's log (its notes, such as why a prepared candidate
        process was not used)."""
        with open(self.worker_log, errors="replace") as handle:
            return handle.read()[-size:]

    def stop_worker(self):
        self.worker.terminate()
        self.worker.wait(timeout=30)
        shutil.rmtree(self.worker_folder, ignore_errors=True)

    def run_case(self, case, command_name="eval"):
        code, verdict, log, seconds = self.evaluate(case.problem, case.candidate, case.arguments,
                                                    command_name=command_name)
        problems = []
        if verdict is None:
            problems.append(f"no verdict (exit {code}): {log[-800:]}")
        else:
            if verdict.get("status") != case.status:
                problems.append(f"status {verdict.get('status')}, expected {case.status}: "
                                f"{verdict.get('reason')}")
            if (code == 0) != (case.status == "correct"):
                problems.append(f"exit status {code}")
            checks = [v.get("check") for v in verdict.get("violations", [])]
            if case.violation and case.violation not in checks:
                problems.append(f"violations {checks} lack {case.violation}")
            if case.needle and case.needle not in json.dumps(verdict):
                problems.append(f"the verdict does not mention {case.needle!r}")
            timed = ((verdict.get("timing") or {}).get("candidate") or {}).get("median_ms")
            if case.status == "correct" and not (timed or 0) > 0:
                problems.append("a correct verdict without timings")
            if case.check is not None and not problems:
                problems.extend(case.check(verdict))
        summary = ""
        if verdict is not None and verdict.get("timing"):
            timing = verdict["timing"]
            summary = (f" [{seconds:.1f} s; candidate {timing['candidate']['median_ms']:.4f} ms,"
                       f" {timing.get('speedup_vs_eager') or 0:.2f}x eager]")
        elif verdict is not None:
            summary = f" [{seconds:.1f} s: {verdict.get('reason', '')[:100]}]"
        self.report(not problems,
                    f"{command_name} {case.problem} / {case.candidate} -> {case.status}{summary}",
                    "\n".join(problems))
        return verdict

    def run_bad_problem(self, problem, needle, candidate):
        code, verdict, log, _ = self.evaluate(problem, candidate)
        ok = (code == 2 and verdict is not None and verdict.get("error") == "problem"
              and needle in verdict.get("message", ""))
        self.report(ok, f"bad problem {problem} -> error", json.dumps(verdict) + log[-400:])

    def finish(self):
        shutil.rmtree(self.copies, ignore_errors=True)
        self.report(sandbox_processes() == 0, "no process of the sandbox uid is left")
        print(f"# {self.number - self.failures} passed, {self.failures} failed")
        return 1 if self.failures else 0
