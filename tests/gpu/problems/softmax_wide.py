import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over rows of 393216: every output is ~2.5e-6, so zeros pass atol=1e-4."""

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 64
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
