"""The lowering state shared by expressions, statements and builtins.

A :class:`LowererBase` lowers one Python function (a kernel body or one
specialisation of a helper) into one IR block through a
:class:`~iron.core.builder.Builder`, so every op is type-checked as it is
made.  It owns the error constructors (every error carries the user's file,
line and column), op emission, variable slots and name resolution.  The
expression and statement mixins add the rest.
"""

from __future__ import annotations

import ast
import difflib
import types as pytypes
from dataclasses import dataclass, field
from typing import Any

from ..core.builder import Builder, normalize_const
from ..core.dtypes import DType
from ..core.errors import IronCompileError, KernelTypeError, SourceLoc, UnknownNameError, UnsupportedSyntaxError
from ..core.ir import Block, Function, Op, Value
from ..core.ops import OpTypeError, infer_type
from ..core.types import IRType, ScalarType, VarType, VectorType
from .annotations import TypeVar
from .builtins import Builtin
from .env import Bound, Env, Slot, Unavailable
from .helpers import HelperFunction
from .numpy_compat import is_numpy_scalar
from .promote import literal_dtype, literal_fits
from .source import ParsedFunction, is_missing
from .values import RV, FValue, Py, describe


@dataclass
class CompileContext:
    """State shared by a kernel body and the helpers it calls during one specialisation."""

    kernel_name: str
    #: Helper specialisations by mangled name (become ``Kernel.functions``).
    functions: dict[str, Function] = field(default_factory=dict)
    #: What a call of each helper specialisation gives back (see iron.lang.helpers).
    helper_results: dict[tuple, Any] = field(default_factory=dict)
    #: Helpers being lowered, innermost last (a call of one of them is recursion).
    helper_stack: list[Any] = field(default_factory=list)
    #: The threads of each role of ``warp_roles()``, once the kernel called it (``role_barrier`` needs them).
    role_sizes: tuple[int, ...] | None = None
    #: The groups of a cluster, once the kernel called ``cluster_groups()`` (multicast and peer arrivals need it).
    cluster_size: int | None = None


