"""CUDA C++ through NVRTC (cuda-bindings), with no GPU or driver needed.

NVRTC 13.5 compiles to PTX and, with its built-in ptxas, to CUBIN.  CUBIN is the default: the
machine's own ptxas (CUDA 13.0 here) rejects PTX from a newer NVRTC.  ``--ptxas-options=-v``
makes ptxas print each kernel's registers, shared memory, stack and spills into the log, which
:func:`parse_ptxas_report` turns into the artifact's report.  NVRTC does not ship cuda_fp16.h /
cuda_bf16.h: they come from the nvidia-cuda-runtime and nvidia-cuda-crt wheels of the same
release, found through cuda.pathfinder.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from pathlib import Path
from typing import Any, Sequence

from .common import (
    CompiledArtifact,
    Diagnostic,
    Probe,
    ToolchainError,
    error_from_diagnostics,
    probe_accessors,
)

TOOL = "nvrtc"
PURPOSE = "CUDA C++ -> PTX / CUBIN for NVIDIA GPUs (sm_80, sm_90, sm_90a, ...), no GPU needed"
INSTALL = ("python3 -m pip install cuda-bindings==13.5.0 nvidia-cuda-nvrtc==13.5.37 && "
           "python3 -m pip install --no-deps nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37 "
           "(or: bash scripts/setup.sh)")

_ARCH = re.compile(r"^(sm|compute)_\d+[af]?$")


@functools.cache
def _probe() -> Probe:
    """NVRTC loads and the fp16 headers exist; ``found`` is the include directory."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        return Probe.missing(f"cuda-bindings is not installed ({e})")
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # the binding raises when libnvrtc cannot be loaded
        return Probe.missing(f"libnvrtc cannot be loaded: {e}")
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return Probe.missing(f"nvrtcVersion failed: {err}")
    include = _header_directory()
    if include is None:
        return Probe.missing("cuda_fp16.h not found: nvidia-cuda-runtime is not installed")
    bindings = _dist_version("cuda-bindings")
    headers = _dist_version("nvidia-cuda-runtime")
    return Probe(f"nvrtc {major}.{minor} (cuda-bindings {bindings}, headers {headers})", include)


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _header_directory() -> str | None:
    """The directory holding cuda_fp16.h / cuda_bf16.h (and crt/), from the nvidia wheels."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
    except Exception:  # an older cuda.pathfinder, or a lookup failure: search the wheels directly
        found = None
    if found and (Path(found) / "cuda_fp16.h").is_file():
        return str(found)
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for candidate in (Path(root) / "cu13" / "include", Path(root) / "cuda_runtime" / "include"):
            if (candidate / "cuda_fp16.h").is_file():
                return str(candidate)
    return None


available, unavailable_reason, version = probe_accessors(__name__, TOOL, INSTALL)


def supported_archs() -> list[str]:
    """The ``sm_*`` architectures this NVRTC builds CUBIN for (empty when it cannot say)."""
    try:
        from cuda.bindings import nvrtc as raw

        err, archs = raw.nvrtcGetSupportedArchs()
        return [f"sm_{a}" for a in archs] if int(err) == 0 else []
    except Exception:
        return []


def arch_for_source(source: str, arch: str) -> str:
    """``arch`` with its arch-specific suffix (``sm_90a``) where ``source`` uses an instruction only that
    variant has: ``wgmma`` (Iron's ``mma_wg``) and ``setmaxnreg`` (warp roles' register budgets).  A binary for
    ``sm_90a`` runs on sm_90 GPUs alone."""
    if ("wgmma." in source or "setmaxnreg." in source) and not arch.endswith("a"):
        return f"{arch}a"
    return arch


def compile_cuda(source: str, *, arch: str = "sm_90", options: Sequence[str] = (), name: str = "kernel.cu",
                 want: str = "cubin") -> CompiledArtifact:
    """Compile CUDA C++ to CUBIN (``want="cubin"``) or PTX (``want="ptx"``) for ``arch``.

    With an ``sm_*`` arch the report holds ptxas's per-kernel resource usage; a ``compute_*``
    arch gives PTX only, with no ptxas run and so no resource report.
    """
    if want not in ("cubin", "ptx"):
        raise ValueError(f"want must be 'cubin' or 'ptx', not {want!r}")
    if not _ARCH.match(arch):
        raise ValueError(f"arch must look like sm_90, sm_90a or compute_90, not {arch!r}")
    if want == "cubin" and arch.startswith("compute_"):
        raise ValueError(f"a CUBIN needs a real architecture (sm_*), not the virtual {arch}")
    ver = version()
    from cuda.bindings import nvrtc

    include = _probe().found
    opts = [f"--gpu-architecture={arch}", f"-I{include}", "-std=c++17"]
    if arch.startswith("sm_"):
        opts.append("--ptxas-options=-v")
    opts.extend(options)
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log = _program_log(nvrtc, prog)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise error_from_diagnostics(TOOL, parse_nvrtc_diagnostics(log), source, name, log)
        binary = _output(nvrtc, prog, want)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    report = parse_ptxas_report(log)
    report["source"] = "ptxas"
    warnings = [f"{d.file}:{d.line}: {d.message}" for d in parse_nvrtc_diagnostics(log) if d.severity == "warning"]
    if want == "cubin" and not report["kernels"]:
        from .cubin import resource_report

        fallback = resource_report(binary)
        if fallback["kernels"]:  # NVRTC 13.0 sometimes leaves ptxas's report out of the log
            report = fallback
            warnings.append("ptxas printed no resource report: registers read from the CUBIN, spills unknown")
    report["arch"] = arch
    report["warnings"] = warnings
    return CompiledArtifact(binary, log, report, TOOL, ver)


def _check(nvrtc: Any, err: Any, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise ToolchainError(TOOL, f"{what} failed: {err.name}")


def _program_log(nvrtc: Any, prog: Any) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    _check(nvrtc, err, "nvrtcGetProgramLogSize")
    buf = bytearray(size)  # never a bytes object: NVRTC writes into it, and b" " * 1 is the interned b" "
    (err,) = nvrtc.nvrtcGetProgramLog(prog, buf)
    _check(nvrtc, err, "nvrtcGetProgramLog")
    return bytes(buf).rstrip(b"\0").decode("utf-8", errors="replace").strip()


def _output(nvrtc: Any, prog: Any, want: str) -> bytes:
    get_size, get = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if want == "cubin"
                     else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
    err, size = get_size(prog)
    _check(nvrtc, err, get_size.__name__)
    buf = bytearray(size)
    (err,) = get(prog, buf)
    _check(nvrtc, err, get.__name__)
    return bytes(buf).rstrip(b"\0") if want == "ptx" else bytes(buf)


_NVRTC_DIAG = re.compile(r"^(?P<file>[^\n(]+)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning)"
                         r"(?: #[\w-]+)?: (?P<msg>.*)$")


def parse_nvrtc_diagnostics(log: str) -> list[Diagnostic]:
    """NVRTC's ``file(line): error: message`` lines (EDG front-end format)."""
    out = []
    for raw in log.splitlines():
        m = _NVRTC_DIAG.match(raw.strip())
        if m:
            sev = "error" if m["sev"] == "catastrophic error" else m["sev"]
            out.append(Diagnostic(m["file"], int(m["line"]), sev, m["msg"]))
    if not out and "ptxas" in log and ("error" in log or "fatal" in log):
        # ptxas failures (e.g. wgmma on sm_90) carry no source line.
        lines = [ln.strip() for ln in log.splitlines() if "error" in ln or "fatal" in ln]
        out.append(Diagnostic(None, None, "error", "; ".join(lines)))
    return out


