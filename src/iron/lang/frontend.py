"""The frontend's entry point: one kernel specialisation, Python AST -> verified IR.

:func:`lower_kernel` builds the IR parameters from the annotations and the
binding, lowers the body (and, on demand, each helper specialisation), fills
``Param.access``, rejects barriers in divergent control flow and verifies
the result.
"""

from __future__ import annotations

import ast
from typing import Any

from ..core.analysis import infer_access
from ..core.dtypes import DType
from ..core.errors import DivergentBarrierError, IronCompileError, UnsupportedSyntaxError
from ..core.ir import Block, Kernel, Param, Value
from ..core.types import ScalarType, TensorType
from ..core.uniformity import find_divergent_barriers
from ..core.verifier import verify
from . import handlers  # noqa: F401  (registers the builtin handlers)
from .helpers import HelperFunction, call_helper
from .lower_stmt import StmtLowering
from .lowering import CompileContext
from .params import ParamSpec
from .source import ParsedFunction
from .values import RV, FValue, Py, TensorRef


class FunctionLowerer(StmtLowering):
    """Lowers one function body: a kernel's, or one specialisation of a helper's."""

    def __init__(self, parsed: ParsedFunction, ctx: CompileContext, names: dict[str, Any], body: Block):
        super().__init__(parsed, ctx, names, body)
        self.loops = []
        #: The helper's final ``return`` (where its IR return is located).
        self.return_node: ast.AST = parsed.tree

    def call_helper(self, helper: HelperFunction, node: ast.Call) -> FValue:
        return call_helper(self, helper, node)

    def lower_kernel_body(self) -> None:
        self.lower_body(self.parsed.tree.body)

    def lower_helper_body(self) -> FValue:
        """Lower a helper's statements and evaluate its single, final ``return``."""
        stmts = list(self.parsed.tree.body)
        final = stmts.pop() if stmts and isinstance(stmts[-1], ast.Return) else None
        for s in stmts:
            for node in ast.walk(s):
                if isinstance(node, ast.Return):
                    raise self.error(UnsupportedSyntaxError, f"helper '{self.parsed.name}' returns before its end",
                                     node, hint="a helper returns once, at its end: assign the result to a variable "
                                                "in each branch and return that variable after the if")
        self.lower_body(stmts)
        if final is None:
            return Py(None)
        self.return_node = final
        if final.value is None:
            return Py(None)
        with self.statement(final):
            return self.lower_expr(final.value)


def ir_param_type(spec: ParamSpec, binding: dict[str, Any]) -> TensorType | ScalarType:
    """The IR type of a run-time parameter under a complete binding."""
    elem = spec.elem
    dt = binding[elem.name] if spec.type_var is not None else elem  # type: ignore[union-attr]
    assert isinstance(dt, DType)
    if spec.kind == "tensor":
        return TensorType(dt, "global", spec.readonly)
    return ScalarType(dt)


def lower_kernel(parsed: ParsedFunction, specs: list[ParamSpec], binding: dict[str, Any], name: str,
                 meta: dict[str, Any]) -> Kernel:
    """The verified frontend IR of one specialisation (``binding`` complete: variants, type vars, constexprs)."""
    ctx = CompileContext(kernel_name=name)
    params = []
    for s in specs:
        if s.kind != "constexpr":
            params.append(Param(s.name, Value(ir_param_type(s, binding), s.name)))
    full_meta = {"variant": dict(binding), "source_file": parsed.file, "source_line": parsed.first_line, **meta}
    if parsed.docstring:
        full_meta["doc"] = parsed.docstring
    k = Kernel(name, params, Block(), full_meta, parsed.loc(parsed.tree))
    lw = FunctionLowerer(parsed, ctx, dict(binding), k.body)
    by_name = {p.name: p for p in params}
    for s in specs:
        if s.kind == "constexpr":
            lw.env.bind(s.name, Py(binding[s.name]))
        elif s.kind == "tensor":
            lw.env.bind(s.name, TensorRef(by_name[s.name].value, s.name))
        else:
            lw.env.bind(s.name, RV(by_name[s.name].value))
    try:
        lw.lower_kernel_body()
    except IronCompileError as e:
        raise e.with_kernel(name) from e.__cause__
    k.functions = dict(ctx.functions)
    infer_access(k)
    _reject_divergent_barriers(k, name)
    verify(k, "frontend")
    return k


def _reject_divergent_barriers(k: Kernel, name: str) -> None:
    found = find_divergent_barriers(k)
    if not found:
        return
    d = found[0]
    cause_line = f" (line {d.cause.loc.line})" if d.cause.loc else ""
    if d.call is not None:
        where = d.call.loc
        message = f"this call reaches a {d.builtin} {d.reason}{cause_line}"
    else:
        where = d.barrier.loc
        message = f"{d.builtin} {d.reason}{cause_line}"
    raise DivergentBarrierError(message, where, kernel=name)
