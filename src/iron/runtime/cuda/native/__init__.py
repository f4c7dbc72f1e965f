"""The native launch module: ``launch.c`` built once with the system C compiler and loaded
(:mod:`iron.core.native`), so that a fast launcher calls ``cuLaunchKernel`` from C with plain ints
(docs/cuda.md, "Launch overhead").  Where it cannot be had (no compiler, headers, cache folder or driver, or
``IRON_NATIVE_LAUNCH=0``) :func:`load` returns None, :data:`LAUNCH`'s ``why_not`` says why, and the launchers
use cuda-bindings.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from ....core.native import NativeModule, compiler

SOURCE = Path(__file__).with_name("launch.c")
LAUNCH = NativeModule(SOURCE, "iron_native_launch", "native_launch", ("-ldl",))


def build(folder: Path) -> Path:
    """The built module's path in ``folder`` (built now unless already there)."""
    return LAUNCH.build(folder)


def load() -> ModuleType | None:
    """The native launch module, or None where it is off or cannot be had (``LAUNCH.why_not`` says why)."""
    return LAUNCH.load()


__all__ = ["LAUNCH", "SOURCE", "build", "compiler", "load"]
