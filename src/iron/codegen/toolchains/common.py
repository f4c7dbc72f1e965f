"""What every toolchain wrapper shares: the result type, the two errors, running a tool.

A wrapper compiles (or checks) one emitted source and returns a :class:`CompiledArtifact`.
Its failures are never tracebacks from inside a subprocess: a tool that is not installed is a
:class:`ToolchainMissing` naming the tool and the command that installs it; a source the tool
rejects is a :class:`ToolchainError` carrying the compiler's message located at the emitted
source's ``file:line``, with that line shown.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...core.errors import IronError

#: How long one compiler run may take before it is treated as hung.
TOOL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class CompiledArtifact:
    """One compiled (or checked) source.

    ``binary`` is the compiled form (CUBIN/PTX, an AMDGPU code object, SPIR-V) or ``None`` for a
    check that produces nothing (Metal).  ``log`` is the compiler's own output, ``report`` what
    Iron parsed from it (registers, spills, capabilities ...), ``tool`` and ``version`` identify
    the compiler for cache keys.
    """

    binary: bytes | None
    log: str
    report: dict[str, Any]
    tool: str
    version: str


@dataclass(frozen=True)
class Probe:
    """What looking for one toolchain found (each wrapper caches its own ``_probe()``).

    ``version`` is the string for cache keys, or None when the toolchain is unusable, and then
    ``reason`` says why; ``found`` is whatever the wrapper needs to run it (paths, a directory).
    """

    version: str | None
    found: Any = None
    reason: str | None = None

    @classmethod
    def missing(cls, reason: str) -> "Probe":
        return cls(None, None, reason)

    @property
    def ok(self) -> bool:
        return self.version is not None

    def require(self, tool: str, install: str) -> "Probe":
        """This probe if usable, else :class:`ToolchainMissing` naming the tool, why and how to install it."""
        if self.version is None:
            raise ToolchainMissing(tool, install, self.reason)
        return self


def probe_accessors(module: str, tool: str, install: str) -> tuple[Callable[[], bool], Callable[[], str | None],
                                                                   Callable[[], str]]:
    """``available()``, ``unavailable_reason()`` and ``version()`` over the ``_probe()`` of ``module``.

    The probe is looked up in the module at each call, so a test may replace it there.  ``version()``
    (the string that goes into cache keys) raises :class:`ToolchainMissing` when the tool is absent.
    """

    def probe() -> Probe:
        return sys.modules[module]._probe()

    def available() -> bool:
        return probe().ok

    def unavailable_reason() -> str | None:
        return probe().reason

    def version() -> str:
        return probe().require(tool, install).version  # type: ignore[return-value]

    return available, unavailable_reason, version


class ToolchainMissing(IronError):
    """A compiler that is not installed here; says which and how to install it."""

    def __init__(self, tool: str, install: str, reason: str | None = None):
        self.tool = tool
        self.install = install
        self.reason = reason
        why = f" ({reason})" if reason else ""
        super().__init__(f"{tool} is not available{why}; install it with: {install}")


def reject_options(tool: str, options: Sequence[str]) -> None:
    """A toolchain whose ``build`` takes no extra options says so (Iron passes none to it today)."""
    if options:
        raise ValueError(f"{tool} takes no extra build options, got {list(options)}")


@dataclass(frozen=True)
class Diagnostic:
    """One message of a compiler: where (as the compiler printed it) and what."""

    file: str | None
    line: int | None
    severity: str
    message: str
    col: int | None = None
    notes: list["Diagnostic"] = field(default_factory=list)


class ToolchainError(IronError):
    """A compiler rejected the emitted source.

    ``file``/``line`` locate the first error in the emitted source (``None`` when the compiler
    gives no location), ``source_line`` is that line, ``log`` the compiler's whole output.
    """

    def __init__(self, tool: str, message: str, *, file: str | None = None, line: int | None = None,
                 source_line: str | None = None, log: str = "", more: Sequence[str] = ()):
        self.tool = tool
        self.message = message
        self.file = file
        self.line = line
        self.source_line = source_line
        self.log = log
        where = f"{file}:{line}: " if file and line else (f"{file}: " if file else "")
        parts = [f"{where}{tool}: {message}"]
        if source_line:
            parts.append(f"    {source_line.strip()}")
        if more:
            parts.append(f"and {len(more)} more error(s), first: {more[0]}")
        super().__init__("\n".join(parts))


def source_line(source: str, line: int | None) -> str | None:
    """Line ``line`` (1-based) of ``source``, or None when out of range."""
    if line is None or line < 1:
        return None
    lines = source.splitlines()
    return lines[line - 1] if line <= len(lines) else None


def error_from_diagnostics(tool: str, diagnostics: Sequence[Diagnostic], source: str, name: str,
                           log: str) -> ToolchainError:
    """The error to raise for a failed compile: the first error, located in ``name`` if possible.

    An error inside a header (a static assertion in the Metal shim, a template in cuda_fp16.h) is
    located at the first of its notes that points into the emitted source: the line that used it.
    """
    errors = [d for d in diagnostics if d.severity in ("error", "fatal error")]
    if not errors:
        tail = "\n".join(log.strip().splitlines()[-5:]) or "(no output)"
        return ToolchainError(tool, f"failed without a located error: {tail}", file=name, log=log)
    first = errors[0]
    located = next((d for d in (first, *first.notes) if d.file == name and d.line), None)
    line = located.line if located else None
    more = [f"{d.file}:{d.line}: {d.message}" if d.line else d.message for d in errors[1:]]
    return ToolchainError(tool, first.message, file=name, line=line, source_line=source_line(source, line),
                          log=log, more=more)


_CLANG_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>fatal error|error|warning|note): "
                         r"(?P<msg>.*)$")


def parse_clang_diagnostics(log: str) -> list[Diagnostic]:
    """clang's ``file:line:col: severity: message`` lines; notes attach to the diagnostic before them."""
    out: list[Diagnostic] = []
    for raw in log.splitlines():
        m = _CLANG_DIAG.match(raw)
        if not m:
            continue
        d = Diagnostic(m["file"], int(m["line"]), m["sev"], m["msg"], int(m["col"]))
        if d.severity == "note" and out:
            out[-1].notes.append(d)
        else:
            out.append(d)
    return out