_ENTRY = re.compile(r"ptxas info\s*: (?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")
_BARRIERS = re.compile(r"used (\d+) barriers")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
#: ptxas's C75xx notes: a kernel's wgmma instructions run one at a time instead of as a pipeline (why, where).
_SERIALIZED = re.compile(r"\(C75\d\d\) Potential Performance Loss: wgmma\.mma_async instructions are serialized "
                         r"due to (.*?) in the function '([\w$.]+)'")
#: ptxas's C7507 note: it dropped a kernel's setmaxnreg (code after a lowered budget needs more registers).
_SETMAXNREG_IGNORED = re.compile(r"\(C7507\) Potential Performance Loss: 'setmaxnreg' ignored")


def parse_ptxas_report(log: str) -> dict[str, Any]:
    """Per-kernel resource usage from ``ptxas -v`` output, plus totals over all kernels.

    ``kernels[name]`` has registers, shared_bytes, constant_bytes, barriers, stack_bytes,
    spill_stores and spill_loads; the top level has the largest registers and shared_bytes, the
    summed spills (0 everywhere when nothing spilled) and ``wgmma_serialized``: the kernels whose
    wgmma ptxas serialised (its C7515-style note), each with the reason it gave; and ``setmaxnreg_ignored``:
    whether ptxas dropped the register budgets of warp roles (its C7507 note).
    """
    kernels: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = kernels.setdefault(m.group(1), {"registers": 0, "shared_bytes": 0, "constant_bytes": 0,
                                                      "barriers": 0, "stack_bytes": 0, "spill_stores": 0,
                                                      "spill_loads": 0})
            continue
        if current is None:
            continue
        if m := _FRAME.search(line):
            current["stack_bytes"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        if m := _USED.search(line):
            current["registers"] = int(m.group(1))
            current["shared_bytes"] = int(s.group(1)) if (s := _SMEM.search(line)) else 0
            current["constant_bytes"] = sum(int(c) for c in _CMEM.findall(line))
            current["barriers"] = int(b.group(1)) if (b := _BARRIERS.search(line)) else 0
    values = list(kernels.values())
    return {
        "kernels": kernels,
        "wgmma_serialized": {m.group(2): m.group(1) for m in _SERIALIZED.finditer(log)},
        "setmaxnreg_ignored": bool(_SETMAXNREG_IGNORED.search(log)),
        "registers": max((k["registers"] for k in values), default=0),
        "shared_bytes": max((k["shared_bytes"] for k in values), default=0),
        "spill_stores": sum(k["spill_stores"] for k in values),
        "spill_loads": sum(k["spill_loads"] for k in values),
    }


# ---------------------------------------------------------------- the toolchain interface (toolchains/__init__.py)

#: What :func:`build` makes when a source is only checked (``check_source``).
CHECK_KIND = "cubin"


def build(source: str, *, arch: str, kind: str = "cubin", name: str = "kernel.cu",
          options: Sequence[str] = ()) -> CompiledArtifact:
    """``kind`` ("cubin" or "ptx") of emitted CUDA for ``arch``, or its arch-specific variant where the source
    needs one (:func:`arch_for_source`); the report's ``arch`` says which.  ``options``: NVRTC's."""
    return compile_cuda(source, arch=arch_for_source(source, arch), options=options, want=kind, name=name)


def listing(source: str, *, arch: str, name: str = "kernel.cu") -> tuple[str, str, dict[str, Any]]:
    """(the PTX, a title, ptxas's resource report of the CUBIN) for ``iron inspect --asm``."""
    ptx = build(source, arch=arch, kind="ptx", name=name)
    cubin = build(source, arch=arch, kind="cubin", name=name)
    text = ptx.binary.decode(errors="replace").rstrip("\x00") if ptx.binary else ""
    return text, f"{cubin.tool} {cubin.version}, {cubin.report.get('arch', arch)}", cubin.report
