#!/usr/bin/env python3
"""Where does a 4 MB kernel's time move from one verdict to the next? (issue 10)

Session 14 and 15 saw the Triton ReLU's device time per verdict settle on one value for the
whole verdict and move by up to 3% from one verdict to the next, also with a new worker per
verdict, while torch.relu moved less. This script takes kagent out of the picture: it starts
PROCESSES fresh processes of each mode one after another on one GPU, and each times, with
torch.profiler (CUPTI), torch's ReLU kernel (clamp_min) and COPIES copies of the Triton ReLU (the
same source under other names, so each is a module of its own, loaded at its own place), round
after round, an L2 flush (reading twice L2, as the judge does) before every call, inputs moving
through 16 regions of a 64 MiB pool and the outputs through 16 places, as kagent does. In the
local mode each process allocates its pool and outputs, as a timed child of kagent allocates its
outputs; in the shared mode they are the parent's memory (CUDA IPC), the same for every
process. More modes change one thing of the local mode each. In `touch`, after the flush and
before each call, a small read of one element per 2 MiB page of the call's input and output
brings their address translations back (the flush evicts those too), at the price of a few
cache lines; `touch_input` touches the input's pages only, as a judge could where a
candidate's outputs are its own. `copy_touch` and `copy_touch_input` do the same with a
4-byte copy to the host per page instead of a kernel: a copy the device record shows with its
size, so a judge could check that a timed child's touch fetched nothing more. In `warm_code`,
after the flush each kernel first runs once on a 16 KB buffer of its own, so that its code
(each process's own copy, in its own memory) is fetched again before the timed call, and its
data is not. `warm_other` launches instead one block of another kernel of the process's own
(warm_kernel, on 16 KB): a launch a judge could own, since it runs none of the timed kernels'
code. Apart in local and warm_code, not in warm_other, would make the state the context's and
a launch the runner owns a way to remove it; apart in warm_other too, the timed kernel's own
code is the state. In `resident`, there is no flush and one input and one
output only, so the call's data stays in L2 and the device's memory is out of it. It prints
each process's median and mean per kernel, and per mode the spread across processes of each
kernel and of the ratio of torch's to the Triton kernel within one process:
  - copies that differ within one process: the module's load (its code's place) matters;
  - processes apart in the local mode only: where a process's memory lies is its state;
  - apart in both modes: a state of the process's context, or of the GPU over time;
  - apart in local, not in touch: the state is the page walks after the flush;
  - apart in local, not in warm_code: the state is fetching the kernel's code after the flush
    (or the context's launch structures: warm_other tells which);
  - apart in local, not in resident: the state is on the way to the device's memory.

    python3 bench/process_state.py [--gpu 0] [--processes 8] [--copies 3] [--rounds 300]
        [--modes local,shared,touch,touch_input,copy_touch,copy_touch_input,warm_code,
                 warm_other,resident]
"""
import argparse
import collections
import os
import statistics
import sys
import tempfile

KERNEL = '''
@triton.jit
def relu_kernel_{index}(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)
'''

# warm_other's launch: a kernel none of the timed ones is, on one block of its own
WARM_KERNEL = '''
@triton.jit
def warm_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1.0, mask=mask)
'''

SHAPE = (16, 65536)  # 4 MB of float32, timing_fidelity.py's 4MB
REGIONS = 16
REGION_BYTES = 4 << 20
PAGE_ELEMENTS = (2 << 20) // 4  # float32 elements in a 2 MiB page


def write_kernels(folder, copies):
    """A module with `copies` Triton ReLU kernels, relu_kernel_0 ... (Triton reads their
    source from the file, so they cannot be made with exec)."""
    path = os.path.join(folder, "relu_copies.py")
    with open(path, "w") as handle:
        handle.write("import triton\nimport triton.language as tl\n")
        for index in range(copies):
            handle.write(KERNEL.format(index=index))
        handle.write(WARM_KERNEL)
    return path


