#!/usr/bin/env python3
"""The judge's harness (kagent_runner/harness.py) timing several arms together, with a fake
judge and fake timed children on the CPU (no sandbox, no device record): the rounds alternate
arm by arm, each child keeps its own windows, and a reference child that fails leaves the
rounds, ended at once, while the candidate's arm goes on; an arm timed in several processes
goes through them in blocks and its result is theirs together. Prints TAP."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kagent_runner import harness  # noqa: E402
from kagent_runner.problem import CandidateFailure  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402

# rounds of 10 calls; targets no interval meets, so every arm runs to its cap of 30 calls
TIMING = {"warmup_calls": 1, "min_calls": 10, "max_calls": 10, "call_cap": 30,
          "max_seconds": 30.0, "target_relative_ci": -1, "fine_relative_ci": -1}


class FakePool:
    def __init__(self):
        self.calls = 0

    def next_shift(self):
        self.calls += 1
        return 0

    def load(self, inputs, shift):
        return inputs


class FakeChild:
    """A timed child whose calls are logged in the judge's order; fails_at: how many calls
    (its warm-up call included) it answers before it fails."""

    def __init__(self, label, log, fails_at=None):
        self.label = label
        self.log = log
        self.fails_at = fails_at
        self.pid = os.getpid()
        self.reader = None
        self.record_error = "no device record descriptor"
        self.pool = FakePool()
        self.windows = []
        self.goes = 0
        self.ended = None

    def ask(self, message, timeout):
        if message["op"] == "go":
            self.goes += 1
            if self.fails_at is not None and self.goes > self.fails_at:
                raise CandidateFailure("crash", f"{self.label} ended")
            self.log.append(self.label)
        return {"op": "done"}


class FakeJudge:
    def __init__(self):
        self.device = "cpu"
        self.request = {"timing": TIMING}
        self.limits = {}
        self.secret = random.Random(3)

    def make_problem_inputs(self, seed):
        return [seed]

    def flush_l2(self):
        pass

    def synchronize(self):
        pass

    @staticmethod
    def end_child(child, kill=False):
        child.ended = "killed" if kill else "asked"


def timed_together(children):
    """Sets up every child's arm (all but the last as references), times them together, one
    process an arm."""
    harness_ = harness.Harness(FakeJudge())
    arms = [harness_.setup(child, child.label, reference=index < len(children) - 1)
            for index, child in enumerate(children)]
    harness_.measure([[arm] for arm in arms])
    return harness_, arms


@test
def rounds_alternate_in_reversed_order():
    log = []
    children = [FakeChild(label, log) for label in ("eager", "compile", "candidate")]
    harness_, arms = timed_together(children)
    # each arm's warm-up call, then rounds of 10: eager, compile, candidate, then candidate,
    # compile, eager (the candidate's two rounds back to back), then eager again
    assert log[:3] == ["eager", "compile", "candidate"]
    expected = ["eager"] * 10 + ["compile"] * 10 + ["candidate"] * 20 + ["compile"] * 10 + \
        ["eager"] * 20
    assert log[3:] == expected + ["compile"] * 10 + ["candidate"] * 10, log[3:]
    for arm in arms:
        result, _ = harness_.finish([arm])
        # every call in its own child's windows: the warm-up call and the timed ones
        assert result["boundary"]["windows"] == len(arm.child.windows) == \
            1 + result["wall"]["calls"]
        assert (arm.stop, result["wall"]["calls"]) == ("call_cap", 30)


@test
def a_failing_reference_leaves_and_the_candidate_goes_on():
    log = []
    eager = FakeChild("eager", log, fails_at=15)
    candidate = FakeChild("candidate", log)
    harness_, (eager_arm, candidate_arm) = timed_together([eager, candidate])
    assert eager_arm.stop == "left" and isinstance(eager_arm.failure, CandidateFailure)
    assert eager.ended == "killed" and candidate.ended is None
    assert len(eager_arm.wall_samples) == 14  # 15 calls, the warm-up one of them
    # eager 10, candidate 10 + 10, eager 4 and out; the candidate's third round alone
    assert log[1:] == ["candidate"] + ["eager"] * 10 + ["candidate"] * 20 + ["eager"] * 4 + \
        ["candidate"] * 10
    assert (candidate_arm.stop, len(candidate_arm.wall_samples)) == ("call_cap", 30)
    result, _ = harness_.finish([candidate_arm])
    assert result["wall"]["calls"] == len(candidate_arm.wall_samples)


@test
def the_candidates_failure_ends_the_rounds():
    log = []
    candidate = FakeChild("candidate", log, fails_at=5)
    try:
        timed_together([FakeChild("eager", log), candidate])
    except CandidateFailure as failure:
        assert "candidate ended" in failure.message
    else:
        raise AssertionError("the candidate's failure did not end the rounds")
    assert candidate.ended is None


def timed_in_processes(groups):
    """groups: each arm's children, its processes (the last arm the candidate's); sets each
    process up and times the arms together. Returns the harness and each arm's TimedArms."""
    harness_ = harness.Harness(FakeJudge())
    arms = [[harness_.setup(child, child.label.split("#")[0],
                            reference=index < len(groups) - 1) for child in children]
            for index, children in enumerate(groups)]
    harness_.measure(arms)
    return harness_, arms


