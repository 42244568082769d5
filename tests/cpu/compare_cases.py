#!/usr/bin/env python3
"""Unit tests of the runner's output comparison (sandbox/runner/kagent_runner/compare.py),
in TAP: tolerances, the norm-relative check, NaN and Inf, integers, complex numbers, first
mismatch indices, and that the fast path agrees with the exact one. Needs torch."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.environ["KAGENT_SOURCE_DIR"], "sandbox", "runner"))
try:
    import torch
except ImportError:
    if os.environ.get("KAGENT_REQUIRE_TORCH") == "1":
        print("1..1\nnot ok 1 - torch is importable")
        sys.exit(1)
    print("1..0 # SKIP no torch in this Python")
    sys.exit(0)

from kagent_runner import compare, tensors  # noqa: E402

FLOAT32 = {"atol": 1e-2, "rtol": 1e-2, "norm": 2e-3}
TESTS = []


def test(function):
    TESTS.append(function)
    return function


@test
def identical_outputs_pass():
    reference = torch.rand(100, 37)
    metrics = compare.compare_tensors(reference, reference.clone(), FLOAT32)
    assert metrics["passed"] and metrics["max_abs"] == 0 and metrics["norm_rel"] == 0


@test
def the_comparison_never_changes_its_arguments():
    reference = torch.rand(64, 64)
    candidate = reference + 1e-3
    before = candidate.clone()
    compare.compare_tensors(reference, candidate, FLOAT32)
    assert torch.equal(candidate, before)


@test
def near_zero_outputs_fail_on_the_norm():
    reference = torch.full((4, 131072), 2.5e-6)
    metrics = compare.compare_tensors(reference, torch.zeros_like(reference), FLOAT32)
    assert not metrics["passed"] and metrics["mismatch_fraction"] == 0
    assert math.isclose(metrics["norm_rel"], 1.0) and "norm-relative" in metrics["reason"]


@test
def an_element_outside_tolerance_fails_with_its_index():
    reference = torch.rand(8, 16)
    candidate = reference.clone()
    candidate[3, 5] += 1.0
    candidate[6, 1] += 1.0
    metrics = compare.compare_tensors(reference, candidate, FLOAT32)
    assert not metrics["passed"] and metrics["first_mismatch"] == [3, 5]
    assert math.isclose(metrics["mismatch_fraction"], 2 / 128)
    assert metrics["max_abs"] >= 1.0 - 1e-6


@test
def nan_never_passes_where_the_reference_is_finite():
    reference = torch.rand(10, 10)
    candidate = reference.clone()
    candidate[2, 2] = float("nan")
    metrics = compare.compare_tensors(reference, candidate, FLOAT32)
    assert not metrics["passed"] and metrics["nonfinite"] == 1
    assert metrics["first_mismatch"] == [2, 2]


@test
def infinity_never_passes_where_the_reference_is_finite():
    reference = torch.rand(10)
    candidate = reference.clone()
    candidate[7] = float("inf")
    metrics = compare.compare_tensors(reference, candidate, FLOAT32)
    assert not metrics["passed"] and metrics["nonfinite"] == 1


@test
def the_same_non_finite_values_as_the_reference_pass():
    reference = torch.rand(10)
    reference[1] = float("nan")
    reference[2] = float("-inf")
    metrics = compare.compare_tensors(reference, reference.clone(), FLOAT32)
    assert metrics["passed"], metrics


@test
def integers_must_be_equal():
    reference = torch.arange(100)
    candidate = reference.clone()
    assert compare.compare_tensors(reference, candidate, FLOAT32)["passed"]
    candidate[50] += 1
    metrics = compare.compare_tensors(reference, candidate, FLOAT32)
    assert not metrics["passed"] and metrics["first_mismatch"] == [50]


@test
def booleans_must_be_equal():
    reference = torch.rand(32) > 0.5
    candidate = reference.clone()
    candidate[0] = ~candidate[0]
    assert not compare.compare_tensors(reference, candidate, FLOAT32)["passed"]


@test
def complex_outputs_compare_their_parts():
    reference = torch.randn(16, dtype=torch.complex64)
    assert compare.compare_tensors(reference, reference.clone(), FLOAT32)["passed"]
    candidate = reference.clone()
    candidate[4] = candidate[4] + 1j
    metrics = compare.compare_tensors(reference, candidate, FLOAT32)
    assert not metrics["passed"] and metrics["first_mismatch"] == [4]


@test
def half_precision_is_compared_in_float32():
    reference = torch.rand(256).half()
    candidate = (reference.float() + 1e-4).half()
    tolerance = {"atol": 1e-2, "rtol": 1e-2, "norm": 5e-3}
    assert compare.compare_tensors(reference, candidate, tolerance)["passed"]


@test
def the_fast_and_exact_paths_agree_on_passing_outputs():
    reference = torch.randn(1000)
    candidate = reference + torch.randn(1000) * 1e-4
    fast = compare._compare_fast(reference, candidate, FLOAT32)
    exact = compare._compare_exact(reference, candidate, FLOAT32)
    for key in ("max_abs", "max_rel", "norm_rel"):
        assert math.isclose(fast[key], exact[key], rel_tol=1e-5, abs_tol=1e-12), key
    assert fast["passed"] == exact["passed"]


@test
def empty_tensors_pass():
    assert compare.compare_tensors(torch.empty(0, 3), torch.empty(0, 3), FLOAT32)["passed"]


@test
def scalars_compare_by_kind():
    assert compare.compare_scalar(3, 3, FLOAT32)["passed"]
    assert not compare.compare_scalar(3, 4, FLOAT32)["passed"]
    assert compare.compare_scalar(1.0, 1.001, FLOAT32)["passed"]
    assert not compare.compare_scalar(1.0, "nan", FLOAT32)["passed"]


@test
def flatten_names_every_leaf():
    leaves = compare.flatten((torch.zeros(1), [torch.ones(2), 3], None))
    assert [path for path, _ in leaves] == ["output[0]", "output[1][0]", "output[1][1]",
                                           "output[2]"]


def _with_chunk(elements, function):
    os.environ["KAGENT_JUDGE_CHUNK_ELEMENTS"] = str(elements)
    try:
        return function()
    finally:
        del os.environ["KAGENT_JUDGE_CHUNK_ELEMENTS"]


@test
def chunked_comparison_gives_the_same_metrics():
    torch.manual_seed(3)
    reference = torch.randn(40, 97)
    passing = reference + torch.randn(40, 97) * 1e-4
    failing = passing.clone()
    failing[17, 5] += 1.0
    failing[31, 90] = float("nan")
    for candidate in (passing, failing):
        whole = compare.compare_tensors(reference, candidate, FLOAT32)
        chunked = _with_chunk(64, lambda: compare.compare_tensors(reference, candidate, FLOAT32))
        for key in ("max_abs", "max_rel", "norm_rel"):
            assert math.isclose(whole[key], chunked[key], rel_tol=1e-6, abs_tol=1e-12), key
        for key in ("passed", "mismatch_fraction", "first_mismatch", "nonfinite"):
            assert whole[key] == chunked[key], key
    assert chunked["first_mismatch"] == [17, 5] and chunked["nonfinite"] == 1


@test
def a_broadcast_zero_is_compared_without_materialising_it():
    reference = torch.full((8, 4096), 2.5e-6)
    zero = torch.zeros((), dtype=reference.dtype).expand(reference.shape)
    metrics = _with_chunk(1000, lambda: compare.compare_tensors(reference, zero, FLOAT32))
    assert not metrics["passed"] and math.isclose(metrics["norm_rel"], 1.0)
    assert compare._flat(zero).stride() == (0,)


@test
def the_input_fingerprint_catches_one_changed_element():
    torch.manual_seed(5)
    inputs = [torch.rand(300, 301), torch.randint(0, 9, (5,), dtype=torch.int8), 4,
              torch.rand(7, dtype=torch.float16)]
    fingerprint = tensors.Fingerprint(20260101)
    before = _with_chunk(256, lambda: fingerprint(inputs))
    copies = [value.clone() if isinstance(value, torch.Tensor) else value for value in inputs]
    assert _with_chunk(256, lambda: fingerprint(copies)) == before
    for index, position in ((0, 45_000), (1, 4), (3, 6)):
        changed = [value.clone() if isinstance(value, torch.Tensor) else value for value in inputs]
        flat = changed[index].view(-1)
        if flat.is_floating_point():  # the smallest change there is: one unit in the last place
            flat[position] = torch.nextafter(flat[position], torch.tensor(2.0, dtype=flat.dtype))
        else:
            flat[position] += 1
        assert _with_chunk(256, lambda: fingerprint(changed)) != before, index
    # in place on many elements: abs_ of float64 flips sign bits only, two chunks swapped
    signed = torch.randn(2048, dtype=torch.float64)
    assert fingerprint([signed]) != fingerprint([signed.abs()])
    swapped = inputs[0].clone().view(-1)
    swapped[:256], swapped[256:512] = inputs[0].view(-1)[256:512], inputs[0].view(-1)[:256]
    assert _with_chunk(256, lambda: fingerprint([swapped.view(300, 301)])) != before[:1]


def main():
    print(f"1..{len(TESTS)}")
    failures = 0
    for number, function in enumerate(TESTS, 1):
        try:
            function()
            print(f"ok {number} - {function.__name__}")
        except Exception as error:  # noqa: BLE001 - every failure is reported
            failures += 1
            print(f"not ok {number} - {function.__name__}\n# {type(error).__name__}: {error}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
