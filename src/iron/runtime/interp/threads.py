"""The geometry of one launch: every thread's ids, as arrays over all threads.

The interpreter runs every thread of a launch at once.  Threads are laid out
group by group (``i = linear_group * T + t``, ``t`` the thread's number in its
group, ``T`` the threads per group), so the threads of one group, and of one
subgroup, sit next to each other.  Groups on the edge of the grid are padded
to full size; the padding threads exist (they keep the numbering of
docs/ir.md) but are never active.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

AXES = 3


@dataclass(frozen=True)
class ThreadRef:
    """One thread, for error messages: its global, group and in-group indices."""

    global_id: tuple[int, ...]
    group_id: tuple[int, ...]
    thread_id: tuple[int, ...]
    #: Linear index in the grid (x + y*grid_x + z*grid_x*grid_y).
    linear: int

    def __str__(self) -> str:
        def fmt(t: tuple[int, ...]) -> str:
            return str(t[0]) if len(t) == 1 else "(" + ", ".join(map(str, t)) + ")"

        return f"thread {fmt(self.global_id)} (group {fmt(self.group_id)}, thread_id {fmt(self.thread_id)})"


class ThreadSpace:
    """Ids of all threads of a launch; index arrays are computed on first use."""

    def __init__(self, grid: tuple[int, int, int], group: tuple[int, int, int], ndim: int, simd_width: int):
        self.grid = grid
        self.group = group
        self.ndim = ndim
        self.simd_width = simd_width
        self.num_groups = tuple(-(-g // b) for g, b in zip(grid, group))
        self.threads_per_group = group[0] * group[1] * group[2]
        self.total_groups = self.num_groups[0] * self.num_groups[1] * self.num_groups[2]
        self.size = self.total_groups * self.threads_per_group
        self.simd_groups_per_group = -(-self.threads_per_group // simd_width)
        self.total_simd_groups = self.total_groups * self.simd_groups_per_group
        self._ids: dict[tuple[str, int], np.ndarray] = {}

    # ------------------------------------------------------------ raw ids
    # Per-thread ids are built from one group's ids (tiled) and the groups'
    # ids (repeated): no division over every thread.
    @cached_property
    def _int(self) -> type:
        return np.int32 if self.size < 2 ** 31 else np.int64

    @cached_property
    def linear_group(self) -> np.ndarray:
        """Each thread's linear group number (0 .. total_groups-1)."""
        return np.repeat(np.arange(self.total_groups, dtype=self._int), self.threads_per_group)

    @cached_property
    def local_linear(self) -> np.ndarray:
        """Each thread's number in its group, ``t = x + y*gx + z*gx*gy``."""
        return np.tile(np.arange(self.threads_per_group, dtype=self._int), self.total_groups)

    def thread_id(self, axis: int) -> np.ndarray:
        return self._per_axis("thread", axis)

    def group_id(self, axis: int) -> np.ndarray:
        return self._per_axis("group", axis)

    def program_id(self, axis: int) -> np.ndarray:
        return self._per_axis("program", axis)

    def _per_axis(self, kind: str, axis: int) -> np.ndarray:
        key = (kind, axis)
        if key not in self._ids:
            if kind == "thread":
                one_group = _unravel(np.arange(self.threads_per_group, dtype=self._int), self.group)[axis]
                ids = np.tile(one_group, self.total_groups)
            elif kind == "group":
                groups = _unravel(np.arange(self.total_groups, dtype=self._int), self.num_groups)[axis]
                ids = np.repeat(groups, self.threads_per_group)
            else:
                ids = self.group_id(axis) * self.group[axis] + self.thread_id(axis)
            self._ids[key] = ids
        return self._ids[key]

    @cached_property
    def in_grid(self) -> np.ndarray:
        """Threads whose global index is inside the grid on every axis: the ones that run."""
        ok = np.ones(self.size, dtype=bool)
        for axis in range(AXES):
            if self.num_groups[axis] * self.group[axis] != self.grid[axis]:
                ok &= self.program_id(axis) < self.grid[axis]
        return ok

    @cached_property
    def grid_linear(self) -> np.ndarray:
        """Each thread's linear index in the grid: the order atomics are applied in."""
        p = [self.program_id(a).astype(np.int64) for a in range(AXES)]
        return p[0] + self.grid[0] * (p[1] + self.grid[1] * p[2])

    # ------------------------------------------------------------ subgroups
    @cached_property
    def lane(self) -> np.ndarray:
        return np.tile(np.arange(self.threads_per_group, dtype=self._int) % self.simd_width, self.total_groups)

    @cached_property
    def simd_group(self) -> np.ndarray:
        """The subgroup number within the group."""
        return np.tile(np.arange(self.threads_per_group, dtype=self._int) // self.simd_width, self.total_groups)

    @property
    def lanes_are_dense(self) -> bool:
        """Whether every subgroup is full, so (threads) reshapes to (subgroups, W)."""
        return self.threads_per_group % self.simd_width == 0

    @cached_property
    def global_simd_group(self) -> np.ndarray:
        """Each thread's subgroup number over the whole launch (0 .. total_simd_groups-1)."""
        return self.linear_group * self.simd_groups_per_group + self.simd_group

    @cached_property
    def lane_slot(self) -> np.ndarray:
        """Each thread's position in the flattened (total_simd_groups, W) lane grid."""
        return self.global_simd_group * self.simd_width + self.lane

    @cached_property
    def lane_exists(self) -> np.ndarray:
        """(total_simd_groups, W): whether a lane of a (possibly partial) subgroup is a thread."""
        exists = np.zeros(self.total_simd_groups * self.simd_width, dtype=bool)
        exists[self.lane_slot] = True
        return exists.reshape(self.total_simd_groups, self.simd_width)

    def to_lanes(self, values: np.ndarray, fill: object = 0) -> np.ndarray:
        """Per-thread values as (subgroups, W, ...); missing lanes hold ``fill``."""
        w = self.simd_width
        if self.lanes_are_dense:
            return values.reshape(self.total_simd_groups, w, *values.shape[1:])
        out = np.full((self.total_simd_groups * w, *values.shape[1:]), fill, dtype=values.dtype)
        out[self.lane_slot] = values
        return out.reshape(self.total_simd_groups, w, *values.shape[1:])

    def from_lanes(self, lanes: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`to_lanes`: (subgroups, W, ...) back to per-thread values."""
        flat = lanes.reshape(self.total_simd_groups * self.simd_width, *lanes.shape[2:])
        return flat if self.lanes_are_dense else flat[self.lane_slot]

    def first_thread_of_simd_group(self, sg: int) -> int:
        """The thread index of lane 0 of global subgroup ``sg`` (for error messages)."""
        group, local_sg = divmod(sg, self.simd_groups_per_group)
        return group * self.threads_per_group + local_sg * self.simd_width

    # ------------------------------------------------------------ messages
    def describe(self, i: int) -> ThreadRef:
        n = self.ndim
        g = tuple(int(self.program_id(a)[i]) for a in range(n))
        b = tuple(int(self.group_id(a)[i]) for a in range(n))
        t = tuple(int(self.thread_id(a)[i]) for a in range(n))
        return ThreadRef(g, b, t, int(self.grid_linear[i]))


def _unravel(linear: np.ndarray, extents: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    x = linear % extents[0]
    y = (linear // extents[0]) % extents[1]
    z = linear // (extents[0] * extents[1])
    return x, y, z
