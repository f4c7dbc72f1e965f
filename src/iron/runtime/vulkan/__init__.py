"""iron.runtime.vulkan: SPIR-V kernels on any Vulkan driver (Mesa lavapipe on a CPU, a GPU's own driver).

See docs/vulkan.md.  Importing this package needs neither the ``vulkan``
binding nor a driver; creating a :class:`VulkanDevice` does, and raises
:class:`VulkanUnavailable` with an install hint when one is missing.
"""

from .device import VulkanDevice
from .errors import VulkanError, VulkanUnavailable, VulkanValidationError

__all__ = ["VulkanDevice", "VulkanError", "VulkanUnavailable", "VulkanValidationError"]
