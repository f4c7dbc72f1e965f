"""The ``vulkan`` device: SPIR-V compute kernels on any Vulkan driver.

Two layers.  :meth:`VulkanDevice.run_spirv` runs a SPIR-V module that
follows Iron's kernel ABI (:mod:`iron.codegen.abi`) over numpy arrays; it
needs nothing from the compiler and is what hand-written shaders use.
:meth:`VulkanDevice.launch` is the :class:`iron.runtime.Device` entry point:
it turns a kernel's optimised IR into SPIR-V (:mod:`.compile`), binds and
checks the arguments like the interpreter, packs the parameter block and
calls ``run_spirv``.
"""

from __future__ import annotations

import atexit
import functools
import threading
import weakref
from typing import Any, Sequence

import numpy as np

from ... import config
from ...codegen.abi import KernelABI, pack_params
from ...core import dtypes as D
from ...core.errors import LaunchError
from ...core.ir import Kernel
from ..interp.args import bind_arguments, normalize_geometry
from .compile import KernelCompiler
from .dispatch import Dispatcher
from .errors import VulkanValidationError
from .geometry import default_group, workgroups
from .instance import Instance
from .logical import LogicalDevice
from .memory import BufferPool, StorageBuffer
from .pipelines import PipelineCache
from .selection import select_device


def _close_at_exit(ref: weakref.ref[VulkanDevice]) -> None:
    device = ref()
    if device is not None:
        device.close()


