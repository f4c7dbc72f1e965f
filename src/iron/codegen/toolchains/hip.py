"""HIP C++ to AMDGPU code objects, offline, through Debian's ROCm 5.2 clang (clang++-15).

``hipcc`` is a thin wrapper around this clang (and, with CUDA's nvcc on PATH, it would pick the
NVIDIA platform unless HIP_PLATFORM=amd), so the compiler is called directly: device-only,
unbundled, giving a raw ELF code object per architecture.  ``llvm-readelf --notes`` prints the
code object's AMDGPU metadata, from which the report takes each kernel's VGPR/SGPR/AGPR counts,
spills, wavefront size and LDS use; :func:`disassemble` lists its instructions (llvm-objdump).

Architectures: gfx90a (CDNA2, wave64, MFMA), gfx940 (CDNA3), gfx1030 (RDNA2, wave32) and
gfx1100-gfx1103 (RDNA3, wave32, WMMA).  gfx942 needs a newer clang than 15.

RDNA3 (measured with Debian's clang 15.0.6 and rocm-device-libs 5.2.3): clang 15 already has the
gfx11 WMMA builtins (``__builtin_amdgcn_wmma_f32_16x16x16_{f16,bf16}_w32``) and emits
``v_wmma_*``; what ROCm 5.2 lacks is the one per-arch device library, ``oclc_isa_version_1100.bc``,
which only defines the constant ``__oclc_ISA_version`` (11000 for gfx1100).  For gfx11xx the
compiler is therefore pointed at a per-process overlay of the installed device libraries plus that
constant, made by rewriting the installed ``oclc_isa_version_1030.bc`` (llvm-dis-15 / llvm-as-15).
The rest of ROCm 5.2's ockl/ocml is generic bitcode and compiles for gfx11, but it predates gfx11:
code objects for it are for validating Iron's output, and the report says the overlay was used
(``device_libs``).  clang++-19 was tried as well: its front end and code generator accept
Iron's output with these HIP 5.2 headers and emit WMMA, but it cannot link a code object here
(it needs lld 19, which is not installed; lld 15 rejects its link command), and it needs the same
missing ISA-version library, so it brings nothing clang 15 lacks.  clang 15 corrupts its heap
now and then while generating gfx11 code (``malloc(): unsorted double linked list corrupted``,
a crash in a few percent of compiles of some kernels, caught in CI; the same input then compiles),
so a compile that clang abandons on a signal is tried again, up to :data:`CRASH_RETRIES` times,
and the report counts the retries (``crash_retries``).
"""

from __future__ import annotations

import atexit
import functools
import glob
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .common import (
    CompiledArtifact,
    Probe,
    SourceWorkdir,
    ToolchainError,
    ToolchainMissing,
    decode,
    error_from_diagnostics,
    find_tool,
    parse_clang_diagnostics,
    probe_accessors,
    reject_options,
    run_tool,
)

TOOL = "hip-clang"
PURPOSE = "HIP C++ -> AMDGPU code objects (gfx90a, gfx940, gfx1030, gfx1100), compile-only"
INSTALL = "apt-get install hipcc libamdhip64-dev rocm-device-libs llvm-15 (or: bash scripts/install_toolchains.sh)"

_CLANG = ("clang++-15",)
_READELF = ("llvm-readelf-15",)
_OBJDUMP = ("llvm-objdump-15",)
_LLVM_DIS = ("llvm-dis-15",)
_LLVM_AS = ("llvm-as-15",)
_ARCH = re.compile(r"^gfx[0-9a-f]+$")

#: RDNA3 archs whose ``oclc_isa_version`` library ROCm 5.2 lacks: the value of ``__oclc_ISA_version``
#: (major * 1000 + minor * 100 + stepping) the overlay defines for each.
_SYNTHESIZED_ISA = {"gfx1100": 11000, "gfx1101": 11001, "gfx1102": 11002, "gfx1103": 11003}
#: The installed ISA-version library the overlay's is rewritten from.
_ISA_TEMPLATE = ("1030", 10300)


