"""``iron build``: every kernel variant of a project, emitted (and compiled) for every target asked.

The build happens in memory first; files are written only when everything
asked for succeeded, into a staging folder that then replaces its parts of
the output folder file by file (``os.replace``), so a failed build leaves no
half-written artifacts and an interrupted one leaves each file whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .._version import __version__
from ..core.errors import IronCompileError, IronError
from ..core.hashing import kernel_hash
from ..core.ir import Kernel
from ..core.printer import format_attr, print_kernel

#: The manifest's schema; bump on any incompatible change.
MANIFEST_SCHEMA = "iron.manifest/1"

#: --emit kinds -> (codegen target, folder, file suffix, compiled?)
EMIT_KINDS: dict[str, tuple[str | None, str, str, bool]] = {
    "ir": (None, "ir", ".ir", False),
    "cuda": ("cuda", "cuda", ".cu", False),
    "ptx": ("cuda", "ptx", ".ptx", True),
    "cubin": ("cuda", "cubin", ".cubin", True),
    "hip": ("hip", "hip", ".hip", False),
    "hsaco": ("hip", "hsaco", ".hsaco", True),
    "glsl": ("spirv", "glsl", ".comp", False),
    "spirv": ("spirv", "spirv", ".spv", True),
    "msl": ("metal", "msl", ".metal", False),
    "metallib": ("metal", "metallib", ".metallib", True),
    "swift": (None, "swift", ".swift", False),
    "manifest": (None, "", ".json", False),
}

#: What ``--emit all`` builds: every source and every artifact whose toolchain is here.
ALL_KINDS = tuple(EMIT_KINDS)

#: The architectures compiled artifacts are built for.
DEFAULT_ARCH = {"cuda": "sm_90", "hip": "gfx90a"}


class BuildError(IronError):
    pass


@dataclass
class BuildResult:
    files: dict[str, bytes] = field(default_factory=dict)  # relative path -> content
    notes: list[str] = field(default_factory=list)  # what was skipped and why
    manifest: dict[str, Any] = field(default_factory=dict)


@dataclass
class VariantBuild:
    kernel_name: str
    binding: dict[str, Any]
    ir: Kernel
    optimized: dict[str, Kernel] = field(default_factory=dict)  # target -> optimised IR
    emitted: dict[str, Any] = field(default_factory=dict)  # target -> EmittedKernel


def enumerate_variants(kernels: Iterable[tuple[str, Any]], notes: list[str]) -> list[VariantBuild]:
    """One VariantBuild per declared variant of every kernel; kernels that need launch arguments
    to specialise (a dtype variable without ``variants``, a Constexpr) are skipped with a note."""
    out = []
    for name, k in kernels:
        for binding in (k.variants or [{}]):
            try:
                ir = k.ir(**binding)
            except IronCompileError:
                raise
            except IronError as e:
                notes.append(f"{name}: not built ahead of time ({e}); declare its values with variants(...)")
                break
            out.append(VariantBuild(name, binding, ir))
    return out


def build(kernels: Iterable[tuple[str, Any]], kinds: Iterable[str], *, strict: bool = True,
          progress: Callable[[str], None] | None = None) -> BuildResult:
    """Emit and compile in memory.

    ``strict`` (kinds named one by one): a missing toolchain or a kernel a requested target cannot
    express is an error, before anything is written.  Otherwise (``--emit all``) both become notes
    and the build writes what it could.
    """
    from ..codegen.emit import emit_kernel
    from ..codegen.pipeline import PassContext, run_pipeline

    kinds = list(dict.fromkeys(kinds))
    for kind in kinds:
        if kind not in EMIT_KINDS:
            raise BuildError(f"unknown --emit kind '{kind}'; choose from: {', '.join(EMIT_KINDS)}, all")
    if strict:
        _require_toolchains(kinds)
    result = BuildResult()
    variants = enumerate_variants(kernels, result.notes)
    required = {EMIT_KINDS[k][0] for k in kinds if EMIT_KINDS[k][0]} | ({"metal"} if "swift" in kinds else set())
    # The manifest records every target's source hash; targets nobody asked for are best effort.
    optional = ({"cuda", "hip", "spirv", "metal"} - required) if "manifest" in kinds else set()
    for vb in variants:
        if progress:
            progress(f"{vb.kernel_name} [{_binding_text(vb.binding)}]")
        for target in sorted(required | optional):
            opt = run_pipeline(vb.ir, PassContext.for_target(target))
            vb.optimized[target] = opt
            try:
                vb.emitted[target] = emit_kernel(opt, target)
            except IronCompileError as e:
                if strict and target in required:
                    raise
                result.notes.append(f"{vb.kernel_name} [{_binding_text(vb.binding)}]: no {target} source: "
                                    f"{e.message}")
    for kind in kinds:
        target, folder, suffix, compiled = EMIT_KINDS[kind]
        if kind == "ir":
            for vb in variants:
                entry = _entry(vb)
                result.files[f"ir/{entry}.ir"] = print_kernel(vb.ir).encode()
        elif kind == "manifest" or kind == "swift":
            continue
        elif not compiled:
            for vb in variants:
                em = vb.emitted.get(target)
                if em is not None:  # file names follow the ABI entry (GLSL's own entry is always main)
                    result.files[f"{folder}/{em.abi.entry}{suffix}"] = em.source.encode()
        else:
            _compile_kind(kind, variants, result, strict)
    if "swift" in kinds:
        from ..codegen.hostgen.swift import swift_bindings

        result.files["swift/IronKernels.swift"] = swift_bindings(
            [(vb.kernel_name, vb.binding, vb.emitted["metal"]) for vb in variants if "metal" in vb.emitted]).encode()
    result.manifest = manifest(variants, result)
    if "manifest" in kinds:
        result.files["manifest.json"] = (json.dumps(result.manifest, indent=2, sort_keys=False) + "\n").encode()
    return result


#: Compiled kinds -> the toolchain (iron.codegen.toolchains.TOOLCHAINS) that makes them.
_TOOLCHAIN_OF = {"ptx": "nvrtc", "cubin": "nvrtc", "hsaco": "hip", "spirv": "spirv"}


def _require_toolchains(kinds: list[str]) -> None:
    """Fail before any work when a compiled kind asked for by name has no toolchain here."""
    from ..codegen.toolchains import TOOLCHAINS
    from ..codegen.toolchains.common import ToolchainMissing

    for kind in kinds:
        if kind == "metallib" and shutil.which("xcrun") is None:
            raise BuildError(f"--emit metallib: {_no_xcrun()}")
        name = _TOOLCHAIN_OF.get(kind)
        if name is not None and not TOOLCHAINS[name].available():
            module = TOOLCHAINS[name]
            raise BuildError(f"--emit {kind}: {ToolchainMissing(module.TOOL, module.INSTALL, module.unavailable_reason())}")


def _no_xcrun() -> Exception:
    from ..codegen.toolchains.common import ToolchainMissing

    return ToolchainMissing("xcrun metal", "Xcode on macOS (xcode-select --install); elsewhere use --emit msl",
                            "the Metal compiler exists only on macOS")


def _compile_kind(kind: str, variants: list[VariantBuild], result: BuildResult, strict: bool) -> None:
    from ..codegen.toolchains.common import ToolchainMissing

    target, folder, suffix, _ = EMIT_KINDS[kind]
    for vb in variants:
        em = vb.emitted.get(target)
        if em is None:
            continue
        try:
            binary, arch = _compile_one(kind, em, vb.optimized.get(target))
        except ToolchainMissing as e:
            if strict:
                raise BuildError(f"--emit {kind}: {e}") from None
            result.notes.append(f"{kind}: skipped ({e})")
            return
        name = f"{folder}/{em.abi.entry}.{arch}{suffix}" if arch else f"{folder}/{em.abi.entry}{suffix}"
        result.files[name] = binary


def _compile_one(kind: str, em: Any, ir: Kernel | None = None) -> tuple[bytes, str | None]:
    if kind in ("ptx", "cubin"):
        from ..codegen.toolchains import nvrtc

        arch = DEFAULT_ARCH["cuda"]
        if ir is not None and any(op.opcode == "mma_wg" for op in ir.walk()):
            arch += "a"  # wgmma exists in the arch-specific sm_90a alone (as the CUDA runtime builds it)
        art = nvrtc.compile_cuda(em.source, arch=arch, want=kind, name=f"{em.abi.entry}.cu")
        return art.binary, arch
    if kind == "hsaco":
        from ..codegen.toolchains import hip

        arch = DEFAULT_ARCH["hip"]
        return hip.compile_hip(em.source, arch=arch, name=f"{em.abi.entry}.hip").binary, arch
    if kind == "spirv":
        from ..codegen.toolchains import spirv

        art = spirv.compile_glsl(em.source, name=f"{em.abi.entry}.comp")
        spirv.validate_spirv(art.binary)
        return art.binary, None
    if kind == "metallib":
        if shutil.which("xcrun") is None:
            raise _no_xcrun()
        raise BuildError("metallib through xcrun is not wired up yet")  # pragma: no cover - macOS only
    raise BuildError(f"cannot compile '{kind}'")  # pragma: no cover


def _entry(vb: VariantBuild) -> str:
    from ..codegen.abi import entry_name

    return entry_name(vb.ir)


def _binding_text(binding: dict[str, Any]) -> str:
    return ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(binding.items()))


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def manifest(variants: list[VariantBuild], result: BuildResult) -> dict[str, Any]:
    """A description of every kernel variant: entry names, parameters, sources and IR hashes."""
    from ..codegen.abi import kernel_abi

    kernels: dict[str, dict[str, Any]] = {}
    for vb in variants:
        abi = kernel_abi(vb.ir)
        shared = sum(op.result.type.num_elements * op.result.type.dtype.itemsize
                     for op in vb.ir.walk() if op.opcode == "shared_alloc")
        entry = {
            "binding": {k: format_attr(v) for k, v in sorted(vb.binding.items())},
            "entry": abi.entry,
            "abi": abi.to_json(),
            "shared_memory_bytes": shared,
            "ir_hash": kernel_hash(vb.ir),
            "targets": {t: {"source_sha256": _sha(em.source), "language": em.language, "entry": em.entry,
                            "arch": em.profile.arch, "lane_width": em.profile.lane_width,
                            "max_threads_per_group": em.profile.max_threads_per_group,
                            "max_group_threads": em.max_group_threads, "whole_group": em.whole_group_op is not None,
                            "shared_bytes": em.shared_bytes, "dynamic_shared_bytes": em.dynamic_shared_bytes}
                        for t, em in sorted(vb.emitted.items())},
            "files": sorted(p for p in result.files if f"/{abi.entry}." in f"/{p}"),
        }
        kernels.setdefault(vb.kernel_name, {"name": vb.kernel_name, "variants": []})["variants"].append(entry)
    return {"schema": MANIFEST_SCHEMA, "iron_version": __version__, "kernels": list(kernels.values()),
            "notes": list(result.notes)}


def write_atomically(result: BuildResult, out_dir: Path) -> list[Path]:
    """Write every file of ``result`` under ``out_dir``: staged next to it, then each moved into place."""
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".iron-build-", dir=out_dir.parent))
    written = []
    try:
        for rel, data in result.files.items():
            p = staging / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for rel in result.files:
            dest = out_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, dest)
            written.append(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written