class VulkanDevice:
    """A Vulkan physical device chosen by ``vulkan_device``, with its queue, caches and buffer pool.

    ``device`` and ``validation`` override the ``vulkan_device`` and
    ``vulkan_validation`` options.  With validation on, the Khronos layer
    checks every call and a launch that drew any warning or error raises
    :class:`VulkanValidationError` (all messages stay in
    :attr:`validation_messages`).  Not thread-safe beyond one launch at a
    time, which a lock enforces.
    """

    name = "vulkan"
    target = "spirv"

    def __init__(self, device: str | int | None = None, validation: bool | None = None) -> None:
        spec = str(config.get("vulkan_device") if device is None else device)
        self.validation = bool(config.get("vulkan_validation") if validation is None else validation)
        self._lock = threading.RLock()
        self._closed = False
        self._instance = Instance(self.validation)
        try:
            physical, self._info = select_device(self._instance, spec)
            self._device = LogicalDevice(self._instance, physical, self._info)
        except BaseException:
            self._instance.destroy()
            raise
        try:
            self._pipelines = PipelineCache(self._device)
            self._buffers = BufferPool(self._device)
            self._dispatcher = Dispatcher(self._device)
        except BaseException:
            self._device.destroy()
            self._instance.destroy()
            raise
        self._compiler = KernelCompiler()
        self._atexit_hook = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._atexit_hook)
        self._raise_on_validation(0)

    # ------------------------------------------------------------ description
    @property
    def info(self) -> dict[str, Any]:
        """The device's name, type, driver, API version, subgroup size and operations, limits, enabled features."""
        return self._info.to_dict()

    @property
    def validation_messages(self) -> list[str]:
        return self._instance.log.messages

    @property
    def buffer_allocations(self) -> int:
        """Storage buffers created so far (pooled buffers are reused, so this stops growing)."""
        return self._buffers.allocations

    def default_group(self, grid: tuple[int, ...]) -> tuple[int, ...]:
        return default_group(grid, self._info)

    # ------------------------------------------------------------ running
    def run_spirv(self, spirv: bytes, abi: KernelABI, buffers: list[np.ndarray], params: bytes,
                  grid: tuple[int, ...], group: tuple[int, ...], timing: bool = False) -> float | None:
        """Run an ABI-following SPIR-V module over ``grid`` threads in groups of ``group``.

        ``buffers`` are bound in ABI tensor order (binding ``abi.tensors[i].binding``);
        those the ABI marks written are copied back into the arrays in place.
        ``params`` is the parameter block (:func:`iron.codegen.abi.pack_params`),
        pushed as push constants.  Returns the GPU time in ms with ``timing``.
        """
        with self._lock:
            self._check_open()
            group3, counts = workgroups(grid, group, self._info)
            self._check_inputs(abi, buffers, params)
            mark = self._instance.log.mark()
            # Invalid Vulkan usage is undefined behaviour (lavapipe may crash): with validation on,
            # stop at the first stage the layer complains about, before anything runs.
            check = functools.partial(self._raise_on_validation, mark)
            pipeline = self._pipelines.get(spirv, abi, group3, check=check if self.validation else None)
            bound = self._upload(buffers)
            try:
                self._dispatcher.record(pipeline, [b for b, _ in bound], params, counts, timing)
                check()
                elapsed = self._dispatcher.submit()
                for (buffer, array), tensor in zip(bound, abi.tensors):
                    if tensor.access != "read" and array.size:
                        buffer.download(array)
            finally:
                for buffer in {id(b): b for b, _ in bound}.values():
                    self._buffers.release(buffer)
            check()
            return elapsed

    def _check_inputs(self, abi: KernelABI, buffers: Sequence[np.ndarray], params: bytes) -> None:
        if len(buffers) != len(abi.tensors):
            raise LaunchError(f"'{abi.entry}' binds {len(abi.tensors)} buffer(s), got {len(buffers)}")
        for tensor, array in zip(abi.tensors, buffers):
            where = f"'{abi.entry}', buffer '{tensor.name}' (binding {tensor.binding})"
            if not isinstance(array, np.ndarray) or array.dtype != D.numpy_dtype(tensor.dtype):
                got = array.dtype if isinstance(array, np.ndarray) else type(array).__name__
                raise LaunchError(f"{where}: expects a numpy array of {tensor.dtype}, got {got}")
            if not array.flags.c_contiguous:
                raise LaunchError(f"{where}: expects a C-contiguous array")
            if array.nbytes > self._info.max_storage_buffer_range:
                raise LaunchError(f"{where}: {array.nbytes} bytes; '{self._info.name}' binds at most "
                                  f"{self._info.max_storage_buffer_range} bytes per storage buffer")
        if len(params) != abi.params_size:
            raise LaunchError(f"'{abi.entry}': the parameter block has {len(params)} bytes, the ABI {abi.params_size}")
        if len(params) > self._info.max_push_constants_size:
            raise LaunchError(f"'{abi.entry}': a {len(params)}-byte parameter block exceeds '{self._info.name}''s "
                              f"{self._info.max_push_constants_size} bytes of push constants; pass fewer scalars")

    def _upload(self, arrays: Sequence[np.ndarray]) -> list[tuple[StorageBuffer, np.ndarray]]:
        """A buffer per array, filled with its data; an array passed twice (in place) gets one buffer."""
        by_span: dict[tuple[int, int], StorageBuffer] = {}
        bound = []
        for array in arrays:
            span = (array.__array_interface__["data"][0], array.nbytes)
            buffer = by_span.get(span) if array.nbytes else None
            if buffer is None:
                buffer = self._buffers.acquire(max(array.nbytes, 4))  # an empty tensor binds a dummy buffer
                buffer.upload(array)
                if array.nbytes:
                    by_span[span] = buffer
            bound.append((buffer, array))
        return bound

    def launch(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...]) -> None:
        """Run ``kernel`` (optimised IR for target "spirv") like the interpreter would, arrays updated in place."""
        self.launch_timed(kernel, args, grid, group, timing=False)

    def launch_timed(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...],
                     timing: bool = True) -> float | None:
        """:meth:`launch`, returning the GPU time in ms (timestamp queries) when ``timing``."""
        grid3, group3, ndim = normalize_geometry(grid, group)
        workgroups(grid, group, self._info)  # reject a bad group before compiling
        _check_full_groups(kernel, grid3, group3)
        bound = bind_arguments(kernel, args)
        compiled = self._compiler.compile(kernel)
        tensors = {p.name: arg for p, arg in zip(kernel.params, bound) if p.is_tensor}
        scalars = {p.name: arg for p, arg in zip(kernel.params, bound) if not p.is_tensor}
        sizes = {name: buf.size for name, buf in tensors.items()}
        params = pack_params(compiled.abi, scalars, grid3[:ndim], sizes)
        arrays = [tensors[t.name].data for t in compiled.abi.tensors]
        return self.run_spirv(compiled.spirv, compiled.abi, arrays, params, grid, group, timing=timing)

    # ------------------------------------------------------------ teardown
    def _raise_on_validation(self, mark: int) -> None:
        if self.validation:
            new = self._instance.log.since(mark)
            if new:
                raise VulkanValidationError(new)

    def _check_open(self) -> None:
        if self._closed:
            raise LaunchError("this Vulkan device was closed; create a new one (iron.runtime.get_device('vulkan'))")

    def close(self) -> None:
        """Free every Vulkan object; safe to call twice, and called at interpreter exit."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            atexit.unregister(self._atexit_hook)
            self._device.wait_idle()
            self._dispatcher.close()
            self._pipelines.close()
            self._buffers.close()
            self._device.destroy()
            self._instance.destroy()

    def __enter__(self) -> VulkanDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else self._info.api_version_text
        return f"<VulkanDevice '{self._info.name}' ({self._info.device_type}, Vulkan {state})>"


#: Ops that need every invocation of a workgroup (or subgroup) to reach them together.
_WHOLE_GROUP_OPS = frozenset({"barrier", "frag_fill", "frag_load", "frag_store", "mma"})


def _check_full_groups(kernel: Kernel, grid: tuple[int, ...], group: tuple[int, ...]) -> None:
    """Refuse a grid tail for kernels with barriers or fragment ops.

    Threads past the grid return at entry (docs/backends.md); Vulkan leaves a barrier that some
    invocations of the workgroup never reach undefined (it may hang or race on a real GPU, and
    lavapipe happening to cope proves nothing), so such launches must cover whole groups.
    """
    if all(g % b == 0 for g, b in zip(grid, group)):
        return
    op = next((o for o in kernel.walk() if o.opcode in _WHOLE_GROUP_OPS), None)
    if op is None:
        return
    where = f" ({op.loc})" if op.loc else ""
    raise LaunchError(
        f"kernel '{kernel.name}': grid {tuple(grid)} is not a multiple of the group {tuple(group)}, and the kernel "
        f"uses {op.opcode}{where}, which on Vulkan every invocation of a group must reach: round the grid up to "
        f"whole groups and guard the tail with the kernel's own bounds check")
