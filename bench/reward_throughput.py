#!/usr/bin/env python3
"""The reward service's throughput (issue 13): COUNT distinct correct candidates for one
level1-sized elementwise problem (ReLU on a SHAPE float32 input), judged three ways in one run:
serially with `kagent eval --no-daemon --worker SOCKET` (today's path, a warm worker), through
kagentd's POST /v1/evaluations (evaluation lanes per GPU), and optionally with KernelBench's
own harness (eval_kernel_against_ref, a fresh process per candidate, as its scripts do).
Prints evaluations per GPU-hour for each, the statuses (the service's must equal the serial
path's), the GPU utilisation (nvidia-smi sampled every 0.5 s in each phase), the daemon's
timing windows per GPU (none may overlap: timing_windows.py) and writes everything to --out
as JSON. Not a CI test.

On a GPU the candidates are Triton kernels (BLOCK sizes, num_warps, trivially different
source); on the CPU device (--device cpu, to check the script itself) they are torch-only
variants, since Triton has no CPU backend here.

The baselines are measured once before the phases (one evaluation through the daemon), so
that no phase pays for eager and torch.compile timing, as in a training run after its first
step; then every lane of every GPU judges one more candidate of its own, so that no phase pays
for a lane's first load of the problem either (16 lanes' first loads were a quarter of a
64-candidate run on two GPUs, issue 16). Both kagent paths share one cache folder.

Run (GPU machine, from the source tree, as the GPU suite: docs/gpu-suite.md):
    python3 bench/reward_throughput.py --kagent build/kagent [--count 64] [--lanes 4]
        [--gpus 0] [--shape 4096x65536] [--serial-count N] [--prepare-candidates]
        [--device-queues N] [--timing-processes N] [--kernelbench PATH]
        [--kernelbench-count 4] [--out reward_throughput.json]
Check it on the CPU:
    python3 bench/reward_throughput.py --kagent build/kagent --device cpu --count 4"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "fixtures"))
import daemon_process  # noqa: E402 - kagentd over its Unix socket, shared with the tests
from gpu_sampler import Sampler  # noqa: E402 - beside this script
import timing_windows  # noqa: E402 - beside this script

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    \"\"\"ReLU of a level1-sized input (KernelBench's 19_ReLU is 4096x393216).\"\"\"

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = {rows}
dim = {columns}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""

TRITON = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel_{index}(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, {body}, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel_{index}[(triton.cdiv(n, {block}),)](x, out, n, BLOCK={block},
                                                        num_warps={warps})
        return out
"""

TORCH = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    \"\"\"variant {index}\"\"\"

    def forward(self, x):
        return {body}
