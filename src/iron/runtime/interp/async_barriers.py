"""Asynchronous barriers on the interpreter: phases, arrivals and announced bytes, checked strictly.

Each group owns its own ``count`` barriers.  A phase completes when its ``arrivals`` arrivals came and
every byte announced with them (``barrier_arrive(..., bytes=)``) landed; the barrier then starts the next
phase.  ``barrier_wait(bars, i, parity)`` passes when the phase in progress has the other parity, as
``mbarrier.try_wait.parity`` does on a GPU.

The interpreter runs threads in lock-step, except the two sides of a branch that may wait, which run as
fibers (``fibers.py``): a wait that does not pass lets the other side run, and a wait that nothing running
can release would hang on a GPU (or, worse, pass on a later phase).  It is an error here, as are more
arrivals in one step than the phase has left (on a GPU they would spill into the next phase).

Copies tied to a phase (``copy_async_barrier``, and tile copies, which bring the announced bytes) land
when the phase completes, as late as a GPU may
land them, so a kernel that reads them before its wait sees the old contents.  For the race check, a wait
by every thread of a group orders shared memory like ``barrier()`` (its history starts afresh); a wait by
some threads forgets the accesses of the threads that arrived on the phase it waited for, which the wait
orders before the waiters' next accesses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.ir import Op
from .async_copies import AsyncCopies, Landing
from .faults import Faults
from .mask import Mask
from .threads import ThreadSpace


class AsyncBarriers:
    """The barriers of one ``async_barriers`` call, for every group of a launch."""

    def __init__(self, op: Op, threads: ThreadSpace, faults: Faults):
        self.op = op
        self.threads = threads
        self.faults = faults
        self.count = op.attrs["count"]
        self.arrivals = op.attrs["arrivals"]
        shape = (threads.total_groups, self.count)
        #: Phases completed so far, arrivals the phase in progress still needs, bytes it still expects.
        self.phase = np.zeros(shape, dtype=np.int64)
        self.pending = np.full(shape, self.arrivals, dtype=np.int64)
        self.bytes = np.zeros(shape, dtype=np.int64)
        #: Per barrier, the threads (by index in the group) that arrived on the phase in progress / the last one.
        self.arrived = np.zeros((*shape, threads.threads_per_group), dtype=bool)
        self.released = np.zeros_like(self.arrived)
        #: (group, barrier) -> copies that land when the phase in progress completes.
        self.tied: dict[tuple[int, int], list[Landing]] = {}
        #: Clusters: the other groups that arrived on (or delivered to) the phase in progress / the last one,
        #: and the phase of the latest such arrival not yet consumed by a wait of the group (-1: none).
        self.senders: dict[tuple[int, int], set[int]] = {}
        self.heard: dict[tuple[int, int], set[int]] = {}
        self.remote_phase = np.full(shape, -1, dtype=np.int64)
        #: Whether another group ever reached these barriers (a kernel without clusters never pays for the above).
        self.reached = False

    @property
    def name(self) -> str:
        return self.op.result.hint or "barriers"

    def _slots(self, op: Op, index: np.ndarray, mask: Mask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The active threads, their groups and their barrier indices (checked against the count)."""
        threads = mask.indices
        return threads, threads // self.threads.threads_per_group, self._indices(op, index, threads)

    def _indices(self, op: Op, index: np.ndarray, threads: np.ndarray) -> np.ndarray:
        i = np.asarray(index)[threads].astype(np.int64)
        bad = np.flatnonzero((i < 0) | (i >= self.count))
        if bad.size:
            t = int(threads[bad[0]])
            raise self.faults.general(op, f"barrier {int(i[bad[0]])} of '{self.name}' is out of range (it holds "
                                          f"{self.count}) in {self.faults.thread(t)}")
        return i

    def arrive(self, op: Op, index: np.ndarray, mask: Mask, memory: Any, targets: np.ndarray | None = None) -> None:
        """The active threads arrive on their barriers: their own group's, or (``targets``, a group per active
        thread) another group's of the cluster."""
        threads, groups, i = self._slots(op, index, mask)
        if targets is not None:
            for g, b, sender in zip(targets, i, groups):
                if g != sender:
                    self._remote(int(g), int(b), int(sender), arrival=True)
            groups = targets
        came = np.zeros_like(self.pending)
        np.add.at(came, (groups, i), 1)
        over = np.argwhere(came > self.pending)
        if over.size:
            g, b = (int(x) for x in over[0])
            raise self.faults.general(op, f"{int(came[g, b])} threads of group {g} arrive on barrier {b} of "
                                          f"'{self.name}' at once, but its phase {int(self.phase[g, b])} needs only "
                                          f"{int(self.pending[g, b])} more (it takes {self.arrivals} a phase): the "
                                          "rest would count toward the next phase")
        self.pending -= came
        np.add.at(self.bytes, (groups, i), op.attrs.get("bytes", 0))
        self.arrived[groups, i, threads % self.threads.threads_per_group] = True
        for g, b in np.argwhere(came > 0):
            self._complete_if_done(op, int(g), int(b), memory)

    def _complete_if_done(self, op: Op, g: int, b: int, memory: Any) -> None:
        if self.pending[g, b] or self.bytes[g, b]:
            return
        for landing in self.tied.pop((g, b), []):
            landing.land(memory)
        self.heard[(g, b)] = self.senders.pop((g, b), set())
        self.phase[g, b] += 1
        self.pending[g, b] = self.arrivals
        self.released[g, b] = self.arrived[g, b]
        self.arrived[g, b] = False

    def tie_copies(self, op: Op, index: np.ndarray, mask: Mask, copies: AsyncCopies) -> None:
        """The copies the active threads issued so far land when their barrier's phase completes."""
        threads, groups, i = self._slots(op, index, mask)
        for g, b in {(int(g), int(b)) for g, b in zip(groups, i)}:
            lanes = np.zeros(self.threads.size, dtype=bool)
            lanes[threads[(groups == g) & (i == b)]] = True
            self.tied.setdefault((g, b), []).extend(copies.outstanding(lanes))

    def _remote(self, g: int, b: int, sender: int, arrival: bool) -> None:
        """Group ``sender`` reached barrier ``b`` of group ``g`` in the phase in progress: an arrival of its
        threads (which a wait on the phase then hears from) or a delivery of its copies."""
        if arrival:
            self.senders.setdefault((g, b), set()).add(sender)
        self.remote_phase[g, b] = self.phase[g, b]
        self.reached = True

    def bring(self, op: Op, thread: int, b: int, landing: Any, nbytes: int, memory: Any,
              group: int | None = None) -> None:
        """A tile copy of ``thread`` brings ``nbytes`` to barrier ``b`` of its group (or of ``group``, which a
        multicast reaches): it lands when the phase completes.  A delivery from another group may come before
        or after the arrival that announces it, as on a GPU, where the groups do not run in lock-step."""
        own = thread // self.threads.threads_per_group
        g = own if group is None else group
        if not 0 <= b < self.count:
            raise self.faults.general(op, f"barrier {b} of '{self.name}' is out of range (it holds {self.count}) in "
                                          f"{self.faults.thread(thread)}")
        if g != own:
            self._remote(g, b, own, arrival=False)
        elif self.bytes[g, b] > 0:
            raise self.faults.general(op, f"a tile copy of {self.faults.thread(thread)} comes after the arrival that "
                                          f"announced its bytes on barrier {b} of '{self.name}': issue the copies "
                                          "first, then barrier_arrive(..., bytes=) (before sm_90 and on the targets "
                                          "without tile copies the arrival must follow them)")
        self.bytes[g, b] -= nbytes
        self.tied.setdefault((g, b), []).append(landing)
        self._complete_if_done(op, g, b, memory)

    def passes(self, op: Op, index: np.ndarray, parity: np.ndarray, mask: Mask) -> bool:
        """Whether the phase every active thread waits for has completed."""
        threads, groups, i = self._slots(op, index, mask)
        return not (self.phase[groups, i] % 2 == (np.asarray(parity)[threads] & 1)).any()

    def stuck(self, op: Op, index: np.ndarray, parity: np.ndarray, mask: Mask, others: list[str]) -> Exception:
        """The error of a wait that would never return: the first thread whose phase is still in progress, and
        the waits of other branches that cannot go on either."""
        threads, groups, i = self._slots(op, index, mask)
        p = np.asarray(parity)[threads] & 1
        k = int(np.flatnonzero(self.phase[groups, i] % 2 == p)[0])
        g, b, t = int(groups[k]), int(i[k]), int(threads[k])
        current, left = int(self.phase[g, b]), int(self.bytes[g, b])
        bytes_text = f"{left} bytes outstanding" if left >= 0 else \
            f"tile copies brought {-left} bytes more than the arrivals announced"
        meanwhile = f"; the other branches wait too: {'; '.join(others)}" if others else ""
        return self.faults.general(op, f"{self.faults.thread(t)} waits on barrier {b} of '{self.name}' for a "
                                       f"phase of parity {int(p[k])}, but phase {current} is still in progress "
                                       f"({self.arrivals - int(self.pending[g, b])} of {self.arrivals} "
                                       f"arrivals, {bytes_text}) and no thread that could complete it runs "
                                       f"before this wait: it would never return{meanwhile}")

    def wait(self, op: Op, index: np.ndarray, parity: np.ndarray, mask: Mask) -> tuple[np.ndarray, np.ndarray]:
        """After :meth:`passes`: the groups every thread of which waited, and (over a group's threads) those that
        arrived on the phases the other waiters waited for."""
        threads, groups, i = self._slots(op, index, mask)
        t = self.threads
        shape = (t.total_groups, t.threads_per_group)
        waited = mask.bits.reshape(shape)
        whole = waited.any(axis=1) & ~(t.in_grid.reshape(shape) & ~waited).any(axis=1)
        partial = ~whole[groups]
        if self.reached:
            done = self.remote_phase[groups, i] < self.phase[groups, i]
            self.remote_phase[groups[done], i[done]] = -1
        return whole, self.released[groups[partial], i[partial]].any(axis=0)

    def heard_from(self, index: np.ndarray, mask: Mask) -> list[tuple[int, set[int]]]:
        """After a wait: each waiting thread and the other groups whose threads arrived on the phase it waited
        for."""
        threads, groups, i = self._slots(self.op, index, mask)
        return [(int(t), self.heard.get((int(g), int(b)), set())) for t, g, b in zip(threads, groups, i)]

    def forget_remote(self) -> None:
        """A cluster_sync: every arrival and delivery from another group is consumed."""
        self.remote_phase[:] = -1

    def unconsumed_remote(self) -> tuple[int, int] | None:
        """A (group, barrier) that another group reached since its last wait on that phase, or None."""
        left = np.argwhere(self.remote_phase >= 0)
        return (int(left[0][0]), int(left[0][1])) if left.size else None
