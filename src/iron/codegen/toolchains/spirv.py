"""GLSL 4.5 compute shaders to SPIR-V: glslc or glslang compiles, spirv-val validates, spirv-dis prints.

The SPIR-V that Iron runs on Vulkan (Mesa lavapipe here, NVIDIA's driver on a GPU) is compiled
once by :func:`compile_glsl` and checked by :func:`validate_spirv` against the Vulkan target
environment; the report lists what the module declares (capabilities, extensions, local size,
descriptor bindings) so a test can see, e.g., that an fp16 kernel really asks for Float16.
Which compiler runs is :mod:`.glsl_compilers`' choice: glslc, or glslang 13 from PyPI for what
glslc's front end predates (cooperative matrices).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Sequence

from . import glsl_compilers
from .common import (
    CompiledArtifact,
    Diagnostic,
    SourceWorkdir,
    ToolchainError,
    ToolchainMissing,
    decode,
    error_from_diagnostics,
    reject_options,
    run_tool,
)
from .glsl_compilers import INSTALL, TOOL

PURPOSE = "GLSL 4.5 compute -> SPIR-V for Vulkan, validated by spirv-val"
TARGET_ENVS = ("vulkan1.0", "vulkan1.1", "vulkan1.2", "vulkan1.3")


def available() -> bool:
    return glsl_compilers.probe().missing is None


def unavailable_reason() -> str | None:
    return glsl_compilers.probe().missing


def version() -> str:
    """Every GLSL compiler's and the SPIR-V tools' versions, for cache keys."""
    tools = glsl_compilers.probe()
    if tools.missing:
        raise ToolchainMissing(TOOL, INSTALL, tools.missing)
    return tools.version


def supports_extension(extension: str) -> bool:
    """Whether an installed compiler takes ``#extension EXTENSION`` (e.g. ``GL_KHR_cooperative_matrix``)."""
    return any(extension in c.extensions for c in glsl_compilers.probe().compilers)


def _tool(name: str) -> str:
    version()
    tools = glsl_compilers.probe()
    path = {"spirv-val": tools.validator, "spirv-dis": tools.disassembler}[name]
    assert path is not None
    return path


def _check_env(target_env: str) -> None:
    if target_env not in TARGET_ENVS:
        raise ValueError(f"target_env must be one of {', '.join(TARGET_ENVS)}, not {target_env!r}")


def compile_glsl(source: str, *, name: str = "kernel.comp", target_env: str = "vulkan1.2",
                 validate: bool = True, compiler: str | None = None) -> CompiledArtifact:
    """Compile a GLSL compute shader to optimised SPIR-V; validate it unless told not to.

    ``compiler`` ("glslc" or "glslang") picks the front end; by default glslc unless the source
    needs the newer glslang (:mod:`.glsl_compilers`).
    """
    _check_env(target_env)
    ver = version()
    front = glsl_compilers.choose(source, compiler)
    with SourceWorkdir(source, name) as work:
        out = work.dir / "kernel.spv"
        proc = _run(front.argv(work.source_path, out, target_env), front)
        log = work.relocate(decode(proc.stderr + proc.stdout)).strip()
        diagnostics = parse_glsl_diagnostics(log)
        if proc.returncode != 0 or not out.is_file():
            raise error_from_diagnostics(front.name, diagnostics, source, name, log)
        if front.optimizer is not None:
            optimized = work.dir / "kernel.opt.spv"
            opt = _run([front.optimizer, "-O", f"--target-env={target_env}", "-o", str(optimized), str(out)], front)
            if opt.returncode != 0:
                raise ToolchainError("spirv-opt", decode(opt.stderr + opt.stdout).strip() or "failed", log=log)
            out = optimized
        binary = out.read_bytes()
    if validate:
        validate_spirv(binary, target_env=target_env)
    report = parse_spirv_module(disassemble(binary))
    report["target_env"] = target_env
    report["words"] = len(binary) // 4
    report["compiler"] = front.name
    report["warnings"] = [f"{d.file}:{d.line}: {d.message}" for d in diagnostics if d.severity == "warning"]
    return CompiledArtifact(binary, log, report, front.name, ver)


def _run(argv: list[str], compiler: glsl_compilers.GlslCompiler) -> subprocess.CompletedProcess[bytes]:
    return run_tool(argv, tool=compiler.name, install=INSTALL, env=compiler.env)


