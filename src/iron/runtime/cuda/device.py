"""The ``cuda`` device: Iron kernels on an NVIDIA GPU through the driver API and NVRTC (cuda-bindings).

A launch goes: kernel IR -> :class:`.plan.KernelPlan` (compiled by the one
driver, :func:`iron.codegen.compiler.compile`, which caches binaries in
memory and on disk; loaded once) ->
arguments bound (:mod:`.binding`; device arrays by pointer, host arrays
through pooled pinned staging, :mod:`.staging`) -> one packed argument
buffer -> ``cuLaunchKernel`` on the producer's stream or the device's own
(:mod:`.streams`).  Relaunches with device arrays take a generated fast
path (:mod:`.fastpath`).  See docs/cuda.md.
"""

from __future__ import annotations

import atexit
import functools
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ... import config
from ...codegen.cache import ArtifactCache, cache_directory
from ...codegen.compiler import Artifact, CompileOptions, compile as compile_kernel
from ...codegen.toolchains.common import ToolchainMissing
from ...core import dtypes as D
from ...core.errors import LaunchError
from ...core.ir import Kernel
from ..interp.device import DEFAULT_GROUPS
from .arch import TARGET, compile_target, device_profile, fmad_options, sm_number, supported_archs
from .array import ArrayStore, CudaArray
from .context import Context
from .dispatch import Dispatcher
from .driver import load_driver
from .errors import CudaUnavailable
from .graphs import Capture, CudaGraph
from .modules import ModuleLoader
from .native import load as load_native
from .plan import KernelPlan, emitted_check
from .pools import device_pool, pinned_pool
from .signature import of_kernel
from .staging import Stager
from .streams import StreamOrder, Timer
from .tensor_maps import TensorMapEncoder

if TYPE_CHECKING:
    from .aot import AotLibrary


def _close_at_exit(ref: weakref.ref[CudaDevice]) -> None:
    device = ref()
    if device is not None:
        device.close()


