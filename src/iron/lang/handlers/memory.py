"""Memory builtins: loads, stores, vectors, shared arrays, barriers, atomics, register arrays.

``load``/``store``/atomics take an element either as ``a[i]`` or as
``a, i``; both give an :class:`ElemRef`.  A stored value converts only from
a weak literal (docs/language.md), and a store to an ``In[T]`` tensor is a
:class:`ReadOnlyStoreError`.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from ...core.errors import ArityError, ReadOnlyStoreError, SharedShapeError, UnsupportedSyntaxError
from ...core.types import TILE_BOX_MAX, TILE_LAYOUTS, TILE_RANK_MAX, VECTOR_WIDTHS, BarrierType, ScalarType, VectorType
from ..lower_call import CallArgs, handles, handles_method
from ..values import RV, ElemRef, FValue, Py, TensorRef, TupleVal, describe

#: The largest register array local() makes (each element is a register).
MAX_REGISTER_ARRAY = 1024


def element(lw: Any, a: CallArgs, target: str, index: str) -> tuple[ElemRef, bool]:
    """The element a call addresses, and whether its index came as a separate argument.

    ``f(a[i], ...)`` gives (a[i], False) and leaves ``index``'s parameter to
    the next operand; ``f(a, i, ...)`` gives (a[i], True).
    """
    ref = a[target]
    if isinstance(ref, ElemRef):
        return ref, False
    if isinstance(ref, TensorRef):
        if not a.given(index):
            raise lw.error(ArityError, f"{a.name}() needs an index: {a.builtin.usage}", a.node)
        raw = a[index]
        i = lw.to_index(raw, a.node_of(index))
        size = ref.type.num_elements
        if size is not None and isinstance(raw, Py) and raw.value >= size:
            raise lw.type_error(f"index {raw.value} is out of range for {describe(ref)}", a.node_of(index))
        return ElemRef(ref, i), True
    raise lw.type_error(f"{a.name}() needs a tensor element such as a[i] (or a tensor and an index), got "
                        f"{describe(ref)}", a.node_of(target), hint=f"usage: {a.builtin.usage}")


def _operands(lw: Any, a: CallArgs, separate: bool, names: list[str]) -> list[str]:
    """The parameters holding the value operands: shifted by one when the index was separate."""
    used = names[1:] if separate else names[:-1]
    unused = names[0] if separate else names[-1]
    if not all(a.given(n) for n in used) or (not separate and a.given(unused)):
        raise lw.error(ArityError, f"wrong arguments for {a.name}(); expected {a.builtin.usage}", a.node)
    return used


def check_writable(lw: Any, t: TensorRef, node: ast.AST, what: str = "store to") -> None:
    if t.type.readonly:
        raise lw.error(ReadOnlyStoreError, f"cannot {what} '{t.name}': it is declared In[{t.type.dtype.name}] "
                                           "(read-only)", node,
                       hint="declare it as Tensor[...] to write it, or write to another tensor")


def stored_value(lw: Any, t: TensorRef, v: FValue, node: ast.AST) -> RV:
    """The value a store writes: a weak literal converts; a typed value must be the element type."""
    dt = t.type.dtype
    if isinstance(v, RV) and isinstance(v.type, VectorType):
        raise lw.type_error(f"storing a vector {v.type} with a scalar store into '{t.name}'", node,
                            hint=f"use {t.name}.store(i, v) or vstore({t.name}, i, v)")
    if isinstance(v, RV) and v.type != ScalarType(dt):
        raise lw.type_error(f"'{t.name}' holds {dt.name}; the stored value is {v.type}", node,
                            hint=f"convert explicitly: {t.name}[i] = {dt.name}(value)")
    return lw.value_for_type(v, ScalarType(dt), node, what=f"'{t.name}'")


def store_element(lw: Any, ref: ElemRef, v: FValue, node: ast.AST, value_node: ast.AST) -> None:
    check_writable(lw, ref.tensor, node)
    rv = stored_value(lw, ref.tensor, v, value_node)
    lw.emit("store", [ref.tensor.value, ref.index.value, rv.value], node)


def load_element(lw: Any, ref: ElemRef, node: ast.AST) -> RV:
    return lw.value("load", [ref.tensor.value, ref.index.value], node)


@handles("load")
def load(lw: Any, a: CallArgs) -> FValue:
    ref, separate = element(lw, a, "target", "index")
    if not separate and a.given("index"):
        raise lw.error(ArityError, "load(a[i]) takes no separate index", a.node, hint=f"usage: {a.builtin.usage}")
    return load_element(lw, ref, a.node)


@handles("store")
def store(lw: Any, a: CallArgs) -> FValue:
    ref, separate = element(lw, a, "target", "index_or_value")
    (value_name,) = _operands(lw, a, separate, ["index_or_value", "value"])
    store_element(lw, ref, a[value_name], a.node, a.node_of(value_name))
    return Py(None)


def _tensor(lw: Any, a: CallArgs, name: str) -> TensorRef:
    t = a[name]
    if not isinstance(t, TensorRef):
        raise lw.type_error(f"{a.name}() needs a tensor or shared array, got {describe(t)}", a.node_of(name))
    return t


def _width(lw: Any, v: FValue, node: ast.AST) -> int:
    w = lw.static_int(v, node, "the vector width")
    if w not in VECTOR_WIDTHS:
        raise lw.type_error(f"vector width must be one of {VECTOR_WIDTHS}, got {w}", node)
    return w


def vector_load(lw: Any, t: TensorRef, i: FValue, width: FValue, node: ast.AST, i_node: ast.AST,
                w_node: ast.AST) -> RV:
    w = _width(lw, width, w_node)
    idx = lw.to_index(i, i_node)
    return lw.value("vload", [t.value, idx.value], node, width=w)


def vector_store(lw: Any, t: TensorRef, i: FValue, v: FValue, node: ast.AST, i_node: ast.AST,
                 v_node: ast.AST) -> None:
    check_writable(lw, t, node)
    idx = lw.to_index(i, i_node)
    if not (isinstance(v, RV) and isinstance(v.type, VectorType)):
        raise lw.type_error(f"a vector store needs a vector, got {describe(v)}", v_node,
                            hint="build one with vec(...) or a vector load")
    if v.dtype != t.type.dtype:
        raise lw.type_error(f"'{t.name}' holds {t.type.dtype.name}; the stored vector is {v.type}", v_node,
                            hint=f"convert it first: {t.type.dtype.name}(v)")
    lw.emit("vstore", [t.value, idx.value, v.value], node)


@handles("vload")
def vload(lw: Any, a: CallArgs) -> FValue:
    return vector_load(lw, _tensor(lw, a, "a"), a["i"], a["width"], a.node, a.node_of("i"), a.node_of("width"))


@handles("vstore")
def vstore(lw: Any, a: CallArgs) -> FValue:
    vector_store(lw, _tensor(lw, a, "a"), a["i"], a["v"], a.node, a.node_of("i"), a.node_of("v"))
    return Py(None)


@handles_method("load")
def tensor_load_value(lw: Any, t: TensorRef, a: CallArgs) -> FValue:
    """``t.load(i)`` (scalar) or ``t.load(i, width=W)`` (vector)."""
    if a.given("width") and not (isinstance(a["width"], Py) and a["width"].value is None):
        return vector_load(lw, t, a["i"], a["width"], a.node, a.node_of("i"), a.node_of("width"))
    return load_element(lw, ElemRef(t, lw.to_index(a["i"], a.node_of("i"))), a.node)


@handles_method("store")
def tensor_store_value(lw: Any, t: TensorRef, a: CallArgs) -> FValue:
    """``t.store(i, v)``: a vector store when ``v`` is a vector."""
    v = a["v"]
    if isinstance(v, RV) and isinstance(v.type, VectorType):
        vector_store(lw, t, a["i"], v, a.node, a.node_of("i"), a.node_of("v"))
    else:
        store_element(lw, ElemRef(t, lw.to_index(a["i"], a.node_of("i"))), v, a.node, a.node_of("v"))
    return Py(None)


@handles("copy_async")
def copy_async(lw: Any, a: CallArgs) -> FValue:
    dst, src = _tensor(lw, a, "dst"), _tensor(lw, a, "src")
    if dst.type.space != "shared":
        raise lw.type_error(f"copy_async() copies into a shared array; '{dst.name}' is a tensor argument",
                            a.node_of("dst"), hint="allocate the destination with shared(dtype, n)")
    if src.type.space != "global":
        raise lw.type_error(f"copy_async() copies from a tensor argument; '{src.name}' is a shared array",
                            a.node_of("src"), hint="copy between shared arrays with loads and stores")
    if dst.type.dtype != src.type.dtype:
        raise lw.type_error(f"copy_async() from {src.type.dtype.name} into {dst.type.dtype.name}: the dtypes must "
                            "match", a.node, hint="copy into a shared array of the source's dtype, then convert")
    w = lw.static_int(a["width"], a.node_of("width"), "the copy width")
    size = w * dst.type.dtype.itemsize
    if size not in (4, 8, 16):
        raise lw.type_error(f"copy_async() moves 4, 8 or 16 bytes; {w} x {dst.type.dtype.name} is {size}",
                            a.node_of("width"), hint=f"use width={16 // dst.type.dtype.itemsize}")
    check_writable(lw, dst, a.node)
    di = lw.to_index(a["dst_index"], a.node_of("dst_index"))
    si = lw.to_index(a["src_index"], a.node_of("src_index"))
    valid = lw.bool_value(a["valid"], a.node_of("valid") if a.given("valid") else a.node)
    lw.emit("copy_async", [dst.value, di.value, src.value, si.value, valid.value], a.node, width=w)
    return Py(None)


@handles("copy_tile")
def copy_tile(lw: Any, a: CallArgs) -> FValue:
    dst, src = _tile_tensors(lw, a, "dst", "src", "copies from a tensor argument into a shared array")
    check_writable(lw, dst, a.node)
    outer, rows, cols, tile = _tile_box(lw, a, dst, "copy_tile")
    di = _tile_index(lw, a, "dst_index", dst, tile, "copy_tile")
    shape, coords, ld = _tile_matrix(lw, a, len(outer))
    operands = [dst.value, di.value, src.value, shape[-2].value, shape[-1].value, ld.value, coords[-2].value,
                coords[-1].value, *_barrier_at(lw, a), *_outer_operands(shape, coords)]
    lw.emit("tile_copy", operands, a.node, box_rows=rows, box_cols=cols, layout=tile.name, **_outer_attr(outer),
            **_multicast(lw, a))
    return Py(None)


@handles("store_tile")
def store_tile(lw: Any, a: CallArgs) -> FValue:
    src, dst = _tile_tensors(lw, a, "src", "dst", "stores from a shared array into a tensor argument")
    check_writable(lw, dst, a.node)
    outer, rows, cols, tile = _tile_box(lw, a, src, "store_tile")
    si = _tile_index(lw, a, "src_index", src, tile, "store_tile")
    shape, coords, ld = _tile_matrix(lw, a, len(outer))
    operands = [dst.value, shape[-2].value, shape[-1].value, ld.value, coords[-2].value, coords[-1].value, src.value,
                si.value, *_outer_operands(shape, coords)]
    lw.emit("tile_store", operands, a.node, box_rows=rows, box_cols=cols, layout=tile.name, **_outer_attr(outer))
    return Py(None)


def _multicast(lw: Any, a: CallArgs) -> dict[str, Any]:
    """The ``multicast`` attribute of a tile copy to every group of the cluster (none for a plain copy)."""
    v = a["multicast"]
    if not (isinstance(v, Py) and isinstance(v.value, bool)):
        raise lw.type_error(f"copy_tile()'s multicast is True or False, got {describe(v)}", a.node_of("multicast"))
    if v.value and lw.ctx.cluster_size is None:
        raise lw.type_error("copy_tile(..., multicast=True) copies into every group of the cluster, but the kernel "
                            "has no clusters (yet)", a.node_of("multicast"),
                            hint="rank = cluster_groups(size) at the kernel's top first")
    return {"multicast": True} if v.value else {}


def _outer_operands(shape: list[Any], coords: list[Any]) -> list[Any]:
    """A tile copy's or store's operands past those of a matrix: the outer axes' extents, then coordinates."""
    return [v.value for v in shape[:-2]] + [v.value for v in coords[:-2]]


