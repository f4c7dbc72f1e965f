"""Matrix-fragment builtins: frag_a, frag_b, frag_acc, frag_load_acc, frag_store, mma."""

from __future__ import annotations

from typing import Any

from ...core.types import MMA_SHAPES, FragmentType, ScalarType
from ..lower_call import CallArgs, handles
from ..values import RV, FValue, Py, TensorRef, describe
from .memory import check_writable

_ROLE_DIMS = {"a": ("M", "K"), "b": ("K", "N"), "acc": ("M", "N")}


def _shapes_for(role: str) -> list[tuple[int, int]]:
    out = []
    for m, n, k in MMA_SHAPES:
        shape = {"a": (m, k), "b": (k, n), "acc": (m, n)}[role]
        if shape not in out:
            out.append(shape)
    return out


def _dims(lw: Any, a: CallArgs, role: str) -> tuple[int, int]:
    names = _ROLE_DIMS[role]
    rows, cols = (lw.static_int(a[n], a.node_of(n), f"fragment dimension {n}") for n in names)
    if (rows, cols) not in _shapes_for(role):
        valid = ", ".join(f"{r}x{c}" for r, c in _shapes_for(role))
        raise lw.type_error(f"no mma shape has a{'n' if role == 'acc' else ''} {role} fragment of "
                            f"{names[0]}={rows} x {names[1]}={cols}", a.node,
                            hint=f"{role} fragments are {names[0]} x {names[1]} in {valid} "
                                 f"(mma shapes M x N x K: {', '.join('x'.join(map(str, s)) for s in MMA_SHAPES)})")
    return rows, cols


def _layout(lw: Any, a: CallArgs) -> str:
    v = a["layout"]
    if not (isinstance(v, Py) and v.value in ("row", "col")):
        raise lw.type_error(f"layout must be \"row\" or \"col\", got {describe(v)}", a.node_of("layout"))
    return v.value


def _tensor(lw: Any, a: CallArgs) -> TensorRef:
    t = a["t"]
    if not isinstance(t, TensorRef):
        raise lw.type_error(f"{a.name}() reads a tensor or shared array, got {describe(t)}", a.node_of("t"))
    if not t.type.dtype.is_float:
        raise lw.type_error(f"fragments hold floats; '{t.name}' holds {t.type.dtype.name}", a.node_of("t"))
    return t


def _load(lw: Any, a: CallArgs, role: str) -> FValue:
    t = _tensor(lw, a)
    base = lw.to_index(a["base"], a.node_of("base"), "base index")
    ld = lw.to_index(a["ld"], a.node_of("ld"), "leading dimension")
    rows, cols = _dims(lw, a, role)
    return lw.value("frag_load", [t.value, base.value, ld.value], a.node, role=role, dtype=t.type.dtype, rows=rows,
                    cols=cols, layout=_layout(lw, a))


@handles("frag_a")
def frag_a(lw: Any, a: CallArgs) -> FValue:
    return _load(lw, a, "a")


@handles("frag_b")
def frag_b(lw: Any, a: CallArgs) -> FValue:
    return _load(lw, a, "b")


@handles("frag_load_acc")
def frag_load_acc(lw: Any, a: CallArgs) -> FValue:
    return _load(lw, a, "acc")


@handles("frag_acc")
def frag_acc(lw: Any, a: CallArgs) -> FValue:
    dt = lw.static_dtype(a["dtype"], a.node_of("dtype"))
    if not dt.is_float:
        raise lw.type_error(f"fragments hold floats, got {dt.name}", a.node_of("dtype"))
    rows, cols = _dims(lw, a, "acc")
    fill = lw.value_for_type(a["value"], ScalarType(dt), a.node_of("value"), what="the accumulator")
    return lw.value("frag_fill", [fill.value], a.node, role="acc", dtype=dt, rows=rows, cols=cols)


def _fragment(lw: Any, a: CallArgs, name: str, role: str) -> RV:
    v = a[name]
    if not (isinstance(v, RV) and isinstance(v.type, FragmentType) and v.type.role == role):
        made_by = {"a": "frag_a()", "b": "frag_b()", "acc": "frag_acc() or frag_load_acc()"}[role]
        raise lw.type_error(f"{a.name}() needs {'an' if role != 'b' else 'a'} {role} fragment as '{name}', got "
                            f"{describe(v)}", a.node_of(name), hint=f"make it with {made_by}")
    return v


@handles("frag_store")
def frag_store(lw: Any, a: CallArgs) -> FValue:
    t = _tensor(lw, a)
    check_writable(lw, t, a.node)
    base = lw.to_index(a["base"], a.node_of("base"), "base index")
    ld = lw.to_index(a["ld"], a.node_of("ld"), "leading dimension")
    acc = _fragment(lw, a, "acc", "acc")
    if acc.dtype != t.type.dtype:
        raise lw.type_error(f"an accumulator of {acc.dtype.name} stored to '{t.name}' of {t.type.dtype.name}",
                            a.node_of("acc"))
    lw.emit("frag_store", [t.value, base.value, ld.value, acc.value], a.node, layout=_layout(lw, a))
    return Py(None)


@handles("mma")
def mma(lw: Any, a: CallArgs) -> FValue:
    fa, fb, fc = _fragment(lw, a, "a", "a"), _fragment(lw, a, "b", "b"), _fragment(lw, a, "acc", "acc")
    return lw.value("mma", [fa.value, fb.value, fc.value], a.node)
