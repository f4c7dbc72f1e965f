"""From a kernel's optimised IR to SPIR-V and its ABI, once per kernel.

The GLSL emitter (``iron.codegen.emit.emit_kernel(kernel, "spirv")``) and
the compiler driver (``iron.codegen.toolchains.spirv.compile_glsl``) live in
``iron.codegen``; this module only caches their result by the kernel's
content hash, so relaunching a kernel costs a dictionary lookup.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ...codegen.abi import KernelABI
from ...core.hashing import kernel_hash
from ...core.ir import Kernel
from .. import BackendUnavailable


@dataclass(frozen=True)
class CompiledKernel:
    spirv: bytes
    abi: KernelABI
    #: The GLSL the SPIR-V was compiled from (for error messages and ``iron inspect``).
    source: str


class KernelCompiler:
    """Emits and compiles kernels for the ``spirv`` target, caching by :func:`kernel_hash`."""

    def __init__(self) -> None:
        self._cache: dict[str, CompiledKernel] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cache)

    def compile(self, kernel: Kernel) -> CompiledKernel:
        key = kernel_hash(kernel)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        try:
            from ...codegen.emit import emit_kernel
            from ...codegen.toolchains.spirv import compile_glsl
        except ImportError as e:
            raise BackendUnavailable(f"the vulkan device needs the GLSL emitter and the SPIR-V toolchain driver, "
                                     f"which this build of Iron lacks ({e})") from None
        emitted = emit_kernel(kernel, "spirv")
        compiled = CompiledKernel(compile_glsl(emitted.source).binary, emitted.abi, emitted.source)
        with self._lock:
            self._cache[key] = compiled
        return compiled
