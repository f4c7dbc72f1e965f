"""Emit native GPU source from optimised IR: CUDA C++, HIP C++, GLSL (for SPIR-V) and MSL.

``emit_kernel(kernel, target)`` takes the call-free output of
``iron.codegen.pipeline.run_pipeline`` and

1. checks the kernel against the target profile (``capabilities.check_kernel``:
   a located ``UnsupportedOnTarget`` for what the device cannot express);
2. legalises it for the target (``legalize.legalize``: IR -> IR, verified);
3. prints it with the one shared C-like printer (``cstyle``) and the
   target's dialect table (``cxx``, ``glsl``, ``msl``).

The kernel ABI (buffer numbering, parameter block) comes from ``abi.py`` and
is taken from the kernel as given, before legalisation, so it is the same
contract the runtime packs (docs/backends.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import IronCompileError
from ...core.ir import Kernel
from ..abi import KernelABI, kernel_abi
from ..capabilities import check_kernel
from ..legalize import INEXACT_POW, legalize, small_int_powers
from ..targets import TargetProfile, UnknownTargetError, default_profile
from .cstyle import KernelPrinter
from .cxx import CudaDialect, HipDialect
from .glsl import GlslDialect
from .msl import MslDialect

_DIALECTS = {"cuda": CudaDialect, "hip": HipDialect, "spirv": GlslDialect, "metal": MslDialect}


@dataclass(frozen=True)
class EmittedKernel:
    """One kernel's source for one target, with the ABI its launches follow."""

    target: str
    source: str
    abi: KernelABI
    #: The function a runtime looks up: the ABI's entry name; ``main`` for GLSL.
    entry: str
    profile: TargetProfile
    #: "cuda", "hip", "glsl" or "msl".
    language: str


def emit_kernel(kernel: Kernel, target: str, profile: TargetProfile | None = None) -> EmittedKernel:
    """``kernel`` (call-free, after ``run_pipeline``) as ``target`` source for ``profile`` (default: the target's)."""
    if target not in _DIALECTS:
        raise UnknownTargetError(f"no emitter for target {target!r}; emitters: {', '.join(_DIALECTS)}")
    prof = profile or default_profile(target)
    if prof.target != target:
        raise ValueError(f"profile {prof.key} is for target {prof.target!r}, not {target!r}")
    check_kernel(kernel, prof)
    abi = kernel_abi(kernel)
    try:
        legal = legalize(kernel, target, min_lane_width=prof.lane_width)
        if target in INEXACT_POW:
            legal = small_int_powers(legal)
    except IronCompileError as e:
        raise e.with_kernel(kernel.name) from None
    dialect = _DIALECTS[target](prof, kernel.name)
    source = KernelPrinter(legal, dialect, abi).print()
    entry = "main" if target == "spirv" else abi.entry
    return EmittedKernel(target, source, abi, entry, prof, dialect.language)


__all__ = ["EmittedKernel", "emit_kernel"]