@functools.cache
def _probe() -> Probe:
    """clang-15, readelf, the device libraries and the headers are here; ``found`` maps tool names to paths."""
    clang = find_tool(_CLANG)
    if clang is None:
        return Probe.missing("clang++-15 (ROCm 5.2's HIP compiler) not found")
    readelf = find_tool(_READELF)
    if readelf is None:
        return Probe.missing("llvm-readelf-15 not found")
    libs = sorted(glob.glob("/usr/lib/*/amdgcn/bitcode")) + sorted(glob.glob("/opt/rocm*/amdgcn/bitcode"))
    libs = [d for d in libs if Path(d, "ockl.bc").is_file()]
    if not libs:
        return Probe.missing("the AMDGPU device libraries (ockl.bc) are not installed")
    if not Path("/usr/include/hip/hip_runtime.h").is_file():
        return Probe.missing("the HIP headers (hip/hip_runtime.h) are not installed")
    out = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"clang version (\S+)", out)
    clang_version = m.group(1) if m else "unknown"
    libs_version = _package_version("rocm-device-libs")
    paths = {"clang": clang, "readelf": readelf, "device_libs": libs[0]}
    for key, names in (("objdump", _OBJDUMP), ("llvm_dis", _LLVM_DIS), ("llvm_as", _LLVM_AS)):
        found = find_tool(names)
        if found:  # optional: disassembly and the gfx11 overlay need them, plain compiles do not
            paths[key] = found
    return Probe(f"clang {clang_version} (rocm-device-libs {libs_version})", paths)


def _package_version(package: str) -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    except FileNotFoundError:
        return "unknown"
    return out.stdout.strip() or "unknown"


available, unavailable_reason, version = probe_accessors(__name__, TOOL, INSTALL)


#: How many times a compile that clang abandons on a signal (a compiler crash) is tried again (module docstring).
CRASH_RETRIES = 2


def compile_hip(source: str, *, arch: str = "gfx90a", name: str = "kernel.hip") -> CompiledArtifact:
    """Compile HIP C++ to a raw AMDGPU code object (ELF) for ``arch``, with its resource report."""
    if not _ARCH.match(arch):
        raise ValueError(f"arch must look like gfx90a or gfx1030, not {arch!r}")
    ver = version()
    paths = _probe().found
    libs, overlay = _device_libs(arch, paths)
    with SourceWorkdir(source, name) as work:
        out = work.dir / "kernel.co"
        argv = [paths["clang"], "-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output",
                f"--offload-arch={arch}", "--rocm-path=/usr", f"--hip-device-lib-path={libs}",
                "-std=c++17", "-O3", "-o", str(out), str(work.source_path)]
        for retries in range(CRASH_RETRIES + 1):
            proc = run_tool(argv, tool=TOOL, install=INSTALL)
            log = work.relocate(decode(proc.stderr + proc.stdout)).strip()
            if proc.returncode == 0 or "failed due to signal" not in log:
                break
        if proc.returncode != 0 or not out.is_file():
            raise error_from_diagnostics(TOOL, parse_clang_diagnostics(log), source, name, log)
        binary = out.read_bytes()
        notes = run_tool([paths["readelf"], "--notes", str(out)], tool=TOOL, install=INSTALL)
    if notes.returncode != 0:
        raise ToolchainError(TOOL, f"llvm-readelf could not read the code object: {decode(notes.stderr).strip()}")
    report = parse_amdgpu_notes(decode(notes.stdout))
    report["arch"] = arch
    report["crash_retries"] = retries
    report["device_libs"] = (f"rocm-device-libs + Iron's oclc_isa_version_{arch[3:]} ({_SYNTHESIZED_ISA[arch]})"
                             if overlay else "rocm-device-libs")
    report["warnings"] = [f"{d.file}:{d.line}: {d.message}" for d in parse_clang_diagnostics(log)
                          if d.severity == "warning"]
    return CompiledArtifact(binary, log, report, TOOL, ver)


