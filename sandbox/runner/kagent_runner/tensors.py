"""Tensors the judge shares with the candidate child without copying them through a pipe.

On a GPU the judge allocates the buffers and sends the CUDA IPC handles of their allocations
(cuda_ipc, not torch's reducers: torch keeps a shared buffer allocated until every receiver
has let go of it, and a killed candidate never does, which a judge kept between evaluations
would pay for with its memory); on the CPU both sides map the same file in the candidate's
scratch folder. Either way the
buffers belong to the judge: it fills the inputs, the candidate writes its outputs into the
receive buffers, and the judge reads both after the candidate has answered.

The judge checks that the candidate left its inputs alone with a keyed fingerprint of their
bytes (fingerprint), not with a second copy of every input: a 6 GB input costs a few chunks of
temporaries instead of 6 GB more.
"""
import os
import random

import torch

from . import cuda_ipc


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def dtype_from_name(name):
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


# the fingerprint's modulus, a prime larger than any word and any weight
_PRIME = (1 << 31) - 1
# weights below 2**24 and words below 2**16: a chunk of up to 2**23 products sums within int64
_WEIGHT_LIMIT = 1 << 24
_MAX_WORDS = 1 << 23
CHUNK = 1 << 24  # elements per step of the judge's chunked work (comparison, fingerprint)


def chunk_elements():
    """Elements per step of the judge's chunked work, which bounds its temporaries: CHUNK, or
    KAGENT_JUDGE_CHUNK_ELEMENTS (tests use a small one to span many chunks)."""
    try:
        return max(1, int(os.environ.get("KAGENT_JUDGE_CHUNK_ELEMENTS", CHUNK)))
    except ValueError:
        return CHUNK


def tensor_bytes(values):
    """Bytes held by the tensors among `values`."""
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


# The judge and the candidate's child need each other's freed device memory only on a full
# GPU (a 6.4 GB problem does not fit twice), but handing cached memory back to the driver and
# allocating it again each trial cost about 0.1 s a trial for the judge alone with eight
# evaluations on one H100 (issue 13). So cached memory above RELEASE_BYTES goes back only when
# the device's free memory is below RELEASE_ROOM times the room a step needs.
RELEASE_BYTES = 256 << 20
RELEASE_ROOM = 3
# captured when the runner is imported, before any candidate code exists (candidate.py)
_memory_reserved = torch.cuda.memory_reserved
_memory_allocated = torch.cuda.memory_allocated
_mem_get_info = torch.cuda.mem_get_info
_empty_cache = torch.cuda.empty_cache


def release_cached_memory(room_bytes):
    """Hands this process's cached, unused device memory back to the driver when the device
    is short of room for another process's next step (room_bytes: that step's inputs and
    outputs; see RELEASE_ROOM). Returns whether it did."""
    if not torch.cuda.is_initialized():
        return False
    if _memory_reserved() - _memory_allocated() < RELEASE_BYTES:
        return False
    if _mem_get_info()[0] >= RELEASE_ROOM * room_bytes:
        return False
    _empty_cache()
    return True


class Fingerprint:
    """A keyed checksum of tensors' bytes, computed on their device in bounded chunks.

    The bytes are read as 16-bit words w (1..65536); the fingerprint is the sum of
    w[i] * a[i % chunk] * m[chunk] modulo the prime p = 2**31 - 1, with secret weights a in
    1..2**24 - 1 and chunk multipliers m in 1..p - 1 drawn from `key`. Any change of a single
    word changes it (the change, a and m are nonzero and below a prime); changes of several
    words cancel out with a probability of about 2**-24 for weights the candidate cannot see,
    and the key is new for every evaluation. No full copy is made: a 6 GB input costs a few
    chunk-sized int64 temporaries."""

    def __init__(self, key):
        self.key = key
        self.weights = {}

    def _weights(self, device, count):
        """Weights for a tensor of `count` words: drawn from the key and the length alone, so
        that a tensor and its copy get the same ones whatever was fingerprinted between."""
        length = min(max(count, 1), chunk_elements(), _MAX_WORDS)
        weights = self.weights.get((str(device), length))
        if weights is None:
            generator = torch.Generator(device=device)
            generator.manual_seed((self.key * 1000003 + length) % (1 << 63))
            weights = torch.randint(1, _WEIGHT_LIMIT, (length,), generator=generator,
                                    dtype=torch.int64, device=device)
            self.weights[(str(device), length)] = weights
        return weights

    def __call__(self, values):
        """[one int per tensor of `values`] (non-tensors are skipped)."""
        prints = []
        for value in values:
            if not isinstance(value, torch.Tensor):
                continue
            flat = value.detach().reshape(-1)
            if not flat.is_contiguous():
                flat = flat.contiguous()
            raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
            even = raw.numel() // 2 * 2
            words = raw[:even].view(torch.int16)
            count = words.numel()
            weights = self._weights(words.device, count)
            step = weights.numel()
            generator = random.Random(self.key ^ count)
            total = torch.zeros((), dtype=torch.int64, device=words.device)
            for start in range(0, count, step):
                piece = words[start:start + step].to(torch.int64).add_((1 << 15) + 1)
                chunk = piece.mul_(weights[:piece.numel()]).sum().remainder_(_PRIME)
                # on the device: one synchronisation per tensor, not per chunk
                total = total.add_(chunk.mul_(generator.randrange(1, _PRIME))).remainder_(_PRIME)
            result = int(total)
            if even < raw.numel():  # an odd byte count: the last byte on its own
                result = (result + (int(raw[-1]) + 1) * generator.randrange(1, _PRIME)) % _PRIME
            prints.append((str(value.dtype), tuple(value.shape), result))
        return prints


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
                descriptor = device_descriptor(tensor)
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


