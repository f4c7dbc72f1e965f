"""Host arrays of one launch: into device memory before the kernel, written ones back after it.

Each distinct host buffer (by start address and size: an in-place
``k(x, x)`` passes one buffer twice) gets one pooled device block, so
the kernel sees the aliasing the caller wrote.  Data moves through pooled
pinned buffers: the array is copied into a pinned buffer, then
``cuMemcpyHtoDAsync`` on the launch's stream; after the kernel,
``cuMemcpyDtoHAsync`` into pinned memory and, once the stream has
finished, into the caller's array.  Every array is copied in, write-only
ones too, so elements the kernel leaves alone keep their values as they do
on the interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .driver import check
from .pools import Pool, host_view


@dataclass
class _Staged:
    array: np.ndarray
    device: int
    pinned: int
    written: bool


@dataclass
class Transfer:
    """The copies of one launch; :meth:`finish` after the stream is synchronised."""

    staged: list[_Staged] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.staged)


class Stager:
    """Moves host arrays through the device's pools on a stream."""

    def __init__(self, drv: Any, device_pool: Pool, pinned_pool: Pool) -> None:
        self.drv = drv
        self.device_pool = device_pool
        self.pinned_pool = pinned_pool
        self.bytes_in = 0
        self.bytes_out = 0

    def copy_in(self, arrays: list[tuple[np.ndarray, bool]], stream: Any) -> tuple[list[int], Transfer]:
        """Device addresses for ``arrays`` ((array, written) pairs), with their copies enqueued on ``stream``."""
        drv = self.drv
        transfer = Transfer()
        by_span: dict[tuple[int, int], _Staged] = {}
        addresses = []
        try:
            for array, written in arrays:
                if array.nbytes == 0:
                    addresses.append(0)
                    continue
                span = (array.__array_interface__["data"][0], array.nbytes)
                staged = by_span.get(span)
                if staged is None:
                    device, _ = self.device_pool.acquire(array.nbytes)
                    pinned, _ = self.pinned_pool.acquire(array.nbytes)
                    staged = by_span[span] = _Staged(array, device, pinned, False)
                    transfer.staged.append(staged)
                    np.copyto(host_view(pinned, array.nbytes), array.reshape(-1).view(np.uint8))
                    check(drv, drv.cuMemcpyHtoDAsync(device, pinned, array.nbytes, stream), "cuMemcpyHtoDAsync")
                    self.bytes_in += array.nbytes
                staged.written = staged.written or written
                addresses.append(staged.device)
        except BaseException:
            self.release(transfer)
            raise
        return addresses, transfer

    def copy_out(self, transfer: Transfer, stream: Any) -> None:
        """Enqueue the copies of written arrays back into pinned memory (after the kernel on ``stream``)."""
        drv = self.drv
        for s in transfer.staged:
            if s.written:
                check(drv, drv.cuMemcpyDtoHAsync(s.pinned, s.device, s.array.nbytes, stream), "cuMemcpyDtoHAsync")
                self.bytes_out += s.array.nbytes

    def finish(self, transfer: Transfer) -> None:
        """Once the stream has finished: written arrays take their new values; blocks go back to the pools."""
        try:
            for s in transfer.staged:
                if s.written:
                    np.copyto(s.array.reshape(-1).view(np.uint8), host_view(s.pinned, s.array.nbytes))
        finally:
            self.release(transfer)

    def release(self, transfer: Transfer) -> None:
        for s in transfer.staged:
            self.device_pool.release(s.device)
            self.pinned_pool.release(s.pinned)
        transfer.staged.clear()
