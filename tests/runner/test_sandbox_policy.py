#!/usr/bin/env python3
"""The sandbox policy a candidate's process enters (kagent_runner/candidate.py,
sandbox_policy): on a GPU it may open its worker's GPU's device node only, where the worker
knows it (KAGENT_WORKER_GPU_NODE, set by `kagent worker --gpu N`); on the CPU, or where the
worker does not know it, no GPU node is singled out. A runner on the CPU, without its sandbox.
Prints TAP."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kagent_runner import candidate  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402


def policy(device, node):
    if node is None:
        os.environ.pop("KAGENT_WORKER_GPU_NODE", None)
    else:
        os.environ["KAGENT_WORKER_GPU_NODE"] = node
    owner = candidate.CandidateRunner(None, {"device": device, "sandbox_uid": 2147400003,
                                             "limits": {"max_processes": 64}})
    return owner.sandbox_policy("/scratch", "/cache")


@test
def a_gpu_candidate_gets_its_own_node():
    given = policy("cuda", "nvidia3")
    assert given["own_gpu_node"] == "nvidia3", given
    assert given["allow_gpu_devices"] == 1
    assert given["unprivileged_id"] == 2147400003 and given["max_processes"] == 64
    assert given["scratch_directory"] == "/scratch" and given["writable_paths"] == ["/cache"]


@test
def without_a_known_node_every_gpu_node_stays_open():
    assert policy("cuda", None)["own_gpu_node"] is None
    assert policy("cuda", "")["own_gpu_node"] is None


@test
def a_cpu_candidate_gets_no_gpu_node():
    given = policy("cpu", "nvidia3")
    assert given["own_gpu_node"] is None and given["allow_gpu_devices"] == 0


if __name__ == "__main__":
    sys.exit(tap.run())
