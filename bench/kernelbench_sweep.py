#!/usr/bin/env python3
"""A sweep over KernelBench (issue 10, benchmark c): each chosen problem is evaluated with its
own reference as the candidate (`ModelNew = Model`), once cold (the first evaluation of the
problem: baselines measured and cached) and once warm (baselines from the cache), and the table says which verdict each got and how long each
took. The choice: the LARGEST problems by input bytes (measured on the meta device, so nothing
is allocated), then every k-th of the rest across the three levels up to COUNT in all.

    python3 bench/kernelbench_sweep.py KERNELBENCH_DIR [--count 60] [--largest 15]
        [--kagent build/kagent] [--start N] [--only NAME,...]
        [more kagent eval flags, e.g. --no-compile-baseline]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch


def input_bytes(path):
    """The bytes get_inputs() makes, on the meta device; None when it cannot be told."""
    namespace = {"__name__": "kagent_sweep_problem"}
    try:
        with open(path) as handle:
            source = handle.read()
        with torch.device("meta"):
            exec(compile(source, path, "exec"), namespace)  # noqa: S102 - a benchmark's own input
            values = namespace["get_inputs"]()
        return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))
    except Exception:  # noqa: BLE001 - such a problem is still swept, at size unknown
        return None


def choose(root, count, largest):
    problems = []
    for level in ("level1", "level2", "level3"):
        folder = os.path.join(root, level)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                problems.append(os.path.join(folder, name))
    sizes = {path: input_bytes(path) for path in problems}
    by_size = sorted((p for p in problems if sizes[p] is not None), key=lambda p: -sizes[p])
    chosen = by_size[:largest]
    rest = [p for p in problems if p not in chosen]
    step = max(1, len(rest) // max(1, count - len(chosen)))
    chosen += rest[::step][:count - len(chosen)]
    return chosen, sizes


def evaluate(kagent, problem, candidate, extra, cold):
    started = time.monotonic()
    command = [kagent, "eval", "--json", *extra, problem, candidate]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    try:
        verdict = json.loads(result.stdout)
    except ValueError:
        return seconds, "no-verdict", result.stderr.strip()[-200:], None
    if verdict.get("schema") != "kagent.verdict/1":
        return seconds, "error", str(verdict.get("error") or verdict)[:200], None
    timing = verdict.get("timing") or {}
    return seconds, verdict["status"], verdict.get("reason", "")[:200], timing


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--largest", type=int, default=15)
    parser.add_argument("--kagent", default="build/kagent")
    parser.add_argument("--start", type=int, default=0,
                        help="skip the first START problems of the plan (a sweep in parts)")
    parser.add_argument("--only", default=None,
                        help="comma-separated names: only the plan's problems whose file name "
                             "contains one of them (a re-run of some)")
    options, extra = parser.parse_known_args()
    options.extra = [flag for flag in extra if flag != "--"]
    chosen, sizes = choose(options.root, options.count, options.largest)
    chosen = chosen[options.start:]
    if options.only:
        names = [name for name in options.only.split(",") if name]
        chosen = [path for path in chosen if any(name in os.path.basename(path)
                                                  for name in names)]
    print(f"GPU: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}; "
          f"{len(chosen)} problems")
    print(f"{'problem':<52} {'GB in':>7} {'cold s':>7} {'warm s':>7}  verdict (cold / warm)")
    folder = tempfile.mkdtemp(prefix="kagent-sweep-")
    rows = []
    for path in chosen:
        candidate = os.path.join(folder, "candidate.py")
        with open(path) as source, open(candidate, "w") as handle:
            handle.write(source.read() + "\n\nModelNew = Model\n")
        # the first evaluation of a problem measures and caches its baselines: cold
        cold = evaluate(options.kagent, path, candidate, options.extra, True)
        warm = evaluate(options.kagent, path, candidate, options.extra, False)
        name = "/".join(path.split("/")[-2:])
        size = sizes.get(path)
        print(f"{name:<52} {size / 1e9 if size else float('nan'):7.3f} {cold[0]:7.1f} "
              f"{warm[0]:7.1f}  {cold[1]} / {warm[1]}"
              + (f" ({warm[2][:90]})" if warm[1] not in ("correct", "rejected") else ""))
        sys.stdout.flush()
        rows.append({"problem": name, "input_bytes": size, "cold_seconds": cold[0],
                     "cold_status": cold[1], "warm_seconds": warm[0], "warm_status": warm[1],
                     "warm_reason": warm[2]})
    with_verdict = sum(row["warm_status"] not in ("no-verdict", "error") for row in rows)
    colds = sorted(row["cold_seconds"] for row in rows)
    warms = sorted(row["warm_seconds"] for row in rows)
    print(f"verdicts: {with_verdict} of {len(rows)}; median cold {colds[len(colds) // 2]:.1f} s, "
          f"median warm {warms[len(warms) // 2]:.1f} s")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "sweep.json"), "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0 if with_verdict == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
