import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention written out: softmax(q k^T / sqrt(d)) v, in half precision."""

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return torch.matmul(torch.softmax(scores, dim=-1), v)


batch_size = 8
heads = 16
sequence = 1024
head_dim = 64


def get_inputs():
    shape = (batch_size, heads, sequence, head_dim)
    return [torch.randn(shape, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []
