#!/usr/bin/env python3
"""`kagent model` on a real GPU (issue 18's GPU case): a small transformer
(tests/gpu/models/transformer.py) profiled on the device, two hot spots chosen (a LayerNorm and
a GELU: `--only LayerNorm,GELU --top 2`), each optimized by `kagent optimize` against the
scripted model server proposing a Triton kernel of ours (tests/gpu/candidates/model_*.py),
then composed into optimized_model.py (the variants' sources inlined) and judged end to end,
eager and torch.compile side by side: correct, its own kernels the variants'. Each hot spot
gets its own server, so the two runs go one after the other here and are composed with
--compose, the path `kagent model` takes after a batch.
Run on the GPU machine: KAGENT=build/kagent KAGENT_SOURCE_DIR=. python3 tests/gpu/model_case.py
Prints TAP, the per-hot-spot and end-to-end speedups, and leaves the files in $KAGENT_OUTPUT
(default kagent-model-gpu)."""
import json
import os
import subprocess
import sys

KAGENT = os.path.abspath(os.environ["KAGENT"])
SOURCE = os.path.abspath(os.environ["KAGENT_SOURCE_DIR"])
GPU = os.path.join(SOURCE, "tests", "gpu")
MODEL = os.path.join(GPU, "models", "transformer.py")
SERVER = os.path.join(SOURCE, "tests", "fixtures", "llm_server.py")
sys.path.insert(0, os.path.dirname(SERVER))
from scripted_replies import chat_reply  # noqa: E402 - the scripted model's replies
OUTPUT = os.path.abspath(os.environ.get("KAGENT_OUTPUT", "kagent-model-gpu"))
CANDIDATES = {"LayerNorm": "model_layernorm.py", "GELU": "model_gelu.py"}
# the Triton kernel each candidate defines
KERNELS = {"LayerNorm": "layer_norm_rows", "GELU": "gelu_erf"}

results = []


def check(name, condition, detail=""):
    results.append(bool(condition))
    print(f"{'ok' if condition else 'not ok'} {len(results)} - {name}")
    if not condition:
        for line in str(detail).splitlines()[-40:]:
            print(f"# {line}")
    sys.stdout.flush()


def optimize(spot):
    """kagent optimize on the hot spot's sub-problem, the scripted model proposing our kernel;
    its summary where kagent model --compose reads it."""
    with open(os.path.join(GPU, "candidates", CANDIDATES[spot["class"]])) as handle:
        kernel = handle.read()
    script = os.path.join(OUTPUT, f"script-{spot['rank']}.json")
    with open(script, "w") as handle:
        json.dump({"by_turn": [
            chat_reply([("evaluate", {"source": kernel, "note": "Triton"})]),
            chat_reply([("finish", {"summary": f"a Triton {spot['class']}"})])]},
                  handle)
    server = subprocess.Popen([sys.executable, SERVER, "--script", script, "--log",
                               os.path.join(OUTPUT, f"server-{spot['rank']}.jsonl"),
                               "--port", "0"], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline().split()[1])
    summary = os.path.join(OUTPUT, "runs", spot["file"].replace(".py", ".json"))
    try:
        with open(summary, "w") as handle:
            run = subprocess.run([KAGENT, "optimize", spot["problem"], "--output",
                                  os.path.join(OUTPUT, "runs"), "--json", "--base-url",
                                  f"http://127.0.0.1:{port}/v1", "--model", "scripted",
                                  "--api", "chat_completions", "--target", "0",
                                  "--max-turns", "4"], stdout=handle, stderr=subprocess.PIPE,
                                 text=True, timeout=1200)
    finally:
        server.terminate()
        server.wait(timeout=10)
    with open(summary) as handle:
        final = json.load(handle) if os.path.getsize(summary) else {}
    confirmation = final.get("confirmation") or {}
    check(f"{spot['path']} ({spot['class']}): our Triton kernel confirmed and credited",
          final.get("path") and confirmation.get("credited") is True,
          run.stderr[-3000:] + json.dumps(final)[:2000])


def main():
    os.makedirs(os.path.join(OUTPUT, "runs"), exist_ok=True)
    plan = subprocess.run([KAGENT, "model", MODEL, "--only", "LayerNorm,GELU", "--top", "2",
                           "--plan", "--output", OUTPUT, "--json"], capture_output=True,
                          text=True, timeout=1200)
    print("\n".join(f"# {line}" for line in plan.stderr.splitlines()))
    analysis = json.loads(plan.stdout) if plan.returncode == 0 else {}
    chosen = [spot for spot in analysis.get("chosen", []) if spot.get("problem")]
    check("the analysis: two hot spots written, each reproducing the model's activations",
          len(chosen) == 2 and all(spot["check"]["exact"] for spot in chosen),
          plan.stderr + plan.stdout[-2000:])
    check("the analysis ran on the device's clock, with the roofline's floor",
          analysis.get("clock") == "device" and all(
              spot["roofline"]["fraction"] is not None for spot in chosen),
          json.dumps(analysis)[:3000])
    for spot in chosen:
        optimize(spot)
    compose = subprocess.run([KAGENT, "model", MODEL, "--compose", "--output", OUTPUT,
                              "--json"], capture_output=True, text=True, timeout=1200)
    try:
        report = json.loads(compose.stdout)
    except ValueError:
        report = {}
    end = report.get("end_to_end") or {}
    check("composed: optimized_model.py is correct end to end",
          compose.returncode == 0 and end.get("correct") is True, compose.stderr[-3000:])
    check("both hot spots were swapped for their variants",
          len([spot for spot in report.get("hotspots", []) if spot.get("variant")]) == 2,
          json.dumps(report.get("hotspots"))[:3000])
    # optimized_model.py inlines the variants, so the judge knows their kernels as its own
    kernels = (report.get("verdict") or {}).get("kernels") or {}
    expected = {KERNELS[spot["class"]] for spot in report.get("hotspots", [])
                if spot.get("variant")}
    check("end to end, the variants' Triton kernels are the composed model's own, and ran",
          expected and expected <= set(kernels.get("own_names") or [])
          and any(launch.get("own") for launch in kernels.get("launches", [])),
          json.dumps(kernels)[:3000])
    for spot in report.get("hotspots", []):
        print(f"# {spot['path']} ({spot['class']}, {100 * spot['share']:.1f}% of the forward): "
              f"{spot.get('speedup_vs_eager')} vs eager, {spot.get('speedup_vs_compile')} vs "
              "torch.compile")
    print(f"# end to end: {end.get('speedup_vs_eager')} vs eager, "
          f"{end.get('speedup_vs_compile')} vs torch.compile; Amdahl bound "
          f"{report.get('amdahl_bound')} (the hot spots cover "
          f"{100 * (report.get('covered_share') or 0):.1f}%); report {OUTPUT}/report.md")
    print(f"1..{len(results)}")
    print(f"# {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
