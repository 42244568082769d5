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

SETTINGS = {"target_relative_ci": 0.02, "fine_relative_ci": 0.005, "tighten_seconds": 0.3,
            "max_seconds": 2.0, "call_cap": 1000}
# the rule before the tightening budget: stop as soon as the target is reached
AT_TARGET = dict(SETTINGS, tighten_seconds=0.0)


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
def identical_samples_are_fine():
    assert adaptive.median_interval([2.0] * 10) == (2.0, 2.0)
    assert adaptive.stop_reason([2.0] * 10, 0.0, SETTINGS) == "fine"


@test
def tight_samples_go_on_within_the_tightening_budget():
    # within 2% but not 0.5%: go on while the arm has used less than tighten_seconds
    samples = recorded(40, 0.06, seed=11)
    assert 0.005 < adaptive.relative_half_width(samples) <= 0.02
    assert adaptive.stop_reason(samples, 0.1, SETTINGS) is None
    assert adaptive.stop_reason(samples, 0.3, SETTINGS) == "tight"
    assert adaptive.stop_reason(samples, 0.1, AT_TARGET) == "tight"
    # a cap ends the tightening too, and the arm still says tight
    assert adaptive.stop_reason(samples, 0.1, dict(SETTINGS, call_cap=40)) == "tight"
    assert adaptive.stop_reason(samples[:20], 0.1, dict(SETTINGS, call_cap=40),
                                calls=40) in ("tight", "call_cap")


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

    return adaptive.measure_arms([(call, first_calls, None)], settings, clock)[0]


@test
def measure_stops_when_fine_after_the_first_round():
    samples, stop = run_arm([1.0, 1.001, 0.999], 30, SETTINGS, 0.001)
    assert (len(samples), stop) == (30, "fine")


@test
def measure_adds_rounds_until_tight():
    # a 30% spread: tight (2%) needs a few hundred calls, reached in rounds of 50
    values = recorded(4000, 0.3, seed=3)
    samples, stop = run_arm(values, 50, AT_TARGET, 0.0001)
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
def cheap_calls_go_on_to_the_fine_target():
    # 0.1 ms calls with a 6% spread: tight (2%) after the first round of 40, then on to 0.5%
    values = recorded(4000, 0.06, seed=11)
    early, early_stop = run_arm(values, 40, AT_TARGET, 0.0001)
    samples, stop = run_arm(values, 40, SETTINGS, 0.0001)
    assert (len(early), early_stop) == (40, "tight")
    assert stop == "fine" and len(samples) > 40 and len(samples) % 40 == 0
    assert adaptive.relative_half_width(samples) <= 0.005
    assert adaptive.relative_half_width(samples[:-40]) > 0.005
    assert len(samples) * 0.0001 < 0.3


@test
def expensive_calls_pay_at_most_the_tightening_budget():
    # 1/64 s calls in rounds of 8 (0.125 s): tight after the first round, never fine within
    # the budget; the rounds after it stop at 0.3 s of the arm's time: 20 calls, not 2 s
    values = recorded(4000, 0.03, seed=13)
    samples, stop = run_arm(values, 8, SETTINGS, 1 / 64)
    assert adaptive.stop_reason(values[:8], 0.0, AT_TARGET) == "tight"
    assert (len(samples), stop) == (20, "tight")
    # a first round longer than the budget is all an arm gets once it is tight
    samples, stop = run_arm(values, 8, SETTINGS, 0.05)
    assert (len(samples), stop) == (8, "tight")


def run_arms(arms, settings, step):
    """arms: (values, first_calls) per arm; returns measure_arms' result and the order of
    the calls, as (arm, index) pairs."""
    clock = FakeClock()
    order = []

    def caller(arm, values):
        def call(index):
            clock.now += step
            order.append((arm, index))
            return values[index % len(values)]
        return call

    measured = adaptive.measure_arms([(caller(arm, values), first_calls, None) for
                                      arm, (values, first_calls) in enumerate(arms)],
                                     settings, clock)
    return measured, order


