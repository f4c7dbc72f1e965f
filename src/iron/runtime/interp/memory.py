"""Global and shared buffers, addressing, and the checked loads and stores.

A :class:`Buffer` is flat storage.  A global tensor is a view of the caller's
array (stores land in it directly); a shared array holds one copy per group,
and a thread's element ``i`` lives at ``group * size + i``.  Every access
goes through :meth:`Memory.locate`, which applies the bounds and alignment
checks and, for shared memory, the race tracker (for global tensors too when
the ``interp_global_races`` option is on: :mod:`.global_races`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...core.dtypes import DType
from ...core.eval import np_dtype
from ...core.ir import Op
from .faults import Faults
from .mask import Mask
from .races import Race, RaceTracker
from .threads import ThreadRef, ThreadSpace

if TYPE_CHECKING:
    from .global_races import GlobalRaces


@dataclass
class Buffer:
    """A tensor or shared array as the interpreter stores it."""

    name: str
    dtype: DType
    #: Flat storage; for shared arrays all groups' copies, group after group.
    data: np.ndarray
    #: Elements one thread can address (the tensor size, or one group's copy).
    size: int
    shared: bool = False
    #: The race tracker: a shared array's (with checks on), a global tensor's (with ``interp_global_races``).
    races: RaceTracker | GlobalRaces | None = None


@dataclass(frozen=True)
class Located:
    """Where the active threads of one access go."""

    #: Active thread indices, or None when every thread is active.
    threads: np.ndarray | None
    #: The element index each active thread asked for (int64).
    index: np.ndarray
    #: The position in ``Buffer.data`` (adds the group's offset for shared arrays).
    flat: np.ndarray


class Memory:
    """Buffer access for one launch."""

    def __init__(self, threads: ThreadSpace, faults: Faults, checks: bool, op_count: int):
        self.threads = threads
        self.faults = faults
        self.checks = checks
        self.op_count = op_count
        self._shared: dict[int, Buffer] = {}
        self._ops: list[Op] = []
        self._op_ids: dict[int, int] = {}
        #: Trackers of the global tensors, when the global race check is on.
        self.global_races: list[GlobalRaces] = []

    # ------------------------------------------------------------ buffers
    def shared(self, op: Op) -> Buffer:
        """The shared array of a ``shared_alloc`` op: one per op and launch, zero-filled."""
        buf = self._shared.get(id(op))
        if buf is None:
            dt = op.attrs["dtype"]
            size = int(np.prod(op.attrs["shape"]))
            groups = self.threads.total_groups
            name = op.result.hint if op.result is not None and op.result.hint else f"shared#{len(self._shared)}"
            actors = self.threads.threads_per_group + self.threads.simd_groups_per_group
            races = RaceTracker(groups, size, actors, self.op_count) if self.checks else None
            buf = Buffer(name, dt, np.zeros(groups * size, dtype=np_dtype(dt)), size, True, races)
            self._shared[id(op)] = buf
        return buf

    def shared_buffers(self) -> list[Buffer]:
        return list(self._shared.values())

    # ------------------------------------------------------------ addressing
    def locate(self, op: Op, buf: Buffer, index: np.ndarray, mask: Mask, width: int = 1) -> Located:
        """Resolve the active threads' indices; check bounds and alignment when checks are on."""
        sel = None if mask.all else mask.indices
        raw = index if sel is None else index[sel]
        idx = raw.astype(np.int64, copy=False)
        if self.checks:
            bad = np.flatnonzero((idx < 0) | (idx > buf.size - width))
            if bad.size:
                j = int(bad[0])
                thread = j if sel is None else int(sel[j])
                raise self.faults.out_of_bounds(op, buf.name, int(raw[j]), buf.size, thread, width)
            if width > 1:
                bad = np.flatnonzero(idx % width)
                if bad.size:
                    j = int(bad[0])
                    thread = j if sel is None else int(sel[j])
                    raise self.faults.misaligned(op, buf.name, int(raw[j]), width, thread)
        flat = idx
        if buf.shared:
            groups = self.threads.linear_group if sel is None else self.threads.linear_group[sel]
            flat = idx + groups * buf.size
        return Located(sel, idx, flat)

    # ------------------------------------------------------------ plain access
    def load(self, op: Op, buf: Buffer, index: np.ndarray, mask: Mask) -> np.ndarray:
        at = self.locate(op, buf, index, mask)
        self.track(op, buf, "read", at)
        return mask.scatter(buf.data[at.flat])

    def store(self, op: Op, buf: Buffer, index: np.ndarray, values: np.ndarray, mask: Mask) -> None:
        at = self.locate(op, buf, index, mask)
        self.track(op, buf, "write", at)
        buf.data[at.flat] = values if at.threads is None else values[at.threads]

    def vload(self, op: Op, buf: Buffer, index: np.ndarray, mask: Mask, width: int) -> np.ndarray:
        at = self.locate(op, buf, index, mask, width)
        self.track(op, buf, "read", at, width)
        return mask.scatter(buf.data[at.flat[:, None] + np.arange(width)])

    def vstore(self, op: Op, buf: Buffer, index: np.ndarray, values: np.ndarray, mask: Mask) -> None:
        width = values.shape[1]
        at = self.locate(op, buf, index, mask, width)
        self.track(op, buf, "write", at, width)
        buf.data[at.flat[:, None] + np.arange(width)] = values if at.threads is None else values[at.threads]

    # ------------------------------------------------------------ one thread's many elements (tile copies)
    def elements(self, op: Op, buf: Buffer, thread: int, index: np.ndarray) -> Located:
        """Where ``index`` (many elements, all of one thread) lies in ``buf``; out of bounds is an error."""
        idx = index.astype(np.int64, copy=False)
        bad = np.flatnonzero((idx < 0) | (idx >= buf.size))
        if bad.size:
            raise self.faults.out_of_bounds(op, buf.name, int(idx[bad[0]]), buf.size, thread)
        threads = np.full(idx.size, thread, dtype=np.int64)
        flat = idx + int(self.threads.linear_group[thread]) * buf.size if buf.shared else idx
        return Located(threads, idx, flat)

    def gather(self, op: Op, buf: Buffer, thread: int, index: np.ndarray) -> np.ndarray:
        at = self.elements(op, buf, thread, index)
        self.track(op, buf, "read", at)
        return buf.data[at.flat]

    def place(self, op: Op, buf: Buffer, at: Located, values: np.ndarray) -> None:
        self.track(op, buf, "write", at)
        buf.data[at.flat] = values

    # ------------------------------------------------------------ race tracking
    def op_id(self, op: Op) -> int:
        key = id(op)
        if key not in self._op_ids:
            self._op_ids[key] = len(self._ops)
            self._ops.append(op)
        return self._op_ids[key]

    def track(self, op: Op, buf: Buffer, kind: str, at: Located, width: int = 1) -> None:
        """Record a per-thread access of a tracked buffer (a no-op for the others)."""
        if buf.races is None:
            return
        t = self.threads
        if not buf.shared:
            threads = np.arange(t.size) if at.threads is None else at.threads
            index = at.index
            if width > 1:
                index = (index[:, None] + np.arange(width)).reshape(-1)
                threads = np.repeat(threads, width)
            self._record_global(op, buf, kind, index, threads)
            return
        groups = t.linear_group if at.threads is None else t.linear_group[at.threads]
        actors = t.local_linear if at.threads is None else t.local_linear[at.threads]
        index = at.index
        if width > 1:
            index = (index[:, None] + np.arange(width)).reshape(-1)
            groups, actors = np.repeat(groups, width), np.repeat(actors, width)
        self._record(op, buf, kind, groups, index, actors)

    def track_subgroups(self, op: Op, buf: Buffer, kind: str, simd_groups: np.ndarray,
                        index: np.ndarray) -> None:
        """Record a fragment access: ``index`` (subgroups, elements) touched by whole subgroups."""
        if buf.races is None:
            return
        t = self.threads
        if not buf.shared:
            actors = np.repeat(t.size + simd_groups, index.shape[1])
            self._record_global(op, buf, kind, index.reshape(-1), actors)
            return
        per_group = t.simd_groups_per_group
        groups = np.repeat(simd_groups // per_group, index.shape[1])
        actors = np.repeat(t.threads_per_group + simd_groups % per_group, index.shape[1])
        self._record(op, buf, kind, groups, index.reshape(-1), actors)

    def _record(self, op: Op, buf: Buffer, kind: str, groups: np.ndarray, index: np.ndarray,
                actors: np.ndarray) -> None:
        assert isinstance(buf.races, RaceTracker)
        race = buf.races.record(kind, self.op_id(op), groups, index, actors)
        if race is not None:
            raise self._race_error(op, buf, race)

    def _record_global(self, op: Op, buf: Buffer, kind: str, index: np.ndarray, actors: np.ndarray) -> None:
        tracker = buf.races
        assert tracker is not None and not isinstance(tracker, RaceTracker)
        race = tracker.record(kind, self.op_id(op), index, actors)
        if race is None:
            return
        group, other_group = (int(g) for g in tracker.group_of(np.array([race.actor, race.other_actor])))
        one_group = self._group_text(group * self.threads.threads_per_group) if group == other_group else None
        aliases = [n for n in tracker.names if n != buf.name]
        raise self.faults.global_race(op, self._ops[race.other_op_id], buf.name, aliases, race.index,
                                      self._global_actor(race.actor), self._global_actor(race.other_actor),
                                      race.kind, race.other_kind, one_group)

    def _global_actor(self, actor: int) -> ThreadRef | str:
        t = self.threads
        if actor < t.size:
            return t.describe(actor)
        sg = actor - t.size
        group, local = divmod(sg, t.simd_groups_per_group)
        return f"subgroup {local} of group {self._group_text(group * t.threads_per_group)} (a fragment op)"

    def _group_text(self, thread: int) -> str:
        group = self.threads.describe(thread).group_id
        return str(group[0]) if len(group) == 1 else str(group)

    def _race_error(self, op: Op, buf: Buffer, race: Race) -> Exception:
        other_op = self._ops[race.other_op_id]
        group = self.threads.describe(race.group * self.threads.threads_per_group).group_id
        group_txt = str(group[0]) if len(group) == 1 else str(group)
        return self.faults.race(op, other_op, buf.name, race.index, group_txt,
                                self._actor(race.group, race.actor), self._actor(race.group, race.other_actor),
                                race.kind, race.other_kind)

    def _actor(self, group: int, actor: int) -> ThreadRef | str:
        t = self.threads
        if actor < t.threads_per_group:
            return t.describe(group * t.threads_per_group + actor)
        return f"subgroup {actor - t.threads_per_group} (a fragment op)"

    def forget_threads(self, threads: np.ndarray) -> None:
        """Forget the shared accesses of ``threads`` (a bool per thread of a group, in every group) and of
        the subgroups holding them: something now orders those accesses before whatever comes next."""
        t = self.threads
        lanes = np.zeros(t.simd_groups_per_group * t.simd_width, dtype=bool)
        lanes[:t.threads_per_group] = threads
        actors = np.concatenate([threads, lanes.reshape(-1, t.simd_width).any(axis=1)])
        for buf in self._shared.values():
            if isinstance(buf.races, RaceTracker):
                buf.races.forget(lambda a: actors[a])

    def fence(self, threads: np.ndarray) -> None:
        """``threads`` (bool over the launch's threads) ran a device-scope fence: the global race check no longer
        holds their accesses so far against other groups (it cannot see the atomic that orders a reader after
        them, so it trusts the fence; docs/language.md, "Fences")."""
        for tracker in self.global_races:
            tracker.fence(threads)

    def barrier(self, groups: np.ndarray) -> None:
        """``groups`` (bool over groups) passed a barrier: their race history starts afresh."""
        for buf in self._shared.values():
            if isinstance(buf.races, RaceTracker):
                buf.races.reset(groups)
        for tracker in self.global_races:
            tracker.barrier(groups)
