#!/usr/bin/env python3
"""How many processes time each arm (docs/verdict.md, "Processes per arm"): the worker's count
before anything is known (kagent_runner/worker.py, _timing_processes: none more where the cached
eager calls are long), and the judge's after the trials (kagent_runner/judge.py): a further
process that did not load is left out and named, long reference calls or too little device
memory end the further processes on a GPU (on the CPU a count asked for holds), and every arm
keeps as many as the arm with fewest. A judge
with only the state these steps use, its further processes stand-ins. Prints TAP."""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from kagent_runner import handover, judge, worker  # noqa: E402
from kagent_runner.channel import ChannelClosed  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402

MIB = 1 << 20


class FakeChannel:
    """A further process's channel: answers with `message`, or raises it."""

    def __init__(self, message):
        self.message = message

    def receive(self, timeout=None, watch=None):
        if isinstance(self.message, Exception):
            raise self.message
        return self.message


class FakeProcess:
    def __init__(self, label, message=None):
        self.label = label
        self.channel = FakeChannel(message or {"op": "ready", "arms": ["candidate"]})
        self.ended = None


class ProcessJudge(judge.Judge):
    """The judge's steps that choose the processes, on `device`, each arm's further processes
    given; the reference's eager child (and compile's, with `compile`) stand-ins too."""

    def __init__(self, device, candidate, eager, compile=False, request=None):
        self.device = device
        self.request = dict(request or {"timing": {"processes": 3}})
        self.limits = {}
        self.references = {"eager": object()}
        if compile:
            self.references["compile"] = object()
        self.extra_processes = {"candidate": list(candidate), "eager": list(eager)}
        self.processes_per_arm = {"candidate": 1, "eager": 1, "compile": 1, "dropped": []}
        self.result_input_bytes = 4 * MIB
        self.result_output_bytes = 4 * MIB

    @staticmethod
    def end_child(child, kill=False):
        child.ended = "killed" if kill else "asked"


def processes(labels, **messages):
    return [FakeProcess(label, messages.get(label)) for label in labels]


@test
def a_further_process_that_did_not_load_is_left_out_and_named():
    candidate = processes(["candidate_process1", "candidate_process2"],
                          candidate_process2={"op": "error", "message": "ImportError: no"})
    eager = processes(["eager_process1", "eager_process2"],
                      eager_process1=ChannelClosed("gone"))
    owner = ProcessJudge("cpu", candidate, eager)
    owner.wait_for_extra_processes()
    assert [child.label for child in owner.extra_processes["candidate"]] == [
        "candidate_process1"]
    assert [child.label for child in owner.extra_processes["eager"]] == ["eager_process2"]
    dropped = owner.processes_per_arm["dropped"]
    assert len(dropped) == 2 and "candidate_process2: ImportError: no" in dropped, dropped
    assert any(item.startswith("eager_process1: ChannelClosed") for item in dropped), dropped
    assert candidate[1].ended == "killed" and eager[0].ended == "killed"
    assert candidate[0].ended is None and eager[1].ended is None


@test
def short_calls_keep_every_process_and_each_arm_as_many_as_the_fewest():
    candidate = processes(["candidate_process1", "candidate_process2"])
    eager = processes(["eager_process2"])
    owner = ProcessJudge("cpu", candidate, eager)
    owner.trim_timing_processes(0.02)
    counts = owner.processes_per_arm
    assert (counts["candidate"], counts["eager"]) == (2, 2), counts
    # left out without a reason: it loaded, and the arms keep one count
    assert candidate[1].ended == "killed" and counts["dropped"] == []
    assert counts["reference_call_ms"] == 0.02


@test
def on_a_gpu_long_calls_end_every_further_process():
    candidate = processes(["candidate_process1", "candidate_process2"])
    eager = processes(["eager_process1", "eager_process2"])
    owner = ProcessJudge("cuda", candidate, eager,
                         request={"timing": {"processes": 3, "processes_below_ms": 0.5}})
    real = torch.cuda.mem_get_info
    torch.cuda.mem_get_info = lambda *args: (80 << 30, 80 << 30)
    try:
        owner.trim_timing_processes(0.5)
    finally:
        torch.cuda.mem_get_info = real
    assert (owner.processes_per_arm["candidate"], owner.processes_per_arm["eager"]) == (1, 1)
    assert all(child.ended == "killed" for child in candidate + eager)


@test
def on_the_cpu_the_count_asked_for_holds_whatever_the_calls():
    candidate = processes(["candidate_process1"])
    eager = processes(["eager_process1"])
    owner = ProcessJudge("cpu", candidate, eager)
    owner.trim_timing_processes(50.0)
    assert (owner.processes_per_arm["candidate"], owner.processes_per_arm["eager"]) == (2, 2)
    assert candidate[0].ended is None and eager[0].ended is None


