#!/usr/bin/env python3
"""A quick look at the hardware counters outside kagent: runs a ReLU over 256 MB and a matrix
product under libkagent-trace.so's CUPTI range profiler and prints what came back, or the
CUPTI error. With --as-uid, drops to that uid first (as the sandbox does), to see whether
this machine lets a non-root user profile. Exit status 0 only when the ReLU was counted as
memory-bound (DRAM above 30% of peak).
Run on the GPU machine: python3 tests/gpu/counters_check.py build/sandbox/libkagent-trace.so"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "sandbox", "runner"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", help="path of libkagent-trace.so")
    parser.add_argument("--as-uid", type=int, help="drop to this uid (and gid) first")
    arguments = parser.parse_args()
    if arguments.as_uid is not None:
        os.setgroups([])
        os.setresgid(arguments.as_uid, arguments.as_uid, arguments.as_uid)
        os.setresuid(arguments.as_uid, arguments.as_uid, arguments.as_uid)
    import torch
    from kagent_runner import kernel_trace

    x = torch.rand(1024, 65536, device="cuda")
    a = torch.randn(2048, 2048, device="cuda")
    torch.relu(x)
    torch.cuda.synchronize()

    def run():
        torch.relu(x)
        torch.mm(a, a)
        torch.cuda.synchronize()

    try:
        answer = kernel_trace.counters(run, os.path.abspath(arguments.library))
    except kernel_trace.CountersUnavailable as error:
        print(f"counters unavailable (uid {os.getuid()}): {error}")
        return 1
    print(json.dumps(answer, indent=1))
    relu = [kernel for kernel in answer["kernels"] if "elementwise" in kernel["name"]]
    return 0 if relu and relu[0]["dram_percent"] > 30 else 1


if __name__ == "__main__":
    sys.exit(main())
