#!/usr/bin/env python3
"""The GPU suite: `kagent eval` on a real GPU against Triton and CUDA candidates written for
these tests, including one for every known trick (zeros within an absolute tolerance, output
caching by pointer, an unjoined side stream, a rigged tensor subclass, copying non-negative
inputs, torch-only or fallback forwards, timer patching, stale memory, input mutation) and
every fault (illegal address, a kernel that never ends, out of memory, os._exit, a fork bomb).
Run on the GPU machine: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/gpu/eval_cases.py
(KAGENT_SUITE_GPU=N runs it on GPU N, its worker serving that GPU alone).
Prints TAP and a closing `N passed, N failed` line."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from eval_suite import Case, Suite  # noqa: E402


def honest_relu(verdict):
    problems = []
    speedup = verdict["timing"]["speedup_vs_eager"]
    if not 0.5 <= speedup <= 2.0:
        problems.append(f"a memory-bound ReLU cannot be {speedup:.2f}x eager")
    if verdict["kernels"]["own_share"] < 0.9:
        problems.append(f"own kernel share {verdict['kernels']['own_share']:.2f}")
    if not (verdict.get("credit") or {}).get("credited"):
        problems.append(f"an own ReLU kernel must be credited: {verdict.get('credit')}")
    return problems


def library_work_not_credited(verdict):
    credit = verdict.get("credit") or {}
    problems = []
    if credit.get("credited") is not False:
        problems.append(f"the speedup of torch's attention kernel was credited: {credit}")
    if not (credit.get("own_share") or 0) < 0.05:
        problems.append(f"own share {credit.get('own_share')} should be negligible")
    return problems


def side_stream_timed(verdict):
    # four launches on a side stream: the device record sees them all
    speedup = verdict["timing"]["speedup_vs_eager"]
    return [] if speedup < 0.8 else [f"side-stream work was not timed: {speedup:.2f}x eager"]


def device_basis(verdict):
    """Verdict v2: device time is the basis on a GPU, with the boundary sealed and every
    record inside the calls."""
    timing = verdict["timing"]
    boundary = timing.get("boundary") or {}
    problems = []
    if timing.get("basis") != "device":
        problems.append(f"basis {timing.get('basis')}: {timing.get('basis_note')}")
    if not boundary.get("sealed"):
        problems.append(f"not sealed: {boundary}")
    if boundary.get("outside") or boundary.get("mismatched_calls"):
        problems.append(f"boundary findings on an honest candidate: {boundary.get('findings')}")
    return problems


def first_call_gated(verdict):
    """The first trial call ran without the timing lock until its first device work, when the
    candidate's device gate asked the judge for it (device_gate.py)."""
    unlocked = (verdict.get("phase_seconds") or {}).get("first_call_unlocked")
    return [] if isinstance(unlocked, (int, float)) and unlocked > 0 else [
        f"the first call did not go through the device gate: {verdict.get('phase_seconds')}"]


def mixed_share(verdict):
    share = verdict["kernels"]["own_share"]
    return [] if 0.0 < share < 0.9 else [f"own share {share:.2f} should be partial"]


CASES = [
    Case("relu", "triton_relu", "correct",
         check=lambda verdict: honest_relu(verdict) + device_basis(verdict)
         + first_call_gated(verdict)),
    Case("relu", "torch_only_relu", "rejected", "no_own_kernel"),
    Case("relu", "triton_fallback_relu", "rejected", "no_own_kernel"),
    Case("relu", "inherits_reference", "rejected", "no_own_kernel"),
    Case("relu", "triton_relu_plus_torch", "correct", check=mixed_share),
    Case("relu", "triton_relu_side_stream", "correct", check=side_stream_timed),
    Case("attention", "triton_empty_plus_sdpa", "correct", check=library_work_not_credited),
    Case("relu", "triton_relu_pointer_cache", "incorrect", "output_mismatch"),
    Case("relu", "triton_relu_identity", "incorrect", "output_mismatch", "signed"),
    Case("relu", "triton_relu_in_place", "incorrect", "input_mutation"),
    Case("relu", "triton_stale_memory", "incorrect"),
    Case("relu", "triton_relu_subclass", "incorrect", needle="subclass"),
    Case("relu", "triton_relu_timer_patch", "rejected", "timer_tampering"),
    # the sealed boundary: a kernel launched from a thread after the timed call ended
    Case("relu", "triton_relu_deferred_thread", "rejected"),
    Case("softmax_wide", "triton_softmax_zeros", "incorrect", "output_mismatch", "norm-relative"),
    Case("matmul", "triton_matmul_fp16", "incorrect", "output_mismatch"),
    Case("relu", "triton_illegal_address", "runtime_error", needle="illegal"),
    Case("relu", "triton_relu", "correct"),
    Case("relu", "triton_endless", "timeout"),
    Case("relu", "triton_relu", "correct"),
    Case("relu", "triton_out_of_memory", "runtime_error", needle="memory"),
    Case("relu", "triton_relu", "correct"),
    Case("relu", "triton_exit_zero", "crashed"),
    Case("relu", "triton_fork_bomb", "runtime_error"),
    # on a host of several GPUs, the sandbox leaves the candidate its own GPU's node only
    Case("relu", "triton_relu_other_gpus", "correct"),
    Case("relu", "triton_relu", "correct"),
    Case("relu", "cuda_relu_load_inline", "correct", check=honest_relu),
    Case("relu", "kagent_cuda_relu", "correct", check=honest_relu),
    Case("relu", "kagent_cuda_missing_kernel", "compile_error", needle="relu_kernel' not found"),
    Case("relu", "kagent_cuda_wrong_arguments", "runtime_error", needle="takes 3 arguments"),
    Case("relu", "kagent_cuda_block_too_large", "runtime_error", needle="block x dimension 2048"),
]


