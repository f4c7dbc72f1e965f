"""Buffers, the memory types they live in, and the pools that reuse them across launches.

Storage buffers live in one of two places (option ``vulkan_staging``, :func:`needs_staging`):

* **mapped**: host-visible, host-coherent memory that stays mapped, so uploads
  and downloads are plain copies into a numpy view.  That is the fast path
  wherever the device's main memory is host-visible anyway: a CPU driver
  (lavapipe), unified memory, a discrete GPU with resizable BAR.
* **device-local**: memory the host cannot map (a discrete GPU's own memory
  without resizable BAR).  Kernels read it at full bandwidth (an H200
  reading host-visible system memory ran an exp over 1M floats in ~0.1 ms,
  far from its ~4 TB/s); data moves through mapped staging buffers and
  ``vkCmdCopyBuffer`` commands recorded with the dispatch (:mod:`.placement`).

The choice of memory types is plain functions over :class:`MemoryType`
records, so it is tested with the layouts of devices this machine lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import VulkanError
from .logical import LogicalDevice

#: Allocation granularity: sizes round up to this, so nearby sizes share pooled buffers.
GRANULE = 256

# VkMemoryPropertyFlagBits (fixed by the Vulkan specification).
DEVICE_LOCAL = 0x1
HOST_VISIBLE = 0x2
HOST_COHERENT = 0x4
HOST_CACHED = 0x8
MAPPABLE = HOST_VISIBLE | HOST_COHERENT


def pooled_size(nbytes: int) -> int:
    """The allocation size of a buffer that holds ``nbytes`` (at least one granule)."""
    return max(GRANULE, -(-nbytes // GRANULE) * GRANULE)


@dataclass(frozen=True)
class MemoryType:
    """One VkMemoryType with the size of its heap."""

    index: int
    flags: int
    heap: int
    heap_size: int


def memory_types(props: Any) -> list[MemoryType]:
    """The device's memory types (from VkPhysicalDeviceMemoryProperties) as plain records."""
    return [MemoryType(i, int(props.memoryTypes[i].propertyFlags), int(props.memoryTypes[i].heapIndex),
                       int(props.memoryHeaps[props.memoryTypes[i].heapIndex].size))
            for i in range(props.memoryTypeCount)]


_FLAG_NAMES = ((DEVICE_LOCAL, "device_local"), (HOST_VISIBLE, "host_visible"), (HOST_COHERENT, "host_coherent"),
               (HOST_CACHED, "host_cached"))


def describe_types(types: Sequence[MemoryType]) -> list[str]:
    """One line per memory type, e.g. ``"0: device_local (heap 0, 141.0 GiB)"``, for ``info``."""
    out = []
    for t in types:
        flags = "+".join(name for bit, name in _FLAG_NAMES if t.flags & bit) or "none"
        out.append(f"{t.index}: {flags} (heap {t.heap}, {t.heap_size / 2**30:.1f} GiB)")
    return out


def needs_staging(types: Sequence[MemoryType], mode: str) -> bool:
    """Whether storage buffers go to device-local memory behind staging copies.

    ``auto``: yes when the largest device-local heap has no host-visible, coherent type: a
    discrete GPU whose only mappable device memory is the 256 MiB BAR window (a heap of its own)
    or none.  A CPU driver, unified memory and resizable BAR map the main heap, so no.
    """
    if mode in ("always", "never"):
        return mode == "always"
    local = [t for t in types if t.flags & DEVICE_LOCAL]
    if not local:
        return False
    main = max(local, key=lambda t: t.heap_size).heap
    return not any(t.heap == main and t.flags & MAPPABLE == MAPPABLE for t in local)


def mapped_types(types: Sequence[MemoryType]) -> list[int]:
    """Mappable (host-visible, coherent) types for directly mapped storage buffers, device-local first."""
    ok = [t for t in types if t.flags & MAPPABLE == MAPPABLE]
    return [t.index for t in sorted(ok, key=lambda t: (not t.flags & DEVICE_LOCAL, -t.heap_size))]


