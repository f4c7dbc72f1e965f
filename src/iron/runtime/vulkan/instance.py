"""The Vulkan instance and, when asked for, the Khronos validation layer's messages.

With validation on, the layer's synchronization validation is enabled too
(where the layer offers VK_EXT_validation_features): core validation checks
each call, not whether copies, barriers and the dispatch are ordered, which
is what the staged buffer path (:mod:`.placement`) relies on.

The binding keeps a single Python callback for every debug messenger in the
process, so one router is installed and each device's :class:`ValidationLog`
is found again through the messenger's ``pUserData`` (a small integer id).
"""

from __future__ import annotations

import itertools
import threading
from types import ModuleType
from typing import Any

from .binding import load_vulkan
from .errors import VALIDATION_HINT, VulkanError, VulkanUnavailable

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEBUG_UTILS = "VK_EXT_debug_utils"
VALIDATION_FEATURES = "VK_EXT_validation_features"

#: The newest API this code asks for; the loader and the device may offer less.
REQUESTED_API = (1, 3)
#: The oldest device API the device accepts (glslc targets vulkan1.2).
MINIMUM_API = (1, 2)


class ValidationLog:
    """Messages (warnings and errors) the validation layer sent for one device."""

    def __init__(self) -> None:
        self._messages: list[str] = []
        self._lock = threading.Lock()

    def add(self, message: str) -> None:
        with self._lock:
            self._messages.append(message)

    def mark(self) -> int:
        """A position to read new messages from (see :meth:`since`)."""
        with self._lock:
            return len(self._messages)

    def since(self, mark: int) -> list[str]:
        with self._lock:
            return self._messages[mark:]

    @property
    def messages(self) -> list[str]:
        with self._lock:
            return list(self._messages)


_logs: dict[int, ValidationLog] = {}
_ids = itertools.count(1)


def _route(severity: int, types: int, data: Any, user_data: Any) -> int:
    vk = load_vulkan()
    log = _logs.get(int(vk.ffi.cast("uintptr_t", user_data)))
    if log is not None:
        text = vk.ffi.string(data.pMessage).decode("utf-8", "replace") if data.pMessage else "(no message)"
        level = "error" if severity & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT else "warning"
        log.add(f"{level}: {text}")
    return 0  # VK_FALSE: never abort the call that triggered the message


def make_version(major: int, minor: int) -> int:
    return (major << 22) | (minor << 12)


class Instance:
    """A VkInstance, with a debug messenger feeding :attr:`log` when validation is on."""

    def __init__(self, validation: bool) -> None:
        vk = self.vk = load_vulkan()
        self.validation = validation
        self.log = ValidationLog()
        self._log_id = 0
        self._messenger = None
        self.handle = None
        loader = vk.vkEnumerateInstanceVersion()
        self.api_version = min(loader, make_version(*REQUESTED_API))
        layers, extensions, features = [], [], None
        if validation:
            available = {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}
            if VALIDATION_LAYER not in available:
                raise VulkanUnavailable(f"Vulkan validation was requested (vulkan_validation) but the layer "
                                        f"{VALIDATION_LAYER} is not installed; {VALIDATION_HINT}")
            layers, extensions = [VALIDATION_LAYER], [DEBUG_UTILS]
            offered = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(VALIDATION_LAYER)}
            if VALIDATION_FEATURES in offered:
                extensions.append(VALIDATION_FEATURES)
                features = vk.VkValidationFeaturesEXT(
                    enabledValidationFeatureCount=1,
                    pEnabledValidationFeatures=[vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT])
        app = vk.VkApplicationInfo(pApplicationName="iron", applicationVersion=1, pEngineName="iron",
                                   engineVersion=1, apiVersion=self.api_version)
        info = vk.VkInstanceCreateInfo(pNext=features, pApplicationInfo=app, enabledLayerCount=len(layers),
                                       ppEnabledLayerNames=layers, enabledExtensionCount=len(extensions),
                                       ppEnabledExtensionNames=extensions)
        try:
            self.handle = vk.vkCreateInstance(info, None)
        except vk.VkErrorIncompatibleDriver:
            raise VulkanUnavailable("no Vulkan driver is installed (vkCreateInstance: incompatible driver); "
                                    "install one, e.g. mesa-vulkan-drivers for lavapipe on the CPU") from None
        except (vk.VkError, vk.VkException) as e:
            raise VulkanError(f"vkCreateInstance failed: {type(e).__name__}") from None
        if validation:
            self._create_messenger(vk)

    def _create_messenger(self, vk: ModuleType) -> None:
        self._log_id = next(_ids)
        _logs[self._log_id] = self.log
        info = vk.VkDebugUtilsMessengerCreateInfoEXT(
            messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            pfnUserCallback=_route, pUserData=self._log_id)
        create = vk.vkGetInstanceProcAddr(self.handle, "vkCreateDebugUtilsMessengerEXT")
        self._messenger = create(self.handle, info, None)

    def physical_devices(self) -> list[Any]:
        return list(self.vk.vkEnumeratePhysicalDevices(self.handle))

    def destroy(self) -> None:
        vk = self.vk
        if self._messenger is not None:
            destroy = vk.vkGetInstanceProcAddr(self.handle, "vkDestroyDebugUtilsMessengerEXT")
            destroy(self.handle, self._messenger, None)
            self._messenger = None
        if self.handle is not None:
            vk.vkDestroyInstance(self.handle, None)
            self.handle = None
        _logs.pop(self._log_id, None)
