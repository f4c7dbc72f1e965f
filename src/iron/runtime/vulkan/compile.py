"""From a kernel's optimised IR to SPIR-V and its ABI, once per kernel and device profile.

The GLSL emitter (``iron.codegen.emit.emit_kernel(kernel, "spirv", profile)``)
and the compiler driver (``iron.codegen.toolchains.spirv.compile_glsl``) live
in ``iron.codegen``; this module caches their result twice.  In memory, by
the kernel's content hash and the device's profile, so relaunching a kernel
costs a dictionary lookup.  On disk (``<cache_dir>/spirv/``), by the GLSL
source and the compilers' identity (``toolchains.spirv.version()``), so a
second process skips the GLSL compiler and spirv-val.  Each file stores its
whole key (the compilers, the target environment and the GLSL source) and is
used only for that key, so a file moved to another entry's name, a corrupt
one or a foreign one is recompiled and replaced (:mod:`iron.runtime.diskcache`).
On a device whose driver ends long loops early (lavapipe), a launch that may
meet the limit asks for a variant that checks its loops (``loop_guard``,
:mod:`.loop_limit`); the variant is part of both keys (the default's disk key
is what it was).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ...codegen.abi import KernelABI
from ...codegen.targets import TargetProfile
from ...core.hashing import kernel_hash
from ...core.ir import Kernel
from .. import BackendUnavailable
from .. import diskcache
from .spirv import MAGIC

if TYPE_CHECKING:
    from ...codegen.emit import EmittedKernel

#: The SPIR-V environment compile_glsl targets (part of the disk key).
TARGET_ENV = "vulkan1.2"
KIND = b"SPV1"


#: The emitter variant that guards loops (``compile(kernel, loop_guard=True)``), in both keys.
LOOP_GUARD_VARIANT = "loop-guard"


def disk_key(source: str, compilers: str, variant: str = "") -> bytes:
    """The whole key of a SPIR-V file: what compiled it, for which environment and emitter variant, from which
    GLSL."""
    variant_part = f"{variant}\0" if variant else ""
    return f"{compilers}\0{TARGET_ENV}\0{variant_part}{source}".encode()


@dataclass(frozen=True)
class CompiledKernel:
    spirv: bytes
    #: What the emitter made: the GLSL the SPIR-V was compiled from, the ABI, the launch limits.
    emitted: "EmittedKernel"

    @property
    def abi(self) -> KernelABI:
        return self.emitted.abi

    @property
    def source(self) -> str:
        return self.emitted.source


class KernelCompiler:
    """Emits kernels for one device's profile and compiles them, caching in memory and on disk.

    ``cache_dir`` None keeps no files.  ``disk_hits`` / ``compiles`` count
    where SPIR-V came from, and ``last_miss`` says why the disk had none.
    """

    def __init__(self, profile: TargetProfile, cache_dir: Path | None = None) -> None:
        self.profile = profile
        self.directory = cache_dir / "spirv" if cache_dir is not None else None
        self._cache: dict[tuple[str, TargetProfile, str], CompiledKernel] = {}
        self._lock = threading.Lock()
        self.disk_hits = 0
        self.compiles = 0
        self.last_miss = ""

    def __len__(self) -> int:
        return len(self._cache)

    def compile(self, kernel: Kernel, loop_guard: bool = False) -> CompiledKernel:
        """``kernel``'s SPIR-V; ``loop_guard``: the variant that reports loops the driver cut short
        (``emit_kernel(loop_guard=True)``)."""
        variant = LOOP_GUARD_VARIANT if loop_guard else ""
        key = (kernel_hash(kernel), self.profile, variant)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        try:
            from ...codegen.emit import emit_kernel
            from ...codegen.toolchains import spirv as toolchain
        except ImportError as e:
            raise BackendUnavailable(f"the vulkan device needs the GLSL emitter and the SPIR-V toolchain driver, "
                                     f"which this build of Iron lacks ({e})") from None
        emitted = emit_kernel(kernel, "spirv", self.profile, loop_guard=loop_guard)
        compiled = CompiledKernel(self._spirv(emitted.source, toolchain, variant), emitted)
        with self._lock:
            self._cache[key] = compiled
        return compiled

    def disk_path(self, source: str, compilers: str, variant: str = "") -> Path | None:
        """The file that holds ``source``'s SPIR-V as compiled by ``compilers`` (a version string)."""
        if self.directory is None:
            return None
        digest = hashlib.sha256(disk_key(source, compilers, variant)).hexdigest()
        return self.directory / f"{digest}.spv"

    def _spirv(self, source: str, toolchain: ModuleType, variant: str) -> bytes:
        compilers = toolchain.version()
        path = self.disk_path(source, compilers, variant)
        key = disk_key(source, compilers, variant)
        if path is not None:
            binary, why = diskcache.read(path, KIND, key)
            if binary is not None and (len(binary) < 20 or len(binary) % 4
                                       or int.from_bytes(binary[:4], "little") != MAGIC):
                binary, why = None, "not a SPIR-V module"
            if binary is not None:
                self.disk_hits += 1
                return binary
            self.last_miss = f"{path}: {why}"
        binary = toolchain.compile_glsl(source, target_env=TARGET_ENV).binary
        self.compiles += 1
        if path is not None and self.directory is not None:
            diskcache.ensure_folder(self.directory)  # if it cannot be made, the write below says why
            failed = diskcache.write(path, KIND, binary, key)
            if failed:
                self.last_miss += f"; {failed}"
        return binary
