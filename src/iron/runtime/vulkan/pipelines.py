"""Compute pipelines, created once per (SPIR-V, group size) and kept for the device's lifetime.

Each shader module asks for IEEE signed zeros, infinities and NaNs where the device keeps them
(:func:`.spirv.preserve_ieee`).

The group size reaches the shader through specialization constants 0, 1
and 2 (``layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id
= 2) in;``), so one SPIR-V module serves every group size.  Descriptor set
layouts and pipeline layouts depend only on the bindings and the size of
the parameter block, so kernels share them.  A VkPipelineCache lets the
driver reuse its own compilation work between pipelines, and between
processes when it starts from the data a previous one saved
(:mod:`.pipeline_store`).  Where pipeline-creation feedback is core (Vulkan
1.3), :attr:`PipelineCache.driver_hits` counts the pipelines the driver
reports it found in that cache.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any, Callable

from ...codegen.abi import KernelABI
from .errors import VulkanError
from .logical import LogicalDevice
from .instance import make_version
from .spirv import compute_entry_point, preserve_ieee


@dataclass(frozen=True)
class Pipeline:
    handle: Any
    layout: Any
    set_layout: Any
    #: The storage-buffer bindings of set 0, in the order descriptors are written.
    bindings: tuple[int, ...]
    params_size: int


class PipelineCache:
    """Shader modules, layouts and pipelines, keyed by content."""

    def __init__(self, device: LogicalDevice, initial: bytes | None = None) -> None:
        self.device = device
        vk = device.vk
        self.handle = None
        if initial:
            data = vk.ffi.from_buffer(initial)
            info = vk.VkPipelineCacheCreateInfo(initialDataSize=len(initial), pInitialData=data)
            try:
                self.handle = vk.vkCreatePipelineCache(device.handle, info, None)
            except (vk.VkError, vk.VkException):
                self.handle = None  # the driver refused the data after all: start empty
        if self.handle is None:
            self.handle = vk.vkCreatePipelineCache(device.handle, vk.VkPipelineCacheCreateInfo(), None)
        self.feedback = device.api_version >= make_version(1, 3)
        #: Pipelines created so far, and those the driver says came from the pipeline cache.
        self.created = 0
        self.driver_hits = 0
        self._modules: dict[str, Any] = {}
        self._set_layouts: dict[tuple[int, ...], Any] = {}
        self._layouts: dict[tuple[tuple[int, ...], int], Any] = {}
        self._pipelines: dict[tuple[str, tuple[int, int, int], tuple[int, ...], int], Pipeline] = {}

    def __len__(self) -> int:
        return len(self._pipelines)

    def get(self, spirv: bytes, abi: KernelABI, group: tuple[int, int, int],
            check: Callable[[], None] | None = None) -> Pipeline:
        """The pipeline for ``spirv`` at ``group``; a new one is kept only if ``check()`` (the
        validation layer's verdict) does not raise, since running an invalid pipeline is undefined."""
        digest = hashlib.sha256(spirv).hexdigest()
        bindings = tuple(t.binding for t in abi.tensors)
        key = (digest, group, bindings, abi.params_size)
        pipeline = self._pipelines.get(key)
        if pipeline is None:
            pipeline = self._create(digest, spirv, compute_entry_point(spirv), bindings, abi.params_size, group)
            if check is not None:
                try:
                    check()
                except BaseException:
                    self.device.vk.vkDestroyPipeline(self.device.handle, pipeline.handle, None)
                    raise
            self._pipelines[key] = pipeline
        return pipeline

    def _module(self, digest: str, spirv: bytes) -> Any:
        module = self._modules.get(digest)
        if module is None:
            vk = self.device.vk
            spirv = preserve_ieee(spirv, *self.device.info.float_controls)
            info = vk.VkShaderModuleCreateInfo(codeSize=len(spirv), pCode=spirv)
            module = vk.vkCreateShaderModule(self.device.handle, info, None)
            self._modules[digest] = module
        return module

    def _set_layout(self, bindings: tuple[int, ...]) -> Any:
        layout = self._set_layouts.get(bindings)
        if layout is None:
            vk = self.device.vk
            entries = [vk.VkDescriptorSetLayoutBinding(binding=b, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                       descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                       for b in bindings]
            info = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=len(entries), pBindings=entries or None)
            layout = vk.vkCreateDescriptorSetLayout(self.device.handle, info, None)
            self._set_layouts[bindings] = layout
        return layout

    def _layout(self, bindings: tuple[int, ...], params_size: int) -> Any:
        key = (bindings, params_size)
        layout = self._layouts.get(key)
        if layout is None:
            vk = self.device.vk
            push = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=params_size)
            info = vk.VkPipelineLayoutCreateInfo(setLayoutCount=1, pSetLayouts=[self._set_layout(bindings)],
                                                 pushConstantRangeCount=1, pPushConstantRanges=[push])
            layout = vk.vkCreatePipelineLayout(self.device.handle, info, None)
            self._layouts[key] = layout
        return layout

    def _create(self, digest: str, spirv: bytes, entry: str, bindings: tuple[int, ...], params_size: int,
                group: tuple[int, int, int]) -> Pipeline:
        vk = self.device.vk
        layout = self._layout(bindings, params_size)
        entries = [vk.VkSpecializationMapEntry(constantID=i, offset=4 * i, size=4) for i in range(3)]
        data = vk.ffi.new("char[]", struct.pack("<3I", *group))
        specialization = vk.VkSpecializationInfo(mapEntryCount=3, pMapEntries=entries, dataSize=12, pData=data)
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                                                   module=self._module(digest, spirv), pName=entry,
                                                   pSpecializationInfo=specialization)
        feedback = vk.ffi.new("VkPipelineCreationFeedback*") if self.feedback else None
        chain = None
        if feedback is not None:
            stages = vk.ffi.new("VkPipelineCreationFeedback[1]")
            chain = vk.VkPipelineCreationFeedbackCreateInfo(pPipelineCreationFeedback=feedback,
                                                            pipelineStageCreationFeedbackCount=1,
                                                            pPipelineStageCreationFeedbacks=stages)
        info = vk.VkComputePipelineCreateInfo(pNext=chain, stage=stage, layout=layout)
        try:
            handle = vk.vkCreateComputePipelines(self.device.handle, self.handle, 1, [info], None)[0]
        except (vk.VkError, vk.VkException) as e:
            raise VulkanError(f"creating the compute pipeline for '{entry}' failed: {type(e).__name__}") from None
        self.created += 1
        if feedback is not None and feedback.flags & vk.VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT \
                and feedback.flags & vk.VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT:
            self.driver_hits += 1
        return Pipeline(handle, layout, self._set_layout(bindings), bindings, params_size)

    def data(self) -> bytes:
        """The driver's serialised cache (vkGetPipelineCacheData; the binding wraps no such call)."""
        vk = self.device.vk
        size = vk.ffi.new("size_t*")
        if vk.lib.vkGetPipelineCacheData(self.device.handle, self.handle, size, vk.ffi.NULL) != vk.VK_SUCCESS:
            return b""
        buffer = vk.ffi.new("char[]", size[0])
        if vk.lib.vkGetPipelineCacheData(self.device.handle, self.handle, size, buffer) != vk.VK_SUCCESS:
            return b""
        return bytes(vk.ffi.buffer(buffer, size[0]))

    def close(self) -> None:
        vk, dev = self.device.vk, self.device.handle
        for pipeline in self._pipelines.values():
            vk.vkDestroyPipeline(dev, pipeline.handle, None)
        for layout in self._layouts.values():
            vk.vkDestroyPipelineLayout(dev, layout, None)
        for set_layout in self._set_layouts.values():
            vk.vkDestroyDescriptorSetLayout(dev, set_layout, None)
        for module in self._modules.values():
            vk.vkDestroyShaderModule(dev, module, None)
        vk.vkDestroyPipelineCache(dev, self.handle, None)
        self._pipelines.clear()
        self._layouts.clear()
        self._set_layouts.clear()
        self._modules.clear()
