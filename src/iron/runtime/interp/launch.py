"""One interpreter launch: resolve the options, check the arguments, run the kernel."""

from __future__ import annotations

from typing import Any, Sequence

from ... import config
from ...codegen.mma import MmaStrategy
from ...core.errors import InterpError, LaunchError
from ...core.ir import Kernel
from .args import bind_arguments, normalize_geometry
from .executor import Executor
from .faults import Faults
from .fragments import fragment_strategy
from .memory import Memory
from .threads import ThreadSpace

SIMD_WIDTHS = (8, 32, 64)


def run(kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...], *,
        simd_width: int | None = None, checks: bool | None = None,
        fragment_layout: str | MmaStrategy | None = None) -> None:
    """Run ``kernel`` on the CPU over ``grid`` threads in groups of ``group``.

    Tensor arguments are numpy arrays updated in place.  ``simd_width``,
    ``checks`` and ``fragment_layout`` default to the ``simd_width``,
    ``interp_checks`` and ``interp_fragment_layout`` options.
    ``fragment_layout`` names an MMA strategy (``iron.codegen.mma``) to hold
    matrix fragments per lane as that matrix unit does; None or "none": one
    matrix per subgroup.  Results are the same either way.
    """
    width = config.get("simd_width") if simd_width is None else simd_width
    if width not in SIMD_WIDTHS:
        raise LaunchError(f"simd_width must be one of {', '.join(map(str, SIMD_WIDTHS))}, got {width!r}")
    checked = config.get("interp_checks") if checks is None else bool(checks)
    strategy = fragment_strategy(config.get("interp_fragment_layout") if fragment_layout is None else fragment_layout,
                                 width)
    grid3, group3, ndim = normalize_geometry(grid, group)
    arguments = bind_arguments(kernel, args)
    threads = ThreadSpace(grid3, group3, ndim, width)
    faults = Faults(kernel.name, threads)
    op_count = sum(1 for _ in kernel.walk()) + sum(1 for f in kernel.functions.values() for _ in f.body.walk())
    memory = Memory(threads, faults, checked, op_count)
    try:
        Executor(kernel, threads, memory, faults, checked, strategy).run(arguments)
    except IndexError:
        if checked:
            raise
        # Unchecked runs leave indices alone; numpy then rejects an access past the end.
        raise InterpError("an access went out of bounds; run with checks on (interp_checks) to find it",
                          kernel.name) from None
