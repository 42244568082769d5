#!/usr/bin/env python3
"""Peak device memory per phase of one evaluation (issue 10, item 6): runs `kagent eval
--json` on PROBLEM and CANDIDATE and prints the judge's phase_peak_bytes (its tensors'
torch.cuda.max_memory_allocated, reset at each phase) and phase_seconds as a table, with the
multiplier peak / (input + output bytes) where the verdict's roofline gives those bytes.
The candidate's and the compile child's memory is their own processes' and not counted.

    python3 bench/eval_memory.py PROBLEM.py CANDIDATE.py [--kagent build/kagent] [-- ARGS]
"""
import argparse
import json
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("candidate")
    parser.add_argument("--kagent", default="build/kagent")
    parser.add_argument("extra", nargs="*", help="more kagent eval arguments (after --)")
    options = parser.parse_args()
    command = [options.kagent, "eval", "--json", *options.extra, options.problem,
               options.candidate]
    result = subprocess.run(command, capture_output=True, text=True)
    try:
        verdict = json.loads(result.stdout)
    except ValueError:
        print(f"no verdict (exit {result.returncode}):\n{result.stdout}{result.stderr}")
        return 2
    if verdict.get("schema") != "kagent.verdict/1":
        print(json.dumps(verdict, indent=2))
        return 2
    moved = (verdict.get("roofline") or {}).get("bytes")
    peaks = verdict.get("phase_peak_bytes") or {}
    seconds = verdict.get("phase_seconds") or {}
    print(f"{verdict['status']}: {verdict['reason']}")
    print(f"{'phase':<16}{'seconds':>10}{'peak GB':>10}{'x (in+out)':>12}")
    for phase in dict.fromkeys(list(seconds) + list(peaks)):
        peak = peaks.get(phase)
        ratio = f"{peak / moved:.2f}" if peak and moved else "-"
        print(f"{phase:<16}{seconds.get(phase, 0.0):>10.3f}"
              f"{(peak / 1e9 if peak is not None else float('nan')):>10.3f}{ratio:>12}")
    print(f"inputs + outputs: {moved / 1e9:.3f} GB" if moved else "inputs + outputs: unknown")
    print(f"wall: {verdict.get('wall_seconds', 0.0):.1f} s")
    return 0 if verdict["status"] == "correct" else 1


if __name__ == "__main__":
    sys.exit(main())
