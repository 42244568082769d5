#!/usr/bin/env python3
"""Where does a 4 MB kernel's time move from one verdict to the next? (issue 10)

Session 14 and 15 saw the Triton ReLU's device time per verdict settle on one value for the
whole verdict and move by up to 3% from one verdict to the next, also with a new worker per
verdict, while torch.relu moved less. This script takes kagent out of the picture: it starts
PROCESSES fresh Python processes one after another on one GPU, and each times, with
torch.profiler (CUPTI), torch.relu and COPIES copies of the Triton ReLU (the same source under
other names, so each is a module of its own, loaded at its own place), round after round, an
L2 flush (reading twice L2, as the judge does) before every call, inputs moving through 16
regions of a 64 MiB pool and the last 16 outputs kept alive, as kagent does. It prints each
process's median per kernel:
  - copies that differ within one process: the module's load (its code's place) matters;
  - copies equal within a process but processes apart: a state of the process (its context);
  - torch.relu apart as well: the GPU's state between processes (clocks).

    python3 bench/process_state.py [--gpu 0] [--processes 8] [--copies 3] [--rounds 300]
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

KERNEL = '''
@triton.jit
def relu_kernel_{index}(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)
'''

SHAPE = (16, 65536)  # 4 MB of float32, timing_fidelity.py's 4MB
REGIONS = 16
REGION_BYTES = 4 << 20


def write_kernels(folder, copies):
    """A module with `copies` Triton ReLU kernels, relu_kernel_0 ... (Triton reads their
    source from the file, so they cannot be made with exec)."""
    path = os.path.join(folder, "relu_copies.py")
    with open(path, "w") as handle:
        handle.write("import triton\nimport triton.language as tl\n")
        for index in range(copies):
            handle.write(KERNEL.format(index=index))
    return path


def child(options):
    import torch
    import triton

    sys.path.insert(0, options.folder)
    import relu_copies

    torch.cuda.set_device(0)
    kernels = [getattr(relu_copies, f"relu_kernel_{index}") for index in range(options.copies)]
    elements = SHAPE[0] * SHAPE[1]
    pool = torch.empty(REGIONS * REGION_BYTES // 4, device="cuda")
    regions = [pool[index * REGION_BYTES // 4:][:elements].view(SHAPE) for index in range(REGIONS)]
    for region in regions:
        region.normal_()
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2_bytes // 8, dtype=torch.int64, device="cuda")
    flush_sum = torch.empty((), dtype=torch.int64, device="cuda")
    kept = collections.deque(maxlen=16)

    def triton_call(kernel):
        def call(x):
            out = torch.empty_like(x)
            kernel[(triton.cdiv(elements, 4096),)](x, out, elements, BLOCK=4096)
            return out
        return call

    variants = [("torch.relu", torch.relu)] + [
        (f"relu_kernel_{index}", triton_call(kernel)) for index, kernel in enumerate(kernels)]
    for _, function in variants:  # compile and warm every variant
        for region in regions[:2]:
            function(region)
    torch.cuda.synchronize()
    call = 0
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as recorder:
        for _ in range(options.rounds):
            for _, function in variants:
                torch.sum(flush, dim=0, out=flush_sum)
                kept.append(function(regions[call % REGIONS]))
                call += 1
        torch.cuda.synchronize()
    samples = collections.defaultdict(list)
    for event in recorder.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if event.name.startswith("relu_kernel_"):
            samples[event.name].append(event.device_time)
        elif "elementwise" in event.name and "reduce" not in event.name:
            samples["torch.relu"].append(event.device_time)
    print(json.dumps({name: {"calls": len(values), "median_us": statistics.median(values),
                             "mean_us": statistics.fmean(values)}
                      for name, values in samples.items()}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options)
        return
    folder = tempfile.mkdtemp(prefix="kagent-process-state-")
    write_kernels(folder, options.copies)
    environment = dict(os.environ, CUDA_VISIBLE_DEVICES=str(options.gpu))
    names = ["torch.relu"] + [f"relu_kernel_{index}" for index in range(options.copies)]
    print("process " + " ".join(f"{name:>14}" for name in names) + "   (median us / mean us)")
    rows = []
    for process in range(options.processes):
        result = subprocess.run([sys.executable, __file__, "--child", "--folder", folder,
                                 "--copies", str(options.copies), "--rounds",
                                 str(options.rounds)],
                                env=environment, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            print(f"process {process} failed: {result.stderr[-1500:]}")
            continue
        row = json.loads(result.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{process:>7} " + " ".join(
            f"{row[name]['median_us']:6.3f}/{row[name]['mean_us']:6.3f}" if name in row else
            f"{'-':>14}" for name in names))
    for name in names:
        means = [row[name]["mean_us"] for row in rows if name in row]
        if means:
            print(f"{name}: means across processes {min(means):.3f}-{max(means):.3f} us, "
                  f"spread {(max(means) - min(means)) / statistics.median(means):.1%}")


if __name__ == "__main__":
    main()
