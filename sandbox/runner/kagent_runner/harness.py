"""One timing harness for every arm (docs/verdict.md, "One harness").

Eager PyTorch, torch.compile and the candidate are each timed here, the same way, in the same
kind of sandboxed child (candidate.py): fresh inputs copied into a pool the judge owns at a new
shift for every call, an L2 flush and a reset of persisting L2 lines by the judge, then the
judge's clock around a go/done exchange. Per call the primary measure is device time, the
union of the intervals of every kernel, memcpy and memset the child's process ran, from its
device record (device_record.py); wall time (the judge's clock, less the null round trip) is
the secondary one. Both go into the result with every sample.

An arm may be timed in several processes (docs/verdict.md, "Processes per arm"): each brings a
state of its own to every call (the device's translations of its memory), a few percent of a
short call, so one process is one draw of it; the arm's rounds go through its processes in
blocks of calls, and its samples are theirs together.
"""
import math
import statistics

from . import adaptive, compare, device_record
from .problem import CandidateFailure
from .processes import process_status


# Where the reference's calls take less than this, the eager arm and the candidate's are timed
# in several processes (timing.processes_below_ms): a process's state is a few hundred
# nanoseconds of a call, which only short calls feel.
PROCESSES_BELOW_MS = 0.1


def processes_below_ms(request):
    """The request's timing.processes_below_ms, or PROCESSES_BELOW_MS."""
    try:
        return float((request.get("timing") or {}).get("processes_below_ms",
                                                        PROCESSES_BELOW_MS))
    except (TypeError, ValueError):
        return PROCESSES_BELOW_MS


def summarize(samples_ms, stop=None, process_calls=None):
    """The summary of one basis's per-call times, with the times themselves in call order
    (samples_ms): kagent computes the median's confidence interval from them. stop says why
    the adaptive repetitions ended (adaptive.stop_reason). With several processes the samples
    are each process's in call order, process after process, and process_calls says how many
    each has; the summary adds each one's median, and its median is their mean, as kagent's
    (statistics.c: each process weighs alike)."""
    ordered = sorted(samples_ms)
    count = len(ordered)

    def quantile(fraction):
        return ordered[min(count - 1, max(0, int(round(fraction * (count - 1)))))]

    return {"calls": count, "median_ms": statistics.median(ordered), "min_ms": ordered[0],
            "max_ms": ordered[-1], "p10_ms": quantile(0.1), "p90_ms": quantile(0.9),
            "mean_ms": statistics.fmean(ordered),
            "stdev_ms": statistics.stdev(ordered) if count > 1 else 0.0,
            "samples_ms": list(samples_ms), "stop": stop, **_processes(samples_ms, process_calls)}


def _processes(samples_ms, process_calls):
    """The per-process part of a summary: nothing for one process."""
    if not process_calls or len(process_calls) < 2:
        return {}
    medians, start = [], 0
    for count in process_calls:
        medians.append(statistics.median(samples_ms[start:start + count]))
        start += count
    return {"processes": len(process_calls), "process_calls": list(process_calls),
            "process_medians_ms": medians, "median_ms": statistics.fmean(medians)}


