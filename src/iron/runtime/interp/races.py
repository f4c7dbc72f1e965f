"""Shared-memory race detection between barriers.

Between two barriers, two different threads of a group must not touch one
shared address unless both only read (docs/ir.md).  Atomics may meet other
atomics, but not plain reads or writes.  For every address of a shared array
and every access kind, the tracker remembers the first two distinct
*actors* that made such an access since the group's last barrier; that is
enough to find a conflicting pair for any later access, at the moment it
happens.  An actor is a thread (its number in the group) or, for fragment
ops, a whole subgroup (``threads_per_group + subgroup``).

The global race check (:mod:`.global_races`) uses the same tracker with a
*party*: two actors conflict only when their parties differ (threads of
different groups), and forgets actors one group at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

READ, WRITE, ATOMIC = "read", "write", "atomic"
#: The access kinds each kind conflicts with when the actors differ.
CONFLICTS = {READ: (WRITE, ATOMIC), WRITE: (READ, WRITE, ATOMIC), ATOMIC: (READ, WRITE)}
_NONE = -1

#: Maps actors (an int array) to what decides whether two of them conflict; None: the actors themselves.
Party = Callable[[np.ndarray], np.ndarray] | None


@dataclass(frozen=True)
class Race:
    """Two conflicting accesses of one shared element."""

    group: int
    index: int
    actor: int
    op_id: int
    kind: str
    other_actor: int
    other_op_id: int
    other_kind: str


class RaceTracker:
    """Accesses of one shared array (all groups) since each group's last barrier.

    Entries pack ``actor << shift | op_id``; -1 means none.  They take 32
    bits when actors and op ids fit in 15 and 16 bits (any ordinary launch),
    else 64, since the tables are as large as the shared arrays of all groups.
    """

    def __init__(self, groups: int, size: int, actors: int, ops: int, party: Party = None):
        self.groups = groups
        self.size = size
        self._party = party
        narrow = actors < 2 ** 15 and ops < 2 ** 16
        self._dtype = np.dtype(np.int32 if narrow else np.int64)
        self._shift = 16 if narrow else 32
        self._op_mask = (1 << self._shift) - 1
        self._seen: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def reset(self, groups: np.ndarray) -> None:
        """Forget the accesses of ``groups`` (a bool array over groups): they passed a barrier."""
        for first, second in self._seen.values():
            first.reshape(self.groups, self.size)[groups] = _NONE
            second.reshape(self.groups, self.size)[groups] = _NONE

    def forget(self, gone: Callable[[np.ndarray], np.ndarray]) -> None:
        """Forget every access whose actor ``gone`` marks (a bool per actor), whatever its address."""
        for first, second in self._seen.values():
            drop_first = (first != _NONE) & gone(first >> self._shift)
            drop_second = (second != _NONE) & gone(second >> self._shift)
            second[drop_second] = _NONE
            first[drop_first] = second[drop_first]
            second[drop_first] = _NONE

    def _of(self, actors: np.ndarray) -> np.ndarray:
        return actors if self._party is None else self._party(actors)

    def record(self, kind: str, op_id: int, group: np.ndarray, index: np.ndarray,
               actor: np.ndarray) -> Race | None:
        """Record accesses (parallel 1-D arrays); return the first race they cause, else None."""
        if group.size == 0:
            return None
        keys = group.astype(np.int64) * self.size + index.astype(np.int64)
        actor = actor.astype(self._dtype)
        race = self._against_earlier(kind, op_id, keys, actor)
        if race is not None:
            return race
        return self._merge(kind, op_id, keys, actor)

    def _against_earlier(self, kind: str, op_id: int, keys: np.ndarray, actor: np.ndarray) -> Race | None:
        for other in CONFLICTS[kind]:
            if other not in self._seen:
                continue
            first, second = self._seen[other]
            f, s = first[keys], second[keys]
            entry = np.where(self._of(f >> self._shift) != self._of(actor), f, s)
            hits = np.flatnonzero(entry != _NONE)
            if hits.size:
                j = int(hits[0])
                e = int(entry[j])
                return self._race(int(keys[j]), int(actor[j]), op_id, kind, e >> self._shift, e & self._op_mask,
                                  other)
        return None

    def _merge(self, kind: str, op_id: int, keys: np.ndarray, actor: np.ndarray) -> Race | None:
        order = np.argsort(keys, kind="stable")
        k_sorted, a_sorted = keys[order], actor[order]
        starts = np.flatnonzero(np.r_[True, k_sorted[1:] != k_sorted[:-1]])
        seg = np.cumsum(np.r_[True, k_sorted[1:] != k_sorted[:-1]]) - 1
        first_actor = a_sorted[starts]
        differs = self._of(a_sorted) != self._of(first_actor)[seg]
        if kind == WRITE and differs.any():
            j = int(np.flatnonzero(differs)[0])
            s = int(seg[j])
            return self._race(int(k_sorted[j]), int(a_sorted[j]), op_id, WRITE, int(first_actor[s]), op_id, WRITE)
        big = np.iinfo(np.int64).max
        second_pos = np.minimum.reduceat(np.where(differs, np.arange(len(order)), big), starts)
        has_second = second_pos != big
        ukeys = k_sorted[starts]
        shift = self._shift
        b1 = (first_actor << shift) | op_id
        b2 = np.where(has_second, (a_sorted[np.where(has_second, second_pos, 0)] << shift) | op_id, _NONE)

        if kind not in self._seen:
            n = self.groups * self.size
            self._seen[kind] = (np.full(n, _NONE, dtype=self._dtype), np.full(n, _NONE, dtype=self._dtype))
        first, second = self._seen[kind]
        old_first, old_second = first[ukeys], second[ukeys]
        # The second entry keeps the first actor that differs from the first entry's.
        candidate = np.where(self._of(b1 >> shift) != self._of(old_first >> shift), b1, b2)
        first[ukeys] = np.where(old_first == _NONE, b1, old_first)
        second[ukeys] = np.where(old_first == _NONE, b2, np.where(old_second == _NONE, candidate, old_second))
        return None

    def _race(self, key: int, actor: int, op_id: int, kind: str, other_actor: int, other_op_id: int,
              other_kind: str) -> Race:
        group, index = divmod(key, self.size)
        return Race(group, index, actor, op_id, kind, other_actor, other_op_id, other_kind)
