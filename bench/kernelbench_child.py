#!/usr/bin/env python3
"""KernelBench's own harness on one candidate, as its scripts run it: eval_kernel_against_ref
with 5 correctness trials and 100 timed trials, in this (new) Python process. The benchmarks
that compare kagent with it (eval_speed.py, reward_throughput.py) run this file. KernelBench's
package imports LLM clients (dotenv, litellm, openai) that evaluation never calls; where they
are missing they are replaced by empty modules, so that the evaluation itself runs unchanged;
so are requests (imported, never called) and pydantic, whose BaseModel its result class only
uses to take keyword arguments over class defaults.
Prints one JSON line: compiled, correctness, status (compile_error, incorrect or correct),
runtime_ms, metadata, import_seconds and eval_seconds.

    python3 bench/kernelbench_child.py KERNELBENCH_CHECKOUT PROBLEM CANDIDATE [BUILD_DIR]"""
import json
import os
import sys
import tempfile
import time
import types


def main():
    started = time.monotonic()
    for name, attributes in (("dotenv", ("load_dotenv",)), ("litellm", ("completion",)),
                             ("openai", ("OpenAI",))):
        try:
            __import__(name)
        except ImportError:
            module = types.ModuleType(name)
            for attribute in attributes:
                setattr(module, attribute, lambda *a, **k: None)
            sys.modules[name] = module
    try:
        __import__("requests")
    except ImportError:
        sys.modules["requests"] = types.ModuleType("requests")
    try:
        __import__("pydantic")
    except ImportError:
        class BaseModel:
            def __init__(self, **fields):
                for name, value in fields.items():
                    setattr(self, name, value)

        sys.modules["pydantic"] = types.ModuleType("pydantic")
        sys.modules["pydantic"].BaseModel = BaseModel
    sys.path.insert(0, os.path.join(sys.argv[1], "src"))
    from kernelbench import eval as kernel_eval

    imported = time.monotonic()
    with open(sys.argv[2]) as handle:
        reference = handle.read()
    with open(sys.argv[3]) as handle:
        candidate = handle.read()
    build = sys.argv[4] if len(sys.argv) > 4 else tempfile.mkdtemp(prefix="kernelbench-build-")
    result = kernel_eval.eval_kernel_against_ref(
        reference, candidate, seed_num=42, num_correct_trials=5, num_perf_trials=100,
        measure_performance=True, backend="triton", build_dir=build)
    finished = time.monotonic()
    status = ("compile_error" if not result.compiled else
              "correct" if result.correctness else "incorrect")
    print(json.dumps({"compiled": result.compiled, "correctness": result.correctness,
                      "status": status, "runtime_ms": result.runtime,
                      "metadata": str(result.metadata)[:400],
                      "import_seconds": imported - started, "eval_seconds": finished - imported}))


if __name__ == "__main__":
    main()