class TimedChild:
    """A timed child as the judge sees it: its channel (through the judge's ask), its pid,
    its device record and the pool and receive files it was given."""

    def __init__(self, judge, channel, pid, record_socket, label):
        self.judge = judge
        self.channel = channel
        self.pid = pid
        self.label = label
        self.reader = None
        self.record_error = None
        self.record_socket = record_socket
        self.key = device_record.JudgeReader.new_key() if record_socket is not None else None
        self.pool = None
        self.receive = None
        self.windows = []
        self.records = []
        self.sealed = False

    def send_key(self):
        """The key goes first: the child's library reads it before any untrusted code runs."""
        if self.record_socket is None:
            self.record_error = "no device record descriptor"
            return
        try:
            self.record_socket.sendall(self.key)
            self.reader = device_record.JudgeReader(self.record_socket, self.key)
        except OSError as error:
            self.record_error = f"the device record's descriptor failed: {error}"

    def ask(self, message, timeout):
        return self.judge.ask(message, timeout, channel=self.channel)

    def start_record(self, timeout):
        if self.reader is None:
            return
        error = self.ask({"op": "record"}, timeout).get("error")
        if error:
            self.record_error = str(error)[:500]
            self.reader = None

    def stop_record(self, timeout):
        """Ends the record (after the last flush was read), so a later profile may use CUPTI."""
        if self.reader is not None:
            self.ask({"op": "unrecord"}, timeout)
            self.reader = None

    def flush(self, timeout):
        """Everything the record holds so far, appended to self.records."""
        if self.reader is None:
            return
        reply = self.ask({"op": "flush"}, timeout)
        if reply.get("error"):
            raise device_record.RecordError(f"the device record could not be flushed: "
                                            f"{str(reply['error'])[:300]}")
        self.records.extend(self.reader.collect(timeout))


class TimedArm:
    """One arm between its setup and its finish (Harness): what its rounds need (the base of
    its seeds, the null round trip, the first round's size) and what they gather."""

    def __init__(self, child, arm, base, verify_calls, reference):
        self.child = child
        self.arm = arm
        self.base = base
        self.verify_calls = verify_calls
        self.reference = reference
        self.findings = []
        self.boundary = {}
        self.first_window = self.discovery_window = 0
        self.null = 0.0
        self.threads_before = None
        self.first_calls = 1
        self.verify_probability = 0.0
        self.timed_windows, self.wall_samples = [], []
        self.verified = self.failures = 0
        self.first_failure = None
        self.stop = None
        self.failure = None  # a reference arm's: why its child failed during the rounds


