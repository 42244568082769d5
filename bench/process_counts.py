#!/usr/bin/env python3
"""How many processes an arm would put ten 4 MB verdicts within 3% (issue 10), read from
verdicts saved by bench/timing_fidelity.py (fidelity-SIZE-N.json) on one machine.

Each saved verdict timed its arms in one or more processes, and each process brought a state
of its own to all its calls (docs/verdict.md, "Processes per arm"). This script takes every
process's median of each arm, as statistics.c computes it (build/bench/verdict_intervals),
and draws verdicts of K processes an arm from them: K eager medians and K candidate medians
drawn with replacement, each arm's mean, their ratio. For each K it prints the standard
deviation of such verdicts and the share of sets of ten whose range stays within 3% (2000
sets). The processes' own luck is all it models: the drift of a machine between verdicts is
left out, so a real run can only do worse. How much worse the last column tells: for each
arm, the variance of the verdicts' means of their process medians over the variance those
means would have if every process drew its state on its own (each verdict's spread of
process medians squared over its count, averaged). About 1 where processes are independent;
above it, the processes of one verdict share part of their state, and more processes average
less of it away than the draws above assume. No GPU needed.

    python3 bench/process_counts.py FOLDER[:VARIANTS[:V,V...]] ... [--counts 3,4,6,8]
        [--size 4MB] [--tool build/bench/verdict_intervals]

VARIANTS is the number of variants the run alternated (verdict N is variant N % VARIANTS) and
V,V... the variants whose processes to pool (default: all).
"""
import argparse
import glob
import json
import os
import random
import statistics
import subprocess
import sys

SETS = 2000
GOAL = 0.03


def verdict_number(path):
    return int(os.path.basename(path).rsplit("-", 1)[1].split(".")[0])


def process_medians(paths, tool):
    """Each verdict's process medians of each arm ({arm: [[median, ...], ...]}), over the
    verdicts of paths."""
    lines = subprocess.run([tool, *paths], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    medians = {"eager": [], "candidate": []}
    for row in map(json.loads, lines):
        if "error" not in row:
            medians["eager"].append(row["eager_medians"])
            medians["candidate"].append(row["candidate_medians"])
    return medians


def shared_share(verdicts):
    """The variance of the verdicts' means of their process medians over what independent
    processes would give; None with fewer than three verdicts of two processes or more."""
    verdicts = [values for values in verdicts if len(values) >= 2]
    if len(verdicts) < 3:
        return None
    independent = statistics.fmean(statistics.variance(values) / len(values)
                                   for values in verdicts)
    between = statistics.variance([statistics.fmean(values) for values in verdicts])
    return between / independent if independent > 0 else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", help="FOLDER[:VARIANTS[:V,V...]]")
    parser.add_argument("--counts", default="3,4,6,8")
    parser.add_argument("--size", default="4MB")
    parser.add_argument("--tool", default="build/bench/verdict_intervals")
    options = parser.parse_args()
    counts = [int(count) for count in options.counts.split(",")]
    generator = random.Random(7)
    print(f"{'set':<32} {'processes':>9} {'SD eager / candidate':>21}   " +
          "   ".join(f"K={count}: SD, P(10 within 3%)" for count in counts) +
          "   shared: eager / candidate")
    for spec in options.folders:
        folder, _, rest = spec.partition(":")
        variants_text, _, chosen_text = rest.partition(":")
        variants = int(variants_text or 1)
        chosen = {int(item) for item in chosen_text.split(",")} if chosen_text else \
            set(range(variants))
        paths = [path for path in sorted(
            glob.glob(os.path.join(folder, f"fidelity-{options.size}-*.json")),
            key=verdict_number) if verdict_number(path) % variants in chosen]
        verdicts = process_medians(paths, options.tool) if paths else None
        medians = {arm: [median for values in lists for median in values]
                   for arm, lists in (verdicts or {}).items()}
        if not medians or len(medians["eager"]) < 2 or len(medians["candidate"]) < 2:
            print(f"{folder}: fewer than two processes of each arm")
            continue
        shared = [shared_share(verdicts[arm]) for arm in ("eager", "candidate")]
        spread = [statistics.stdev(values) / statistics.fmean(values)
                  for values in (medians["eager"], medians["candidate"])]
        cells = []
        for count in counts:
            def verdict():
                return statistics.fmean(generator.choices(medians["eager"], k=count)) / \
                    statistics.fmean(generator.choices(medians["candidate"], k=count))
            within, deviations = 0, []
            for _ in range(SETS):
                speedups = [verdict() for _ in range(10)]
                middle = statistics.median(speedups)
                deviations.append(statistics.stdev(speedups) / middle)
                within += (max(speedups) - min(speedups)) / middle <= GOAL
            cells.append(f"{statistics.fmean(deviations):.2%}, {within / SETS:.2f}")
        print(f"{spec:<32} {len(medians['eager']):>9} "
              f"{spread[0]:>10.2%} / {spread[1]:<8.2%}   " + "   ".join(
                  f"{cell:>26}" for cell in cells) + "   " + " / ".join(
                  "-" if value is None else f"{value:.1f}" for value in shared))
    return 0


if __name__ == "__main__":
    sys.exit(main())
