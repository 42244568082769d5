#!/usr/bin/env python3
"""The agent loop on a real GPU: `kagent optimize` against the scripted model server
(tests/fixtures/llm_server.py) whose recorded conversation proposes real kernels (the Triton
and CUDA candidates of tests/gpu/candidates), judged by the real worker, judge and sandbox.
Run on the GPU machine: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/gpu/optimize_cases.py
Prints TAP and a closing `N passed, N failed` line."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))
import optimize_cases as agent  # noqa: E402

GPU = os.path.join(agent.SOURCE, "tests", "gpu")


def source(name):
    with open(os.path.join(GPU, "candidates", name + ".py")) as f:
        return f.read()


def real_run(exchanges):
    run = agent.Run(exchanges)
    for name in ("KAGENT_RUNNER_DIR", "FAKE_WORKER_MODE", "FAKE_WORKER_LOG",
                 "KAGENT_WORKER_SOCKET"):
        run.environment.pop(name, None)
    run.environment["KAGENT_WORKER_SOCKET"] = os.path.join(run.folder, "worker.sock")
    return run


def gpu_command(run, *extra):
    command = run.command(*extra, problem=os.path.join(GPU, "problems", "relu.py"))
    command[command.index("cpu")] = "cuda"
    return command


def loop_with_real_kernels():
    """torch-only (rejected), a Triton ReLU (correct), its profile, a CUDA ReLU through
    kagent_runner.cuda, a compile of CUDA source, commit, finish; the best is confirmed in a
    fresh worker on unseen seeds."""
    reply = agent.chat_reply
    cuda_kernel = ('extern "C" __global__ void relu(const float *x, float *y, long n) {\n'
                   '  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;\n'
                   '  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;\n}\n')
    run = real_run([
        reply([("evaluate", {"source": source("torch_only_relu"), "note": "baseline"})]),
        reply([("evaluate", {"source": source("triton_relu")})]),
        reply([("profile", {"variant": "v2"}), ("compile", {"cuda_source": cuda_kernel})]),
        reply([("evaluate", {"source": source("kagent_cuda_relu")})]),
        reply([("diff", {"variant": "v3", "against": "v2"}),
               ("commit", {"variant": "v2", "message": "Triton ReLU"})]),
        reply([("finish", {"summary": "a Triton ReLU"})]),
    ])
    try:
        import subprocess
        result = subprocess.run(gpu_command(run, "--target", "0"), cwd=run.folder,
                                env=run.environment, capture_output=True, text=True,
                                timeout=900)
        run.code, run.stdout, run.stderr = result.returncode, result.stdout, result.stderr
        try:
            run.final = json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            run.final = None
        final = run.final or {}
        problems = []
        if run.code != 0 or not final.get("confirmed") or final.get("variant") not in ("v2", "v3"):
            return ["expected a confirmed Triton or CUDA variant: " + run.describe()]
        trace = run.trace()
        verdicts = {(r["variant"], r["purpose"]): r for r in trace if r["type"] == "verdict"}
        if verdicts.get(("v1", "evaluate"), {}).get("status") != "rejected":
            problems.append(f"torch-only v1 was not rejected: {verdicts.get(('v1', 'evaluate'))}")
        for variant in ("v2", "v3"):
            if verdicts.get((variant, "evaluate"), {}).get("status") != "correct":
                problems.append(f"{variant} was not correct: {verdicts.get((variant, 'evaluate'))}")
        results = {r["name"]: r for r in trace if r["type"] == "tool_result"}
        if "attack first" not in results.get("profile", {}).get("content", ""):
            problems.append("the profile result names no kernel to attack first")
        if "regs" not in results.get("compile", {}).get("content", ""):
            problems.append(f"the compile result lacks registers: {results.get('compile')}")
        finals = [r for r in trace if r["type"] == "verdict" and r["purpose"] == "final"]
        if not finals or finals[0]["status"] != "correct":
            problems.append("no correct final check on unseen seeds")
        print("# " + " | ".join(f"{r['variant']} {r['purpose']}: {r['status']} "
                                f"{r.get('speedup_vs_eager', 0):.2f}x eager"
                                for r in trace if r["type"] == "verdict"))
        print(f"# final: {json.dumps({k: final.get(k) for k in ('variant', 'confirmed', 'stop_reason', 'confirmation', 'totals')})}")
        return problems
    finally:
        run.close()


CASES = [("the loop with real Triton and CUDA kernels on the GPU", loop_with_real_kernels)]

if __name__ == "__main__":
    agent.CASES = CASES
    sys.exit(agent.main())