def _outer_attr(outer: list[int]) -> dict[str, Any]:
    """The ``box_outer`` attribute of a box with outer axes (a matrix's box has none, so its op is as before)."""
    return {"box_outer": tuple(outer)} if outer else {}


@handles("store_tile_wait")
def store_tile_wait(lw: Any, a: CallArgs) -> FValue:
    lw.emit("tile_store_wait", (), a.node)
    return Py(None)


def _tile_tensors(lw: Any, a: CallArgs, tile_name: str, matrix_name: str, moves: str) -> tuple[Any, Any]:
    """The shared tile and the global matrix of a tile copy or store: their spaces, and one dtype."""
    tile, matrix = _tensor(lw, a, tile_name), _tensor(lw, a, matrix_name)
    src, dst = (matrix, tile) if tile_name == "dst" else (tile, matrix)
    if tile.type.space != "shared" or matrix.type.space != "global":
        raise lw.type_error(f"{a.name}() {moves}; got {describe(src)} and {describe(dst)}", a.node)
    if tile.type.dtype != matrix.type.dtype:
        raise lw.type_error(f"{a.name}() from {src.type.dtype.name} into {dst.type.dtype.name}: the dtypes must "
                            "match", a.node)
    return tile, matrix


def _tile_box(lw: Any, a: CallArgs, shared_ref: Any, what: str) -> tuple[list[int], int, int, Any]:
    """The box (outer extents, rows, cols) and layout of a tile copy or store, checked against the tile's
    rules."""
    layout = a["layout"]
    if not (isinstance(layout, Py) and layout.value in TILE_LAYOUTS):
        raise lw.type_error(f"{what}()'s layout is one of {', '.join(map(repr, TILE_LAYOUTS))}, got "
                            f"{describe(layout)}", a.node_of("layout") if a.given("layout") else a.node)
    tile = TILE_LAYOUTS[layout.value]
    *outer, rows, cols = [lw.static_int(v, a.node_of("box"), "a box extent") for v in _axes(lw, a, "box", what)]
    item = shared_ref.type.dtype.itemsize
    tile_rows = rows * math.prod(outer)
    problem = None
    if not all(1 <= e <= TILE_BOX_MAX for e in (*outer, rows, cols)):
        problem = f"the box is 1 to {TILE_BOX_MAX} elements along each axis, got " \
                  f"{' x '.join(map(str, (*outer, rows, cols)))}"
    elif cols * item % 16 or (tile.row_bytes and cols * item != tile.row_bytes):
        need = f"{tile.row_bytes} bytes ({tile.row_bytes // item} x {shared_ref.type.dtype.name})" if tile.row_bytes \
            else "a multiple of 16 bytes"
        problem = f"a {tile.name} tile row spans {need}; the box's {cols} columns are {cols * item} bytes"
    elif tile.swizzled and tile_rows % 8:
        problem = f"a {tile.name} tile holds whole 8-row atoms; the box has {tile_rows} rows"
    if problem:
        raise lw.type_error(f"{what}(): {problem}", a.node_of("box"))
    return outer, rows, cols, tile


