#!/usr/bin/env python3
"""Which device a request runs on in the worker (kagent_runner/worker.py, place_on_device): a
request names its GPU as kagent numbers them (gpu_index: the timing lock, sandbox uid and
timing window are that GPU's), while a worker started for one GPU (kagent worker --gpu N)
sees only that GPU, as its device 0. GPU 1 of a two-GPU machine once failed every session
with "invalid device ordinal" (issue 16's first run). Prints TAP for meson."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
from tap import test  # noqa: E402

from kagent_runner import worker  # noqa: E402


@test
def a_worker_for_one_gpu_runs_that_gpu_as_its_device_zero():
    request = {"device": "cuda", "gpu_index": 1}
    assert worker.place_on_device(request, "1") is None
    assert request["device_ordinal"] == 0, request


@test
def a_worker_that_sees_every_gpu_numbers_them_as_the_request_does():
    request = {"device": "cuda", "gpu_index": 3}
    assert worker.place_on_device(request, None) is None
    assert request["device_ordinal"] == 3, request


@test
def a_worker_for_one_gpu_refuses_a_request_for_another():
    request = {"device": "cuda", "gpu_index": 0}
    why = worker.place_on_device(request, "1")
    assert why == "this worker serves GPU 1, not GPU 0", why
    assert "device_ordinal" not in request


@test
def a_gpu_index_that_is_no_gpu_number_is_refused():
    for bad in ("1", -1, True, 1.5, None):
        why = worker.place_on_device({"device": "cuda", "gpu_index": bad}, None)
        assert why is not None and "is not a GPU number" in why, (bad, why)


@test
def a_served_gpu_that_is_no_gpu_number_refuses_every_gpu_request():
    why = worker.place_on_device({"device": "cuda", "gpu_index": 0}, "first")
    assert why == "this worker's KAGENT_WORKER_GPU 'first' is not a GPU number", why


@test
def the_cpu_has_one_device_whatever_the_worker_serves():
    request = {"device": "cpu", "gpu_index": 5}
    assert worker.place_on_device(request, "1") is None
    assert request["device_ordinal"] == 0, request


@test
def the_protocol_answers_a_misplaced_request_with_an_error_and_its_id():
    served = worker.SERVED_GPU
    worker.SERVED_GPU = "1"
    try:
        answer = worker.handle(json.dumps({"type": "check_problem", "id": "r7", "device": "cuda",
                                           "gpu_index": 0, "problem_path": "/nonexistent",
                                           "scratch_directory": "/nonexistent"}))
    finally:
        worker.SERVED_GPU = served
    assert answer == {"type": "error", "id": "r7",
                      "message": "this worker serves GPU 1, not GPU 0"}, answer


if __name__ == "__main__":
    sys.exit(tap.run())
