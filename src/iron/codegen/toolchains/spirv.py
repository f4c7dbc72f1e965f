"""GLSL 4.5 compute shaders to SPIR-V: glslc (shaderc) compiles, spirv-val validates, spirv-dis prints.

The SPIR-V that Iron runs on Vulkan (Mesa lavapipe here, NVIDIA's driver on a GPU) is compiled
once by :func:`compile_glsl` and checked by :func:`validate_spirv` against the Vulkan target
environment; the report lists what the module declares (capabilities, extensions, local size,
descriptor bindings) so a test can see, e.g., that an fp16 kernel really asks for Float16.
"""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .common import (CompiledArtifact, Diagnostic, SourceWorkdir, ToolchainError, ToolchainMissing, decode,
                     error_from_diagnostics, find_tool, run_tool)

TOOL = "glslc"
PURPOSE = "GLSL 4.5 compute -> SPIR-V for Vulkan, validated by spirv-val"
INSTALL = "apt-get install glslc spirv-tools (or: bash scripts/install_toolchains.sh)"
TARGET_ENVS = ("vulkan1.0", "vulkan1.1", "vulkan1.2", "vulkan1.3")


@functools.cache
def _probe() -> tuple[str | None, dict[str, str], str | None]:
    """(version, tool paths, why unavailable)."""
    paths = {}
    for tool in ("glslc", "spirv-val", "spirv-dis"):
        found = find_tool((tool,))
        if found is None:
            return None, {}, f"{tool} not found"
        paths[tool] = found
    glslc = subprocess.run([paths["glslc"], "--version"], capture_output=True, text=True).stdout
    val = subprocess.run([paths["spirv-val"], "--version"], capture_output=True, text=True).stdout
    versions = [ln.strip() for ln in glslc.splitlines()[:3] if ln.strip()]
    val_first = val.splitlines()[0].strip() if val.strip() else "spirv-val (unknown version)"
    return f"{', '.join(versions)}; {val_first}", paths, None


def available() -> bool:
    return _probe()[0] is not None


def unavailable_reason() -> str | None:
    return _probe()[2]


def version() -> str:
    """glslc's (shaderc, spirv-tools, glslang) and spirv-val's versions, for cache keys."""
    found, _, why = _probe()
    if found is None:
        raise ToolchainMissing(TOOL, INSTALL, why)
    return found


def _tool(name: str) -> str:
    version()
    return _probe()[1][name]


def _check_env(target_env: str) -> None:
    if target_env not in TARGET_ENVS:
        raise ValueError(f"target_env must be one of {', '.join(TARGET_ENVS)}, not {target_env!r}")


def compile_glsl(source: str, *, name: str = "kernel.comp", target_env: str = "vulkan1.2",
                 validate: bool = True) -> CompiledArtifact:
    """Compile a GLSL compute shader to optimised SPIR-V (``glslc -O``); validate it unless told not to."""
    _check_env(target_env)
    ver = version()
    with SourceWorkdir(source, name) as work:
        out = work.dir / "kernel.spv"
        argv = [_tool("glslc"), "-O", f"--target-env={target_env}", "-fshader-stage=compute",
                "-o", str(out), str(work.source_path)]
        proc = run_tool(argv, tool=TOOL, install=INSTALL)
        log = work.relocate(decode(proc.stderr + proc.stdout)).strip()
        if proc.returncode != 0 or not out.is_file():
            raise error_from_diagnostics(TOOL, parse_glslc_diagnostics(log), source, name, log)
        binary = out.read_bytes()
    if validate:
        validate_spirv(binary, target_env=target_env)
    report = parse_spirv_module(disassemble(binary))
    report["target_env"] = target_env
    report["words"] = len(binary) // 4
    report["warnings"] = [f"{d.file}:{d.line}: {d.message}" for d in parse_glslc_diagnostics(log)
                          if d.severity == "warning"]
    return CompiledArtifact(binary, log, report, TOOL, ver)


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


def parse_glslc_diagnostics(log: str) -> list[Diagnostic]:
    """glslc's ``file:line: error: message`` lines (the line is absent for file-level errors)."""
    out = []
    for raw in log.splitlines():
        m = _GLSLC_DIAG.match(raw)
        if m:
            out.append(Diagnostic(m["file"], int(m["line"]) if m["line"] else None, m["sev"], m["msg"].strip()))
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
