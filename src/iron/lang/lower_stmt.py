"""Lowering of statements: assignments, control flow, loops, returns, asserts.

Control flow whose condition folds is resolved here (only the taken branch
is lowered; ``static_range`` bodies are unrolled).  Everything else becomes
the IR's structured ``if``/``for``/``loop``; see :mod:`iron.lang.env` for
how variables cross it.  Any unexpected Python exception while lowering a
statement becomes an :class:`IronCompileError` located at that statement.
"""

from __future__ import annotations

import ast
import builtins as pyb
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from ..core.errors import ArityError, IronCompileError, StaticAssertionError, UnsupportedSyntaxError
from ..core.types import ScalarType
from .builtins import Builtin
from .env import Bound, Region, Slot
from .handlers.memory import load_element, store_element
from .lower_call import CallLowering
from .lower_expr import BINOPS
from .promote import literal_dtype
from .values import HOST_ARRAY_HINT, RV, FValue, Py, RegArray, TensorRef, TupleVal, describe, is_host_array

#: The most iterations a static_range loop may unroll to.
MAX_STATIC_UNROLL = 4096
#: The largest ``range(..., unroll=N)`` (the copies of the body one loop may become; past it compile time and
#: memory grow with N for no speed: unroll=16000 took minutes).
MAX_UNROLL = 1024

_UNSUPPORTED_STMT_HINTS: dict[type, str] = {
    ast.FunctionDef: "define helpers at module level with @iron.func",
    ast.AsyncFunctionDef: "define helpers at module level with @iron.func",
    ast.ClassDef: "define classes outside the kernel",
    ast.Import: "import modules at the top of the file",
    ast.ImportFrom: "import modules at the top of the file",
    ast.Global: "kernels cannot assign globals; store to a tensor",
    ast.Nonlocal: "kernels cannot assign outer variables; store to a tensor",
    ast.Delete: "variables end with the kernel; there is nothing to delete",
    ast.With: "kernels have no context managers",
    ast.AsyncWith: "kernels have no context managers",
    ast.Try: "kernels cannot catch exceptions",
    ast.Raise: "use assert on a compile-time condition",
    ast.AsyncFor: "use for ... in range(...)",
}


