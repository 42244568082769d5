#!/usr/bin/env python3
"""How often a verdict's speedup interval holds the median of its set (issue 10), read from
verdicts saved by bench/timing_fidelity.py (fidelity-SIZE-N.json, N in the order they ran).

The verdicts of one timing_fidelity run alternate between its variants (--runners,
--processes), so verdict N belongs to variant N % VARIANTS. For each variant's set this
recomputes every verdict's device-time speedup over eager and its 95% interval with
statistics.c (build/bench/verdict_intervals: the samples and their processes are in each
verdict) and prints the set's range, how many intervals hold the median of the set (an
interval that tells the truth holds it about 19 times in 20), their mean width, and whether
every speedup came out as saved (verdicts measured with another version's estimators do
not). No GPU needed.

    python3 bench/interval_coverage.py FOLDER[:VARIANTS] ... [--size 4MB]
        [--tool build/bench/verdict_intervals]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys


def verdict_number(path):
    return int(os.path.basename(path).rsplit("-", 1)[1].split(".")[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", help="FOLDER or FOLDER:VARIANTS (default 1)")
    parser.add_argument("--size", default="4MB")
    parser.add_argument("--tool", default="build/bench/verdict_intervals")
    options = parser.parse_args()
    print(f"{'set':<40} {'K':>3} {'n':>3} {'range':>6} {'holds':>6} {'width':>6} as saved")
    for spec in options.folders:
        folder, _, variants = spec.partition(":")
        variants = int(variants or 1)
        paths = sorted(glob.glob(os.path.join(folder, f"fidelity-{options.size}-*.json")),
                       key=verdict_number)
        if not paths:
            print(f"{folder}: no fidelity-{options.size}-N.json")
            continue
        lines = subprocess.run([options.tool, *paths], capture_output=True, text=True,
                               check=True).stdout.splitlines()
        rows = [json.loads(line) for line in lines]
        for variant in range(variants):
            chosen = [row for path, row in zip(paths, rows)
                      if verdict_number(path) % variants == variant and "error" not in row]
            if not chosen:
                continue
            speedups = [row["speedup"] for row in chosen]
            median = statistics.median(speedups)
            holds = sum(1 for row in chosen if row["low"] <= median <= row["high"])
            width = statistics.fmean((row["high"] - row["low"]) / median for row in chosen)
            same = all(row["saved"] is not None and abs(row["saved"] - row["speedup"]) < 1e-9
                       for row in chosen)
            processes = sorted({row["processes"] for row in chosen})
            print(f"{folder + ' variant ' + str(variant):<40} "
                  f"{'/'.join(map(str, processes)):>3} {len(chosen):>3} "
                  f"{(max(speedups) - min(speedups)) / median:6.1%} "
                  f"{holds:>3}/{len(chosen):<2} {width:6.1%} {'yes' if same else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
