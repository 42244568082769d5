#!/usr/bin/env python3
"""Which CUDA driver operations the host serialises (issue 16: the reward service judges about
1.9 evaluations a second per host however many GPUs it has). P worker processes, spread over G
GPUs (worker i sees GPU i mod G through CUDA_VISIBLE_DEVICES, as the children of kagent's
per-GPU workers do), repeat one operation for --seconds after a common start; the script
prints the operations per second of all workers together and the median time of one. An
operation the host serialises keeps the same total rate whatever P and G are; one that does
not grows with P. The operations are those each evaluation performs:

  init       fork a child that initialises the driver (cuInit) and exits
  process    fork a child that initialises the driver, creates its context, allocates 2 MiB
             and exits; the worker waits for it (a candidate's process: creation and teardown)
  torch      the same through torch, imported by the worker before it forks, as kagent's
             worker does: the child runs torch.empty(1, device="cuda") and exits
  context    create the primary context, allocate 2 MiB, destroy the context (cuDevicePrimary
             CtxReset), in a process whose driver is initialised once
  alloc      cuMemAlloc and cuMemFree of --bytes (the judge's buffers and input pool)
  ipc        cuIpcOpenMemHandle and cuIpcCloseMemHandle of another process's --bytes
             allocation (the candidate mapping the judge's inputs; the judge its outputs)

With --own-gpu-node, each forked child (init, process, torch) first denies itself, through
Landlock, the device nodes of the host's other GPUs (/dev/nvidia<minor> of every GPU but its
own, found in /proc/driver/nvidia/gpus in PCI order, which CUDA_DEVICE_ORDER=PCI_BUS_ID makes
CUDA's order too) and then sees its GPU as device 0: does cuInit get cheaper? (docs/sandbox.md,
"Other GPUs of the host".)

Needs a GPU; not a CI test. Talks to libcuda through ctypes, without torch, so that a worker
starts in milliseconds and nothing but the driver is measured.

    python3 bench/driver_ops.py [--ops process,context,alloc,ipc] [--cases 1x1,8x1,8x4,32x4]
        [--bytes 1073741824] [--seconds 4] [--own-gpu-node]"""
import argparse
import ctypes
import errno
import json
import os
import statistics
import subprocess
import sys
import time

SMALL = 2 << 20


class Handle(ctypes.Structure):
    """CUipcMemHandle: passed by value, so a structure (a bare array would go as a pointer)."""
    _fields_ = [("reserved", ctypes.c_char * 64)]


def driver():
    library = ctypes.CDLL("libcuda.so.1")
    library.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    library.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    library.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(Handle), ctypes.c_uint64]
    library.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), Handle,
                                              ctypes.c_uint]
    library.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
    return library


def check(result, call):
    if result != 0:
        raise RuntimeError(f"{call} failed with CUDA error {result}")


