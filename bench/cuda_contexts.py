#!/usr/bin/env python3
"""How long a fresh process takes to create its CUDA context when several do so at once
(issue 16: the reward service's `load` phase grew with the lanes on the host). Each process
sees one GPU (CUDA_VISIBLE_DEVICES), as the children of kagent's per-GPU workers do, and times
`torch.empty(1, device="cuda")` after its imports. Prints, for each case, the median and the
longest creation over the rounds. Needs a GPU; not a CI test.

    python3 bench/cuda_contexts.py [--cases 1x1,16x1,16x2] [--rounds 2]

A case PxG starts P processes at once, spread over G GPUs (process i on GPU i mod G)."""
import argparse
import os
import statistics
import subprocess
import sys
import time

CHILD = ("import time, torch\n"
         "started = time.monotonic()\n"
         "torch.empty(1, device='cuda')\n"
         "torch.cuda.synchronize()\n"
         "print(time.monotonic() - started)\n")


def one_round(processes, gpus):
    """Seconds of each process's context creation, and the round's wall time."""
    started = time.monotonic()
    children = [subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                                 text=True, env=dict(os.environ,
                                                     CUDA_VISIBLE_DEVICES=str(index % gpus)))
                for index in range(processes)]
    seconds = []
    for child in children:
        output = child.communicate()[0].strip().splitlines()
        if child.returncode != 0 or not output:
            raise RuntimeError(f"a child failed (exit {child.returncode})")
        seconds.append(float(output[-1]))
    return seconds, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="1x1,16x1,16x2")
    parser.add_argument("--rounds", type=int, default=2)
    arguments = parser.parse_args()
    for case in arguments.cases.split(","):
        processes, gpus = (int(part) for part in case.split("x"))
        creations, walls = [], []
        for _ in range(arguments.rounds):
            seconds, wall = one_round(processes, gpus)
            creations.extend(seconds)
            walls.append(wall)
        print(f"{processes:3d} processes on {gpus} GPU(s): context creation median "
              f"{statistics.median(creations):.3f} s, longest {max(creations):.3f} s, "
              f"round {statistics.median(walls):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