def device_descriptor(tensor):
    """Judge side: how a child finds a device tensor of the judge's: its allocation's IPC
    handle, where the tensor lies in it, and its layout."""
    return dict(cuda_ipc.Exporter().describe(tensor), kind="handle",
                dtype=dtype_name(tensor.dtype), shape=list(tensor.shape),
                stride=list(tensor.stride()))


# Candidate side: the handles opened, kept for the process's life (its tensors use them).
_importer = None


def open_shared(descriptors):
    """Candidate side: the tensors behind the judge's descriptors."""
    global _importer
    tensors = []
    for descriptor in descriptors:
        if descriptor["kind"] == "handle":
            if _importer is None:
                _importer = cuda_ipc.Importer()
            tensors.append(_importer.tensor(descriptor, dtype_from_name(descriptor["dtype"]),
                                            descriptor["shape"], descriptor["stride"]))
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


# Each timed call's inputs move by this many bytes within a region of the pool (vector loads
# stay aligned), over a span that makes SHIFT_SPAN // SHIFT_STEP distinct addresses.
SHIFT_STEP = 256
SHIFT_SPAN = 64 << 10
# Small inputs also move between up to INPUT_SPREAD_REGIONS regions of the pool, each on its
# own 2 MiB pages, within INPUT_SPREAD_BYTES: where in device memory a 4 MB input lies moved
# a kernel's time by several percent from one pool to the next (issue 10), and calls that
# read from many places average that out instead of carrying one place's luck into a verdict.
INPUT_SPREAD_REGIONS = 16
INPUT_SPREAD_BYTES = 64 << 20
REGION_ALIGNMENT = 2 << 20


class InputPool:
    """Judge side: one allocation holding every tensor input of a timed call, with room to
    move them. Each call's fresh inputs are copied in at a new shift, so no cache keyed by
    pointer survives from one call to the next; the children see it through one descriptor."""

    def __init__(self, inputs, device, scratch_directory):
        self.layout = []
        offset = 0
        for value in inputs:
            if isinstance(value, torch.Tensor):
                size = value.numel() * value.element_size()
                self.layout.append({"offset": offset, "dtype": dtype_name(value.dtype),
                                    "shape": list(value.shape), "numel": value.numel()})
                offset += (size + SHIFT_STEP - 1) // SHIFT_STEP * SHIFT_STEP
            else:
                self.layout.append({"value": value})
        self.region_bytes, self.regions = input_regions(device, offset)
        self.bytes = self.region_bytes * (self.regions - 1) + offset + SHIFT_SPAN
        template = torch.empty(self.bytes, dtype=torch.uint8, device="meta")
        shared = SharedBuffers([template], device, scratch_directory, "pool") \
            if device == "cpu" else None
        if shared is not None:
            self.tensor, self.descriptors = shared.tensors[0], shared.descriptors
        else:
            self.tensor = torch.empty(self.bytes, dtype=torch.uint8, device=device)
            self.descriptors = [device_descriptor(self.tensor)]
        self.calls = 0

    def next_shift(self):
        shift = next_shift(self.calls, self.region_bytes, self.regions)
        self.calls += 1
        return shift

    def load(self, inputs, shift):
        """Copies a call's fresh inputs into the pool at `shift`; returns the views."""
        views = pool_views(self.tensor, self.layout, shift)
        with torch.no_grad():
            for view, value in zip(views, inputs):
                if isinstance(value, torch.Tensor):
                    view.copy_(value)
        return views


def input_regions(device, data_bytes):
    """(bytes between regions, number of regions) of a pool whose tensor inputs take
    `data_bytes`: as many 2 MiB-aligned regions (each the inputs and their shift span) as fit
    INPUT_SPREAD_BYTES, at most INPUT_SPREAD_REGIONS, and one (no spread) for inputs too large
    for two. One as well on the CPU, where each child reads a file of its own and placement
    is not the point, and for inputs without a tensor, which have nothing to place."""
    if device == "cpu" or data_bytes == 0:
        return 0, 1
    span = data_bytes + SHIFT_SPAN
    stride = (span + REGION_ALIGNMENT - 1) // REGION_ALIGNMENT * REGION_ALIGNMENT
    return stride, max(1, min(INPUT_SPREAD_REGIONS, INPUT_SPREAD_BYTES // stride))


def next_shift(call, region_bytes, regions):
    """Call number `call`'s shift: the next region in turn, and within it the next step."""
    return (call % regions) * region_bytes + (call * SHIFT_STEP) % SHIFT_SPAN


def pool_views(pool, layout, shift):
    """A timed call's inputs as they lie in a pool (a flat uint8 tensor) at `shift` bytes:
    the judge filling them and the timed child reading them share this one reading of the
    layout."""
    result = []
    for item in layout:
        if "value" in item:
            result.append(item["value"])
            continue
        dtype = dtype_from_name(item["dtype"])
        start = int(item["offset"]) + int(shift)
        count = int(item["numel"]) * torch.empty((), dtype=dtype).element_size()
        result.append(pool[start:start + count].view(dtype).view(item["shape"]))
    return result
