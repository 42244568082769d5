import torch
import torch.nn as nn


class Model(nn.Module):
    """A KernelBench-format problem: ReLU over a 1 GiB input."""

    def forward(self, x):
        return torch.relu(x)


batch_size = 4096
dim = 65536


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
