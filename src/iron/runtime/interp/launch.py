"""One interpreter launch: resolve the options, check the arguments, run the kernel."""

from __future__ import annotations

from typing import Any, Sequence

from ... import config
from ...core.errors import InterpError, LaunchError
from ...core.ir import Kernel
from .args import bind_arguments, normalize_geometry
from .executor import Executor
from .faults import Faults
from .memory import Memory
from .threads import ThreadSpace

SIMD_WIDTHS = (8, 32, 64)


def run(kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...], *,
        simd_width: int | None = None, checks: bool | None = None) -> None:
    """Run ``kernel`` on the CPU over ``grid`` threads in groups of ``group``.

    Tensor arguments are numpy arrays updated in place.  ``simd_width`` and
    ``checks`` default to the ``simd_width`` and ``interp_checks`` options.
    """
    width = config.get("simd_width") if simd_width is None else simd_width
    if width not in SIMD_WIDTHS:
        raise LaunchError(f"simd_width must be one of {', '.join(map(str, SIMD_WIDTHS))}, got {width!r}")
    checked = config.get("interp_checks") if checks is None else bool(checks)
    grid3, group3, ndim = normalize_geometry(grid, group)
    arguments = bind_arguments(kernel, args)
    threads = ThreadSpace(grid3, group3, ndim, width)
    faults = Faults(kernel.name, threads)
    op_count = sum(1 for _ in kernel.walk()) + sum(1 for f in kernel.functions.values() for _ in f.body.walk())
    memory = Memory(threads, faults, checked, op_count)
    try:
        Executor(kernel, threads, memory, faults, checked).run(arguments)
    except IndexError:
        if checked:
            raise
        # Unchecked runs leave indices alone; numpy then rejects an access past the end.
        raise InterpError("an access went out of bounds; run with checks on (interp_checks) to find it",
                          kernel.name) from None
