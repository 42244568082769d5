#!/usr/bin/env python3
"""Whether kagentd's timing windows ever overlapped on one device (issue 16): reads daemon
logs (`timing window on GPU 1: START to END (who)`, one line per timed verdict: docs/daemon.md)
and prints, per device, the windows, the seconds timed, the share of the logged span spent
timing, and every pair of windows that overlap. Exit 0 when none overlap, 1 when some do, 2
when a log has no window at all.

  python3 bench/timing_windows.py kagentd.log [more.log ...] [--json OUT]"""
import argparse
import json
import re
import sys

LINE = re.compile(r"timing window on (?:GPU (?P<gpu>\d+)|the CPU): (?P<start>[0-9.]+) to "
                  r"(?P<end>[0-9.]+) \((?P<who>.*)\)\s*$")


def read_windows(paths):
    """{device: [(start, end, who)]}, device "GPU N" or "CPU", each list sorted by start."""
    windows = {}
    for path in paths:
        with open(path, errors="replace") as handle:
            for line in handle:
                match = LINE.search(line)
                if match is None:
                    continue
                device = f"GPU {match['gpu']}" if match["gpu"] is not None else "CPU"
                windows.setdefault(device, []).append(
                    (float(match["start"]), float(match["end"]), match["who"]))
    for found in windows.values():
        found.sort()
    return windows


def overlaps(found):
    """Every pair of windows of one device that overlap: each window against the latest end
    before it, so a long window is compared with every window it covers."""
    pairs = []
    latest = None
    for window in found:
        if latest is not None and window[0] < latest[1]:
            pairs.append((latest, window))
        if latest is None or window[1] > latest[1]:
            latest = window
    return pairs


def summary(windows):
    result = {}
    for device, found in sorted(windows.items()):
        timed = sum(end - start for start, end, _ in found)
        span = found[-1][1] - found[0][0] if found else 0.0
        result[device] = {
            "windows": len(found), "seconds_timed": round(timed, 3),
            "span_seconds": round(span, 3),
            "timed_share": round(timed / span, 4) if span > 0 else None,
            "overlaps": [{"first": list(first), "second": list(second)}
                         for first, second in overlaps(found)]}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--json", help="also write the summary here")
    arguments = parser.parse_args()
    result = summary(read_windows(arguments.logs))
    if arguments.json:
        with open(arguments.json, "w") as handle:
            json.dump(result, handle, indent=1)
    if not result:
        print("no timing window in the logs", file=sys.stderr)
        return 2
    status = 0
    for device, one in result.items():
        share = "-" if one["timed_share"] is None else f"{100 * one['timed_share']:.1f}%"
        print(f"{device}: {one['windows']} windows, {one['seconds_timed']:.3f} s timed in "
              f"{one['span_seconds']:.3f} s ({share}), {len(one['overlaps'])} overlapping")
        for pair in one["overlaps"]:
            status = 1
            first, second = pair["first"], pair["second"]
            print(f"  overlap: {first[2]} ({first[0]:.6f} to {first[1]:.6f}) and {second[2]} "
                  f"({second[0]:.6f} to {second[1]:.6f})")
    return status


if __name__ == "__main__":
    sys.exit(main())
