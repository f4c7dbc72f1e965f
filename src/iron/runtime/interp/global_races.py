"""The opt-in global-memory race check (the ``interp_global_races`` option).

The interpreter runs every thread in lock step, so a kernel that reads an
element of a global tensor which another thread of the launch writes (a
transpose in place, ``gemv(A, v, out=v)``) gets the answer the program order
suggests; a GPU runs groups in any order and threads of a group apart between
barriers, and gets another.  With the option on, every access of a global
tensor is recorded, and an element that one thread writes and another touches
is reported when:

* the two threads are in different groups (nothing orders groups; atomics
  may meet atomics), or
* they are in one group and no barrier separates the two accesses.

Two trackers (:class:`~.races.RaceTracker`) per array find both cases at the
moment the second access happens, in memory linear in the array's size:
``across`` compares groups and never forgets; ``within`` compares threads and
forgets a group's accesses when that group passes a barrier.  Tensor
arguments bound to one array share one tracker.  An actor is a thread (its
index in the launch) or, for fragment ops, a whole subgroup (``threads +
global subgroup``).  With the option off nothing is recorded: the cost is
one ``None`` test per access, as for global tensors today.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .memory import Buffer
from .races import Race, RaceTracker
from .threads import ThreadSpace


class GlobalRaces:
    """Accesses of one global array (under every parameter name bound to it) during one launch."""

    def __init__(self, names: list[str], size: int, threads: ThreadSpace, ops: int):
        self.names = names
        self.threads = threads
        actors = threads.size + threads.total_simd_groups
        self.across = RaceTracker(1, size, actors, ops, party=self.group_of)
        self.within = RaceTracker(1, size, actors, ops)

    def group_of(self, actors: np.ndarray) -> np.ndarray:
        """The linear group of each actor (a thread, or a subgroup past the threads)."""
        t = self.threads
        return np.where(actors < t.size, actors // t.threads_per_group, (actors - t.size) // t.simd_groups_per_group)

    def record(self, kind: str, op_id: int, index: np.ndarray, actors: np.ndarray) -> Race | None:
        """Record accesses (parallel 1-D arrays); return the first race they make, else None."""
        whole = np.zeros(index.size, dtype=np.int64)  # a global array is one "group" of the trackers
        race = self.across.record(kind, op_id, whole, index, actors)
        return race if race is not None else self.within.record(kind, op_id, whole, index, actors)

    def fence(self, threads: np.ndarray) -> None:
        """``threads`` (bool over threads) fenced: their accesses so far no longer race other groups' later ones."""
        t = self.threads
        self.across.forget(lambda actors: np.where(actors < t.size, threads[np.minimum(actors, t.size - 1)], False))

    def barrier(self, groups: np.ndarray) -> None:
        """``groups`` (bool over groups) passed a barrier: their threads' accesses no longer race each other."""
        self.within.forget(lambda actors: groups[self.group_of(actors)])


def watch_global_buffers(buffers: list[Any], threads: ThreadSpace, ops: int) -> list[GlobalRaces]:
    """Give the global tensors among ``buffers`` trackers, one per distinct array; return the trackers."""
    by_array: dict[tuple[int, int], list[Buffer]] = {}
    for buf in buffers:
        if isinstance(buf, Buffer) and not buf.shared:
            key = (buf.data.__array_interface__["data"][0], buf.data.nbytes)
            by_array.setdefault(key, []).append(buf)
    trackers = []
    for bufs in by_array.values():
        tracker = GlobalRaces([b.name for b in bufs], bufs[0].size, threads, ops)
        for b in bufs:
            b.races = tracker
        trackers.append(tracker)
    return trackers
