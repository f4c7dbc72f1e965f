"""HIP C++ to AMDGPU code objects, offline, through Debian's ROCm 5.2 clang (clang++-15).

``hipcc`` is a thin wrapper around this clang (and, with CUDA's nvcc on PATH, it would pick the
NVIDIA platform unless HIP_PLATFORM=amd), so the compiler is called directly: device-only,
unbundled, giving a raw ELF code object per architecture.  ``llvm-readelf --notes`` prints the
code object's AMDGPU metadata, from which the report takes each kernel's VGPR/SGPR/AGPR counts,
spills, wavefront size and LDS use.  gfx90a (CDNA2, wave64) and gfx1030 (RDNA2, wave32) work;
gfx942 and gfx11xx need a newer ROCm than Debian 12 has.
"""

from __future__ import annotations

import functools
import glob
import re
import subprocess
from pathlib import Path
from typing import Any

from .common import (CompiledArtifact, SourceWorkdir, ToolchainError, ToolchainMissing, decode,
                     error_from_diagnostics, find_tool, parse_clang_diagnostics, run_tool)

TOOL = "hip-clang"
PURPOSE = "HIP C++ -> AMDGPU code objects (gfx90a, gfx1030), compile-only"
INSTALL = "apt-get install hipcc libamdhip64-dev rocm-device-libs llvm-15 (or: bash scripts/install_toolchains.sh)"

_CLANG = ("clang++-15",)
_READELF = ("llvm-readelf-15",)
_ARCH = re.compile(r"^gfx[0-9a-f]+$")


@functools.cache
def _probe() -> tuple[str | None, dict[str, str], str | None]:
    """(version, paths of clang/readelf/device libs/headers, why unavailable)."""
    clang = find_tool(_CLANG)
    if clang is None:
        return None, {}, "clang++-15 (ROCm 5.2's HIP compiler) not found"
    readelf = find_tool(_READELF)
    if readelf is None:
        return None, {}, "llvm-readelf-15 not found"
    libs = sorted(glob.glob("/usr/lib/*/amdgcn/bitcode")) + sorted(glob.glob("/opt/rocm*/amdgcn/bitcode"))
    libs = [d for d in libs if Path(d, "ockl.bc").is_file()]
    if not libs:
        return None, {}, "the AMDGPU device libraries (ockl.bc) are not installed"
    if not Path("/usr/include/hip/hip_runtime.h").is_file():
        return None, {}, "the HIP headers (hip/hip_runtime.h) are not installed"
    out = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"clang version (\S+)", out)
    clang_version = m.group(1) if m else "unknown"
    libs_version = _package_version("rocm-device-libs")
    return (f"clang {clang_version} (rocm-device-libs {libs_version})",
            {"clang": clang, "readelf": readelf, "device_libs": libs[0]}, None)


def _package_version(package: str) -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    except FileNotFoundError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def available() -> bool:
    return _probe()[0] is not None


def unavailable_reason() -> str | None:
    return _probe()[2]


def version() -> str:
    """The clang and device-library versions, for cache keys."""
    found, _, why = _probe()
    if found is None:
        raise ToolchainMissing(TOOL, INSTALL, why)
    return found


def compile_hip(source: str, *, arch: str = "gfx90a", name: str = "kernel.hip") -> CompiledArtifact:
    """Compile HIP C++ to a raw AMDGPU code object (ELF) for ``arch``, with its resource report."""
    if not _ARCH.match(arch):
        raise ValueError(f"arch must look like gfx90a or gfx1030, not {arch!r}")
    ver = version()
    paths = _probe()[1]
    with SourceWorkdir(source, name) as work:
        out = work.dir / "kernel.co"
        argv = [paths["clang"], "-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output",
                f"--offload-arch={arch}", "--rocm-path=/usr", f"--hip-device-lib-path={paths['device_libs']}",
                "-std=c++17", "-O3", "-o", str(out), str(work.source_path)]
        proc = run_tool(argv, tool=TOOL, install=INSTALL)
        log = work.relocate(decode(proc.stderr + proc.stdout)).strip()
        if proc.returncode != 0 or not out.is_file():
            raise error_from_diagnostics(TOOL, parse_clang_diagnostics(log), source, name, log)
        binary = out.read_bytes()
        notes = run_tool([paths["readelf"], "--notes", str(out)], tool=TOOL, install=INSTALL)
    if notes.returncode != 0:
        raise ToolchainError(TOOL, f"llvm-readelf could not read the code object: {decode(notes.stderr).strip()}")
    report = parse_amdgpu_notes(decode(notes.stdout))
    report["arch"] = arch
    report["warnings"] = [f"{d.file}:{d.line}: {d.message}" for d in parse_clang_diagnostics(log)
                          if d.severity == "warning"]
    return CompiledArtifact(binary, log, report, TOOL, ver)


_KERNEL_FIELDS = {
    ".vgpr_count": "vgprs", ".sgpr_count": "sgprs", ".agpr_count": "agprs",
    ".vgpr_spill_count": "vgpr_spills", ".sgpr_spill_count": "sgpr_spills",
    ".wavefront_size": "wavefront_size", ".group_segment_fixed_size": "lds_bytes",
    ".private_segment_fixed_size": "scratch_bytes", ".max_flat_workgroup_size": "max_workgroup_size",
}
_KERNEL_START = re.compile(r"^  - (\.[\w]+):\s*(.*)$")
_KERNEL_KEY = re.compile(r"^    (\.[\w]+):\s*(.*)$")


def parse_amdgpu_notes(notes: str) -> dict[str, Any]:
    """Per-kernel resources from the ``amdhsa.kernels`` metadata that ``llvm-readelf --notes`` prints.

    The metadata is YAML; only the scalar keys at kernel level are needed, so they are read by
    indentation (kernel entries open with ``  - ``, their keys sit at four spaces; arguments are
    deeper).  The top level repeats the largest vgprs/sgprs and the wavefront size.
    """
    kernels: dict[str, dict[str, Any]] = {}
    fields: dict[str, Any] | None = None
    in_kernels = False
    target = None

    def finish() -> None:
        if fields is not None and "name" in fields:
            kernels[fields.pop("name")] = fields

    for line in notes.splitlines():
        if line.startswith("amdhsa.kernels:"):
            in_kernels = True
            continue
        if line.startswith("amdhsa.target:"):
            target = line.split(":", 1)[1].strip()
        if in_kernels and line and not line.startswith(" "):
            in_kernels = False
        if not in_kernels:
            continue
        start = _KERNEL_START.match(line)
        if start:
            finish()
            fields = {}
        m = start or _KERNEL_KEY.match(line)
        if m and fields is not None:
            key, value = m.groups()
            if key == ".name":
                fields["name"] = value.strip()
            elif key in _KERNEL_FIELDS:
                fields[_KERNEL_FIELDS[key]] = int(value)
    finish()
    values = list(kernels.values())
    return {
        "kernels": kernels,
        "target": target,
        "vgprs": max((k.get("vgprs", 0) for k in values), default=0),
        "sgprs": max((k.get("sgprs", 0) for k in values), default=0),
        "wavefront_size": values[0].get("wavefront_size") if values else None,
        "spills": sum(k.get("vgpr_spills", 0) + k.get("sgpr_spills", 0) for k in values),
    }