@test
def an_arm_in_three_processes_goes_through_them_in_blocks():
    log = []
    eager = [FakeChild(f"eager#{index}", log) for index in range(3)]
    candidate = [FakeChild(f"candidate#{index}", log) for index in range(3)]
    harness_, (eager_arm, candidate_arm) = timed_in_processes([eager, candidate])
    # each process's warm-up call, then rounds of 10 calls in blocks of 4 (ceil(10 / 3)):
    # the block count runs on across rounds, so each process gets its turn in every round
    assert log[:6] == [child.label for child in eager + candidate]
    assert log[6:16] == ["eager#0"] * 4 + ["eager#1"] * 4 + ["eager#2"] * 2
    assert log[16:26] == ["candidate#0"] * 4 + ["candidate#1"] * 4 + ["candidate#2"] * 2
    for group, children in ((eager_arm, eager), (candidate_arm, candidate)):
        assert all(timed.stop == "call_cap" for timed in group)
        result, findings = harness_.finish(group)
        wall = result["wall"]
        counts = [len(timed.wall_samples) for timed in group]
        assert wall["calls"] == sum(counts) == 30 and wall["processes"] == 3
        assert wall["process_calls"] == counts and all(count >= 8 for count in counts)
        # each process's samples in its own call order, process after process
        assert wall["samples_ms"] == [sample for timed in group
                                      for sample in timed.wall_samples]
        assert len(wall["process_medians_ms"]) == 3
        # every process's windows counted: a warm-up call and its timed calls each
        assert result["boundary"]["windows"] == sum(len(child.windows) for child in children) \
            == 33
        assert len(result["boundary"]["processes"]) == 2 and findings == []


@test
def one_failing_process_ends_its_whole_reference_arm():
    log = []
    eager = [FakeChild("eager#0", log), FakeChild("eager#1", log, fails_at=3),
             FakeChild("eager#2", log)]
    candidate = [FakeChild(f"candidate#{index}", log) for index in range(2)]
    harness_, (eager_arm, candidate_arm) = timed_in_processes([eager, candidate])
    assert all(timed.stop == "left" and isinstance(timed.failure, CandidateFailure)
               for timed in eager_arm)
    assert [child.ended for child in eager] == ["killed"] * 3
    assert all(child.ended is None for child in candidate)
    result, _ = harness_.finish(candidate_arm)
    assert result["wall"]["calls"] == 30 and result["wall"]["process_calls"] == [15, 15]


if __name__ == "__main__":
    sys.exit(tap.run())
