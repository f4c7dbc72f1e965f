"""Choosing the physical device: the ``vulkan_device`` option, else the most capable kind present."""

from __future__ import annotations

from typing import Any

from .errors import INSTALL_HINT, VulkanUnavailable
from .instance import MINIMUM_API, Instance, make_version
from .properties import PhysicalDeviceInfo, describe

#: Preference when no device is named: real GPUs first, the CPU (lavapipe) last.
_RANK = {"discrete_gpu": 0, "integrated_gpu": 1, "virtual_gpu": 2, "other": 3, "cpu": 4}


def usable_devices(instance: Instance) -> list[tuple[Any, PhysicalDeviceInfo]]:
    """Every physical device with a compute queue and at least the minimum API version, in driver order."""
    found = []
    for index, pd in enumerate(instance.physical_devices()):
        info = describe(instance.vk, pd, index, instance.handle)
        if info is not None and info.api_version >= make_version(*MINIMUM_API):
            found.append((pd, info))
    return found


def select_device(instance: Instance, spec: str) -> tuple[Any, PhysicalDeviceInfo]:
    """The device ``spec`` names ("auto", an index into the driver's list, or part of a device name)."""
    devices = usable_devices(instance)
    if not devices:
        raise VulkanUnavailable(f"no Vulkan device with a compute queue and API {MINIMUM_API[0]}.{MINIMUM_API[1]}+ "
                                f"was found; {INSTALL_HINT}")
    spec = spec.strip()
    if spec.lower() in ("", "auto"):
        return min(devices, key=lambda d: (_RANK[d[1].device_type], d[1].index))
    if spec.isdigit():
        chosen = [d for d in devices if d[1].index == int(spec)]
    else:
        chosen = [d for d in devices if spec.lower() in d[1].name.lower()]
    if not chosen:
        listing = "; ".join(f"{info.index}: {info.name}" for _, info in devices)
        raise VulkanUnavailable(f"vulkan_device={spec!r} matches no Vulkan device; available: {listing}")
    return chosen[0]