def validate_spirv(binary: bytes, target_env: str = "vulkan1.2") -> None:
    """Raise :class:`ToolchainError` with spirv-val's message unless ``binary`` is valid for ``target_env``."""
    _check_env(target_env)
    proc = _run_on_binary([_tool("spirv-val"), "--target-env", target_env], binary)
    if proc.returncode != 0:
        log = decode(proc.stderr + proc.stdout).strip()
        first = next((ln for ln in log.splitlines() if ln.startswith("error")), log or "invalid module")
        raise ToolchainError("spirv-val", first.removeprefix("error: ").strip(), log=log)


def disassemble(binary: bytes) -> str:
    """spirv-dis's text form of ``binary`` (ids as names where the module has them)."""
    proc = _run_on_binary([_tool("spirv-dis")], binary)
    if proc.returncode != 0:
        raise ToolchainError("spirv-dis", decode(proc.stderr).strip() or "cannot disassemble the module")
    return decode(proc.stdout)


def _run_on_binary(argv: list[str], binary: bytes) -> subprocess.CompletedProcess[bytes]:
    with tempfile.TemporaryDirectory(prefix="iron-spv-") as tmp:
        path = Path(tmp) / "module.spv"
        path.write_bytes(binary)
        return run_tool([*argv, str(path)], tool=Path(argv[0]).name, install=INSTALL)


_GLSLC_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?:(?P<line>\d+):)? (?P<sev>error|warning): (?P<msg>.*)$")
_GLSLANG_DIAG = re.compile(r"^(?P<sev>ERROR|WARNING): (?P<file>[^:\n]+):(?P<line>\d+): (?P<msg>.*)$")


def parse_glsl_diagnostics(log: str) -> list[Diagnostic]:
    """glslc's ``file:line: error: message`` and glslang's ``ERROR: file:line: message`` lines.

    The line is absent for glslc's file-level errors; glslang's closing ``compilation terminated``
    and error-count lines are not diagnostics of their own.
    """
    out = []
    for raw in log.splitlines():
        m = _GLSLC_DIAG.match(raw)
        if m:
            out.append(Diagnostic(m["file"], int(m["line"]) if m["line"] else None, m["sev"], m["msg"].strip()))
            continue
        m = _GLSLANG_DIAG.match(raw)
        if m and "compilation terminated" not in m["msg"]:
            out.append(Diagnostic(m["file"], int(m["line"]), m["sev"].lower(), m["msg"].strip()))
    return out


_DECORATE = re.compile(r"OpDecorate (%\w+) (DescriptorSet|Binding) (\d+)")


def parse_spirv_module(text: str) -> dict[str, Any]:
    """What a module declares, from its disassembly: version, capabilities, extensions, local size, bindings."""
    version = re.search(r"^; Version: (\S+)", text, re.M)
    local = re.search(r"OpExecutionMode %\w+ LocalSize (\d+) (\d+) (\d+)", text)
    entry = re.search(r'OpEntryPoint GLCompute %\w+ "(\w+)"', text)
    decorations: dict[str, dict[str, int]] = {}
    for ident, kind, value in _DECORATE.findall(text):
        decorations.setdefault(ident, {})[kind] = int(value)
    bindings = sorted((d["DescriptorSet"], d["Binding"]) for d in decorations.values()
                      if "DescriptorSet" in d and "Binding" in d)
    return {
        "spirv_version": version.group(1) if version else None,
        "capabilities": re.findall(r"OpCapability (\w+)", text),
        "extensions": re.findall(r'OpExtension "([\w.]+)"', text),
        "entry_point": entry.group(1) if entry else None,
        "local_size": [int(x) for x in local.groups()] if local else None,
        "bindings": [list(b) for b in bindings],
        "push_constants": "PushConstant" in text,
    }


# ---------------------------------------------------------------- the toolchain interface (toolchains/__init__.py)

#: What :func:`build` makes when a source is only checked (``check_source``).
CHECK_KIND = "spirv"


def build(source: str, *, arch: str | None = None, kind: str = "spirv", name: str = "kernel.comp",
          options: Sequence[str] = ()) -> CompiledArtifact:
    """Validated SPIR-V (``kind`` "spirv") of emitted GLSL; ``arch`` (a Vulkan profile) does not change it."""
    reject_options(TOOL, options)
    if kind != CHECK_KIND:
        raise ValueError(f"the SPIR-V toolchain makes {CHECK_KIND!r}, not {kind!r}")
    return compile_glsl(source, name=name)


def listing(source: str, *, arch: str | None = None, name: str = "kernel.comp") -> tuple[str, str, dict[str, Any]]:
    """(spirv-dis's text, a title, the module's report) for ``iron inspect --asm``."""
    art = build(source, name=name)
    return disassemble(art.binary or b"").rstrip("\n"), f"{art.tool} {art.version}", art.report
