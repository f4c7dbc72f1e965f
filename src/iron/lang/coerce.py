"""Turning frontend values into IR values of the right type (docs/language.md, "Types and promotion").

Literals are weak: they take the type of the typed operand they meet, and
must fit it.  Typed operands meet at the promoted dtype (casts inserted
here); a scalar meeting a vector is splatted.  Every mismatch the user can
cause is a :class:`KernelTypeError` at the offending expression.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Sequence

from ..core import dtypes as D
from ..core.builder import normalize_const
from ..core.dtypes import DType
from ..core.errors import IronCompileError, KernelTypeError
from ..core.types import FragmentType, IRType, ScalarType, VectorType
from .lowering import LowererBase
from .promote import common_literal_dtype, literal_dtype, literal_fits, promote
from .values import RV, FValue, Py, describe


def _is_literal(v: FValue) -> bool:
    return isinstance(v, Py) and isinstance(v.value, (bool, int, float))


class Coercion(LowererBase):
    """Conversions between frontend values and typed IR values."""

    def materialize(self, v: FValue, node: ast.AST, dtype: DType | None = None) -> RV:
        """``v`` as an IR value; a literal becomes a constant of ``dtype`` (default: its own type)."""
        if isinstance(v, RV):
            return v
        if _is_literal(v):
            lit = v.value
            dt = dtype or literal_dtype(lit, None)
            if not literal_fits(lit, dt):
                raise self.type_error(f"the constant {lit!r} does not fit {dt.name}", node,
                                      hint="use a smaller value, or a wider type such as i64(...)")
            return self.const(lit, dt)
        raise self.type_error(f"expected a number, got {describe(v)}", node)

    def convert(self, rv: RV, dt: DType, node: ast.AST) -> RV:
        """``rv`` cast to ``dt`` (keeping a vector's width); no op when it already is."""
        if isinstance(rv.type, FragmentType):
            raise self.type_error(f"a fragment {rv.type} cannot be converted", node,
                                  hint="fragments only go through mma(), frag_store() and variables")
        if rv.dtype == dt:
            return rv
        return self.value("cast", [rv.value], node, to=dt)

    def splat(self, rv: RV, width: int, node: ast.AST) -> RV:
        if width == 1 or isinstance(rv.type, VectorType):
            return rv
        return self.value("vec_make", [rv.value] * width, node)

    def operand_dtype(self, v: FValue, node: ast.AST, op: str) -> DType | None:
        """The dtype of a typed operand, None for a literal; anything else is an error."""
        if _is_literal(v):
            return None
        if isinstance(v, RV) and isinstance(v.type, (ScalarType, VectorType)):
            return v.dtype
        if isinstance(v, RV):
            raise self.type_error(f"'{op}' cannot take a fragment ({v.type})", node,
                                  hint="fragments only go through mma(), frag_store() and variables")
        raise self.type_error(f"'{op}' cannot take {describe(v)}", node)

    def unify(self, values: Sequence[FValue], node: ast.AST, op: str, allow_bool: bool = False,
              nodes: Sequence[ast.AST] | None = None) -> list[RV]:
        """Promote operands to one type (docs/language.md) and convert them; at least one may be typed."""
        nodes = list(nodes) if nodes is not None else [node] * len(values)
        dts = [self.operand_dtype(v, n, op) for v, n in zip(values, nodes)]
        typed = [d for d in dts if d is not None]
        literals = [v.value for v, d in zip(values, dts) if d is None]  # type: ignore[union-attr]
        has_bool = any(d.is_bool for d in typed) or any(isinstance(x, bool) for x in literals)
        if has_bool:
            self._check_bool_mix(typed, literals, node, op, allow_bool)
        if typed:
            dt = typed[0]
            for d in typed[1:]:
                dt = promote(dt, d)
            if dt.is_int and any(isinstance(x, float) for x in literals):
                dt = D.f32  # a float literal with int operands: float wins, at f32
        else:
            dt = common_literal_dtype(literals)
        width = self._common_width(values, node, op)
        out = []
        for v, n in zip(values, nodes):
            if isinstance(v, RV):
                out.append(self.splat(self.convert(v, dt, n), width, n))
            else:
                lit = v.value  # type: ignore[union-attr]
                if not literal_fits(lit, dt):
                    raise self.type_error(f"the constant {lit!r} does not fit {dt.name}, the type of the other "
                                          f"operand of '{op}'", n, hint=f"convert the other operand first, "
                                                                         f"or use a constant that fits {dt.name}")
                t: IRType = VectorType(dt, width) if width > 1 else ScalarType(dt)
                out.append(self.const(lit, t))
        return out

    def _check_bool_mix(self, typed: list[DType], literals: list[Any], node: ast.AST, op: str,
                        allow_bool: bool) -> None:
        all_bool = all(d.is_bool for d in typed) and all(isinstance(x, bool) for x in literals)
        if not allow_bool:
            raise self.type_error(f"'{op}' on bool: bool takes no part in arithmetic", node,
                                  hint="convert it first, e.g. i32(flag), or use select(flag, a, b)")
        if not all_bool:
            raise self.type_error(f"'{op}' mixes bool with numbers", node,
                                  hint="convert the bool with i32(x), or compare the number: x != 0")

    def _common_width(self, values: Sequence[FValue], node: ast.AST, op: str) -> int:
        widths = {v.type.width for v in values if isinstance(v, RV) and isinstance(v.type, VectorType)}
        if len(widths) > 1:
            raise self.type_error(f"'{op}' on vectors of different widths {sorted(widths)}", node)
        return widths.pop() if widths else 1

    # ------------------------------------------------------------ special shapes
    def to_index(self, v: FValue, node: ast.AST, what: str = "index") -> RV:
        """An integer scalar (a literal becomes i32)."""
        if isinstance(v, Py) and isinstance(v.value, int) and not isinstance(v.value, bool):
            if not literal_fits(v.value, D.i32):
                raise self.type_error(f"the {what} {v.value} does not fit i32", node,
                                      hint="use an i64 value computed at run time, e.g. i64(x) * stride")
            return self.const(v.value, D.i32)
        if isinstance(v, RV) and isinstance(v.type, ScalarType) and v.dtype.is_int:
            return v
        got = describe(v)
        hint = "convert it with i32(x)" if isinstance(v, (Py, RV)) else None
        raise self.type_error(f"the {what} must be an integer, got {got}", node, hint=hint)

    def to_bool(self, v: FValue, node: ast.AST) -> Py | RV:
        """A condition: a compile-time bool, or a bool scalar (numbers compare with zero)."""
        if isinstance(v, Py):
            return Py(bool(v.value))
        if isinstance(v, RV) and isinstance(v.type, ScalarType):
            if v.dtype.is_bool:
                return v
            zero = self.const(0, v.dtype)
            return self.value("ne", [v.value, zero.value], node)
        raise self.type_error(f"a condition must be a scalar, got {describe(v)}", node,
                              hint="reduce a vector condition explicitly, e.g. c[0] and c[1]")

    def bool_value(self, v: FValue, node: ast.AST) -> RV:
        c = self.to_bool(v, node)
        return c if isinstance(c, RV) else self.const(c.value, D.bool_)

    def static_int(self, v: FValue, node: ast.AST, what: str,
                   cls: type[IronCompileError] = KernelTypeError) -> int:
        if isinstance(v, Py) and isinstance(v.value, int) and not isinstance(v.value, bool):
            return v.value
        raise self.error(cls, f"{what} must be a compile-time int, got {describe(v)}", node,
                         hint=None if cls is not KernelTypeError else
                         "use a literal, a constant defined outside the kernel, a variant value or a Constexpr")

    def static_dtype(self, v: FValue, node: ast.AST, what: str = "the dtype") -> DType:
        if isinstance(v, Py):
            x = v.value
            if isinstance(x, DType):
                return x
            if isinstance(x, type) and x in (int, float, bool):
                return {int: D.i32, float: D.f32, bool: D.bool_}[x]
        raise self.type_error(f"{what} must be a dtype such as f32 or T, got {describe(v)}", node)

    def cast_value(self, v: FValue, dt: DType, node: ast.AST) -> RV:
        """``dt(v)``: a cast with the IR's conversion semantics (a literal folds to a typed constant)."""
        if _is_literal(v):
            return self.const(static_cast(v.value, dt), dt)
        if isinstance(v, RV) and isinstance(v.type, (ScalarType, VectorType)):
            return self.convert(v, dt, node)
        raise self.type_error(f"cannot convert {describe(v)} to {dt.name}", node)


def static_cast(x: bool | int | float, dt: DType) -> Any:
    """A literal converted like the IR's ``cast`` (ints wrap, floats truncate and saturate, NaN gives 0)."""
    if dt.is_bool:
        return x != 0
    if dt.is_float:
        return float(x)
    if isinstance(x, float):
        if math.isnan(x):
            return 0
        if math.isinf(x):
            return D.max_value(dt) if x > 0 else D.min_value(dt)
        v = math.trunc(x)
        return max(D.min_value(dt), min(D.max_value(dt), v))  # type: ignore[type-var]
    return normalize_const(int(x), ScalarType(dt))