class _StaticJump(Exception):
    """break/continue of a static_range loop (unwinds to the unroller)."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


@dataclass
class _Loop:
    """A loop being lowered: ``static`` ones are unrolled by the frontend."""

    static: bool
    region: Region


class StmtLowering(CallLowering):
    """Statement lowering (mixed into the function lowerer)."""

    loops: list[_Loop]

    def lower_body(self, stmts: list[ast.stmt]) -> None:
        """Lower statements until the block ends with a terminator (later ones are unreachable)."""
        for s in stmts:
            if self.terminated:
                return
            self.lower_stmt(s)

    def lower_stmt(self, node: ast.stmt) -> None:
        with self.statement(node):
            method = getattr(self, "stmt_" + type(node).__name__, None)
            if method is None:
                raise self.error(UnsupportedSyntaxError,
                                 f"the '{type(node).__name__}' statement is not supported in kernels", node,
                                 hint=_UNSUPPORTED_STMT_HINTS.get(type(node)))
            method(node)

    @contextmanager
    def statement(self, node: ast.AST) -> Iterator[None]:
        """Lower one statement: ops located at it, and any unexpected exception reported there."""
        saved = self.b.loc
        self.b.loc = self.loc(node)
        try:
            yield
        except (IronCompileError, _StaticJump):
            raise
        except Exception as e:  # a bug in Iron: report it at the user's statement, never as a raw traceback
            raise IronCompileError(f"internal error while lowering this statement ({type(e).__name__}: {e})",
                                   self.loc(node), kernel=self.ctx.kernel_name,
                                   hint="this is a bug in Iron; please report it with the kernel") from e
        finally:
            self.b.loc = saved
            self.assign_hint = None

    # ------------------------------------------------------------ simple statements
    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or a comment-like string
        self.lower_expr(node.value)

    def stmt_Assert(self, node: ast.Assert) -> None:
        cond = self.to_bool(self.lower_expr(node.test), node.test)
        if not isinstance(cond, Py):
            raise self.error(UnsupportedSyntaxError, "assert needs a compile-time condition", node.test,
                             hint="assert checks variant values, constexprs and dtypes while compiling; "
                                  "check run-time values with if")
        if not cond.value:
            msg = None
            if node.msg is not None:
                m = self.lower_expr(node.msg)
                msg = str(m.value) if isinstance(m, Py) else None
            raise self.error(StaticAssertionError, msg or f"assert {ast.unparse(node.test)}", node)

    def stmt_Return(self, node: ast.Return) -> None:
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            raise self.error(UnsupportedSyntaxError, "a kernel returns no value", node,
                             hint="store results into an output tensor")
        self.emit("return", (), node)

    def stmt_Break(self, node: ast.Break) -> None:
        self._jump("break", node)

    def stmt_Continue(self, node: ast.Continue) -> None:
        self._jump("continue", node)

    def _jump(self, kind: str, node: ast.stmt) -> None:
        if not self.loops:
            raise self.error(UnsupportedSyntaxError, f"'{kind}' outside a loop", node)
        loop = self.loops[-1]
        if not loop.static:
            self.emit(kind, (), node)
            return
        if self.env.region is not loop.region:
            raise self.error(UnsupportedSyntaxError, f"'{kind}' of a static_range loop under a run-time condition",
                             node, hint="static_range unrolls at compile time, so it can only stop on a "
                                        "compile-time condition; use range() for a run-time loop")
        raise _StaticJump(kind)

    # ------------------------------------------------------------ assignments
    def stmt_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.assign_hint = node.targets[0].id
        value = self.lower_expr(node.value)
        for target in node.targets:
            self.assign_target(target, value, node)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(UnsupportedSyntaxError, "annotations only on plain variables", node.target)
        if node.value is None:
            raise self.error(UnsupportedSyntaxError, f"'{node.target.id}' is declared without a value", node,
                             hint=f"give it an initial value: {node.target.id}: ... = 0")
        dt = self.static_dtype(self.lower_expr(node.annotation), node.annotation, "the annotation")
        self.assign_hint = node.target.id
        value = self.cast_value(self.lower_expr(node.value), dt, node.value)
        self.assign_name(node.target.id, value, node)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.error(UnsupportedSyntaxError, "'@=' is not supported", node)
        target = node.target
        if isinstance(target, ast.Name):
            self.assign_hint = target.id
            current = self.resolve_name(target.id, target)
            self.assign_name(target.id, self.binary(op, current, self.lower_expr(node.value), node), node)
            return
        if isinstance(target, ast.Subscript):
            base = self.lower_expr(target.value)
            if isinstance(base, TensorRef):
                ref = self.element_ref(base, target)
                current = load_element(self, ref, target)
                store_element(self, ref, self.binary(op, current, self.lower_expr(node.value), node), node, node)
                return
            if isinstance(base, RegArray):
                i = self.register_index(base, target)
                slot = Slot(base.slots[i], base.elem)
                current = self.read_slot(f"{base.name}_{i}", slot)
                new = self.binary(op, current, self.lower_expr(node.value), node)
                self.store_slot(f"{base.name}[{i}]", slot, new, node)
                return
        raise self.error(UnsupportedSyntaxError, f"cannot assign to {ast.unparse(target)}", target)

    def assign_target(self, target: ast.expr, value: FValue, node: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.assign_tuple(target, value, node)
        elif isinstance(target, ast.Subscript):
            self.assign_subscript(target, value, node)
        else:
            raise self.error(UnsupportedSyntaxError, f"cannot assign to {ast.unparse(target)}", target,
                             hint="assign to a variable, a tensor element a[i] or a register array element")

    def assign_tuple(self, target: ast.Tuple | ast.List, value: FValue, node: ast.stmt) -> None:
        if isinstance(value, TupleVal):
            items: list[FValue] = list(value.items)
        elif isinstance(value, Py) and isinstance(value.value, (tuple, list)):
            items = [self.py_object(x, node) for x in value.value]
        else:
            raise self.type_error(f"cannot unpack {describe(value)} into {len(target.elts)} names", node)
        if any(isinstance(e, ast.Starred) for e in target.elts):
            raise self.error(UnsupportedSyntaxError, "starred assignment is not supported", target)
        if len(items) != len(target.elts):
            raise self.type_error(f"cannot unpack {len(items)} values into {len(target.elts)} names", node)
        for t, v in zip(target.elts, items):
            self.assign_target(t, v, node)

    def assign_subscript(self, target: ast.Subscript, value: FValue, node: ast.stmt) -> None:
        base = self.lower_expr(target.value)
        if isinstance(base, TensorRef):
            store_element(self, self.element_ref(base, target), value, node, getattr(node, "value", node))
            return
        if isinstance(base, RegArray):
            i = self.register_index(base, target)
            self.store_slot(f"{base.name}[{i}]", Slot(base.slots[i], base.elem), value, node)
            return
        host = isinstance(base, Py) and is_host_array(base.value)
        raise self.error(UnsupportedSyntaxError, f"cannot assign to an element of {describe(base)}", target,
                         hint=HOST_ARRAY_HINT if host else
                         "only tensor, shared-array and register-array elements can be assigned")

    def assign_name(self, name: str, value: FValue, node: ast.stmt) -> None:
        """Bind ``name`` (see iron.lang.env for when a slot is needed)."""
        binding = self.env.get(name)
        if isinstance(binding, Slot):
            self.store_slot(name, binding, value, node)
            return
        if isinstance(binding, Bound):
            if binding.region is not self.env.region:  # pragma: no cover - spill() converts these first
                raise AssertionError(f"'{name}' rebound in a nested region without a slot")
            value = self._retype_rebinding(name, binding.value, value, node)
        elif self.env.needs_slot_at_first_assignment(name):
            slot = self.new_slot(name, self.slot_type_of(name, value, node), node)
            self.env.bind_slot(name, slot)
            self.store_slot(name, slot, value, node)
            return
        if isinstance(value, RV) and value.value.hint is None:
            value.value.hint = name
        self.env.bind(name, value)

    def _retype_rebinding(self, name: str, old: FValue, new: FValue, node: ast.stmt) -> FValue:
        """A variable keeps its type: a literal converts to it, another type is an error."""
        if isinstance(old, RV):
            old_t = old.type
        elif isinstance(old, Py) and _is_literal(old.value) and isinstance(new, RV):
            old_t = ScalarType(literal_dtype(old.value, None))
        else:
            return new  # compile-time values rebind freely
        if isinstance(new, RV) or (isinstance(new, Py) and _is_literal(new.value)):
            return self.value_for_type(new, old_t, node, what=f"variable '{name}'")
        raise self.type_error(f"variable '{name}' holds {old_t}; this assigns {describe(new)}", node,
                              hint="use a new variable name")

    # ------------------------------------------------------------ slots around run-time control flow
    def spill(self, names: set[str], stmts: list[ast.stmt]) -> None:
        """Move variables a run-time construct assigns into slots, storing their current value."""
        for name in sorted(names):
            binding = self.env.get(name)
            if not isinstance(binding, Bound):
                continue
            where = _first_assignment(stmts, name)
            slot = self.new_slot(name, self.slot_type_of(name, binding.value, where), where)
            self.store_slot(name, slot, binding.value, where)
            self.env.bind_slot(name, slot)

    # ------------------------------------------------------------ if
    def stmt_If(self, node: ast.If) -> None:
        cond = self.to_bool(self.lower_expr(node.test), node.test)
        if isinstance(cond, Py):
            self.lower_body(node.body if cond.value else node.orelse)
            return
        self.spill(self.env.facts.assigned(node.body) | self.env.facts.assigned(node.orelse),
                   node.body + node.orelse)
        if_op = self.b.if_(cond.value)
        for region, stmts in zip(if_op.regions, (node.body, node.orelse)):
            self.lower_region(region, "if", stmts)

    def lower_region(self, block: Any, kind: str, stmts: list[ast.stmt], bind: dict[str, FValue] | None = None,
                     loop: bool = False) -> None:
        with self.b.at(block):
            self.env.enter(kind, stmts)
            if loop:
                self.loops.append(_Loop(False, self.env.region))
            try:
                for name, v in (bind or {}).items():
                    self.env.bind(name, v)
                self.lower_body(stmts)
            finally:
                if loop:
                    self.loops.pop()
                self.env.exit()

    # ------------------------------------------------------------ loops
    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(UnsupportedSyntaxError, "for ... else is not supported", node.orelse[0],
                             hint="use a flag variable")
        if not isinstance(node.target, ast.Name):
            raise self.error(UnsupportedSyntaxError, "a for loop needs one loop variable", node.target)
        it = node.iter
        kind = self._range_kind(it)
        if kind is None:
            raise self.error(UnsupportedSyntaxError, f"a kernel for loop iterates over range(...) or "
                                                     f"static_range(...), not {ast.unparse(it)}", it,
                             hint="write: for i in range(n):")
        assert isinstance(it, ast.Call)
        if kind == "static":
            self._static_for(node, it)
        else:
            self._runtime_for(node, it)
        self.env.mark_unavailable(node.target.id, f"the loop variable '{node.target.id}' is not available after "
                                                  "its loop")

    def _range_kind(self, it: ast.expr) -> str | None:
        if not isinstance(it, ast.Call):
            return None
        obj = self.static_lookup(it.func)
        if obj is pyb.range:
            return "range"
        if isinstance(obj, Builtin) and obj.name == "static_range":
            return "static"
        return None

    def _range_args(self, it: ast.Call, allow_unroll: bool) -> tuple[list[FValue], list[ast.expr], int | None]:
        unroll = None
        for kw in it.keywords:
            if kw.arg != "unroll" or not allow_unroll:
                raise self.error(UnsupportedSyntaxError, f"unknown keyword '{kw.arg}' for the loop's range", kw.value,
                                 hint="range(start, stop, step, unroll=N) takes only unroll=")
            unroll = self.static_int(self.lower_expr(kw.value), kw.value, "unroll")
            if unroll < 1:
                raise self.type_error(f"unroll must be at least 1, got {unroll}", kw.value)
            if unroll > MAX_UNROLL:
                raise self.type_error(f"unroll={unroll} is over the limit of {MAX_UNROLL} copies of the loop body",
                                      kw.value, hint="unroll by a small factor (4 to 16 is typical): the loop "
                                      "still runs every iteration, N only sets how many share one pass of the body")
        if not 1 <= len(it.args) <= 3:
            raise self.error(ArityError, f"range() takes 1 to 3 arguments, got {len(it.args)}", it,
                             hint="range(stop), range(start, stop) or range(start, stop, step)")
        return [self.lower_expr(a) for a in it.args], list(it.args), unroll

    def _static_for(self, node: ast.For, it: ast.Call) -> None:
        values, nodes, _ = self._range_args(it, allow_unroll=False)
        bounds = [self.static_int(v, n, "a static_range bound") for v, n in zip(values, nodes)]
        if len(bounds) == 3 and bounds[2] == 0:
            raise self.type_error("static_range() step must not be zero", nodes[2])
        seq = range(*bounds)
        if len(seq) > MAX_STATIC_UNROLL:
            raise self.type_error(f"static_range() would unroll {len(seq)} iterations (at most "
                                  f"{MAX_STATIC_UNROLL})", it, hint="use range() for long loops")
        target = node.target.id  # type: ignore[union-attr]
        self.loops.append(_Loop(True, self.env.region))
        try:
            for i in seq:
                self.env.bind(target, Py(i))
                try:
                    self.lower_body(node.body)
                except _StaticJump as jump:
                    if jump.kind == "break":
                        break
                if self.terminated:
                    break
        finally:
            self.loops.pop()

    def _runtime_for(self, node: ast.For, it: ast.Call) -> None:
        values, nodes, unroll = self._range_args(it, allow_unroll=True)
        if len(values) == 1:
            values, nodes = [Py(0), values[0]], [it, nodes[0]]
        if len(values) == 2:
            values, nodes = [*values, Py(1)], [*nodes, it]
        step = values[2]
        if isinstance(step, Py) and step.value == 0:
            raise self.type_error("range() step must not be zero", nodes[2])
        for v, n in zip(values, nodes):
            if not (isinstance(v, RV) and isinstance(v.type, ScalarType) and v.dtype.is_int) and not (
                    isinstance(v, Py) and isinstance(v.value, int) and not isinstance(v.value, bool)):
                raise self.type_error(f"range() bounds must be integers, got {describe(v)}", n,
                                      hint="convert with i32(x)")
        lo, hi, st = self.unify(values, it, "range", nodes=nodes)
        self.spill(self.env.facts.assigned(node.body), node.body)
        target = node.target.id  # type: ignore[union-attr]
        for_op = self.b.for_(lo.value, hi.value, st.value, unroll=unroll, hint=target)
        iv = for_op.regions[0].args[0]
        self.lower_region(for_op.regions[0], "loop", node.body, bind={target: RV(iv)}, loop=True)

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(UnsupportedSyntaxError, "while ... else is not supported", node.orelse[0],
                             hint="use a flag variable")
        self.spill(self.env.facts.assigned(node.body), node.body)
        loop_op = self.b.loop()
        parent = self.b.block
        with self.b.at(loop_op.regions[0]):
            self.env.enter("loop", node.body)
            self.loops.append(_Loop(False, self.env.region))
            try:
                cond = self.to_bool(self.lower_expr(node.test), node.test)
                if isinstance(cond, Py) and not cond.value:
                    parent.ops.remove(loop_op)  # never entered: nothing to lower
                    return
                if isinstance(cond, RV):
                    stop = self.value("lnot", [cond.value], node.test)
                    exit_if = self.b.if_(stop.value)
                    with self.b.at(exit_if.regions[0]):
                        self.emit("break", (), node.test)
                self.lower_body(node.body)
            finally:
                self.loops.pop()
                self.env.exit()


def _first_assignment(stmts: list[ast.stmt], name: str) -> ast.AST:
    """The first statement in ``stmts`` assigning ``name`` (for error locations)."""
    for s in stmts:
        for node in ast.walk(s):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                    return node
    return stmts[0] if stmts else ast.Pass()


def _is_literal(x: Any) -> bool:
    return isinstance(x, (bool, int, float))
