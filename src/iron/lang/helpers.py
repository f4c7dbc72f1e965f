"""``@iron.func`` helpers: specialised per argument types into IR functions, called with ``call``.

A helper call is specialised on the IR types of its run-time arguments and
on the values of its compile-time arguments (a Python int, float, bool or
dtype folds inside the helper).  Each specialisation becomes one
:class:`~iron.core.ir.Function` named after the helper and those types
(``axpy__f32_f32``), stored in the kernel's ``functions``; the inline pass
splices it in later.  A helper returns once, at its end; several results
travel as a tuple (``tuple_make`` / ``tuple_get``).  A result known at
compile time folds at the call site.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..core.dtypes import DType
from ..core.errors import ArityError, KernelTypeError, UnsupportedSyntaxError
from ..core.ir import Block, Function, Param, Value
from ..core.types import IRType, ScalarType, TupleType, VectorType
from .annotations import TensorSpec, TypeVar
from .builtins import KernelOnlyError
from .params import evaluate_annotation
from .source import ParsedFunction, parse_function
from .values import RV, FValue, Py, RegArray, TensorRef, TupleVal, describe


class HelperFunction:
    """A function decorated with ``@iron.func``: callable from kernels and other helpers only."""

    def __init__(self, fn: Callable[..., Any]):
        self.parsed: ParsedFunction = parse_function(fn, "func")
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        for p in self.signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise UnsupportedSyntaxError(f"helper '{self.name}' cannot take *args or **kwargs",
                                             self.parsed.loc(self.parsed.tree), hint="list the parameters")
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelOnlyError(f"@iron.func helper '{self.name}' can only be called from a kernel or another helper")

    def __repr__(self) -> str:
        return f"<iron.func {self.name}{self.signature}>"


def func(fn: Callable[..., Any]) -> HelperFunction:
    """Mark ``fn`` as a helper callable from kernels (``@iron.func``)."""
    return HelperFunction(fn)


@dataclass(frozen=True)
class _Specialization:
    """A lowered helper specialisation: its function (None when it folded away) and its result template."""

    name: str | None
    template: Any  # see _flatten


def call_helper(lw: Any, helper: HelperFunction, node: ast.Call) -> FValue:
    """Lower ``helper(args...)`` inside the function ``lw`` is lowering."""
    args = _bind(lw, helper, node)
    if helper in lw.ctx.helper_stack:
        chain = " -> ".join(h.name for h in [*lw.ctx.helper_stack, helper])
        raise lw.error(UnsupportedSyntaxError, f"recursive call of helper '{helper.name}' ({chain})", node,
                       hint="kernels cannot recurse: rewrite the recursion as a loop")
    args, names = _apply_annotations(lw, helper, args, node)
    key = (helper, tuple(_key_part(lw, n, v, node) for n, v in args.items()))
    spec = lw.ctx.helper_results.get(key)
    if spec is None:
        spec = _specialize(lw, helper, args, names, key, node)
        lw.ctx.helper_results[key] = spec
    leaves: list[RV] = []
    if spec.name is not None:
        fn = lw.ctx.functions[spec.name]
        operands = [v.value for v in args.values() if isinstance(v, (RV, TensorRef))]
        result = lw.emit("call", operands, node, callee=spec.name, result_type=fn.result_type)
        if isinstance(fn.result_type, TupleType):
            leaves = [lw.value("tuple_get", [result], node, index=i) for i in range(len(fn.result_type.elems))]
        elif result is not None:
            leaves = [RV(result)]
    return _rebuild(spec.template, leaves)


def _bind(lw: Any, helper: HelperFunction, node: ast.Call) -> dict[str, FValue]:
    kw_nodes = {kw.arg: kw.value for kw in node.keywords}
    try:
        bound = helper.signature.bind(*node.args, **kw_nodes)
    except TypeError as e:
        raise lw.error(ArityError, f"wrong arguments for {helper.name}(): {e}; expected "
                                   f"{helper.name}{_plain_signature(helper)}", node) from None
    lowered = {id(a): lw.lower_expr(a) for a in [*node.args, *kw_nodes.values()]}
    out: dict[str, FValue] = {}
    for name, p in helper.signature.parameters.items():
        if name in bound.arguments:
            out[name] = lowered[id(bound.arguments[name])]
        else:
            out[name] = lw.py_object(p.default, node)
    return out


def _plain_signature(helper: HelperFunction) -> str:
    return "(" + ", ".join(helper.signature.parameters) + ")"


def _apply_annotations(lw: Any, helper: HelperFunction, args: dict[str, FValue],
                       node: ast.AST) -> tuple[dict[str, FValue], dict[str, Any]]:
    """Check arguments against annotated parameters and bind type variables from them.

    Typed arguments bind first; then a literal passed to a parameter
    annotated with a dtype (or a bound type variable) becomes a typed value.
    Unannotated parameters take anything.
    """
    names: dict[str, Any] = {}
    annotated = [(p.arg, _eval_annotation(lw, helper, p.annotation))
                 for p in helper.parsed.tree.args.posonlyargs + helper.parsed.tree.args.args if p.annotation]
    literals: list[tuple[str, Any]] = []
    for pname, ann in annotated:
        v = args[pname]
        if isinstance(ann, TensorSpec):
            if not isinstance(v, TensorRef):
                raise lw.type_error(f"{helper.name}() parameter '{pname}' takes a tensor, got {describe(v)}", node)
            _bind_typevar(lw, helper, names, ann.elem, v.type.dtype, pname, node)
            continue
        if not (isinstance(ann, (DType, TypeVar)) or (isinstance(ann, type) and ann in (int, float, bool))):
            raise lw.type_error(f"{helper.name}() parameter '{pname}' has an annotation Iron does not understand: "
                                f"{ann!r}", node, hint="annotate with a dtype, a type variable, Tensor[...] or "
                                                       "nothing")
        expected = ann if isinstance(ann, TypeVar) else lw.static_dtype(Py(ann), node)
        if isinstance(v, RV) and isinstance(v.type, (ScalarType, VectorType)):
            _bind_typevar(lw, helper, names, expected, v.dtype, pname, node)
        elif isinstance(v, Py) and isinstance(v.value, (bool, int, float)):
            literals.append((pname, expected))
        else:
            raise lw.type_error(f"{helper.name}() parameter '{pname}' takes a number, got {describe(v)}", node)
    out = dict(args)
    for pname, expected in literals:
        dt = names.get(expected.name) if isinstance(expected, TypeVar) else expected
        if dt is not None:  # an unbound type variable leaves the literal a compile-time value
            out[pname] = lw.value_for_type(args[pname], ScalarType(dt), node,
                                           what=f"{helper.name}() parameter '{pname}'")
    return out, names


def _eval_annotation(lw: Any, helper: HelperFunction, node: ast.expr) -> Any:
    return evaluate_annotation(helper.parsed, node, lw.ctx.kernel_name)


def _bind_typevar(lw: Any, helper: HelperFunction, names: dict[str, Any], ann: Any, dt: DType, pname: str,
                  node: ast.AST) -> None:
    if isinstance(ann, TypeVar):
        prev = names.setdefault(ann.name, dt)
        if prev != dt:
            raise lw.type_error(f"{helper.name}(): type variable {ann.name} is {prev.name} from an earlier argument "
                                f"but '{pname}' is {dt.name}", node)
    elif isinstance(ann, DType) and ann != dt:
        raise lw.type_error(f"{helper.name}() parameter '{pname}' is {ann.name}, got {dt.name}", node,
                            hint=f"convert the argument: {ann.name}(x)")


def _key_part(lw: Any, name: str, v: FValue, node: ast.AST) -> Any:
    if isinstance(v, (RV, TensorRef)):
        return ("value", v.type)
    if isinstance(v, Py) and _is_static_arg(v.value):
        return ("const", type(v.value).__name__, v.value)
    if isinstance(v, RegArray):
        raise lw.type_error(f"register array '{v.name}' cannot be passed to a helper", node,
                            hint="pass its elements, or use a shared array")
    if isinstance(v, TupleVal):
        raise lw.type_error(f"a tuple cannot be passed to a helper as '{name}'", node, hint="pass the elements")
    raise lw.type_error(f"{describe(v)} cannot be passed to a helper as '{name}'", node,
                        hint="helpers take tensors, numbers, vectors, fragments and compile-time ints, floats, "
                             "bools, strings and dtypes")


def _is_static_arg(x: Any) -> bool:
    if isinstance(x, tuple):
        return all(_is_static_arg(e) for e in x)
    return x is None or isinstance(x, (bool, int, float, str, DType))


def _mangle(helper: HelperFunction, parts: tuple, taken: dict[str, Function]) -> str:
    words = []
    for part in parts:
        if part[0] == "value":
            words.append(str(part[1]))
        else:
            v = part[2]
            words.append(v.name if isinstance(v, DType) else repr(v))
    text = "__".join(re.sub(r"[^0-9A-Za-z]+", "_", w).strip("_") or "x" for w in words)
    base = f"{helper.name}__{text}" if text else helper.name
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def _specialize(lw: Any, helper: HelperFunction, args: dict[str, FValue], names: dict[str, Any], key: tuple,
                node: ast.AST) -> _Specialization:
    from .frontend import FunctionLowerer

    fname = _mangle(helper, key[1], lw.ctx.functions)
    params: list[Param] = []
    body = Block()
    inner = FunctionLowerer(helper.parsed, lw.ctx, names, body)
    for pname, v in args.items():
        if isinstance(v, (RV, TensorRef)):
            pv = Value(v.type, pname)
            params.append(Param(pname, pv))
            inner.env.bind(pname, TensorRef(pv, pname) if isinstance(v, TensorRef) else RV(pv))
        else:
            inner.env.bind(pname, v)
    placeholder = Function(fname, params, body, None, helper.parsed.loc(helper.parsed.tree))
    lw.ctx.functions[fname] = placeholder  # reserve the name while the body lowers (nested helpers)
    lw.ctx.helper_stack.append(helper)
    try:
        result = inner.lower_helper_body()
    finally:
        lw.ctx.helper_stack.pop()
    leaves: list[RV] = []
    template = _flatten(inner, result, leaves, helper)
    if not body.ops and not leaves:  # nothing runs and the result is known: the call folds away
        del lw.ctx.functions[fname]
        return _Specialization(None, template)
    placeholder.result_type = _emit_return(inner, leaves)
    return _Specialization(fname, template)


def _emit_return(inner: Any, leaves: list[RV]) -> IRType | None:
    """End the helper's body with its one ``return`` (a tuple for several results); the result type."""
    inner.b.loc = inner.loc(inner.return_node)
    if not leaves:
        inner.emit("return", ())
        return None
    if len(leaves) == 1:
        inner.emit("return", [leaves[0].value])
        return leaves[0].type
    tup = inner.value("tuple_make", [v.value for v in leaves])
    inner.emit("return", [tup.value])
    return tup.type


def _flatten(lw: Any, v: FValue, leaves: list[RV], helper: HelperFunction) -> Any:
    """A template of the result: ("py", value) | ("rv", index) | ("tuple", [templates])."""
    if isinstance(v, RV):
        leaves.append(v)
        return ("rv", len(leaves) - 1)
    if isinstance(v, TupleVal):
        return ("tuple", [_flatten(lw, i, leaves, helper) for i in v.items])
    if isinstance(v, Py):
        return ("py", v.value)
    raise lw.error(KernelTypeError, f"helper '{helper.name}' cannot return {describe(v)}", lw.return_node,
                   hint="helpers return numbers, vectors, fragments or tuples of them")


def _rebuild(template: Any, leaves: list[RV]) -> FValue:
    kind, payload = template
    if kind == "rv":
        return leaves[payload]
    if kind == "tuple":
        return TupleVal(tuple(_rebuild(t, leaves) for t in payload))
    return Py(payload)
