"""What a physical device is and what it can do, read once into plain Python values.

:class:`PhysicalDeviceInfo` is what device selection ranks, what launches
check their geometry against, and (as ``VulkanDevice.info``) what a
``TargetProfile`` for the device is made from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from . import coopmat
from .binding import api_version_text
from .features import FeatureSet, query_features

_DEVICE_TYPES = {0: "other", 1: "integrated_gpu", 2: "discrete_gpu", 3: "virtual_gpu", 4: "cpu"}

#: ``VkShaderFloatControlsIndependence`` values.
_INDEPENDENCE = {0: "32-bit only", 1: "all", 2: "none"}

_SUBGROUP_OPS = ("basic", "vote", "arithmetic", "ballot", "shuffle", "shuffle_relative", "clustered", "quad")


@dataclass(frozen=True)
class PhysicalDeviceInfo:
    index: int
    name: str
    device_type: str
    vendor_id: int
    device_id: int
    api_version: int
    #: The driver's own version number and its pipeline-cache compatibility id (hex): the disk cache's key.
    driver_version: int
    pipeline_cache_uuid: str
    driver_name: str
    driver_info: str
    subgroup_size: int
    #: Subgroup operation classes usable in compute shaders ("arithmetic", "shuffle", ...).
    subgroup_operations: tuple[str, ...]
    max_workgroup_invocations: int
    max_workgroup_size: tuple[int, int, int]
    max_workgroup_count: tuple[int, int, int]
    max_shared_memory: int
    max_push_constants_size: int
    max_storage_buffer_range: int
    max_storage_buffers_per_stage: int
    #: Nanoseconds per timestamp tick.
    timestamp_period: float
    #: Index of the queue family kernels are submitted to, and its timestamp width (0: no timestamps).
    queue_family: int
    timestamp_valid_bits: int
    features: FeatureSet
    extensions: frozenset[str]
    #: Subgroup-scope ``(M, N, K, input, accumulator)`` cooperative-matrix combos (:mod:`.coopmat`), and
    #: whether the device runs cooperative-matrix instructions in compute shaders.
    cooperative_matrices: tuple[coopmat.Combo, ...] = ()
    cooperative_matrix_in_compute: bool = False
    #: Float widths whose signed zeros, infinities and NaNs the device keeps when a shader asks
    #: (``shaderSignedZeroInfNanPreserveFloat16/32/64``); Iron asks for all of them (:mod:`.spirv`).
    ieee_preserve_widths: tuple[int, ...] = ()
    #: Float widths whose subnormals the device keeps when a shader asks (``shaderDenormPreserveFloat16/32/64``),
    #: and whether widths may differ in it (``denormBehaviorIndependence``: "all", "32-bit only", "none").
    #: Iron asks where it may (:func:`.spirv.denorm_preserve_widths`); elsewhere subnormals may flush to zero.
    denorm_preserve_widths: tuple[int, ...] = ()
    denorm_independence: str = "all"
    #: Loop iterations one invocation may run in all before the driver ends its loops (lavapipe: 65535),
    #: measured by :mod:`.loop_limit`; None: no limit was seen.
    loop_limit: int | None = None

    @property
    def float_controls(self) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        """What :func:`.spirv.preserve_ieee` needs after the module: the IEEE and denormal widths, the independence."""
        return self.ieee_preserve_widths, self.denorm_preserve_widths, self.denorm_independence

    @property
    def api_version_text(self) -> str:
        return api_version_text(self.api_version)

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (JSON-ready): the form ``VulkanDevice.info`` exposes."""
        d = asdict(self)
        d["api_version"] = self.api_version_text
        d["features"] = dict(self.features.supported)
        d["optional_extensions"] = list(self.features.extensions)
        d["max_workgroup_size"] = list(self.max_workgroup_size)
        d["max_workgroup_count"] = list(self.max_workgroup_count)
        d["subgroup_operations"] = list(self.subgroup_operations)
        d["cooperative_matrices"] = [list(c) for c in self.cooperative_matrices]
        d["ieee_preserve_widths"] = list(self.ieee_preserve_widths)
        d["denorm_preserve_widths"] = list(self.denorm_preserve_widths)
        d["extension_count"] = len(self.extensions)
        del d["extensions"]
        return d


def _text(vk: ModuleType, chars: Any) -> str:
    return vk.ffi.string(chars).decode("utf-8", "replace")


