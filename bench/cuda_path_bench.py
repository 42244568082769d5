#!/usr/bin/env python3
"""The same CUDA ReLU judged two ways, side by side: through torch's load_inline (a C++
extension built with nvcc and a host compiler) and through kagent_runner.cuda (NVRTC with the
cubin cache, launched through the driver). Not a test: run it on a GPU machine.

  python3 bench/cuda_path_bench.py [--kagent build/kagent] [--runs 2]

Each path gets its own empty caches (KAGENT_CACHE_DIR, KAGENT_SANDBOX_CACHE_DIR) and its own
warm `kagent worker`, so the first evaluation builds from nothing (cold) and later ones reuse
the build (warm). The torch.compile baseline is left out (--no-compile-baseline) so that only
the candidate's own build differs. Prints wall times, the phases kagent reports, and the
cold ratio.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANDIDATES = {
    "load_inline": os.path.join(ROOT, "tests", "gpu", "candidates", "cuda_relu_load_inline.py"),
    "kagent_runner.cuda": os.path.join(ROOT, "tests", "gpu", "candidates", "kagent_cuda_relu.py"),
}


def evaluate(kagent, problem, candidate, environment):
    started = time.monotonic()
    result = subprocess.run([kagent, "eval", "--json", "--no-compile-baseline", "--worker",
                             environment["KAGENT_WORKER_SOCKET"], problem, candidate],
                            capture_output=True, text=True, env=environment, timeout=900)
    seconds = time.monotonic() - started
    try:
        verdict = json.loads(result.stdout)
    except ValueError:
        sys.exit(f"kagent eval gave no verdict: {result.stdout[-2000:]}{result.stderr[-2000:]}")
    if verdict.get("status") != "correct":
        sys.exit(f"{os.path.basename(candidate)} was not judged correct: "
                 f"{json.dumps(verdict)[:2000]}{result.stderr[-2000:]}")
    return seconds, verdict


def run_path(kagent, problem, candidate, runs):
    caches = tempfile.mkdtemp(prefix="kagent-cuda-bench-")
    os.chmod(caches, 0o711)  # the sandbox uid must reach the sandbox cache inside
    environment = dict(os.environ, KAGENT_CACHE_DIR=os.path.join(caches, "user"),
                       KAGENT_SANDBOX_CACHE_DIR=os.path.join(caches, "sandbox"),
                       KAGENT_WORKER_SOCKET=os.path.join(caches, "worker.sock"))
    worker = subprocess.Popen([kagent, "worker", "--socket", environment["KAGENT_WORKER_SOCKET"]],
                              env=environment, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):
            if os.path.exists(environment["KAGENT_WORKER_SOCKET"]):
                break
            time.sleep(0.1)
        return [evaluate(kagent, problem, candidate, environment) for _ in range(runs)]
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kagent", default=os.path.join(ROOT, "build", "kagent"))
    parser.add_argument("--problem", default=os.path.join(ROOT, "tests", "gpu", "problems",
                                                          "relu.py"))
    parser.add_argument("--runs", type=int, default=2, help="evaluations per path (first cold)")
    arguments = parser.parse_args()
    results = {}
    for name, candidate in CANDIDATES.items():
        results[name] = run_path(arguments.kagent, arguments.problem, candidate,
                                 max(1, arguments.runs))
        for index, (seconds, verdict) in enumerate(results[name]):
            print(f"{name:>20} {'cold' if index == 0 else 'warm'}: {seconds:7.2f} s wall, "
                  f"candidate {verdict['timing']['candidate']['median_ms']:.4f} ms, "
                  f"phases {json.dumps(verdict.get('phase_seconds'))}", flush=True)
    inline_cold = results["load_inline"][0][0]
    nvrtc_cold = results["kagent_runner.cuda"][0][0]
    print(f"cold wall: load_inline {inline_cold:.2f} s, kagent_runner.cuda {nvrtc_cold:.2f} s, "
          f"ratio {inline_cold / nvrtc_cold:.1f}x")
    if arguments.runs > 1:
        inline_warm = results["load_inline"][1][0]
        nvrtc_warm = results["kagent_runner.cuda"][1][0]
        print(f"warm wall: load_inline {inline_warm:.2f} s, kagent_runner.cuda "
              f"{nvrtc_warm:.2f} s, ratio {inline_warm / nvrtc_warm:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
