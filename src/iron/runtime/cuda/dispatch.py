"""The general launch path: bind, stage host arrays, pack, launch on the right stream, copy back, time.

Every launch that the generated fast path (:mod:`.fastpath`) does not
take comes here; after a launch whose arguments all live on the GPU the
plan gets a fast launcher for those argument kinds.  The caller (the
device) holds its lock.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Sequence

import numpy as np

from ...core.errors import LaunchError
from . import chained, fastpath
from .binding import Bound, bind
from .context import Context
from .graphs import Capture
from .modules import launch_error
from .plan import Geometry, KernelPlan
from .staging import Stager
from .streams import StreamOrder, Timer

log = logging.getLogger("iron.cuda")

#: CUDA_ERROR_INVALID_CONTEXT: no context is current on the calling thread.
INVALID_CONTEXT = 201
#: CUDA_ERROR_NOT_SUPPORTED: what a driver answers a launch attribute it cannot honour with (here: a chained launch).
NOT_SUPPORTED = 801


class Dispatcher:
    """Launches for one device.  ``forced`` (a raw stream handle) overrides the producers' streams."""

    def __init__(self, drv: Any, ctx: Context, stager: Stager, order: StreamOrder, timer: Timer,
                 capture: Capture, native: Any = None) -> None:
        self.drv = drv
        #: The native launch module (:mod:`.native`) the fast launchers call, or None: cuda-bindings.
        self.native = native
        self.ctx = ctx
        self.stager = stager
        self.order = order
        self.timer = timer
        self.capture = capture
        self.forced: int | None = None
        #: cuLaunchKernel's stand-in for chained plans (programmatic dependent launches, :mod:`.chained`).
        self.chained_launch = chained.launcher(drv)

    def launchers(self, plan: KernelPlan) -> tuple[Any, Any]:
        """(the driver call, the native module's call or None) that launch ``plan``: chained or not."""
        if plan.chained:
            return self.chained_launch, self.native.launch_chained if self.native is not None else None
        return self.drv.cuLaunchKernel, self.native.launch if self.native is not None else None

    def fast(self, plan: KernelPlan, args: Sequence[Any], grid: Any, group: Any) -> bool:
        try:
            done = plan.fast(args, grid, group, self.forced)  # type: ignore[misc]
        except TypeError:  # an unhashable grid, an odd argument: the general path says what is wrong
            return False
        if done and self.capture.active:
            self.capture.launches += 1
        return done

    def run(self, plan: KernelPlan, args: Sequence[Any], grid: Any, group: Any, timing: bool) -> float | None:
        self.ctx.make_current()
        geo = plan.geometry(grid, group)
        bound = bind(plan.signature, args, self.ctx.ordinal, plan.converters, self.ordinal_of, self.order.own_handle)
        hosts = bound.host_arrays()
        if hosts and self.capture.active:
            raise LaunchError(f"kernel '{plan.signature.kernel}': argument '{hosts[0][0]}' is host memory, which a "
                              f"CUDA graph cannot capture; pass device arrays (device.to_device(...), torch or CuPy) "
                              f"while capturing")
        stream = self._enter_stream(bound)
        written = {p.name: p.written for p in plan.signature.params}
        addresses, transfer = self.stager.copy_in([(a, written[n]) for n, a in hosts], stream)
        synced = False
        try:
            pointers = {n: t.ptr for n, t in bound.tensors.items() if not isinstance(t, np.ndarray)}
            pointers.update({n: addr for (n, _), addr in zip(hosts, addresses)})
            plan.args.pack(plan.values(pointers, bound, geo))
            if timing:
                self.timer.start(stream, lead=not self.capture.active)
            self._launch(plan, geo, stream)
            if timing:
                self.timer.stop(stream)
            if transfer:
                self.stager.copy_out(transfer, stream)
                self._sync(stream, plan)
                synced = True
            elapsed = self.timer.elapsed_ms() if timing else None
        finally:
            self.stager.finish(transfer) if synced else self.stager.release(transfer)
        if not hosts:
            self._remember_fast(plan, tuple(bound.kinds))
        return elapsed

    def _remember_fast(self, plan: KernelPlan, kinds: tuple[str, ...]) -> None:
        if (plan.fast is not None and plan.fast_kinds == kinds) or not fastpath.eligible(kinds):
            return
        fast = plan.fast_by_kinds.get(kinds)
        if fast is None:
            launch, native = self.launchers(plan)
            fast = plan.fast_by_kinds[kinds] = fastpath.build(plan, kinds, self.ctx.ordinal, launch, self.order,
                                                              functools.partial(self._failed, plan), native)
        plan.fast, plan.fast_kinds = fast, kinds

    def bind(self, plan: KernelPlan, args: Sequence[Any], grid: Any, group: Any, lock: Any, still: str,
             names: dict[str, Any]) -> Any:
        """A launcher of ``plan`` at this geometry with every argument of ``args`` but the addresses fixed
        (:func:`.fastpath.build_bound`), or None."""
        launch, native = self.launchers(plan)
        return fastpath.build_bound(plan, args, grid, group, self.ctx.ordinal, launch, self.order,
                                    functools.partial(self._failed, plan), native, self, lock, still, names)

    def _launch(self, plan: KernelPlan, geo: Geometry, stream: Any) -> None:
        b, t = geo.blocks, geo.threads
        launch = self.chained_launch if plan.chained else self.drv.cuLaunchKernel
        (err,) = launch(plan.function, b[0], b[1], b[2], t[0], t[1], t[2], plan.module.dynamic_shared_bytes, stream,
                        plan.args.params_address, 0)
        if int(err) == NOT_SUPPORTED and plan.chained:
            _unchain(plan)
            (err,) = self.drv.cuLaunchKernel(plan.function, b[0], b[1], b[2], t[0], t[1], t[2],
                                             plan.module.dynamic_shared_bytes, stream, plan.args.params_address, 0)
        if int(err):
            raise launch_error(self.drv, err, plan.module.entry)
        if self.capture.active:
            self.capture.launches += 1

    def _failed(self, plan: KernelPlan, err: Any) -> bool:
        if int(err) == INVALID_CONTEXT:  # a thread that never made the context current: the general path does
            return False
        if int(err) == NOT_SUPPORTED:  # a chained launch refused (by this launcher or one made before the plan was
            if plan.chained:           # unchained): nothing launched, the general path launches it plainly
                _unchain(plan)
            return False
        if isinstance(err, int) and hasattr(self.drv, "CUresult"):  # the native launch returns a plain int
            err = self.drv.CUresult(err)
        raise launch_error(self.drv, err, plan.module.entry)

    def _sync(self, stream: Any, plan: KernelPlan) -> None:
        (err,) = self.drv.cuStreamSynchronize(stream)
        if int(err):
            raise launch_error(self.drv, err, plan.module.entry)

    def _enter_stream(self, bound: Bound) -> Any:
        if self.forced is not None or not bound.streams:
            return self.order.enter(self.forced if self.forced is not None else self.order.own_handle)
        for other in bound.streams[1:]:  # several producers: the first one's stream waits for the others
            self.order.enter(other)
        return self.order.enter(bound.streams[0])

    def ordinal_of(self, ptr: int) -> int:
        """The GPU a device pointer belongs to (-1: not device memory the driver knows)."""
        attr = self.drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        result = self.drv.cuPointerGetAttribute(attr, ptr)
        return int(result[1]) if int(result[0]) == 0 else -1


def _unchain(plan: KernelPlan) -> None:
    """Launch ``plan`` plainly from now on (the driver refused a chained launch): its launchers are made again."""
    log.debug("kernel %s: the driver refused a programmatic dependent launch; launching it plainly",
              plan.module.entry)
    plan.chained = False
    plan.fast, plan.fast_kinds = None, None
    plan.fast_by_kinds.clear()