@test
def arms_alternate_in_reversed_order_each_round():
    noisy = recorded(4000, 1.0, seed=5)
    (a, b, c), order = run_arms([(noisy, 3), (noisy, 2), (noisy, 1)],
                                dict(SETTINGS, call_cap=9), 0.001)
    rounds = [arm for arm, index in order]
    assert rounds[:12] == [0, 0, 0, 1, 1, 2, 2, 1, 1, 0, 0, 0]
    assert rounds[12:18] == [0, 0, 0, 1, 1, 2]
    # the caps are each arm's own: every arm ends with its 9 calls
    assert [len(samples) for samples, _ in (a, b, c)] == [9, 9, 9]
    assert {stop for _, stop in (a, b, c)} == {"call_cap"}


@test
def a_stopped_arm_goes_on_while_another_does_not():
    # the steady arm is fine after its first round, but keeps timing beside the noisy one
    # until its own time cap: both arms span the same 4 s, 2 s (32 calls of 1/16 s) each
    steady = [1.0, 1.001, 0.999]
    noisy = recorded(4000, 2.0, seed=5)
    ((steady_samples, steady_stop), (noisy_samples, noisy_stop)), _ = run_arms(
        [(steady, 10), (noisy, 10)], SETTINGS, 1 / 16)
    assert (len(steady_samples), steady_stop) == (32, "fine")
    assert (len(noisy_samples), noisy_stop) == (32, "time_cap")


@test
def arms_stop_together_once_every_rule_says_stop():
    steady = [1.0, 1.001, 0.999]
    spread = recorded(4000, 0.3, seed=3)
    ((steady_samples, steady_stop), (spread_samples, spread_stop)), _ = run_arms(
        [(steady, 50), (spread, 50)], AT_TARGET, 0.0001)
    assert spread_stop == "tight" and len(steady_samples) == len(spread_samples) > 50
    assert steady_stop == "fine"


@test
def an_arm_that_leaves_does_not_stop_the_others():
    noisy = recorded(4000, 2.0, seed=5)

    def failing(index):
        if index == 12:
            raise adaptive.Leave()
        return 1.0

    clock = FakeClock()

    def call(index):
        clock.now += 1 / 16
        return noisy[index]

    (left, left_stop), (kept, kept_stop) = adaptive.measure_arms(
        [(failing, 10, None), (call, 10, None)], SETTINGS, clock)
    assert (len(left), left_stop) == (12, "left")
    assert (len(kept), kept_stop) == (32, "time_cap")


@test
def a_clock_step_widens_an_interval_of_ties():
    # a 3.1 us kernel read by a 32 ns clock (CUPTI on an H100): 100 samples on three clock
    # values, the middle 60 tied, so the order statistics fall on one value
    step = 0.032e-3
    samples = [3.104e-3] * 20 + [3.136e-3] * 60 + [3.168e-3] * 20
    assert adaptive.median_interval(samples) == (3.136e-3, 3.136e-3)
    assert abs(adaptive.clock_step(samples) - step) < 1e-12
    # one step wide, not zero: about 0.5% either way, not yet the fine target
    assert abs(adaptive.relative_half_width(samples) - step / 2 / 3.136e-3) < 1e-9
    assert adaptive.stop_reason(samples, 0.05, SETTINGS) is None
    # values a nanosecond apart are one clock value, rounded apart: the step stays 32 ns
    assert abs(adaptive.clock_step(samples + [3.137e-3, 3.105e-3]) - step) <= 1.01e-6
    # a fine clock shows no step worth the name: the interval is the order statistics'
    fine = recorded(200, 0.002)
    low, high = adaptive.median_interval(fine)
    assert adaptive.relative_half_width(fine) - (high - low) / 2 / adaptive.statistics.median(
        fine) < 1e-5
    assert adaptive.clock_step([1.0] * 10) == 0.0


@test
def plan_has_documented_defaults():
    assert adaptive.plan({}) == {"target_relative_ci": 0.02, "fine_relative_ci": 0.005,
                                 "tighten_seconds": 0.3, "max_seconds": 2.0,
                                 "call_cap": 1000}
    assert adaptive.plan({"max_seconds": 0.5})["max_seconds"] == 0.5


if __name__ == "__main__":
    sys.exit(tap.run())