class CudaDevice:
    """GPU ``ordinal`` with its context, stream, module cache, pools and launch plans.

    ``fmad`` and ``cache_dir`` override the options of those names (``cache_dir="off"``: no disk cache).
    ``follow_streams`` (default on) launches kernels whose arrays come from torch or CuPy on that library's
    current stream; off, every launch goes to the device's own stream.  ``driver`` replaces cuda-bindings'
    driver module (tests).  One launch at a time (a lock).
    """

    name = "cuda"
    target = "cuda"

    def __init__(self, ordinal: int = 0, fmad: bool | None = None, cache_dir: str | Path | None = None,
                 follow_streams: bool = True, driver: Any = None, toolchain: Any = None) -> None:
        drv = driver if driver is not None else load_driver()
        self._drv = drv
        self._tensor_maps = TensorMapEncoder(drv)
        # The native launch calls the real driver's cuLaunchKernel: never with a substituted driver (tests).
        self._native = load_native() if driver is None else None
        self._lock = threading.RLock()
        self._closed = False
        self._ctx = Context(drv, ordinal)
        try:
            self._setup(drv, ordinal, fmad, cache_dir, follow_streams, toolchain)
        except BaseException:
            self._ctx.close()
            raise
        self._atexit_hook = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._atexit_hook)

    def _setup(self, drv: Any, ordinal: int, fmad: bool | None, cache_dir: str | Path | None, follow_streams: bool,
               toolchain: Any) -> None:
        """Everything past the context, so that a failure here still releases the context."""
        self.ordinal = ordinal
        self.arch = self._ctx.info.arch
        self.profile, self.profile_note = device_profile(self.arch)
        self.fmad = bool(config.get("fmad") if fmad is None else fmad)
        compile_arch, fmt = compile_target(self.arch, supported_archs())
        #: What this GPU loads: its profile's source, built by NVRTC as ``fmt`` for ``compile_arch``.
        self.compile_options = CompileOptions(profile=self.profile, binary=fmt, arch=compile_arch,
                                              toolchain_options=tuple(fmad_options(self.fmad)), optimised=True)
        self._cache = ArtifactCache(cache_directory(cache_dir))
        self._toolchain = toolchain
        self._modules = ModuleLoader(drv, self._ctx.info.max_shared_per_group_optin)
        self._device_pool, self._pinned_pool = device_pool(drv), pinned_pool(drv)
        self.stream = self._ctx.stream
        self._order = StreamOrder(drv, self.stream)
        self._timer = Timer(drv)
        self._capture = Capture(drv, self.stream)
        self._plans: dict[int, KernelPlan] = {}
        self._arrays = ArrayStore(self, drv, self._device_pool, self._pinned_pool)
        self._dispatch = Dispatcher(drv, self._ctx, Stager(drv, self._device_pool, self._pinned_pool), self._order,
                                    self._timer, self._capture, self._native)
        self.follow_streams = follow_streams

    # ------------------------------------------------------------ description
    @property
    def follow_streams(self) -> bool:
        return self._follow

    @follow_streams.setter
    def follow_streams(self, value: bool) -> None:
        self._follow = bool(value)
        self._dispatch.forced = None if self._follow and not self._capture.active else self._order.own_handle

    @property
    def info(self) -> dict[str, Any]:
        """Name, architecture, multiprocessors, memory, clocks, driver and NVRTC versions, what Iron builds."""
        d = self._ctx.info.to_dict()
        try:
            if self._toolchain is not None:
                nvrtc_version = self._toolchain.version()
            else:
                from ...codegen.toolchains import nvrtc

                nvrtc_version = nvrtc.version()
        except Exception as e:  # a device without NVRTC can still run ahead-of-time builds
            nvrtc_version = f"unavailable ({e})"
        opts = self.compile_options
        d.update({"nvrtc": nvrtc_version, "profile": self.profile.key, "profile_note": self.profile_note,
                  "builds": f"{opts.binary} for {opts.arch}", "fmad": self.fmad})
        return d

    @property
    def cache_stats(self) -> dict[str, Any]:
        """Module cache counters and last miss, modules loaded, launch plans, pools, stream changes."""
        opts = self.compile_options
        stats = dict(self._cache.stats)
        stats.update({"arch": opts.arch, "format": opts.binary, "options": list(opts.toolchain_options),
                      "modules_loaded": len(self._modules), "plans": len(self._plans),
                      "fast_plans": sum(p.fast is not None for p in self._plans.values()),
                      "device_pool": self._device_pool.stats(), "pinned_pool": self._pinned_pool.stats(),
                      "stream_switches": self._order.switches})
        return stats

    @property
    def last_miss(self) -> str:
        return self._cache.last_miss

    def kernel_report(self, kernel: Kernel, group: Sequence[int] | None = None) -> dict[str, Any]:
        """Registers, shared memory, spills and occupancy of ``kernel`` for ``group`` (default: its last launch's)."""
        from .report import kernel_report

        with self._lock:
            self._check_open()
            plan = self._plan(kernel)
            threads = int(np.prod(group)) if group else None
            return kernel_report(self._drv, plan, self._modules.load(plan.module), self._ctx.info.max_threads_per_sm,
                                 threads)

    def default_group(self, grid: tuple[int, ...]) -> tuple[int, ...]:
        return DEFAULT_GROUPS.get(len(grid), DEFAULT_GROUPS[1])

    # ------------------------------------------------------------ launching
    def launch(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...]) -> None:
        """Run ``kernel`` (IR after the cuda pass pipeline); host arrays are updated in place on return."""
        plan = self._plans.get(id(kernel))
        if plan is not None and plan.fast is not None:
            # launch_fast, inlined: this is the per-launch hot path (docs/cuda.md, "Launch overhead").
            dispatch = self._dispatch
            with self._lock:
                try:
                    done = plan.fast(args, grid, group, dispatch.forced)
                except TypeError:  # an unhashable grid, an odd argument: the general path says what is wrong
                    done = False
                if done:
                    if dispatch.capture.active:
                        dispatch.capture.launches += 1
                    return
        self.launch_timed(kernel, args, grid, group, timing=False)

    def relaunch(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...]) -> bool:
        """:meth:`launch` through ``kernel``'s generated launcher alone: False, with nothing launched, when it has
        none yet or the launcher refuses these arguments (another kind, dtype, device, layout or geometry)."""
        plan = self._plans.get(id(kernel))
        if plan is None or plan.fast is None:
            return False
        dispatch = self._dispatch
        with self._lock:
            try:
                done = plan.fast(args, grid, group, dispatch.forced)
            except TypeError:
                return False
            if done and dispatch.capture.active:
                dispatch.capture.launches += 1
            return bool(done)

    def bind(self, kernel: Kernel, args: Sequence[Any], grid: Any, group: Any, served: Any, name: str
             ) -> Callable[..., bool] | None:
        """``go(*addresses) -> bool``: ``kernel`` launched again at (``grid``, ``group``) with ``args``' scalars and
        element counts and new tensor addresses, for a caller that proved the arguments' kinds, dtypes, shapes,
        devices and layout unchanged (a std call plan); None when ``kernel`` has not launched here with device
        arrays.  ``go`` launches nothing and returns False once ``served[name]`` is no longer this device or
        it is closed, and for a freed array or an overlap: the full path then runs
        (:func:`.fastpath.build_bound`)."""
        with self._lock:
            plan = self._plans.get(id(kernel))
            if plan is None or self._closed:
                return None
            return self._dispatch.bind(plan, args, grid, group, self._lock,
                                       "SERVED.get(NAME) is DEV and not DEV._closed",
                                       {"SERVED": served, "NAME": name, "DEV": self})

    def launch_fast(self, plan: KernelPlan, args: Sequence[Any], grid: Any, group: Any) -> bool:
        """Launch through ``plan``'s generated fast path; False (nothing done) when it does not apply."""
        if plan.fast is None:
            return False
        with self._lock:
            return self._dispatch.fast(plan, args, grid, group)

    def launch_timed(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...],
                     timing: bool = True) -> float | None:
        """:meth:`launch`, returning the kernel's GPU time in ms (CUDA events on its stream) when ``timing``."""
        with self._lock:
            self._check_open()
            return self._dispatch.run(self._plan(kernel), args, grid, group, timing)

    def run_plan(self, plan: KernelPlan, args: Sequence[Any], grid: Any, group: Any, timing: bool = False
                 ) -> float | None:
        """Launch ``plan`` through the general path (then make its fast path when the arguments allow)."""
        with self._lock:
            self._check_open()
            return self._dispatch.run(plan, args, grid, group, timing)

    def prepare(self, kernel: Kernel) -> None:
        """Build ``kernel``'s module (emitter and NVRTC, or the caches) ahead of its first launch.

        No device work and safe from any thread (the artifact cache locks itself; NVRTC runs outside
        Python's lock), so a runner builds the next items' modules on worker threads while the device
        runs the current one; the launch then finds the module in memory."""
        self.compile(kernel)

    def compile(self, kernel: Kernel) -> Artifact:
        """``kernel``'s binary for this GPU, from the compile driver (its memory and disk caches, else NVRTC)."""
        try:
            return compile_kernel(kernel, TARGET, self.compile_options, cache=self._cache, toolchain=self._toolchain)
        except ToolchainMissing as e:
            raise CudaUnavailable(f"backend 'cuda' needs NVRTC to build kernels: {e}") from None

    def chains(self, compiled: Artifact) -> bool:
        """Whether launches of ``compiled`` go out as programmatic dependent launches: the ``pdl`` option, an sm_90+
        GPU, and a kernel that waits for the grid before it (:attr:`.Artifact.waits_upstream`)."""
        return bool(config.get("pdl")) and sm_number(self.arch) >= 90 and compiled.waits_upstream

    def _plan(self, kernel: Kernel) -> KernelPlan:
        plan = self._plans.get(id(kernel))
        if plan is None:
            compiled = self.compile(kernel)
            loaded = self._modules.load(compiled)
            check_launch = functools.partial(emitted_check, compiled.emitted, loaded.max_threads)
            plan = KernelPlan(of_kernel(kernel), compiled, loaded.function, check_launch, keep=kernel,
                              maps=self._tensor_maps, chained=self.chains(compiled))
            self._plans[id(kernel)] = plan
        return plan

    # ------------------------------------------------------------ graphs
    def begin_capture(self) -> None:
        """Record the following launches (device arrays only) into a CUDA graph instead of running them."""
        with self._lock:
            self._check_open()
            self.synchronize()
            self._capture.begin()
            self._dispatch.forced = self._order.own_handle

    def end_capture(self) -> CudaGraph:
        """Stop recording; the instantiated graph, for :meth:`graph_launch`."""
        with self._lock:
            try:
                return self._capture.end()
            finally:
                self.follow_streams = self._follow

    def graph_launch(self, graph: CudaGraph, timing: bool = False) -> float | None:
        """Replay ``graph`` on the device's stream (asynchronous); its GPU time in ms with ``timing``."""
        with self._lock:
            self._check_open()
            stream = self._order.enter(self._order.own_handle)
            if timing:
                self._timer.start(stream)
            self._capture.launch(graph, stream)
            if timing:
                self._timer.stop(stream)
                return self._timer.elapsed_ms()
            return None

    # ------------------------------------------------------------ device arrays and ahead-of-time builds
    def empty(self, shape: int | Sequence[int], dtype: D.DType) -> CudaArray:
        """An uninitialised device array (from the pool)."""
        return self._arrays.empty(shape, dtype)

    def to_device(self, host: np.ndarray) -> CudaArray:
        """A device copy of a numpy array (the copy has finished on return)."""
        return self._arrays.to_device(host)

    def copy_to_device(self, arr: CudaArray, host: np.ndarray) -> None:
        self._arrays.copy(arr, host, to_device=True)

    def copy_to_host(self, out: np.ndarray, arr: CudaArray) -> None:
        self._arrays.copy(arr, out, to_device=False)

    def release_array(self, arr: CudaArray) -> None:
        """Give ``arr``'s block back (to the pool once the GPU can no longer be using it); ``arr`` is then freed."""
        ptr, arr.ptr = arr.ptr, 0
        if ptr and not self._closed and self._arrays.release(ptr):
            self.synchronize()

    def load_build(self, path: str | Path) -> "AotLibrary":
        """The CUBIN (or PTX) kernels of an ``iron build --emit cubin,manifest`` folder, with no NVRTC."""
        from .aot import load_build

        return load_build(self, Path(path))

    # ------------------------------------------------------------ teardown
    def synchronize(self) -> None:
        """Wait for every launch and copy on this GPU (the device's stream and the producers' streams)."""
        with self._lock:
            self._check_open()
            self._ctx.make_current()
            self._ctx.synchronize()
            self._order.reset()
            self._arrays.reclaim()

    def _check_open(self) -> None:
        if self._closed:
            raise LaunchError("this CUDA device was closed; create a new one (iron.runtime.get_device('cuda'))")

    def close(self) -> None:
        """Free every CUDA object; safe to call twice, and called at interpreter exit."""
        with self._lock:
            if self._closed:
                return
            atexit.unregister(self._atexit_hook)
            try:
                self.synchronize()
            except Exception:
                pass  # a faulted context: free what can be freed
            self._closed = True
            for part in (self._capture, self._timer, self._order, self._modules, self._device_pool,
                         self._pinned_pool, self._ctx):
                try:
                    part.close()
                except Exception:
                    pass
            self._plans.clear()

    def __enter__(self) -> CudaDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.arch}, {self.compile_options.binary}"
        return f"<CudaDevice {self.ordinal} '{self._ctx.info.name}' ({state})>"
