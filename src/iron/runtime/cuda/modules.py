"""Loading compiled modules into the context and looking up their kernels, once per module.

CUBIN is loaded as is; PTX is NUL-terminated and compiled by the driver.
A function with dynamic shared memory (CUDA's static limit is 48 KiB) is
opted in to it here, once.  The function's own attributes (registers, local memory, the largest group
it can run with) are read once, so a group the compiled code cannot run
with is refused with the reason instead of failing inside the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...codegen.compiler import Artifact
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

    def __init__(self, drv: Any, max_shared_optin: int | None = None) -> None:
        self.drv = drv
        #: The most shared memory per block a function may opt in to (the device's attribute; None: unknown).
        self.max_shared_optin = max_shared_optin
        self._loaded: dict[str, Loaded] = {}

    def __len__(self) -> int:
        return len(self._loaded)

    def load(self, compiled: Artifact) -> Loaded:
        key = compiled.key or f"{compiled.entry}:{compiled.arch}:{compiled.kind}:{hash(compiled.binary)}"
        hit = self._loaded.get(key)
        if hit is not None:
            return hit
        drv = self.drv
        image = compiled.binary + b"\0" if compiled.kind == "ptx" else compiled.binary
        module = check(drv, drv.cuModuleLoadData(image),
                       f"cuModuleLoadData ({compiled.kind} of '{compiled.entry}' for {compiled.arch})")
        try:
            function = check(drv, drv.cuModuleGetFunction(module, compiled.entry.encode()),
                             f"cuModuleGetFunction('{compiled.entry}')")
        except CudaError:
            drv.cuModuleUnload(module)
            raise
        attr = drv.CUfunction_attribute
        try:
            self._opt_in(compiled, function)
        except CudaError:
            drv.cuModuleUnload(module)
            raise
        loaded = Loaded(module, function, _read(drv, attr.CU_FUNC_ATTRIBUTE_NUM_REGS, function),
                        _read(drv, attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function),
                        _read(drv, attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function))
        self._loaded[key] = loaded
        return loaded

    def _opt_in(self, compiled: Artifact, function: Any) -> None:
        """Let ``function`` launch with its dynamic shared memory (past 48 KiB a function must opt in)."""
        need = compiled.dynamic_shared_bytes
        if not need:
            return
        limit = self.max_shared_optin
        if limit and need > limit:
            raise CudaError(f"kernel '{compiled.entry}' needs {need} bytes of shared memory per group; this GPU "
                            f"allows {limit}: use smaller tiles or fewer pipeline stages")
        attr = self.drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(self.drv, self.drv.cuFuncSetAttribute(function, attr, need),
              f"cuFuncSetAttribute('{compiled.entry}', MAX_DYNAMIC_SHARED_SIZE_BYTES, {need})")

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
