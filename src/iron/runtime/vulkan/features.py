"""Optional device features that shaders use: what a device offers, and the chain that enables them.

Iron enables every wanted feature the device supports (and no others), so a
shader that declares, say, ``float16_t`` arithmetic runs where the device
allows it and the validation layer reports it where the device does not.
Subgroup operations need no feature: they are core in Vulkan 1.1 and their
support is a property (:mod:`.properties`); subgroup operations on 8/16/64-bit
types do (``shaderSubgroupExtendedTypes``, core in 1.2).  A device that offers
VK_KHR_cooperative_matrix gets the extension and its ``cooperativeMatrix``
feature; which shapes it runs is a property too (:mod:`.coopmat`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

#: Wanted features per feature struct, in the order they are chained.
WANTED: dict[str, tuple[str, ...]] = {
    "VkPhysicalDeviceFeatures": ("shaderInt64", "shaderInt16", "shaderFloat64"),
    "VkPhysicalDeviceVulkan11Features": ("storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess"),
    "VkPhysicalDeviceVulkan12Features": ("shaderFloat16", "shaderInt8", "storageBuffer8BitAccess",
                                         "uniformAndStorageBuffer8BitAccess", "shaderBufferInt64Atomics",
                                         "vulkanMemoryModel", "vulkanMemoryModelDeviceScope",
                                         "shaderSubgroupExtendedTypes"),
    "VkPhysicalDeviceShaderAtomicFloatFeaturesEXT": ("shaderBufferFloat32Atomics", "shaderBufferFloat32AtomicAdd"),
    "VkPhysicalDeviceCooperativeMatrixFeaturesKHR": ("cooperativeMatrix",),
}

#: Device extensions enabled when offered, and the feature struct each one brings.
OPTIONAL_EXTENSIONS: dict[str, str] = {
    "VK_EXT_shader_atomic_float": "VkPhysicalDeviceShaderAtomicFloatFeaturesEXT",
    "VK_KHR_cooperative_matrix": "VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
}


@dataclass(frozen=True)
class FeatureSet:
    """The wanted features a device supports, and the optional extensions it offers."""

    supported: dict[str, bool]
    extensions: tuple[str, ...]

    def enabled(self) -> list[str]:
        return [name for name, on in self.supported.items() if on]


def _structs(extensions: tuple[str, ...]) -> list[str]:
    ext_structs = {s for e, s in OPTIONAL_EXTENSIONS.items() if e in extensions}
    return [s for s in WANTED if s == "VkPhysicalDeviceFeatures" or s not in OPTIONAL_EXTENSIONS.values()
            or s in ext_structs]


def _chain(vk: ModuleType, structs: list[str], values: dict[str, dict[str, int]]) -> Any:
    """A VkPhysicalDeviceFeatures2 whose pNext chain holds ``structs`` (the core 1.0 one inline)."""
    tail = None
    for name in reversed([s for s in structs if s != "VkPhysicalDeviceFeatures"]):
        tail = getattr(vk, name)(pNext=tail, **values.get(name, {}))
    core = vk.VkPhysicalDeviceFeatures(**values.get("VkPhysicalDeviceFeatures", {}))
    return vk.VkPhysicalDeviceFeatures2(pNext=tail, features=core)


def _walk(vk: ModuleType, features2: Any, structs: list[str]) -> dict[str, Any]:
    """Each struct of a filled chain by name (pNext is followed as the driver left it)."""
    found = {"VkPhysicalDeviceFeatures": features2.features}
    node = features2.pNext
    for name in [s for s in structs if s != "VkPhysicalDeviceFeatures"]:
        struct = vk.ffi.cast(f"{name}*", node)
        found[name] = struct
        node = struct.pNext
    return found


def query_features(vk: ModuleType, physical_device: Any, device_extensions: set[str]) -> FeatureSet:
    """Which wanted features ``physical_device`` supports."""
    offered = tuple(e for e in OPTIONAL_EXTENSIONS if e in device_extensions)
    structs = _structs(offered)
    features2 = _chain(vk, structs, {})
    vk.vkGetPhysicalDeviceFeatures2(physical_device, pFeatures=features2)
    filled = _walk(vk, features2, structs)
    supported = {field: bool(getattr(filled[s], field)) for s in structs for field in WANTED[s]}
    return FeatureSet(supported, offered)


def enable_chain(vk: ModuleType, features: FeatureSet) -> Any:
    """The VkPhysicalDeviceFeatures2 to put in VkDeviceCreateInfo.pNext: every supported wanted feature on."""
    structs = _structs(features.extensions)
    values = {s: {f: vk.VK_TRUE for f in WANTED[s] if features.supported.get(f)} for s in structs}
    return _chain(vk, structs, values)
