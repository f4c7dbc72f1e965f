"""Architectures: the device's own, the profile Iron emits for, and what NVRTC can build for it.

A GPU of compute capability X.Y is ``sm_XY``.  The emitter needs a
:class:`~iron.codegen.targets.TargetProfile`; where Iron has none for the
exact architecture (a newer GPU) the nearest older one of the same family
is used, else the newest known, and the device says so.  NVRTC builds
CUBIN (machine code, which the driver loads as is) for the architectures
it lists; for a GPU newer than that, PTX for the newest one it knows,
which the driver compiles forward.  CUBIN is preferred: a driver may
reject PTX that a newer NVRTC wrote.
"""

from __future__ import annotations

import re

from ...codegen.targets import PROFILES, TargetProfile, UnknownTargetError, profile
from ...codegen.toolchains.nvrtc import supported_archs

__all__ = ["TARGET", "arch_of", "compile_target", "device_profile", "fmad_options", "sm_number", "supported_archs"]

_SM = re.compile(r"^(?:sm|compute)_(\d+)([af]?)$")


def arch_of(major: int, minor: int) -> str:
    """``sm_90`` for compute capability 9.0."""
    return f"sm_{major}{minor}"


def sm_number(arch: str) -> int:
    """90 for ``sm_90``, ``sm_90a`` or ``compute_90``."""
    m = _SM.match(arch)
    if m is None:
        raise ValueError(f"not a CUDA architecture: {arch!r} (expected sm_90, sm_90a, compute_90, ...)")
    return int(m.group(1))


#: The codegen target this device package runs (its backend record's ``target``).
TARGET = "cuda"


def device_profile(arch: str) -> tuple[TargetProfile, str | None]:
    """The profile to emit for a GPU of ``arch``, and a note when it is not that arch's own."""
    try:
        return profile(TARGET, arch), None
    except UnknownTargetError:
        pass
    known = sorted((sm_number(a), p) for (t, a), p in PROFILES.items()
                   if t == TARGET and _SM.match(a) and not _SM.match(a).group(2))
    sm = sm_number(arch)
    same_family = [p for n, p in known if n <= sm and n // 10 == sm // 10]
    older = [p for n, p in known if n <= sm]
    best = (same_family or older)[-1] if older else known[0][1]
    return best, f"Iron has no profile for {arch}; emitting for {best.arch}, the nearest known"


def fmad_options(fmad: bool) -> list[str]:
    """NVRTC's options for the ``fmad`` setting: none for its default (on), ``--fmad=false`` for off."""
    return [] if fmad else ["--fmad=false"]


def compile_target(device_arch: str, supported: list[str]) -> tuple[str, str]:
    """(arch, "cubin" | "ptx") to build for a GPU of ``device_arch`` with an NVRTC that lists ``supported``.

    ``supported`` holds NVRTC's ``sm_*`` names (``nvrtcGetSupportedArchs``); empty means unknown, and then
    CUBIN for the device's own arch is tried.
    """
    if not supported or device_arch in supported:
        return device_arch, "cubin"
    sm = sm_number(device_arch)
    below = sorted((s for s in supported if sm_number(s) <= sm), key=sm_number)
    if not below:
        raise ValueError(f"NVRTC builds for {', '.join(supported)}, none of which runs on {device_arch}")
    return f"compute_{sm_number(below[-1])}", "ptx"


def binary_runs_on(binary_arch: str, fmt: str, device_arch: str) -> bool:
    """Whether code built for ``binary_arch`` as ``fmt`` ("cubin" / "ptx") loads on a GPU of ``device_arch``.

    CUBIN runs on the same major version at an equal or newer minor (``sm_80`` on ``sm_86``), an
    arch-specific one (``sm_90a``) only on that very arch; PTX on any equal or newer GPU (the driver
    compiles it).
    """
    b, d = _SM.match(binary_arch), _SM.match(device_arch)
    if b is None or d is None:
        return False
    bn, dn = int(b.group(1)), int(d.group(1))
    if fmt == "ptx":
        return dn >= bn
    if b.group(2):
        return bn == dn
    return bn // 10 == dn // 10 and dn >= bn
