"""kagent's verdicts as the reward of TRL's GRPOTrainer.

TRL calls each reward function as reward_func(completions, **kwargs) -> list[float], with
every column of the training dataset passed as a keyword argument (one value per completion),
so a dataset with a "problem" column (a KernelBench problem's path on the kagentd machine, or
its source) tells the reward which problem each completion answers. Each distinct problem in
the batch becomes one POST /v1/evaluations, queued at once; kagentd runs them on its lanes.

Run on a machine that reaches kagentd (its Unix socket, or KAGENT_SOCKET=http://HOST:PORT with
KAGENT_TOKEN): python3 trl_grpo.py PROBLEM.py [PROBLEM.py ...]
"""
import sys

from kagent_reward import Client, RewardMapping, score

client = Client()  # $KAGENT_SOCKET, else kagentd's default socket
mapping = RewardMapping()  # docs/reward-service.md: 0 no code ... 1 + 0.5 log2(speedup)


def kagent_reward(completions, problem, **kwargs):
    """The reward function: TRL passes the dataset's "problem" column as `problem`."""
    rewards, verdicts = score(problem, completions, client=client, mapping=mapping,
                              options={"trials": 3})
    return rewards


def main(problem_paths):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    prompts = []
    for path in problem_paths:
        with open(path) as handle:
            source = handle.read()
        prompts.append({
            "prompt": [{"role": "user", "content":
                        "Write class ModelNew, a faster version of this PyTorch Model with "
                        "custom Triton kernels, as one complete Python file in a ```python "
                        f"block.\n\n```python\n{source}\n```"}],
            "problem": path})
    trainer = GRPOTrainer(
        model="Qwen/Qwen2.5-Coder-7B-Instruct",
        reward_funcs=kagent_reward,
        args=GRPOConfig(output_dir="grpo-kagent", num_generations=8,
                        max_completion_length=4096),
        train_dataset=Dataset.from_list(prompts))
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[1:])
