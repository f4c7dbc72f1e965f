"""The interpreter as an :class:`iron.runtime.Device`."""

from __future__ import annotations

from typing import Any, Sequence

from ...core.ir import Kernel
from .launch import run

#: Default group shape per grid rank: 256 threads in every case.
DEFAULT_GROUPS = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}


class InterpDevice:
    """Runs kernels on the CPU with numpy; the reference for every other backend."""

    name = "interp"
    target = "interp"

    def default_group(self, grid: tuple[int, ...]) -> tuple[int, ...]:
        return DEFAULT_GROUPS.get(len(grid), DEFAULT_GROUPS[1])

    def launch(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...]) -> None:
        run(kernel, args, grid, group)
