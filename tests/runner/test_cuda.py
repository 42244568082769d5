#!/usr/bin/env python3
"""kagent_runner.cuda without a GPU: argument marshaling, launch shapes, the messages for a
source that does not compile, a kernel that does not exist and a missing driver, and the
judge's own-kernel names for such candidates. Prints TAP for meson. With
KAGENT_CUDA_LIBRARY unset (kagent built without NVRTC) the library tests skip."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Skip, test  # noqa: E402
import tap  # noqa: E402
from kagent_runner import cuda, problem  # noqa: E402

try:
    import torch
except ImportError:  # the CPU suite needs torch too; without it the tensor tests skip
    torch = None

SOURCE = r"""
extern "C" __global__ void relu(const float *__restrict__ x, float *out, long n)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}
__global__ void __launch_bounds__(256) scale(float *x, unsigned n, double factor, __half h)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = (float)(x[i] * factor) + __half2float(h);
}
"""
HEADER = "#include <cuda_fp16.h>\n"
def raises(kind, needle, function, *args, **kwargs):
    try:
        function(*args, **kwargs)
    except kind as error:
        assert needle in str(error), f"{needle!r} not in {str(error)!r}"
        return str(error)
    raise AssertionError(f"no {kind.__name__} raised")


def need_library():
    if not os.environ.get("KAGENT_CUDA_LIBRARY"):
        raise Skip("libkagent-cuda.so was not built (no NVRTC)")


@test
def marshal_scalars():
    types = ["int32", "uint32", "int64", "uint64", "float", "double", "bool", "int8", "uint16"]
    values = cuda.marshal("k", types, [-3, 7, -(2**40), 2**63, 1.5, 2, True, -128, 65535])
    assert [v.value for v in values] == [-3, 7, -(2**40), 2**63, 1.5, 2.0, True, -128, 65535]
    assert isinstance(values[0], ctypes.c_int32) and isinstance(values[4], ctypes.c_float)
    assert isinstance(values[5], ctypes.c_double) and isinstance(values[3], ctypes.c_uint64)
    half, bf16 = cuda.marshal("k", ["half", "bfloat16"], [1.0, -2.0])
    assert half.value == 0x3C00 and bf16.value == 0xC000, (hex(half.value), hex(bf16.value))
    raw = ctypes.c_int(5)
    assert cuda.marshal("k", ["unknown"], [raw])[0] is raw
    assert cuda.marshal("k", ["pointer"], [None])[0].value in (None, 0)


@test
def marshal_errors():
    raises(TypeError, "k takes 3 arguments (pointer, pointer, int64), 2 given",
           cuda.marshal, "k", ["pointer", "pointer", "int64"], [0, 0])
    raises(TypeError, "k: argument 1 (int32): expected an int, got float",
           cuda.marshal, "k", ["float", "int32"], [1.0, 2.5])
    raises(TypeError, "argument 0 (uint32): -1 does not fit", cuda.marshal, "k", ["uint32"], [-1])
    raises(TypeError, "argument 0 (int32): 2147483648 does not fit",
           cuda.marshal, "k", ["int32"], [2**31])
    raises(TypeError, "expected a number, got str", cuda.marshal, "k", ["float"], ["1"])
    raises(TypeError, "expected a CUDA tensor, got str", cuda.marshal, "k", ["pointer"], ["x"])
    raises(TypeError, "pass a ctypes value", cuda.marshal, "k", ["unknown"], [3])
    raises(TypeError, "pass a ctypes value", cuda.marshal, "k", None, [3])


@test
def marshal_tensors():
    if torch is None:
        raise Skip("no torch")
    raises(TypeError, "k: argument 0 (pointer): expected a CUDA tensor, got a tensor on cpu",
           cuda.marshal, "k", ["pointer"], [torch.zeros(4)])
    raises(TypeError, "got a tensor for a scalar parameter", cuda.marshal, "k", ["int64"],
           [torch.tensor(3)])


@test
def launch_shapes():
    assert list(cuda._dims(7, "grid")) == [7, 1, 1]
    assert list(cuda._dims((2, 3), "grid")) == [2, 3, 1]
    raises(TypeError, "grid must be an int or a tuple", cuda._dims, (1, 2, 3, 4), "grid")
    raises(TypeError, "block must hold ints", cuda._dims, (1.5,), "block")
    raises(ValueError, "out of range", cuda._dims, 2**32, "grid")


@test
def compiles_and_reads_parameters():
    need_library()
    module = cuda._build(HEADER + SOURCE, ["relu", "scale"], arch="sm_90a")
    assert module.relu.parameters == ["pointer", "pointer", "int64"], module.relu.parameters
    assert module.scale.parameters == ["pointer", "uint32", "double", "half"]
    assert module["scale"].signature == "scale(float*, unsigned int, double, __half)", \
        module.scale.signature
    raises(TypeError, "relu takes 3 arguments", module.relu.__call__, 1, grid=1, block=1)
    raises(TypeError, "relu: give grid= and block=", module.relu.__call__, 0, 0, 1)


@test
def compile_error_has_diagnostics():
    need_library()
    message = raises(cuda.CompileError, "does not compile", cuda._build,
                     "extern \"C\" __global__ void k(float *x)\n{\n  x[0] = nope;\n}\n", ["k"],
                     arch="sm_90a")
    assert "kernel.cu:3: error:" in message and "nope" in message, message


@test
def missing_kernel_lists_the_others():
    need_library()
    message = raises(cuda.CompileError, "kernel 'gelu' not found", cuda._build,
                     HEADER + SOURCE, ["gelu"], arch="sm_90a")
    assert "relu (extern \"C\")" in message and "scale(float*" in message, message


@test
def bad_option_is_a_compile_error():
    need_library()
    raises(cuda.CompileError, "not an accepted NVRTC option", cuda._build, SOURCE, ["relu"],
           options=["--keep"], arch="sm_90a")


@test
def no_driver():
    need_library()
    if os.environ.get("KAGENT_LIBCUDA") != "/nonexistent/libcuda.so.1":
        raise Skip("KAGENT_LIBCUDA is not /nonexistent/libcuda.so.1")
    raises(cuda.CudaError, "no NVIDIA driver found", cuda.compile, HEADER + SOURCE, ["relu"],
           arch="sm_90a")
    raises(cuda.CudaError, "no NVIDIA driver found", cuda.compile, HEADER + SOURCE, ["relu"])


FAKE_DRIVER_SCRIPT = r"""
import ctypes, os, sys
sys.path.insert(0, sys.argv[1])
from kagent_runner import cuda
fake = ctypes.CDLL(os.environ["KAGENT_LIBCUDA"])
record = (ctypes.c_int * 12).in_dll(fake, "fake_cuda_last_launch")
module = cuda.compile(sys.argv[2], kernels=["relu", "scale"])
assert module.info["arch"] == "sm_90a" and module.info["loaded"], module.info
module.relu[(5, 2), 128, 0, 0](0x1000, 0x2000, 2**40 + 3)
assert list(record[:7]) == [1, 5, 2, 1, 128, 1, 1], list(record)
low, high = record[10], record[11]
assert (high << 32) | (low & 0xFFFFFFFF) == 2**40 + 3, (low, high)
module.relu(None, 0, -1, grid=1, block=(16, 16), shared=65536, stream=0)
assert record[0] == 2 and record[4:7] == [16, 16, 1] and record[7] == 65536, list(record)
try:
    module.relu[1, 2048, 0, 0](0, 0, 1)
