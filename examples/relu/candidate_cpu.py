import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """A stand-in for machines without a GPU (`kagent eval --device cpu`): plain torch, since
    Triton and CUDA kernels need a GPU. On a GPU, kagent rejects a candidate like this one,
    because its forward runs no kernel of its own; use candidate_triton.py there."""

    def forward(self, x):
        return torch.clamp_min(x, 0.0)
