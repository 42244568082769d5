import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def wild_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    # far outside any allocation
    tl.store(out_ptr + offsets + (1 << 40), tl.load(x_ptr + offsets))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        wild_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
