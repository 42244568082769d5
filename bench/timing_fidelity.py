#!/usr/bin/env python3
"""Timing fidelity (issue 10, benchmark a): a Triton ReLU (tests/gpu/candidates/triton_relu.py) against torch.relu at 4 MB, 64 MB and
6.4 GB of float32 input. For each size it measures the two kernels' device times with
torch.profiler (CUPTI) in this process, then runs `kagent eval --json --no-cache
--no-compile-baseline` ten times in a row (both arms measured afresh each time) and prints
the device-time speedup of each verdict, its median against CUPTI's kernel ratio (the goal:
within 0.95-1.05) and the spread of the ten (the goal: within 3%), plus the wall-time speedups
beside them and each arm's device median per verdict (do the arms move together?), and how
many verdicts' 95% intervals hold the median of all ten (an interval that tells the truth
holds it about 19 times in 20). Where OUT is set, each verdict is written there whole
(fidelity-SIZE-N.json). Needs a GPU, torch and triton.

With --runners A,B (runner folders, as KAGENT_RUNNER_DIR takes them; "default" for the
build's own) the verdicts alternate between them, A, B, A, B..., ten of each, so that two
versions of the runner compare on one machine without the drift of one block after another.
--pause S waits S seconds between verdicts, and --cold gives each verdict a new worker: does
one verdict's state (its processes' memory still going back to the driver, the kept judge's)
reach the next? (Session 14 saw the candidate's device time alternate between two values
from one verdict to the next at 4 MB.) --processes 1,3 alternates the verdicts between
`kagent eval --timing-processes 1` and `3` the same way (default: kagent's own choice), so
that timing each arm in several processes compares with one process side by side.

    python3 bench/timing_fidelity.py [--kagent build/kagent] [--runs 10] [--sizes 4MB,64MB,6.4GB]
        [--gpu N] [--runners default,PATH] [--processes N,M] [--pause SECONDS] [--cold]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

SIZES = {"4MB": (16, 65536), "64MB": (256, 65536), "6.4GB": (4096, 393216)}

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


batch_size = {batch}
dim = {dim}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""

# the GPU suite's honest Triton ReLU, the same candidate the suite checks
CANDIDATE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu",
                              "candidates", "triton_relu.py")


def kernel_ms(function, x, repeats=20):
    """The median device time of the kernels one call launches, from torch.profiler."""
    for _ in range(3):
        function(x)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as recorder:
        for _ in range(repeats):
            function(x)
        torch.cuda.synchronize()
    times = [event.device_time for event in recorder.events()
             if event.device_type == torch.autograd.DeviceType.CUDA]
    per_call = len(times) // repeats
    return statistics.median(sum(times[i * per_call:(i + 1) * per_call]) / 1e3
                             for i in range(repeats))


def cupti_ratio(folder, batch, dim):
    sys.path.insert(0, folder)
    import importlib

    candidate = importlib.import_module("candidate_module")
    x = torch.randn(batch, dim, device="cuda")
    model = candidate.ModelNew()
    eager = kernel_ms(torch.relu, x)
    own = kernel_ms(model, x)
    del x
    torch.cuda.empty_cache()
    sys.path.remove(folder)
    del sys.modules["candidate_module"]
    return eager, own


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kagent", default="build/kagent")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--sizes", default="4MB,64MB,6.4GB")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU both measures run on")
    parser.add_argument("--runners", default="default",
                        help="runner folders whose verdicts alternate (default: the build's)")
    parser.add_argument("--processes", default="",
                        help="--timing-processes values whose verdicts alternate (default: "
                             "kagent's own)")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds to wait between verdicts (does the last one's state "
                             "reach the next?)")
    parser.add_argument("--cold", action="store_true",
                        help="a new worker for every verdict (kagent eval --cold)")
    options = parser.parse_args()
    # each variant a runner and a process count, alternating verdict by verdict
    counts = options.processes.split(",") if options.processes else [""]
    runners = [(runner, count) for runner in options.runners.split(",") for count in counts]
    torch.cuda.set_device(options.gpu)
    print(f"GPU {options.gpu}: {torch.cuda.get_device_name(options.gpu)}, "
          f"torch {torch.__version__}")
    rows = []
    for size in options.sizes.split(","):
        batch, dim = SIZES[size]
        folder = tempfile.mkdtemp(prefix="kagent-fidelity-")
        problem = os.path.join(folder, "problem.py")
        candidate = os.path.join(folder, "candidate_module.py")
        with open(problem, "w") as handle:
            handle.write(PROBLEM.format(batch=batch, dim=dim))
        with open(CANDIDATE_PATH) as source, open(candidate, "w") as handle:
            handle.write(source.read())
        eager_ms, own_ms = cupti_ratio(folder, batch, dim)
        ratio = eager_ms / own_ms
        measured = {variant: {"device": [], "wall": [], "intervals": [],
                              "arms": {"eager": [], "candidate": []}, "processes": []}
                    for variant in runners}
        for run in range(options.runs * len(runners)):
            runner, count = runners[run % len(runners)]
            environment = dict(os.environ)
            environment.pop("KAGENT_RUNNER_DIR", None)
            if runner != "default":
                environment["KAGENT_RUNNER_DIR"] = os.path.abspath(runner)
            if run > 0 and options.pause > 0:
                time.sleep(options.pause)
            result = subprocess.run([options.kagent, "eval", "--json", "--no-cache",
                                     "--no-compile-baseline", "--gpu", str(options.gpu),
                                     *(["--cold"] if options.cold else []),
                                     *(["--timing-processes", count] if count else []),
                                     problem, candidate],
                                    capture_output=True, text=True, env=environment)
            if os.environ.get("OUT"):
                # each verdict whole (its samples, stops, order), to look into a spread
                with open(os.path.join(os.environ["OUT"], f"fidelity-{size}-{run}.json"),
                          "w") as handle:
                    handle.write(result.stdout)
            try:
                verdict = json.loads(result.stdout)
                timing = verdict["timing"]
                into = measured[(runner, count)]
                into["device"].append(timing["device"]["speedup_vs_eager"])
                into["wall"].append(timing["wall"]["speedup_vs_eager"])
                into["intervals"].append(timing["device"].get("speedup_vs_eager_ci95"))
                # the processes each arm was timed in, as the judge chose them
                into["processes"].append((timing.get("processes") or {}).get("candidate"))
                # whether the arms move together between verdicts, or each on its own
                for arm, medians in into["arms"].items():
                    medians.append(timing["device"][arm]["median_ms"] * 1e3)
            except (ValueError, KeyError, TypeError):
                print(f"{size}: no verdict: {result.stdout[-500:]} {result.stderr[-500:]}")
                return 2
        for (runner, count), into in measured.items():
            device = into["device"]
            median = statistics.median(device)
            spread = (max(device) - min(device)) / median
            holding = sum(1 for interval in into["intervals"]
                          if interval and interval[0] <= median <= interval[1])
            label = " ".join(part for part in (
                runner if len(options.runners.split(",")) > 1 else "",
                f"p{count}" if count else "") if part)
            rows.append((f"{size} {label}".strip(), eager_ms,
                         own_ms, ratio, median, median / ratio, spread,
                         statistics.median(into["wall"]), device, into["wall"], into["arms"],
                         into["processes"], f"{holding}/{len(device)}"))
    print(f"{'size':>6} {'torch ms':>9} {'triton ms':>9} {'CUPTI':>7} {'device':>7} "
          f"{'/CUPTI':>7} {'spread':>7} {'wall':>7} {'CI holds':>8}")
    for size, eager_ms, own_ms, ratio, median, fidelity, spread, wall, *_, holding in rows:
        print(f"{size:>6} {eager_ms:9.4f} {own_ms:9.4f} {ratio:7.3f} {median:7.3f} "
              f"{fidelity:7.3f} {spread * 100:6.1f}% {wall:7.3f} {holding:>8}")
    for size, *_, device, wall, arm_medians, processes, _ in rows:
        print(f"{size} device: {' '.join(f'{value:.3f}' for value in device)}")
        print(f"{size} processes per arm: {' '.join(str(value) for value in processes)}")
        print(f"{size} wall:   {' '.join(f'{value:.3f}' for value in wall)}")
        for arm, medians in arm_medians.items():
            print(f"{size} {arm} device medians (us): "
                  f"{' '.join(f'{value:.3f}' for value in medians)}")
    ok = all(0.95 <= row[5] <= 1.05 and row[6] <= 0.03 for row in rows)
    print("within 0.95-1.05 of CUPTI and 3% spread:", "yes" if ok else "no")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
