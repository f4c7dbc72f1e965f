"""Lowering of expressions: names, constants, operators, subscripts, attributes.

Compile-time operands fold (:mod:`iron.lang.fold`); otherwise operands are
promoted (:mod:`iron.lang.coerce`) and one IR op is emitted.  Calls are in
:mod:`iron.lang.lower_call`.
"""

from __future__ import annotations

import ast
import builtins as pyb
import difflib
from typing import Any

from ..core import dtypes as D
from ..core.dtypes import DType
from ..core.errors import RegisterIndexError, UnknownNameError, UnsupportedSyntaxError
from ..core.types import FragmentType, ScalarType, VectorType
from .annotations import TypeVar
from .builtins import Builtin
from .coerce import Coercion
from .env import Slot
from .fold import FoldError, fold_binary, fold_compare, fold_unary
from .promote import promote
from .values import (HOST_ARRAY_HINT, RV, ElemRef, FValue, Py, RegArray, TensorRef, TupleVal, describe,
                     is_host_array)

BINOPS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
}
_SIMPLE_OPS = {"+": "add", "-": "sub", "*": "mul", "%": "rem", "<<": "shl", ">>": "shr",
               "&": "band", "|": "bor", "^": "bxor"}
_CMPOPS: dict[type, str] = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}
_CMP_IR = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
#: Python builtins a kernel may call that neither load nor have effects.
_PURE_PYTHON_BUILTINS = (pyb.abs, pyb.min, pyb.max, pyb.round, pyb.pow, pyb.int, pyb.float, pyb.bool, pyb.len)
_UNOPS: dict[type, str] = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}

#: Constructs with no kernel meaning, and what to write instead.
_UNSUPPORTED_EXPR_HINTS: dict[type, str] = {
    ast.Lambda: "define a helper with @iron.func instead",
    ast.ListComp: "use a register array and a static_range loop",
    ast.GeneratorExp: "use a static_range loop",
    ast.SetComp: "kernels have no sets",
    ast.DictComp: "kernels have no dicts",
    ast.Dict: "kernels have no dicts",
    ast.Set: "kernels have no sets",
    ast.JoinedStr: "kernels have no strings",
    ast.NamedExpr: "assign in a separate statement",
    ast.Starred: "pass the arguments one by one",
    ast.Await: "kernels are not coroutines",
    ast.Yield: "kernels are not generators",
    ast.YieldFrom: "kernels are not generators",
    ast.Slice: "index one element at a time",
}


