"""The TargetProfile of one Vulkan device, from what it reports and what Iron enabled on it.

The default ``spirv`` profile (``vulkan-lavapipe``) describes the CI machine; a
kernel compiled for the device in hand must be checked against, and emitted
for, that device instead: its subgroup size (fragment layouts, the mma
scratch, constant-lane broadcasts), its limits, the optional features the
logical device enabled (:mod:`.features`) and its cooperative-matrix shapes.
"""

from __future__ import annotations

from ...codegen.targets import TargetProfile, vulkan_device_profile
from .properties import PhysicalDeviceInfo

#: Iron's Vulkan feature names (iron.codegen.targets.VULKAN_FEATURES) -> the Vulkan feature that grants each.
FEATURE_NAMES: dict[str, str] = {
    "f64": "shaderFloat64",
    "int64": "shaderInt64",
    "f16": "shaderFloat16",
    "int8": "shaderInt8",
    "int16": "shaderInt16",
    "storage8": "storageBuffer8BitAccess",
    "storage16": "storageBuffer16BitAccess",
    "atomic_int64": "shaderBufferInt64Atomics",
    "atomic_float_add": "shaderBufferFloat32AtomicAdd",
    "subgroup_extended_types": "shaderSubgroupExtendedTypes",
    "cooperative_matrix": "cooperativeMatrix",
}


def profile_features(info: PhysicalDeviceInfo) -> frozenset[str]:
    """Iron's names of the features enabled on the device (every supported wanted one is enabled).

    Cooperative matrices count only where the device runs them in compute shaders and lists a
    shape Iron can use.
    """
    enabled = {name for name, vk_name in FEATURE_NAMES.items() if info.features.supported.get(vk_name)}
    if not (info.cooperative_matrix_in_compute and info.cooperative_matrices):
        enabled.discard("cooperative_matrix")
    return frozenset(enabled)


def device_profile(info: PhysicalDeviceInfo) -> TargetProfile:
    """The ``spirv`` profile of ``info``'s device (``VulkanDevice.profile``)."""
    features = profile_features(info)
    combos = frozenset(info.cooperative_matrices) if "cooperative_matrix" in features else frozenset()
    return vulkan_device_profile(info.name, info.subgroup_size, info.max_workgroup_invocations,
                                 info.max_workgroup_size, info.max_shared_memory, features, combos)
