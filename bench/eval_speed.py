#!/usr/bin/env python3
"""How long one `kagent eval` takes, cold and warm, next to KernelBench's own harness on the
same candidate and the same GPU. Not a test: run it on a GPU machine and put the table it
prints into docs/benchmarks.md.

  python3 bench/eval_speed.py --kernelbench PATH/TO/KernelBench-checkout \
      [--problem level1/19_ReLU.py] [--candidate tests/gpu/candidates/triton_relu.py] \
      [--kagent build/kagent] [--warm-runs 3] [--skip-kernelbench]

cold: a fresh worker, empty caches (Triton's and the baselines'), the torch.compile baseline
      included. warm: a running `kagent worker`, the problem's baselines cached.
KernelBench: eval_kernel_against_ref with 5 correctness trials and 100 timed trials, in a new
Python process as its scripts run it (bench/kernelbench_child.py).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# KernelBench's harness in a process of its own, shared with reward_throughput.py
KERNELBENCH_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "kernelbench_child.py")


def run_kagent(kagent, problem, candidate, environment, extra):
    started = time.monotonic()
    result = subprocess.run([kagent, "eval", "--json", *extra, problem, candidate],
                            capture_output=True, text=True, env=environment, timeout=900)
    seconds = time.monotonic() - started
    verdict = json.loads(result.stdout)
    if verdict.get("status") != "correct":
        sys.exit(f"kagent eval did not find the candidate correct: {result.stdout[:2000]}"
                 f"{result.stderr[-2000:]}")
    return seconds, verdict


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", required=True)
    parser.add_argument("--problem", default="level1/19_ReLU.py")
    parser.add_argument("--candidate", default="tests/gpu/candidates/triton_relu.py")
    parser.add_argument("--kagent", default="build/kagent")
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--skip-kernelbench", action="store_true")
    arguments = parser.parse_args()
    problem = os.path.join(arguments.kernelbench, "KernelBench", arguments.problem)
    candidate = os.path.abspath(arguments.candidate)
    caches = tempfile.mkdtemp(prefix="kagent-bench-")
    os.chmod(caches, 0o711)  # the sandbox uid must reach the sandbox cache inside
    environment = dict(os.environ, KAGENT_CACHE_DIR=os.path.join(caches, "user"),
                       KAGENT_SANDBOX_CACHE_DIR=os.path.join(caches, "sandbox"),
                       KAGENT_WORKER_SOCKET=os.path.join(caches, "worker.sock"))

    cold_seconds, cold = run_kagent(arguments.kagent, problem, candidate, environment, ["--cold"])
    print(f"kagent cold: {cold_seconds:.2f} s, phases {cold['phase_seconds']}", flush=True)
    worker = subprocess.Popen([arguments.kagent, "worker", "--socket",
                               environment["KAGENT_WORKER_SOCKET"]], env=environment,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(environment["KAGENT_WORKER_SOCKET"]):
        time.sleep(0.1)
    warm = []
    for _ in range(arguments.warm_runs):
        seconds, verdict = run_kagent(arguments.kagent, problem, candidate, environment, [])
        if not verdict["timing"]["baselines_cached"]:
            sys.exit("the warm run did not use cached baselines")
        warm.append(seconds)
        print(f"kagent warm: {seconds:.2f} s, phases {verdict['phase_seconds']}", flush=True)
    worker.terminate()
    worker.wait()

    kernelbench = None
    if not arguments.skip_kernelbench:
        build = tempfile.mkdtemp(prefix="kernelbench-build-")
        started = time.monotonic()
        result = subprocess.run([sys.executable, KERNELBENCH_CHILD, arguments.kernelbench,
                                 problem, candidate, build], capture_output=True, text=True,
                                timeout=1800)
        seconds = time.monotonic() - started
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if not lines:
            sys.exit(f"KernelBench's harness failed: {result.stdout[-3000:]}{result.stderr[-3000:]}")
        kernelbench = dict(json.loads(lines[-1]), process_seconds=seconds)
        print(f"KernelBench: {seconds:.2f} s", flush=True)

    gpu = cold["environment"]["gpu"]
    timing = cold["timing"]
    report = {
        "date": time.strftime("%Y-%m-%d"), "gpu": gpu, "driver": cold["environment"]["driver"],
        "torch": cold["environment"]["torch"], "triton": cold["environment"]["triton"],
        "problem": arguments.problem, "candidate": arguments.candidate,
        "kagent_cold_seconds": cold_seconds, "kagent_warm_seconds": warm,
        "kagent_warm_median_seconds": statistics.median(warm),
        "kagent_trials": len(cold["trials"]), "kagent_timed_calls": timing["candidate"]["calls"],
        "kagent_candidate_ms": timing["candidate"]["median_ms"],
        "kagent_eager_ms": timing["eager"]["median_ms"],
        "kagent_compile_ms": (timing["compile"] or {}).get("median_ms"),
        "kernelbench": kernelbench,
    }
    print(json.dumps(report, indent=1))
    warm_median = report["kagent_warm_median_seconds"]
    print(f"\n| {report['date']} | {gpu} | {arguments.problem} | kagent cold {cold_seconds:.1f} s "
          f"| kagent warm {warm_median:.2f} s | KernelBench "
          + (f"{kernelbench['process_seconds']:.1f} s | {kernelbench['process_seconds'] / warm_median:.0f}x"
             f" / {kernelbench['process_seconds'] / cold_seconds:.1f}x |" if kernelbench else "n/a |"))


if __name__ == "__main__":
    main()