def make_current(library):
    """Initialises the driver and makes device 0's primary context current."""
    check(library.cuInit(0), "cuInit")
    device, context = ctypes.c_int(), ctypes.c_void_p()
    check(library.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    check(library.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(library.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    return device


def allocate(library, size):
    pointer = ctypes.c_uint64()
    check(library.cuMemAlloc_v2(ctypes.byref(pointer), size), "cuMemAlloc")
    return pointer.value


LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446  # x86-64
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_READ_WRITE = (1 << 1) | (1 << 2)  # LANDLOCK_ACCESS_FS_WRITE_FILE | READ_FILE
PR_SET_NO_NEW_PRIVS = 38


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def other_gpu_nodes(visible):
    """/dev/nvidia<minor> of every GPU but the one CUDA_VISIBLE_DEVICES names (an index in
    PCI order)."""
    root = "/proc/driver/nvidia/gpus"
    minors = []
    for bus in sorted(os.listdir(root)):
        with open(os.path.join(root, bus, "information")) as handle:
            for line in handle:
                if line.startswith("Device Minor:"):
                    minors.append(int(line.split(":")[1]))
    return [f"nvidia{minor}" for index, minor in enumerate(minors) if index != int(visible)]


def deny_device_nodes(names):
    """Landlock: reading and writing files stays allowed everywhere but /dev/<name> for each
    of names (Landlock allows, so every other entry of / and of /dev is allowed by name)."""
    libc = ctypes.CDLL(None, use_errno=True)
    handled = ctypes.c_uint64(LANDLOCK_READ_WRITE)
    ruleset = libc.syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(handled), 8, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    allowed = [os.path.join("/", name) for name in os.listdir("/") if name != "dev"]
    allowed += [os.path.join("/dev", name) for name in os.listdir("/dev") if name not in names]
    for path in allowed:
        try:
            descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        rule = PathBeneath(LANDLOCK_READ_WRITE, descriptor)
        if libc.syscall(LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH,
                        ctypes.byref(rule), 0) < 0:
            # a file's rule may not carry directory rights; files take READ|WRITE as is; a
            # path that is neither (/dev/stderr leading to a pipe) takes no rule (EBADFD)
            if ctypes.get_errno() not in (errno.EINVAL, errno.EBADFD):
                raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        os.close(descriptor)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or \
            libc.syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(ruleset)


def in_child(work, denied=()):
    """Runs work() in a forked child (which first denies itself `denied` under /dev) and waits
    for it to exit."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            if denied:
                deny_device_nodes(denied)
                # CUDA_VISIBLE_DEVICES counts the GPUs CUDA can open: with the others denied,
                # the child's own GPU is the only one, and an index of N > 0 names none (cuInit
                # then fails with CUDA_ERROR_NO_DEVICE, as session 14 found)
                os.environ["CUDA_VISIBLE_DEVICES"] = "0"
            work()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    if status != 0:
        raise RuntimeError(f"the child failed (status {status})")


def worker(operation, size, seconds, handle, own_gpu_node):
    """One worker: prepares, says "ready", waits for a line on stdin, repeats the operation
    for `seconds`, prints its count and median as JSON."""
    library = driver() if operation in ("context", "alloc", "ipc") else None
    device = make_current(library) if library is not None else None
    raw, pointer = None, ctypes.c_uint64()
    denied = other_gpu_nodes(os.environ["CUDA_VISIBLE_DEVICES"]) if own_gpu_node else ()
    if operation == "ipc":
        raw = Handle.from_buffer_copy(bytes.fromhex(handle))

    def ipc_once():
        check(library.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), raw, 1), "cuIpcOpenMemHandle")
        check(library.cuIpcCloseMemHandle(pointer.value), "cuIpcCloseMemHandle")

    def context_once():
        context = ctypes.c_void_p()
        check(library.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "retain")
        check(library.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        allocate(library, SMALL)
        check(library.cuCtxSetCurrent(None), "cuCtxSetCurrent")
        check(library.cuDevicePrimaryCtxRelease_v2(device), "release")
        check(library.cuDevicePrimaryCtxReset_v2(device), "reset")

    def alloc_once():
        check(library.cuMemFree_v2(allocate(library, size)), "cuMemFree")

    def init_once():
        in_child(lambda: check(driver().cuInit(0), "cuInit"), denied)

    def process_once():
        def work():
            child_library = driver()
            make_current(child_library)
            allocate(child_library, SMALL)
        in_child(work, denied)

    def torch_once():
        in_child(lambda: torch.empty(1, device="cuda"), denied)

    if operation == "torch":
        import torch
    once = {"init": init_once, "process": process_once, "torch": torch_once,
            "context": context_once, "alloc": alloc_once, "ipc": ipc_once}[operation]
    if operation == "context":  # the first retain above holds one reference: let it go
        check(library.cuCtxSetCurrent(None), "cuCtxSetCurrent")
        check(library.cuDevicePrimaryCtxRelease_v2(device), "release")
    print("ready", flush=True)
    sys.stdin.readline()
    durations = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        before = time.monotonic()
        once()
        durations.append(time.monotonic() - before)
    print(json.dumps({"count": len(durations), "median": statistics.median(durations),
                      "seconds": time.monotonic() - started}), flush=True)


EXPORTER = ("import sys, time\nsys.path.insert(0, sys.argv[1])\nimport driver_ops as d\n"
            "library = d.driver(); d.make_current(library)\n"
            "pointer = d.allocate(library, int(sys.argv[2]))\n"
            "raw = d.Handle()\n"
            "d.check(library.cuIpcGetMemHandle(d.ctypes.byref(raw), pointer), 'get')\n"
            "print(bytes(raw).hex(), flush=True)\nsys.stdin.readline()\n")


def run_case(operation, processes, gpus, size, seconds, own_gpu_node):
    here = os.path.dirname(os.path.abspath(__file__))
    exporters, handles = [], {}
    if operation == "ipc":  # one allocation per GPU, owned by a process of its own
        for gpu in range(gpus):
            exporter = subprocess.Popen([sys.executable, "-c", EXPORTER, here, str(size)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu)))
            exporters.append(exporter)
            handles[gpu] = exporter.stdout.readline().strip()
    workers = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", operation,
                                 "--bytes", str(size), "--seconds", str(seconds),
                                 "--handle", handles.get(index % gpus, ""),
                                 *(["--own-gpu-node"] if own_gpu_node else [])],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, CUDA_VISIBLE_DEVICES=str(index % gpus),
                                         CUDA_DEVICE_ORDER="PCI_BUS_ID"))
               for index in range(processes)]
    try:
        for one in workers:
            if one.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a worker failed (exit {one.wait()})")
        for one in workers:
            one.stdin.write("go\n")
            one.stdin.flush()
        reports = [json.loads(one.stdout.readline()) for one in workers]
    finally:
        for one in workers + exporters:
            one.stdin.close()
            one.wait()
    rate = sum(report["count"] / report["seconds"] for report in reports)
    return rate, statistics.median(report["median"] for report in reports)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", default="process,context,alloc,ipc")
    parser.add_argument("--cases", default="1x1,8x1,8x4,32x4")
    parser.add_argument("--bytes", type=int, default=1 << 30)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--worker")
    parser.add_argument("--handle", default="")
    parser.add_argument("--own-gpu-node", action="store_true",
                        help="forked children deny themselves the other GPUs' device nodes")
    arguments = parser.parse_args()
    if arguments.worker:
        worker(arguments.worker, arguments.bytes, arguments.seconds, arguments.handle,
               arguments.own_gpu_node)
        return 0
    for operation in arguments.ops.split(","):
        for case in arguments.cases.split(","):
            processes, gpus = (int(part) for part in case.split("x"))
            rate, median = run_case(operation, processes, gpus, arguments.bytes,
                                    arguments.seconds, arguments.own_gpu_node)
            print(f"{operation:8s}{' own node' if arguments.own_gpu_node else ''} "
                  f"{arguments.bytes:>11d} B {processes:3d} processes on {gpus} "
                  f"GPU(s): {rate:9.1f} a second in all, {median * 1000:8.2f} ms each (median)",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
