#!/usr/bin/env python3
"""The cap on waiting for the torch.compile baseline (docs/verdict.md), end to end on the CPU
with the real worker, judge and sandbox: a problem whose compile takes ten minutes gets its
eager verdict within the cap and the reason compile is missing; the abandoned compile is
cached as such (the same cap does not retry it, a larger one does); and under a cap it meets,
the compile baseline is measured. Prints TAP. Needs torch in the runner's Python."""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from eval_suite import Suite  # noqa: E402


def abandoned(verdict, cap, cached):
    """What a verdict whose compile was abandoned at cap must say; a list of problems."""
    problems = []
    timing = (verdict or {}).get("timing") or {}
    if (verdict or {}).get("status") != "correct":
        return [f"status {(verdict or {}).get('status')}: {(verdict or {}).get('reason')}"]
    if not timing.get("speedup_vs_eager") or timing.get("eager") is None:
        problems.append("no eager speedup")
    if timing.get("compile") is not None or timing.get("speedup_vs_compile") is not None:
        problems.append("a compile timing despite the cap")
    if f"torch.compile baseline exceeded {cap} s" not in (timing.get("compile_note") or ""):
        problems.append(f"compile_note {timing.get('compile_note')!r}")
    if not any("the torch.compile baseline was abandoned" in warning
               for warning in verdict.get("warnings", [])):
        problems.append(f"warnings {verdict.get('warnings')}")
    if timing.get("baselines_cached") is not cached:
        problems.append(f"baselines_cached {timing.get('baselines_cached')}, expected {cached}")
    return problems


def main():
    folder = tempfile.mkdtemp(prefix="kagent-compile-cap-")
    os.chmod(folder, 0o755)  # the sandbox uid reads the candidates' caches below it
    os.environ["KAGENT_CACHE_DIR"] = os.path.join(folder, "cache")
    suite = Suite("cpu", os.path.join(os.environ["KAGENT_SOURCE_DIR"], "tests", "fixtures"),
                  call_timeout=5)
    print("1..5")
    suite.start_worker()
    try:
        code, verdict, log, seconds = suite.evaluate("slow_compile", "relu_correct",
                                                     ("--compile-timeout", "5"))
        status = suite.without_torch(verdict, log)
        if status is not None:
            return status
        problems = abandoned(verdict, 5, False)
        # the ten-minute compile was not waited for
        if seconds > 120:
            problems.append(f"the evaluation took {seconds:.0f} s")
        suite.report(code == 0 and not problems,
                     f"a compile past its 5 s cap is abandoned; eager stands [{seconds:.1f} s]",
                     "\n".join(problems) + "\n" + json.dumps(verdict)[:1500] + log[-800:])
        code, verdict, log, seconds = suite.evaluate("slow_compile", "relu_correct",
                                                     ("--compile-timeout", "5"))
        problems = abandoned(verdict, 5, True)
        suite.report(code == 0 and not problems,
                     f"the same cap reuses the cached, abandoned compile [{seconds:.1f} s]",
                     "\n".join(problems) + "\n" + json.dumps(verdict)[:1500] + log[-800:])
        code, verdict, log, seconds = suite.evaluate("slow_compile", "relu_correct",
                                                     ("--compile-timeout", "7"))
        problems = abandoned(verdict, 7, False)
        suite.report(code == 0 and not problems,
                     f"a larger cap tries the compile again [{seconds:.1f} s]",
                     "\n".join(problems) + "\n" + json.dumps(verdict)[:1500] + log[-800:])
        code, verdict, log, seconds = suite.evaluate("relu", "relu_correct",
                                                     ("--compile-timeout", "240"))
        timing = (verdict or {}).get("timing") or {}
        suite.report(code == 0 and timing.get("compile") is not None
                     and timing.get("speedup_vs_compile") is not None
                     and timing.get("compile_note") is None,
                     f"under a cap it meets, the compile baseline is measured [{seconds:.1f} s]",
                     json.dumps(verdict)[:1500] + log[-800:])
    finally:
        suite.stop_worker()
        shutil.rmtree(folder, ignore_errors=True)
    return suite.finish()


if __name__ == "__main__":
    sys.exit(main())