def _tile_index(lw: Any, a: CallArgs, name: str, shared_ref: Any, tile: Any, what: str) -> Any:
    """The shared tile's first element, checked against the layout's alignment where it is a constant."""
    v = a[name]
    item = shared_ref.type.dtype.itemsize
    if isinstance(v, Py) and isinstance(v.value, int) and v.value * item % tile.align:
        raise lw.type_error(f"{what}(): a {tile.name} tile starts on a {tile.align}-byte boundary; element "
                            f"{v.value} of {shared_ref.type.dtype.name} is byte {v.value * item}", a.node_of(name))
    return lw.to_index(v, a.node_of(name))


def _tile_matrix(lw: Any, a: CallArgs, outer: int) -> tuple[list[Any], list[Any], Any]:
    """The global tensor's shape, the box's coordinates in it (as many axes as the box: ``outer`` + 2), and its
    rows' stride (default: its cols; the outer axes are dense over the rows)."""
    axes = {}
    for name, what in (("shape", "tensor extent"), ("coords", "tile coordinate")):
        items = _axes(lw, a, name)
        if len(items) != outer + 2:
            raise lw.type_error(f"{a.name}()'s {name} has one entry per axis of the box ({outer + 2}), got "
                                f"{len(items)}", a.node_of(name))
        axes[name] = [lw.to_index(v, a.node_of(name), what) for v in items]
    shape = axes["shape"]
    ld = lw.to_index(a["ld"], a.node_of("ld"), "row stride") if a.given("ld") and not (
        isinstance(a["ld"], Py) and a["ld"].value is None) else shape[-1]
    return shape, axes["coords"], ld


