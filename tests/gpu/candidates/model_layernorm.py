"""A Triton LayerNorm for a LayerNorm hot spot of tests/gpu/models/transformer.py (a
sub-problem of `kagent model`): one program per row, the row in registers, float32
statistics. Parameters under the sub-problem's names (module.weight, module.bias)."""
import torch
import triton
import triton.language as tl


@triton.jit
def layer_norm_rows(x, weight, bias, y, columns, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < columns
    values = tl.load(x + row * columns + offsets, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(values, axis=0) / columns
    centred = tl.where(mask, values - mean, 0.0)
    variance = tl.sum(centred * centred, axis=0) / columns
    scale = 1.0 / tl.sqrt(variance + eps)
    w = tl.load(weight + offsets, mask=mask, other=1.0)
    b = tl.load(bias + offsets, mask=mask, other=0.0)
    tl.store(y + row * columns + offsets, centred * scale * w + b, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, dim=1024):
        super().__init__()
        self.module = torch.nn.LayerNorm(dim)

    def forward(self, x0):
        columns = x0.shape[-1]
        x = x0.contiguous()
        y = torch.empty_like(x)
        layer_norm_rows[(x.numel() // columns,)](
            x, self.module.weight, self.module.bias, y, columns, self.module.eps,
            BLOCK=triton.next_power_of_2(columns), num_warps=4)
        return y
