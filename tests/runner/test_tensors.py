#!/usr/bin/env python3
"""When the judge and the candidate's child hand cached device memory back
(tensors.release_cached_memory): only above RELEASE_BYTES of cache, and only when the device's
free memory is short of RELEASE_ROOM times the room the other process's step needs. The
device's numbers are faked, so this runs without a GPU. Prints TAP."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from kagent_runner import tensors  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402

GIB = 1 << 30


class FakeDevice:
    """The allocator's and the driver's numbers, and the releases asked for."""

    def __init__(self, reserved, allocated, free, initialized=True):
        self.reserved, self.allocated, self.free = reserved, allocated, free
        self.initialized = initialized
        self.releases = 0

    def __enter__(self):
        self.saved = (tensors._memory_reserved, tensors._memory_allocated,
                      tensors._mem_get_info, tensors._empty_cache, torch.cuda.is_initialized)
        tensors._memory_reserved = lambda: self.reserved
        tensors._memory_allocated = lambda: self.allocated
        tensors._mem_get_info = lambda: (self.free, 80 * GIB)
        tensors._empty_cache = self.release
        torch.cuda.is_initialized = lambda: self.initialized
        return self

    def release(self):
        self.releases += 1
        self.free += self.reserved - self.allocated
        self.reserved = self.allocated

    def __exit__(self, *exc):
        (tensors._memory_reserved, tensors._memory_allocated, tensors._mem_get_info,
         tensors._empty_cache, torch.cuda.is_initialized) = self.saved


@test
def keeps_the_cache_where_the_device_has_room():
    # eight lanes of a 1 GiB problem: 14 GiB free, a trial of 2 GiB needs 6 GiB of room
    with FakeDevice(reserved=5 * GIB, allocated=GIB, free=14 * GIB) as device:
        assert not tensors.release_cached_memory(2 * GIB)
        assert device.releases == 0


@test
def releases_where_the_device_is_short():
    # a 6.4 GB problem: 30 GB free is short of three times the trial's 12.8 GB
    with FakeDevice(reserved=20 * GIB, allocated=7 * GIB, free=30 * GIB) as device:
        assert tensors.release_cached_memory(int(12.8 * GIB))
        assert device.releases == 1
        assert device.free == 43 * GIB


@test
def the_boundary_is_room_times_the_step():
    room = GIB
    with FakeDevice(reserved=2 * GIB, allocated=0,
                    free=tensors.RELEASE_ROOM * room) as device:
        assert not tensors.release_cached_memory(room)
    with FakeDevice(reserved=2 * GIB, allocated=0,
                    free=tensors.RELEASE_ROOM * room - 1) as device:
        assert tensors.release_cached_memory(room)
        assert device.releases == 1


@test
def a_small_cache_stays_even_when_short():
    with FakeDevice(reserved=tensors.RELEASE_BYTES - 1, allocated=0, free=0) as device:
        assert not tensors.release_cached_memory(GIB)
        assert device.releases == 0


@test
def nothing_before_the_device_is_used():
    with FakeDevice(reserved=8 * GIB, allocated=0, free=0, initialized=False) as device:
        assert not tensors.release_cached_memory(GIB)
        assert device.releases == 0


sys.exit(tap.run())