def disassemble(code_object: bytes, arch: str) -> str:
    """The instructions of an AMDGPU code object (``llvm-objdump -d --mcpu=arch``), for tests and inspection."""
    if not _ARCH.match(arch):
        raise ValueError(f"arch must look like gfx90a or gfx1030, not {arch!r}")
    version()
    objdump = _probe().found.get("objdump")
    if objdump is None:
        raise ToolchainMissing(TOOL, INSTALL, "llvm-objdump-15 not found")
    with tempfile.TemporaryDirectory(prefix="iron-hip-") as tmp:
        path = Path(tmp, "kernel.co")
        path.write_bytes(code_object)
        proc = run_tool([objdump, "-d", f"--mcpu={arch}", str(path)], tool=TOOL, install=INSTALL)
    if proc.returncode != 0:
        raise ToolchainError(TOOL, f"llvm-objdump could not read the code object: {decode(proc.stderr).strip()}")
    return decode(proc.stdout)


def _device_libs(arch: str, paths: dict[str, str]) -> tuple[str, bool]:
    """The device-library directory for ``arch``, and whether it is the gfx11 overlay (module docstring)."""
    installed = paths["device_libs"]
    if arch not in _SYNTHESIZED_ISA or Path(installed, f"oclc_isa_version_{arch[3:]}.bc").is_file():
        return installed, False
    missing = [tool for key, tool in (("llvm_dis", "llvm-dis-15"), ("llvm_as", "llvm-as-15")) if key not in paths]
    if missing:
        raise ToolchainMissing(TOOL, INSTALL, f"{arch} needs {' and '.join(missing)} to add the device library "
                                              "ROCm 5.2 lacks")
    return _overlay(arch, installed, paths["llvm_dis"], paths["llvm_as"]), True


@functools.cache
def _overlay(arch: str, installed: str, llvm_dis: str, llvm_as: str) -> str:
    """A directory of links to the installed device libraries plus ``oclc_isa_version_<arch>.bc`` (once per process).

    The new library is the installed gfx1030 one with its one constant changed, so its data layout,
    linkage and metadata are exactly those of the real libraries.
    """
    number, template_value = _ISA_TEMPLATE
    template = Path(installed, f"oclc_isa_version_{number}.bc")
    if not template.is_file():
        raise ToolchainError(TOOL, f"cannot make the {arch} device library: {template} is missing")
    work = Path(tempfile.mkdtemp(prefix=f"iron-hip-devlibs-{arch}-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    for lib in Path(installed).glob("*.bc"):
        (work / lib.name).symlink_to(lib)
    dis = run_tool([llvm_dis, str(template), "-o", "-"], tool=TOOL, install=INSTALL)
    text = decode(dis.stdout)
    old = f"constant i32 {template_value},"
    if dis.returncode != 0 or text.count(old) != 1:
        raise ToolchainError(TOOL, f"cannot make the {arch} device library from {template}: "
                                   f"{decode(dis.stderr).strip() or 'unexpected contents'}")
    source = work / f"oclc_isa_version_{arch[3:]}.ll"
    source.write_text(text.replace(old, f"constant i32 {_SYNTHESIZED_ISA[arch]},"))
    built = run_tool([llvm_as, str(source), "-o", str(work / f"oclc_isa_version_{arch[3:]}.bc")],
                     tool=TOOL, install=INSTALL)
    if built.returncode != 0:
        raise ToolchainError(TOOL, f"llvm-as could not build the {arch} device library: "
                                   f"{decode(built.stderr).strip()}")
    return str(work)


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


# ---------------------------------------------------------------- the toolchain interface (toolchains/__init__.py)

#: What :func:`build` makes when a source is only checked (``check_source``).
CHECK_KIND = "hsaco"


def build(source: str, *, arch: str, kind: str = "hsaco", name: str = "kernel.hip",
          options: Sequence[str] = ()) -> CompiledArtifact:
    """An AMDGPU code object (``kind`` "hsaco") of emitted HIP for ``arch``."""
    reject_options(TOOL, options)
    if kind != "hsaco":
        raise ValueError(f"the HIP toolchain makes 'hsaco', not {kind!r}")
    return compile_hip(source, arch=arch, name=name)


def listing(source: str, *, arch: str, name: str = "kernel.hip") -> tuple[str, str, dict[str, Any]]:
    """(no text, a title, the code object's resource notes) for ``iron inspect --asm``."""
    art = build(source, arch=arch, name=name)
    return "", f"{art.tool} {art.version}, {arch} ({len(art.binary or b'')} byte code object)", art.report
