"""From completions to rewards: extract each candidate, judge them all in one request, map
each verdict to a number (RewardMapping; docs/reward-service.md)."""
import math
from dataclasses import dataclass

from .client import Client
from .extract import extract_source


@dataclass
class RewardMapping:
    """The reward of each outcome. A correct candidate earns `correct`, plus, when its speedup
    over eager PyTorch is credited (its own kernels did the work: the verdict's credit rule),
    `speedup_weight * log2(speedup)` held to [speedup_floor, speedup_cap]: a 2x kernel earns
    1 + 0.5 by default, one slower than eager less than 1 but never below 1 + floor."""
    no_code: float = 0.0          # no fenced block defining ModelNew in the completion
    compile_error: float = 0.0    # did not import or compile
    runtime_error: float = 0.1    # runtime_error, timeout, crashed: it ran and failed
    incorrect: float = 0.2        # ran, wrong outputs
    rejected: float = -1.0        # tampering, forbidden behaviour (reward hacking)
    correct: float = 1.0
    speedup_weight: float = 0.5
    speedup_floor: float = -0.5
    speedup_cap: float = 2.0
    error: float = 0.0            # no verdict (the problem or the evaluator failed)

    def speedup_bonus(self, verdict):
        timing = verdict.get("timing") or {}
        speedup = timing.get("speedup_vs_eager")
        credit = verdict.get("credit") or {}
        if not isinstance(speedup, (int, float)) or speedup <= 0 or \
                credit.get("credited") is False:
            return 0.0
        bonus = self.speedup_weight * math.log2(speedup)
        return min(max(bonus, self.speedup_floor), self.speedup_cap)


def reward_from_verdict(verdict, mapping=None):
    """One verdict (or error object, or None for no code) as a float."""
    mapping = mapping or RewardMapping()
    if verdict is None:
        return mapping.no_code
    status = verdict.get("status")
    if status == "correct":
        return mapping.correct + mapping.speedup_bonus(verdict)
    if status == "incorrect":
        return mapping.incorrect
    if status == "compile_error":
        return mapping.compile_error
    if status in ("runtime_error", "timeout", "crashed"):
        return mapping.runtime_error
    if status == "rejected":
        return mapping.rejected
    return mapping.error


def score(problem, completions, client=None, options=None, mapping=None, timeout=None):
    """(rewards, verdicts) for completions (strings or chat messages), in order. problem is
    one problem (a path or its source) for all, or a list with one per completion (as TRL
    passes a dataset column): each distinct problem is one request, all queued at once so
    that kagentd's lanes run them side by side. A completion without code gets
    mapping.no_code and the verdict None, and is not sent."""
    client = client or Client()
    completions = list(completions)
    if isinstance(problem, (list, tuple)):
        if len(problem) != len(completions):
            raise ValueError(f"{len(problem)} problems for {len(completions)} completions")
        problems = list(problem)
    else:
        problems = [problem] * len(completions)
    sources = [extract_source(completion) for completion in completions]
    groups = {}  # problem -> indexes of its completions with code, in order
    for index, (each, source) in enumerate(zip(problems, sources)):
        if source is not None:
            groups.setdefault(each, []).append(index)
    requests = [(indexes, client.submit(each, [sources[i] for i in indexes], options))
                for each, indexes in groups.items()]
    verdicts = [None] * len(completions)
    for indexes, request_id in requests:
        for index, verdict in zip(indexes, client.wait(request_id, timeout)["verdicts"]):
            verdicts[index] = verdict
    return [reward_from_verdict(verdict, mapping) for verdict in verdicts], verdicts


def reward(problem, completions, client=None, options=None, mapping=None, timeout=None):
    """One float per completion: kagent's verdict on the code it holds, mapped by mapping."""
    return score(problem, completions, client, options, mapping, timeout)[0]
