"""Building the interpreter's run-time errors, with every detail a user needs.

Each error names the kernel, the op's source location and the offending
thread(s); the same facts are attached as attributes (``tensor``, ``index``,
``thread``, ...) so that tools and tests can read them without parsing text.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import (BarrierDivergenceError, InactiveLaneError, InterpError, MisalignedAccessError,
                            OutOfBoundsError, SharedMemoryRaceError, SubgroupDivergenceError)
from ...core.ir import Op
from .threads import ThreadRef, ThreadSpace


class GlobalMemoryRaceError(InterpError):
    """Two threads of a launch touch one global element, at least one writing, with nothing ordering them."""


def _attach(err: InterpError, **details: Any) -> InterpError:
    for key, value in details.items():
        setattr(err, key, value)
    return err


class Faults:
    """Error factory for one launch: knows the kernel name and the thread geometry."""

    def __init__(self, kernel_name: str, threads: ThreadSpace):
        self.kernel = kernel_name
        self.threads = threads

    def thread(self, i: int) -> ThreadRef:
        return self.threads.describe(i)

    def out_of_bounds(self, op: Op, tensor: str, index: int, size: int, thread: int,
                      width: int = 1) -> InterpError:
        t = self.thread(thread)
        span = f"elements {index}..{index + width - 1}" if width > 1 else f"index {index}"
        msg = (f"{op.opcode} of '{tensor}' at {span} is out of bounds (size {size}) in {t}")
        return _attach(OutOfBoundsError(msg, self.kernel, op.loc), tensor=tensor, index=index, size=size,
                       thread=t, opcode=op.opcode)

    def misaligned(self, op: Op, tensor: str, index: int, width: int, thread: int) -> InterpError:
        t = self.thread(thread)
        msg = (f"{op.opcode} of '{tensor}' at index {index} is not aligned to its width {width} "
               f"(the index must be a multiple of {width}) in {t}")
        return _attach(MisalignedAccessError(msg, self.kernel, op.loc), tensor=tensor, index=index, width=width,
                       thread=t, opcode=op.opcode)

    def partial_barrier(self, op: Op, arrived: int, missing: int, missing_returned: bool, arrived_count: int,
                        group_count: int) -> InterpError:
        a, m = self.thread(arrived), self.thread(missing)
        why = " (it returned early)" if missing_returned else ""
        msg = (f"barrier reached by {arrived_count} of the {group_count} threads of group "
               f"{_fmt(a.group_id)}: {a} arrived, {m} did not{why}")
        return _attach(BarrierDivergenceError(msg, self.kernel, op.loc), thread=a, missing_thread=m,
                       group=a.group_id)

    def race(self, op: Op, other_op: Op, tensor: str, index: int, group: str, actor: ThreadRef | str,
             other_actor: ThreadRef | str, kind: str, other_kind: str) -> InterpError:
        other_where = f" at {other_op.loc}" if other_op.loc else ""
        msg = (f"shared-memory race on '{tensor}'[{index}] in group {group}: {kind} by {actor} and "
               f"{other_kind} by {other_actor} ({other_op.opcode}{other_where}) with no barrier between them")
        return _attach(SharedMemoryRaceError(msg, self.kernel, op.loc), tensor=tensor, index=index, group=group,
                       thread=actor, other_thread=other_actor, other_loc=other_op.loc)

    def global_race(self, op: Op, other_op: Op, tensor: str, aliases: list[str], index: int,
                    actor: ThreadRef | str, other_actor: ThreadRef | str, kind: str, other_kind: str,
                    group: str | None) -> InterpError:
        """``group``: the group both threads are in (no barrier between them), or None for two groups."""
        other_where = f" at {other_op.loc}" if other_op.loc else ""
        same = f" (the same array as {', '.join(repr(a) for a in aliases)})" if aliases else ""
        order = (f"in group {group} with no barrier between them" if group is not None else
                 "in different groups, which a GPU runs in any order")
        msg = (f"global-memory race on '{tensor}'[{index}]{same}: {kind} by {actor} and {other_kind} by "
               f"{other_actor} ({other_op.opcode}{other_where}), {order}; the interpreter's lock step hides it, "
               f"a GPU does not: write the result to another tensor (or separate the accesses by a barrier "
               f"within a group)")
        return _attach(GlobalMemoryRaceError(msg, self.kernel, op.loc), tensor=tensor, index=index, group=group,
                       thread=actor, other_thread=other_actor, other_loc=other_op.loc)

    def inactive_lane(self, op: Op, thread: int, source_lane: int) -> InterpError:
        t = self.thread(thread)
        msg = f"{op.opcode} in {t} reads lane {source_lane}, which is not active"
        return _attach(InactiveLaneError(msg, self.kernel, op.loc), thread=t, source_lane=source_lane)

    def subgroup_divergence(self, op: Op, thread: int, reason: str) -> InterpError:
        t = self.thread(thread)
        msg = f"{op.opcode} needs its whole subgroup in step: {reason} (subgroup of {t})"
        return _attach(SubgroupDivergenceError(msg, self.kernel, op.loc), thread=t)

    def general(self, op: Op, message: str) -> InterpError:
        return InterpError(f"{op.opcode}: {message}", self.kernel, op.loc)


def _fmt(t: tuple[int, ...]) -> str:
    return str(t[0]) if len(t) == 1 else "(" + ", ".join(map(str, t)) + ")"
