"""Launch geometry against a Vulkan device's limits: rejected before any dispatch, never truncated."""

from __future__ import annotations

import math
from typing import Any

from ...core.errors import LaunchError
from ..interp.args import normalize_geometry
from .properties import PhysicalDeviceInfo

#: Default group shape per grid rank (as on the interpreter), before capping to the device's limits.
DEFAULT_GROUPS = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}


def workgroups(grid: Any, group: Any, info: PhysicalDeviceInfo) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(group padded to 3 axes, workgroups per axis = ceil(grid / group)) once both fit the device."""
    grid3, group3, _ = normalize_geometry(grid, group)
    threads = group3[0] * group3[1] * group3[2]
    if threads > info.max_workgroup_invocations:
        raise LaunchError(f"group {group3} has {threads} threads; '{info.name}' allows at most "
                          f"{info.max_workgroup_invocations} per group")
    for axis, (g, limit) in enumerate(zip(group3, info.max_workgroup_size)):
        if g > limit:
            raise LaunchError(f"group {group3}: axis {axis} has {g} threads; '{info.name}' allows at most {limit}")
    counts = tuple(-(-n // g) for n, g in zip(grid3, group3))
    for axis, (n, limit) in enumerate(zip(counts, info.max_workgroup_count)):
        if n > limit:
            raise LaunchError(f"grid {grid3} in groups of {group3} needs {n} groups on axis {axis}; "
                              f"'{info.name}' dispatches at most {limit}: use larger groups or fewer threads")
    return group3, counts  # type: ignore[return-value]


def default_group(grid: tuple[int, ...], info: PhysicalDeviceInfo) -> tuple[int, ...]:
    """256 threads (16x16, 8x8x4 for 2-D and 3-D grids), shrunk to fit the device's limits."""
    group = list(DEFAULT_GROUPS.get(len(grid), DEFAULT_GROUPS[1]))
    group = [min(g, limit) for g, limit in zip(group, info.max_workgroup_size)]
    while math.prod(group) > info.max_workgroup_invocations:
        axis = max(range(len(group)), key=lambda a: group[a])
        group[axis] //= 2
    return tuple(group)