def profile_relu(verdict):
    problems = []
    reference = (verdict.get("reference_kernels") or {}).get("launches") or []
    candidate = (verdict.get("kernels") or {}).get("launches") or []
    if not reference:
        problems.append("no reference kernels")
    own = [launch for launch in candidate if launch.get("own")]
    if not own:
        problems.append("no own candidate kernel")
    for launch in own:
        for key in ("grid", "block", "registers", "shared_bytes", "streams"):
            if key not in launch:
                problems.append(f"own launch lacks {key}: {launch}")
    roofline = verdict.get("roofline") or {}
    if not roofline.get("floor_ms", 0) > 0 or not roofline.get("bandwidth_bytes_per_second", 0) > 1e11:
        problems.append(f"roofline {roofline}")
    # hardware counters (CUPTI range profiler): a ReLU over 256 MB is bound by memory
    counters = verdict.get("counters") or {}
    own_counted = [kernel for kernel in counters.get("kernels") or [] if kernel.get("own")]
    if not own_counted:
        problems.append(f"no hardware counters for the own kernel: {json.dumps(counters)[:600]}")
    elif not own_counted[0]["dram_percent"] > 30:
        problems.append(f"own kernel at {own_counted[0]['dram_percent']:.1f}% of peak DRAM "
                        f"throughput: a ReLU over 256 MB is memory-bound ({own_counted[0]})")
    reference_counters = verdict.get("reference_counters") or {}
    if not reference_counters.get("kernels"):
        problems.append(f"no hardware counters for the reference: "
                        f"{json.dumps(reference_counters)[:600]}")
    return problems


def profile_matmul(verdict):
    compute = verdict.get("compute") or {}
    problems = []
    if compute.get("flops") != 2 * 2048 ** 3:
        problems.append(f"flops {compute.get('flops')}, expected {2 * 2048 ** 3}")
    if not compute.get("peak_flops_per_second", 0) > 1e12:
        problems.append(f"peak {compute.get('peak_flops_per_second')}")
    return problems


PROFILE_CASES = [
    Case("relu", "triton_relu", "correct", check=profile_relu),
    Case("matmul", "triton_matmul", "correct", check=profile_matmul),
]


def profile_text(suite):
    """The text a model reads: where the time goes, the roofline and what to attack first."""
    command = [suite.kagent, "profile", "--device", "cuda", *suite.gpu_arguments(),
               "--worker", suite.socket_path, os.path.join(suite.problems, "matmul.py"),
               os.path.join(suite.candidates, "triton_matmul.py")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    needles = ("where the time goes", "reference", "attack first: matmul_kernel",
               "compute bound", "hardware counters (")
    missing = [needle for needle in needles if needle not in result.stdout]
    suite.report(result.returncode == 0 and not missing,
                 f"kagent profile text names the kernel to attack first (missing {missing})",
                 result.stdout + result.stderr[-800:])
    print("# " + result.stdout.replace("\n", "\n# "))


def main():
    source = os.environ["KAGENT_SOURCE_DIR"]
    suite = Suite("cuda", os.path.join(source, "tests", "gpu"), call_timeout=30)
    print(f"1..{4 + len(CASES) + len(PROFILE_CASES)}")
    code, verdict, log, seconds = suite.evaluate("relu", "triton_relu", ("--cold", "--no-cache"),
                                                 worker=False)
    suite.report(code == 0 and verdict["status"] == "correct"
                 and verdict["timing"]["compile"] is not None,
                 f"cold evaluation with the torch.compile baseline [{seconds:.1f} s]",
                 # why a baseline is missing first: the whole verdict runs past the detail
                 json.dumps({"status": verdict.get("status"), "warnings": verdict.get("warnings"),
                             "compile_note": (verdict.get("timing") or {}).get("compile_note"),
                             "phase_seconds": verdict.get("phase_seconds")})[:3000]
                 + log[-1500:])
    # as sessions' and kagentd's workers run: each candidate in a process prepared during the
    # evaluation before (docs/worker-protocol.md), where its cache is new and limits match
    suite.start_worker(("--prepare-candidates",))
    prepared = []
    for case in CASES:
        verdict = suite.run_case(case)
        if verdict is not None and verdict.get("candidate_prepared"):
            prepared.append(case.candidate)
        if verdict is not None and os.environ.get("KAGENT_SUITE_VERBOSE"):
            print("# " + json.dumps({k: verdict.get(k) for k in
                                     ("status", "reason", "violations", "warnings")}))
    # every case found a prepared process but the honest ReLU's: judged before (the cold
    # case), it runs in a process made for it, which finds its cache; the cheats above were
    # caught in prepared processes
    suite.report(len(prepared) >= len(CASES) // 2,
                 f"{len(prepared)} of {len(CASES)} cases ran in a prepared candidate process",
                 f"prepared: {prepared}")
    print(f"# prepared: {prepared}")
    for case in PROFILE_CASES:
        suite.run_case(case, command_name="profile")
    profile_text(suite)
    suite.stop_worker()
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
