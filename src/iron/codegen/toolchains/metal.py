"""Metal Shading Language, type-checked without Apple's compiler: clang++-19 against Iron's Metal shim.

MSL is C++ with address spaces, attributes and a standard library of its own.
``metal_shim/iron_metal_shim.h`` declares that surface for clang (see the header for what it
models and where it is stricter than Metal); :mod:`.msl_source` adds the kernel-signature rules
C++ cannot express.  The check runs ``clang++-19 -fsyntax-only -std=c++17 -x c++`` with the
shim force-included; nothing is compiled to a binary (a metallib needs ``xcrun metal`` on
macOS).  clang-15 cannot do bfloat arithmetic, hence clang 19.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
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
    source_line,
)
from .msl_source import check_kernel_signatures, kernel_names, prepare_for_clang

TOOL = "clang++-19 (Metal shim)"
PURPOSE = "Metal Shading Language syntax and type check (no metallib: that needs macOS)"
INSTALL = "apt-get install clang-19 (or: bash scripts/install_toolchains.sh)"

SHIM_DIR = Path(__file__).resolve().parent / "metal_shim"
SHIM_HEADER = SHIM_DIR / "iron_metal_shim.h"

_FLAGS = (
    "-fsyntax-only", "-std=c++17", "-x", "c++",
    "-nostdinc", "-nostdinc++",                     # Metal has no C/C++ standard headers
    "-flax-vector-conversions=none",                # no silent int4 <-> float4 bit casts
    "-Werror=unknown-attributes",                   # [[bufer(0)]] is an error, as in Metal
    "-Werror=return-type",
    "-fno-color-diagnostics", "-ferror-limit=20",
)


@functools.cache
def _probe() -> Probe:
    """clang++-19 and the shim are here; ``found`` is clang's path."""
    clang = find_tool(("clang++-19",))
    if clang is None:
        return Probe.missing("clang++-19 not found (clang-15 cannot do bfloat arithmetic)")
    if not SHIM_HEADER.is_file():
        return Probe.missing(f"the Metal shim header is missing: {SHIM_HEADER}")
    out = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"clang version (\S+)", out)
    return Probe(f"clang {m.group(1) if m else 'unknown'} + shim {_shim_digest()}", clang)


def _shim_digest() -> str:
    """A hash of the shim's files: a changed shim must invalidate cached check results."""
    h = hashlib.sha256()
    for f in sorted(SHIM_DIR.iterdir()):
        if f.is_file():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


available, unavailable_reason, version = probe_accessors(__name__, TOOL, INSTALL)


def check_msl(source: str, *, name: str = "kernel.metal") -> CompiledArtifact:
    """Type-check MSL; raise :class:`ToolchainError` at the first mistake, else return the report.

    ``binary`` is None (nothing is compiled); the report names the kernels found and the
    warnings clang gave.
    """
    ver = version()
    clang = _probe().found
    assert clang is not None
    with SourceWorkdir(prepare_for_clang(source), name) as work:
        argv = [clang, *_FLAGS, f"-I{SHIM_DIR}", "-include", SHIM_HEADER.name, str(work.source_path)]
        proc = run_tool(argv, tool=TOOL, install=INSTALL)
        log = work.relocate(decode(proc.stderr + proc.stdout)).strip()
    diagnostics = parse_clang_diagnostics(log)
    problems = check_kernel_signatures(source)
    clang_error = error_from_diagnostics(TOOL, diagnostics, source, name, log) if proc.returncode != 0 else None
    # Report whichever mistake comes first in the file: a non-void kernel is the cause of
    # clang's later "should return a value", not the other way round.
    if problems and (clang_error is None or clang_error.line is None or problems[0].line <= clang_error.line):
        first = problems[0]
        raise ToolchainError(TOOL, first.message, file=name, line=first.line,
                             source_line=source_line(source, first.line), log=log,
                             more=[f"{name}:{p.line}: {p.message}" for p in problems[1:]])
    if clang_error is not None:
        raise clang_error
    report = {
        "kernels": kernel_names(source),
        "warnings": [f"{d.file}:{d.line}: {d.message}" for d in diagnostics if d.severity == "warning"],
    }
    return CompiledArtifact(None, log, report, TOOL, ver)


# ---------------------------------------------------------------- the toolchain interface (toolchains/__init__.py)

#: What :func:`build` makes when a source is only checked (``check_source``).
CHECK_KIND = "check"


def build_missing(kind: str) -> ToolchainMissing | None:
    """Why ``kind`` cannot be built here (a metallib needs Xcode's ``xcrun metal``), or None."""
    if kind == "metallib" and shutil.which("xcrun") is None:
        return ToolchainMissing("xcrun metal", "Xcode on macOS (xcode-select --install); elsewhere use --emit msl",
                                "the Metal compiler exists only on macOS")
    return None


def build(source: str, *, arch: str | None = None, kind: str = "check", name: str = "kernel.metal",
          options: Sequence[str] = ()) -> CompiledArtifact:
    """``kind`` "check": MSL type-checked (no binary); "metallib" needs macOS (:func:`build_missing`)."""
    reject_options(TOOL, options)
    if kind == "check":
        return check_msl(source, name=name)
    missing = build_missing(kind)
    if missing is not None:
        raise missing
    raise ToolchainError(TOOL, f"building a {kind} through xcrun is not wired up yet")  # pragma: no cover - macOS


def listing(source: str, *, arch: str | None = None, name: str = "kernel.metal") -> tuple[str, str, dict[str, Any]]:
    """(a note, a title, the check's report) for ``iron inspect --asm``: Metal has no assembler off macOS."""
    art = check_msl(source, name=name)
    note = "// Metal has no assembler outside macOS: the source type-checks against Iron's Metal shim."
    return note, f"{art.tool} {art.version}", art.report
