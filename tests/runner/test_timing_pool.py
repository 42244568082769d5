#!/usr/bin/env python3
"""Where the timed children read their inputs (kagent_runner/judge.py, give_pool): on a GPU
every timed child of one timing reads the same pool, so the arms read the same device memory
(issue 10: a pool's place moves the kernels that read it), and small inputs move between
regions of it from call to call; on the CPU each child has a file of its own; and the order
of the arms counts that one pool once. A judge with only the state
these steps use, on the CPU; the GPU's pool is a stand-in that records what it was asked.
Prints TAP."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from kagent_runner import harness, judge, tensors  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402

GIB = 1 << 30


class PoolJudge(judge.Judge):
    """The judge's pool steps on a problem of one 4x4 input, its messages kept."""

    def __init__(self, device, scratch):
        self.device = device
        self.request = {"scratch_directory": scratch}
        self.limits = {}
        self.timing_pool = None
        self.result = {"phase_seconds": {}}
        self.sent = []

    def make_problem_inputs(self, seed):
        return [torch.full((4, 4), float(seed))]

    def reference(self, inputs):
        return inputs[0] * 2

    def ask(self, message, timeout, pickled=False, channel=None, watch=None):
        self.sent.append((channel, message))
        return {"op": "ok"}


class DevicePool:
    """Stands in for tensors.InputPool on a GPU: counts its pools, shifts as the real one."""
    made = 0

    def __init__(self, inputs, device, scratch_directory):
        DevicePool.made += 1
        self.descriptors = [{"kind": "handle", "pool": DevicePool.made}]
        self.layout = [{"offset": 0}]
        self.region_bytes, self.regions = tensors.input_regions("cuda", 4 * 4 * 4)
        self.calls = 0

    next_shift = tensors.InputPool.next_shift


def timed_children(owner, labels):
    return [harness.TimedChild(owner, label, 100 + index, None, label)
            for index, label in enumerate(labels)]


@test
def on_a_gpu_every_timed_child_reads_one_pool():
    real, tensors.InputPool = tensors.InputPool, DevicePool
    try:
        with tempfile.TemporaryDirectory() as scratch:
            owner = PoolJudge("cuda", scratch)
            children = timed_children(owner, ("eager", "compile", "candidate"))
            before = DevicePool.made
            for child in children:
                owner.give_pool(child)
    finally:
        tensors.InputPool = real
    assert DevicePool.made == before + 1, DevicePool.made - before
    assert all(child.pool is owner.timing_pool for child in children)
    # each child was sent the one pool's descriptors, on its own channel
    assert [channel for channel, _ in owner.sent] == ["eager", "compile", "candidate"]
    assert all(message["op"] == "pool" and message["pool"] == owner.timing_pool.descriptors
               and "receive" not in message for _, message in owner.sent)
    # one shift sequence for every arm: no two calls in a row at the same address, nor in
    # the same 2 MiB region
    shifts = [child.pool.next_shift() for child in children * 2]
    assert shifts == [(2 << 20) * index + tensors.SHIFT_STEP * index for index in range(6)], \
        shifts


@test
def small_inputs_move_between_regions_large_ones_within_one():
    mib = 1 << 20
    # a 4 MiB input and its shift span: 6 MiB regions, as many as fit 64 MiB
    assert tensors.input_regions("cuda", 4 * mib) == (6 * mib, 10)
    # tiny inputs: the cap on regions
    assert tensors.input_regions("cuda", 64) == (2 * mib, tensors.INPUT_SPREAD_REGIONS)
    # too large for two regions in 64 MiB: one, so a 6.4 GB input costs no more memory
    assert tensors.input_regions("cuda", 40 * mib)[1] == 1
    assert tensors.input_regions("cuda", 6400 * mib)[1] == 1
    assert tensors.input_regions("cuda", 30 * mib - tensors.SHIFT_SPAN) == (30 * mib, 2)
    # nothing to place: no tensor inputs, or a CPU pool (a file per child)
    assert tensors.input_regions("cuda", 0) == (0, 1)
    assert tensors.input_regions("cpu", 4 * mib) == (0, 1)
    # every shift of a cycle keeps the inputs inside the pool, and each region is visited
    data = 4 * mib
    stride, regions = tensors.input_regions("cuda", data)
    pool_bytes = stride * (regions - 1) + data + tensors.SHIFT_SPAN
    shifts = [tensors.next_shift(call, stride, regions) for call in range(1000)]
    assert max(shifts) + data <= pool_bytes, (max(shifts), pool_bytes)
    assert {shift // stride for shift in shifts} == set(range(regions))
    assert len(set(shifts)) == 1000  # no address repeats within a verdict's call cap


@test
def a_cpu_pool_does_not_spread():
    with tempfile.TemporaryDirectory() as scratch:
        pool = tensors.InputPool([torch.ones(4, 4)], "cpu", scratch)
        assert pool.regions == 1
        assert pool.bytes == tensors.SHIFT_STEP + tensors.SHIFT_SPAN  # 64 B, aligned, and the span
        assert [pool.next_shift() for _ in range(3)] == [0, tensors.SHIFT_STEP,
                                                         2 * tensors.SHIFT_STEP]


@test
def on_the_cpu_each_timed_child_has_a_pool_file_of_its_own():
    with tempfile.TemporaryDirectory() as scratch:
        owner = PoolJudge("cpu", scratch)
        children = timed_children(owner, ("eager", "candidate"))
        children[0].scratch = os.path.join(scratch, "reference")
        os.mkdir(children[0].scratch)
        for child in children:
            owner.give_pool(child)
        assert owner.timing_pool is None
        assert children[0].pool is not children[1].pool
        paths = [message["pool"][0]["path"] for _, message in owner.sent]
        # each in the scratch folder of the child that reads it
        assert os.path.dirname(paths[0]) == children[0].scratch, paths
        assert os.path.dirname(paths[1]) == scratch, paths
        views = children[0].pool.load([torch.ones(4, 4)], 0)
        assert torch.equal(views[0], torch.ones(4, 4))
        assert not children[1].pool.tensor.any()  # the other child's file is untouched
        assert all("receive" in message for _, message in owner.sent)


@test
def interleaving_counts_the_pool_once():
    real = torch.cuda.mem_get_info
    torch.cuda.mem_get_info = lambda: (40 * GIB, 80 * GIB)  # a quarter: 10 GiB
    try:
        owner = PoolJudge("cuda", "/nonexistent")
        owner.result_input_bytes, owner.result_output_bytes = 6 * GIB, 1 * GIB
        # the pool once and three children's outputs: 9 GiB (a pool each would be 21 GiB)
        assert owner.interleaves(3)
        assert not owner.interleaves(5)  # 11 GiB
        owner.result_output_bytes = 2 * GIB
        assert owner.interleaves(2) and not owner.interleaves(3)  # 10 and 12 GiB
    finally:
        torch.cuda.mem_get_info = real
    assert PoolJudge("cpu", "/nonexistent").interleaves(3)  # on the CPU always


if __name__ == "__main__":
    sys.exit(tap.run())
