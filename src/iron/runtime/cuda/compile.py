"""From a kernel's optimised IR to a CUDA module (CUBIN or PTX), cached in memory and on disk.

Needs no GPU: the emitter and NVRTC run on any machine, so this layer is
tested on CPU-only machines.  In memory, modules are kept by the kernel's
IR hash and everything else in the key, so relaunching costs a dictionary
lookup.  On disk (``<cache_dir>/cuda/``, :mod:`.modstore`) entries are keyed
by :func:`.cachekey.components`; a miss records why in :attr:`last_miss`
and the counters in :attr:`ModuleCompiler.stats` say where modules came
from.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Sequence

from ... import config
from ...codegen.abi import KernelABI
from ...codegen.targets import TargetProfile
from ...core.hashing import kernel_hash
from ...core.ir import Kernel
from . import cachekey
from .errors import CudaUnavailable
from .modstore import Entry, ModuleStore

if TYPE_CHECKING:
    from ...codegen.emit import EmittedKernel


@dataclass(frozen=True)
class CompiledModule:
    """One kernel's machine code for one architecture, with what launching it needs."""

    binary: bytes
    #: "cubin" or "ptx".
    format: str
    arch: str
    entry: str
    abi: KernelABI
    #: What the emitter made (the source, launch limits); None for modules loaded ahead of time.
    emitted: "EmittedKernel | None"
    #: ptxas's resource report (registers, shared memory, spills) where there is one.
    report: dict[str, Any] = field(default_factory=dict)
    #: The disk key (hex SHA-256) and where this module came from: "memory", "disk", "nvrtc" or "aot".
    key: str = ""
    origin: str = "nvrtc"
    #: Dynamic shared memory per group (``EmittedKernel.dynamic_shared_bytes``): the loader opts the
    #: function in to it, every launch passes it.
    dynamic_shared_bytes: int = 0


def fmad_options(fmad: bool) -> list[str]:
    """NVRTC's options for the ``fmad`` setting: none for its default (on), ``--fmad=false`` for off."""
    return [] if fmad else ["--fmad=false"]


def nvrtc_toolchain() -> ModuleType:
    """The NVRTC wrapper, or CudaUnavailable saying how to install it."""
    from ...codegen.toolchains import nvrtc

    if not nvrtc.available():
        raise CudaUnavailable(f"backend 'cuda' needs NVRTC: {nvrtc.unavailable_reason()}; install: {nvrtc.INSTALL}")
    return nvrtc


def supported_archs() -> list[str]:
    """The ``sm_*`` architectures this NVRTC builds CUBIN for (empty when it cannot say)."""
    try:
        from cuda.bindings import nvrtc as raw

        err, archs = raw.nvrtcGetSupportedArchs()
        return [f"sm_{a}" for a in archs] if int(err) == 0 else []
    except Exception:
        return []


