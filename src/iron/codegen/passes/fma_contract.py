"""Floating-point contraction: ``a*b + c`` becomes one ``fma`` (when the target allows it).

A fused multiply-add rounds once where the separate ops round twice, so the
result can differ in the last bit: this is a licence the target's compiler
takes by default on CUDA, HIP and Metal (see :mod:`iron.codegen.targets`),
and ``PassContext.contract`` says whether we take it.  When it is off the
pass returns the kernel unchanged.

Patterns, for float scalars and vectors, where the ``mul`` is in the same
block as the ``add``/``sub`` and has no other use (so no multiply is
duplicated and none moves into a loop):

* ``mul(a, b) + c`` and ``c + mul(a, b)``  ->  ``fma(a, b, c)``
  (when both operands are such multiplies, the first is fused);
* ``mul(a, b) - c``  ->  ``fma(a, b, -c)`` (``-c`` is exact);
* ``c - mul(a, b)``  ->  ``fma(-a, b, c)`` (``(-a)*b`` is exactly ``-(a*b)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.analysis import use_counts, value_dtype
from ...core.ir import Block, Kernel, Op, Value
from ._rewrite import context_or_default, make_op, own

if TYPE_CHECKING:
    from ..pipeline import PassContext


def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    if not context_or_default(ctx).contract:
        return k
    _contract_block(k.body, use_counts(k))
    return k


def _contract_block(b: Block, counts: dict[Value, int]) -> None:
    local = {op.result for op in b.ops if op.result is not None}
    fused: set[Op] = set()
    out: list[Op] = []
    for op in b.ops:
        for r in op.regions:
            _contract_block(r, counts)
        replacement = _contract(op, counts, local, fused)
        out.extend(replacement if replacement is not None else [op])
    b.ops = [op for op in out if op not in fused]


def _single_use_mul(v: Value, counts: dict[Value, int], local: set[Value], fused: set[Op]) -> Op | None:
    op = v.owner
    if op is None or op.opcode != "mul" or v not in local or op in fused or counts.get(v, 0) != 1:
        return None
    return op


def _contract(op: Op, counts: dict[Value, int], local: set[Value], fused: set[Op]) -> list[Op] | None:
    """The ops replacing ``op`` (the new ``fma`` last, taking over ``op``'s result), or None."""
    if op.opcode not in ("add", "sub"):
        return None
    dt = value_dtype(op.result)
    if dt is None or not dt.is_float:
        return None
    x, y = op.operands
    new: list[Op] = []
    mx = _single_use_mul(x, counts, local, fused)
    my = None if mx is not None else _single_use_mul(y, counts, local, fused)
    if mx is not None:
        a, b = mx.operands
        c = y
        if op.opcode == "sub":
            neg = make_op("neg", [y], loc=op.loc)
            new.append(neg)
            c = neg.result
        fused.add(mx)
    elif my is not None:
        a, b = my.operands
        c = x
        if op.opcode == "sub":
            neg = make_op("neg", [a], loc=op.loc)
            new.append(neg)
            a = neg.result
        fused.add(my)
    else:
        return None
    # Reuse op itself (and so its result value) as the fma: every use stays valid.
    op.opcode = "fma"
    op.operands = [a, b, c]
    op.attrs = {}
    new.append(op)
    return new
