#!/usr/bin/env python3
"""Which kernels count as the candidate's own (judge.is_own_kernel), on names as the demangler
writes them (c++filt's spelling, libiberty), without a GPU. Prints TAP for meson."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Skip, test  # noqa: E402
import tap  # noqa: E402

try:
    from kagent_runner import judge
except ImportError as error:  # the runner needs torch; without it everything skips
    judge = None
    IMPORT_ERROR = str(error)


def need_runner():
    if judge is None:
        raise Skip(f"the runner does not import: {IMPORT_ERROR}")


@test
def plain_and_templated_kernels_are_own():
    need_runner()
    assert judge.is_own_kernel("relu_kernel", {"relu_kernel"})
    assert judge.is_own_kernel("void scale<float>(float*, int)", {"scale"})
    assert judge.is_own_kernel("ns::fused(float const*, float*, long)", {"fused"})


@test
def anonymous_namespace_kernels_are_own():
    need_runner()
    assert judge.is_own_kernel("(anonymous namespace)::relu(float const*, float*, long)",
                               {"relu"})
    assert judge.is_own_kernel("void (anonymous namespace)::scale<float>(float*, int)",
                               {"scale"})


@test
def library_kernels_are_not_own():
    need_runner()
    assert not judge.is_own_kernel(
        "void at::native::vectorized_elementwise_kernel<4, at::native::relu>(int, float*)",
        {"vectorized_elementwise_kernel"})
    assert not judge.is_own_kernel("void cub::DeviceReduceKernel<float>(float*)",
                                   {"DeviceReduceKernel"})
    assert not judge.is_own_kernel("other_kernel(float*)", {"relu"})


sys.exit(tap.run())
