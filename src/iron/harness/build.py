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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from .._version import __version__
from ..core.errors import IronCompileError, IronError
from ..core.hashing import kernel_hash
from ..core.ir import Kernel
from ..core.printer import format_attr, print_kernel
from ..codegen.backends import EMITTING, BinaryKind, get_target
from ..codegen.compiler import Artifact, CompileOptions, compile as compile_kernel, missing_toolchain

#: The manifest's schema; bump on any incompatible change.
MANIFEST_SCHEMA = "iron.manifest/1"

@dataclass(frozen=True)
class EmitKind:
    """One ``--emit`` kind: what it is made from and where it goes."""

    name: str
    #: The codegen target whose source or binary it is; None: not target code (IR, the manifest, Swift).
    target: str | None
    folder: str
    suffix: str
    #: The backend's compiled form (``iron.codegen.backends.BinaryKind``), None for source and the rest.
    binary: BinaryKind | None = None


def _emit_kinds() -> dict[str, EmitKind]:
    kinds = [EmitKind("ir", None, "ir", ".ir")]
    for b in EMITTING:  # each backend's source, then its compiled forms
        assert b.language is not None
        kinds.append(EmitKind(b.language, b.target, b.language, b.source_suffix))
        kinds += [EmitKind(k.name, b.target, k.name, k.suffix, k) for k in b.binaries]
    kinds += [EmitKind("swift", None, "swift", ".swift"), EmitKind("manifest", None, "", ".json")]
    return {k.name: k for k in kinds}


#: --emit kinds, from the backend records.
EMIT_KINDS: dict[str, EmitKind] = _emit_kinds()

#: What ``--emit all`` builds: every source and every artifact whose toolchain is here.
ALL_KINDS = tuple(EMIT_KINDS)


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
    sources: dict[str, Artifact] = field(default_factory=dict)  # target -> the compile driver's source artifact
    options: dict[str, CompileOptions] = field(default_factory=dict)  # target -> what its source was made with


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
    """Emit and compile in memory, through the compile driver (``iron.codegen.compiler.compile``: targets whose
    pipelines agree share one optimisation, and binaries come from its disk cache when they are there).

    ``strict`` (kinds named one by one): a missing toolchain or a kernel a requested target cannot
    express is an error, before anything is written.  Otherwise (``--emit all``) both become notes
    and the build writes what it could.
    """
    from ..codegen.pipeline import PassContext

    kinds = list(dict.fromkeys(kinds))
    for kind in kinds:
        if kind not in EMIT_KINDS:
            raise BuildError(f"unknown --emit kind '{kind}'; choose from: {', '.join(EMIT_KINDS)}, all")
    if strict:
        _require_toolchains(kinds)
    result = BuildResult()
    variants = enumerate_variants(kernels, result.notes)
    required = {EMIT_KINDS[k].target for k in kinds if EMIT_KINDS[k].target} | (
        {_SWIFT_TARGET} if "swift" in kinds else set())
    # The manifest records every target's source hash; targets nobody asked for are best effort.
    optional = ({b.target for b in EMITTING} - required) if "manifest" in kinds else set()
    for vb in variants:
        if progress:
            progress(f"{vb.kernel_name} [{_binding_text(vb.binding)}]")
        for target in sorted(required | optional):
            optimised = compile_kernel(vb.ir, target, CompileOptions(passes=PassContext.for_target(target),
                                                                     stop="optimise")).kernel
            assert optimised is not None
            vb.optimized[target] = optimised
            # The later stages start from the optimised kernel (the frontend IR is hashed once per target).
            options = vb.options[target] = CompileOptions(optimised=True)
            try:
                vb.sources[target] = compile_kernel(optimised, target, options)
                vb.emitted[target] = vb.sources[target].emitted
            except IronCompileError as e:
                if strict and target in required:
                    raise
                result.notes.append(f"{vb.kernel_name} [{_binding_text(vb.binding)}]: no {target} source: "
                                    f"{e.message}")
    for kind in kinds:
        spec = EMIT_KINDS[kind]
        target, folder, suffix = spec.target, spec.folder, spec.suffix
        if kind == "ir":
            for vb in variants:
                entry = _entry(vb)
                result.files[f"ir/{entry}.ir"] = print_kernel(vb.ir).encode()
        elif kind == "manifest" or kind == "swift":
            continue
        elif spec.binary is None:
            for vb in variants:
                em = vb.emitted.get(target)
                if em is not None:  # file names follow the ABI entry (GLSL's own entry is always main)
                    result.files[f"{folder}/{em.abi.entry}{suffix}"] = em.source.encode()
        else:
            _compile_kind(kind, variants, result, strict)
    if "swift" in kinds:
        from ..codegen.hostgen.swift import swift_bindings

        result.files["swift/IronKernels.swift"] = swift_bindings(
            [(vb.kernel_name, vb.binding, vb.emitted[_SWIFT_TARGET]) for vb in variants
             if _SWIFT_TARGET in vb.emitted]).encode()
    result.manifest = manifest(variants, result)
    if "manifest" in kinds:
        result.files["manifest.json"] = (json.dumps(result.manifest, indent=2, sort_keys=False) + "\n").encode()
    return result


#: The target whose kernels the Swift bindings call.
_SWIFT_TARGET = "metal"


def _require_toolchains(kinds: list[str]) -> None:
    """Fail before any work when a compiled kind asked for by name has no toolchain here."""
    for kind in kinds:
        missing = _missing(EMIT_KINDS[kind])
        if missing is not None:
            raise BuildError(f"--emit {kind}: {missing}")


def _missing(spec: EmitKind) -> Exception | None:
    """Why ``spec``'s compiled form cannot be made here (ToolchainMissing), or None."""
    if spec.binary is None or spec.target is None:
        return None
    return missing_toolchain(get_target(spec.target), spec.binary)


def _compile_kind(kind: str, variants: list[VariantBuild], result: BuildResult, strict: bool) -> None:
    from ..codegen.toolchains.common import ToolchainMissing

    spec = EMIT_KINDS[kind]
    assert spec.binary is not None and spec.target is not None
    missing = _missing(spec)
    if missing is not None:
        if strict:
            raise BuildError(f"--emit {kind}: {missing}")
        result.notes.append(f"{kind}: skipped ({missing})")
        return
    for vb in variants:
        src = vb.sources.get(spec.target)
        if src is None:
            continue
        assert src.emitted is not None
        options = replace(vb.options[spec.target], binary=kind, arch=src.emitted.profile.arch)
        try:  # a source may need a newer compiler than the one found (glslang for an extension)
            art = compile_kernel(vb.optimized[spec.target], spec.target, options)
        except ToolchainMissing as e:
            if strict:
                raise BuildError(f"--emit {kind}: {e}") from None
            result.notes.append(f"{kind}: skipped ({e})")
            return
        assert art.binary is not None
        arch = art.report.get("arch") if spec.binary.per_arch else None
        stem = f"{spec.folder}/{src.emitted.abi.entry}"
        result.files[f"{stem}.{arch}{spec.suffix}" if arch else f"{stem}{spec.suffix}"] = art.binary


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
