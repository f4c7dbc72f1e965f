"""PTX ``ldmatrix``: which 8x8 tiles of memory a fragment's packed registers are, derived from its layout.

``ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16`` loads one to four
8x8 matrices of 16-bit elements from shared memory; lane ``8*i + j`` gives
the address of row ``j`` of matrix ``i`` (16 contiguous bytes), and matrix
``i`` lands in each lane's 32-bit register ``i``.  Without ``.trans`` lane
``t`` receives row ``t/4``, elements ``2*(t%4)`` and ``+1``; with ``.trans``
it receives column ``t/4``, rows ``2*(t%4)`` and ``+1`` (PTX ISA, "Warp-level
matrix load instruction: ldmatrix").

A fragment whose 16-bit slots pack in pairs (``2i``, ``2i+1`` in register
``i``) can be loaded this way exactly when every register's pair of elements
forms such an 8x8 tile in memory order.  :func:`plan` checks that against
the layout (data, ``iron.codegen.mma``) rather than assuming it, so the
CUDA emitter uses ``ldmatrix`` for the fragments and memory orders where it
is right and falls back to element loads everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mma import FragmentLayout

#: Lanes of the warps ``ldmatrix`` runs on, and the matrix counts it takes.
LANES = 32
COUNTS = (1, 2, 4)


@dataclass(frozen=True)
class LdmatrixPlan:
    """How to load a fragment with one ``ldmatrix``.

    ``origins[i]``: (major, minor) in memory order of the first element of
    the 8x8 tile register ``i`` holds: for a ``row`` fragment load (element
    (r, c) at ``base + r*ld + c``) major is the row, for ``col`` the column.
    Lane ``8*i + j`` points at ``base + (major_i + j)*ld + minor_i``.
    """

    count: int
    trans: bool
    origins: tuple[tuple[int, int], ...]

    @property
    def instruction(self) -> str:
        return f"ldmatrix.sync.aligned.m8n8.x{self.count}{'.trans' if self.trans else ''}.shared.b16"

    def lane_origin(self, lane: int) -> tuple[int, int]:
        """(major, minor) of the 16-byte row ``lane`` addresses (lanes past ``8*count`` repeat the first ones)."""
        major, minor = self.origins[(lane // 8) % self.count]
        return major + lane % 8, minor


def plan(layout: FragmentLayout, memory: str) -> LdmatrixPlan | None:
    """The ``ldmatrix`` that loads ``layout`` from memory in ``memory`` order ("row" or "col"), or None.

    None where the layout is not 32 lanes of 2, 4 or 8 16-bit slots whose pairs are 8x8 tiles in
    that order, or a tile's minor origin is not a multiple of 8 (its rows would not be 16-byte aligned).
    """
    if memory not in ("row", "col"):
        raise ValueError(f"memory order is 'row' or 'col', got {memory!r}")
    regs = layout.registers_per_lane
    if layout.lane_width != LANES or regs % 2 or regs // 2 not in COUNTS:
        return None
    table = layout.to_table()
    major, minor = (table[..., 0], table[..., 1]) if memory == "row" else (table[..., 1], table[..., 0])
    lane = np.arange(LANES)
    kinds, origins = set(), []
    for i in range(regs // 2):
        ma0, ma1, mi0, mi1 = major[:, 2 * i], major[:, 2 * i + 1], minor[:, 2 * i], minor[:, 2 * i + 1]
        m0, n0 = int(ma0[0]), int(mi0[0])
        if (np.array_equal(ma0, m0 + lane // 4) and np.array_equal(ma1, ma0)
                and np.array_equal(mi0, n0 + 2 * (lane % 4)) and np.array_equal(mi1, mi0 + 1)):
            kinds.add(False)
        elif (np.array_equal(mi0, n0 + lane // 4) and np.array_equal(mi1, mi0)
              and np.array_equal(ma0, m0 + 2 * (lane % 4)) and np.array_equal(ma1, ma0 + 1)):
            kinds.add(True)
        else:
            return None
        if n0 % 8:
            return None
        origins.append((m0, n0))
    if len(kinds) != 1:
        return None
    return LdmatrixPlan(regs // 2, kinds.pop(), tuple(origins))


def simulate(p: LdmatrixPlan, memory: np.ndarray) -> np.ndarray:
    """What each lane's registers hold after ``p`` reads ``memory`` (a 2-D array in memory order, major first).

    Returns (32, 2*count): slot ``2i + h`` of lane ``t`` (the low half first).  A model of the PTX
    semantics, independent of :func:`plan`, for tests.
    """
    out = np.zeros((LANES, 2 * p.count), dtype=memory.dtype)
    for i in range(p.count):
        rows = [p.lane_origin(8 * i + j) for j in range(8)]
        tile = np.stack([memory[m, n:n + 8] for m, n in rows])  # tile[j] = row j of matrix i
        if p.trans:
            tile = tile.T
        for t in range(LANES):
            out[t, 2 * i:2 * i + 2] = tile[t // 4, 2 * (t % 4):2 * (t % 4) + 2]
    return out


__all__ = ["LdmatrixPlan", "plan", "simulate"]