class Harness:
    """Times arms of timed children for one judge."""

    def __init__(self, judge):
        self.judge = judge
        self.device = judge.device
        timing = judge.request.get("timing", {})
        self.timing = timing
        self.call_seconds = float(judge.limits.get("call_seconds", 20))
        self.first_call_seconds = float(judge.limits.get("first_call_seconds", 120))
        self.warmup = max(1, int(timing.get("warmup_calls", 3)))

    # -- one call --------------------------------------------------------------------------
    def prepare(self, child, seed, verify):
        """Fresh inputs at a new shift of the child's pool, then the judge's L2 flush; for a
        verified call also the reference's outputs and the inputs' witness, taken first."""
        judge = self.judge
        inputs = judge.make_problem_inputs(seed)
        shift = child.pool.next_shift()
        views = child.pool.load(inputs, shift)
        del inputs
        expected = None
        if verify:
            leaves = compare.flatten(judge.reference(views))
            expected = (leaves, judge.input_witness(views), views)
        judge.flush_l2()
        judge.synchronize()
        return shift, expected

    def call(self, child, arm, seed, verify=False, null=False, first=False):
        """One call on the judge's clock: (wall ms, reply, expected). An arm's first call may
        compile (Triton's JIT, torch.compile meeting the pool's inputs): it gets the first
        call's limit, as in the trials."""
        shift, expected = (0, None) if null else self.prepare(child, seed, verify)
        start = device_record.now_ns()
        reply = child.ask({"op": "null"} if null else {"op": "go", "arm": arm, "shift": shift},
                          self.first_call_seconds if first else self.call_seconds)
        end = device_record.now_ns()
        # A null call runs nothing on the device, so it is no window a record may belong to:
        # the null calls follow the discovery call within the clocks' margin, and its last
        # kernel, stamped a little late, went to the first of them. Work during a null call
        # is outside every window, unless it is within the margin of a real call.
        if not null:
            child.windows.append((start, end))
        return (end - start) / 1e6, reply, expected

    def check(self, child, reply, expected):
        """Whether a verified call's outputs, read by the judge right after the call, match."""
        leaves, witness, views = expected
        described = reply.get("outputs") if isinstance(reply.get("outputs"), list) else []
        records = self.judge.check_timed_outputs(leaves, described, child)
        unchanged = self.judge.inputs_unchanged(witness, views)
        if not unchanged:
            return "the inputs changed during the call"
        failed = next((record for record in records if not record.get("passed")), None)
        if not records or failed is not None:
            return str((failed or {}).get("reason") or "no outputs")[:300]
        return None

    # -- arms ------------------------------------------------------------------------------
    def setup(self, child, arm, first_calls=None, verify_calls=0, seal=False, reference=False):
        """An arm's calls before its adaptive rounds (measure, then finish): warm-up calls (the
        last is the discovery call), the null round trip, the seal (for the candidate).
        Returns the arm's TimedArm; a reference arm's child failing in its rounds leaves them
        (TimedArm.failure) instead of ending them for every arm."""
        base = self.judge.secret.randrange(1 << 30)
        timed = TimedArm(child, arm, base, verify_calls, reference)
        timed.boundary["record"] = None if child.reader is not None else child.record_error
        estimates = []
        timed.first_window = len(child.windows)
        for index in range(self.warmup):
            wall, _, _ = self.call(child, arm, base + index, first=index == 0)
            estimates.append(wall)
        timed.discovery_window = len(child.windows) - 1
        nulls = [self.call(child, arm, 0, null=True)[0] for _ in range(max(5, self.warmup))]
        timed.null = statistics.median(nulls)
        if seal:
            timed.findings += self.seal(child, timed.boundary)
        timed.threads_before = process_status(child.pid)["threads"]
        estimate = max(min(estimates) / 1e3 if estimates else 1e-3, 1e-6)
        if first_calls is None:
            first_calls = int(min(max(
                round(float(self.timing.get("target_seconds", 0.1)) / estimate),
                int(self.timing.get("min_calls", 10))), int(self.timing.get("max_calls", 100))))
        timed.first_calls = first_calls
        timed.verify_probability = min(1.0, verify_calls / max(1, first_calls))
        return timed

    def one(self, timed, index):
        """One timed call of an arm's rounds: its wall sample (less the null round trip)."""
        verify = timed.verify_calls > 0 and self.judge.secret.random() < \
            timed.verify_probability
        wall, reply, expected = self.call(timed.child, timed.arm,
                                          timed.base + self.warmup + index, verify)
        timed.timed_windows.append(len(timed.child.windows) - 1)
        if verify:
            timed.verified += 1
            reason = self.check(timed.child, reply, expected)
            if reason is not None:
                timed.failures += 1
                timed.first_failure = timed.first_failure or reason
        sample = max(wall - timed.null, 1e-6)
        timed.wall_samples.append(sample)
        return sample

    def judged(self, timed):
        """The samples the stop rule looks at: the primary basis, the device record flushed
        and read once per round (each child has its own record and windows)."""
        child = timed.child
        if child.reader is None:
            return timed.wall_samples
        child.flush(self.call_seconds)
        samples, _, _ = device_record.analyse(child.records, child.windows,
                                              timed.timed_windows, 0)
        return samples

    def measure(self, groups):
        """The adaptive rounds of arms set up, in alternating rounds when there are several
        (adaptive.measure_arms). groups holds each arm's TimedArms, one a process: the arm's
        calls go through them in blocks of a round's share (so that every round has each
        process's calls and the processes keep their order from round to round), and its
        stop rule looks at their samples together. Each TimedArm gets its arm's stop reason.
        A reference arm whose child fails leaves with the failure kept, and its children are
        ended at once (nothing of them runs beside the other arms' calls); the candidate's
        failure ends them all."""

        def guarded(group, work):
            def run(*args):
                try:
                    return work(group, *args)
                except (CandidateFailure, device_record.RecordError) as failure:
                    if not group[0].reference:
                        raise
                    for timed in group:
                        timed.failure = failure
                        self.judge.end_child(timed.child, kill=True)
                    raise adaptive.Leave() from failure
            return run

        def call(group, index):
            block = math.ceil(group[0].first_calls / len(group))
            return self.one(group[(index // block) % len(group)], index)

        def judged(group):
            return [sample for timed in group for sample in self.judged(timed)]

        measured = adaptive.measure_arms(
            [(guarded(group, call), group[0].first_calls, guarded(group, judged))
             for group in groups], adaptive.plan(self.timing))
        for group, (_, stop) in zip(groups, measured):
            for timed in group:
                timed.stop = stop

    def finish(self, group):
        """An arm's result after its rounds, from its processes' (finish_process): the device
        and wall samples of them all, each process's in its call order (summarize), the
        findings of every process's boundary (a further one's named), and the first
        process's boundary with the further ones' counts added and their own boundaries in
        its "processes". Returns (result, findings)."""
        parts = [self.finish_process(timed) for timed in group]
        if len(parts) == 1:
            return parts[0]
        stop = group[0].stop
        findings = list(parts[0][1])
        for timed, (_, more) in zip(group[1:], parts[1:]):
            findings += [f"{timed.child.label}: {finding}" for finding in more]
        result = {}
        for basis in ("device", "wall"):
            summaries = [part[basis] for part, _ in parts]
            if any(summary is None for summary in summaries):
                result[basis] = None
                continue
            result[basis] = summarize([sample for summary in summaries
                                       for sample in summary["samples_ms"]], stop,
                                      [summary["calls"] for summary in summaries])
        boundary = dict(parts[0][0]["boundary"])
        others = [part["boundary"] for part, _ in parts[1:]]
        for key in ("windows", "verified_calls", "verification_failures"):
            boundary[key] = sum(int(item.get(key) or 0) for item in [boundary] + others)
        boundary["first_verification_failure"] = next(
            (item["first_verification_failure"] for item in [boundary] + others
             if item.get("first_verification_failure")), None)
        boundary["processes"] = others
        result["boundary"] = boundary
        return result, findings

    def finish_process(self, timed):
        """One process's part of an arm's result after its rounds: its device samples from
        the whole record, the findings of its boundary, the threads its child started.
        Returns (result, findings)."""
        child, findings, boundary = timed.child, timed.findings, timed.boundary
        threads_after = process_status(child.pid)["threads"]
        device = None
        if child.reader is not None:
            child.flush(self.call_seconds)
            discovery = device_record.call_summary(device_record.assign(
                child.records, child.windows)[0][timed.discovery_window])
            samples, arm_findings, details = device_record.analyse(
                child.records, child.windows, timed.timed_windows, discovery["kernels"])
            # records outside windows are judged once for the whole child (judge.finish)
            findings += [finding for finding in arm_findings if "outside" not in finding]
            boundary.update(details)
            boundary["discovery_names"] = discovery["names"][:64]
            if any(sample > 0 for sample in samples):
                device = summarize(samples, timed.stop)
        threads_before = timed.threads_before
        if threads_before is not None and threads_after is not None \
                and threads_after > threads_before:
            findings.append(f"the child started {threads_after - threads_before} thread(s) "
                            f"during its timed calls ({threads_before} before, "
                            f"{threads_after} after)")
        boundary.update({"threads_before": threads_before, "threads_after": threads_after,
                         "null_overhead_ms": timed.null,
                         "windows": len(child.windows) - timed.first_window,
                         "verified_calls": timed.verified,
                         "verification_failures": timed.failures,
                         "first_verification_failure": timed.first_failure})
        return {"device": device, "wall": summarize(timed.wall_samples, timed.stop),
                "boundary": boundary}, findings

    def seal(self, child, boundary):
        """No new process in the child from now on, checked through /proc, and no other
        process that holds the GPU beside the known ones."""
        before = process_status(child.pid)["seccomp_filters"]
        error = child.ask({"op": "seal"}, self.call_seconds).get("error")
        after = process_status(child.pid)["seccomp_filters"]
        findings = []
        child.sealed = not error and before is not None and after is not None and after > before
        boundary["sealed"] = child.sealed
        if not child.sealed:
            findings.append("the child could not be sealed against new processes"
                            + (f": {str(error)[:200]}" if error else
                               f" (seccomp filters {before} before, {after} after)"))
        return findings + self.judge.other_process_findings()
