#!/usr/bin/env python3
"""The judge's adaptive repetitions (kagent_runner/adaptive.py) on recorded samples and a fake
clock, without a GPU or torch. Prints TAP for meson."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner",
                                "kagent_runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import adaptive  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402

SETTINGS = {"target_relative_ci": 0.02, "max_seconds": 2.0, "call_cap": 1000}


class FakeClock:
    """The arm's calls advance it (run_arm), so the time cap is exact."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def recorded(count, spread, seed=7):
    generator = random.Random(seed)
    return [1.0 + spread * generator.random() for _ in range(count)]


@test
def few_samples_have_no_interval():
    assert adaptive.median_interval([1.0] * 5) is None
    assert adaptive.stop_reason([1.0] * 5, 0.0, SETTINGS) is None


@test
def identical_samples_are_tight():
    assert adaptive.median_interval([2.0] * 10) == (2.0, 2.0)
    assert adaptive.stop_reason([2.0] * 10, 0.0, SETTINGS) == "tight"


@test
def interval_holds_the_median_and_narrows():
    samples = recorded(1000, 0.5)
    low, high = adaptive.median_interval(samples)
    ordered = sorted(samples)
    assert low <= ordered[500] <= high
    assert adaptive.relative_half_width(samples[:50]) > adaptive.relative_half_width(samples)


@test
def interval_ranks_match_the_binomial():
    # n = 100: the 95% ranks of the median are 40 and 61 (1-based), as tables give
    samples = [float(value) for value in range(1, 101)]
    assert adaptive.median_interval(samples) == (40.0, 61.0)


@test
def noisy_samples_hit_the_caps():
    noisy = recorded(20, 1.0)
    assert adaptive.stop_reason(noisy, 0.1, SETTINGS) is None
    assert adaptive.stop_reason(noisy, 2.0, SETTINGS) == "time_cap"
    assert adaptive.stop_reason(noisy, 0.1, dict(SETTINGS, call_cap=20)) == "call_cap"


def run_arm(values, first_calls, settings, step):
    clock = FakeClock()

    def call(index):
        clock.now += step
        return values[index % len(values)]

    return adaptive.measure(call, first_calls, settings, clock)


@test
def measure_stops_when_tight_after_the_first_round():
    samples, stop = run_arm([1.0, 1.001, 0.999], 30, SETTINGS, 0.001)
    assert (len(samples), stop) == (30, "tight")


@test
def measure_adds_rounds_until_tight():
    # a 30% spread: tight (2%) needs a few hundred calls, reached in rounds of 50
    values = recorded(4000, 0.3, seed=3)
    samples, stop = run_arm(values, 50, SETTINGS, 0.0001)
    assert stop == "tight" and 50 < len(samples) < 1000 and len(samples) % 50 == 0
    assert adaptive.relative_half_width(samples) <= 0.02
    assert adaptive.relative_half_width(samples[:-50]) > 0.02


@test
def measure_stops_at_the_time_cap():
    values = recorded(4000, 2.0, seed=5)
    samples, stop = run_arm(values, 10, SETTINGS, 0.05)  # 40 calls fit in 2 s
    assert (len(samples), stop) == (40, "time_cap")


@test
def measure_stops_at_the_call_cap():
    values = recorded(4000, 2.0, seed=5)
    samples, stop = run_arm(values, 30, dict(SETTINGS, call_cap=100), 0.0001)
    assert (len(samples), stop) == (100, "call_cap")


@test
def first_round_is_always_complete():
    values = recorded(4000, 2.0, seed=5)
    samples, stop = run_arm(values, 25, dict(SETTINGS, max_seconds=0.01), 0.05)
    assert (len(samples), stop) == (25, "time_cap")


@test
def plan_has_documented_defaults():
    assert adaptive.plan({}) == {"target_relative_ci": 0.02, "max_seconds": 2.0,
                                 "call_cap": 1000}
    assert adaptive.plan({"max_seconds": 0.5})["max_seconds"] == 0.5


if __name__ == "__main__":
    sys.exit(tap.run())
