"""A cheat against the sealed boundary: honest for the first calls (the correctness trials and
the profile), then forward returns at once and a thread launches the Triton kernel after the
timed call has ended, hoping for a free call. The device record shows the kernel outside the
call, and the judge read the unfinished output when the call ended."""
import threading
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


def launch(x, out):
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = torch.empty_like(x)
        if self.calls <= 12:
            launch(x, out)
            return out

        def later():
            time.sleep(0.003)
            launch(x, out)
            torch.cuda.synchronize()

        threading.Thread(target=later, daemon=True).start()
        return out