class LowererBase:
    """State and primitives for lowering one function body."""

    def __init__(self, parsed: ParsedFunction, ctx: CompileContext, names: dict[str, Any], body: Block):
        self.parsed = parsed
        self.ctx = ctx
        #: Compile-time names of this specialisation: variant values, type variables, constexprs.
        self.names = names
        self.b = Builder(body)
        self.top_block = body
        self._var_insert = 0
        self.env = Env(parsed.tree.body)
        #: Name given to the value of the assignment being lowered (value hints, array names).
        self.assign_hint: str | None = None

    # ------------------------------------------------------------ errors
    def loc(self, node: ast.AST | None) -> SourceLoc:
        return self.parsed.loc(node)

    def error(self, cls: type[IronCompileError], message: str, node: ast.AST | None,
              hint: str | None = None) -> IronCompileError:
        return cls(message, self.loc(node), hint=hint, kernel=self.ctx.kernel_name)

    def type_error(self, message: str, node: ast.AST | None, hint: str | None = None) -> IronCompileError:
        return self.error(KernelTypeError, message, node, hint)

    # ------------------------------------------------------------ emission
    def emit(self, opcode: str, operands: list[Value] | tuple[Value, ...] = (), node: ast.AST | None = None,
             hint: str | None = None, **attrs: Any) -> Value | None:
        """Append one op; an operand mismatch the frontend did not catch becomes a KernelTypeError."""
        try:
            return self.b.op(opcode, list(operands), hint=hint, **attrs)
        except OpTypeError as e:
            raise self.type_error(f"{opcode}: {e}", node) from None

    def value(self, opcode: str, operands: list[Value] | tuple[Value, ...] = (), node: ast.AST | None = None,
              hint: str | None = None, **attrs: Any) -> RV:
        v = self.emit(opcode, operands, node, hint, **attrs)
        assert v is not None, f"{opcode} has no result"
        return RV(v)

    def const(self, value: Any, t: IRType | DType, hint: str | None = None) -> RV:
        if isinstance(t, DType):
            t = ScalarType(t)
        return self.value("const", (), hint=hint, value=normalize_const(value, t), type=t)

    @property
    def terminated(self) -> bool:
        """The block being filled already ends with break/continue/return."""
        return self.b.block.terminator is not None

    # ------------------------------------------------------------ variable slots
    def new_slot(self, name: str, elem: IRType, node: ast.AST | None) -> Slot:
        """A ``var`` slot, declared at the top of the function so it dominates every use."""
        try:
            infer_type("var", [], {"type": elem})
        except OpTypeError as e:
            raise self.type_error(f"'{name}' cannot be a variable: {e}", node) from None
        op = Op("var", [], VarType(elem), {"type": elem}, None, self.loc(node), name)
        self.top_block.ops.insert(self._var_insert, op)
        self._var_insert += 1
        assert op.result is not None
        return Slot(op.result, elem)

    def slot_type_of(self, name: str, value: FValue, node: ast.AST) -> IRType:
        """The type a slot gets from the first value it holds."""
        if isinstance(value, Py) and isinstance(value.value, (bool, int, float)):
            return ScalarType(literal_dtype(value.value, None))
        if isinstance(value, RV):
            return value.type
        raise self.error(UnsupportedSyntaxError,
                         f"'{name}' holds {describe(value)} and is assigned under run-time control flow",
                         node, hint="only numbers, vectors and fragments can change at run time; assign "
                                    "tensors, shared arrays and register arrays once, outside if/for/while")

    def store_slot(self, name: str, slot: Slot, value: FValue, node: ast.AST) -> None:
        rv = self.value_for_type(value, slot.elem, node, what=f"variable '{name}'")
        self.emit("var_store", [slot.var, rv.value], node)

    def read_slot(self, name: str, slot: Slot) -> RV:
        return self.value("var_load", [slot.var], hint=name)

    def value_for_type(self, value: FValue, t: IRType, node: ast.AST, what: str) -> RV:
        """``value`` as type ``t``: a weak literal converts, a typed value must already be ``t``."""
        if isinstance(value, Py) and isinstance(value.value, (bool, int, float)) and isinstance(
                t, (ScalarType, VectorType)):
            lit = value.value
            if isinstance(lit, bool) != t.dtype.is_bool or not literal_fits(lit, t.dtype):
                raise self.type_error(f"{what} holds {t}; the constant {lit!r} does not fit it", node)
            return self.const(lit, t)
        if isinstance(value, RV) and value.type == t:
            return value
        if isinstance(value, RV):
            raise self.type_error(f"{what} holds {t}; this assigns {value.type}", node,
                                  hint=_retype_hint(t, value.type))
        raise self.type_error(f"{what} holds {t}; this assigns {describe(value)}", node)

    # ------------------------------------------------------------ names
    def resolve_name(self, name: str, node: ast.AST) -> FValue:
        binding = self.env.get(name)
        if isinstance(binding, Slot):
            return self.read_slot(name, binding)
        if isinstance(binding, Bound):
            return binding.value
        if isinstance(binding, Unavailable):
            raise self.error(UnknownNameError, binding.reason, node,
                             hint="copy the value into another variable inside the loop")
        if name in self.env.facts.assigned(self.env.facts.body):
            raise self.error(UnknownNameError, f"'{name}' has no value here", node,
                             hint=f"'{name}' is assigned later, or only inside a branch or loop that does not "
                                  "cover this use: assign it before")
        if name in self.names:
            return self.py_object(self.names[name], node)
        obj = self.parsed.lookup(name)
        if is_missing(obj):
            raise self.unknown_name(name, node)
        return self.py_object(obj, node)

    def unknown_name(self, name: str, node: ast.AST) -> IronCompileError:
        candidates = set(self.env.bindings) | set(self.names)
        candidates |= {n for n in self.parsed.known_names() if _kernel_usable(self.parsed.lookup(n))}
        close = difflib.get_close_matches(name, sorted(candidates), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else None
        return self.error(UnknownNameError, f"name '{name}' is not defined", node, hint=hint)

    def py_object(self, obj: Any, node: ast.AST) -> FValue:
        """A Python object met in the body (global, closure, attribute), as a compile-time value."""
        if isinstance(obj, TypeVar):
            bound = self.names.get(obj.name)
            if not isinstance(bound, DType):
                raise self.error(UnknownNameError, f"type variable {obj.name} is not bound here", node,
                                 hint=f"bind it with variants({obj.name}=[...]) or through an argument annotated "
                                      f"Tensor[{obj.name}] or {obj.name}")
            return Py(bound)
        if is_numpy_scalar(obj):
            return Py(obj.item())  # a numpy scalar constant folds like the Python number it holds
        return Py(obj)


_PYTHON_BUILTINS_IN_KERNELS = frozenset({"range", "len", "abs", "min", "max", "int", "float", "bool", "round",
                                         "pow"})


def _kernel_usable(obj: Any) -> bool:
    """Whether a global could sensibly be meant in a kernel (for "did you mean" suggestions)."""
    if isinstance(obj, (Builtin, HelperFunction, DType, TypeVar, bool, int, float, pytypes.ModuleType)):
        return True
    return getattr(obj, "__name__", None) in _PYTHON_BUILTINS_IN_KERNELS and getattr(
        obj, "__module__", None) == "builtins"


def _retype_hint(have: IRType, got: IRType) -> str:
    if not (isinstance(have, (ScalarType, VectorType)) and isinstance(got, (ScalarType, VectorType))):
        return "a variable keeps the type of its first value: use a new name"
    if have.dtype.is_int and got.dtype.is_float:
        return (f"a variable keeps the type of its first value: start it as a float (e.g. 0.0 instead of 0), "
                f"or convert the value with {have.dtype.name}(...)")
    return f"a variable keeps the type of its first value: convert the value with {have.dtype.name}(...)"