class ModuleCompiler:
    """Emits kernels for ``profile`` and builds them for ``arch`` as ``fmt``, caching in memory and on disk.

    ``options`` are extra NVRTC options (:func:`fmad_options`); ``cache_dir`` None keeps no files;
    ``toolchain`` is the NVRTC wrapper (tests substitute one).  Thread-safe.
    """

    def __init__(self, profile: TargetProfile, arch: str, fmt: str = "cubin", options: Sequence[str] = (),
                 cache_dir: Path | None = None, toolchain: Any = None) -> None:
        if fmt not in ("cubin", "ptx"):
            raise ValueError(f"fmt must be 'cubin' or 'ptx', not {fmt!r}")
        self.profile = profile
        self.arch = arch
        self.format = fmt
        self.options = tuple(options)
        self.store = ModuleStore(cache_dir / "cuda" if cache_dir is not None else None)
        self._toolchain = toolchain
        self._memory: dict[tuple[str, ...], CompiledModule] = {}
        self._lock = threading.Lock()
        self.memory_hits = 0
        self.disk_hits = 0
        self.compiles = 0
        self.rebuilt = 0
        self.write_failures = 0
        #: Why the last disk lookup missed ("" until one has).
        self.last_miss = ""

    @property
    def toolchain(self) -> Any:
        if self._toolchain is None:
            self._toolchain = nvrtc_toolchain()
        return self._toolchain

    @property
    def stats(self) -> dict[str, Any]:
        """Where modules came from so far, the cache directory and the last miss's reason."""
        return {"memory_hits": self.memory_hits, "disk_hits": self.disk_hits, "compiles": self.compiles,
                "rebuilt": self.rebuilt, "write_failures": self.write_failures, "last_miss": self.last_miss,
                "directory": str(self.store.directory) if self.store.directory is not None else None,
                "arch": self.arch, "format": self.format, "options": list(self.options)}

    def compile(self, kernel: Kernel) -> CompiledModule:
        """The module of ``kernel`` (call-free IR after the cuda pass pipeline)."""
        ir_hash = kernel_hash(kernel)
        options = self.options_for(kernel)
        arch = self.arch_for(kernel)
        mkey = (ir_hash, self.profile.key, arch, self.format, *options)
        with self._lock:
            hit = self._memory.get(mkey)
            if hit is not None:
                self.memory_hits += 1
                return hit
        from ...codegen.emit import emit_kernel

        emitted = emit_kernel(kernel, "cuda", self.profile)
        module = self.build(emitted, ir_hash, options, arch)
        with self._lock:
            self._memory.setdefault(mkey, module)
            return self._memory[mkey]

    def arch_for(self, kernel: Kernel) -> str:
        """The arch ``kernel`` builds for: the device's, or its arch-specific variant (``sm_90a``, ``compute_90a``)
        when the kernel multiplies on warpgroups (``mma_wg``: wgmma exists in that variant alone)."""
        if self.arch.endswith("a") or not any(op.opcode == "mma_wg" for op in kernel.walk()):
            return self.arch
        return f"{self.arch}a"

    def options_for(self, kernel: Kernel) -> tuple[str, ...]:
        """The NVRTC options for ``kernel``: the device's, plus ``--fmad=false`` when its pipeline did not
        contract (``fp_contract`` off): NVRTC would otherwise fuse the multiplies and adds it left apart."""
        if kernel.meta.get("contract") is False and "--fmad=false" not in self.options:
            return (*self.options, "--fmad=false")
        return self.options

    def build(self, emitted: "EmittedKernel", ir_hash: str, options: tuple[str, ...] | None = None,
              arch: str | None = None) -> CompiledModule:
        """The module of an emitted kernel: from the disk cache when it holds a sound entry, else NVRTC."""
        tool = self.toolchain
        options = self.options if options is None else options
        arch = self.arch if arch is None else arch
        parts = cachekey.components(ir_hash, emitted.source, tool.version(), arch, self.format, options,
                                    self.profile.key)
        digest = cachekey.digest(parts)
        entry, why = self.store.read(digest, parts)
        if entry is not None:
            with self._lock:  # builds run on several threads at once (a runner's build pool)
                self.disk_hits += 1
            return self._module(entry, emitted, digest, "disk", arch)
        if why == "no file yet":
            why = cachekey.explain_miss(emitted.entry, self.store.last_build(emitted.entry), parts)
        elif self.store.directory is not None:
            with self._lock:
                self.rebuilt += 1
            why = f"{self.store.path(digest, self.format)}: {why}; rebuilt"
        self.last_miss = why
        art = tool.compile_cuda(emitted.source, arch=arch, options=list(options),
                                name=f"{emitted.entry}.cu", want=self.format)
        report = {k: v for k, v in art.report.items() if k != "kernels"}
        report["kernel"] = art.report.get("kernels", {}).get(emitted.entry, {})
        entry = Entry(parts, emitted.entry, art.binary, report)
        failed = self.store.write(digest, entry)
        with self._lock:
            self.compiles += 1
            if failed:
                self.write_failures += 1
                self.last_miss = f"{why}; not stored: {failed}"
        return self._module(entry, emitted, digest, "nvrtc", arch)

    def _module(self, entry: Entry, emitted: "EmittedKernel", digest: str, origin: str, arch: str
                ) -> CompiledModule:
        return CompiledModule(entry.binary, self.format, arch, emitted.entry, emitted.abi, emitted,
                              entry.report, digest, origin, emitted.dynamic_shared_bytes)


def cache_directory(override: str | Path | None) -> Path | None:
    """The ``cache_dir`` option, or ``override`` ("off": no disk cache)."""
    if override is None:
        return config.cache_dir()
    return None if str(override).strip().lower() == config.CACHE_OFF else Path(override).expanduser()
