"""Clusters on the interpreter: groups that arrive on each other's barriers and multicast tile copies.

``cluster_groups(n)`` joins consecutive groups along axis 0 into clusters of ``n``.  The interpreter runs every
group in lock-step, so a peer's arrival or multicast lands at once; what it checks is what a GPU would get
wrong where the groups drift apart:

* a group reaches another's barriers or shared memory only after a ``cluster_sync()`` (before it, the other may
  not have made its barriers yet);
* a multicast into another group's tile again, after the first lap, needs an arrival of that group's threads
  on a barrier the issuing group waited on since (else the other group may still be reading the tile: the
  ring's ``empty`` barrier must hear from every group it feeds);
* a group must not end while another may still arrive on its barriers or copy into it: an arrival or delivery
  from a peer is consumed by a wait of the receiving group on that phase, or by a later ``cluster_sync()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.ir import Op
from .faults import Faults
from .threads import ThreadSpace


class Clusters:
    """The clusters of one launch (size 1 until the kernel's ``cluster_groups``)."""

    def __init__(self, threads: ThreadSpace, faults: Faults):
        self.threads = threads
        self.faults = faults
        self.size = 1
        self.synced = False
        #: (issuing thread, tile buffer id, receiving group, first element) -> whether the issuer heard from the
        #: receiver (an arrival of its threads on a phase the issuer waited on) since its last multicast there.
        self.heard: dict[tuple[int, int, int, int], bool] = {}
        #: Every barrier array of the launch (the end-of-kernel check reads them).
        self.barriers: list[Any] = []
        #: The last op that reached another group, for the end-of-kernel error.
        self.last_remote: Op | None = None

    def join(self, op: Op) -> np.ndarray:
        """``cluster_groups(size)``: each thread's rank in its cluster; the groups along axis 0 must fill whole
        clusters (a GPU refuses the launch otherwise)."""
        size, along = op.attrs["size"], self.threads.num_groups[0]
        if along % size:
            raise self.faults.general(op, f"clusters of {size} groups along axis 0, but the launch has {along} "
                                          f"groups there: launch a multiple of {size}")
        self.size = size
        return (self.threads.group_id(0) % size).astype(np.int32)

    def peer(self, group: int, rank: int) -> int:
        """The linear number of the group of ``rank`` in ``group``'s cluster."""
        x = group % self.threads.num_groups[0]
        return group - x % self.size + rank

    def members(self, group: int) -> range:
        first = self.peer(group, 0)
        return range(first, first + self.size)

    def reach(self, op: Op, thread: int, rank: int) -> int:
        """The group ``thread`` reaches at ``rank`` of its cluster, checked: a rank of the cluster, and (another
        group) after a cluster_sync."""
        group = int(self.threads.linear_group[thread])
        if not 0 <= rank < self.size:
            raise self.faults.general(op, f"rank {rank} of a cluster of {self.size} groups in "
                                          f"{self.faults.thread(thread)}")
        target = self.peer(group, rank)
        if target != group:
            if not self.synced:
                raise self.faults.general(op, f"{self.faults.thread(thread)} reaches group {target} of its cluster "
                                              "before any cluster_sync(): that group may not have made its barriers "
                                              "yet; call cluster_sync() after async_barriers() first")
            self.last_remote = op
        return target

    def multicast(self, op: Op, thread: int, buffer: Any, receiver: int, base: int) -> None:
        """A multicast of ``thread`` into ``receiver``'s tile at ``base``: after the first, only once the thread
        heard from the receiver's threads (they finished with the tile)."""
        key = (thread, id(buffer), receiver, base)
        issuer = int(self.threads.linear_group[thread])
        if key in self.heard and not self.heard[key]:
            raise self.faults.general(op, f"group {issuer} copies into element {base} of '{buffer.name}' of group "
                                          f"{receiver} again without waiting on an arrival of group {receiver}'s "
                                          f"threads since its last copy there: they may still read it.  Have the "
                                          f"readers of every group arrive on the issuer's barrier "
                                          f"(barrier_arrive(..., rank=)) and the issuer wait on it")
        self.heard[key] = False

    def waited(self, waits: list[tuple[int, set[int]]]) -> None:
        """Each (thread, groups) of ``waits``: the thread passed a wait on a phase that the threads of those other
        groups arrived on."""
        heard = {t: groups for t, groups in waits if groups}
        for key in self.heard:
            if key[0] in heard and key[2] in heard[key[0]]:
                self.heard[key] = True

    def sync(self, op: Op, groups: np.ndarray) -> None:
        """``cluster_sync()`` by every group of ``groups`` (bool over groups): whole clusters, which then
        consumed every arrival and delivery between them."""
        ran = np.flatnonzero(groups)
        for g in ran:
            missing = [p for p in self.members(int(g)) if not groups[p]]
            if missing:
                raise self.faults.general(op, f"cluster_sync() is reached by group {int(g)} but not by group "
                                              f"{missing[0]} of its cluster: every group of a cluster must reach "
                                              "it, or it never returns")
        self.synced = True
        for bars in self.barriers:
            bars.forget_remote()
        for key in self.heard:
            self.heard[key] = True

    def check_end(self) -> None:
        """At the kernel's end: no group may still receive from another (it would have exited)."""
        for bars in self.barriers:
            left = bars.unconsumed_remote()
            if left is not None:
                g, b = left
                raise self.faults.general(self.last_remote or bars.op,
                                          f"group {g} ends while another group of its cluster may still arrive on "
                                          f"barrier {b} of '{bars.name}' or copy into its shared memory (it "
                                          "never waited for that phase): end the kernel with cluster_sync()")
