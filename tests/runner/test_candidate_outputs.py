#!/usr/bin/env python3
"""Where a timed child's outputs land (kagent_runner/candidate.py, spread_outputs): each
call's outputs stay allocated for the next calls, up to OUTPUT_SPREAD_CALLS calls and
OUTPUT_SPREAD_BYTES, so that a verdict's calls write to many places rather than one (issue
10); an output larger than the bound is let go at once, and a trial's release lets go of them
all. A candidate's runner on the CPU, without its channel or sandbox. Prints TAP."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from kagent_runner import candidate  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402


class Fresh(torch.nn.Module):
    """Allocates its output each call, as a candidate's forward does."""

    def __init__(self, elements):
        super().__init__()
        self.elements = elements

    def forward(self, x):
        return torch.empty(self.elements, dtype=torch.uint8) + x


def runner():
    return candidate.CandidateRunner(None, {"device": "cpu"})


def timed_calls(owner, model, count):
    """The output's address of each of count calls, as timed_call makes them."""
    addresses = []
    for _ in range(count):
        owner.spread_outputs()
        owner.forward(model, [torch.ones((), dtype=torch.uint8)])
        addresses.append(owner.last_output.data_ptr())
    return addresses


@test
def outputs_land_elsewhere_each_call():
    owner = runner()
    addresses = timed_calls(owner, Fresh(4 << 20), 40)
    kept = candidate.OUTPUT_SPREAD_CALLS
    assert kept >= 8, "a verdict's calls must write to many places, not a few"
    # any kept + 1 calls in a row wrote to as many places
    for start in range(len(addresses) - kept):
        window = addresses[start:start + kept + 1]
        assert len(set(window)) == len(window), (start, window)
    assert len(owner.earlier_outputs) == kept


@test
def bytes_bound_the_kept_outputs():
    owner = runner()
    timed_calls(owner, Fresh(24 << 20), 10)  # two fit under 64 MiB, a third does not
    sizes = [size for size, _ in owner.earlier_outputs]
    assert sizes == [24 << 20] * 2, sizes
    large = runner()
    timed_calls(large, Fresh(candidate.OUTPUT_SPREAD_BYTES + 1), 3)
    # one output over the bound is never kept: the next call may need its memory
    assert not large.earlier_outputs


@test
def a_trials_release_lets_go_of_them():
    owner = runner()
    timed_calls(owner, Fresh(1 << 20), 5)
    assert owner.earlier_outputs
    owner.release()
    assert not owner.earlier_outputs and owner.last_output is None


if __name__ == "__main__":
    sys.exit(tap.run())
