"""A minimal CUDA launcher for GPU tests: NVRTC cubin -> driver API, following iron.codegen.abi.

Only for tests on a machine with an NVIDIA GPU (the `cuda` device of iron.runtime supersedes it);
it exists so the emitted CUDA is run for real, not just compiled.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

import numpy as np

from iron.codegen.abi import pack_params
from iron.codegen.capabilities import check_emitted_launch
from iron.codegen.emit import emit_kernel
from iron.codegen.toolchains import nvrtc
from iron.core.ir import Kernel


def _check(result: Any) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver error {err}")
    return rest[0] if len(rest) == 1 else rest


class CudaTestContext:
    def __init__(self) -> None:
        from cuda.bindings import driver

        self.drv = driver
        _check(driver.cuInit(0))
        self.dev = _check(driver.cuDeviceGet(0))
        self.ctx = _check(driver.cuDevicePrimaryCtxRetain(self.dev))
        _check(driver.cuCtxSetCurrent(self.ctx))
        major = _check(driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev))
        minor = _check(driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev))
        self.arch = f"sm_{major}{minor}"
        self.name = _check(driver.cuDeviceGetName(64, self.dev)).split(b"\0")[0].decode()

    def launch(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...]) -> None:
        drv = self.drv
        em = emit_kernel(kernel, "cuda")
        check_emitted_launch(em, grid, group)  # the rule every runtime applies before dispatch
        cubin = nvrtc.compile_cuda(em.source, arch=self.arch, name=f"{em.entry}.cu").binary
        module = _check(drv.cuModuleLoadData(cubin))
        try:
            func = _check(drv.cuModuleGetFunction(module, em.entry.encode()))
            tensors = {p.name: a for p, a in zip(kernel.params, args) if p.is_tensor}
            scalars = {p.name: a for p, a in zip(kernel.params, args) if not p.is_tensor}
            ptrs = []
            for t in em.abi.tensors:
                host = np.ascontiguousarray(tensors[t.name])
                dptr = _check(drv.cuMemAlloc(max(host.nbytes, 4)))
                if host.nbytes:
                    _check(drv.cuMemcpyHtoD(dptr, host.ctypes.data, host.nbytes))
                ptrs.append((t, host, dptr))
            g = tuple(grid) + (1,) * (3 - len(grid))
            b = tuple(group) + (1,) * (3 - len(group))
            block = pack_params(em.abi, scalars, g, {n: a.size for n, a in tensors.items()})
            storage = [ctypes.c_uint64(int(d)) for _, _, d in ptrs]
            pblock = ctypes.create_string_buffer(block, len(block))
            arg_ptrs = (ctypes.c_void_p * (len(storage) + 1))(
                *[ctypes.addressof(s) for s in storage], ctypes.addressof(pblock))
            blocks = [-(-g[i] // b[i]) for i in range(3)]
            _check(drv.cuLaunchKernel(func, *blocks, *b, 0, 0, ctypes.addressof(arg_ptrs), 0))
            _check(drv.cuCtxSynchronize())
            for t, host, dptr in ptrs:
                if t.access != "read" and host.nbytes:
                    _check(drv.cuMemcpyDtoH(host.ctypes.data, dptr, host.nbytes))
                    np.copyto(tensors[t.name], host.reshape(tensors[t.name].shape))
                _check(drv.cuMemFree(dptr))
        finally:
            _check(drv.cuModuleUnload(module))
