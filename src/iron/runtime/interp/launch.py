"""One interpreter launch: resolve the options, check the arguments, run the kernel."""

from __future__ import annotations

from typing import Any, Sequence

from ... import config
from ...codegen.mma import MmaStrategy
from ...core.errors import InterpError, LaunchError
from ...core.ir import Kernel
from ..launch_checks import check_portable_launch
from .args import bind_arguments, normalize_geometry
from .executor import Executor
from .faults import Faults
from .fragments import fragment_strategy
from .global_races import watch_global_buffers
from .memory import Memory
from .threads import ThreadSpace

SIMD_WIDTHS = (8, 32, 64)

#: The most threads one launch may have, counting the edge groups' padding (2**27).  The interpreter holds a
#: value of every thread for each value the kernel computes (about 50 bytes a thread for a one-line kernel,
#: hundreds for most), so a larger launch would need tens of GiB before it failed deep inside numpy.
MAX_THREADS = 2**27


def run(kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...], *,
        simd_width: int | None = None, checks: bool | None = None,
        fragment_layout: str | MmaStrategy | None = None, global_races: bool | None = None) -> None:
    """Run ``kernel`` on the CPU over ``grid`` threads in groups of ``group``.

    Tensor arguments are numpy arrays updated in place.  ``simd_width``,
    ``checks`` and ``fragment_layout`` default to the ``simd_width``,
    ``interp_checks`` and ``interp_fragment_layout`` options.
    ``fragment_layout`` names an MMA strategy (``iron.codegen.mma``) to hold
    matrix fragments per lane as that matrix unit does; None or "none": one
    matrix per subgroup.  Results are the same either way.  ``global_races``
    (default: the ``interp_global_races`` option) reports a global element one
    thread writes and another touches unordered (:mod:`.global_races`).

    Launches a GPU would refuse are refused here too (``iron.runtime.launch_checks``),
    and so is one of more than :data:`MAX_THREADS` threads.
    """
    width = config.get("simd_width") if simd_width is None else simd_width
    if width not in SIMD_WIDTHS:
        raise LaunchError(f"simd_width must be one of {', '.join(map(str, SIMD_WIDTHS))}, got {width!r}")
    checked = config.get("interp_checks") if checks is None else bool(checks)
    strategy = fragment_strategy(config.get("interp_fragment_layout") if fragment_layout is None else fragment_layout,
                                 width)
    grid3, group3, ndim = normalize_geometry(grid, group)
    check_portable_launch(kernel, grid3[:ndim], group3[:ndim])
    _check_thread_count(kernel, grid3[:ndim], group3[:ndim])
    arguments = bind_arguments(kernel, args)
    threads = ThreadSpace(grid3, group3, ndim, width)
    faults = Faults(kernel.name, threads)
    op_count = sum(1 for _ in kernel.walk()) + sum(1 for f in kernel.functions.values() for _ in f.body.walk())
    memory = Memory(threads, faults, checked, op_count)
    if config.get("interp_global_races") if global_races is None else global_races:
        memory.global_races = watch_global_buffers(arguments, threads, op_count)
    try:
        Executor(kernel, threads, memory, faults, checked, strategy).run(arguments)
    except IndexError:
        if checked:
            raise
        # Unchecked runs leave indices alone; numpy then rejects an access past the end.
        raise InterpError("an access went out of bounds; run with checks on (interp_checks) to find it",
                          kernel.name) from None


def _check_thread_count(kernel: Kernel, grid: tuple[int, ...], group: tuple[int, ...]) -> None:
    """Refuse, before allocating anything, a launch with more threads than :data:`MAX_THREADS`."""
    threads = 1
    for g, b in zip(grid, group):
        threads *= -(-g // b) * b
    if threads > MAX_THREADS:
        raise LaunchError(f"kernel '{kernel.name}': grid {_fmt(grid)} in groups of {_fmt(group)} has {threads} "
                          f"threads; the interpreter runs at most {MAX_THREADS} (2**27) per launch, since it holds "
                          f"every thread's values at once: test on a smaller problem, split the work into several "
                          f"launches, or run it on a GPU backend")


def _fmt(axes: tuple[int, ...]) -> str:
    return str(axes[0]) if len(axes) == 1 else str(axes)
