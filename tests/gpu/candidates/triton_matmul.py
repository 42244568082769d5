import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK + tl.arange(0, BLOCK)
    cols = pid_n * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    for k in range(0, N, 32):
        ks = k + tl.arange(0, 32)
        a = tl.load(a_ptr + rows[:, None] * N + ks[None, :])
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :])
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)


class ModelNew(nn.Module):
    """A float32 matrix product in full float32 precision: correct and slower than cuBLAS."""

    def forward(self, a, b):
        N = a.shape[0]
        c = torch.empty_like(a)
        matmul_kernel[(N // 64, N // 64)](a, b, c, N, BLOCK=64)
        return c