def measure(options, mode, pool, out_slots, queue):
    """One process's medians per kernel, put on queue. pool (the inputs' 16 regions) and
    out_slots (16 outputs) are the parent's memory in the shared mode, None in the others,
    where this process allocates its own as a timed child of kagent does."""
    import torch
    import triton

    sys.path.insert(0, options.folder)
    import relu_copies

    cuda = options.device == "cuda"
    elements = SHAPE[0] * SHAPE[1]
    if pool is None:
        pool = torch.empty(REGIONS * REGION_BYTES // 4, device=options.device).normal_()
    regions = [pool[index * REGION_BYTES // 4:][:elements].view(SHAPE) for index in range(REGIONS)]
    if mode == "resident":
        regions = regions[:1]
    if mode in ("touch", "copy_touch", "resident"):  # outputs known before the call
        out_slots = [torch.empty(elements, device=options.device)
                     for _ in range(1 if mode == "resident" else 16)]
    touch_sum = torch.empty((), device=options.device)
    landing = torch.empty(64, pin_memory=cuda)  # the copies' 4 bytes each, on the host
    flush_bytes = 2 * torch.cuda.get_device_properties(0).L2_cache_size if cuda else 1 << 20
    flush = torch.zeros(flush_bytes // 8, dtype=torch.int64, device=options.device)
    flush_sum = torch.empty((), dtype=torch.int64, device=options.device)
    kept = collections.deque(maxlen=16)
    scratch = torch.ones(4096, device=options.device)  # warm_code's input: one block
    scratch_out = torch.empty_like(scratch)
    calls = [0]

    def output(x):
        if x.numel() != elements:  # warm_code's small call: an output of its own, not counted
            return scratch_out
        calls[0] += 1
        if out_slots is None:
            kept.append(torch.empty_like(x))
            return kept[-1]
        return out_slots[calls[0] % len(out_slots)].view(x.shape)

    def before_call(x):
        if mode != "resident":
            torch.sum(flush, dim=0, out=flush_sum)
        touched = []
        if mode in ("touch", "copy_touch"):  # and the next call's output, one element a page
            touched = [x.view(-1), out_slots[(calls[0] + 1) % len(out_slots)]]
        elif mode in ("touch_input", "copy_touch_input"):
            touched = [x.view(-1)]
        if mode.startswith("copy_"):
            slot = 0
            for tensor in touched:  # one 4-byte copy to the host per page: no kernel
                for start in range(0, tensor.numel(), PAGE_ELEMENTS):
                    landing[slot % 64:slot % 64 + 1].copy_(tensor[start:start + 1],
                                                           non_blocking=True)
                    slot += 1
            return
        for tensor in touched:  # reductions: not counted as torch.relu
            torch.sum(tensor[::PAGE_ELEMENTS], dim=0, out=touch_sum)

    def triton_call(kernel):
        def call(x):
            kernel[(triton.cdiv(x.numel(), 4096),)](x, output(x), x.numel(), BLOCK=4096)
        return call

    variants = [lambda x: torch.clamp_min(x, 0.0, out=output(x))]
    if cuda:
        variants += [triton_call(getattr(relu_copies, f"relu_kernel_{index}"))
                     for index in range(options.copies)]
    for function in variants:  # compile and warm every variant
        for region in regions[:2]:
            function(region)
    if cuda:
        relu_copies.warm_kernel[(1,)](scratch, scratch_out, scratch.numel(), BLOCK=4096)
        torch.cuda.synchronize()
    activity = torch.profiler.ProfilerActivity.CUDA if cuda else torch.profiler.ProfilerActivity.CPU
    with torch.profiler.profile(activities=[activity]) as recorder:
        for round_index in range(options.rounds):
            for function in variants:
                region = regions[round_index % len(regions)]
                before_call(region)
                if mode == "warm_code":  # the kernel once on 16 KB of its own: its code warm
                    function(scratch)
                elif mode == "warm_other" and cuda:  # another kernel's one block
                    relu_copies.warm_kernel[(1,)](scratch, scratch_out, scratch.numel(),
                                                  BLOCK=4096)
                function(region)
        if cuda:
            torch.cuda.synchronize()
    samples = collections.defaultdict(list)
    for event in recorder.events():
        if cuda and event.device_type == torch.autograd.DeviceType.CUDA:
            if event.name.startswith("relu_kernel_"):
                samples[event.name].append(event.device_time)
            elif "elementwise" in event.name and "reduce" not in event.name:
                samples["torch.relu"].append(event.device_time)
        elif not cuda and event.name == "aten::clamp_min":
            samples["torch.relu"].append(event.cpu_time)
    if mode == "warm_code":  # each round's warming launch came first: keep the timed ones
        samples = {name: values[1::2] for name, values in samples.items()}
    queue.put({name: {"calls": len(values), "median_us": statistics.median(values),
                      "mean_us": statistics.fmean(values)}
               for name, values in samples.items()})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--processes", type=int, default=8, help="processes of each mode")
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--modes", default="local,shared",
                        help="local: each process allocates its inputs and outputs; shared: "
                             "they are this process's memory, the same for every process "
                             "(CUDA IPC); touch: local, and each call's pages touched after "
                             "the flush; touch_input: its input's pages only; copy_touch, "
                             "copy_touch_input: the same by 4-byte copies; warm_code: each "
                             "kernel run once on 16 KB of its own after the flush; warm_other: "
                             "one block of another kernel instead; resident: no "
                             "flush, one input and output (in L2); the modes alternate, "
                             "process after process")
    parser.add_argument("--device", default="cuda",
                        help="cpu: a dry run of the plumbing (torch's ReLU only, CPU time)")
    options = parser.parse_args()
    os.environ["CUDA_VISIBLE_DEVICES"] = str(options.gpu)
    import torch
    import torch.multiprocessing as multiprocessing

    options.folder = tempfile.mkdtemp(prefix="kagent-process-state-")
    write_kernels(options.folder, options.copies)
    elements = SHAPE[0] * SHAPE[1]
    pool = torch.empty(REGIONS * REGION_BYTES // 4, device=options.device).normal_()
    slots = [torch.empty(elements, device=options.device) for _ in range(16)]
    context = multiprocessing.get_context("spawn")
    modes = options.modes.split(",")
    names = ["torch.relu"] + ([f"relu_kernel_{index}" for index in range(options.copies)]
                              if options.device == "cuda" else [])
    print("process   mode " + " ".join(f"{name:>14}" for name in names) +
          "   (median us / mean us)")
    rows = collections.defaultdict(list)
    for process in range(options.processes * len(modes)):
        mode = modes[process % len(modes)]
        queue = context.Queue()
        shared = mode == "shared"
        worker = context.Process(target=measure, args=(
            options, mode, pool if shared else None, slots if shared else None, queue))
        worker.start()
        try:
            row = queue.get(timeout=300)
        except Exception as error:  # noqa: BLE001 - a bench reports and goes on
            print(f"process {process} ({mode}) gave nothing: {error!r}")
            worker.kill()
            continue
        worker.join()
        rows[mode].append(row)
        print(f"{process:>7} {mode:>6} " + " ".join(
            f"{row[name]['median_us']:6.3f}/{row[name]['mean_us']:6.3f}" if name in row else
            f"{'-':>14}" for name in names))
    for mode in modes:
        for name in names:
            means = [row[name]["mean_us"] for row in rows[mode] if name in row]
            if means:
                spread = (max(means) - min(means)) / statistics.median(means)
                print(f"{mode} {name}: means across processes {min(means):.3f}-"
                      f"{max(means):.3f} us, spread {spread:.1%}")
        ratios = [row["torch.relu"]["mean_us"] / row["relu_kernel_0"]["mean_us"]
                  for row in rows[mode] if "torch.relu" in row and "relu_kernel_0" in row]
        if ratios:
            spread = (max(ratios) - min(ratios)) / statistics.median(ratios)
            print(f"{mode} torch.relu / relu_kernel_0 in one process: {min(ratios):.3f}-"
                  f"{max(ratios):.3f}, spread {spread:.1%}")


if __name__ == "__main__":
    main()
