"""Inline every helper call, then fold away the tuples helpers return.

Backends print call-free kernels, so this pass runs at every optimisation
level.  A call becomes a copy of the callee's body with the parameters
renamed to the arguments; the callee's final ``return`` is dropped and the
call's result renamed to the returned value.  Helpers have exactly one exit
(the verifier checks it), so the body needs no other rewriting: a ``break``
or ``continue`` inside it belongs to a loop inside it.  Calls inside the
copied body are inlined in turn.  Afterwards ``tuple_get(tuple_make(...))``
is the element itself and every tuple is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.errors import IronCompileError, IRVerificationError
from ...core.ir import Block, Function, Kernel, Op, Value, clone_block
from ...core.types import TupleType
from ._rewrite import Substitution, own

if TYPE_CHECKING:
    from ..pipeline import PassContext


class RecursiveHelperError(IronCompileError):
    kind = "recursive helper function"
    default_hint = "helpers are inlined into the kernel, so they cannot call themselves; write the recursion as a loop"


def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    inliner = _Inliner(k.functions, k.name)
    k.body = inliner.block(k.body, ())
    k.functions = {}
    _drop_tuple_makes(k.body)
    return k


class _Inliner:
    def __init__(self, functions: dict[str, Function], kernel_name: str):
        self.functions = functions
        self.kernel_name = kernel_name
        self.subst = Substitution()

    def block(self, b: Block, active: tuple[str, ...]) -> Block:
        """``b`` with its calls expanded; ``active`` are the helpers being expanded (to catch recursion)."""
        out: list[Op] = []
        for op in b.ops:
            self.subst.rename_operands(op)
            if op.opcode == "call":
                out.extend(self.expand(op, active))
                continue
            if op.opcode == "tuple_get":
                src = op.operands[0].owner
                if src is not None and src.opcode == "tuple_make":
                    self.subst.replace(op.result, src.operands[op.attrs["index"]])
                    continue
            op.regions = [self.block(r, active) for r in op.regions]
            out.append(op)
        return Block(out, b.args)

    def expand(self, call: Op, active: tuple[str, ...]) -> list[Op]:
        name = call.attrs["callee"]
        if name in active:
            chain = " -> ".join((*active, name))
            raise RecursiveHelperError(f"helper '{name}' calls itself ({chain})", call.loc, kernel=self.kernel_name)
        f = self.functions.get(name)
        if f is None:
            raise IRVerificationError(f"IR invalid before inline (kernel '{self.kernel_name}'): "
                                      f"call of unknown function '{name}'")
        mapping: dict[Value, Value] = {p.value: arg for p, arg in zip(f.params, call.operands)}
        body = self.block(clone_block(f.body, mapping), (*active, name))
        ops = body.ops
        ret = ops.pop() if ops and ops[-1].opcode == "return" else None
        if call.result is not None:
            if ret is None or not ret.operands:
                raise IRVerificationError(f"IR invalid before inline (kernel '{self.kernel_name}'): "
                                          f"helper '{name}' returns no value but its call expects one")
            self.subst.replace(call.result, ret.operands[0])
        return ops


def _drop_tuple_makes(body: Block) -> None:
    """Remove the unused ``tuple_make`` ops; any tuple left after that is a compiler bug."""
    def prune(b: Block, used: set[Value]) -> int:
        before = len(b.ops)
        b.ops = [op for op in b.ops if not (op.opcode == "tuple_make" and op.result not in used)]
        return before - len(b.ops) + sum(prune(r, used) for op in b.ops for r in op.regions)

    # A tuple nested in another tuple is unused only once the outer one is gone.
    while prune(body, {v for op in body.walk() for v in op.operands}):
        pass
    for op in body.walk():
        values = [*op.operands, *([op.result] if op.result is not None else [])]
        if any(isinstance(v.type, TupleType) for v in values):
            raise IRVerificationError(f"IR invalid after inline: a tuple survives in op '{op.opcode}' "
                                      "(only tuple_get of a helper's tuple_make can be folded)")