"""


def candidates(count, device):
    """count distinct correct sources."""
    sources = []
    if device == "cpu":
        bodies = ["torch.clamp_min(x, 0.0)", "torch.relu(x)", "x.clamp(min=0.0)",
                  "torch.where(x > 0, x, torch.zeros_like(x))", "torch.maximum(x, x.new_zeros(()))"]
        for index in range(count):
            sources.append(TORCH.format(index=index, body=bodies[index % len(bodies)]))
        return sources
    bodies = ["tl.maximum(x, 0.0)", "tl.where(x > 0, x, 0.0)"]
    shapes = [(block, warps) for block in (512, 1024, 2048, 4096, 8192, 16384)
              for warps in (2, 4, 8, 16) if block // (32 * warps) >= 1]
    for index in range(count):
        block, warps = shapes[index % len(shapes)]
        body = bodies[(index // len(shapes)) % len(bodies)]
        sources.append(TRITON.format(index=index, block=block, warps=warps, body=body))
    return sources


def call(socket_path, method, path, body=None):
    return daemon_process.request(socket_path, method, path, body, timeout=60)


def per_gpu_hour(count, seconds, gpus):
    return round(count / seconds * 3600 / max(1, gpus), 1) if seconds > 0 else None


def phase_means_by_gpu(verdict_phases):
    """{gpu: {"count", "prepared", "load", "trials", "timing", "wall_seconds"}}: the mean of
    each over the verdicts timed on that GPU ("none" for verdicts without a timing window);
    "prepared" counts the candidates that ran in a prepared process."""
    groups = {}
    for entry in verdict_phases:
        gpu = entry.get("gpu")
        groups.setdefault("none" if gpu is None else str(gpu), []).append(entry)
    means = {}
    for gpu, entries in sorted(groups.items()):
        def mean(values):
            values = [value for value in values if value is not None]
            return round(sum(values) / len(values), 3) if values else None

        means[gpu] = {"count": len(entries),
                      "prepared": sum(1 for entry in entries if entry.get("candidate_prepared")),
                      "wall_seconds": mean(entry.get("wall_seconds") for entry in entries)}
        for phase in ("load", "trials", "timing"):
            means[gpu][phase] = mean((entry.get("phase_seconds") or {}).get(phase)
                                     for entry in entries)
    return means


# KernelBench's harness in a process of its own per candidate, shared with eval_speed.py
KERNELBENCH_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "kernelbench_child.py")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kagent", default=os.path.join(SOURCE, "build", "kagent"))
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--serial-count", type=int, default=None,
                        help="candidates judged serially (default: all)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--gpus", default="0", help="the daemon's GPUs, e.g. 0,1")
    parser.add_argument("--lanes", type=int, default=None,
                        help="kagent daemon --evaluation-lanes (default: the daemon's)")
    parser.add_argument("--shape", default=None,
                        help="ROWSxCOLUMNS of the input (default 4096x65536, 1 GiB; 64x4096 "
                             "on the CPU)")
    parser.add_argument("--prepare-candidates", action="store_true",
                        help="kagent daemon --prepare-candidates: each lane's worker makes the "
                             "next candidate's process during the current evaluation")
    parser.add_argument("--device-queues", type=int, default=None,
                        help="hardware queues of each sandboxed child's CUDA context (the "
                             "evaluations' device_queues option; default: the evaluator's)")
    parser.add_argument("--timing-processes", type=int, default=None,
                        help="processes each arm is timed in where calls are short (the "
                             "evaluations' timing_processes option; default: the evaluator's)")
    parser.add_argument("--kernelbench", help="a KernelBench checkout: also time its harness")
    parser.add_argument("--kernelbench-count", type=int, default=4)
    parser.add_argument("--out", default="reward_throughput.json")
    arguments = parser.parse_args()
    kagent = os.path.abspath(arguments.kagent)
    gpus = [] if arguments.device == "cpu" else [int(g) for g in arguments.gpus.split(",")]
    shape = arguments.shape or ("64x4096" if arguments.device == "cpu" else "4096x65536")
    rows, columns = (int(part) for part in shape.lower().split("x"))
    folder = tempfile.mkdtemp(prefix="kagent-reward-bench-")
    problem_path = os.path.join(folder, "relu_problem.py")
    with open(problem_path, "w") as handle:
        handle.write(PROBLEM.format(rows=rows, columns=columns))
    # beyond the measured ones: one per lane, for the warm-up (never judged twice, so that
    # no measured candidate finds its kernels compiled already)
    spare_count = 64 * max(1, len(gpus))
    everything = candidates(arguments.count + spare_count, arguments.device)
    sources, spares = everything[:arguments.count], everything[arguments.count:]
    paths = []
    for index, source in enumerate(sources):
        paths.append(os.path.join(folder, f"candidate_{index:03d}.py"))
        with open(paths[-1], "w") as handle:
            handle.write(source)
    socket_path = os.path.join(folder, "kagentd.sock")
    worker_socket = os.path.join(folder, "worker.sock")
    config = os.path.join(folder, "kagent.yaml")
    with open(config, "w") as handle:
        handle.write("provider:\n  model: none\n")
    environment = dict(os.environ, KAGENT_CACHE_DIR=os.path.join(folder, "cache"),
                       KAGENT_DAEMON_SOCKET=socket_path,
                       KAGENT_WORKER_SOCKET=os.path.join(folder, "none.sock"),
                       XDG_STATE_HOME=os.path.join(folder, "state"))
    daemon_command = [kagent, "daemon", "--device", arguments.device, "--socket", socket_path,
                      "--store", f"sqlite:{folder}/kagent.db", "--config", config]
    if gpus:
        daemon_command += ["--gpus", arguments.gpus]
    if arguments.lanes:
        daemon_command += ["--evaluation-lanes", str(arguments.lanes)]
    if arguments.prepare_candidates:
        daemon_command.append("--prepare-candidates")
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "device": arguments.device, "gpus": gpus, "shape": [rows, columns],
              "count": arguments.count, "daemon": " ".join(daemon_command[1:]),
              "device_queues": arguments.device_queues,
              "timing_processes": arguments.timing_processes}
    # the same options for every evaluation of every phase, the service's and the serial path's
    chosen = {name: value for name, value in (("device_queues", arguments.device_queues),
                                              ("timing_processes", arguments.timing_processes))
              if value}
    options = {"options": chosen} if chosen else {}
    options_flags = [item for name, value in chosen.items()
                     for item in ("--" + name.replace("_", "-"), str(value))]
    processes = []
    try:
        daemon_log = open(os.path.join(folder, "daemon.log"), "w")
        daemon = subprocess.Popen(daemon_command, env=environment, stdout=daemon_log,
                                  stderr=subprocess.STDOUT)
        processes.append(daemon)
        # the serial path's worker serves the first GPU alone, as each daemon lane's serves its
        worker_command = [kagent, "worker", "--socket", worker_socket] + (
            ["--gpu", str(gpus[0])] if gpus else [])
        worker = subprocess.Popen(worker_command, env=environment, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        processes.append(worker)
        deadline = time.monotonic() + 300
        while not (os.path.exists(socket_path) and os.path.exists(worker_socket)):
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise RuntimeError("the daemon or the worker did not start; see "
                                   + daemon_log.name)
            time.sleep(0.1)
        status, health = call(socket_path, "GET", "/v1/health")
        result["lanes_per_gpu"] = health["evaluations"]["lanes_per_gpu"]

        # once: the baselines, into the cache both paths read, and the lanes' workers warm
        started = time.monotonic()
        status, warm = call(socket_path, "POST", "/v1/evaluations",
                            {"problem_path": problem_path, "candidates": [sources[0]], **options})
        result["warmup_seconds"] = round(time.monotonic() - started, 2)
        result["warmup_status"] = warm["verdicts"][0].get("status")
        print(f"warm-up (baselines measured, lanes started): {result['warmup_seconds']} s, "
              f"{result['warmup_status']}", flush=True)
        # then every lane's kept judge loads the problem once: one candidate per lane at once
        started = time.monotonic()
        lanes = result["lanes_per_gpu"] * max(1, len(gpus))
        status, warm = call(socket_path, "POST", "/v1/evaluations",
                            {"problem_path": problem_path, "candidates": spares[:lanes],
                             **options})
        result["lanes_warmup_seconds"] = round(time.monotonic() - started, 2)
        print(f"every lane warm ({lanes} candidates): {result['lanes_warmup_seconds']} s, "
              f"{sorted({v.get('status') or v.get('error') for v in warm['verdicts']})}",
              flush=True)

        serial_paths = paths[:arguments.serial_count or len(paths)]
        serial = []
        gpu_flag = ["--gpu", str(gpus[0])] if gpus else []
        with Sampler(gpus) as sampler:
            started = time.monotonic()
            for path in serial_paths:
                run = subprocess.run([kagent, "eval", "--no-daemon", "--json", "--device",
                                      arguments.device, "--worker", worker_socket, *gpu_flag,
                                      *options_flags, problem_path, path], env=environment,
                                     capture_output=True, text=True)
                verdict = json.loads(run.stdout) if run.stdout.strip() else {}
                serial.append(verdict.get("status") or verdict.get("error"))
            seconds = time.monotonic() - started
        result["serial"] = {"count": len(serial_paths), "seconds": round(seconds, 2),
                            "per_evaluation_seconds": round(seconds / len(serial_paths), 3),
                            "per_gpu_hour": per_gpu_hour(len(serial_paths), seconds, 1),
                            "gpu_utilization_mean": sampler.mean(),
                            "cpu": sampler.cpu(len(serial_paths)), "statuses": serial}
        print(f"serial kagent eval: {len(serial_paths)} in {seconds:.1f} s, "
              f"{result['serial']['per_gpu_hour']} per GPU-hour, "
              f"GPU {sampler.mean()}%, CPU {result['serial']['cpu']}", flush=True)

        with Sampler(gpus) as sampler:
            started = time.monotonic()
            status, queued = call(socket_path, "POST", "/v1/evaluations",
                                  {"problem_path": problem_path, "candidates": sources,
                                   "async": True, **options})
            if status != 202:
                raise RuntimeError(f"POST: {status} {queued}")
            while True:
                status, answer = call(socket_path, "GET", f"/v1/evaluations/{queued['id']}")
                if answer.get("state") == "done":
                    break
                time.sleep(0.2)
            seconds = time.monotonic() - started
        service = [v.get("status") or v.get("error") for v in answer["verdicts"]]
        result["service"] = {
            "count": len(sources), "seconds": round(seconds, 2),
            "per_evaluation_seconds": round(seconds / len(sources), 3),
            "per_gpu_hour": per_gpu_hour(len(sources), seconds, len(gpus)),
            "gpu_utilization_mean": sampler.mean(),
            "cpu": sampler.cpu(len(sources)),
            "daemon_gpu_utilization": answer.get("gpu_utilization"),
            "statuses": service,
            "phase_seconds_median": {
                phase: sorted((v.get("phase_seconds") or {}).get(phase, 0)
                              for v in answer["verdicts"])[len(sources) // 2]
                for phase in sorted({phase for v in answer["verdicts"]
                                     for phase in (v.get("phase_seconds") or {})})},
            # each verdict's phases and its candidate arm's stop: where an evaluation's
            # time went under load
            "verdict_phases": [
                {"gpu": (v.get("timing_window") or {}).get("gpu_index"),
                 "phase_seconds": v.get("phase_seconds"), "wall_seconds": v.get("wall_seconds"),
                 "candidate_stop": (((v.get("timing") or {}).get("device") or {})
                                    .get("candidate") or {}).get("stop"),
                 "candidate_calls": (((v.get("timing") or {}).get("device") or {})
                                     .get("candidate") or {}).get("calls"),
                 # ran in a process its lane's worker prepared during the evaluation before
                 "candidate_prepared": v.get("candidate_prepared")}
                for v in answer["verdicts"]],
            # why a verdict was not correct: the statuses must be explained, not only counted
            # (an evaluation that could not be made answers {"error", "message"}, not a status)
            "not_correct": [{"index": index, "status": v.get("status") or v.get("error"),
                             "reason": v.get("reason") or v.get("message"),
                             "violations": v.get("violations")}
                            for index, v in enumerate(answer["verdicts"])
                            if v.get("status") != "correct"]}
        same = service[:len(serial)] == serial
        result["statuses_identical"] = same
        result["all_correct"] = all(s == "correct" for s in service)
        print(f"kagentd: {len(sources)} in {seconds:.1f} s, "
              f"{result['service']['per_gpu_hour']} per GPU-hour, GPU {sampler.mean()}%, "
              f"CPU {result['service']['cpu']}; "
              f"statuses identical to the serial path: {same}", flush=True)
        # where an evaluation's time went on each GPU (issue 16: the load phase grew with
        # the lanes on the host)
        result["service"]["phase_means_by_gpu"] = phase_means_by_gpu(
            result["service"]["verdict_phases"])
        for gpu, means in result["service"]["phase_means_by_gpu"].items():
            print(f"  GPU {gpu}: {means['count']} verdicts, means: load {means['load']} s, "
                  f"trials {means['trials']} s, timing {means['timing']} s, wall "
                  f"{means['wall_seconds']} s", flush=True)
        for entry in result["service"]["not_correct"]:
            print(f"  candidate {entry['index']}: {entry['status']}: {entry['reason']}",
                  flush=True)

        if arguments.kernelbench:
            statuses = []
            with Sampler(gpus) as sampler:
                started = time.monotonic()
                for path in paths[:arguments.kernelbench_count]:
                    run = subprocess.run([sys.executable, KERNELBENCH_CHILD,
                                          os.path.abspath(arguments.kernelbench), problem_path,
                                          path], capture_output=True, text=True,
                                         cwd=arguments.kernelbench)
                    lines = run.stdout.strip().splitlines()
                    try:
                        statuses.append(json.loads(lines[-1])["status"])
                    except (IndexError, ValueError, KeyError):
                        statuses.append("harness_error: " + run.stderr.strip()[-300:])
                seconds = time.monotonic() - started
            count = len(statuses)
            result["kernelbench"] = {"count": count, "seconds": round(seconds, 2),
                                     "per_evaluation_seconds": round(seconds / count, 3),
                                     "per_gpu_hour": per_gpu_hour(count, seconds, 1),
                                     "gpu_utilization_mean": sampler.mean(),
                                     "cpu": sampler.cpu(count), "statuses": statuses}
            print(f"KernelBench's harness: {count} in {seconds:.1f} s, "
                  f"{result['kernelbench']['per_gpu_hour']} per GPU-hour", flush=True)
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
        # the daemon's log: did two evaluations ever time at once on one GPU?
        daemon_log.close()
        windows = timing_windows.summary(timing_windows.read_windows([daemon_log.name]))
        result["timing_windows"] = windows
        for device, one in windows.items():
            print(f"timing windows on {device}: {one['windows']}, "
                  f"{len(one['overlaps'])} overlapping, {one['timed_share']} of the span timed")
        with open(arguments.out, "w") as handle:
            json.dump(result, handle, indent=2)
        if "service" not in result:
            with open(os.path.join(folder, "daemon.log")) as handle:
                print("the daemon's log ends:\n" + handle.read()[-3000:], file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"written to {arguments.out}")
    ok = result.get("statuses_identical") and result.get("all_correct") and not any(
        one["overlaps"] for one in result.get("timing_windows", {}).values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
