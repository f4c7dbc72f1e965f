"""Small helpers the passes share: value substitution and op construction.

Every pass works on a private copy of its input (``clone_kernel``; ``own``: the
input itself when the pipeline runs the passes in place on a copy of its own)
and rewrites it block by block, in program order.  Because a value is
always defined before its uses (in the same block or an enclosing one), one
forward walk that renames operands through a :class:`Substitution` sees every
replacement before any use of the replaced value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.builder import normalize_const
from ...core.ir import Kernel, Op, Value, clone_kernel
from ...core.ops import infer_type
from ...core.types import IRType

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
