"""One timing harness for every arm (docs/verdict.md, "One harness").

Eager PyTorch, torch.compile and the candidate are each timed here, the same way, in the same
kind of sandboxed child (candidate.py): fresh inputs copied into a pool the judge owns at a new
shift for every call, an L2 flush and a reset of persisting L2 lines by the judge, then the
judge's clock around a go/done exchange. Per call the primary measure is device time, the
union of the intervals of every kernel, memcpy and memset the child's process ran, from its
device record (device_record.py); wall time (the judge's clock, less the null round trip) is
the secondary one. Both go into the result with every sample.
"""
import statistics

from . import adaptive, compare, device_record
from .processes import process_status


def summarize(samples_ms, stop=None):
    """The summary of one basis's per-call times, with the times themselves in call order
    (samples_ms): kagent computes the median's confidence interval from them. stop says why
    the adaptive repetitions ended (adaptive.stop_reason)."""
    ordered = sorted(samples_ms)
    count = len(ordered)

    def quantile(fraction):
        return ordered[min(count - 1, max(0, int(round(fraction * (count - 1)))))]

    return {"calls": count, "median_ms": statistics.median(ordered), "min_ms": ordered[0],
            "max_ms": ordered[-1], "p10_ms": quantile(0.1), "p90_ms": quantile(0.9),
            "mean_ms": statistics.fmean(ordered),
            "stdev_ms": statistics.stdev(ordered) if count > 1 else 0.0,
            "samples_ms": list(samples_ms), "stop": stop}


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

    # -- one arm ---------------------------------------------------------------------------
    def time_arm(self, child, arm, first_calls=None, verify_calls=0, seal=False):
        """Times `arm` of `child`: warm-up calls (the last is the discovery call), the null
        round trip, the seal (for the candidate), then adaptive rounds. Returns (result,
        findings): result {"device": summary or None, "wall": summary, "boundary": ...}."""
        judge = self.judge
        base = judge.secret.randrange(1 << 30)
        findings = []
        boundary = {"record": None if child.reader is not None else child.record_error}
        estimates = []
        first_window = len(child.windows)
        for index in range(self.warmup):
            wall, _, _ = self.call(child, arm, base + index, first=index == 0)
            estimates.append(wall)
        discovery_window = len(child.windows) - 1
        nulls = [self.call(child, arm, 0, null=True)[0] for _ in range(max(5, self.warmup))]
        null = statistics.median(nulls)
        if seal:
            findings += self.seal(child, boundary)
        threads_before = process_status(child.pid)["threads"]
        estimate = max(min(estimates) / 1e3 if estimates else 1e-3, 1e-6)
        if first_calls is None:
            first_calls = int(min(max(
                round(float(self.timing.get("target_seconds", 0.1)) / estimate),
                int(self.timing.get("min_calls", 10))), int(self.timing.get("max_calls", 100))))
        verify_probability = min(1.0, verify_calls / max(1, first_calls))
        timed_windows, wall_samples = [], []
        failures = verified = 0
        first_failure = None

        def one(index):
            nonlocal failures, verified, first_failure
            verify = verify_calls > 0 and judge.secret.random() < verify_probability
            wall, reply, expected = self.call(child, arm, base + self.warmup + index, verify)
            timed_windows.append(len(child.windows) - 1)
            if verify:
                verified += 1
                reason = self.check(child, reply, expected)
                if reason is not None:
                    failures += 1
                    first_failure = first_failure or reason
            sample = max(wall - null, 1e-6)
            wall_samples.append(sample)
            return sample

        def device_so_far():
            # the stop rule looks at the primary basis: flush and read the record per round
            if child.reader is None:
                return wall_samples
            child.flush(self.call_seconds)
            samples, _, _ = device_record.analyse(child.records, child.windows, timed_windows,
                                                  0)
            return samples

        _, stop = adaptive.measure(one, first_calls, adaptive.plan(self.timing),
                                   judge_samples=device_so_far)
        threads_after = process_status(child.pid)["threads"]
        device = None
        if child.reader is not None:
            child.flush(self.call_seconds)
            discovery = device_record.call_summary(device_record.assign(
                child.records, child.windows)[0][discovery_window])
            samples, arm_findings, details = device_record.analyse(
                child.records, child.windows, timed_windows, discovery["kernels"])
            # records outside windows are judged once for the whole child (judge.finish)
            findings += [finding for finding in arm_findings if "outside" not in finding]
            boundary.update(details)
            boundary["discovery_names"] = discovery["names"][:64]
            if any(sample > 0 for sample in samples):
                device = summarize(samples, stop)
        if threads_before is not None and threads_after is not None \
                and threads_after > threads_before:
            findings.append(f"the child started {threads_after - threads_before} thread(s) "
                            f"during its timed calls ({threads_before} before, "
                            f"{threads_after} after)")
        boundary.update({"threads_before": threads_before, "threads_after": threads_after,
                         "null_overhead_ms": null, "windows": len(child.windows) - first_window,
                         "verified_calls": verified, "verification_failures": failures,
                         "first_verification_failure": first_failure})
        return {"device": device, "wall": summarize(wall_samples, stop),
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