except cuda.CudaError as error:
    assert "block x dimension 2048" in str(error), error
else:
    raise AssertionError("a 2048-thread block was launched")
try:
    module.scale[1, 1, 0, 0](0, 1.5, 2.0, 1.0)
except TypeError as error:
    assert "scale: argument 1 (uint32): expected an int, got float" in str(error), error
else:
    raise AssertionError("a float was passed as unsigned")
print("fake driver: ok")
"""


@test
def launches_through_a_fake_driver():
    need_library()
    fake = os.environ.get("KAGENT_FAKE_LIBCUDA")
    if not fake:
        raise Skip("KAGENT_FAKE_LIBCUDA is not set")
    import subprocess

    result = subprocess.run(
        [sys.executable, "-c", FAKE_DRIVER_SCRIPT,
         os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"),
         HEADER + SOURCE], env=dict(os.environ, KAGENT_LIBCUDA=fake), capture_output=True,
        text=True, timeout=60)
    assert result.returncode == 0 and "fake driver: ok" in result.stdout, \
        result.stdout + result.stderr


@test
def own_kernel_names_of_cuda_candidates():
    source = ('module = cuda.compile(r"""\n' + SOURCE + '""", kernels=["relu", "scale"])\n')
    assert problem.own_kernel_names(source) == ["relu", "scale"], problem.own_kernel_names(source)


if __name__ == "__main__":
    sys.exit(tap.run())
