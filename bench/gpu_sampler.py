"""What the GPUs and the host did while a benchmark phase ran, for the scripts beside it
(reward_throughput.py, kernelbench_batch.py): nvidia-smi's utilisation of each GPU every 0.5 s,
kept as a trace (written as CSV, drawn with matplotlib), and the machine's CPU time over the
phase (is the host, not the GPU, what bounds it?)."""
import os
import shutil
import subprocess
import threading
import time


def cpu_times():
    """(busy, total) CPU time of the whole machine so far, in clock ticks (/proc/stat)."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(value) for value in handle.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return sum(fields) - idle, sum(fields)


class Sampler:
    """Samples `gpus` (indexes) from its start to its end, as a `with` block."""

    def __init__(self, gpus, interval=0.5):
        self.gpus = gpus
        self.interval = interval
        self.samples = []  # [(seconds since the start, [percent per GPU])]
        self.process = None
        self.started = None
        self.cpu_start = self.cpu_end = None

    def __enter__(self):
        self.samples = []
        self.started = time.monotonic()
        self.cpu_start = cpu_times()
        self.process = None
        if shutil.which("nvidia-smi") is not None and self.gpus:
            # one nvidia-smi that samples in a loop: a new one every 0.5 s would initialise
            # NVML each time, which takes the driver's host-wide lock that the evaluations'
            # context creation waits on (issue 16, docs/benchmarks.md)
            self.process = subprocess.Popen(
                ["nvidia-smi", "-i", ",".join(str(gpu) for gpu in self.gpus),
                 "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits",
                 "-lms", str(int(self.interval * 1000))],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.thread = threading.Thread(target=self.loop, daemon=True)
            self.thread.start()
        return self

    def loop(self):
        """Reads nvidia-smi's rows, one per GPU each interval, into samples."""
        row = {}
        for line in self.process.stdout:
            try:
                index, percent = (part.strip() for part in line.split(","))
                row[int(index)] = float(percent)
            except ValueError:
                continue
            if len(row) == len(self.gpus):
                self.samples.append((round(time.monotonic() - self.started, 2),
                                     [row.get(gpu) for gpu in self.gpus]))
                row = {}

    def __exit__(self, *exc):
        self.cpu_end = cpu_times()
        if self.process is not None:
            self.process.terminate()
            self.process.wait()
            self.thread.join()

    def cpu(self, evaluations):
        """The machine's CPU use over the phase: percent of all cores busy, and busy core
        seconds per evaluation."""
        busy = self.cpu_end[0] - self.cpu_start[0]
        total = self.cpu_end[1] - self.cpu_start[1]
        ticks = os.sysconf("SC_CLK_TCK")
        return {"percent_of_cores": round(100 * busy / total, 1) if total else None,
                "cores": os.cpu_count(),
                "core_seconds_per_evaluation": round(busy / ticks / max(1, evaluations), 3)}

    def mean(self):
        """The mean utilisation of each GPU over the phase, or None without samples."""
        if not self.samples:
            return None
        return [round(sum(s[i] or 0 for _, s in self.samples) / len(self.samples), 1)
                for i in range(len(self.gpus))]

    def busy_share(self, threshold=0.0):
        """Per GPU, the share of samples above `threshold` percent: was it busy all along?"""
        if not self.samples:
            return None
        return [round(sum(1 for _, s in self.samples if (s[i] or 0) > threshold)
                      / len(self.samples), 3) for i in range(len(self.gpus))]

    def write_trace(self, path):
        """The trace as CSV: seconds, then one column per GPU (percent)."""
        with open(path, "w") as handle:
            handle.write(",".join(["seconds"] + [f"gpu{gpu}" for gpu in self.gpus]) + "\n")
            for seconds, row in self.samples:
                handle.write(",".join([f"{seconds:.2f}"] + ["" if value is None else
                                                          f"{value:g}" for value in row])
                             + "\n")

    def plot(self, path, title):
        """The trace drawn, one line per GPU; False when matplotlib is missing."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as pyplot
        except ImportError:
            return False
        figure, axes = pyplot.subplots(figsize=(10, 1.2 + 0.9 * len(self.gpus)))
        for index, gpu in enumerate(self.gpus):
            axes.plot([seconds for seconds, _ in self.samples],
                      [row[index] or 0 for _, row in self.samples], label=f"GPU {gpu}",
                      linewidth=1)
        axes.set_xlabel("seconds")
        axes.set_ylabel("utilisation %")
        axes.set_ylim(0, 105)
        axes.set_title(title)
        axes.legend(loc="lower right")
        figure.tight_layout()
        figure.savefig(path, dpi=100)
        pyplot.close(figure)
        return True
