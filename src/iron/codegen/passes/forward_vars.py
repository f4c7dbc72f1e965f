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
    forwarder = _Forwarder()
    forwarder.note_stores(k.body)
    forwarder.block(k.body, {})
    return k


class _Forwarder:
    def __init__(self) -> None:
        self.subst = Substitution()
        #: id(op with regions) -> the slots stored anywhere inside it, found in one walk before any rewriting
        #: (the pass drops a store only in a block it has finished, never inside an op it has not reached).
        self._stores: dict[int, set[Value]] = {}

    def note_stores(self, b: Block) -> set[Value]:
        """The slots stored in ``b`` and the ops nested in it; records each structured op's own set."""
        found: set[Value] = set()
        for op in b.ops:
            if op.regions:
                inner: set[Value] = set()
                for r in op.regions:
                    inner |= self.note_stores(r)
                self._stores[id(op)] = inner
                found |= inner
            elif op.opcode == "var_store":
                found.add(op.operands[0])
        return found

    def block(self, b: Block, known: dict[Value, object]) -> set[Value]:
        """Forward in ``b``; the slots still loaded in it afterwards, nested ops included."""
        known = dict(known)
        pending: dict[Value, Op] = {}  # slot -> its last store, not read since
        dead: set[Op] = set()
        loaded: set[Value] = set()
        for op in b.ops:
            self.subst.rename_operands(op)
            if op.regions:
                loaded |= self._structured(op, known, pending)
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
                    loaded.add(slot)
        b.ops = [op for op in b.ops if op not in dead]
        return loaded

    def _structured(self, op: Op, known: dict[Value, object], pending: dict[Value, Op]) -> set[Value]:
        stored = self._stores[id(op)]
        entry = known if op.opcode == "if" else {s: v for s, v in known.items() if s not in stored}
        loaded: set[Value] = set()
        for r in op.regions:
            loaded |= self.block(r, entry)
        for s in stored:
            known.pop(s, None)
        if may_exit_early(op):
            pending.clear()
        else:
            for s in loaded:
                pending.pop(s, None)
        return loaded

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
