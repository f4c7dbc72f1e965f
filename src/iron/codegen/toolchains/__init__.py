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

from . import hip, metal, nvrtc, spirv
from .common import CompiledArtifact, ToolchainError, ToolchainMissing

__all__ = ["CompiledArtifact", "ToolchainError", "ToolchainMissing", "ToolchainStatus", "inventory", "TOOLCHAINS",
           "TOOLCHAIN_OF_TARGET", "check_source"]

#: Every toolchain, by the name tests and ``require_toolchain`` use.
TOOLCHAINS = {"nvrtc": nvrtc, "hip": hip, "spirv": spirv, "metal": metal}
#: The toolchain that checks each emit target's source.
TOOLCHAIN_OF_TARGET = {"cuda": "nvrtc", "hip": "hip", "spirv": "spirv", "metal": "metal"}


def check_source(target: str, source: str) -> CompiledArtifact:
    """Compile emitted ``source`` with ``target``'s real toolchain at its reference arch (CUDA sm_90, or sm_90a
    where the source uses wgmma; HIP gfx90a; GLSL to SPIR-V then spirv-val; MSL type-checked): a
    :class:`ToolchainError` carries the compiler's log."""
    if target == "cuda":
        return nvrtc.compile_cuda(source, arch=nvrtc.arch_for_source(source, "sm_90"))
    if target == "hip":
        return hip.compile_hip(source, arch="gfx90a")
    if target == "spirv":
        artifact = spirv.compile_glsl(source)
        spirv.validate_spirv(artifact.binary)
        return artifact
    if target == "metal":
        return metal.check_msl(source)
    raise ValueError(f"unknown target {target!r}; targets: {', '.join(TOOLCHAIN_OF_TARGET)}")


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
