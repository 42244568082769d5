#!/usr/bin/env python3
"""The problem's inputs from a seed (kagent_runner/problem.py): seed_everything draws the same
numbers torch.manual_seed would (the CPU generator; CUDA where there is one), so inputs stay
those of every earlier verdict. Prints TAP."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
from tap import test  # noqa: E402

import torch  # noqa: E402

from kagent_runner import problem  # noqa: E402


@test
def the_same_numbers_as_torch_manual_seed():
    for seed in (0, 7, 2 ** 40 + 3):
        problem.seed_everything(seed)
        ours = (torch.rand(64), torch.randn(8, 8), torch.randint(0, 100, (16,)), random.random())
        torch.manual_seed(seed)
        random.seed(seed)
        theirs = (torch.rand(64), torch.randn(8, 8), torch.randint(0, 100, (16,)),
                  random.random())
        assert all(torch.equal(a, b) for a, b in zip(ours[:3], theirs[:3])), seed
        assert ours[3] == theirs[3]
    if torch.cuda.is_available():
        problem.seed_everything(11)
        ours = torch.randn(32, device="cuda")
        torch.manual_seed(11)
        assert torch.equal(ours, torch.randn(32, device="cuda"))


if __name__ == "__main__":
    sys.exit(tap.run())
