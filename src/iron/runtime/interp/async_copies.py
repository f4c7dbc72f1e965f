"""``copy_async`` on the interpreter, landing as late as a GPU may let it: at the wait that covers it.

A copy reads its source when it is issued (a GPU reads it at some point before the wait; a kernel that
writes the source in between races) and writes shared memory only when a ``copy_async_wait`` of its
thread covers it: all of the thread's copies for ``pending = 0``, else those of every committed group
but the ``pending`` most recent ones.  A kernel that reads the destination before the wait that covers
it therefore sees the old contents here, as it may on a GPU, and its test fails instead of passing by
luck; the race checker sees the write where it really lands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.ir import Op
from .mask import Mask


@dataclass
class _Copy:
    op: Op
    dst: Any
    index: np.ndarray
    values: np.ndarray
    #: Threads whose copy has not landed yet.
    lanes: np.ndarray
    #: Per thread, how many groups it had committed when it issued this copy (the copy's group).
    group: np.ndarray


@dataclass
class Landing:
    """Some threads' lanes of one copy, landed together when a barrier's phase completes."""

    copy: _Copy
    lanes: np.ndarray

    def land(self, memory: Any) -> None:
        due = self.lanes & self.copy.lanes
        if due.any():
            memory.vstore(self.copy.op, self.copy.dst, self.copy.index, self.copy.values, Mask(due))
            self.copy.lanes = self.copy.lanes & ~due


class AsyncCopies:
    """The copies in flight of one launch, per thread."""

    def __init__(self, size: int) -> None:
        self.committed = np.zeros(size, dtype=np.int64)
        self.pending: list[_Copy] = []

    def issue(self, op: Op, dst: Any, index: np.ndarray, values: np.ndarray, mask: Mask) -> None:
        self.pending = [c for c in self.pending if c.lanes.any()]  # drop the copies barriers landed
        self.pending.append(_Copy(op, dst, np.array(index, copy=True), values, mask.bits.copy(),
                                  self.committed.copy()))

    def commit(self, mask: Mask) -> None:
        self.committed[mask.bits] += 1

    def outstanding(self, lanes: np.ndarray) -> list[Landing]:
        """The copies of the threads in ``lanes`` that have not landed yet (a wait may still land them first)."""
        return [Landing(c, c.lanes & lanes) for c in self.pending if (c.lanes & lanes).any()]

    def wait(self, memory: Any, mask: Mask, pending_groups: int) -> None:
        """Land the copies the active threads' wait covers, in the order they were issued."""
        still: list[_Copy] = []
        for c in self.pending:
            if not c.lanes.any():  # landed by a barrier's phase
                continue
            due = c.lanes & mask.bits
            if pending_groups:
                due &= c.group < self.committed - pending_groups
            if due.any():
                memory.vstore(c.op, c.dst, c.index, c.values, Mask(due))
                c.lanes = c.lanes & ~due
            if c.lanes.any():
                still.append(c)
        self.pending = still
