"""Adaptive repetitions (docs/verdict.md): the judge times an arm in rounds and stops when the
95% interval of the median is tight, or at a cap on time or calls. Pure and free of torch, so
the stopping rule is tested on recorded samples (tests/runner/test_adaptive.py).

The stop rule uses the distribution-free order-statistic interval of the median (the ranks a
binomial(n, 1/2) count allows), not kagent's bootstrap: it costs a sort per round instead of
2000 resamples, needs no generator, and for these sample sizes it is about as wide; the
reported interval (ci95_ms) is still statistics.c's bootstrap of the same samples.
"""
import math
import statistics
import time

# Defaults of the request's timing keys (docs/verdict.md).
TARGET_RELATIVE_CI = 0.02
MAX_SECONDS = 2.0
CALL_CAP = 1000

# Below this many samples the order-statistic interval spans the whole sample: never tight.
MIN_SAMPLES = 6
Z95 = 1.959964


def plan(timing):
    """The stopping rule's settings from the request's timing object, with the defaults."""
    return {"target_relative_ci": float(timing.get("target_relative_ci", TARGET_RELATIVE_CI)),
            "max_seconds": float(timing.get("max_seconds", MAX_SECONDS)),
            "call_cap": int(timing.get("call_cap", CALL_CAP))}


def median_interval(samples):
    """The order-statistic 95% interval of the median: (low, high), or None for fewer than
    MIN_SAMPLES samples. Ranks n/2 -+ z*sqrt(n)/2 (the normal approximation of the binomial),
    widened outward to whole ranks."""
    count = len(samples)
    if count < MIN_SAMPLES:
        return None
    ordered = sorted(samples)
    half = Z95 * math.sqrt(count) / 2
    low = max(0, int(math.floor(count / 2 - half)) - 1)
    high = min(count - 1, int(math.ceil(count / 2 + half)))
    return ordered[low], ordered[high]


def relative_half_width(samples):
    """Half the interval's width over the median; infinity when there is no interval."""
    interval = median_interval(samples)
    median = statistics.median(samples) if samples else 0.0
    if interval is None or median <= 0:
        return math.inf
    return (interval[1] - interval[0]) / 2 / median


def stop_reason(samples, elapsed_seconds, settings):
    """Why to stop timing an arm now, or None to go on: "tight" when the interval's relative
    half-width is at most the target, "call_cap" at the cap on calls, "time_cap" when the arm
    has used its seconds. Checked in that order, so a tight arm says tight."""
    if relative_half_width(samples) <= settings["target_relative_ci"]:
        return "tight"
    if len(samples) >= settings["call_cap"]:
        return "call_cap"
    if elapsed_seconds >= settings["max_seconds"]:
        return "time_cap"
    return None


def measure(call, first_calls, settings, clock=time.monotonic, judge_samples=None):
    """Times an arm: call(index) returns one call's milliseconds. The first round is
    first_calls calls, as many as a fixed count would make; each later round as many again,
    within the call cap, until stop_reason says stop (checked after every round, and the
    time cap before every call of a later round). judge_samples, when given, returns the
    samples the rule looks at after a round (the device times, read once per round) instead
    of call's. Returns (samples, stop reason)."""
    started = clock()
    first_calls = max(1, first_calls)
    samples = [call(index) for index in range(first_calls)]
    while True:
        judged = judge_samples() if judge_samples is not None else samples
        reason = stop_reason(judged, clock() - started, settings)
        if reason is not None:
            return samples, reason
        for _ in range(min(first_calls, settings["call_cap"] - len(samples))):
            if clock() - started >= settings["max_seconds"]:
                break
            samples.append(call(len(samples)))