def _axes(lw: Any, a: CallArgs, name: str, what: str = "") -> list:
    """A tile copy's or store's ``name`` tuple: 2 to TILE_RANK_MAX entries, outermost first."""
    v = a[name]
    items = v.items if isinstance(v, TupleVal) else v.value if isinstance(v, Py) and isinstance(v.value, tuple) \
        else None
    if items is None or not 2 <= len(items) <= TILE_RANK_MAX:
        raise lw.type_error(f"{what or a.name}()'s {name} is a tuple of 2 to {TILE_RANK_MAX} entries, outermost "
                            f"first ((rows, cols) for a matrix), got {describe(v)}", a.node_of(name))
    return [i if isinstance(i, (Py, RV)) else Py(i) for i in items]


@handles("copy_async_commit")
def copy_async_commit(lw: Any, a: CallArgs) -> FValue:
    lw.emit("copy_async_commit", (), a.node)
    return Py(None)


@handles("copy_async_wait")
def copy_async_wait(lw: Any, a: CallArgs) -> FValue:
    node = a.node_of("pending") if a.given("pending") else a.node
    n = lw.static_int(a["pending"], node, "the number of pending copy groups")
    if not 0 <= n <= 7:
        raise lw.type_error(f"copy_async_wait() leaves 0 to 7 committed groups pending, got {n}", node)
    lw.emit("copy_async_wait", (), a.node, pending=n)
    return Py(None)