@test
def on_a_gpu_the_processes_must_fit_beside_the_pool():
    candidate = processes(["candidate_process1", "candidate_process2"])
    eager = processes(["eager_process1", "eager_process2"])
    owner = ProcessJudge("cuda", candidate, eager, compile=True)
    real = torch.cuda.mem_get_info
    # a quarter of what is free (INTERLEAVE_SHARE) holds the pool and 5 outputs of 4 MiB:
    # two processes an arm and compile's one, not three an arm and compile's (7 outputs)
    torch.cuda.mem_get_info = lambda *args: (4 * (4 + 5 * 4) * MIB, 80 << 30)
    try:
        owner.trim_timing_processes(0.01)
    finally:
        torch.cuda.mem_get_info = real
    assert (owner.processes_per_arm["candidate"], owner.processes_per_arm["eager"]) == (2, 2)
    assert [child.ended for child in candidate + eager] == [None, "killed", None, "killed"]


@test
def the_worker_forks_none_more_where_cached_eager_calls_are_long():
    def request(processes=3, eager_ms=None, below=None):
        timing = {"processes": processes}
        if below is not None:
            timing["processes_below_ms"] = below
        baselines = None if eager_ms is None else {
            "eager": {"device": {"median_ms": eager_ms}, "wall": {"median_ms": 1.0}}}
        return {"timing": timing, "baselines": baselines}

    assert worker._timing_processes(request()) == 3  # no cache: the judge decides
    assert worker._timing_processes(request(eager_ms=0.003)) == 3
    assert worker._timing_processes(request(eager_ms=3.0)) == 1
    assert worker._timing_processes(request(eager_ms=0.3, below=1.0)) == 3
    assert worker._timing_processes(request(processes=9)) == worker.MAX_TIMING_PROCESSES
    assert worker._timing_processes(request(processes="many")) == 1
    assert worker._timing_processes({"timing": {}}) == 1
    # on the CPU (a cached baseline with wall time only) the count asked for holds
    cpu = {"timing": {"processes": 2}, "baselines": {"eager": {"device": None,
                                                               "wall": {"median_ms": 50.0}}}}
    assert worker._timing_processes(cpu) == 2


class ReferenceJudge(judge.Judge):
    """The judge's reference calls on the CPU (wall time), each call taking the next of
    `seconds` (a slow first call, as a busy host's)."""

    def __init__(self, seconds):
        self.device = "cpu"
        self.request = {"timing": {"processes_below_ms": 0.1}}
        self.result_inputs = [torch.ones(4)]
        self.result_inputs[0] * 2  # torch's first operation is slow: not the calls' time
        self.seconds = list(seconds)
        self.calls = 0

    def synchronize(self):
        pass

    def reference(self, inputs):
        self.calls += 1
        deadline = time.monotonic() + self.seconds.pop(0)
        while time.monotonic() < deadline:
            pass
        return inputs[0] * 2


@test
def the_reference_call_is_the_quickest_of_three_unless_clearly_long():
    # one slow call (0.3 ms, under ten times the 0.1 ms rule) is tried again: the quickest
    # decides, so a hiccup does not leave a short call's arms in one process each
    owner = ReferenceJudge([0.0003, 0.00002, 0.00002])
    quickest = owner.reference_call_ms()
    assert owner.calls == 3 and quickest < 0.25, (owner.calls, quickest)
    assert owner.result_output_bytes == 16
    # a call of 1 ms or more is long whatever the others take: not repeated
    owner = ReferenceJudge([0.0015, 0.00002, 0.00002])
    quickest = owner.reference_call_ms()
    assert owner.calls == 1 and quickest >= 1.0, (owner.calls, quickest)


@test
def the_kept_judge_receives_every_descriptor_of_the_most_processes_an_arm():
    """An evaluation's own nine descriptors (the judge's socket, result and error pipes, the
    candidate's record and gate, the eager and compile children's sockets and records) and
    two for each of both arms' further processes all reach the kept judge in one message:
    a receiver that takes fewer loses the rest without an error."""
    count = 9 + 2 * 2 * (worker.MAX_TIMING_PROCESSES - 1)
    pairs = [socket.socketpair() for _ in range(count)]
    sender, receiver = socket.socketpair()
    try:
        handover.send(sender, {"op": "evaluate"},
                      {f"end{index}": pair[0] for index, pair in enumerate(pairs)})
        message, fds = handover.receive(receiver)
        assert len(message["fds"]) == count and sorted(fds) == sorted(message["fds"]), \
            (count, len(fds))
        os.write(fds["end0"], b"through")
        assert pairs[0][1].recv(16) == b"through"
        for fd in fds.values():
            os.close(fd)
        # one more is refused by the sender, not lost by the receiver
        extra = dict({f"end{index}": pair[0] for index, pair in enumerate(pairs)},
                     more=sender)
        while len(extra) <= handover.MAX_FDS:
            extra[f"again{len(extra)}"] = pairs[0][0]
        try:
            handover.send(sender, {"op": "evaluate"}, extra)
        except ValueError as error:
            assert "descriptors in one message" in str(error), error
        else:
            raise AssertionError("a message of too many descriptors was sent")
    finally:
        for item in [sender, receiver] + [end for pair in pairs for end in pair]:
            item.close()


if __name__ == "__main__":
    sys.exit(tap.run())
