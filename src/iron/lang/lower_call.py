"""Lowering of calls: builtins, dtype casts, Python's own builtins, tensor methods, helpers.

Arguments are evaluated left to right as written, then bound against the
builtin's signature (:class:`CallArgs`), so arity and keyword mistakes give
an :class:`ArityError` naming the builtin and its expected signature.  The
per-builtin lowering lives in :mod:`iron.lang.handlers` (a registry keyed by
builtin name).
"""

from __future__ import annotations

import ast
import builtins as pyb
import inspect
from typing import Any, Callable

from ..core import dtypes as D
from ..core.dtypes import DType
from ..core.errors import ArityError, UnsupportedSyntaxError
from ..core.types import VectorType
from .builtins import ALL_BUILTINS, Builtin
from .helpers import HelperFunction
from .lower_expr import ExprLowering
from .values import RV, FValue, Py, RegArray, TensorRef, TupleVal, describe

#: Handlers by builtin name: ``handler(lowerer, args) -> value`` (filled by iron.lang.handlers).
HANDLERS: dict[str, Callable[[Any, "CallArgs"], FValue]] = {}


#: Tensor methods (``a.load``, ``a.store``): ``handler(lowerer, tensor, args) -> value``.
TENSOR_METHODS: dict[str, Callable[[Any, TensorRef, "CallArgs"], FValue]] = {}


def handles(*names: str) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        for n in names:
            HANDLERS[n] = fn
        return fn
    return register


class CallArgs:
    """The lowered arguments of one call, by parameter name, with their AST nodes for errors."""

    def __init__(self, node: ast.Call, builtin: Builtin, values: dict[str, Any], nodes: dict[str, Any]):
        self.node = node
        self.builtin = builtin
        self._values = values
        self._nodes = nodes

    @property
    def name(self) -> str:
        return self.builtin.name

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def node_of(self, name: str) -> ast.AST:
        """The argument's node (the call itself for a default or a ``*`` parameter)."""
        n = self._nodes.get(name)
        return n if isinstance(n, ast.AST) else self.node

    def nodes_of(self, name: str) -> list[ast.AST]:
        """The nodes of a ``*`` parameter's arguments."""
        n = self._nodes.get(name, ())
        return list(n) if isinstance(n, (tuple, list)) else [self.node_of(name)]

    def given(self, name: str) -> bool:
        """Whether the call passed this parameter (rather than taking its default)."""
        return name in self._nodes


def handles_method(name: str) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        TENSOR_METHODS[name] = fn
        return fn
    return register


def _stub(display: str) -> Callable[[Callable], Builtin]:
    def make(fn: Callable) -> Builtin:
        return Builtin(fn.__name__, inspect.signature(fn), "", "memory", display=display)
    return make


@_stub("a.load(i, width=None)")
def tensor_load(i, width=None):  # noqa: D103 - a signature, not a function
    pass


@_stub("a.store(i, v)")
def tensor_store(i, v):  # noqa: D103
    pass


@_stub("dtype(x)")
def dtype_cast(x):  # noqa: D103
    pass


@_stub("len(x)")
def py_len(x):  # noqa: D103
    pass


#: Python builtins that mean the same as a kernel builtin.
_PYTHON_ALIASES: tuple[tuple[Any, str], ...] = ((pyb.abs, "abs"), (pyb.min, "min"), (pyb.max, "max"),
                                               (pyb.round, "round"), (pyb.pow, "pow"))


def _kernel_builtin_for(obj: Any) -> Builtin | None:
    """The kernel builtin a Python builtin stands for (``abs`` -> ``iron.abs``), by identity."""
    for py_fn, name in _PYTHON_ALIASES:
        if obj is py_fn:
            return ALL_BUILTINS[name]
    return None


