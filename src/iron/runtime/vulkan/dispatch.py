"""Recording and submitting one dispatch, and reading its timestamps.

Launches are synchronous: each records one command buffer, submits it with
a fence and waits, so a single command buffer, descriptor pool and query
pool are reset and reused for every launch.  On the staged path
(:mod:`.placement`) the same command buffer holds the copies in, a barrier,
the dispatch, a barrier and the copies out; the two timestamps bracket the
dispatch alone.
"""

from __future__ import annotations

from typing import Any, Sequence

from .errors import VulkanError
from .logical import LogicalDevice
from .memory import Buffer
from .pipelines import Pipeline
from .placement import Copy

#: How long a launch may run before the device reports it as hung (nanoseconds).
FENCE_TIMEOUT_NS = 600 * 10**9


class Dispatcher:
    """Owns the per-launch objects: command buffer, fence, descriptor pool, timestamp queries."""

    def __init__(self, device: LogicalDevice) -> None:
        self.device = device
        vk, dev = device.vk, device.handle
        self._command_pool = vk.vkCreateCommandPool(dev, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=device.info.queue_family), None)
        self._command_buffer = vk.vkAllocateCommandBuffers(dev, vk.VkCommandBufferAllocateInfo(
            commandPool=self._command_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        self._fence = vk.vkCreateFence(dev, vk.VkFenceCreateInfo(), None)
        self._query_pool = None
        if device.info.timestamp_valid_bits:
            self._query_pool = vk.vkCreateQueryPool(dev, vk.VkQueryPoolCreateInfo(
                queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2), None)
        self._descriptor_pool = None
        self._descriptor_capacity = 0
        self._timing = False

    def _descriptor_set(self, pipeline: Pipeline) -> Any:
        """A fresh descriptor set of ``pipeline``'s layout (the pool is reset once per launch)."""
        vk, dev = self.device.vk, self.device.handle
        needed = max(1, len(pipeline.bindings))
        if needed > self._descriptor_capacity:
            if self._descriptor_pool is not None:
                vk.vkDestroyDescriptorPool(dev, self._descriptor_pool, None)
            size = vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=needed)
            self._descriptor_pool = vk.vkCreateDescriptorPool(dev, vk.VkDescriptorPoolCreateInfo(
                maxSets=1, poolSizeCount=1, pPoolSizes=[size]), None)
            self._descriptor_capacity = needed
        else:
            vk.vkResetDescriptorPool(dev, self._descriptor_pool, 0)
        return vk.vkAllocateDescriptorSets(dev, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self._descriptor_pool, descriptorSetCount=1, pSetLayouts=[pipeline.set_layout]))[0]

    def _write_descriptors(self, descriptor_set: Any, pipeline: Pipeline, buffers: Sequence[Buffer]) -> None:
        vk = self.device.vk
        if not buffers:
            return
        writes = [vk.VkWriteDescriptorSet(dstSet=descriptor_set, dstBinding=binding, dstArrayElement=0,
                                          descriptorCount=1, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b.handle, offset=0,
                                                                                 range=b.size)])
                  for binding, b in zip(pipeline.bindings, buffers)]
        vk.vkUpdateDescriptorSets(self.device.handle, len(writes), writes, 0, None)

    def record(self, pipeline: Pipeline, buffers: Sequence[Buffer], params: bytes,
               workgroups: tuple[int, int, int], timing: bool,
               copies_in: Sequence[Copy] = (), copies_out: Sequence[Copy] = ()) -> None:
        """Record ``copies_in``, a dispatch of ``workgroups`` of ``pipeline`` over ``buffers``, then
        ``copies_out`` (run it all with :meth:`submit`)."""
        vk, cb = self.device.vk, self._command_buffer
        if timing and self._query_pool is None:
            raise VulkanError(f"'{self.device.info.name}' has no timestamps on its compute queue; launch without timing")
        descriptor_set = self._descriptor_set(pipeline)
        self._write_descriptors(descriptor_set, pipeline, buffers)
        vk.vkBeginCommandBuffer(cb, vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
        if timing:
            vk.vkCmdResetQueryPool(cb, self._query_pool, 0, 2)
        if copies_in:
            self._copy(copies_in)
            # The copies' writes, visible to the shader's reads and ordered before its writes.
            self._barrier(vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                          vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
        vk.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
        vk.vkCmdBindDescriptorSets(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1, [descriptor_set],
                                   0, None)
        block = vk.ffi.new("char[]", params)
        vk.vkCmdPushConstants(cb, pipeline.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(params), block)
        if timing:
            # A top-of-pipe stamp may be taken while earlier copies still run; a bottom-of-pipe one
            # waits for every earlier command, so it marks the moment the dispatch may start.
            start = vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT if copies_in else vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT
            vk.vkCmdWriteTimestamp(cb, start, self._query_pool, 0)
        vk.vkCmdDispatch(cb, *workgroups)
        if timing:
            vk.vkCmdWriteTimestamp(cb, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self._query_pool, 1)
        if copies_out:
            self._barrier(vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                          vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
            self._copy(copies_out)
            # The copies' writes, visible to the host's reads after the fence.
            self._barrier(vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                          vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        else:
            # The shader's writes to mapped memory, visible to the host's reads after the fence.
            self._barrier(vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                          vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        vk.vkEndCommandBuffer(cb)
        self._timing = timing

    def _copy(self, copies: Sequence[Copy]) -> None:
        vk = self.device.vk
        for c in copies:
            vk.vkCmdCopyBuffer(self._command_buffer, c.src.handle, c.dst.handle, 1,
                               [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=c.size)])

    def _barrier(self, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> None:
        vk = self.device.vk
        barrier = vk.VkMemoryBarrier(srcAccessMask=src_access, dstAccessMask=dst_access)
        vk.vkCmdPipelineBarrier(self._command_buffer, src_stage, dst_stage, 0, 1, [barrier], 0, None, 0, None)

    def submit(self) -> float | None:
        """Run the recorded dispatch and wait for it; the GPU time in milliseconds if it was timed."""
        vk, dev = self.device.vk, self.device.handle
        submit = vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[self._command_buffer])
        try:
            vk.vkQueueSubmit(self.device.queue, 1, [submit], self._fence)
            vk.vkWaitForFences(dev, 1, [self._fence], vk.VK_TRUE, FENCE_TIMEOUT_NS)
        except vk.VkTimeout:
            raise VulkanError(f"a launch on '{self.device.info.name}' did not finish within "
                              f"{FENCE_TIMEOUT_NS // 10**9} s (a kernel that never ends?)") from None
        except (vk.VkError, vk.VkException) as e:
            raise VulkanError(f"a launch on '{self.device.info.name}' failed: {type(e).__name__}") from None
        vk.vkResetFences(dev, 1, [self._fence])
        return self._elapsed_ms() if self._timing else None

    def _elapsed_ms(self) -> float:
        vk = self.device.vk
        stamps = vk.ffi.new("uint64_t[2]")
        vk.vkGetQueryPoolResults(self.device.handle, self._query_pool, 0, 2, vk.ffi.sizeof(stamps), stamps, 8,
                                 vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
        bits = self.device.info.timestamp_valid_bits
        mask = (1 << bits) - 1
        ticks = (stamps[1] - stamps[0]) & mask
        return ticks * self.device.info.timestamp_period / 1e6

    def close(self) -> None:
        vk, dev = self.device.vk, self.device.handle
        if self._descriptor_pool is not None:
            vk.vkDestroyDescriptorPool(dev, self._descriptor_pool, None)
        if self._query_pool is not None:
            vk.vkDestroyQueryPool(dev, self._query_pool, None)
        vk.vkDestroyFence(dev, self._fence, None)
        vk.vkDestroyCommandPool(dev, self._command_pool, None)
