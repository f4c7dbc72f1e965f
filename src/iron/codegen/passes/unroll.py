"""Loop unrolling of ``for`` loops: full for short constant loops, partial on request.

Inner loops are handled first, so an outer loop sees its body after its
inner loops have been unrolled.  The ``unroll`` hint of a loop decides:

* no hint: unroll fully when the bounds and step are constants, the trip
  count is at most ``PassContext.unroll_max`` and the unrolled code stays
  under :data:`FULL_UNROLL_OP_BUDGET` ops;
* ``unroll = 1``: never (like ``#pragma unroll 1``);
* ``unroll = N >= 2``: unroll fully when the trip count is a constant
  ``<= N``; otherwise unroll by ``N``: a main loop whose body holds ``N``
  copies of the original body, followed by a remainder loop for the last
  iterations (fully unrolled when the bounds are constants).  Run-time
  bounds need a constant step.  ``N`` is lowered so that the copies stay
  within :data:`HINTED_UNROLL_OP_BUDGET` ops (nested hints multiply: 1024
  inside 1024 would be a million copies); the frontend refuses ``N`` over
  1024 (``iron.lang.lower_stmt.MAX_UNROLL``).

Loops whose body may leave it early (``return`` anywhere, or a ``break`` /
``continue`` of this loop) are left alone: the copies would need to skip
each other.  Barriers are fine: every copy runs in the same threads.

Exactness with run-time bounds (step ``s > 0``; a negative step mirrors it):
the main loop runs ``j`` from ``lo`` by ``N*s`` while ``j < hi - (N-1)*s``,
i.e. while ``j + (N-1)*s < hi``: exactly when the original would run all of
``j, j+s, ..., j+(N-1)*s``.  ``hi - (N-1)*s`` is only used when it does not
wrap (``hi >= MIN + (N-1)*s``); otherwise the main loop runs zero times.
The first iteration the main loop did not run is kept in a ``var`` slot
(``lo``, then ``j + N*s`` after every main iteration) and the remainder loop
starts there.  Every induction value computed is one the original loop
computes too, so nothing wraps unless the original's induction variable
wraps.  Both new loops carry ``unroll = 1`` so they are not unrolled again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.analysis import const_value, constant_trip_count, has_escaping_control, int_range
from ...core.dtypes import DType
from ...core.ir import Block, Kernel, Op, Value, clone_block
from ._rewrite import context_or_default, make_const, make_op, own

if TYPE_CHECKING:
    from ..pipeline import PassContext

#: Largest number of ops a full unroll without an explicit hint may produce.
FULL_UNROLL_OP_BUDGET = 4096
#: Largest number of ops the copies of one loop's body may have under an explicit ``unroll`` hint.
HINTED_UNROLL_OP_BUDGET = 65536


def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    k.body = _Unroller(context_or_default(ctx).unroll_max).block(k.body)
    return k


def _op_count(b: Block) -> int:
    return sum(1 for _ in b.walk())


class _Unroller:
    def __init__(self, unroll_max: int):
        self.unroll_max = unroll_max

    def block(self, b: Block) -> Block:
        out: list[Op] = []
        for op in b.ops:
            op.regions = [self.block(r) for r in op.regions]
            out.extend(self.unroll(op) if op.opcode == "for" else [op])
        return Block(out, b.args)

    def unroll(self, op: Op) -> list[Op]:
        hint = op.attrs.get("unroll")
        body = op.regions[0]
        if hint == 1 or has_escaping_control(body):
            return [op]
        if hint is not None:
            hint = min(hint, max(1, HINTED_UNROLL_OP_BUDGET // max(1, _op_count(body))))
            if hint == 1:
                return [op]
        lo, hi, step = (const_value(v) for v in op.operands)
        dt: DType = op.operands[0].type.dtype
        if isinstance(step, int) and isinstance(lo, int) and isinstance(hi, int):
            trips = constant_trip_count(lo, hi, step, dt)
            if trips is None:
                return [op]
            limit = hint if hint is not None else self.unroll_max
            if trips <= limit and (hint is not None or trips * _op_count(body) <= FULL_UNROLL_OP_BUDGET):
                return self._copies(op, [lo + t * step for t in range(trips)])
            if hint is not None:
                return self._partial_constant(op, lo, step, trips, hint, dt)
            return [op]
        if hint is not None and isinstance(step, int) and step != 0:
            return self._partial_runtime(op, step, hint, dt)
        return [op]

    # ------------------------------------------------------------ building blocks
    def _body_copy(self, op: Op, iv: Value) -> list[Op]:
        """A fresh copy of the loop body with the induction variable replaced by ``iv``."""
        body = op.regions[0]
        mapping = {body.args[0]: iv}
        return clone_block(Block(body.ops), mapping).ops

    def _copies(self, op: Op, values: list[int]) -> list[Op]:
        """The body once per constant induction value (a full unroll)."""
        t = op.operands[0].type
        out: list[Op] = []
        for v in values:
            c = make_const(v, t, op.loc)
            out.append(c)
            out.extend(self._body_copy(op, c.result))
        return out

    def _main_body(self, op: Op, j: Value, step: int, factor: int) -> list[Op]:
        """``factor`` copies of the body for induction values ``j, j+step, ...``."""
        t = op.operands[0].type
        out = self._body_copy(op, j)
        for t_index in range(1, factor):
            off = make_const(t_index * step, t, op.loc)
            iv = make_op("add", [j, off.result], loc=op.loc)
            out += [off, iv, *self._body_copy(op, iv.result)]
        return out

    # ------------------------------------------------------------ partial unrolling
    def _partial_constant(self, op: Op, lo: int, step: int, trips: int, factor: int, dt: DType) -> list[Op]:
        lo_b, hi_b = int_range(dt)
        if not lo_b <= factor * step <= hi_b:
            return [op]
        t = op.operands[0].type
        main_trips = trips // factor
        end = lo + main_trips * factor * step  # an induction value of the original loop (or its end)
        consts = [make_const(v, t, op.loc) for v in (lo, end, factor * step)]
        j = Value(t, op.regions[0].args[0].hint)
        main = Op("for", [c.result for c in consts], None, {"unroll": 1},
                  [Block(self._main_body(op, j, step, factor), [j])], op.loc)
        rest = self._copies(op, [end + k * step for k in range(trips - main_trips * factor)])
        return [*consts, main, *rest]

    def _partial_runtime(self, op: Op, step: int, factor: int, dt: DType) -> list[Op]:
        lo_b, hi_b = int_range(dt)
        span, stride = (factor - 1) * step, factor * step
        if not (lo_b <= span <= hi_b and lo_b <= stride <= hi_b):
            return [op]
        lo, hi, step_v = op.operands
        t = lo.type
        loc = op.loc
        out: list[Op] = []

        def emit(new: Op) -> Value:
            out.append(new)
            return new.result

        # hi_main = hi - span when that does not wrap, else a bound the main loop never passes.
        if step > 0:
            safe = emit(make_op("ge", [hi, emit(make_const(lo_b + span, t, loc))], loc=loc))
            never = emit(make_const(lo_b, t, loc))
        else:
            safe = emit(make_op("le", [hi, emit(make_const(hi_b + span, t, loc))], loc=loc))
            never = emit(make_const(hi_b, t, loc))
        shifted = emit(make_op("sub", [hi, emit(make_const(span, t, loc))], loc=loc))
        hi_main = emit(make_op("select", [safe, shifted, never], loc=loc))
        stride_v = emit(make_const(stride, t, loc))
        resume = emit(make_op("var", [], hint="resume", loc=loc, type=t))
        out.append(make_op("var_store", [resume, lo], loc=loc))

        j = Value(t, op.regions[0].args[0].hint)
        main_ops = self._main_body(op, j, step, factor)
        after = make_op("add", [j, stride_v], loc=loc)
        main_ops += [after, make_op("var_store", [resume, after.result], loc=loc)]
        out.append(Op("for", [lo, hi_main, stride_v], None, {"unroll": 1}, [Block(main_ops, [j])], loc))

        start = emit(make_op("var_load", [resume], loc=loc))
        # The original loop, from where the main loop stopped, is the remainder.
        op.operands = [start, hi, step_v]
        op.attrs = {**op.attrs, "unroll": 1}
        out.append(op)
        return out
