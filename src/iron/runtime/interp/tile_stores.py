"""``store_tile`` on the interpreter: the tile read at the store, the matrix written at the wait.

A GPU's tile store (TMA on sm_90) reads the shared tile and writes global memory at some point between the
store and its thread's ``store_tile_wait``.  Here the store reads the tile when it is issued (the race
checker sees that read in the issuing thread, so a tile written by other threads needs a barrier first)
and the wait writes the matrix.  A tile changed before the wait is reported at the wait: the hardware may
have read either contents.  A store never waited for never writes, so a kernel that forgets the wait
computes wrong results here, as it may on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.ir import Op
from .faults import Faults
from .mask import Mask


@dataclass
class _Store:
    op: Op
    thread: int
    src: Any
    src_at: Any
    snapshot: np.ndarray
    dst: Any
    dst_at: Any
    values: np.ndarray


class TileStores:
    """The tile stores in flight of one launch."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.pending: list[_Store] = []

    def issue(self, op: Op, thread: int, src: Any, src_at: Any, snapshot: np.ndarray, dst: Any, dst_at: Any,
              values: np.ndarray) -> None:
        self.pending.append(_Store(op, thread, src, src_at, snapshot, dst, dst_at, values))

    def wait(self, op: Op, memory: Any, mask: Mask) -> None:
        """Write the matrices of the active threads' stores, in the order they were issued."""
        waiting = set(int(t) for t in mask.indices)
        still: list[_Store] = []
        for s in self.pending:
            if s.thread not in waiting:
                still.append(s)
                continue
            now = s.src.data[s.src_at.flat]
            changed = ~((now == s.snapshot) | ((now != now) & (s.snapshot != s.snapshot)))  # NaN is unchanged
            if changed.any():
                line = f"line {s.op.loc.line}" if s.op.loc else "a store_tile"
                raise self.faults.general(op, f"the shared tile of the store_tile at {line} changed before this "
                                              f"store_tile_wait in {self.faults.thread(s.thread)}: the store may read "
                                              "it at any point until the wait")
            memory.place(s.op, s.dst, s.dst_at, s.values)
        self.pending = still
