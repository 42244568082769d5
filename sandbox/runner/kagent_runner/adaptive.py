"""Adaptive repetitions (docs/verdict.md): the judge times an arm in rounds and stops when the
95% interval of the median is tight, or at a cap on time or calls. Pure and free of torch, so
the stopping rule is tested on recorded samples (tests/runner/test_adaptive.py).

The stop rule uses the distribution-free order-statistic interval of the median (the ranks a
binomial(n, 1/2) count allows), not kagent's bootstrap: it costs a sort per round instead of
2000 resamples, needs no generator, and for these sample sizes it is about as wide; the
reported interval (ci95_ms) is still statistics.c's bootstrap of the same samples.

Several arms may be timed together (measure_arms): their rounds alternate, so that a drift of
the device's state (its clocks) during the measurement falls on every arm alike and cancels
in their ratio instead of going into it.
"""
import math
import statistics
import time

# Defaults of the request's timing keys (docs/verdict.md).
TARGET_RELATIVE_CI = 0.02
FINE_RELATIVE_CI = 0.005
TIGHTEN_SECONDS = 0.3
MAX_SECONDS = 2.0
CALL_CAP = 1000

# Below this many samples the order-statistic interval spans the whole sample: never tight.
MIN_SAMPLES = 6
# Sample values closer than this (in milliseconds: 3 ns) are one clock value, rounded apart.
ROUNDING_MS = 3e-6
Z95 = 1.959964


def plan(timing):
    """The stopping rule's settings from the request's timing object, with the defaults."""
    return {"target_relative_ci": float(timing.get("target_relative_ci", TARGET_RELATIVE_CI)),
            "fine_relative_ci": float(timing.get("fine_relative_ci", FINE_RELATIVE_CI)),
            "tighten_seconds": float(timing.get("tighten_seconds", TIGHTEN_SECONDS)),
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


def clock_step(samples):
    """The step of the clock the samples were read from, as they show it: the smallest gap
    between distinct values (CUPTI's device timestamps move in 32 ns steps on an H100);
    0.0 when the values are too few or too fine to show one."""
    values = sorted(set(samples))
    gaps = [high - low for low, high in zip(values, values[1:]) if high - low > ROUNDING_MS]
    return min(gaps) if gaps else 0.0


def relative_half_width(samples):
    """Half the interval's width over the median; infinity when there is no interval. The
    interval is widened by one clock step: where a kernel lasts few steps the samples tie,
    the order statistics of a hundred calls can fall on one value, and an interval of zero
    width would stop the arm while its median still moves by a step from one verdict to the
    next (issue 10: 1% at 4 MB)."""
    interval = median_interval(samples)
    median = statistics.median(samples) if samples else 0.0
    if interval is None or median <= 0:
        return math.inf
    return (interval[1] - interval[0] + clock_step(samples)) / 2 / median


def stop_reason(samples, elapsed_seconds, settings, calls=None):
    """Why to stop timing an arm now, or None to go on: "fine" when the interval's relative
    half-width is at most the fine target; "tight" when it is at most the target and the arm
    has used its tightening seconds or reached a cap (two verdicts whose arms stop at +-2%
    can differ by 4% from sampling alone, so where calls are cheap the arm goes on towards
    the fine target, within a budget that keeps expensive calls from paying much for it);
    "call_cap" at the cap on calls, "time_cap" when the arm has used its seconds. Checked in
    that order, so a tight arm at a cap says tight. calls, the arm's calls so far, is the
    samples' count unless given (the device record may hold fewer samples than calls)."""
    width = relative_half_width(samples)
    if width <= settings["fine_relative_ci"]:
        return "fine"
    calls = len(samples) if calls is None else calls
    capped = ("call_cap" if calls >= settings["call_cap"] else
              "time_cap" if elapsed_seconds >= settings["max_seconds"] else None)
    if width <= settings["target_relative_ci"] and (
            capped or elapsed_seconds >= settings["tighten_seconds"]):
        return "tight"
    return capped


class Leave(Exception):
    """Raised by an arm's call or judge_samples: that arm leaves the measurement with the
    samples it has (stop reason "left") and the other arms go on."""


class _Arm:
    """One arm's state in measure_arms: its samples, the seconds its own rounds used, and
    its stop reason after its last round."""

    def __init__(self, call, first_calls, judge_samples):
        self.call = call
        self.size = max(1, first_calls)
        self.judge_samples = judge_samples
        self.samples = []
        self.judged = []
        self.seconds = 0.0
        self.reason = None

    def capped(self, settings):
        return len(self.samples) >= settings["call_cap"] or \
            self.seconds >= settings["max_seconds"]

    def round(self, settings, clock, first):
        """One round: the first is always whole; a later one is cut at the call cap and,
        before each call, at the arm's seconds: the tightening budget while the arm goes on
        only to reach the fine target, else the time cap."""
        count, limit = self.size, math.inf
        if not first:
            count = min(count, settings["call_cap"] - len(self.samples))
            limit = settings["max_seconds"]
            if self.reason is None and \
                    relative_half_width(self.judged) <= settings["target_relative_ci"]:
                limit = min(limit, settings["tighten_seconds"])
        started = clock()
        try:
            for _ in range(count):
                if self.seconds + clock() - started >= limit:
                    break
                self.samples.append(self.call(len(self.samples)))
            self.judged = self.judge_samples() if self.judge_samples is not None \
                else self.samples
        except Leave:
            self.reason = "left"
        self.seconds += clock() - started
        if self.reason != "left":
            self.reason = stop_reason(self.judged, self.seconds, settings, len(self.samples))


def measure_arms(arms, settings, clock=time.monotonic):
    """Times arms together: arms is a list of (call, first_calls, judge_samples), where
    call(index) returns one call's milliseconds and judge_samples, when not None, returns the
    samples the rule looks at after a round (the device times, read once per round) instead
    of call's. Each arm's first round is first_calls calls, as many as a fixed count would
    make; each later round as many again. Rounds alternate arm by arm, the order reversed
    every round (A B C, C B A, A B C, ...), until every arm's stop_reason says stop after its
    last round. An arm whose rule says stop goes on while another's does not, up to its own
    caps, so that all arms span the same time and a drift of the device cancels in their
    ratio. The caps and the tightening budget count each arm's own seconds (its rounds'
    calls and judging). Returns [(samples, stop reason)] in the arms' order."""
    states = [_Arm(call, first_calls, judge_samples)
              for call, first_calls, judge_samples in arms]
    turn = 0
    while turn == 0 or any(state.reason is None for state in states):
        for state in states if turn % 2 == 0 else states[::-1]:
            if turn == 0 or (state.reason != "left" and not state.capped(settings)):
                state.round(settings, clock, turn == 0)
        turn += 1
    return [(state.samples, state.reason) for state in states]

