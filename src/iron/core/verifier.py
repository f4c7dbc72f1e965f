"""The IR verifier: run after the frontend, and after the passes and legalisation (once at their end, or
after every step with ``IRON_VERIFY=each``).

A failure is a compiler bug, never a user mistake, so it raises
:class:`IRVerificationError` naming the op, its source line and the stage.
"""

from __future__ import annotations

from .errors import IRVerificationError
from .ir import Block, Function, Kernel, Op, Value
from .ops import OPS, OpTypeError, infer_type
from .types import IRType, VarType


def verify(k: Kernel, stage: str = "frontend") -> None:
    """Check every invariant of ``k``; raise IRVerificationError on the first broken one."""
    _Verifier(k, stage).run()


class _Verifier:
    def __init__(self, k: Kernel, stage: str):
        self.k = k
        self.stage = stage
        self.defined: set[Value] = set()

    def fail(self, msg: str, op: Op | None = None) -> None:
        where = f" at {op.loc}" if op is not None and op.loc else ""
        what = f" in op '{op.opcode}'" if op is not None else ""
        raise IRVerificationError(f"IR invalid after {self.stage} (kernel '{self.k.name}'){what}{where}: {msg}")

    def run(self) -> None:
        names = set()
        for p in self.k.params:
            if p.name in names:
                self.fail(f"duplicate parameter {p.name}")
            names.add(p.name)
            self._define(p.value, None)
        self.func: Function | None = None
        self._block(self.k.body, set(p.value for p in self.k.params), loop_depth=0)
        for f in self.k.functions.values():
            self.func = f
            for p in f.params:
                self._define(p.value, None)
            self._block(f.body, set(p.value for p in f.params), loop_depth=0)
            last = f.body.ops[-1] if f.body.ops else None
            if last is None or last.opcode != "return":
                self.fail(f"function '{f.name}' must end with return")
            for op in f.body.walk():
                if op.opcode == "return" and op is not last:
                    self.fail(f"function '{f.name}' returns before its end (helpers have one exit)", op)
        self.func = None

    def _define(self, v: Value, op: Op | None) -> None:
        if v in self.defined:
            self.fail(f"value {v} defined twice", op)
        self.defined.add(v)

    def _block(self, b: Block, visible: set[Value], loop_depth: int) -> None:
        """Check ``b`` with ``visible`` the values in scope; the values ``b`` defines are in scope for the
        rest of ``b`` (and its regions) and leave ``visible`` as it was when ``b`` ends (one set for the
        whole walk: copying it per block was quadratic in a large unrolled kernel)."""
        added: list[Value] = []
        for a in b.args:
            self._define(a, None)
            visible.add(a)
            added.append(a)
        for i, op in enumerate(b.ops):
            info = OPS.get(op.opcode)
            if info is None:
                self.fail("unknown opcode", op)
            for v in op.operands:
                if v not in visible:
                    self.fail(f"operand {v} is not defined before this use (or not in scope)", op)
            if info.terminator and i != len(b.ops) - 1:
                self.fail("a terminator must be the last op of its block", op)
            if op.opcode in ("break", "continue") and loop_depth == 0:
                self.fail(f"'{op.opcode}' outside a loop", op)
            if len(op.regions) != info.num_regions:
                self.fail(f"expected {info.num_regions} regions, got {len(op.regions)}", op)
            try:
                rtype = infer_type(op.opcode, [v.type for v in op.operands], op.attrs)
            except OpTypeError as e:
                self.fail(str(e), op)
            got: IRType | None = op.result.type if op.result is not None else None
            if rtype != got:
                self.fail(f"result type {got} but the operands give {rtype}", op)
            if op.opcode == "for":
                args = op.regions[0].args
                if len(args) != 1 or args[0].type != op.operands[0].type:
                    self.fail("a for region takes one induction variable of the bounds' type", op)
            elif op.regions and any(r.args for r in op.regions):
                self.fail("only 'for' regions take arguments", op)
            if op.opcode == "return":
                want = self.func.result_type if self.func is not None else None
                have = op.operands[0].type if op.operands else None
                if want != have:
                    self.fail(f"return of {have} where {want} is expected", op)
            if op.opcode == "call":
                callee = self.k.functions.get(op.attrs["callee"])
                if callee is None:
                    self.fail(f"call of unknown function {op.attrs['callee']}", op)
                elif [p.type for p in callee.params] != [v.type for v in op.operands]:
                    self.fail("call arguments do not match the function's parameters", op)
                elif callee.result_type != got:
                    self.fail("call result type differs from the function's", op)
            if op.opcode in ("var_load", "var_store") and not isinstance(op.operands[0].type, VarType):
                self.fail("variable access to a non-variable", op)
            inner_depth = loop_depth + (1 if op.opcode in ("for", "loop") else 0)
            for r in op.regions:
                self._block(r, visible, inner_depth)
            if op.result is not None:
                if op.result.owner is not op:
                    self.fail("result value does not point back to its op", op)
                self._define(op.result, op)
                visible.add(op.result)
                added.append(op.result)
        visible.difference_update(added)
