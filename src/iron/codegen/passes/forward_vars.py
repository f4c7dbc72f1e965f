"""Store-to-load forwarding and overwritten-store removal on local ``var`` slots.

The frontend keeps every mutable Python variable in a slot, so unrolled
loops are full of ``var_store %acc, %v`` followed by ``var_load %acc``.
Replacing such a load by ``%v`` exposes the value to constant folding, CSE
and FMA contraction, and lets DCE drop slots that are no longer loaded.

What the pass knows about a slot at a point of a block:

* right after ``%x = var T``: zero (a slot starts as zero each time its
  ``var`` runs);
* after ``var_store %x, %v``: ``%v``;
* after ``%y = var_load %x`` with nothing known: ``%y`` (a second load
  gives the same value).

Facts flow into an ``if`` region unchanged (it runs right after the point
before it) and into a loop body only for slots the loop never stores (a
later iteration may see the body's own stores).  After any op with regions,
the slots stored anywhere inside it are forgotten.  Slots are private to a
thread and only ``var_load``/``var_store`` touch them, so nothing else can
change them.

A store is dropped when a later store to the same slot in the same block
overwrites it before anything can read it: no ``var_load`` of the slot that
was not forwarded, no op with regions that loads it, and no op that may
leave the block early in between (a thread that breaks out would read the
first store after the loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.analysis import may_exit_early
from ...core.ir import Block, Kernel, Op, Value
from ...core.types import is_value_type
from ._rewrite import Substitution, become_const, own

if TYPE_CHECKING:
    from ..pipeline import PassContext

#: Marks a slot known to hold zero (no SSA value holds that zero yet).
_ZERO = object()


def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    _Forwarder().block(k.body, {})
    return k


def _slots_used(op: Op, opcode: str) -> set[Value]:
    """The slots that ``opcode`` ops nested in ``op``'s regions name."""
    return {o.operands[0] for r in op.regions for o in r.walk() if o.opcode == opcode}


class _Forwarder:
    def __init__(self) -> None:
        self.subst = Substitution()

    def block(self, b: Block, known: dict[Value, object]) -> None:
        known = dict(known)
        pending: dict[Value, Op] = {}  # slot -> its last store, not read since
        dead: set[Op] = set()
        for op in b.ops:
            self.subst.rename_operands(op)
            if op.regions:
                self._structured(op, known, pending)
            elif op.opcode == "var":
                if is_value_type(op.attrs["type"]):
                    known[op.result] = _ZERO
            elif op.opcode == "var_store":
                slot = op.operands[0]
                if slot in pending:
                    dead.add(pending[slot])
                pending[slot] = op
                known[slot] = op.operands[1]
            elif op.opcode == "var_load":
                slot = op.operands[0]
                if self._forward(op, known):
                    dead.add(op)
                elif op.opcode == "var_load":  # still a load (not folded to zero): it reads the slot
                    pending.pop(slot, None)
        b.ops = [op for op in b.ops if op not in dead]

    def _structured(self, op: Op, known: dict[Value, object], pending: dict[Value, Op]) -> None:
        stored = _slots_used(op, "var_store")
        entry = known if op.opcode == "if" else {s: v for s, v in known.items() if s not in stored}
        for r in op.regions:
            self.block(r, entry)
        for s in stored:
            known.pop(s, None)
        if may_exit_early(op):
            pending.clear()
        else:
            for s in _slots_used(op, "var_load"):
                pending.pop(s, None)

    def _forward(self, load: Op, known: dict[Value, object]) -> bool:
        """Use what ``load`` reads if known; True when the load is replaced and can go."""
        slot = load.operands[0]
        fact = known.get(slot)
        if fact is None:
            known[slot] = load.result
            return False
        if fact is _ZERO:
            become_const(load, 0)  # the load itself becomes the zero, and no longer reads
            known[slot] = load.result
            return False
        assert isinstance(fact, Value)
        self.subst.replace(load.result, fact)
        return True
