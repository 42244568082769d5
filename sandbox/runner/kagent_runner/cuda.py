"""CUDA kernels for candidates without a build system: NVRTC with kagent's cubin cache, the
driver API for loading and launching (libkagent-cuda.so through ctypes, see
include/kagent/sandbox/cuda_launch.h). A compile takes a fraction of a second where load_inline spends
about a minute building an extension.

    from kagent_runner import cuda

    module = cuda.compile(SOURCE, kernels=["relu"])
    module.relu[blocks, 256](out, x, n)              # grid, block[, shared[, stream]]
    module.relu(out, x, n, grid=blocks, block=256)   # the same, by keyword

CUDA tensors pass their data pointers (on the current device, contiguous); Python numbers are
converted by the kernel's parameter types, read from its signature; mismatches raise TypeError.
The library is found through KAGENT_CUDA_LIBRARY, which the runner sets; cubins are cached in
KAGENT_CUDA_CACHE_DIR (the runner points it into the candidate's cache), else by kagent's rules.
"""
import ctypes
import errno
import json
import numbers
import os
import struct

__all__ = ["compile", "CompileError", "CudaError", "Module", "Kernel"]


class CompileError(RuntimeError):
    """The source does not compile, or a named kernel does not exist in it."""


class CudaError(RuntimeError):
    """No GPU or driver, a launch the device cannot run, or a driver failure."""


_SCALARS = {
    "bool": ctypes.c_bool, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8,
    "int16": ctypes.c_int16, "uint16": ctypes.c_uint16, "int32": ctypes.c_int32,
    "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64,
    "float": ctypes.c_float, "double": ctypes.c_double,
}
_ERROR_SIZE = 16384
_library = None


def _library_path():
    path = os.environ.get("KAGENT_CUDA_LIBRARY")
    if path:
        return path
    raise CudaError("libkagent-cuda.so was not found: KAGENT_CUDA_LIBRARY is not set (kagent "
                    "was built without NVRTC, or this is not running under kagent)")


def _load_library():
    global _library
    if _library is not None:
        return _library
    path = _library_path()
    try:
        library = ctypes.CDLL(path)
    except OSError as error:
        raise CudaError(f"cannot load {path}: {error}") from None
    strings = ctypes.POINTER(ctypes.c_char_p)
    library.kagent_cuda_module_compile.argtypes = [
        ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, strings, ctypes.c_size_t, strings,
        ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
        ctypes.c_size_t]
    library.kagent_cuda_module_load.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p,
                                                ctypes.c_size_t]
    library.kagent_cuda_module_describe.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                    ctypes.c_size_t, ctypes.c_char_p,
                                                    ctypes.c_size_t]
    library.kagent_cuda_module_launch.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint),
        ctypes.POINTER(ctypes.c_uint), ctypes.c_size_t, ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    library.kagent_cuda_module_free.argtypes = [ctypes.c_void_p]
    for name in ("compile", "load", "describe", "launch"):
        getattr(library, f"kagent_cuda_module_{name}").restype = ctypes.c_int
    library.kagent_cuda_module_free.restype = None
    _library = library
    return library


def _strings(values):
    encoded = [value.encode() for value in values]
    return (ctypes.c_char_p * max(1, len(encoded)))(*encoded), len(encoded)


def _current_device():
    import torch

    # the runner initialised CUDA on its GPU; elsewhere the driver's device 0 is asked
    return torch.cuda.current_device() if torch.cuda.is_initialized() else 0