class ExprLowering(Coercion):
    """Expression lowering (mixed into the function lowerer)."""

    def lower_expr(self, node: ast.expr) -> FValue:
        saved = self.b.loc
        self.b.loc = self.loc(node)
        try:
            method = getattr(self, "expr_" + type(node).__name__, None)
            if method is None:
                what = type(node).__name__
                raise self.error(UnsupportedSyntaxError, f"{_describe_node(node)} is not supported in kernels",
                                 node, hint=_UNSUPPORTED_EXPR_HINTS.get(type(node), f"({what})"))
            return method(node)
        finally:
            self.b.loc = saved

    # ------------------------------------------------------------ leaves
    def expr_Constant(self, node: ast.Constant) -> FValue:
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return Py(node.value)
        raise self.error(UnsupportedSyntaxError, f"the constant {node.value!r} has no kernel meaning", node)

    def expr_Name(self, node: ast.Name) -> FValue:
        return self.resolve_name(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> FValue:
        items = [self.lower_expr(e) for e in node.elts]
        if all(isinstance(i, Py) for i in items):
            return Py(tuple(i.value for i in items))  # type: ignore[union-attr]
        return TupleVal(tuple(items))

    def expr_List(self, node: ast.List) -> FValue:
        return self.register_array_literal(node)

    def expr_Attribute(self, node: ast.Attribute) -> FValue:
        return self.attribute(self.lower_expr(node.value), node)

    def attribute(self, base: FValue, node: ast.Attribute) -> FValue:
        """``base.attr``: static getattr on compile-time objects, tensor properties, a value's dtype."""
        attr = node.attr
        if isinstance(base, Py):
            try:
                return self.py_object(getattr(base.value, attr), node)
            except AttributeError:
                raise self.error(UnknownNameError, f"{describe(base)} has no attribute '{attr}'", node,
                                 hint=_close_attr(base.value, attr)) from None
        if isinstance(base, TensorRef):
            return self.tensor_attribute(base, attr, node)
        if isinstance(base, RV) and attr == "dtype" and not isinstance(base.type, FragmentType):
            return Py(base.dtype)
        if isinstance(base, RegArray) and attr == "dtype":
            return Py(base.elem.dtype)  # type: ignore[attr-defined]
        raise self.error(UnknownNameError, f"{describe(base)} has no attribute '{attr}'", node)

    def tensor_attribute(self, t: TensorRef, attr: str, node: ast.AST) -> FValue:
        if attr == "dtype":
            return Py(t.type.dtype)
        if attr == "size":
            return self.tensor_size(t, node)
        if attr == "shape" and t.is_shared:
            return Py(t.type.shape)
        if attr in ("load", "store"):
            raise self.error(UnsupportedSyntaxError, f"'{t.name}.{attr}' must be called directly", node,
                             hint=f"write {t.name}.{attr}(...)")
        raise self.error(UnknownNameError, f"{describe(t)} has no attribute '{attr}'", node,
                         hint="tensors have .size, .dtype, .load(i, width=W), .store(i, v)"
                              + (" and .shape" if t.is_shared else ""))

    def tensor_size(self, t: TensorRef, node: ast.AST) -> FValue:
        if t.is_shared:
            return Py(t.type.num_elements)
        return self.value("tensor_size", [t.value], node, hint=f"{t.name}_size")

    # ------------------------------------------------------------ operators
    def expr_BinOp(self, node: ast.BinOp) -> FValue:
        """A chain ``a + b - c * d ...`` (left-nested BinOps) is lowered in a loop, left to right, so that a
        generated expression of thousands of terms does not recurse once per term."""
        chain = [node]
        while isinstance(chain[-1].left, ast.BinOp):
            chain.append(chain[-1].left)  # type: ignore[arg-type]
        ops = []
        for n in chain:
            op = BINOPS.get(type(n.op))
            if op is None:
                raise self.error(UnsupportedSyntaxError, "the '@' operator is not supported", n,
                                 hint="use fragments and mma() for matrix products")
            ops.append(op)
        value = self.lower_expr(chain[-1].left)
        saved = self.b.loc
        try:
            for n, op in zip(reversed(chain), reversed(ops)):
                right = self.lower_expr(n.right)
                self.b.loc = self.loc(n)
                value = self.binary(op, value, right, n)
        finally:
            self.b.loc = saved
        return value

    def binary(self, op: str, a: FValue, b: FValue, node: ast.AST) -> FValue:
        if _is_fragment(a) or _is_fragment(b):
            return self.fragment_binary(op, a, b, node)
        if isinstance(a, Py) and isinstance(b, Py):
            try:
                return Py(fold_binary(op, a.value, b.value))
            except FoldError as e:
                raise self.type_error(str(e), node) from None
        if op == "**":
            return self.power(a, b, node)
        same = _integer_identity(op, a, b)
        if same is not None:
            return same
        if op in ("&", "|", "^"):
            x, y = self.unify([a, b], node, op, allow_bool=True)
            if x.dtype.is_float:
                raise self.type_error(f"'{op}' needs integer or bool operands, got {x.dtype.name}", node,
                                      hint="reinterpret the bits with bitcast(x, u32) first")
            return self.value(_SIMPLE_OPS[op], [x.value, y.value], node)
        x, y = self.unify([a, b], node, op)
        if op in ("<<", ">>") and x.dtype.is_float:
            raise self.type_error(f"'{op}' needs integer operands, got {x.dtype.name}", node)
        if op == "/":
            if x.dtype.is_int:  # true division of integers gives f32
                x, y = self.convert(x, D.f32, node), self.convert(y, D.f32, node)
            return self.value("div", [x.value, y.value], node)
        if op == "//":
            q = self.value("div", [x.value, y.value], node)
            return self.value("floor", [q.value], node) if x.dtype.is_float else q
        return self.value(_SIMPLE_OPS[op], [x.value, y.value], node)

    def fragment_binary(self, op: str, a: FValue, b: FValue, node: ast.AST) -> FValue:
        """``acc + x``, ``acc - x``, ``acc * x``, ``max(acc, x)``, ``min(acc, x)`` (either side): element by element
        over an accumulator fragment
        and another of its type, or a scalar (a number, or a value that converts to the fragment's dtype
        without loss), the same on every lane of the subgroup (docs/language.md)."""
        fn = _FRAGMENT_FNS.get(op)
        frag = a if _is_fragment(a) else b
        ft = frag.type  # type: ignore[union-attr]
        if fn is None:
            raise self.type_error(f"'{op}' cannot take a fragment ({ft})", node,
                                  hint="fragments add, subtract, multiply and compare element by element (+, -, *, "
                                       "max, min)")
        if ft.role != "acc":
            raise self.type_error(f"'{op}' takes accumulator fragments (frag_acc), got {ft}", node,
                                  hint="A and B fragments only go into mma()")
        operands = []
        for v in (a, b):
            if _is_fragment(v):
                if v.type != ft:  # type: ignore[union-attr]
                    raise self.type_error(f"'{op}' between fragments of {a.type} and {b.type}: "  # type: ignore
                                          "they must have one type", node)
                operands.append(v.value)  # type: ignore[union-attr]
                continue
            dt = self.operand_dtype(v, node, op)
            if dt is None:
                operands.append(self.materialize(v, node, ft.dtype).value)
            elif isinstance(v.type, ScalarType) and promote(dt, ft.dtype) == ft.dtype:  # type: ignore[union-attr]
                operands.append(self.convert(v, ft.dtype, node).value)  # type: ignore[arg-type]
            else:
                raise self.type_error(f"'{op}' of a {ft} and {describe(v)}: the scalar must convert to "
                                      f"{ft.dtype.name} without loss", node, hint=f"cast it: {ft.dtype.name}(x)")
        return self.value("frag_binary", operands, node, fn=fn)

    def power(self, a: FValue, b: FValue, node: ast.AST) -> FValue:
        """``a ** b``: a small constant integer exponent multiplies; otherwise float ``pow``."""
        if isinstance(b, Py) and isinstance(b.value, int) and not isinstance(b.value, bool) and isinstance(a, RV):
            n = b.value
            (x,) = self.unify([a], node, "**")
            if x.dtype.is_int and n >= 0:
                return self.int_power(x, n, node)
            if n == 1:
                return x
            if n == 2:
                return self.value("mul", [x.value, x.value], node)
        x, y = self.unify([a, b], node, "**")
        if x.dtype.is_int:
            x, y = self.convert(x, D.f32, node), self.convert(y, D.f32, node)
        return self.value("pow", [x.value, y.value], node)

    def int_power(self, x: RV, n: int, node: ast.AST) -> RV:
        """x ** n for an integer x by squaring (wrapping like every integer op)."""
        result: RV | None = None
        square = x
        while n:
            if n & 1:
                result = square if result is None else self.value("mul", [result.value, square.value], node)
            n >>= 1
            if n:
                square = self.value("mul", [square.value, square.value], node)
        return result if result is not None else self.const(1, x.type)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> FValue:
        op = _UNOPS[type(node.op)]
        v = self.lower_expr(node.operand)
        if isinstance(v, Py):
            try:
                return Py(fold_unary(op, v.value))
            except FoldError as e:
                raise self.type_error(str(e), node) from None
        if op == "not":
            c = self.to_bool(v, node)
            return Py(not c.value) if isinstance(c, Py) else self.value("lnot", [c.value], node)
        (x,) = self.unify([v], node, op)
        if op == "+":
            return x
        if op == "-":
            return self.value("neg", [x.value], node)
        if not x.dtype.is_int:
            raise self.type_error(f"'~' needs an integer, got {x.dtype.name}", node,
                                  hint="use 'not' for a bool")
        return self.value("bnot", [x.value], node)

    def expr_Compare(self, node: ast.Compare) -> FValue:
        left = self.lower_expr(node.left)
        result: FValue | None = None
        for op_node, right_node in zip(node.ops, node.comparators):
            right = self.lower_expr(right_node)
            r = self.compare(_CMPOPS[type(op_node)], left, right, node)
            result = r if result is None else self.logical_and(result, r, node)
            left = right
        assert result is not None
        return result

    def compare(self, op: str, a: FValue, b: FValue, node: ast.AST) -> FValue:
        if op in ("in", "not in"):
            raise self.error(UnsupportedSyntaxError, f"'{op}' is not supported in kernels", node,
                             hint="compare with == explicitly")
        if isinstance(a, Py) and isinstance(b, Py):
            try:
                return Py(fold_compare(op, a.value, b.value))
            except FoldError as e:
                raise self.type_error(str(e), node) from None
        if op in ("is", "is not"):
            raise self.error(UnsupportedSyntaxError, f"'{op}' compares compile-time values only", node,
                             hint="use == and != for run-time values")
        x, y = self.unify([a, b], node, op, allow_bool=op in ("==", "!="))
        return self.value(_CMP_IR[op], [x.value, y.value], node)

    def logical_and(self, a: FValue, b: FValue, node: ast.AST) -> FValue:
        ca, cb = self.to_bool(a, node), self.to_bool(b, node)
        if isinstance(ca, Py):
            return cb if ca.value else ca
        if isinstance(cb, Py):
            return ca if cb.value else cb
        return self.value("land", [ca.value, cb.value], node)

    def expr_BoolOp(self, node: ast.BoolOp) -> FValue:
        is_and = isinstance(node.op, ast.And)
        current = self.lower_expr(node.values[0])
        for right_node in node.values[1:]:
            if isinstance(current, Py):
                # Python semantics for a compile-time left side: it decides, or the right side is the result.
                if bool(current.value) != is_and:
                    return current
                current = self.lower_expr(right_node)
                continue
            left = self.bool_value(current, node)
            if self.may_fault_or_effect(right_node):
                current = self.short_circuit(left, right_node, is_and, node)
                continue
            right = self.to_bool(self.lower_expr(right_node), right_node)
            if isinstance(right, Py):
                current = left if bool(right.value) == is_and else right
            else:
                current = self.value("land" if is_and else "lor", [left.value, right.value], node)
        return current

    def short_circuit(self, left: RV, right_node: ast.expr, is_and: bool, node: ast.AST) -> RV:
        """``left and right`` evaluating ``right`` only when needed: a temporary and an ``if``."""
        slot = self.new_slot("and" if is_and else "or", ScalarType(D.bool_), node)
        self.emit("var_store", [slot.var, left.value], node)
        if_op = self.b.if_(left.value)
        with self.b.at(if_op.regions[0 if is_and else 1]):
            self.env.enter("if", [])
            try:
                right = self.bool_value(self.lower_expr(right_node), right_node)
                self.emit("var_store", [slot.var, right.value], node)
            finally:
                self.env.exit()
        return self.value("var_load", [slot.var], node)

    def expr_IfExp(self, node: ast.IfExp) -> FValue:
        c = self.to_bool(self.lower_expr(node.test), node.test)
        if isinstance(c, Py):
            return self.lower_expr(node.body if c.value else node.orelse)
        a, b = self.lower_expr(node.body), self.lower_expr(node.orelse)
        x, y = self.unify([a, b], node, "if-else", allow_bool=True, nodes=[node.body, node.orelse])
        return self.value("select", [c.value, x.value, y.value], node)

    # ------------------------------------------------------------ subscripts
    def expr_Subscript(self, node: ast.Subscript) -> FValue:
        base = self.lower_expr(node.value)
        if isinstance(base, TensorRef):
            ref = self.element_ref(base, node)
            return self.value("load", [ref.tensor.value, ref.index.value], node)
        if isinstance(base, RegArray):
            i = self.register_index(base, node)
            return self.read_slot(f"{base.name}_{i}", _slot_of(base, i))
        if isinstance(base, RV) and isinstance(base.type, VectorType):
            i = self.constant_index(node.slice, base.type.width, "vector", node)
            return self.value("vec_extract", [base.value], node, index=i)
        if isinstance(base, TupleVal):
            return base.items[self.constant_index(node.slice, len(base.items), "tuple", node)]
        if isinstance(base, Py) and isinstance(base.value, (tuple, list, str)):
            return self.py_object(base.value[self.constant_index(node.slice, len(base.value), "tuple", node)],
                                  node)
        if isinstance(base, Py) and hasattr(base.value, "__getitem__"):
            key = self.lower_expr(node.slice)
            if isinstance(key, Py):
                try:
                    return self.py_object(base.value[key.value], node)
                except (KeyError, IndexError, TypeError) as e:
                    raise self.type_error(f"cannot index {describe(base)} with {key.value!r}: {e}", node) from None
            if is_host_array(base.value):
                raise self.type_error(f"{describe(base)} cannot be indexed with a run-time index", node,
                                      hint=HOST_ARRAY_HINT)
        raise self.type_error(f"{describe(base)} cannot be indexed", node,
                              hint="kernels index tensors, shared and register arrays, vectors and tuples of constants")

    def lower_ref(self, node: ast.expr) -> FValue:
        """An argument that may be an element address (``a[i]`` in ``load(a[i])``)."""
        if isinstance(node, ast.Subscript):
            saved = self.b.loc
            self.b.loc = self.loc(node)
            try:
                base = self.lower_expr(node.value)
                if isinstance(base, TensorRef):
                    return self.element_ref(base, node)
            finally:
                self.b.loc = saved
        return self.lower_expr(node)

    def element_ref(self, t: TensorRef, node: ast.Subscript) -> ElemRef:
        """``t[i]`` (or ``s[i, j]`` on a shared array, flattened row-major) as an address."""
        sl = node.slice
        if isinstance(sl, ast.Slice) or (isinstance(sl, ast.Tuple) and any(isinstance(e, ast.Slice)
                                                                            for e in sl.elts)):
            raise self.error(UnsupportedSyntaxError, "slices are not supported", node,
                             hint="index one element at a time, or use .load(i, width=W) for a vector")
        idx_nodes = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        shape = t.type.shape if t.is_shared else None
        if len(idx_nodes) > 1 and (shape is None or len(idx_nodes) != len(shape)):
            got = len(idx_nodes)
            if shape is None:
                raise self.type_error(f"{describe(t)} takes one flat index, got {got}", node,
                                      hint=f"a tensor parameter is flat (an array of any shape arrives as its "
                                      f"C-contiguous elements): index it row-major with one index, e.g. "
                                      f"{t.name}[i * ncols + j]")
            raise self.type_error(f"{describe(t)} has {len(shape)} dimensions {tuple(shape)}, got {got} indices",
                                  node, hint=f"index it with {len(shape)} indices, or one flat row-major index")
        indices = [self.lower_expr(n) for n in idx_nodes]
        for v, n in zip(indices, idx_nodes):
            if isinstance(v, Py) and isinstance(v.value, int) and not isinstance(v.value, bool) and v.value < 0:
                raise self.type_error(f"negative index {v.value} into {describe(t)}", n,
                                      hint="kernels index from the start: there is no a[-1]")
        if len(indices) == 1:
            flat = indices[0]
        else:
            assert shape is not None
            flat = indices[0]
            for dim, (v, n) in enumerate(zip(indices[1:], idx_nodes[1:]), start=1):
                if isinstance(v, Py) and isinstance(v.value, int) and v.value >= shape[dim]:
                    raise self.type_error(f"index {v.value} is out of range for dimension {dim} of "
                                          f"{describe(t)}", n)
                flat = self.binary("+", self.binary("*", flat, Py(shape[dim]), node), v, node)
        size = t.type.num_elements
        if size is not None and isinstance(flat, Py) and isinstance(flat.value, int) and flat.value >= size:
            raise self.type_error(f"index {flat.value} is out of range for {describe(t)}", node)
        return ElemRef(t, self.to_index(flat, node))

    def constant_index(self, sl: ast.expr, length: int, what: str, node: ast.AST) -> int:
        v = self.lower_expr(sl)
        if not (isinstance(v, Py) and isinstance(v.value, int) and not isinstance(v.value, bool)):
            raise self.error(RegisterIndexError, f"a {what} index must be a compile-time int, got {describe(v)}",
                             node, hint="index with a constant or a static_range loop variable")
        i = v.value + length if v.value < 0 else v.value
        if not 0 <= i < length:
            raise self.type_error(f"index {v.value} is out of range for a {what} of {length}", node)
        return i

    def register_index(self, arr: RegArray, node: ast.Subscript) -> int:
        return self.constant_index(node.slice, len(arr.slots), f"register array '{arr.name}'", node)

    # ------------------------------------------------------------ register arrays
    def register_array_literal(self, node: ast.List) -> RegArray:
        if not node.elts:
            raise self.type_error("an empty list has no element type", node, hint="use local(dtype, n)")
        items = [self.lower_expr(e) for e in node.elts]
        values = self.unify(items, node, "list", allow_bool=True, nodes=node.elts)
        name = self.assign_hint or "list"
        arr = self.new_register_array(name, values[0].type, len(values), node)
        for slot, v in zip(arr.slots, values):
            self.emit("var_store", [slot, v.value], node)
        return arr

    def new_register_array(self, name: str, elem: Any, n: int, node: ast.AST) -> RegArray:
        slots = tuple(self.new_slot(f"{name}_{i}", elem, node).var for i in range(n))
        return RegArray(slots, elem, name)

    # ------------------------------------------------------------ short-circuit safety
    def may_fault_or_effect(self, node: ast.expr) -> bool:
        """Whether evaluating ``node`` may load, call a helper or have an effect (so must not be speculated)."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Subscript):
                return True
            if isinstance(sub, ast.Call) and not self._is_pure_callee(sub.func):
                return True
        return False

    def _is_pure_callee(self, func: ast.expr) -> bool:
        obj = self.static_lookup(func)
        if isinstance(obj, Builtin):
            return obj.pure
        return isinstance(obj, (DType, TypeVar)) or any(obj is f for f in _PURE_PYTHON_BUILTINS)

    def static_lookup(self, func: ast.expr) -> Any:
        """The object a callee expression names, without emitting anything (None if unknown)."""
        if isinstance(func, ast.Name):
            binding = self.env.get(func.id)
            if binding is not None:
                value = getattr(binding, "value", None)
                return value.value if isinstance(value, Py) else None
            if func.id in self.names:
                return self.names[func.id]
            return self.parsed.lookup(func.id)
        if isinstance(func, ast.Attribute):
            base = self.static_lookup(func.value)
            return getattr(base, func.attr, None) if base is not None else None
        return None


def _integer_identity(op: str, a: FValue, b: FValue) -> RV | None:
    """``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x`` on an integer value: ``x`` itself.

    Unrolled static_range bodies are full of these (``base + k`` with k = 0);
    skipping them keeps the frontend IR readable.  Floats are left alone
    (``-0.0 + 0`` is ``+0.0``).
    """
    def is_int(v: FValue) -> bool:
        return isinstance(v, RV) and isinstance(v.type, (ScalarType, VectorType)) and v.dtype.is_int

    def lit(v: FValue, n: int) -> bool:
        return isinstance(v, Py) and type(v.value) is int and v.value == n

    if op in ("+", "-") and is_int(a) and lit(b, 0) or op == "*" and is_int(a) and lit(b, 1):
        return a  # type: ignore[return-value]
    if op == "+" and is_int(b) and lit(a, 0) or op == "*" and is_int(b) and lit(a, 1):
        return b  # type: ignore[return-value]
    return None


def _slot_of(arr: RegArray, i: int) -> Slot:
    return Slot(arr.slots[i], arr.elem)


def _describe_node(node: ast.AST) -> str:
    names = {ast.Lambda: "lambda", ast.ListComp: "a list comprehension", ast.GeneratorExp: "a generator expression",
             ast.Dict: "a dict", ast.Set: "a set", ast.JoinedStr: "an f-string", ast.NamedExpr: "':='",
             ast.Starred: "'*' unpacking", ast.Slice: "a slice"}
    return names.get(type(node), f"the expression '{type(node).__name__}'")


def _close_attr(obj: Any, attr: str) -> str | None:
    close = difflib.get_close_matches(attr, [a for a in dir(obj) if not a.startswith("_")], n=3, cutoff=0.75)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else None


#: Python operators (and the ``max`` / ``min`` builtins) on fragments -> ``frag_binary``'s fn.
_FRAGMENT_FNS = {"+": "add", "-": "sub", "*": "mul", "max": "max", "min": "min"}


def _is_fragment(v: FValue) -> bool:
    return isinstance(v, RV) and isinstance(v.type, FragmentType)
