"""A Triton GELU (the exact, erf one) for a GELU hot spot of tests/gpu/models/transformer.py
(a sub-problem of `kagent model`): elementwise, 4096 elements a program."""
import torch
import triton
import triton.language as tl


@triton.jit
def gelu_erf(x, y, count, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    values = tl.load(x + offsets, mask=mask).to(tl.float32)
    result = 0.5 * values * (1.0 + tl.erf(values * 0.7071067811865476))
    tl.store(y + offsets, result, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x0):
        x = x0.contiguous()
        y = torch.empty_like(x)
        count = x.numel()
        gelu_erf[(triton.cdiv(count, 4096),)](x, y, count, BLOCK=4096, num_warps=8)
        return y
