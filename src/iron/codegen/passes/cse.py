"""Common-subexpression elimination of pure ops over dominating scopes.

Two pure ops with the same opcode, operands and attributes compute the same
value, so the later one can reuse the earlier one's result when the earlier
one dominates it.  In structured IR an op dominates the rest of its own
block and everything nested in that rest; an op inside a region dominates
nothing after the region.  The pass keeps one table per open block and
looks a key up from the innermost table outwards.

Only ops the opcode table marks pure take part.  Loads, ``var_load``,
subgroup ops, atomics and every other op with an effect or a
thread-dependent outcome are never merged.  Operands of commutative ops are
put in a fixed order first (``a + b`` meets ``b + a``), except float
``min``/``max``, whose result depends on the operand order for signed zeros.
Attribute values are compared bit for bit (``0.0`` and ``-0.0`` are
different constants).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Hashable

from ...core.analysis import constant_key, is_commutative
from ...core.ir import Block, Kernel, Op, Value
from ...core.ops import OPS
from ._rewrite import Substitution, own

if TYPE_CHECKING:
    from ..pipeline import PassContext


def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    cse = _CSE()
    for p in k.params:
        cse.number(p.value)
    cse.block(k.body, [])
    return k


class _CSE:
    def __init__(self) -> None:
        self.subst = Substitution()
        self.order: dict[Value, int] = {}  # a stable order for commutative operands

    def block(self, b: Block, scopes: list[dict[Hashable, Value]]) -> None:
        table: dict[Hashable, Value] = {}
        scopes.append(table)
        for a in b.args:
            self.number(a)
        kept: list[Op] = []
        for op in b.ops:
            self.subst.rename_operands(op)
            for r in op.regions:
                self.block(r, scopes)
            key = self._key(op)
            if key is not None:
                found = _lookup(scopes, key)
                if found is not None:
                    self.subst.replace(op.result, found)
                    continue
                table[key] = op.result
            if op.result is not None:
                self.number(op.result)
            kept.append(op)
        b.ops = kept
        scopes.pop()

    def number(self, v: Value) -> None:
        self.order.setdefault(v, len(self.order))

    def _key(self, op: Op) -> Hashable | None:
        info = OPS[op.opcode]
        if not info.pure or op.regions or op.result is None:
            return None
        operands: tuple[Value, ...] = tuple(op.operands)
        if is_commutative(op):
            operands = tuple(sorted(operands, key=lambda v: self.order[v]))
        return (op.opcode, operands, constant_key(op.attrs), op.result.type)


def _lookup(scopes: list[dict[Hashable, Value]], key: Hashable) -> Any:
    for table in reversed(scopes):
        found = table.get(key)
        if found is not None:
            return found
    return None
