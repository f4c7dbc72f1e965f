"""Error classes shared by every layer, and source locations.

A kernel error names the user's file, line and column, shows the offending
source line with a caret, and carries a hint.  Each class of mistake has its
own subclass of :class:`IronCompileError` so that callers (and tests) can
tell them apart.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A position in the user's source: 1-based line, 0-based column."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")


class IronError(Exception):
    """Base class of every error Iron raises on purpose."""


class IronCompileError(IronError):
    """A mistake in a kernel, located in the user's source."""

    kind = "compile error"
    default_hint = ""

    def __init__(self, message: str, loc: SourceLoc | None = None, hint: str | None = None,
                 kernel: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint if hint is not None else self.default_hint
        self.kernel = kernel
        super().__init__(self._render())

    @property
    def file(self) -> str | None:
        return self.loc.file if self.loc else None

    @property
    def line(self) -> int | None:
        return self.loc.line if self.loc else None

    @property
    def col(self) -> int | None:
        return self.loc.col if self.loc else None

    @property
    def source_line(self) -> str:
        return self.loc.source_line() if self.loc else ""

    def _render(self) -> str:
        where = f"{self.loc}: " if self.loc else ""
        in_kernel = f" (in kernel '{self.kernel}')" if self.kernel else ""
        parts = [f"{where}{self.kind}: {self.message}{in_kernel}"]
        src = self.source_line
        if src:
            parts.append(f"    {src}")
            stripped = len(src) - len(src.lstrip())
            caret_col = max(self.loc.col, stripped) if self.loc else stripped
            parts.append("    " + " " * caret_col + "^")
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def with_kernel(self, kernel: str) -> "IronCompileError":
        if self.kernel is None:
            self.kernel = kernel
            self.args = (self._render(),)
        return self


class UnknownNameError(IronCompileError):
    kind = "unknown name"
    default_hint = "define the name before the kernel, pass it as an argument, or bind it with variants(...)"


class UnsupportedSyntaxError(IronCompileError):
    kind = "unsupported construct"
    default_hint = "kernels accept a subset of Python: see docs/language.md"


class KernelTypeError(IronCompileError):
    kind = "type error"
    default_hint = "insert an explicit cast such as f32(x) or i32(x)"


class ArityError(IronCompileError):
    kind = "wrong number of arguments"


class ReadOnlyStoreError(IronCompileError):
    kind = "store to a read-only tensor"
    default_hint = "declare the parameter as Tensor[T] (writable) instead of In[T]"


class SharedShapeError(IronCompileError):
    kind = "non-constant shared-memory shape"
    default_hint = "shared(dtype, shape) needs a shape known at compile time: a literal, a constexpr or a variant value"


class RegisterIndexError(IronCompileError):
    kind = "run-time index into a register array"
    default_hint = ("register arrays live in registers and need compile-time indices: "
                    "loop with static_range(...) or use shared memory")


class DivergentBarrierError(IronCompileError):
    kind = "barrier in divergent control flow"
    default_hint = ("every thread of a group must reach each barrier(): move it out of the branch or loop "
                    "whose condition depends on the thread")


class StaticAssertionError(IronCompileError):
    kind = "static assertion failed"
    default_hint = "the assert in the kernel checks a compile-time condition (a variant value, a constexpr, a dtype)"


class IRVerificationError(IronError):
    """The IR broke an invariant: a compiler bug, reported with the op and pass."""


class UnsupportedOnTarget(IronCompileError):
    kind = "unsupported on target"


class InterpError(IronError):
    """A run-time fault found by the interpreter (out of bounds, race, partial barrier)."""

    def __init__(self, message: str, kernel: str | None = None, loc: SourceLoc | None = None):
        self.kernel = kernel
        self.loc = loc
        where = f"{loc}: " if loc else ""
        name = f"kernel '{kernel}': " if kernel else ""
        super().__init__(f"{where}{name}{message}")


class OutOfBoundsError(InterpError):
    pass


class SharedMemoryRaceError(InterpError):
    pass


class BarrierDivergenceError(InterpError):
    pass


class MisalignedAccessError(InterpError):
    pass


class LaunchError(IronError):
    """A launch that cannot run as asked: wrong arguments, grid or group."""


class InactiveLaneError(InterpError):
    """A shuffle or broadcast read a lane that is not active (undefined on GPUs)."""


class SubgroupDivergenceError(InterpError):
    """A subgroup-wide op ran with part of its subgroup, or with operands that differ between lanes."""
