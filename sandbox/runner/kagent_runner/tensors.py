"""Tensors the judge shares with the candidate child without copying them through a pipe.

On a GPU the judge allocates the buffers and sends CUDA IPC handles (torch's own reducers);
on the CPU both sides map the same file in the candidate's scratch folder. Either way the
buffers belong to the judge: it fills the inputs, the candidate writes its outputs into the
receive buffers, and the judge reads both after the candidate has answered.
"""
import os

import torch


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def dtype_from_name(name):
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


class SharedBuffers:
    """Judge side: buffers shaped like `templates`, shareable with the candidate child."""

    def __init__(self, templates, device, scratch_directory, label):
        self.tensors = []
        self.descriptors = []
        for index, template in enumerate(templates):
            if device == "cpu":
                tensor, descriptor = self._file_tensor(template, scratch_directory,
                                                       f"{label}-{index}.bin")
            else:
                tensor = torch.empty(template.shape, dtype=template.dtype, device=template.device)
                descriptor = {"kind": "ipc", "tensor": tensor}
            self.tensors.append(tensor)
            self.descriptors.append(descriptor)

    @staticmethod
    def _file_tensor(template, scratch_directory, name):
        path = os.path.join(scratch_directory, name)
        size = template.numel() * template.element_size()
        with open(path, "wb") as handle:
            handle.truncate(max(size, 1))
        # The sandboxed child runs as another user when the worker is root.
        os.chmod(path, 0o666)
        storage = torch.from_file(path, shared=True, size=max(template.numel(), 1),
                                  dtype=template.dtype)
        tensor = storage[: template.numel()].view(template.shape)
        return tensor, {"kind": "file", "path": path, "dtype": dtype_name(template.dtype),
                        "shape": list(template.shape), "numel": template.numel()}


def open_shared(descriptors):
    """Candidate side: the tensors behind the judge's descriptors."""
    tensors = []
    for descriptor in descriptors:
        if descriptor["kind"] == "ipc":
            tensors.append(descriptor["tensor"])
        else:
            dtype = dtype_from_name(descriptor["dtype"])
            numel = descriptor["numel"]
            storage = torch.from_file(descriptor["path"], shared=True, size=max(numel, 1),
                                      dtype=dtype)
            tensors.append(storage[:numel].view(descriptor["shape"]))
    return tensors


def pickler_for(device):
    """CUDA tensors need torch's multiprocessing reducers (IPC handles); CPU data goes by value."""
    if device == "cpu":
        return None
    import torch.multiprocessing  # noqa: F401  (registers the CUDA reducers)
    from multiprocessing.reduction import ForkingPickler

    return ForkingPickler.dumps
