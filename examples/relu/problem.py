import torch
import torch.nn as nn


class Model(nn.Module):
    """A KernelBench-format problem: ReLU over a 64 MiB input (small enough for the CPU)."""

    def forward(self, x):
        return torch.relu(x)


batch_size = 1024
dim = 16384


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