def find_tool(names: Sequence[str]) -> str | None:
    """The first of ``names`` on PATH (versioned names first, e.g. clang++-19 before clang++)."""
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    return None


def run_tool(argv: Sequence[str], *, tool: str, install: str, cwd: Path | None = None,
             input_bytes: bytes | None = None, env: Mapping[str, str] | None = None
             ) -> subprocess.CompletedProcess[bytes]:
    """Run a compiler; a missing executable is :class:`ToolchainMissing`, a hang a :class:`ToolchainError`."""
    try:
        return subprocess.run(list(argv), cwd=cwd, input=input_bytes, capture_output=True, timeout=TOOL_TIMEOUT_S,
                              env=None if env is None else dict(env))
    except FileNotFoundError:
        raise ToolchainMissing(tool, install, f"{argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise ToolchainError(tool, f"did not finish within {TOOL_TIMEOUT_S:.0f} s: {' '.join(argv)}") from None


def decode(output: bytes) -> str:
    return output.decode("utf-8", errors="replace")


class SourceWorkdir:
    """A temporary directory holding the source under its own name, so diagnostics can be mapped.

    Compilers print the path they were given; :meth:`relocate` rewrites that path back to the
    emitted source's ``name`` so every message reads ``name:line``.
    """

    def __init__(self, source: str, name: str):
        self.name = name
        self._tmp = tempfile.TemporaryDirectory(prefix="iron-tc-")
        self.dir = Path(self._tmp.name)
        self.source_path = self.dir / (Path(name).name or "source")
        self.source_path.write_text(source)

    def relocate(self, text: str) -> str:
        return text.replace(str(self.source_path), self.name)

    def __enter__(self) -> "SourceWorkdir":
        return self

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()
