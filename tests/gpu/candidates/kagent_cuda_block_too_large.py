# Asks for 2048 threads per block: refused with the device's limit before launching.
import torch
import torch.nn as nn
from kagent_runner import cuda

SOURCE = r"""
extern "C" __global__ void relu(const float* __restrict__ x, float* __restrict__ out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}
"""

module = cuda.compile(SOURCE, kernels=["relu"])


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        module.relu[(x.numel() + 2047) // 2048, 2048](x, out, x.numel())
        return out
