"""kagent's evaluator as a reward function (docs/reward-service.md in the kagent repository).

    from kagent_reward import reward, Client
    rewards = reward(problem, completions)             # list[float], one per completion
    rewards, verdicts = score(problem, completions)    # and kagent's verdicts themselves
"""
from .client import Client, DaemonError
from .extract import extract_source
from .rewards import RewardMapping, reward, reward_from_verdict, score

__all__ = ["Client", "DaemonError", "RewardMapping", "extract_source", "reward",
           "reward_from_verdict", "score"]
