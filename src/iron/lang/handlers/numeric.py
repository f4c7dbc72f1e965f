"""Math, casts and vector builtins.

Float-only intrinsics (``exp``, ``sqrt``...) convert an integer argument to
f32, the way ``/`` does; compile-time arguments fold in Python precision.
"""

from __future__ import annotations

from typing import Any

from ...core import dtypes as D
from ...core.ops import FLOAT_UNARY
from ...core.types import FragmentType, ScalarType, VectorType
from ..fold import STATIC_MATH, FoldError
from ..lower_call import CallArgs, handles
from ..values import RV, FValue, Py, describe

_FLOAT_PREDICATES = ("isnan", "isinf", "isfinite")


def _static_numbers(lw: Any, a: CallArgs, values: list[FValue], names: list[str]) -> list[Any] | None:
    """The Python numbers when every argument is a compile-time number; None if any is run-time."""
    if not all(isinstance(v, Py) for v in values):
        return None
    out = []
    for v, n in zip(values, names):
        x = v.value  # type: ignore[union-attr]
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise lw.type_error(f"{a.name}() needs a number, got {describe(v)}", a.node_of(n))
        out.append(x)
    return out


def _to_float(lw: Any, rv: RV, node: Any) -> RV:
    return lw.convert(rv, D.f32, node) if rv.dtype.is_int else rv


def _fragment(v: FValue) -> bool:
    return isinstance(v, RV) and isinstance(v.type, FragmentType)


def _fragment_unary(lw: Any, a: CallArgs, x: RV) -> FValue:
    """``exp(acc)`` and the other float functions (and ``abs``) of an accumulator, element by element."""
    if x.type.role != "acc" or a.name in _FLOAT_PREDICATES or a.name == "sign":
        raise lw.type_error(f"{a.name}() of a fragment ({x.type}): accumulators take the float functions and abs, "
                            "element by element", a.node_of("x"), hint="A and B fragments only go into mma()")
    return lw.value("frag_unary", [x.value], a.node, fn=a.name)


@handles(*FLOAT_UNARY, *_FLOAT_PREDICATES)
def float_unary(lw: Any, a: CallArgs) -> FValue:
    x, node = a["x"], a.node_of("x")
    if _fragment(x):
        return _fragment_unary(lw, a, x)
    static = _static_numbers(lw, a, [x], ["x"])
    if static is not None:
        return Py(STATIC_MATH[a.name](*static))
    (rv,) = lw.unify([x], node, a.name)
    return lw.value(a.name, [_to_float(lw, rv, node).value], a.node)


@handles("abs", "sign")
def numeric_unary(lw: Any, a: CallArgs) -> FValue:
    x, node = a["x"], a.node_of("x")
    if _fragment(x):
        return _fragment_unary(lw, a, x)
    static = _static_numbers(lw, a, [x], ["x"])
    if static is not None:
        return Py(STATIC_MATH[a.name](*static))
    (rv,) = lw.unify([x], node, a.name)
    return lw.value(a.name, [rv.value], a.node)


@handles("pow", "atan2")
def float_binary(lw: Any, a: CallArgs) -> FValue:
    names = list(a.builtin.signature.parameters)
    values = [a[n] for n in names]
    static = _static_numbers(lw, a, values, names)
    if static is not None:
        try:
            return Py(STATIC_MATH[a.name](*static))
        except (FoldError, ValueError) as e:
            raise lw.type_error(f"{a.name}(): {e}", a.node) from None
    x, y = lw.unify(values, a.node, a.name, nodes=[a.node_of(n) for n in names])
    x, y = _to_float(lw, x, a.node), _to_float(lw, y, a.node)
    return lw.value(a.name, [x.value, y.value], a.node)


@handles("min", "max")
def min_max(lw: Any, a: CallArgs) -> FValue:
    values = [a["a"], a["b"], *a["more"]]
    nodes = [a.node_of("a"), a.node_of("b"), *a.nodes_of("more")]
    if any(_fragment(v) for v in values):  # an accumulator against another or a scalar, element by element
        result = values[0]
        for v in values[1:]:
            result = lw.fragment_binary(a.name, result, v, a.node)
        return result
    static = _static_numbers(lw, a, values, ["a", "b"] + ["more"] * len(a["more"]))
    if static is not None:
        return Py(min(static) if a.name == "min" else max(static))
    rvs = lw.unify(values, a.node, a.name, nodes=nodes)
    result = rvs[0]
    for rv in rvs[1:]:
        result = lw.value(a.name, [result.value, rv.value], a.node)
    return result