def staging_types(types: Sequence[MemoryType]) -> list[int]:
    """Mappable types for staging buffers: host-cached first (the host reads results back from them),
    then system memory before a BAR window (which the host reads slowly and which is small)."""
    ok = [t for t in types if t.flags & MAPPABLE == MAPPABLE]
    return [t.index for t in sorted(ok, key=lambda t: (not t.flags & HOST_CACHED, bool(t.flags & DEVICE_LOCAL)))]


def device_types(types: Sequence[MemoryType]) -> list[int]:
    """Types for device-local storage buffers: unmappable device memory of the largest heap first."""
    local = [t for t in types if t.flags & DEVICE_LOCAL]
    return [t.index for t in sorted(local, key=lambda t: (bool(t.flags & HOST_VISIBLE), -t.heap_size))]


@dataclass
class Buffer:
    """A VkBuffer bound to its own memory; ``view`` is the mapped bytes (None for device-local memory)."""

    handle: Any
    memory: Any
    size: int
    view: np.ndarray | None

    def upload(self, array: np.ndarray) -> None:
        assert self.view is not None, "only a mapped buffer takes host data"
        data = array.reshape(-1).view(np.uint8)
        self.view[:data.size] = data

    def download(self, array: np.ndarray) -> None:
        """Copy the buffer's first ``array.nbytes`` bytes into ``array`` in place."""
        assert self.view is not None, "only a mapped buffer gives host data"
        flat = array.reshape(-1).view(np.uint8)
        flat[...] = self.view[:flat.size]


class BufferPool:
    """Hands out buffers of one kind by size and takes them back for the next launch.

    ``types`` are the memory-type indices to try, best first; ``mapped``
    maps each buffer once for its lifetime.  Buffers are kept until
    :meth:`close`; ``allocations`` counts the buffers ever created, which is
    how tests see reuse.
    """

    def __init__(self, device: LogicalDevice, types: list[int], mapped: bool, usage: int, what: str) -> None:
        self.device = device
        self.types = types
        self.mapped = mapped
        self.usage = usage
        self.what = what
        self._free: dict[int, list[Buffer]] = {}
        self._all: list[Buffer] = []
        self.allocations = 0

    def acquire(self, nbytes: int) -> Buffer:
        size = pooled_size(nbytes)
        free = self._free.get(size)
        if free:
            return free.pop()
        buffer = self._allocate(size)
        self._all.append(buffer)
        self.allocations += 1
        return buffer

    def release(self, buffer: Buffer) -> None:
        self._free.setdefault(buffer.size, []).append(buffer)

    def _allocate(self, size: int) -> Buffer:
        vk, dev = self.device.vk, self.device.handle
        handle = vk.vkCreateBuffer(dev, vk.VkBufferCreateInfo(size=size, usage=self.usage,
                                                              sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        needs = vk.vkGetBufferMemoryRequirements(dev, handle)
        for type_index in self.types:
            if not needs.memoryTypeBits & (1 << type_index):
                continue
            try:
                memory = vk.vkAllocateMemory(dev, vk.VkMemoryAllocateInfo(allocationSize=needs.size,
                                                                          memoryTypeIndex=type_index), None)
            except (vk.VkErrorOutOfDeviceMemory, vk.VkErrorOutOfHostMemory):
                continue
            vk.vkBindBufferMemory(dev, handle, memory, 0)
            view = np.frombuffer(vk.vkMapMemory(dev, memory, 0, size, 0), dtype=np.uint8) if self.mapped else None
            return Buffer(handle, memory, size, view)
        vk.vkDestroyBuffer(dev, handle, None)
        where = "host-visible" if self.mapped else "device-local"
        raise VulkanError(f"cannot allocate a {size}-byte {self.what} buffer in {where} memory on "
                          f"'{self.device.info.name}' (out of memory or no such memory type)")

    def close(self) -> None:
        vk, dev = self.device.vk, self.device.handle
        for buffer in self._all:
            if buffer.view is not None:
                vk.vkUnmapMemory(dev, buffer.memory)
            vk.vkDestroyBuffer(dev, buffer.handle, None)
            vk.vkFreeMemory(dev, buffer.memory, None)
        self._all.clear()
        self._free.clear()
