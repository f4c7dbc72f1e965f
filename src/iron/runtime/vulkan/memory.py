"""Storage buffers and the pool that reuses them across launches.

Buffers live in host-visible, host-coherent memory that stays mapped, so
uploads and downloads are plain copies into a numpy view.  That is the fast
path on a CPU driver (lavapipe) and on unified-memory GPUs, and a slow one
on a discrete GPU: an H200 reading host-visible memory runs an exp over 1M
floats in ~0.1 ms, far from its ~4 TB/s.  Device-local buffers filled by
staging copies belong behind the same two calls (:meth:`StorageBuffer.upload`
and :meth:`StorageBuffer.download`, which then record transfer commands),
so dispatch code does not change when they are added.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import VulkanError
from .logical import LogicalDevice

#: Allocation granularity: sizes round up to this, so nearby sizes share pooled buffers.
GRANULE = 256


def pooled_size(nbytes: int) -> int:
    """The allocation size of a buffer that holds ``nbytes`` (at least one granule)."""
    return max(GRANULE, -(-nbytes // GRANULE) * GRANULE)


@dataclass
class StorageBuffer:
    """A VkBuffer bound to its own mapped memory; ``view`` is the bytes as a numpy array."""

    handle: Any
    memory: Any
    size: int
    view: np.ndarray

    def upload(self, array: np.ndarray) -> None:
        data = array.reshape(-1).view(np.uint8)
        self.view[:data.size] = data

    def download(self, array: np.ndarray) -> None:
        """Copy the buffer's first ``array.nbytes`` bytes into ``array`` in place."""
        flat = array.reshape(-1).view(np.uint8)
        flat[...] = self.view[:flat.size]


class BufferPool:
    """Hands out storage buffers by size and takes them back for the next launch.

    Buffers are kept until :meth:`close`; ``allocations`` counts the buffers
    ever created, which is how tests see reuse.
    """

    def __init__(self, device: LogicalDevice) -> None:
        self.device = device
        self._free: dict[int, list[StorageBuffer]] = {}
        self._all: list[StorageBuffer] = []
        self.allocations = 0
        self._memory_types = self._host_visible_types()

    def _host_visible_types(self) -> list[int]:
        """Host-visible, coherent memory types, device-local ones first (resizable BAR, unified memory)."""
        vk, props = self.device.vk, self.device.memory_properties
        wanted = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        types = [i for i in range(props.memoryTypeCount) if props.memoryTypes[i].propertyFlags & wanted == wanted]
        local = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        return sorted(types, key=lambda i: not props.memoryTypes[i].propertyFlags & local)

    def acquire(self, nbytes: int) -> StorageBuffer:
        size = pooled_size(nbytes)
        free = self._free.get(size)
        if free:
            return free.pop()
        buffer = self._allocate(size)
        self._all.append(buffer)
        self.allocations += 1
        return buffer

    def release(self, buffer: StorageBuffer) -> None:
        self._free.setdefault(buffer.size, []).append(buffer)

    def _allocate(self, size: int) -> StorageBuffer:
        vk, dev = self.device.vk, self.device.handle
        usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        handle = vk.vkCreateBuffer(dev, vk.VkBufferCreateInfo(size=size, usage=usage,
                                                              sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        needs = vk.vkGetBufferMemoryRequirements(dev, handle)
        for type_index in self._memory_types:
            if not needs.memoryTypeBits & (1 << type_index):
                continue
            try:
                memory = vk.vkAllocateMemory(dev, vk.VkMemoryAllocateInfo(allocationSize=needs.size,
                                                                          memoryTypeIndex=type_index), None)
            except (vk.VkErrorOutOfDeviceMemory, vk.VkErrorOutOfHostMemory):
                continue
            vk.vkBindBufferMemory(dev, handle, memory, 0)
            mapped = vk.vkMapMemory(dev, memory, 0, size, 0)
            return StorageBuffer(handle, memory, size, np.frombuffer(mapped, dtype=np.uint8))
        vk.vkDestroyBuffer(dev, handle, None)
        raise VulkanError(f"cannot allocate a {size}-byte storage buffer in host-visible memory on "
                          f"'{self.device.info.name}' (out of memory or no such memory type)")

    def close(self) -> None:
        vk, dev = self.device.vk, self.device.handle
        for buffer in self._all:
            vk.vkUnmapMemory(dev, buffer.memory)
            vk.vkDestroyBuffer(dev, buffer.handle, None)
            vk.vkFreeMemory(dev, buffer.memory, None)
        self._all.clear()
        self._free.clear()
