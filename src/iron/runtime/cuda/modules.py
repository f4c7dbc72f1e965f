"""Loading compiled modules into the context and looking up their kernels, once per module.

CUBIN is loaded as is; PTX is NUL-terminated and compiled by the driver.
The function's own attributes (registers, local memory, the largest group
it can run with) are read once, so a group the compiled code cannot run
with is refused with the reason instead of failing inside the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .compile import CompiledModule
from .driver import check
from .errors import CudaError

#: CUresult values after which the context is unusable: the process must make a new one.
STICKY = {700: "an illegal memory address", 701: "too many resources requested",
          714: "a misaligned address", 715: "an illegal instruction", 716: "a misaligned address",
          717: "an invalid address space", 718: "an invalid program counter", 719: "a failed launch (a trap)"}


@dataclass
class Loaded:
    module: Any
    function: Any
    registers: int | None
    local_bytes: int | None
    max_threads: int | None


class ModuleLoader:
    """Modules of one context by key (a compiled module's disk key, or its entry for ahead-of-time ones)."""

    def __init__(self, drv: Any) -> None:
        self.drv = drv
        self._loaded: dict[str, Loaded] = {}

    def __len__(self) -> int:
        return len(self._loaded)

    def load(self, compiled: CompiledModule) -> Loaded:
        key = compiled.key or f"{compiled.entry}:{compiled.arch}:{compiled.format}:{hash(compiled.binary)}"
        hit = self._loaded.get(key)
        if hit is not None:
            return hit
        drv = self.drv
        image = compiled.binary + b"\0" if compiled.format == "ptx" else compiled.binary
        module = check(drv, drv.cuModuleLoadData(image),
                       f"cuModuleLoadData ({compiled.format} of '{compiled.entry}' for {compiled.arch})")
        try:
            function = check(drv, drv.cuModuleGetFunction(module, compiled.entry.encode()),
                             f"cuModuleGetFunction('{compiled.entry}')")
        except CudaError:
            drv.cuModuleUnload(module)
            raise
        attr = drv.CUfunction_attribute
        loaded = Loaded(module, function, _read(drv, attr.CU_FUNC_ATTRIBUTE_NUM_REGS, function),
                        _read(drv, attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function),
                        _read(drv, attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function))
        self._loaded[key] = loaded
        return loaded

    def close(self) -> None:
        for loaded in self._loaded.values():
            self.drv.cuModuleUnload(loaded.module)
        self._loaded.clear()


def _read(drv: Any, attribute: Any, function: Any) -> int | None:
    result = drv.cuFuncGetAttribute(attribute, function)
    return int(result[1]) if int(result[0]) == 0 else None


def launch_error(drv: Any, err: Any, entry: str) -> CudaError:
    """The error for a failed launch (or a failure a synchronisation reported), saying what it means."""
    from .driver import describe

    code = int(err)
    text = f"kernel '{entry}': {describe(drv, err)}"
    if code in STICKY:
        text += (f"; {STICKY[code]} corrupts the CUDA context, so every later call in this process fails: "
                 f"start a new process (iron test / iron bench run each kernel in a fresh child)")
    return CudaError(text, code, getattr(err, "name", None))
