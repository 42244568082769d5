"""The Triton ReLU, from a candidate that first tries to open every GPU's device node: on a
host of several GPUs the sandbox leaves it its own lane's only (docs/sandbox.md, "Other GPUs
of the host"), so a second node that opens is a failure to import, not a verdict."""
import os
import re

opened = []
for name in sorted(os.listdir("/dev")):
    if re.fullmatch(r"nvidia[0-9]+", name):
        try:
            os.close(os.open(os.path.join("/dev", name), os.O_RDWR))
            opened.append(name)
        except OSError:
            pass
if len(opened) > 1:
    raise RuntimeError(f"the candidate could open the device nodes of several GPUs: {opened}")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
        return out
