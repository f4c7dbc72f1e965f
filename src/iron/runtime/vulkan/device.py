"""The ``vulkan`` device: SPIR-V compute kernels on any Vulkan driver.

Two layers.  :meth:`VulkanDevice.run_spirv` runs a SPIR-V module that
follows Iron's kernel ABI (:mod:`iron.codegen.abi`) over numpy arrays; it
needs nothing from the compiler and is what hand-written shaders use.
:meth:`VulkanDevice.launch` is the :class:`iron.runtime.Device` entry point:
it turns a kernel's optimised IR into SPIR-V (the compile driver,
:func:`iron.codegen.compiler.compile`, with this device's profile), binds and
checks the arguments like the interpreter, packs the parameter block and
calls ``run_spirv``.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ... import config
from ...codegen.abi import KernelABI, pack_params
from ...codegen.cache import ArtifactCache, cache_directory
from ...codegen.capabilities import check_emitted_launch
from ...codegen.compiler import Artifact, CompileOptions, compile as compile_kernel
from ...codegen.targets import TargetProfile
from ...codegen.toolchains.common import ToolchainMissing
from ...core import dtypes as D
from ...core.errors import LaunchError
from ...core.ir import Kernel
from .. import BackendUnavailable
from ..interp.args import bind_arguments, normalize_geometry
from .dispatch import Dispatcher
from .errors import VulkanValidationError
from . import loop_limit
from .geometry import default_group, workgroups
from .instance import Instance
from .logical import LogicalDevice
from .pipeline_store import PipelineStore
from .pipelines import PipelineCache
from .placement import BufferPlacer, Placement
from .profile import device_profile
from .selection import select_device
from .shared_memory import check_shared_memory


def _close_at_exit(ref: weakref.ref[VulkanDevice]) -> None:
    device = ref()
    if device is not None:
        device.close()


class VulkanDevice:
    """A Vulkan physical device chosen by ``vulkan_device``, with its queue, caches and buffer pools.

    ``device``, ``validation``, ``staging`` and ``cache_dir`` override the
    ``vulkan_device``, ``vulkan_validation``, ``vulkan_staging`` and
    ``cache_dir`` options (``cache_dir="off"``: no disk caches).  With validation on, the Khronos layer
    checks every call and a launch that drew any warning or error raises
    :class:`VulkanValidationError` (all messages stay in
    :attr:`validation_messages`).  Not thread-safe beyond one launch at a
    time, which a lock enforces.
    """

    name = "vulkan"
    target = "spirv"

    def __init__(self, device: str | int | None = None, validation: bool | None = None, staging: str | None = None,
                 cache_dir: str | Path | None = None) -> None:
        spec = str(config.get("vulkan_device") if device is None else device)
        self.validation = bool(config.get("vulkan_validation") if validation is None else validation)
        staging_mode = _staging_mode(staging)
        directory = cache_directory(cache_dir)
        self._lock = threading.RLock()
        self._closed = False
        self._instance = Instance(self.validation)
        try:
            physical, self._info = select_device(self._instance, spec)
            self._device = LogicalDevice(self._instance, physical, self._info)
        except BaseException:
            self._instance.destroy()
            raise
        self._store = PipelineStore(directory, self._info)
        try:
            self._pipelines = PipelineCache(self._device, self._store.load())
            self._buffers = BufferPlacer(self._device, staging_mode)
            self._dispatcher = Dispatcher(self._device)
        except BaseException:
            self._device.destroy()
            self._instance.destroy()
            raise
        self._atexit_hook = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._atexit_hook)
        self._raise_on_validation(0)
        self._info = dataclasses.replace(self._info, loop_limit=self._measure_loop_limit())
        self.profile: TargetProfile = device_profile(self._info)
        self._cache = ArtifactCache(directory)
        #: Artifacts by (kernel object, loop-guard variant): a relaunch skips hashing the IR.
        self._artifacts: dict[tuple[int, bool], tuple[Kernel, Artifact]] = {}

    def _measure_loop_limit(self) -> int | None:
        """The driver's cap on loop passes per invocation (:mod:`.loop_limit`), probed once per driver build."""
        info = self._info

        def run(spirv: bytes, trips: int) -> int:
            abi, buffers, params = loop_limit.probe_launch(trips)
            self.run_spirv(spirv, abi, buffers, params, (1,), (1,))
            return int(buffers[0][0])

        key = (info.name, info.driver_version, info.pipeline_cache_uuid, info.driver_info)
        return loop_limit.measure(key, run)

    # ------------------------------------------------------------ description
    @property
    def info(self) -> dict[str, Any]:
        """The device's name, type, driver, API version, subgroup size and operations, limits, enabled features,
        cooperative-matrix shapes, its memory types, and where storage buffers live (``buffers``: "device-local"
        or "mapped")."""
        d = self._info.to_dict()
        d["buffers"] = "device-local" if self._buffers.staged else "mapped"
        d["memory_types"] = list(self._buffers.memory_types)
        return d

    @property
    def staged(self) -> bool:
        """Whether storage buffers are device-local, filled and read back through staging copies."""
        return self._buffers.staged

    @property
    def cache_stats(self) -> dict[str, Any]:
        """What the disk caches did: the pipeline cache file's fate, SPIR-V disk hits and compiles."""
        return {"pipeline_cache": self._store.status, "pipeline_cache_file": self._store.path and str(self._store.path),
                "pipelines_created": self._pipelines.created, "pipeline_cache_hits": self._pipelines.driver_hits,
                "spirv_disk_hits": self._cache.disk_hits, "spirv_compiles": self._cache.compiles,
                "spirv_last_miss": self._cache.last_miss}

    @property
    def validation_messages(self) -> list[str]:
        return self._instance.log.messages

    @property
    def buffer_allocations(self) -> int:
        """Buffers (storage and staging) created so far (pooled buffers are reused, so this stops growing)."""
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
        return self._run(spirv, abi, buffers, params, grid, group, timing)

    def _run(self, spirv: bytes, abi: KernelABI, buffers: list[np.ndarray], params: bytes, grid: tuple[int, ...],
             group: tuple[int, ...], timing: bool, judge: Callable[[Placement], None] | None = None) -> float | None:
        """:meth:`run_spirv`; ``judge(placement)``, if given, runs after the dispatch and before the results
        are copied back, and may raise to leave the caller's arrays as they were."""
        with self._lock:
            self._check_open()
            group3, counts = workgroups(grid, group, self._info)
            self._check_inputs(abi, buffers, params)
            mark = self._instance.log.mark()
            # Invalid Vulkan usage is undefined behaviour (lavapipe may crash): with validation on,
            # stop at the first stage the layer complains about, before anything runs.
            check = functools.partial(self._raise_on_validation, mark)
            pipeline = self._pipelines.get(spirv, abi, group3, check=check if self.validation else None)
            placed = self._buffers.place(buffers, [t.access != "read" for t in abi.tensors])
            try:
                self._dispatcher.record(pipeline, placed.bound, params, counts, timing,
                                        placed.copies_in, placed.copies_out)
                check()
                elapsed = self._dispatcher.submit()
                if judge is not None:
                    judge(placed)
                placed.finish()
            finally:
                self._buffers.release(placed)
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

    def launch(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...]) -> None:
        """Run ``kernel`` (optimised IR for target "spirv") like the interpreter would, arrays updated in place."""
        self.launch_timed(kernel, args, grid, group, timing=False)

    def launch_timed(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...],
                     timing: bool = True) -> float | None:
        """:meth:`launch`, returning the GPU time in ms (timestamp queries) when ``timing``."""
        grid3, group3, ndim = normalize_geometry(grid, group)
        workgroups(grid, group, self._info)  # reject a bad group before compiling
        bound = bind_arguments(kernel, args)
        tensors = {p.name: arg for p, arg in zip(kernel.params, bound) if p.is_tensor}
        scalars = {p.name: arg for p, arg in zip(kernel.params, bound) if not p.is_tensor}
        sizes = {name: buf.size for name, buf in tensors.items()}
        compiled = self.compile(kernel, loop_guard=self._needs_loop_guard(kernel, scalars, sizes))
        check_emitted_launch(compiled.emitted, grid3[:ndim], group3[:ndim])
        check_shared_memory(kernel, compiled.emitted, group3, self._info.name)
        params = pack_params(compiled.abi, scalars, grid3[:ndim], sizes)
        arrays = [tensors[t.name].data for t in compiled.abi.tensors]
        binding, limit = compiled.emitted.loop_status_binding, self._info.loop_limit
        if binding is None or limit is None:
            return self._run(compiled.binary, compiled.abi, arrays, params, grid, group, timing)
        status = loop_limit.status_buffer()

        def judge(placed: Placement) -> None:  # a loop cut short: raise before any result is copied back
            placed.take(status)
            error = loop_limit.cut_error(kernel, status, limit, self._info.name)
            if error is not None:
                raise error

        return self._run(compiled.binary, loop_limit.status_abi(compiled.abi, binding), [*arrays, status], params,
                         grid, group, timing, judge)

    def compile(self, kernel: Kernel, loop_guard: bool = False) -> Artifact:
        """``kernel``'s SPIR-V for this device's profile, from the compile driver (its memory and disk caches, else
        the GLSL compiler); ``loop_guard``: the variant that reports loops the driver cut short."""
        hit = self._artifacts.get((id(kernel), loop_guard))
        if hit is not None and hit[0] is kernel:
            return hit[1]
        options = CompileOptions(profile=self.profile, binary="spirv", loop_guard=loop_guard, optimised=True)
        try:
            artifact = compile_kernel(kernel, self.target, options, cache=self._cache)
        except ToolchainMissing as e:
            raise BackendUnavailable(f"the vulkan device needs the SPIR-V toolchain to build kernels: {e}") from None
        self._artifacts[(id(kernel), loop_guard)] = (kernel, artifact)
        return artifact

    def _needs_loop_guard(self, kernel: Kernel, scalars: dict[str, Any], sizes: dict[str, int]) -> bool:
        """Where the driver ends long loops early (:mod:`.loop_limit`): refuse a launch whose loops are bound
        to meet the limit, before it runs; whether the others need the shader variant that reports a cut
        (all but those whose loops are known, with these arguments, to stay within the limit)."""
        limit = self._info.loop_limit
        if limit is None:
            return False
        passes = loop_limit.loop_passes(kernel, scalars, sizes)
        if passes > loop_limit.usable_passes(limit):
            raise LaunchError(f"kernel '{kernel.name}': its loops make at least {passes} passes per thread with these "
                              f"arguments, but '{self._info.name}' ends every loop of a thread after {limit} passes "
                              f"in all ({loop_limit.usable_passes(limit)} usable: it would return wrong results): "
                              f"split the work over more threads or launches, or run it on another backend "
                              f"(docs/vulkan.md, Loop limit)")
        most = loop_limit.loop_passes_at_most(kernel, scalars, sizes)
        return most is None or most > limit

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
            self._store.save(self._pipelines.data())
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


def _staging_mode(override: str | None) -> str:
    if override is None:
        return str(config.get("vulkan_staging"))
    mode = str(override).strip().lower()
    if mode not in ("auto", "always", "never"):
        raise ValueError(f"staging must be auto, always or never, not {override!r}")
    return mode