@handles("shared")
def shared(lw: Any, a: CallArgs) -> FValue:
    dt = lw.static_dtype(a["dtype"], a.node_of("dtype"))
    shape_v, shape_node = a["shape"], a.node_of("shape")
    dims = shape_v.value if isinstance(shape_v, Py) and isinstance(shape_v.value, tuple) else (shape_v,)
    shape = []
    for d in dims:
        d = d if isinstance(d, (Py, RV, TensorRef)) else Py(d)
        n = lw.static_int(d, shape_node, "a shared-array dimension", cls=SharedShapeError)
        if n <= 0:
            raise lw.error(SharedShapeError, f"shared-array dimensions must be positive, got {n}", shape_node)
        shape.append(n)
    if lw.ctx.helper_stack:
        raise lw.error(UnsupportedSyntaxError, "shared() inside a helper", a.node,
                       hint="allocate the shared array in the kernel and pass it to the helper as an argument")
    if not lw.env.at_top:
        raise lw.error(UnsupportedSyntaxError, "shared() inside a run-time if, loop or short-circuit", a.node,
                       hint="allocate shared arrays at the top level of the kernel")
    name = lw.assign_hint or "shared"
    v = lw.emit("shared_alloc", (), a.node, hint=name, dtype=dt, shape=tuple(shape))
    return TensorRef(v, name)


@handles("barrier")
def barrier(lw: Any, a: CallArgs) -> FValue:
    lw.emit("barrier", (), a.node)
    return Py(None)


@handles("fence")
def fence(lw: Any, a: CallArgs) -> FValue:
    lw.emit("fence", (), a.node)
    return Py(None)


@handles("async_barriers")
def async_barriers(lw: Any, a: CallArgs) -> FValue:
    count = lw.static_int(a["count"], a.node_of("count"), "the number of barriers")
    node = a.node_of("arrivals") if a.given("arrivals") else a.node
    arrivals = lw.static_int(a["arrivals"], node, "the arrivals a phase takes")
    if count < 1 or arrivals < 1:
        raise lw.type_error(f"async_barriers() makes at least one barrier taking at least one arrival, got "
                            f"count={count}, arrivals={arrivals}", a.node)
    if lw.ctx.helper_stack or not lw.env.at_top:
        raise lw.error(UnsupportedSyntaxError, "async_barriers() inside a helper or under run-time control flow",
                       a.node, hint="make the barriers at the top level of the kernel (every thread of the group "
                                    "takes part) and pass them to helpers")
    return RV(lw.emit("abar_alloc", (), a.node, hint=lw.assign_hint or "bars", count=count, arrivals=arrivals))


def _barrier_at(lw: Any, a: CallArgs) -> list:
    """The barriers and the index a call names, checked."""
    bars = a["bars"]
    if not (isinstance(bars, RV) and isinstance(bars.type, BarrierType)):
        raise lw.type_error(f"{a.name}() takes barriers made by async_barriers(), got {describe(bars)}",
                            a.node_of("bars"), hint="bars = async_barriers(count, arrivals) at the kernel's top")
    raw = a["i"]
    if isinstance(raw, Py) and isinstance(raw.value, int) and not 0 <= raw.value < bars.type.count:
        raise lw.type_error(f"barrier {raw.value} of {bars.type.count}", a.node_of("i"))
    return [bars.value, lw.to_index(raw, a.node_of("i"), "barrier index").value]


