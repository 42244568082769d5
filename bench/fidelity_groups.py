#!/usr/bin/env python3
"""What timing each arm in K processes per verdict would do to the spread of verdicts (issue
10), read from verdicts already saved by bench/timing_fidelity.py (fidelity-SIZE-N.json).

Every saved verdict timed each arm in one process of its own, and a process carries a state
that moves all its kernels together (docs/verdict.md, "What an interval holds"). A
verdict whose arms each ran in K processes would pool K processes' calls per arm. This script
forms such verdicts from K saved ones: the eager arm's K device medians averaged, over the
candidate's K averaged, for random disjoint groups of K verdicts (200 draws). It prints, per
folder, the standard deviation of the speedups over their median for K = 1 (the verdicts as
they are), 2 and 3, and the expected range of ten verdicts (about 3.08 standard deviations
for ten normal draws), against the goal of ten within 3%. No GPU needed.

    python3 bench/fidelity_groups.py FOLDER [FOLDER ...] [--size 4MB] [--draws 200]
"""
import argparse
import glob
import json
import os
import random
import statistics

# the expected range of ten draws of a normal distribution, in standard deviations
RANGE_OF_TEN = 3.078


def device_medians(path):
    """(eager, candidate) device medians of one saved verdict, or None."""
    try:
        with open(path) as handle:
            device = (json.load(handle).get("timing") or {}).get("device") or {}
    except (OSError, ValueError):
        return None
    samples = [(device.get(arm) or {}).get("samples_ms") for arm in ("eager", "candidate")]
    if not all(samples):
        return None
    return tuple(statistics.median(values) for values in samples)


def relative_deviation(speedups):
    return statistics.stdev(speedups) / statistics.median(speedups)


def grouped_deviation(verdicts, group, draws, generator):
    """The mean over draws of the relative deviation of speedups pooled over `group`
    verdicts, or None when there are fewer than two groups."""
    if len(verdicts) < 2 * group:
        return None
    deviations = []
    for _ in range(draws):
        order = list(range(len(verdicts)))
        generator.shuffle(order)
        speedups = []
        for start in range(0, len(order) - group + 1, group):
            members = order[start:start + group]
            eager = statistics.fmean(verdicts[index][0] for index in members)
            candidate = statistics.fmean(verdicts[index][1] for index in members)
            speedups.append(eager / candidate)
        deviations.append(relative_deviation(speedups))
    return statistics.fmean(deviations)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--size", default="4MB")
    parser.add_argument("--draws", type=int, default=200)
    options = parser.parse_args()
    generator = random.Random(1)
    print("folder                         verdicts   K=1 SD (range of 10)   K=2 SD (range)   "
          "K=3 SD (range)")
    for folder in options.folders:
        paths = sorted(glob.glob(os.path.join(folder, f"fidelity-{options.size}-*.json")))
        verdicts = [medians for medians in map(device_medians, paths) if medians]
        if len(verdicts) < 2:
            print(f"{folder}: fewer than two saved verdicts with device samples")
            continue
        cells = [relative_deviation([eager / candidate for eager, candidate in verdicts])]
        cells += [grouped_deviation(verdicts, group, options.draws, generator)
                  for group in (2, 3)]
        text = "   ".join("-" if cell is None else
                          f"{cell:.2%} ({cell * RANGE_OF_TEN:.1%})" for cell in cells)
        print(f"{folder:<30} {len(verdicts):>8}   {text}")


if __name__ == "__main__":
    main()