class CallLowering(ExprLowering):
    """Call lowering (mixed into the function lowerer)."""

    def expr_Call(self, node: ast.Call) -> FValue:
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.error(UnsupportedSyntaxError, "'*' unpacking in a call is not supported", a,
                                 hint="pass the arguments one by one")
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(UnsupportedSyntaxError, "'**' unpacking in a call is not supported", kw.value,
                                 hint="pass the keyword arguments one by one")
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = self.lower_expr(func.value)
            if isinstance(owner, TensorRef) and func.attr in ("load", "store"):
                stub = tensor_load if func.attr == "load" else tensor_store
                args = self.bind_args(node, stub, display_name=f"{owner.name}.{func.attr}")
                return self.tensor_method(owner, func.attr, args)
            callee = self.attribute(owner, func)
        else:
            callee = self.lower_expr(func)
        if not isinstance(callee, Py):
            raise self.type_error(f"{describe(callee)} is not callable", func)
        return self.call_object(callee.value, node)

    def call_object(self, obj: Any, node: ast.Call) -> FValue:
        obj = _kernel_builtin_for(obj) or obj
        if isinstance(obj, Builtin):
            if obj.name == "static_range":
                raise self.error(UnsupportedSyntaxError, "static_range() only drives a for loop", node,
                                 hint="write: for i in static_range(n):")
            return HANDLERS[obj.name](self, self.bind_args(node, obj))
        if isinstance(obj, DType):
            args = self.bind_args(node, dtype_cast, display_name=obj.name)
            return self.cast_value(args["x"], obj, args.node_of("x"))
        if isinstance(obj, HelperFunction):
            return self.call_helper(obj, node)
        if obj is pyb.range:
            raise self.error(UnsupportedSyntaxError, "range() only drives a for loop", node,
                             hint="write: for i in range(n):")
        if obj is pyb.int or obj is pyb.float or obj is pyb.bool:
            args = self.bind_args(node, dtype_cast, display_name=obj.__name__)
            x = args["x"]
            if isinstance(x, Py):
                try:
                    return Py(obj(x.value))
                except (TypeError, ValueError, OverflowError) as e:
                    raise self.type_error(f"{obj.__name__}({x.value!r}): {e}", node) from None
            if obj is pyb.bool:
                return self.to_bool(x, node)
            return self.cast_value(x, D.i32 if obj is pyb.int else D.f32, node)
        if obj is pyb.len:
            return self.length(self.bind_args(node, py_len, display_name="len"))
        if getattr(obj, "__module__", None) == "math" and callable(obj):
            return self.fold_python_math(obj, node)
        if getattr(obj, "__iron_kernel__", False):
            raise self.error(UnsupportedSyntaxError, "a kernel cannot call another kernel", node,
                             hint="move the shared code into a helper decorated with @iron.func")
        name = getattr(obj, "__name__", type(obj).__name__)
        raise self.error(UnsupportedSyntaxError, f"cannot call the Python object '{name}' inside a kernel", node,
                         hint="kernels call iron builtins and @iron.func helpers; decorate the function with "
                              "@iron.func")

    def bind_args(self, node: ast.Call, builtin: Builtin, display_name: str | None = None) -> CallArgs:
        """Evaluate the call's arguments in source order and bind them to ``builtin``'s parameters."""
        sig = builtin.signature
        kw_nodes = {kw.arg: kw.value for kw in node.keywords}
        shown = display_name or builtin.name
        try:
            bound = sig.bind(*node.args, **kw_nodes)
        except TypeError as e:
            usage = builtin.usage if display_name is None or builtin.display is None else \
                builtin.display.replace(builtin.display.split("(")[0], display_name, 1)
            raise self.error(ArityError, f"wrong arguments for {shown}(): {e}; expected {usage}", node,
                             hint=(f"{usage}: " + builtin.doc.splitlines()[0].replace("``", "").rstrip("."))
                             if builtin.doc else None) from None
        params = list(sig.parameters.values())
        ref_node = node.args[0] if builtin.ref_first and node.args else None
        lowered: dict[int, FValue] = {}
        for a in [*node.args, *kw_nodes.values()]:
            lowered[id(a)] = self.lower_ref(a) if a is ref_node else self.lower_expr(a)
        values: dict[str, Any] = {}
        nodes: dict[str, Any] = {}
        for p in params:
            if p.name in bound.arguments:
                given = bound.arguments[p.name]
                if p.kind is inspect.Parameter.VAR_POSITIONAL:
                    values[p.name] = tuple(lowered[id(n)] for n in given)
                else:
                    values[p.name] = lowered[id(given)]
                nodes[p.name] = given
            else:
                values[p.name] = () if p.kind is inspect.Parameter.VAR_POSITIONAL else Py(p.default)
        return CallArgs(node, builtin, values, nodes)

    def length(self, args: CallArgs) -> FValue:
        x = args["x"]
        if isinstance(x, TensorRef):
            return self.tensor_size(x, args.node)
        if isinstance(x, RegArray):
            return Py(len(x.slots))
        if isinstance(x, TupleVal):
            return Py(len(x.items))
        if isinstance(x, RV) and isinstance(x.type, VectorType):
            return Py(x.type.width)
        if isinstance(x, Py) and isinstance(x.value, (tuple, list, str)):
            return Py(len(x.value))
        raise self.type_error(f"len() of {describe(x)}", args.node)

    def fold_python_math(self, fn: Callable, node: ast.Call) -> FValue:
        """A call of Python's ``math`` module on compile-time arguments folds (``math.log2(BLOCK)``)."""
        if node.keywords:
            raise self.error(UnsupportedSyntaxError, "keyword arguments to math functions", node)
        values = [self.lower_expr(a) for a in node.args]
        if not all(isinstance(v, Py) for v in values):
            name = getattr(fn, "__name__", "function")
            raise self.type_error(f"math.{name}() runs at compile time and needs compile-time arguments", node,
                                  hint=f"for run-time values use the kernel builtin, e.g. iron.{name}(x)")
        try:
            return self.py_object(fn(*(v.value for v in values)), node)  # type: ignore[union-attr]
        except (TypeError, ValueError, OverflowError) as e:
            raise self.type_error(f"{getattr(fn, '__name__', 'math function')}(): {e}", node) from None

    def tensor_method(self, t: TensorRef, method: str, args: CallArgs) -> FValue:
        return TENSOR_METHODS[method](self, t, args)
