"""Constant folding: evaluate pure ops on constants, settle constant control flow.

Values are computed by :func:`iron.core.eval.eval_pure`, the function the
interpreter runs, so a folded kernel computes exactly what the unfolded one
would on the interpreter, rounding, wrapping and NaN rules included.

Besides pure ops whose operands are all constants (arithmetic, compares,
casts, ``select``, ``fma``, vector construction and extraction), the pass

* replaces an ``if`` whose condition is a constant by the ops of the region
  that runs; when that region ends in a terminator (``break``, ``continue``,
  ``return``) nothing after the ``if`` in the enclosing block can run, so
  those ops are dropped too;
* removes a ``for`` with constant bounds that runs zero times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.analysis import const_value, constant_trip_count
from ...core.eval import PURE_ELEMENTWISE_OPS, const_array, eval_pure
from ...core.ir import Block, Kernel, Op
from ...core.ops import OPS
from ...core.types import IRType, ScalarType, VectorType
from ._rewrite import become_const, own

if TYPE_CHECKING:
    from ..pipeline import PassContext

#: Ops folded when every operand is a constant (``const`` itself needs nothing).
FOLDABLE = frozenset(op for op in PURE_ELEMENTWISE_OPS if op != "const" and OPS[op].pure)


def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    k.body = _fold_block(k.body)
    return k


def _fold_block(b: Block) -> Block:
    out: list[Op] = []
    for op in b.ops:
        if op.opcode == "if":
            cond = const_value(op.operands[0])
            if cond is not None:
                taken = _fold_block(op.regions[0] if cond else op.regions[1])
                out.extend(taken.ops)
                if taken.terminator is not None:
                    break  # the rest of this block is unreachable
                continue
        if op.opcode == "for" and _runs_zero_times(op):
            continue
        op.regions = [_fold_block(r) for r in op.regions]
        if op.opcode in FOLDABLE and op.result is not None and _all_const(op):
            become_const(op, fold_value(op))
        out.append(op)
    return Block(out, b.args)


def _all_const(op: Op) -> bool:
    return all(v.owner is not None and v.owner.opcode == "const" for v in op.operands)


def _runs_zero_times(op: Op) -> bool:
    lo, hi, step = (const_value(v) for v in op.operands)
    if not (isinstance(lo, int) and isinstance(hi, int) and isinstance(step, int)):
        return False
    return constant_trip_count(lo, hi, step, op.operands[0].type.dtype) == 0


def fold_value(op: Op) -> Any:
    """The constant ``op`` computes from its constant operands, as the builder stores constants."""
    args = [const_array(v.owner.attrs["value"], v.type, 1) for v in op.operands]
    result = eval_pure(op.opcode, op.attrs, args, op.result.type)
    return python_constant(result[0], op.result.type)


def python_constant(row: Any, t: IRType) -> Any:
    """One thread's value (a numpy scalar or row) as a Python scalar or tuple of type ``t``."""
    dt = t.dtype  # type: ignore[attr-defined]

    def one(x: Any) -> Any:
        if dt.is_bool:
            return bool(x)
        if dt.is_int:
            return int(x)
        return float(x)

    if isinstance(t, VectorType):
        return tuple(one(x) for x in row)
    assert isinstance(t, ScalarType)
    return one(row)