def _build(source, kernels, options=(), arch=None, device=None, cache_directory=None):
    """Compiles and finds the kernels without loading them (arch given: no GPU needed)."""
    if isinstance(kernels, str):
        kernels = [kernels]
    if not isinstance(source, str) or not kernels or not all(isinstance(k, str) for k in kernels):
        raise TypeError("cuda.compile(source, kernels=[names], options=[...]) takes a source "
                        "string and a list of kernel names")
    if isinstance(options, str):
        options = [options]
    library = _load_library()
    if device is None:
        device = _current_device()
    if cache_directory is None:
        cache_directory = os.environ.get("KAGENT_CUDA_CACHE_DIR") or None
    names, name_count = _strings(kernels)
    flags, flag_count = _strings(list(options))
    handle = ctypes.c_void_p()
    error = ctypes.create_string_buffer(_ERROR_SIZE)
    status = library.kagent_cuda_module_compile(
        source.encode(), arch.encode() if arch else None, int(device), names, name_count, flags,
        flag_count, cache_directory.encode() if cache_directory else None, ctypes.byref(handle),
        error, _ERROR_SIZE)
    message = error.value.decode(errors="replace")
    # a source that does not compile, a missing or ambiguous kernel, a bad option or arch
    if status in (-errno.ENOEXEC, -errno.ENOENT, -errno.EINVAL):
        raise CompileError(message)
    if status < 0:
        raise CudaError(message)
    return Module(library, handle, list(kernels), device)


def compile(source, kernels, options=(), arch=None, cache_directory=None):  # noqa: A001
    """Compiles source for the current device and loads the named kernels: extern "C" names,
    C++ function names, or name expressions for templates ("scale<float>")."""
    module = _build(source, kernels, options, arch=arch, cache_directory=cache_directory)
    module._load()
    return module


class Module:
    def __init__(self, library, handle, names, device):
        self._library = library
        self._handle = handle
        self._device = device
        self.info = self._describe()
        self.kernels = {}
        for index, entry in enumerate(self.info["kernels"]):
            kernel = Kernel(self, index, entry)
            self.kernels[names[index]] = kernel
            if (names[index].isidentifier() and names[index] not in self.__dict__
                    and not hasattr(type(self), names[index])):
                setattr(self, names[index], kernel)

    def __getitem__(self, name):
        return self.kernels[name]

    def _describe(self):
        buffer = ctypes.create_string_buffer(1 << 20)
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        if self._library.kagent_cuda_module_describe(self._handle, buffer, len(buffer), error,
                                                     _ERROR_SIZE) < 0:
            raise CudaError(error.value.decode(errors="replace"))
        return json.loads(buffer.value.decode())

    def _load(self):
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        if self._library.kagent_cuda_module_load(self._handle, int(self._device), error,
                                                 _ERROR_SIZE) < 0:
            raise CudaError(error.value.decode(errors="replace"))
        self.info = self._describe()

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._library.kagent_cuda_module_free(handle)


def _dims(value, what):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, not {value!r}")
    dims = []
    for item in value:
        if not isinstance(item, numbers.Integral) or isinstance(item, bool):
            raise TypeError(f"{what} must hold ints, not {item!r}")
        if not 0 <= int(item) < 2**32:
            raise ValueError(f"{what} dimension {item} is out of range")
        dims.append(int(item))
    return (ctypes.c_uint * 3)(*(dims + [1] * (3 - len(dims))))


def _half_bits(value):
    return struct.unpack("<H", struct.pack("<e", float(value)))[0]


