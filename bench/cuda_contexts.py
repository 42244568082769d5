#!/usr/bin/env python3
"""How long fresh processes take to create their CUDA contexts when several do so at once, and
how long the same processes take to end once killed together, which is their contexts'
teardown (issue 16: the reward service's `load` phase, then its wait for a killed candidate,
grew with the lanes on the host). Each process sees one GPU (CUDA_VISIBLE_DEVICES), as the
children of kagent's per-GPU workers do, times `torch.empty(1, device="cuda")` after its
imports, then allocates --bytes of device memory (a candidate's outputs) and waits. Prints,
for each case, the median and the longest creation and teardown over the rounds. Needs a GPU;
not a CI test.

    python3 bench/cuda_contexts.py [--cases 1x1,16x1,16x2] [--rounds 2] [--bytes 0]

A case PxG starts P processes at once, spread over G GPUs (process i on GPU i mod G)."""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

CHILD = ("import sys, time, torch\n"
         "started = time.monotonic()\n"
         "torch.empty(1, device='cuda')\n"
         "torch.cuda.synchronize()\n"
         "print(time.monotonic() - started, flush=True)\n"
         "held = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device='cuda')\n"
         "torch.cuda.synchronize()\n"
         "print('ready', flush=True)\n"
         "time.sleep(600)\n")


def one_round(processes, gpus, held_bytes):
    """Seconds of each process's context creation, of each one's end once all are killed at
    once, and the round's wall time."""
    started = time.monotonic()
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(held_bytes)],
                                 stdout=subprocess.PIPE, text=True,
                                 env=dict(os.environ, CUDA_VISIBLE_DEVICES=str(index % gpus)))
                for index in range(processes)]
    creations = []
    try:
        for child in children:
            creation, ready = child.stdout.readline(), child.stdout.readline()
            if ready.strip() != "ready":
                raise RuntimeError(f"a child failed (exit {child.poll()})")
            creations.append(float(creation))
        killed = time.monotonic()
        for child in children:
            child.send_signal(signal.SIGKILL)
        teardowns = []
        for child in children:
            child.wait()
            teardowns.append(time.monotonic() - killed)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return creations, teardowns, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="1x1,16x1,16x2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bytes", type=int, default=0,
                        help="device memory each process holds before it is killed")
    arguments = parser.parse_args()
    for case in arguments.cases.split(","):
        processes, gpus = (int(part) for part in case.split("x"))
        creations, teardowns, walls = [], [], []
        for _ in range(arguments.rounds):
            created, ended, wall = one_round(processes, gpus, arguments.bytes)
            creations.extend(created)
            teardowns.extend(ended)
            walls.append(wall)
        print(f"{processes:3d} processes on {gpus} GPU(s): context creation median "
              f"{statistics.median(creations):.3f} s, longest {max(creations):.3f} s; "
              f"end once killed median {statistics.median(teardowns):.3f} s, longest "
              f"{max(teardowns):.3f} s; round {statistics.median(walls):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
