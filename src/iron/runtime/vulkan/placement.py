"""Where one launch's tensors live: the buffers each binding binds, and the copies around the dispatch.

On the mapped path a launch's arrays are copied straight into mapped storage
buffers and written ones straight back.  On the staged path
(:func:`.memory.needs_staging`) each distinct array gets a device-local
storage buffer and a mapped staging buffer of the same size: the host fills
the staging buffer, the command buffer copies it in before the dispatch and,
for tensors the kernel may write, back out after it, and the host reads the
staging buffer once the fence has signalled.  Both paths upload every tensor,
written ones too, so elements a kernel leaves alone keep the caller's values
(as on the interpreter); read-only tensors are never copied back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .logical import LogicalDevice
from .memory import (Buffer, BufferPool, describe_types, device_types, mapped_types, memory_types, needs_staging,
                     staging_types)


@dataclass(frozen=True)
class Copy:
    """``size`` bytes from the start of ``src`` to the start of ``dst`` (a vkCmdCopyBuffer region)."""

    src: Buffer
    dst: Buffer
    size: int


@dataclass
class Placement:
    """The buffers of one launch: ``bound`` per ABI tensor, the copies the dispatch needs around it."""

    bound: list[Buffer] = field(default_factory=list)
    copies_in: list[Copy] = field(default_factory=list)
    copies_out: list[Copy] = field(default_factory=list)
    #: Mapped buffer -> the caller's array it is read back into after the run.
    downloads: list[tuple[Buffer, np.ndarray]] = field(default_factory=list)
    held: list[tuple[BufferPool, Buffer]] = field(default_factory=list)

    def finish(self) -> None:
        """Copy the written tensors back into the caller's arrays (after the fence)."""
        for buffer, array in self.downloads:
            buffer.download(array)

    def take(self, array: np.ndarray) -> None:
        """Copy back just ``array`` (a written one; after the fence), to judge the launch before :meth:`finish`."""
        for buffer, a in self.downloads:
            if a is array:
                buffer.download(a)


@dataclass
class _Resident:
    """One distinct array of a launch: its storage buffer and the mapped buffer that holds its data."""

    array: np.ndarray
    buffer: Buffer
    mapped: Buffer
    written: bool = False


class BufferPlacer:
    """Owns the buffer pools and decides, once per device, between the mapped and the staged path."""

    def __init__(self, device: LogicalDevice, mode: str) -> None:
        vk = device.vk
        types = memory_types(device.memory_properties)
        self.staged = needs_staging(types, mode)
        #: The device's memory types in words (``info["memory_types"]``), to see why a path was taken.
        self.memory_types = describe_types(types)
        transfer = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        storage_usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | transfer
        self._storage = BufferPool(device, device_types(types) if self.staged else mapped_types(types),
                                   mapped=not self.staged, usage=storage_usage, what="storage")
        self._staging = BufferPool(device, staging_types(types), mapped=True, usage=transfer, what="staging")

    @property
    def allocations(self) -> int:
        return self._storage.allocations + self._staging.allocations

    def place(self, arrays: Sequence[np.ndarray], written: Sequence[bool]) -> Placement:
        """Buffers for ``arrays`` (ABI order), filled with their data; an array passed twice
        (an in-place launch) gets one buffer, read back once if any of its bindings is written."""
        placement = Placement()
        resident: dict[tuple[int, int], _Resident] = {}
        try:
            for array, write in zip(arrays, written):
                if not array.nbytes:  # an empty tensor binds a dummy buffer
                    placement.bound.append(self._acquire(placement, self._storage, 4))
                    continue
                span = (array.__array_interface__["data"][0], array.nbytes)
                r = resident.get(span)
                if r is None:
                    buffer = self._acquire(placement, self._storage, array.nbytes)
                    r = resident[span] = _Resident(array, buffer, self._fill(placement, buffer, array))
                r.written = r.written or bool(write)
                placement.bound.append(r.buffer)
        except BaseException:
            self.release(placement)
            raise
        for r in resident.values():
            if r.written:
                if r.mapped is not r.buffer:
                    placement.copies_out.append(Copy(r.buffer, r.mapped, r.array.nbytes))
                placement.downloads.append((r.mapped, r.array))
        return placement

    def _acquire(self, placement: Placement, pool: BufferPool, nbytes: int) -> Buffer:
        buffer = pool.acquire(nbytes)
        placement.held.append((pool, buffer))
        return buffer

    def _fill(self, placement: Placement, buffer: Buffer, array: np.ndarray) -> Buffer:
        """Put ``array``'s data where ``buffer`` will see it; the mapped buffer that holds it."""
        if not self.staged:
            buffer.upload(array)
            return buffer
        staging = self._acquire(placement, self._staging, array.nbytes)
        staging.upload(array)
        placement.copies_in.append(Copy(staging, buffer, array.nbytes))
        return staging

    def release(self, placement: Placement) -> None:
        """Give the launch's buffers back to their pools (after the fence)."""
        for pool, buffer in placement.held:
            pool.release(buffer)
        placement.held.clear()

    def close(self) -> None:
        self._storage.close()
        self._staging.close()
