"""The real compilers that check Iron's emitted code: one module per toolchain.

- :mod:`.nvrtc`: CUDA C++ -> CUBIN/PTX (NVRTC, no GPU needed), with ptxas's resource report;
- :mod:`.hip`: HIP C++ -> AMDGPU code objects (ROCm 5.2 clang), with VGPR/SGPR counts;
- :mod:`.spirv`: GLSL compute -> SPIR-V (glslc), validated (spirv-val), disassembled (spirv-dis);
- :mod:`.metal`: MSL type-checked by clang++-19 against Iron's Metal shim header.

Each module has ``available()``, ``unavailable_reason()``, ``version()`` (for cache keys) and
its compile/check function; modules import their tools lazily, so importing this package never
fails for lack of one.  :func:`inventory` lists them all for ``iron device`` and the docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from ..backends import get_target
from . import hip, metal, nvrtc, spirv
from .common import CompiledArtifact, ToolchainError, ToolchainMissing

__all__ = ["CompiledArtifact", "ToolchainError", "ToolchainMissing", "ToolchainStatus", "inventory", "TOOLCHAINS",
           "toolchain_of", "check_source"]

#: Every toolchain, by the name backends (``iron.codegen.backends``), tests and ``require_toolchain`` use.  Each
#: module offers ``available()``, ``version()``, ``build(source, arch=, kind=, name=)`` (a CompiledArtifact) and
#: ``listing(source, arch=, name=)`` (text, title, report: ``iron inspect --asm``); ``CHECK_KIND`` is what
#: :func:`check_source` builds.
TOOLCHAINS: dict[str, ModuleType] = {"nvrtc": nvrtc, "hip": hip, "spirv": spirv, "metal": metal}


def toolchain_of(target: str) -> ModuleType:
    """The toolchain module that checks ``target``'s emitted source (its backend's ``toolchain``)."""
    name = get_target(target).toolchain
    if name is None:
        raise ValueError(f"target {target!r} emits no source, so no toolchain checks it")
    return TOOLCHAINS[name]


def check_source(target: str, source: str) -> CompiledArtifact:
    """Compile emitted ``source`` with ``target``'s real toolchain at its backend's default arch (CUDA sm_90, or
    sm_90a where the source uses wgmma; HIP gfx90a; GLSL to validated SPIR-V; MSL type-checked): a
    :class:`ToolchainError` carries the compiler's log."""
    backend = get_target(target)
    module = toolchain_of(target)
    return module.build(source, arch=backend.default_arch, kind=module.CHECK_KIND)


@dataclass(frozen=True)
class ToolchainStatus:
    """One toolchain's state here: usable or not, its version, and why not / how to install."""

    name: str
    tool: str
    purpose: str
    available: bool
    version: str | None
    reason: str | None
    install: str


def inventory() -> list[ToolchainStatus]:
    """Every toolchain Iron knows, available or not, in a stable order."""
    out = []
    for name, module in TOOLCHAINS.items():
        ok = module.available()
        out.append(ToolchainStatus(name=name, tool=module.TOOL, purpose=module.PURPOSE, available=ok,
                                   version=module.version() if ok else None,
                                   reason=None if ok else module.unavailable_reason(), install=module.INSTALL))
    return out
