"""Programmatic dependent launches (CUDA sm_90+): a launch the driver may start before the grid ahead of it in
the stream has finished.

With the launch attribute ``PROGRAMMATIC_STREAM_SERIALIZATION`` a grid's blocks may reach the SMs once every block
of the grid before it has begun (or left to launch dependents), instead of after that grid has drained; the
launch's latency and the first blocks' set-up then overlap the previous grid's tail, which is what a decode step
of many short kernels pays between kernels.  Only kernels that wait for the previous grid before touching memory
may be launched so: with the ``pdl`` option Iron's CUDA emitter starts every kernel with ``griddepcontrol.wait``
(:attr:`iron.codegen.emit.EmittedKernel.waits_upstream`), and the device chains a plan only where that holds and the
option is on (:meth:`.device.CudaDevice.chains`).
"""

from __future__ import annotations

from typing import Any, Callable


def launcher(drv: Any) -> Callable[..., tuple[Any]]:
    """A function with ``cuLaunchKernel``'s arguments and result that launches through ``cuLaunchKernelEx`` with
    the programmatic-serialization attribute (the path without the native module).  One config, made at the first
    launch, takes each launch's geometry and stream: the driver reads it during the call only, and a device's
    launches hold its lock."""
    made: list[Any] = []

    def launch(function: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int, stream: Any,
               params: Any, extra: Any) -> tuple[Any]:
        if not made:
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attr.value.programmaticStreamSerializationAllowed = 1
            first = drv.CUlaunchConfig()
            first.attrs = [attr]
            first.numAttrs = 1
            made.append(first)
        cfg = made[0]
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = gx, gy, gz
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = bx, by, bz
        cfg.sharedMemBytes = shared
        cfg.hStream = stream
        return drv.cuLaunchKernelEx(cfg, function, params, extra)

    return launch


__all__ = ["launcher"]
