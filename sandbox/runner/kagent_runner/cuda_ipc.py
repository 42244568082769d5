"""The CUDA driver and NVML calls the timing harness needs, through ctypes on libcuda.so.1 and
libnvidia-ml.so.1 (the driver's own libraries, always there where a GPU is).

A timed child exports each output's allocation as an IPC handle; the judge opens it and reads
the output itself, right when the call ends, so nothing the child runs after its call can
change what is compared. The judge also resets persisting L2 lines before each timed call,
and reads the GPU's clocks for the evidence bundle.
"""
import ctypes

import torch

CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
HANDLE_BYTES = 64


class CUipcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * HANDLE_BYTES)]


class DriverError(Exception):
    pass


_driver = None


def driver():
    global _driver
    if _driver is None:
        library = ctypes.CDLL("libcuda.so.1")
        library.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                                    ctypes.POINTER(ctypes.c_size_t),
                                                    ctypes.c_uint64]
        library.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(CUipcMemHandle), ctypes.c_uint64]
        library.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                                  CUipcMemHandle, ctypes.c_uint]
        library.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        library.cuCtxResetPersistingL2Cache.argtypes = []
        _driver = library
    return _driver


def _check(result, call):
    if result != 0:
        raise DriverError(f"{call} failed with CUDA error {result}")


class Exporter:
    """Child side: the IPC handle of the allocation behind a tensor, cached by allocation."""

    def __init__(self):
        self.handles = {}

    def describe(self, tensor):
        """{"handle", "offset", "size"}: the allocation's handle (hex), the tensor's first
        byte's offset in it, and the allocation's size."""
        library = driver()
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        pointer = tensor.data_ptr()
        _check(library.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), pointer),
               "cuMemGetAddressRange")
        handle = self.handles.get(base.value)
        if handle is None:
            raw = CUipcMemHandle()
            _check(library.cuIpcGetMemHandle(ctypes.byref(raw), base.value), "cuIpcGetMemHandle")
            # all 64 bytes (the c_char field would stop at the first zero byte)
            handle = ctypes.string_at(ctypes.addressof(raw), HANDLE_BYTES).hex()
            self.handles[base.value] = handle
        return {"handle": handle, "offset": pointer - base.value, "size": size.value}


class _Allocation:
    """A device allocation seen through __cuda_array_interface__, as bytes."""

    def __init__(self, pointer, size):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1",
                                         "data": (pointer, False), "version": 3}


class Importer:
    """Judge side: opens handles once each and builds the tensors they describe."""

    def __init__(self):
        self.opened = {}
        self.pointers = []

    def close(self):
        """Closes every handle opened (the judge is kept for the next evaluation: an open
        handle would keep the ended child's memory allocated); the tensors built on them
        must be gone."""
        self.opened = {}
        torch.cuda.synchronize()
        for pointer in self.pointers:
            driver().cuIpcCloseMemHandle(pointer)
        self.pointers = []

    def tensor(self, description, dtype, shape, stride):
        """The child's output as a tensor over its memory (no copy), or raises DriverError /
        ValueError when the description does not fit its allocation."""
        handle = description.get("handle")
        offset, size = description.get("offset"), description.get("size")
        if (not isinstance(handle, str) or len(handle) != 2 * HANDLE_BYTES
                or not isinstance(offset, int) or not isinstance(size, int) or offset < 0
                or size <= 0):
            raise ValueError("malformed output handle")
        element = torch.empty((), dtype=dtype).element_size()
        if offset % element:
            raise ValueError("output is not aligned to its element size")
        if any(s < 0 for s in stride) or len(stride) != len(shape):
            raise ValueError("output strides are malformed")
        span = 1 + sum((extent - 1) * step for extent, step in zip(shape, stride)) \
            if all(extent > 0 for extent in shape) else 0
        if offset + span * element > size:
            raise ValueError("output reaches past its allocation")
        bytes_view = self.opened.get(handle)
        if bytes_view is None:
            raw = CUipcMemHandle()
            ctypes.memmove(ctypes.addressof(raw), bytes.fromhex(handle), HANDLE_BYTES)
            pointer = ctypes.c_uint64()
            _check(driver().cuIpcOpenMemHandle_v2(ctypes.byref(pointer), raw,
                                                  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                   "cuIpcOpenMemHandle")
            bytes_view = torch.as_tensor(_Allocation(pointer.value, size), device="cuda")
            self.opened[handle] = bytes_view
            self.pointers.append(pointer.value)
        if bytes_view.numel() < offset + span * element:
            raise ValueError("output reaches past its allocation")
        result = torch.empty(0, dtype=dtype, device="cuda")
        result.set_(bytes_view.untyped_storage(), offset // element, tuple(shape), tuple(stride))
        return result


def reset_persisting_l2():
    """Every persisting L2 line back to normal (device-wide), so no access-policy window a
    child set survives into the next call; None, or why it could not be done."""
    try:
        result = driver().cuCtxResetPersistingL2Cache()
    except (OSError, AttributeError) as error:
        return str(error)
    return None if result == 0 else f"cuCtxResetPersistingL2Cache failed with error {result}"


NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2


def gpu_clocks(pci_bus_id):
    """{"sm_mhz", "memory_mhz", "sm_max_mhz", "memory_max_mhz"} of the GPU at a PCI bus id
    ("0000:19:00.0"), read right after the timed calls; None where NVML cannot tell."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None
        device = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(device)):
            return None
        result = {}
        for key, reader, clock in (("sm_mhz", nvml.nvmlDeviceGetClockInfo, NVML_CLOCK_SM),
                                   ("memory_mhz", nvml.nvmlDeviceGetClockInfo, NVML_CLOCK_MEM),
                                   ("sm_max_mhz", nvml.nvmlDeviceGetMaxClockInfo, NVML_CLOCK_SM),
                                   ("memory_max_mhz", nvml.nvmlDeviceGetMaxClockInfo,
                                    NVML_CLOCK_MEM)):
            value = ctypes.c_uint()
            result[key] = int(value.value) if reader(device, clock, ctypes.byref(value)) == 0 \
                else None
        return result
    except (OSError, AttributeError):
        return None