def compute_queue_family(vk: ModuleType, physical_device: Any) -> tuple[int, int] | None:
    """(family index, timestamp bits) of a compute queue, preferring one without graphics (a dedicated
    compute queue does not share the hardware with rendering); None when there is no compute queue."""
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_device)
    compute = [(i, f) for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT and f.queueCount > 0]
    if not compute:
        return None
    compute.sort(key=lambda item: bool(item[1].queueFlags & vk.VK_QUEUE_GRAPHICS_BIT))
    index, family = compute[0]
    return index, int(family.timestampValidBits)


def describe(vk: ModuleType, physical_device: Any, index: int, instance: Any = None) -> PhysicalDeviceInfo | None:
    """The device's properties, or None when it cannot run Iron's kernels (no compute queue).

    ``instance`` (the VkInstance) is needed to list cooperative-matrix shapes, an instance-level query.
    """
    queue = compute_queue_family(vk, physical_device)
    if queue is None:
        return None
    extensions = frozenset(e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical_device, None))
    coop = coopmat.EXTENSION in extensions and instance is not None
    subgroup = vk.VkPhysicalDeviceSubgroupProperties(
        pNext=vk.VkPhysicalDeviceCooperativeMatrixPropertiesKHR() if coop else None)
    floats = vk.VkPhysicalDeviceFloatControlsProperties(pNext=subgroup)
    driver = vk.VkPhysicalDeviceDriverProperties(pNext=floats)
    props2 = vk.VkPhysicalDeviceProperties2(pNext=driver)
    vk.vkGetPhysicalDeviceProperties2(physical_device, pProperties=props2)
    driver = vk.ffi.cast("VkPhysicalDeviceDriverProperties*", props2.pNext)
    floats = vk.ffi.cast("VkPhysicalDeviceFloatControlsProperties*", driver.pNext)
    subgroup = vk.ffi.cast("VkPhysicalDeviceSubgroupProperties*", floats.pNext)
    p, limits = props2.properties, props2.properties.limits
    compute_ops = subgroup.supportedOperations if subgroup.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT else 0
    coop_stages = vk.ffi.cast("VkPhysicalDeviceCooperativeMatrixPropertiesKHR*", subgroup.pNext) if coop else None
    return PhysicalDeviceInfo(
        index=index,
        name=_text(vk, p.deviceName),
        device_type=_DEVICE_TYPES.get(p.deviceType, "other"),
        vendor_id=int(p.vendorID),
        device_id=int(p.deviceID),
        api_version=int(p.apiVersion),
        driver_version=int(p.driverVersion),
        pipeline_cache_uuid=bytes(p.pipelineCacheUUID).hex(),
        driver_name=_text(vk, driver.driverName),
        driver_info=_text(vk, driver.driverInfo),
        subgroup_size=int(subgroup.subgroupSize),
        subgroup_operations=tuple(op for bit, op in enumerate(_SUBGROUP_OPS) if compute_ops & (1 << bit)),
        max_workgroup_invocations=int(limits.maxComputeWorkGroupInvocations),
        max_workgroup_size=tuple(int(v) for v in limits.maxComputeWorkGroupSize),
        max_workgroup_count=tuple(int(v) for v in limits.maxComputeWorkGroupCount),
        max_shared_memory=int(limits.maxComputeSharedMemorySize),
        max_push_constants_size=int(limits.maxPushConstantsSize),
        max_storage_buffer_range=int(limits.maxStorageBufferRange),
        max_storage_buffers_per_stage=int(limits.maxPerStageDescriptorStorageBuffers),
        timestamp_period=float(limits.timestampPeriod),
        queue_family=queue[0],
        timestamp_valid_bits=queue[1],
        features=query_features(vk, physical_device, extensions),
        extensions=extensions,
        cooperative_matrices=coopmat.query_combos(vk, instance, physical_device) if coop else (),
        ieee_preserve_widths=tuple(w for w in (16, 32, 64)
                                   if getattr(floats, f"shaderSignedZeroInfNanPreserveFloat{w}")),
        denorm_preserve_widths=tuple(w for w in (16, 32, 64) if getattr(floats, f"shaderDenormPreserveFloat{w}")),
        denorm_independence=_INDEPENDENCE.get(int(floats.denormBehaviorIndependence), "none"),
        cooperative_matrix_in_compute=bool(coop_stages is not None and coop_stages.cooperativeMatrixSupportedStages
                                           & vk.VK_SHADER_STAGE_COMPUTE_BIT),
    )
