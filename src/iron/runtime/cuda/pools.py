"""Device and pinned host memory, reused by size class instead of allocated per launch.

``cuMemAlloc`` / ``cuMemHostAlloc`` cost tens to hundreds of microseconds
and may synchronise the device, so blocks are kept: a request takes a free
block of its size class (the next power of two, at least 256 bytes) or
allocates one, and a release returns it to its class.  When an allocation
fails for lack of memory the free blocks are given back and it is tried
once more.  Pinned (page-locked) host blocks are what asynchronous copies
need: a copy from pageable memory is staged by the driver and not truly
asynchronous.
"""

from __future__ import annotations

import ctypes
from collections import defaultdict
from typing import Any, Callable

import numpy as np

from .driver import check
from .errors import CudaError

MIN_BLOCK = 256
_OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY


def size_class(nbytes: int) -> int:
    """The block size that serves a request of ``nbytes``."""
    size = MIN_BLOCK
    while size < nbytes:
        size <<= 1
    return size


class Pool:
    """Blocks from ``allocate(size) -> address``, returned with ``free(address)``, reused by size class."""

    def __init__(self, allocate: Callable[[int], int], free: Callable[[int], None], what: str) -> None:
        self._allocate = allocate
        self._free = free
        self.what = what
        self._idle: dict[int, list[int]] = defaultdict(list)
        self._busy: dict[int, int] = {}
        #: Calls to the allocator, and requests served from idle blocks.
        self.allocations = 0
        self.reuses = 0

    def acquire(self, nbytes: int) -> tuple[int, int]:
        """(address, capacity) of a block of at least ``nbytes``."""
        size = size_class(nbytes)
        idle = self._idle[size]
        if idle:
            address = idle.pop()
            self.reuses += 1
        else:
            address = self._new(size)
        self._busy[address] = size
        return address, size

    def release(self, address: int) -> None:
        self._idle[self._busy.pop(address)].append(address)

    def _new(self, size: int) -> int:
        try:
            address = self._allocate(size)
        except CudaError as e:
            if e.code != _OUT_OF_MEMORY or not self.idle_bytes:
                raise
            self.trim()
            address = self._allocate(size)
        self.allocations += 1
        return address

    @property
    def idle_bytes(self) -> int:
        return sum(size * len(blocks) for size, blocks in self._idle.items())

    @property
    def busy_bytes(self) -> int:
        return sum(self._busy.values())

    def trim(self) -> None:
        """Free every idle block."""
        for blocks in self._idle.values():
            for address in blocks:
                self._free(address)
            blocks.clear()

    def close(self) -> None:
        """Free everything, busy blocks included (the device is idle when this is called)."""
        self.trim()
        for address in list(self._busy):
            self._free(address)
        self._busy.clear()

    def stats(self) -> dict[str, int]:
        return {"allocations": self.allocations, "reuses": self.reuses, "idle_bytes": self.idle_bytes,
                "busy_bytes": self.busy_bytes}


def device_pool(drv: Any) -> Pool:
    """Device memory (``cuMemAlloc``)."""
    return Pool(lambda n: int(check(drv, drv.cuMemAlloc(n), f"cuMemAlloc({n} bytes)")),
                lambda p: check(drv, drv.cuMemFree(p), "cuMemFree"), "device")


def pinned_pool(drv: Any) -> Pool:
    """Page-locked host memory (``cuMemHostAlloc``), for asynchronous copies."""
    return Pool(lambda n: int(check(drv, drv.cuMemHostAlloc(n, 0), f"cuMemHostAlloc({n} bytes)")),
                lambda p: check(drv, drv.cuMemFreeHost(p), "cuMemFreeHost"), "pinned")


def host_view(address: int, nbytes: int) -> np.ndarray:
    """A uint8 numpy view of ``nbytes`` of host memory at ``address``."""
    if nbytes == 0:
        return np.empty(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(address))
