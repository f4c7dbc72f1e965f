"""The one rewriting toolkit of the passes and the legalisation steps: value substitution, op construction, and
the rebuilding walk (:func:`rebuild`) that legalisation rules plug into.

Every pass works on a private copy of its input (``clone_kernel``; ``own``: the
input itself when the pipeline runs the passes in place on a copy of its own)
and rewrites it block by block, in program order.  Because a value is
always defined before its uses (in the same block or an enclosing one), one
forward walk that renames operands through a :class:`Substitution` sees every
replacement before any use of the replaced value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core import dtypes as D
from ...core.builder import normalize_const
from ...core.ir import Block, Kernel, Op, Param, Value, clone_kernel
from ...core.ops import infer_type
from ...core.types import IRType, ScalarType

if TYPE_CHECKING:
    from ..pipeline import PassContext


def own(kernel: "Kernel", ctx: "PassContext | None") -> "Kernel":
    """The kernel a pass rewrites: its input when the context allows in-place passes, else a private copy."""
    return kernel if ctx is not None and ctx.in_place else clone_kernel(kernel)


class Substitution:
    """``old value -> new value`` replacements, followed transitively."""

    def __init__(self) -> None:
        self._map: dict[Value, Value] = {}

    def __bool__(self) -> bool:
        return bool(self._map)

    def replace(self, old: Value, new: Value) -> None:
        new = self[new]
        if new is not old:
            self._map[old] = new

    def __getitem__(self, v: Value) -> Value:
        seen = v
        while seen in self._map:
            seen = self._map[seen]
        if seen is not v:
            self._map[v] = seen  # shorten the chain for the next lookup
        return seen

    def rename_operands(self, op: Op) -> None:
        """Point ``op``'s operands at their replacements (not its regions)."""
        if self._map:
            op.operands = [self[v] for v in op.operands]


def make_op(opcode: str, operands: list[Value], hint: str | None = None, loc: Any = None, **attrs: Any) -> Op:
    """A new op, typed through the opcode table (OpTypeError on a misuse)."""
    rtype = infer_type(opcode, [v.type for v in operands], attrs)
    return Op(opcode, operands, rtype, attrs, None, loc, hint)


def make_const(value: Any, t: IRType, loc: Any = None) -> Op:
    """A ``const`` op of type ``t`` (a vector type splats a scalar ``value``)."""
    return make_op("const", [], None, loc, value=normalize_const(value, t), type=t)


def become_const(op: Op, value: Any) -> None:
    """Turn ``op`` into a ``const`` of its own result type, keeping its result value."""
    t = op.result.type
    op.opcode = "const"
    op.operands = []
    op.regions = []
    op.attrs = {"value": normalize_const(value, t), "type": t}


def context_or_default(ctx: "PassContext | None") -> "PassContext":
    """``ctx``, or the default context (the interpreter target) when a pass is run on its own."""
    if ctx is not None:
        return ctx
    from ..pipeline import PassContext  # imported here: the pipeline imports the passes

    return PassContext()


# ---------------------------------------------------------------- the rebuilding walk (legalisation)
#: A rule's answer for "copy this op unchanged (with renamed operands)".
KEEP = object()

Rule = Callable[[Op, list[Value], "Emitter"], Any]
ParamRule = Callable[[Param, "Emitter"], "tuple[Param, Value] | None"]


class Emitter:
    """Appends new, typed ops at the position of the op being rewritten."""

    def __init__(self, ops: list[Op], loc: Any) -> None:
        self.ops = ops
        self.loc = loc

    def op(self, opcode: str, *operands: Value, hint: str | None = None, **attrs: Any) -> Value | None:
        new = make_op(opcode, list(operands), hint, self.loc, **attrs)
        self.ops.append(new)
        return new.result

    def const(self, value: Any, dt: D.DType) -> Value:
        new = make_const(value, ScalarType(dt), self.loc)
        self.ops.append(new)
        return new.result

    def cast(self, v: Value, dt: D.DType, hint: str | None = None) -> Value:
        return self.op("cast", v, hint=hint, to=dt)


def rebuild(kernel: Kernel, rule: Rule, param_rule: ParamRule | None = None) -> Kernel:
    """A copy of the call-free ``kernel`` with every non-region op passed through ``rule``.

    ``rule(op, operands, emitter)`` sees the op with its operands already
    renamed; it returns :data:`KEEP` to copy the op, or the value that replaces
    the op's result (None for ops without one) after emitting new ops.
    ``param_rule(param, emitter)`` may replace a parameter: it returns the new
    parameter and the value standing for the old one (computed by ops it
    emits at the top of the body), or None to keep it.
    """
    if kernel.functions:
        raise ValueError(f"legalisation needs call-free IR; kernel {kernel.name} still has helper functions")
    mapping: dict[Value, Value] = {}
    params: list[Param] = []
    prologue: list[Op] = []
    for p in kernel.params:
        replaced = param_rule(p, Emitter(prologue, kernel.loc)) if param_rule else None
        if replaced is None:
            nv = Value(p.value.type, p.value.hint)
            mapping[p.value] = nv
            params.append(Param(p.name, nv, p.access))
        else:
            new_param, stands_for = replaced
            mapping[p.value] = stands_for
            params.append(new_param)
    body = _rebuild_block(kernel.body, mapping, rule)
    body.ops[0:0] = prologue
    return Kernel(kernel.name, params, body, dict(kernel.meta), kernel.loc, {})


def _rebuild_block(block: Block, mapping: dict[Value, Value], rule: Rule) -> Block:
    args = []
    for a in block.args:
        na = Value(a.type, a.hint)
        mapping[a] = na
        args.append(na)
    ops: list[Op] = []
    for op in block.ops:
        operands = [mapping.get(v, v) for v in op.operands]
        if op.regions:
            regions = [_rebuild_block(r, mapping, rule) for r in op.regions]
            ops.append(Op(op.opcode, operands, None, op.attrs, regions, op.loc))
            continue
        result = rule(op, operands, Emitter(ops, op.loc))
        if result is KEEP:
            rtype = infer_type(op.opcode, [v.type for v in operands], op.attrs) if op.result else None
            new = Op(op.opcode, operands, rtype, op.attrs, None, op.loc, op.result.hint if op.result else None)
            ops.append(new)
            result = new.result
        if op.result is not None:
            mapping[op.result] = result
    return Block(ops, args)
