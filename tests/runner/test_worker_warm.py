#!/usr/bin/env python3
"""The warm worker's Triton warm-up (kagent_runner/worker.py, _warm_triton): the compiler's
cache key is computed once in the worker, so a forked child (a candidate) finds it done, and
CUDA stays untouched so that forking stays safe. Prints TAP for meson."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
from tap import Skip, test  # noqa: E402

try:
    from triton.runtime import cache
except Exception:  # noqa: BLE001 - Triton is optional where there is no GPU
    cache = None

from kagent_runner import worker  # noqa: E402


@test
def the_cache_key_is_computed_before_any_fork():
    if cache is None:
        raise Skip("triton is not installed")
    cache.triton_key.cache_clear()
    worker._warm_triton()
    assert cache.triton_key.cache_info().currsize == 1, cache.triton_key.cache_info()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        # the child's first call must be a hit of the inherited cache, not a new hash
        before = cache.triton_key.cache_info().hits
        cache.triton_key()
        os.write(write, b"1" if cache.triton_key.cache_info().hits == before + 1 else b"0")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(child, 0)
    assert answer == b"1", answer


@test
def torch_registers_its_triton_operators_before_any_fork():
    if cache is None:
        raise Skip("triton is not installed")
    import torch

    worker._warm_triton()
    table = getattr(torch, "_TritonLibrary", None)
    if table is None or not hasattr(torch.cuda, "_register_triton_kernels"):
        raise Skip("this torch registers no Triton operators")
    assert ("_triton_bsr_dense_mm_out", "SparseCsrCUDA") in table.ops_table, table.ops_table


@test
def the_warm_up_leaves_cuda_alone():
    import torch

    worker._warm_triton()
    assert not torch.cuda.is_initialized()


if __name__ == "__main__":
    sys.exit(tap.run())
