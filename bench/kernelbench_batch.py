#!/usr/bin/env python3
"""kagentd on a GPU over KernelBench problems of the three levels (issue 11's GPU run): a real
`kagent daemon --device cuda` on a private socket and store, the scripted model server
(tests/fixtures/llm_server.py, stateless by_turn mode) proposing for every problem a candidate
made from the problem itself ("@problem_with_triton_copy@": the problem's Model, its output
copied through a Triton kernel of the candidate's own), then finishing. The batch goes in with
`kagent batch`, is followed with `kagent status --json`, and its report is printed with
`kagent report` (table, summary CSV and JSON into --out).

On several GPUs (issue 16): `--gpus 0,1` gives the daemon those GPUs; every GPU's utilisation
is sampled during the batch (gpu_utilisation.csv and .png in --out), the daemon's log is
checked for timing windows that overlap on one GPU (timing_windows.py), and
`--compare-with REPORT.json` (another run's batch_report.json, one GPU say) compares the
speedups problem by problem (`--tolerance`, 5% by default).

Run on the GPU machine (env as docs/gpu-suite.md says):
  python3 bench/kernelbench_batch.py KERNELBENCH_DIR --kagent .gpu/kagent [--out DIR]
      [--gpus 0,1] [--compare-with ONE_GPU/batch_report.json]
Prints the chosen problems, the batch's progress, the report, the GPUs' utilisation, the
timing windows, the comparison, and the daemon's log tail. Exit 1 when the batch failed to
run, windows overlap or a speedup is off by more than the tolerance."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from gpu_sampler import Sampler
import timing_windows

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(SOURCE, "tests", "fixtures", "llm_server.py")
sys.path.insert(0, os.path.dirname(SERVER))
from scripted_replies import chat_reply  # noqa: E402 - the scripted model's replies

# what a turn costs in the report's token columns, as a real model's reply might
USAGE = (3000, 800)

# By number inside each level: operators of level 1, fused operators of level 2, and level 3
# networks small enough for one command's time limit (the largest ones, DenseNet and
# ResNet101, are bench/kernelbench_sweep.py's). 21 problems.
CHOSEN = {1: [1, 12, 19, 23, 36, 40, 88],
          2: [1, 6, 12, 18, 23, 40, 76],
          3: [1, 2, 3, 4, 8, 19, 33]}


def problems(kernelbench):
    chosen = []
    for level, numbers in CHOSEN.items():
        folder = os.path.join(kernelbench, f"level{level}")
        names = os.listdir(folder)
        for number in numbers:
            match = sorted(name for name in names
                           if name.startswith(f"{number}_") and name.endswith(".py"))
            if match:
                chosen.append(os.path.join(folder, match[0]))
    return chosen


def gpu_indexes(asked):
    """The GPUs the daemon will use: those asked, else every GPU nvidia-smi lists."""
    if asked:
        return [int(gpu) for gpu in asked.split(",")]
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout
        return [int(line) for line in listed.split()]
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return []


def print_verdicts(runs, keep):
    """Each session's verdicts (variant, purpose, status, reason), from its trace, which is
    kept in keep."""
    os.makedirs(keep, exist_ok=True)
    for root, _, names in sorted(os.walk(runs)):
        for name in sorted(names):
            if not (name.endswith(".jsonl") and os.path.basename(root) == "traces"):
                continue
            path = os.path.join(root, name)
            shutil.copy(path, keep)
            problem = os.path.basename(os.path.dirname(root))
            with open(path) as f:
                for line in f:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if record.get("type") == "verdict":
                        print(f"# {problem}: {record.get('variant')} {record.get('purpose')}: "
                              f"{record.get('status')} {(record.get('reason') or '')[:300]}")
                    elif record.get("type") == "tool_result" and record.get("is_error"):
                        print(f"# {problem}: tool {record.get('name')} failed: "
                              f"{(record.get('content') or '')[:300]}")


def replay(executable, environment, runs, count, out):
    """`kagent replay` of the first count traces (docs/dataset.md): the table, and the JSON
    into out."""
    traces = sorted(os.path.join(root, name) for root, _, names in os.walk(runs)
                    for name in names
                    if name.endswith(".jsonl") and os.path.basename(root) == "traces")
    for trace in traces[:count]:
        started = time.monotonic()
        table = kagent([executable, "replay", trace], environment, check=False)
        print(f"# kagent replay {os.path.basename(trace)}: exit {table.returncode}, "
              f"{time.monotonic() - started:.1f} s")
        print(table.stdout + table.stderr[-2000:])
        result = kagent([executable, "replay", trace, "--json"], environment, check=False)
        with open(os.path.join(out, "replay-" + os.path.basename(trace)[:-1]), "w") as f:
            f.write(result.stdout)


def compare(report, other, tolerance):
    """Problem by problem, the speedups of this batch's report against another run's (same
    problems): [(problem, basis, this, other, ratio)] and the problems off by more than
    `tolerance` (a ratio outside 1 ± tolerance, or a speedup in one run only)."""
    def speedups(rows):
        return {row.get("problem"): row for row in rows if row.get("problem")}

    theirs = speedups(other.get("rows", []))
    pairs, off = [], []
    for problem, row in sorted(speedups(report.get("rows", [])).items()):
        if problem not in theirs:
            continue
        for basis in ("speedup_vs_eager", "speedup_vs_compile"):
            mine, their = row.get(basis), theirs[problem].get(basis)
            if mine is None and their is None:
                continue
            ratio = mine / their if mine and their else None
            pairs.append((problem, basis, mine, their, ratio))
            if ratio is None or abs(ratio - 1) > tolerance:
                off.append(problem)
    return pairs, sorted(set(off))


def follow(executable, environment, batch, started, deadline):
    """Prints the batch's state as it changes until it is done; past `deadline` seconds from
    `started` the rest of it is cancelled."""
    last = None
    while True:
        state = json.loads(kagent([executable, "status", batch, "--json"], environment).stdout)
        counts = {}
        for session in state.get("sessions", []):
            counts[session["state"]] = counts.get(session["state"], 0) + 1
        line = f"{state['state']} {json.dumps(counts, sort_keys=True)}"
        if line != last:
            print(f"# {time.monotonic() - started:6.1f} s  {line}", flush=True)
            last = line
        if state["state"] in ("done", "cancelled"):
            return
        if time.monotonic() - started > deadline:
            print("# deadline: cancelling the rest", flush=True)
            kagent([executable, "cancel", batch], environment)
            deadline = float("inf")
        time.sleep(2)


def kagent(arguments, environment, check=True):
    result = subprocess.run(arguments, env=environment, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(arguments)}: exit {result.returncode}\n"
                           f"{result.stdout}{result.stderr}")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kernelbench", help="a KernelBench checkout's KernelBench folder")
    parser.add_argument("--kagent", required=True)
    parser.add_argument("--out", default=None, help="where the report's files go")
    parser.add_argument("--max-sessions", type=int, default=None,
                        help="sessions in flight (default: 4 per GPU, so that runs on one and "
                             "on several GPUs load each GPU alike; 4 on the CPU)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: a check of this script without a GPU")
    parser.add_argument("--replay", type=int, default=0, metavar="N",
                        help="then `kagent replay` the first N sessions' traces on this GPU")
    parser.add_argument("--problems", nargs="+", default=None,
                        help="these problem files instead of the chosen KernelBench ones")
    parser.add_argument("--deadline", type=float, default=540,
                        help="seconds; then the rest of the batch is cancelled and reported")
    parser.add_argument("--gpus", default=None,
                        help="the daemon's GPUs, e.g. 0,1 (default: every GPU it finds)")
    parser.add_argument("--compare-with", default=None, metavar="REPORT_JSON",
                        help="another run's batch_report.json: compare the speedups")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="the largest relative difference of a speedup from the other "
                             "run's (--compare-with)")
    arguments = parser.parse_args()
    executable = os.path.abspath(arguments.kagent)
    folder = tempfile.mkdtemp(prefix="kagent-batch-")
    out = arguments.out or folder
    os.makedirs(out, exist_ok=True)
    socket_path = os.path.join(folder, "kagentd.sock")
    script = {"by_turn": [chat_reply([("evaluate", {"source": "@problem_with_triton_copy@",
                                                    "note": "the problem, copied by Triton"})],
                                     usage=USAGE),
                          chat_reply([("finish", {"summary": "scripted: one candidate"})],
                                     usage=USAGE)]}
    with open(os.path.join(folder, "script.json"), "w") as f:
        json.dump(script, f)
    server = subprocess.Popen(
        [sys.executable, SERVER, "--script", os.path.join(folder, "script.json"), "--log",
         os.path.join(folder, "server.jsonl"), "--port", "0", "--exit-with-stdin",
         "--backlog", "64"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline().split()[1])
    config = os.path.join(folder, "kagent.yaml")
    with open(config, "w") as f:
        f.write(f"provider:\n  model: scripted-model\n  api: chat_completions\n"
                f"  base_url: http://127.0.0.1:{port}/v1\n"
                f"output_directory: {folder}/runs\n")
    environment = dict(os.environ, OPENAI_API_KEY="sk-scripted", KAGENT_SOCKET=socket_path,
                       XDG_STATE_HOME=os.path.join(folder, "state"),
                       KAGENT_CACHE_DIR=os.path.join(folder, "cache"))
    environment.pop("KAGENT_WORKER_SOCKET", None)
    log_path = os.path.join(out, "kagentd.log")
    log = open(log_path, "w")
    started = time.monotonic()
    gpus = [] if arguments.device == "cpu" else gpu_indexes(arguments.gpus)
    sessions = arguments.max_sessions or 4 * max(1, len(gpus))
    daemon = subprocess.Popen(
        [executable, "daemon", "--device", arguments.device, "--socket", socket_path, "--store",
         f"sqlite:{folder}/kagent.db", "--config", config, "--max-sessions",
         str(sessions)] + (["--gpus", arguments.gpus] if arguments.gpus else []),
        env=environment, stdout=log, stderr=subprocess.STDOUT)
    sampler = Sampler(gpus)
    status = 1
    try:
        while kagent([executable, "status", "--json"], environment, check=False).returncode:
            if daemon.poll() is not None or time.monotonic() - started > 60:
                raise RuntimeError("kagentd did not start")
            time.sleep(0.2)
        chosen = arguments.problems or problems(arguments.kernelbench)
        print(f"# {len(chosen)} problems:", *(os.path.relpath(p, arguments.kernelbench)
                                              for p in chosen), sep="\n#   ")
        with sampler:
            reply = kagent([executable, "batch", *chosen, "--json", "--max-turns", "2",
                            "--target", "0"], environment)
            batch = json.loads(reply.stdout)["batch"]
            print(f"# batch {batch}", flush=True)
            follow(executable, environment, batch, started, arguments.deadline)
        elapsed = time.monotonic() - started
        print(f"# batch ended after {elapsed:.1f} s")
        if gpus:
            sampler.write_trace(os.path.join(out, "gpu_utilisation.csv"))
            sampler.plot(os.path.join(out, "gpu_utilisation.png"),
                         f"GPU utilisation during a batch of {len(chosen)} problems")
            print(f"# GPU utilisation over the batch (mean %, share of samples above 0): "
                  f"{dict(zip(gpus, sampler.mean() or []))}, "
                  f"{dict(zip(gpus, sampler.busy_share() or []))}")
        table = kagent([executable, "report", batch], environment)
        print(table.stdout)
        report = kagent([executable, "report", batch, "--json", "--plot",
                         os.path.join(out, "batch_report.png")], environment, check=False)
        with open(os.path.join(out, "batch_report.json"), "w") as f:
            f.write(report.stdout)
        status = 0
        if arguments.compare_with:
            with open(arguments.compare_with) as f:
                pairs, off = compare(json.loads(report.stdout), json.load(f),
                                     arguments.tolerance)
            for problem, basis, mine, their, ratio in pairs:
                print(f"# {problem} {basis}: {mine} here, {their} there, ratio "
                      f"{'-' if ratio is None else f'{ratio:.3f}'}")
            print(f"# {len(off)} problem(s) off by more than {100 * arguments.tolerance:g}%: "
                  f"{off}")
            status = 1 if off or not pairs else 0
        summary = kagent([executable, "report", batch, "--summary-csv"], environment)
        print(summary.stdout)
        print_verdicts(os.path.join(folder, "runs"), os.path.join(out, "traces"))
        replay(executable, environment, os.path.join(folder, "runs"), arguments.replay, out)
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
        log.close()
        server.stdin.close()
        server.terminate()
        with open(log_path) as f:
            print("# kagentd log (tail):\n" + "".join(f.readlines()[-40:]))
        # two evaluations timing at once on one GPU would spoil both
        windows = timing_windows.summary(timing_windows.read_windows([log_path]))
        with open(os.path.join(out, "timing_windows.json"), "w") as f:
            json.dump(windows, f, indent=1)
        for device, one in windows.items():
            print(f"# timing windows on {device}: {one['windows']}, "
                  f"{len(one['overlaps'])} overlapping")
            if one["overlaps"]:
                status = 1
        if arguments.out is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