@handles("barrier_arrive")
def barrier_arrive(lw: Any, a: CallArgs) -> FValue:
    node = a.node_of("bytes") if a.given("bytes") else a.node
    n = lw.static_int(a["bytes"], node, "the bytes a tile copy brings")
    if not 0 <= n < 1 << 20:
        raise lw.type_error(f"barrier_arrive() announces 0 to {(1 << 20) - 1} bytes, got {n}", node)
    if a.given("rank") and not (isinstance(a["rank"], Py) and a["rank"].value is None):
        if lw.ctx.cluster_size is None:
            raise lw.type_error("barrier_arrive(..., rank=) arrives on another group of the cluster, but the kernel "
                                "has no clusters (yet)", a.node_of("rank"),
                                hint="rank = cluster_groups(size) at the kernel's top first")
        if n:
            raise lw.type_error("barrier_arrive(..., rank=) announces no bytes: the group whose barrier it is "
                                "announces its own copies", node)
        raw = a["rank"]
        if isinstance(raw, Py) and isinstance(raw.value, int) and not 0 <= raw.value < lw.ctx.cluster_size:
            raise lw.type_error(f"rank {raw.value} of a cluster of {lw.ctx.cluster_size} groups", a.node_of("rank"))
        rank = lw.to_index(raw, a.node_of("rank"), "cluster rank")
        lw.emit("abar_arrive_peer", [*_barrier_at(lw, a), rank.value], a.node)
        return Py(None)
    lw.emit("abar_arrive", _barrier_at(lw, a), a.node, bytes=n)
    return Py(None)


@handles("barrier_wait")
def barrier_wait(lw: Any, a: CallArgs) -> FValue:
    operands = _barrier_at(lw, a)
    parity = lw.to_index(a["parity"], a.node_of("parity"), "phase parity")
    lw.emit("abar_wait", [*operands, parity.value], a.node)
    return Py(None)


@handles("copy_async_barrier")
def copy_async_barrier(lw: Any, a: CallArgs) -> FValue:
    lw.emit("abar_copies", _barrier_at(lw, a), a.node)
    return Py(None)


@handles("atomic_add", "atomic_max", "atomic_min", "atomic_xchg")
def atomic(lw: Any, a: CallArgs) -> FValue:
    ref, separate = element(lw, a, "target", "index_or_value")
    return _atomic(lw, a, ref, _operands(lw, a, separate, ["index_or_value", "value"]))


@handles("atomic_cas")
def atomic_cas(lw: Any, a: CallArgs) -> FValue:
    ref, separate = element(lw, a, "target", "arg1")
    return _atomic(lw, a, ref, _operands(lw, a, separate, ["arg1", "arg2", "arg3"]))


def _atomic(lw: Any, a: CallArgs, ref: ElemRef, value_names: list[str]) -> RV:
    check_writable(lw, ref.tensor, a.node, what=f"apply {a.name}() to")
    if ref.tensor.type.dtype.is_bool:
        raise lw.type_error(f"{a.name}() on a bool tensor", a.node)
    values = [stored_value(lw, ref.tensor, a[n], a.node_of(n)).value for n in value_names]
    return lw.value(a.name, [ref.tensor.value, ref.index.value, *values], a.node)


@handles("local")
def local(lw: Any, a: CallArgs) -> FValue:
    dt = lw.static_dtype(a["dtype"], a.node_of("dtype"))
    n = lw.static_int(a["n"], a.node_of("n"), "the size of a register array")
    if not 0 < n <= MAX_REGISTER_ARRAY:
        raise lw.type_error(f"a register array has 1 to {MAX_REGISTER_ARRAY} elements, got {n}", a.node_of("n"),
                            hint="use shared memory for larger arrays")
    arr = lw.new_register_array(lw.assign_hint or "local", ScalarType(dt), n, a.node)
    if not lw.env.at_top:  # slots are zero once, at the top; a re-run of this statement must re-zero them
        zero = lw.const(False if dt.is_bool else 0, dt)
        for slot in arr.slots:
            lw.emit("var_store", [slot, zero.value], a.node)
    return arr
