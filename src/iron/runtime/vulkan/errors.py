"""The errors the Vulkan device raises on purpose."""

from __future__ import annotations

from ...core.errors import IronError
from .. import BackendUnavailable

#: How to get the pieces this device needs on Debian/Ubuntu.
INSTALL_HINT = ("install a Vulkan loader and driver (Debian/Ubuntu: apt-get install libvulkan1 "
                "mesa-vulkan-drivers; Mesa's lavapipe runs on any CPU) and the Python binding (pip install vulkan)")

#: How to get the Khronos validation layer.
VALIDATION_HINT = "install the Khronos validation layer (Debian/Ubuntu: apt-get install vulkan-validationlayers)"


class VulkanUnavailable(BackendUnavailable):
    """No usable Vulkan here: the binding, the loader, a driver or a requested device is missing."""


class VulkanError(IronError):
    """A Vulkan call failed while setting up or running a kernel."""


class VulkanValidationError(VulkanError):
    """The Khronos validation layer reported a problem during a launch."""

    def __init__(self, messages: list[str]):
        self.messages = list(messages)
        listed = "\n".join(f"  - {m}" for m in self.messages)
        super().__init__(f"the Vulkan validation layer reported {len(self.messages)} problem(s):\n{listed}")