def _bfloat16_bits(value):
    bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40  # NaN stays NaN
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _marshal_one(kernel, index, kind, value, device):
    """One argument as a ctypes object for parameter `index` of type `kind`."""
    where = f"{kernel}: argument {index} ({kind})"
    if isinstance(value, ctypes._SimpleCData) or isinstance(value, ctypes.Structure):
        return value
    tensor = _as_tensor(value)
    if kind == "pointer" or (kind is None and tensor is not None):
        if value is None:
            return ctypes.c_void_p(0)
        if tensor is not None:
            if not tensor.is_cuda:
                raise TypeError(f"{where}: expected a CUDA tensor, got a tensor on "
                                f"{tensor.device}")
            if device is not None and tensor.device.index != device:
                raise TypeError(f"{where}: the tensor is on {tensor.device}, not on the "
                                f"current device cuda:{device}")
            if not tensor.is_contiguous():
                raise TypeError(f"{where}: the tensor is not contiguous (call .contiguous())")
            return ctypes.c_void_p(tensor.data_ptr())
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return ctypes.c_void_p(int(value))
        raise TypeError(f"{where}: expected a CUDA tensor, got {type(value).__name__}")
    if tensor is not None:
        raise TypeError(f"{where}: got a tensor for a scalar parameter (pass .item())")
    if kind is None or kind == "unknown":
        raise TypeError(f"{where}: kagent cannot read this parameter's type; pass a ctypes "
                        "value such as ctypes.c_int(n)")
    if kind == "bool":
        if not isinstance(value, (bool, numbers.Integral)):
            raise TypeError(f"{where}: expected a bool, got {type(value).__name__}")
        return ctypes.c_bool(bool(value))
    if kind in ("float", "double", "half", "bfloat16"):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"{where}: expected a number, got {type(value).__name__}")
        if kind == "half":
            return ctypes.c_uint16(_half_bits(value))
        if kind == "bfloat16":
            return ctypes.c_uint16(_bfloat16_bits(value))
        return _SCALARS[kind](float(value))
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{where}: expected an int, got {type(value).__name__}")
    bits = ctypes.sizeof(_SCALARS[kind]) * 8
    low, high = (0, 2**bits) if kind.startswith("u") else (-(2**(bits - 1)), 2**(bits - 1))
    if not low <= int(value) < high:
        raise TypeError(f"{where}: {value} does not fit")
    return _SCALARS[kind](int(value))


def _as_tensor(value):
    try:
        import torch
    except ImportError:  # pragma: no cover - the runner always has torch
        return None
    return value if isinstance(value, torch.Tensor) else None


def marshal(kernel, parameters, args, device=None):
    """The ctypes values for args, checked against parameters (type names, or None when the
    signature could not be read). Raises TypeError naming the offending argument."""
    if parameters is not None and len(args) != len(parameters):
        raise TypeError(f"{kernel} takes {len(parameters)} arguments "
                        f"({', '.join(parameters)}), {len(args)} given")
    return [_marshal_one(kernel, index, parameters[index] if parameters is not None else None,
                         value, device) for index, value in enumerate(args)]


class Kernel:
    def __init__(self, module, index, info):
        self._module = module
        self._index = index
        self.name = info["name"]
        self.signature = info.get("signature")
        self.parameters = info.get("parameters")
        self.registers = info.get("registers")

    def __repr__(self):
        return f"<kagent cuda kernel {self.signature or self.name}>"

    def __getitem__(self, launch):
        if not isinstance(launch, tuple) or not 2 <= len(launch) <= 4:
            raise TypeError(f"{self.name}[grid, block(, shared(, stream))]")
        grid, block, shared, stream = (tuple(launch) + (0, None))[:4]

        def launcher(*args):
            return self(*args, grid=grid, block=block, shared=shared, stream=stream)

        return launcher

    def __call__(self, *args, grid=None, block=None, shared=0, stream=None):
        if grid is None or block is None:
            raise TypeError(f"{self.name}: give grid= and block=")
        grid_dims, block_dims = _dims(grid, "grid"), _dims(block, "block")
        if not isinstance(shared, numbers.Integral) or not 0 <= int(shared) < 2**32:
            raise TypeError(f"{self.name}: shared must be a byte count, not {shared!r}")
        values = marshal(self.name, self.parameters, args, self._module._device)
        if stream is None:
            import torch

            stream = torch.cuda.current_stream().cuda_stream
        elif not isinstance(stream, numbers.Integral):
            stream = stream.cuda_stream
        pointers = (ctypes.c_void_p * max(1, len(values)))(
            *[ctypes.addressof(value) for value in values])
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        module = self._module
        status = module._library.kagent_cuda_module_launch(
            module._handle, self._index, grid_dims, block_dims, int(shared),
            ctypes.c_void_p(int(stream)), pointers, len(values), error, _ERROR_SIZE)
        if status < 0:
            message = error.value.decode(errors="replace")
            if status == -errno.EINVAL and "arguments" in message:
                raise TypeError(message)
            raise CudaError(message)
