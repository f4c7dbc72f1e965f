"""The logical device: one compute queue with every supported wanted feature enabled."""

from __future__ import annotations

from typing import Any

from .errors import VulkanError
from .features import OPTIONAL_EXTENSIONS, enable_chain
from .instance import Instance
from .properties import PhysicalDeviceInfo


class LogicalDevice:
    """A VkDevice and its compute queue (``vk``, ``handle``, ``queue``, ``info``)."""

    def __init__(self, instance: Instance, physical: Any, info: PhysicalDeviceInfo) -> None:
        vk = self.vk = instance.vk
        self.physical = physical
        self.info = info
        #: The API version device-level calls may use: the lower of the instance's and the device's.
        self.api_version = min(instance.api_version, info.api_version)
        extensions = [e for e in OPTIONAL_EXTENSIONS if e in info.features.extensions]
        queue = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=info.queue_family, queueCount=1,
                                           pQueuePriorities=[1.0])
        create = vk.VkDeviceCreateInfo(pNext=enable_chain(vk, info.features), queueCreateInfoCount=1,
                                       pQueueCreateInfos=[queue], enabledExtensionCount=len(extensions),
                                       ppEnabledExtensionNames=extensions)
        try:
            self.handle = vk.vkCreateDevice(physical, create, None)
        except (vk.VkError, vk.VkException) as e:
            raise VulkanError(f"vkCreateDevice failed on '{info.name}': {type(e).__name__}") from None
        self.queue = vk.vkGetDeviceQueue(self.handle, info.queue_family, 0)
        self.memory_properties = vk.vkGetPhysicalDeviceMemoryProperties(physical)

    def wait_idle(self) -> None:
        self.vk.vkDeviceWaitIdle(self.handle)

    def destroy(self) -> None:
        if self.handle is not None:
            self.vk.vkDestroyDevice(self.handle, None)
            self.handle = None
