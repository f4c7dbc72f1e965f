"""Launch-geometry rules every GPU backend enforces, for a runtime with no device limits of its own.

The interpreter can run any group shape over any grid; a GPU cannot.  So that a kernel tested on
the interpreter runs the same way on a device, the interpreter refuses what every device refuses,
against the *portable* limits (the smallest over every target profile, ``iron.codegen.targets``):

* a group of more threads, or a longer axis, than every target allows (1024 threads; 1024, 1024
  and 64 per axis);
* a grid (in threads) that is not a multiple of the group on some axis when the kernel has an op
  every thread of a group must reach together (a barrier or a fragment op): threads past the grid
  return at entry on the GPUs, so the others would wait on threads that left, or read shared tiles
  nobody filled (a tiled matmul over a 20x20 grid in 16x16 groups computes garbage in the edge
  groups).

The device runtimes check the same rules against their own device's limits before each launch
(``iron.codegen.capabilities.check_launch`` / ``check_emitted_launch``, ``runtime/vulkan/geometry.py``,
``runtime/cuda/aot.py``); the second rule is
``capabilities.check_whole_groups``, one wording for every runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Sequence

from ..codegen.capabilities import check_whole_groups
from ..core.ops import WHOLE_GROUP_OPS
from ..codegen.targets import PROFILES
from ..core.errors import LaunchError
from ..core.ir import Kernel, Op


@dataclass(frozen=True)
class GroupLimits:
    """The largest group a launch may use: in threads, and per axis."""

    max_threads: int
    max_dims: tuple[int, int, int]
    #: Says whose limits these are, in messages ("every GPU target", "spirv (vulkan-lavapipe)").
    where: str


@cache
def portable_limits() -> GroupLimits:
    """What every target profile allows: the minimum over all of them."""
    profiles = list(PROFILES.values())
    dims = tuple(min(p.max_group_dims[axis] for p in profiles) for axis in range(3))
    return GroupLimits(min(p.max_threads_per_group for p in profiles), dims,  # type: ignore[arg-type]
                       "every GPU target (the portable limits)")


def check_group(group: Sequence[int], limits: GroupLimits) -> None:
    """Refuse a group with more threads, or a longer axis, than ``limits`` allow (LaunchError)."""
    dims = tuple(int(g) for g in group)
    for axis, (g, limit) in enumerate(zip(dims, limits.max_dims)):
        if g > limit:
            raise LaunchError(f"group {dims}: axis {axis} has {g} threads, over the limit of {limit} on "
                              f"{limits.where}: use a smaller group")
    threads = 1
    for g in dims:
        threads *= g
    if threads > limits.max_threads:
        raise LaunchError(f"group {dims} has {threads} threads, over the limit of {limits.max_threads} per group "
                          f"on {limits.where}: use a smaller group")


def whole_group_op(kernel: Kernel) -> Op | None:
    """The first op of ``kernel`` or of a helper it calls that every thread of a group must reach together."""
    for body in (kernel.body, *(f.body for f in kernel.functions.values())):
        for op in body.walk():
            if op.opcode in WHOLE_GROUP_OPS:
                return op
    return None


def check_portable_launch(kernel: Kernel, grid: Sequence[int], group: Sequence[int]) -> None:
    """Refuse a launch of ``kernel`` that some GPU target would refuse (``grid`` and ``group`` of one rank)."""
    check_group(group, portable_limits())
    check_whole_groups(kernel.name, grid, group, whole_group_op(kernel))