@handles("fma")
def fma(lw: Any, a: CallArgs) -> FValue:
    names = ["a", "b", "c"]
    values = [a[n] for n in names]
    static = _static_numbers(lw, a, values, names)
    if static is not None:
        return Py(STATIC_MATH["fma"](*static))
    rvs = [_to_float(lw, rv, a.node) for rv in lw.unify(values, a.node, "fma", nodes=[a.node_of(n) for n in names])]
    return lw.value("fma", [rv.value for rv in rvs], a.node)


@handles("select")
def select(lw: Any, a: CallArgs) -> FValue:
    cond, cnode = a["cond"], a.node_of("cond")
    if isinstance(cond, Py):
        return a["a"] if cond.value else a["b"]
    x, y = lw.unify([a["a"], a["b"]], a.node, "select", allow_bool=True, nodes=[a.node_of("a"), a.node_of("b")])
    if isinstance(cond, RV) and isinstance(cond.type, VectorType):
        if not cond.dtype.is_bool:
            raise lw.type_error(f"select() needs a bool condition, got {cond.type}", cnode)
        x, y = lw.splat(x, cond.type.width, a.node), lw.splat(y, cond.type.width, a.node)
        if x.type.width != cond.type.width:
            raise lw.type_error(f"select() condition {cond.type} and values {x.type} differ in width", a.node)
        c = cond
    else:
        c = lw.bool_value(cond, cnode)
    return lw.value("select", [c.value, x.value, y.value], a.node)


@handles("cast")
def cast(lw: Any, a: CallArgs) -> FValue:
    return lw.cast_value(a["x"], lw.static_dtype(a["dtype"], a.node_of("dtype")), a.node_of("x"))


@handles("bitcast")
def bitcast(lw: Any, a: CallArgs) -> FValue:
    dt = lw.static_dtype(a["dtype"], a.node_of("dtype"))
    rv = lw.materialize(a["x"], a.node_of("x"))
    if not isinstance(rv.type, (ScalarType, VectorType)):
        raise lw.type_error(f"bitcast() of {describe(rv)}", a.node_of("x"))
    if rv.dtype == dt:
        return rv
    if rv.dtype.bits != dt.bits:
        raise lw.type_error(f"bitcast() between types of different sizes: {rv.dtype.name} ({rv.dtype.bits} bits) "
                            f"to {dt.name} ({dt.bits} bits)", a.node, hint="bitcast keeps the bits: pick a dtype "
                                                                           "of the same size, or use cast()")
    return lw.value("bitcast", [rv.value], a.node, to=dt)


def widen_value(lw: Any, v: FValue, node: Any, what: str) -> RV:
    """f16/bf16/f8 -> f32 (f32 unchanged; a literal becomes an f32 constant)."""
    if isinstance(v, Py) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
        return lw.const(float(v.value), D.f32)
    if isinstance(v, RV) and isinstance(v.type, (ScalarType, VectorType)) and v.dtype.is_float and v.dtype.bits <= 32:
        return lw.convert(v, D.f32, node)
    raise lw.type_error(f"{what}() takes f16, bf16, f8 or f32 values, got {describe(v)}", node,
                        hint="for other types use an explicit cast such as f32(x)")


@handles("widen")
def widen(lw: Any, a: CallArgs) -> FValue:
    return widen_value(lw, a["x"], a.node_of("x"), "widen")


@handles("fma_f32")
def fma_f32(lw: Any, a: CallArgs) -> FValue:
    rvs = [widen_value(lw, a[n], a.node_of(n), "fma_f32") for n in ("a", "b", "acc")]
    rvs = lw.unify(rvs, a.node, "fma_f32")
    return lw.value("fma", [rv.value for rv in rvs], a.node)


@handles("vec")
def vec(lw: Any, a: CallArgs) -> FValue:
    elems = a["elems"]
    if len(elems) not in (2, 4, 8):
        raise lw.type_error(f"vec() builds vectors of 2, 4 or 8 elements, got {len(elems)}", a.node)
    for e in elems:
        if isinstance(e, RV) and not isinstance(e.type, ScalarType):
            raise lw.type_error(f"vector elements must be scalars, got {describe(e)}", a.node)
    rvs = lw.unify(list(elems), a.node, "vec", allow_bool=True)
    return lw.value("vec_make", [rv.value for rv in rvs], a.node)
