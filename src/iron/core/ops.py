"""The opcode table: what each IR op takes, returns and may do.

One table serves the builder (result types), the verifier (checks), the
passes (purity, commutativity) and the emitters (which category to render).
Type rules are plain functions over operand types and attributes; they raise
:class:`OpTypeError` with a readable reason when the operands do not fit.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from . import dtypes as D
from .types import (MMA_SHAPES, TILE_BOX_MAX, TILE_LAYOUTS, TILE_RANK_MAX, WG_ACC_SHAPES, WG_DTYPES, WG_N,
                    BarrierType, FragmentType, IRType, ScalarType, TensorType, TupleType, VarType,
                    VectorType, is_value_type, tile_rows, wg_k_step, wg_row, with_dtype)


class OpTypeError(Exception):
    """Operands or attributes do not fit an op's type rule."""


TypeRule = Callable[[Sequence[IRType], dict], "IRType | None"]


class Trait(enum.Flag):
    """What an op does, for the analyses, passes, emitters and the interpreter: each asks the table
    (:func:`opcodes_with`), so a new op states its traits in its row and nothing else lists it."""

    NONE = 0
    #: Reads the tensor named by its first operand.
    READS = enum.auto()
    #: Writes the tensor named by its first operand.
    WRITES = enum.auto()
    #: Orders memory for every tensor: no access moves across it.
    FENCE = enum.auto()
    #: Every thread of a group must reach it together (a partial last group may not run it).
    WHOLE_GROUP = enum.auto()
    #: Works on matrix fragments (per-register and cooperative forms in the emitters).
    FRAGMENT = enum.auto()
    #: Impure, yet without effect when its result is unused: dead-code elimination removes it.
    REMOVABLE = enum.auto()
    #: A read-modify-write of one element: its result differs from thread to thread.
    ATOMIC = enum.auto()
    #: A subgroup reduction or vote over the active lanes.
    REDUCTION = enum.auto()
    #: A subgroup shuffle or broadcast.
    SHUFFLE = enum.auto()
    #: An index whose value differs from thread to thread.
    VARYING_INDEX = enum.auto()
    #: An index with one value for every thread of a subgroup.
    UNIFORM_INDEX = enum.auto()


@dataclass(frozen=True)
class OpInfo:
    name: str
    category: str
    num_operands: int | None  # None: variadic
    rule: TypeRule
    pure: bool = True  # no side effects: may be CSE'd, hoisted, removed when unused
    commutative: bool = False
    num_regions: int = 0
    terminator: bool = False
    attrs: tuple[str, ...] = field(default=())
    traits: Trait = Trait.NONE


# ---------------------------------------------------------------- helpers

def _dt(t: IRType) -> D.DType:
    if isinstance(t, (ScalarType, VectorType)):
        return t.dtype
    raise OpTypeError(f"expected a scalar or vector value, got {t}")


def _same_shape(ts: Sequence[IRType]) -> IRType:
    """All operands must have one type (the frontend inserts the casts)."""
    first = ts[0]
    if not is_value_type(first):
        raise OpTypeError(f"expected a scalar or vector value, got {first}")
    for t in ts[1:]:
        if t != first:
            raise OpTypeError(f"operand types differ: {first} vs {t}")
    return first


def _float_unary(ts, attrs):
    t = _same_shape(ts)
    if not _dt(t).is_float:
        raise OpTypeError(f"needs a float operand, got {t}")
    return t


def _num_unary(ts, attrs):
    t = _same_shape(ts)
    if _dt(t).is_bool:
        raise OpTypeError("needs a numeric operand, got bool")
    return t


def _int_unary(ts, attrs):
    t = _same_shape(ts)
    if not _dt(t).is_int:
        raise OpTypeError(f"needs an integer operand, got {t}")
    return t


def _bool_unary(ts, attrs):
    t = _same_shape(ts)
    if not _dt(t).is_bool:
        raise OpTypeError(f"needs a bool operand, got {t}")
    return t


def _float_pred(ts, attrs):
    t = _float_unary(ts, attrs)
    return with_dtype(t, D.bool_)


def _num_binary(ts, attrs):
    t = _same_shape(ts)
    if _dt(t).is_bool:
        raise OpTypeError("arithmetic on bool: cast to an integer first")
    return t


def _float_binary(ts, attrs):
    t = _same_shape(ts)
    if not _dt(t).is_float:
        raise OpTypeError(f"needs float operands, got {t}")
    return t


def _bits_binary(ts, attrs):
    t = _same_shape(ts)
    if _dt(t).is_float:
        raise OpTypeError(f"bit operations need integer or bool operands, got {t}")
    return t


def _int_binary(ts, attrs):
    t = _same_shape(ts)
    if not _dt(t).is_int:
        raise OpTypeError(f"needs integer operands, got {t}")
    return t


def _compare(ts, attrs):
    t = _same_shape(ts)
    return with_dtype(t, D.bool_)


def _logic(ts, attrs):
    return _bool_unary(ts, attrs)


def _fma(ts, attrs):
    return _float_binary(ts, attrs)


def _select(ts, attrs):
    cond, a, b = ts
    if _dt(cond) != D.bool_:
        raise OpTypeError(f"select condition must be bool, got {cond}")
    t = _same_shape([a, b])
    if isinstance(cond, VectorType) and (not isinstance(t, VectorType) or t.width != cond.width):
        raise OpTypeError("a vector condition needs vector operands of its width")
    return t


def _cast(ts, attrs):
    (t,) = ts
    to = attrs["to"]
    if not isinstance(to, D.DType):
        raise OpTypeError("cast needs a dtype attribute 'to'")
    if not is_value_type(t):
        raise OpTypeError(f"cannot cast {t}")
    return with_dtype(t, to)


def _bitcast(ts, attrs):
    (t,) = ts
    to = attrs["to"]
    if _dt(t).bits != to.bits:
        raise OpTypeError(f"bitcast between different sizes: {_dt(t)} -> {to}")
    return with_dtype(t, to)


def _index(ts, attrs):
    if ts:
        raise OpTypeError("index ops take no operands")
    return ScalarType(D.i32)


def _index_axis(ts, attrs):
    if attrs.get("axis") not in (0, 1, 2):
        raise OpTypeError("axis must be 0, 1 or 2")
    return _index(ts, attrs)


def _const(ts, attrs):
    t = attrs.get("type")
    if not isinstance(t, (ScalarType, VectorType)):
        raise OpTypeError("const needs a scalar or vector 'type' attribute")
    return t


def _tensor(t: IRType) -> TensorType:
    if not isinstance(t, TensorType):
        raise OpTypeError(f"expected a tensor, got {t}")
    return t


def _int_scalar(t: IRType, what: str) -> None:
    if not (isinstance(t, ScalarType) and t.dtype.is_int):
        raise OpTypeError(f"{what} must be an integer scalar, got {t}")


def _load(ts, attrs):
    tt = _tensor(ts[0])
    _int_scalar(ts[1], "index")
    return ScalarType(tt.dtype)


def _store(ts, attrs):
    tt = _tensor(ts[0])
    _int_scalar(ts[1], "index")
    if ts[2] != ScalarType(tt.dtype):
        raise OpTypeError(f"stored value is {ts[2]}, tensor holds {tt.dtype}")
    if tt.readonly:
        raise OpTypeError("store to a read-only tensor")
    return None


def _vload(ts, attrs):
    tt = _tensor(ts[0])
    _int_scalar(ts[1], "index")
    w = attrs.get("width")
    if w not in (2, 4, 8):
        raise OpTypeError(f"vector width must be 2, 4 or 8, got {w}")
    return VectorType(tt.dtype, w)


def _vstore(ts, attrs):
    tt = _tensor(ts[0])
    _int_scalar(ts[1], "index")
    v = ts[2]
    if not (isinstance(v, VectorType) and v.dtype == tt.dtype):
        raise OpTypeError(f"vector store of {v} into tensor of {tt.dtype}")
    if tt.readonly:
        raise OpTypeError("store to a read-only tensor")
    return None


def _copy_async(ts, attrs):
    dst, src = _tensor(ts[0]), _tensor(ts[2])
    _int_scalar(ts[1], "destination index")
    _int_scalar(ts[3], "source index")
    if ts[4] != ScalarType(D.bool_):
        raise OpTypeError(f"copy_async's condition is {ts[4]}, not bool")
    if dst.space != "shared" or src.space != "global":
        raise OpTypeError("copy_async copies from a global tensor into a shared array")
    if dst.dtype != src.dtype:
        raise OpTypeError(f"copy_async from {src.dtype} into {dst.dtype}: the dtypes must match")
    w = attrs.get("width")
    if w not in (1, 2, 4, 8) or w * dst.dtype.itemsize not in (4, 8, 16):
        raise OpTypeError(f"copy_async moves 4, 8 or 16 bytes; width {w} of {dst.dtype} is "
                          f"{(w or 0) * dst.dtype.itemsize}")
    return None


def _copy_async_wait(ts, attrs):
    n = attrs.get("pending")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 7:
        raise OpTypeError(f"copy_async_wait leaves 0 to 7 committed groups pending, got {n!r}")
    return None


def _abar_alloc(ts, attrs):
    n, arrivals = attrs.get("count"), attrs.get("arrivals")
    for v, what in ((n, "count"), (arrivals, "arrivals")):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise OpTypeError(f"async_barriers needs a positive static {what}, got {v!r}")
    if arrivals >= 1 << 20:
        raise OpTypeError(f"an asynchronous barrier counts at most {(1 << 20) - 1} arrivals a phase, got {arrivals}")
    return BarrierType(n)


#: A role's register budget per thread (``setmaxnreg``'s range and step) and a group's register file.
ROLE_REGISTERS = (24, 256, 8)
GROUP_REGISTER_FILE = 65536
#: Threads of a warpgroup: a role with a register budget is whole warpgroups.
WARPGROUP_THREADS = 128


def entry_registers(threads: int) -> int:
    """The registers each thread of a group of ``threads`` starts with when one group fills a multiprocessor's
    register file (``__launch_bounds__(threads, 1)``): the file over the threads, in steps of 8, at most 248."""
    return min(GROUP_REGISTER_FILE // threads, 255) // 8 * 8


def _static_ints(v: Any) -> bool:
    return isinstance(v, tuple) and bool(v) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def _warp_role(ts, attrs):
    sizes, regs = attrs.get("sizes"), attrs.get("registers")
    if not _static_ints(sizes) or min(sizes) < 1 or len(sizes) > 8:
        raise OpTypeError(f"warp_roles splits a group into 1 to 8 roles of at least one thread, got {sizes!r}")
    if regs is None:
        return ScalarType(D.i32)
    lo, hi, step = ROLE_REGISTERS
    if not _static_ints(regs) or len(regs) != len(sizes):
        raise OpTypeError(f"warp_roles takes one register budget per role ({len(sizes)}), got {regs!r}")
    bad = next((r for r in regs if not lo <= r <= hi or r % step), None)
    if bad is not None:
        raise OpTypeError(f"a role's register budget is {lo} to {hi} registers per thread in steps of {step}, "
                          f"got {bad}")
    odd = next((n for n in sizes if n % WARPGROUP_THREADS), None)
    if odd is not None:
        raise OpTypeError(f"a role with a register budget is whole warpgroups ({WARPGROUP_THREADS} threads), "
                          f"got a role of {odd}")
    total, threads = sum(n * r for n, r in zip(sizes, regs)), sum(sizes)
    if total > threads * entry_registers(threads):
        raise OpTypeError(f"the roles' budgets take {total} registers, but a group of {threads} threads starts "
                          f"with {entry_registers(threads)} each ({threads * entry_registers(threads)}): a role "
                          "can only take what the others release")
    return ScalarType(D.i32)


def _role_barrier(ts, attrs):
    _warp_role(ts, {"sizes": attrs.get("sizes")})
    return None


def _abar_at(ts, what: str) -> None:
    if not isinstance(ts[0], BarrierType):
        raise OpTypeError(f"{what} takes barriers made by async_barriers, got {ts[0]}")
    _int_scalar(ts[1], "barrier index")


def _abar_arrive(ts, attrs):
    _abar_at(ts, "barrier_arrive")
    b = attrs.get("bytes")
    if not isinstance(b, int) or isinstance(b, bool) or not 0 <= b < 1 << 20:
        raise OpTypeError(f"barrier_arrive expects 0 to {(1 << 20) - 1} bytes of tile copies, got {b!r}")
    return None


def _abar_wait(ts, attrs):
    _abar_at(ts, "barrier_wait")
    _int_scalar(ts[2], "phase parity")
    return None


def _abar_arrive_peer(ts, attrs):
    _abar_at(ts[:2], "barrier_arrive")
    _int_scalar(ts[2], "cluster rank")
    return None


#: Groups a cluster may join (``cluster_groups``): sm_90's portable cluster sizes.
CLUSTER_SIZES = (1, 2, 4, 8)


def _cluster_groups(ts, attrs):
    if attrs.get("size") not in CLUSTER_SIZES:
        raise OpTypeError(f"cluster_groups joins {', '.join(map(str, CLUSTER_SIZES))} groups into a cluster, got "
                          f"{attrs.get('size')!r}")
    return ScalarType(D.i32)


def _abar_copies(ts, attrs):
    _abar_at(ts, "copy_async_barrier")
    return None


def _tile_tensors(tile: IRType, matrix: IRType, what: str) -> tuple[TensorType, TensorType]:
    """A tile copy's or store's shared tile and global matrix: their spaces and one dtype."""
    t, m = _tensor(tile), _tensor(matrix)
    if t.space != "shared" or m.space != "global":
        raise OpTypeError(f"{what} moves a box between a global tensor and a shared array, got {m} and {t}")
    if t.dtype != m.dtype:
        raise OpTypeError(f"{what} between {m.dtype} and {t.dtype}: the dtypes must match")
    return t, m


def _tile_copy(ts, attrs):
    outer = _tile_outer(ts, attrs, 10, "copy_tile")
    dst, src = _tile_tensors(ts[0], ts[2], "copy_tile")
    for t, what in zip(ts[1:2] + ts[3:8], ("destination index", "rows", "cols", "row stride", "row", "col")):
        _int_scalar(t, what)
    _abar_at(ts[8:10], "copy_tile")
    _tile_box(attrs, dst.dtype, "copy_tile", outer)
    return None


def _tile_store(ts, attrs):
    outer = _tile_outer(ts, attrs, 8, "store_tile")
    src, dst = _tile_tensors(ts[6], ts[0], "store_tile")
    if dst.readonly:
        raise OpTypeError("store to a read-only tensor")
    for t, what in zip(ts[1:6] + ts[7:8], ("rows", "cols", "row stride", "row", "col", "source index")):
        _int_scalar(t, what)
    _tile_box(attrs, dst.dtype, "store_tile", outer)
    return None


def _tile_outer(ts, attrs, base: int, what: str) -> tuple[int, ...]:
    """A tile copy's or store's outer box extents (attribute ``box_outer``, outermost first; none for a matrix)
    and the extent and coordinate operands after the ``base`` ones of a matrix, one of each per outer axis."""
    outer = attrs.get("box_outer", ())
    if not isinstance(outer, tuple) or len(outer) > TILE_RANK_MAX - 2:
        raise OpTypeError(f"{what}'s box has 2 to {TILE_RANK_MAX} axes, got {2 + len(outer)}")
    if len(ts) != base + 2 * len(outer):
        raise OpTypeError(f"{what} with {2 + len(outer)} axes takes {base + 2 * len(outer)} operands, got {len(ts)}")
    for t in ts[base:]:
        _int_scalar(t, "an outer extent or coordinate")
    return outer


def _tile_box(attrs: dict[str, Any], dt: D.DType, what: str, outer: tuple[int, ...] = ()) -> None:
    """A tile copy's or store's box and layout: TILE_BOX_MAX elements at most per axis, rows of whole 16-byte
    chunks (the layout's row where it fixes one), whole 8-row atoms when swizzled (the tile's rows: every axis
    but the innermost)."""
    rows, cols, layout = attrs.get("box_rows"), attrs.get("box_cols"), TILE_LAYOUTS.get(attrs.get("layout"))
    if layout is None:
        raise OpTypeError(f"{what}'s layout is one of {sorted(TILE_LAYOUTS)}, got {attrs.get('layout')!r}")
    for n in (*outer, rows, cols):
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= TILE_BOX_MAX:
            raise OpTypeError(f"{what}'s box is 1 to {TILE_BOX_MAX} elements along each axis, got "
                              f"{'x'.join(map(str, (*outer, rows, cols)))}")
    row_bytes = cols * dt.itemsize
    if row_bytes % 16 or (layout.row_bytes and row_bytes != layout.row_bytes):
        need = layout.row_bytes or "a multiple of 16"
        raise OpTypeError(f"a {layout.name} tile row spans {need} bytes; {cols} x {dt} is {row_bytes}")
    if layout.swizzled and tile_rows(attrs) % 8:
        raise OpTypeError(f"a {layout.name} tile has whole 8-row atoms; {tile_rows(attrs)} rows")


def _tensor_size(ts, attrs):
    tt = _tensor(ts[0])
    if tt.space != "global":
        raise OpTypeError("size of a shared array is static")
    return ScalarType(D.i32)


def _shared_alloc(ts, attrs):
    dt, shape = attrs.get("dtype"), attrs.get("shape")
    if not isinstance(dt, D.DType) or not shape or not all(isinstance(s, int) and s > 0 for s in shape):
        raise OpTypeError("shared_alloc needs a dtype and a positive static shape")
    return TensorType(dt, space="shared", shape=tuple(shape))


def _none(ts, attrs):
    return None


def _atomic(ts, attrs):
    tt = _tensor(ts[0])
    _int_scalar(ts[1], "index")
    vals = ts[2:]
    for v in vals:
        if v != ScalarType(tt.dtype):
            raise OpTypeError(f"atomic operand is {v}, tensor holds {tt.dtype}")
    if tt.readonly:
        raise OpTypeError("atomic on a read-only tensor")
    return ScalarType(tt.dtype)


def _simd_reduce(ts, attrs):
    (t,) = ts
    if not isinstance(t, ScalarType) or t.dtype.is_bool:
        raise OpTypeError(f"subgroup reductions take a numeric scalar, got {t}")
    return t


def _simd_vote(ts, attrs):
    (t,) = ts
    if t != ScalarType(D.bool_):
        raise OpTypeError(f"subgroup votes take a bool, got {t}")
    return t


def _simd_shuffle(ts, attrs):
    v, lane = ts
    if not isinstance(v, ScalarType):
        raise OpTypeError(f"shuffles move scalars, got {v}")
    _int_scalar(lane, "lane")
    return v


def _vec_make(ts, attrs):
    if len(ts) not in (2, 4, 8):
        raise OpTypeError(f"vectors have 2, 4 or 8 elements, got {len(ts)}")
    t = _same_shape(ts)
    if not isinstance(t, ScalarType):
        raise OpTypeError("vector elements must be scalars")
    return VectorType(t.dtype, len(ts))


def _vec_extract(ts, attrs):
    (v,) = ts
    if not isinstance(v, VectorType):
        raise OpTypeError(f"extract from a non-vector {v}")
    i = attrs.get("index")
    if not isinstance(i, int) or not 0 <= i < v.width:
        raise OpTypeError(f"vector index {i} out of range for {v}")
    return ScalarType(v.dtype)


def _var(ts, attrs):
    t = attrs.get("type")
    # Fragments may live in slots too: an mma accumulator is carried across
    # the iterations of a K loop the same way a scalar accumulator is.
    if not (is_value_type(t) or isinstance(t, FragmentType)):
        raise OpTypeError(f"a local variable holds a scalar, vector or fragment, not {t}")
    return VarType(t)


def _var_load(ts, attrs):
    (v,) = ts
    if not isinstance(v, VarType):
        raise OpTypeError(f"var_load of a non-variable {v}")
    return v.elem


def _var_store(ts, attrs):
    v, x = ts
    if not isinstance(v, VarType):
        raise OpTypeError(f"var_store to a non-variable {v}")
    if x != v.elem:
        raise OpTypeError(f"storing {x} into a variable of {v.elem}")
    return None


def _call(ts, attrs):
    if not isinstance(attrs.get("callee"), str):
        raise OpTypeError("call needs a 'callee' name")
    return attrs.get("result_type")


def _tuple_make(ts, attrs):
    if len(ts) < 2:
        raise OpTypeError("a tuple has at least two elements")
    return TupleType(tuple(ts))


def _tuple_get(ts, attrs):
    (t,) = ts
    i = attrs.get("index")
    if not isinstance(t, TupleType) or not isinstance(i, int) or not 0 <= i < len(t.elems):
        raise OpTypeError(f"tuple_get index {i} of {t}")
    return t.elems[i]


def _return(ts, attrs):
    if len(ts) > 1:
        raise OpTypeError("return takes at most one operand (a tuple for several values)")
    return None


def _cond(ts, attrs):
    if ts[0] != ScalarType(D.bool_):
        raise OpTypeError(f"condition must be a bool scalar, got {ts[0]}")
    return None


def _for(ts, attrs):
    for t in ts:
        _int_scalar(t, "loop bound")
    if len({t for t in ts}) != 1:
        raise OpTypeError("loop bounds and step must share one integer type")
    u = attrs.get("unroll")
    if u is not None and not (isinstance(u, int) and u >= 1):
        raise OpTypeError("unroll hint must be a positive int")
    return None


def _check_frag_shape(role: str, rows: int, cols: int) -> None:
    ok = set(WG_ACC_SHAPES) if role == "acc" else set()
    for m, n, k in MMA_SHAPES:
        ok.add({"a": (m, k), "b": (k, n), "acc": (m, n)}[role])
    if (rows, cols) not in ok:
        raise OpTypeError(f"no mma shape has a {role} fragment of {rows}x{cols}; shapes (M,N,K): {MMA_SHAPES}")


def _frag_attrs(attrs) -> FragmentType:
    role, dt, rows, cols = attrs.get("role"), attrs.get("dtype"), attrs.get("rows"), attrs.get("cols")
    if role not in ("a", "b", "acc"):
        raise OpTypeError(f"fragment role must be a, b or acc, got {role}")
    if not isinstance(dt, D.DType) or not dt.is_float:
        raise OpTypeError(f"fragments hold floats, got {dt}")
    _check_frag_shape(role, rows, cols)
    return FragmentType(role, dt, rows, cols)


#: The elementwise arithmetic of accumulator fragments (``frag_binary``'s ``fn``).
FRAG_BINARY_FNS = ("add", "sub", "mul", "max", "min")


def _frag_binary(ts, attrs):
    """``fn`` elementwise over an accumulator fragment and another of its type, or a scalar of its dtype
    (either side); the result has the fragment's type."""
    if attrs.get("fn") not in FRAG_BINARY_FNS:
        raise OpTypeError(f"frag_binary's fn is one of {FRAG_BINARY_FNS}, got {attrs.get('fn')!r}")
    frags = [t for t in ts if isinstance(t, FragmentType)]
    if not frags or frags[0].role != "acc":
        raise OpTypeError(f"frag_binary takes an accumulator fragment, got {ts[0]} and {ts[1]}")
    ft = frags[0]
    for t in ts:
        if t != ft and t != ScalarType(ft.dtype):
            raise OpTypeError(f"frag_binary's operands are {ft} or {ft.dtype} scalars, got {t}")
    return ft


def _acc_fn(name: str, fns: tuple[str, ...]) -> TypeRule:
    """The type rule of an op applying one of ``fns`` (its ``fn``) to one accumulator fragment: the result has the
    fragment's type (``frag_unary``: a float function of each element; ``frag_rows``: each row's reduction)."""
    def rule(ts, attrs):
        if attrs.get("fn") not in fns:
            raise OpTypeError(f"{name}'s fn is one of {fns}, got {attrs.get('fn')!r}")
        (ft,) = ts
        if not isinstance(ft, FragmentType) or ft.role != "acc":
            raise OpTypeError(f"{name} takes an accumulator fragment, got {ft}")
        return ft
    return rule


def _frag_mask(ts, attrs):
    """An accumulator fragment with ``value`` (its dtype) where column >= ``cols`` or column - row > ``diagonal``
    (i32 each); the result has its type."""
    ft, value, cols, diagonal = ts
    if not isinstance(ft, FragmentType) or ft.role != "acc":
        raise OpTypeError(f"frag_mask takes an accumulator fragment, got {ft}")
    if value != ScalarType(ft.dtype) or cols != ScalarType(D.i32) or diagonal != ScalarType(D.i32):
        raise OpTypeError(f"frag_mask's value is a {ft.dtype} scalar and its bounds i32, got {value}, {cols}, "
                          f"{diagonal}")
    return ft


def _frag_to_a(ts, attrs):
    """Columns ``col0`` .. ``col0`` + 15 of a 16-row accumulator as a 16 x 16 A fragment of ``dtype``."""
    (ft,) = ts
    col0, dt = attrs.get("col0"), attrs.get("dtype")
    if not isinstance(ft, FragmentType) or ft.role != "acc" or ft.rows != 16:
        raise OpTypeError(f"frag_to_a takes a 16-row accumulator fragment, got {ft}")
    if not isinstance(col0, int) or col0 < 0 or col0 + 16 > ft.cols:
        raise OpTypeError(f"frag_to_a's columns {col0} .. {col0} + 15 lie outside the {ft.cols} of {ft}")
    if dt not in (D.f16, D.bf16, D.f32):
        raise OpTypeError(f"frag_to_a makes A fragments of f16, bf16 or f32, got {dt}")
    return FragmentType("a", dt, 16, 16)


def _frag_scale_rows(ts, attrs):
    """Each row of an accumulator times its row's value in another accumulator of as many rows and its dtype
    (whose rows are each one value); the result has the first's type."""
    ft, factors = ts
    if not (isinstance(ft, FragmentType) and isinstance(factors, FragmentType) and ft.role == factors.role == "acc"
            and ft.rows == factors.rows and ft.dtype == factors.dtype):
        raise OpTypeError(f"frag_scale_rows takes two accumulators of one dtype and as many rows, got {ft} and "
                          f"{factors}")
    return ft


#: The reductions along an accumulator fragment's rows (``frag_rows``'s ``fn``).
FRAG_ROW_FNS = ("max", "sum")


def _frag_fill(ts, attrs):
    ft = _frag_attrs(attrs)
    if ts[0] != ScalarType(ft.dtype):
        raise OpTypeError(f"fill value is {ts[0]}, fragment holds {ft.dtype}")
    return ft


def _frag_load(ts, attrs):
    tt = _tensor(ts[0])
    _int_scalar(ts[1], "base index")
    _int_scalar(ts[2], "leading dimension")
    ft = _frag_attrs(attrs)
    if tt.dtype != ft.dtype:
        raise OpTypeError(f"fragment of {ft.dtype} loaded from a tensor of {tt.dtype}")
    if attrs.get("layout") not in ("row", "col"):
        raise OpTypeError("layout must be 'row' or 'col'")
    return ft


def stores_accumulator(acc: D.DType, tensor: D.DType) -> bool:
    """Whether ``frag_store`` writes an accumulator of ``acc`` to a tensor of ``tensor``: its own type, or an f32
    accumulator narrowed to f16 / bf16 (each element rounded once to nearest even, as a gemm's epilogue)."""
    return acc == tensor or (acc == D.f32 and tensor in (D.f16, D.bf16))


def _frag_store(ts, attrs):
    tt = _tensor(ts[0])
    _int_scalar(ts[1], "base index")
    _int_scalar(ts[2], "leading dimension")
    f = ts[3]
    if not isinstance(f, FragmentType) or f.role != "acc":
        raise OpTypeError(f"only accumulator fragments are stored, got {f}")
    if not stores_accumulator(f.dtype, tt.dtype):
        raise OpTypeError(f"fragment of {f.dtype} stored to a tensor of {tt.dtype}")
    if tt.readonly:
        raise OpTypeError("store to a read-only tensor")
    if attrs.get("layout") not in ("row", "col"):
        raise OpTypeError("layout must be 'row' or 'col'")
    return None


def _mma(ts, attrs):
    a, b, c = ts
    if not (isinstance(a, FragmentType) and a.role == "a" and isinstance(b, FragmentType) and b.role == "b"
            and isinstance(c, FragmentType) and c.role == "acc"):
        raise OpTypeError(f"mma takes (a, b, acc) fragments, got ({a}, {b}, {c})")
    if a.dtype != b.dtype:
        raise OpTypeError(f"mma inputs differ in dtype: {a.dtype} vs {b.dtype}")
    if c.dtype not in (D.f32, a.dtype):
        raise OpTypeError(f"accumulator must be f32 or the input dtype, got {c.dtype}")
    m, k = a.rows, a.cols
    if b.rows != k or (c.rows, c.cols) != (m, b.cols) or (m, b.cols, k) not in MMA_SHAPES:
        raise OpTypeError(f"mma shapes do not fit: a {a.rows}x{a.cols}, b {b.rows}x{b.cols}, acc {c.rows}x{c.cols}")
    return c


def _mma_wg(ts, attrs):
    a, a_tile, b, b_tile, c = ts
    registers = isinstance(a, FragmentType)
    if registers and not (a.role == "a" and (a.rows, a.cols) == (16, 16) and attrs.get("k") == 16):
        raise OpTypeError(f"mma_wg takes A from registers as a 16 x 16 A fragment with k = 16, got {a}")
    for t, what in ((a, "A"), (b, "B")) if not registers else ((b, "B"),):
        if not (isinstance(t, TensorType) and t.space == "shared"):
            raise OpTypeError(f"mma_wg reads its {what} tile from a shared array, got {t}")
    for t in (a, b):
        if t.dtype not in WG_DTYPES:
            raise OpTypeError(f"mma_wg multiplies f16, bf16, f8e4m3 or f8e5m2 tiles, got {t.dtype}")
    if a.dtype != b.dtype and not (a.dtype.bits == b.dtype.bits == 8):
        raise OpTypeError(f"mma_wg tiles differ in dtype: {a.dtype} vs {b.dtype}")
    _int_scalar(a_tile, "A tile offset")
    _int_scalar(b_tile, "B tile offset")
    if not (isinstance(c, FragmentType) and c.role == "acc" and c.dtype == D.f32 and c.rows == 16
            and c.cols in WG_N):
        raise OpTypeError(f"mma_wg accumulates into an f32 accumulator of 16 x N, N a multiple of 8 up to 256; "
                          f"got {c}")
    k, major, block = attrs.get("k"), attrs.get("b_major"), attrs.get("b_block")
    step, row = wg_k_step(b.dtype), wg_row(b.dtype)
    if not isinstance(k, int) or isinstance(k, bool) or k % step or not step <= k <= row:
        raise OpTypeError(f"mma_wg's k on {b.dtype} tiles is a multiple of {step} up to {row} (a swizzled row holds "
                          f"{row}), got {k!r}")
    k0 = attrs.get("k0", 0)
    if not isinstance(k0, int) or isinstance(k0, bool) or k0 % step or not 0 <= k0 <= row - k:
        raise OpTypeError(f"mma_wg's k0 (the tiles' first K column) is a multiple of {step} with k0 + k <= {row}, "
                          f"got {k0!r}")
    if major not in ("k", "n"):
        raise OpTypeError(f"mma_wg's b_major is 'k' (B stored n-by-k) or 'n' (k-by-n), got {major!r}")
    if major == "n" and b.dtype.bits == 8:
        raise OpTypeError("mma_wg reads 8-bit tiles K-major only: b_major 'k' (B stored n-by-k)")
    if major == "n" and c.cols % 64:
        raise OpTypeError(f"mma_wg with B stored k-by-n takes N a multiple of 64 (whole column blocks), got {c.cols}")
    if not isinstance(block, int) or isinstance(block, bool) or block < 0 or block % 512:
        raise OpTypeError(f"mma_wg's b_block is a multiple of 512 elements (a 1024-byte atom), got {block!r}")
    if attrs.get("commit", True) not in (True, False):
        raise OpTypeError(f"mma_wg's commit is True or False, got {attrs.get('commit')!r}")
    _mma_wg_wait([], attrs)
    return c


def _mma_wg_wait(ts, attrs):
    n = attrs.get("pending")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 7:
        raise OpTypeError(f"a warpgroup multiply leaves 0 to 7 of them in flight, got {n!r}")
    return None


# ---------------------------------------------------------------- the table

OPS: dict[str, OpInfo] = {}


def _reg(name: str, category: str, n: int | None, rule: TypeRule, **kw: Any) -> None:
    OPS[name] = OpInfo(name, category, n, rule, **kw)


_reg("const", "const", 0, _const, attrs=("value", "type"))

for _n in ("program_id", "thread_id", "group_id", "group_size", "num_groups", "grid_size"):
    _reg(_n, "index", 0, _index_axis, attrs=("axis",),
         traits=Trait.VARYING_INDEX if _n in ("program_id", "thread_id") else Trait.UNIFORM_INDEX)
for _n in ("lane_id", "simd_size", "simd_group_id", "num_simd_groups"):
    _reg(_n, "index", 0, _index,
         traits=Trait.VARYING_INDEX if _n in ("lane_id", "simd_group_id") else Trait.UNIFORM_INDEX)

#: Float-only unary math intrinsics.
FLOAT_UNARY = ("exp", "exp2", "fast_exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "recip", "sin", "cos",
               "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "erf", "floor", "ceil", "round", "trunc")
for _n in FLOAT_UNARY:
    _reg(_n, "unary", 1, _float_unary)
_reg("neg", "unary", 1, _num_unary)
_reg("abs", "unary", 1, _num_unary)
_reg("sign", "unary", 1, _num_unary)
_reg("bnot", "unary", 1, _int_unary)
_reg("lnot", "unary", 1, _bool_unary)
for _n in ("isnan", "isinf", "isfinite"):
    _reg(_n, "unary", 1, _float_pred)

for _n, _comm in (("add", True), ("sub", False), ("mul", True), ("div", False), ("rem", False),
                  ("min", True), ("max", True)):
    _reg(_n, "binary", 2, _num_binary, commutative=_comm)
_reg("pow", "binary", 2, _float_binary)
_reg("atan2", "binary", 2, _float_binary)
for _n in ("band", "bor", "bxor"):
    _reg(_n, "binary", 2, _bits_binary, commutative=True)
for _n in ("shl", "shr"):
    _reg(_n, "binary", 2, _int_binary)
for _n, _comm in (("eq", True), ("ne", True), ("lt", False), ("le", False), ("gt", False), ("ge", False)):
    _reg(_n, "compare", 2, _compare, commutative=_comm)
_reg("land", "binary", 2, _logic, commutative=True)
_reg("lor", "binary", 2, _logic, commutative=True)

_reg("fma", "ternary", 3, _fma)
_reg("select", "ternary", 3, _select)
_reg("cast", "cast", 1, _cast, attrs=("to",))
_reg("bitcast", "cast", 1, _bitcast, attrs=("to",))

_reg("vec_make", "vector", None, _vec_make)
_reg("vec_extract", "vector", 1, _vec_extract, attrs=("index",))

_reg("load", "memory", 2, _load, pure=False, traits=Trait.READS)
_reg("store", "memory", 3, _store, pure=False, traits=Trait.WRITES)
_reg("vload", "memory", 2, _vload, pure=False, attrs=("width",), traits=Trait.READS)
_reg("vstore", "memory", 3, _vstore, pure=False, traits=Trait.WRITES)
# copy_async also reads its third operand and completes at some point up to copy_async_wait: a fence.
_reg("copy_async", "memory", 5, _copy_async, pure=False, attrs=("width",), traits=Trait.WRITES | Trait.FENCE)
_reg("copy_async_commit", "sync", 0, _none, pure=False, traits=Trait.FENCE)
_reg("copy_async_wait", "sync", 0, _copy_async_wait, pure=False, attrs=("pending",), traits=Trait.FENCE)
# Asynchronous barriers (docs/ir.md): each orders memory like a fence; making them is a group barrier.
_reg("abar_alloc", "async_barrier", 0, _abar_alloc, pure=False, attrs=("count", "arrivals"),
     traits=Trait.FENCE | Trait.WHOLE_GROUP | Trait.REMOVABLE)
_reg("abar_arrive", "async_barrier", 2, _abar_arrive, pure=False, attrs=("bytes",), traits=Trait.FENCE)
_reg("abar_wait", "async_barrier", 3, _abar_wait, pure=False, traits=Trait.FENCE)
_reg("abar_copies", "async_barrier", 2, _abar_copies, pure=False, traits=Trait.FENCE)
# An arrival on the barrier of another group of the cluster (operand 2: its rank in the cluster).
_reg("abar_arrive_peer", "async_barrier", 3, _abar_arrive_peer, pure=False, traits=Trait.FENCE)
# Clusters (docs/ir.md): consecutive groups along axis 0 that reach each other's shared memory and barriers.
_reg("cluster_groups", "cluster", 0, _cluster_groups, pure=False, attrs=("size",), traits=Trait.UNIFORM_INDEX)
_reg("cluster_sync", "cluster", 0, _none, pure=False, traits=Trait.FENCE | Trait.WHOLE_GROUP)
# A tile copy writes its shared tile when the phase of its barrier completes (and reads global memory).
_reg("tile_copy", "memory", None, _tile_copy, pure=False,
     attrs=("box_rows", "box_cols", "layout", "box_outer", "multicast"),
     traits=Trait.WRITES | Trait.FENCE)
# A tile store reads its shared tile and writes the global matrix asynchronously, up to its thread's
# store_tile_wait (operand 0 is the global tensor it writes, as for every writing op).
_reg("tile_store", "memory", None, _tile_store, pure=False, attrs=("box_rows", "box_cols", "layout", "box_outer"),
     traits=Trait.WRITES | Trait.FENCE)
_reg("tile_store_wait", "sync", 0, _none, pure=False, traits=Trait.FENCE)
# Warp roles (docs/ir.md): splitting the group sets register budgets, so every thread reaches it together.
_reg("warp_role", "role", 0, _warp_role, pure=False, attrs=("sizes", "registers"),
     traits=Trait.WHOLE_GROUP | Trait.VARYING_INDEX)
_reg("role_barrier", "role", 0, _role_barrier, pure=False, attrs=("sizes",), traits=Trait.FENCE)
_reg("tensor_size", "memory", 1, _tensor_size)
_reg("shared_alloc", "memory", 0, _shared_alloc, pure=False, attrs=("dtype", "shape"), traits=Trait.REMOVABLE)
_reg("barrier", "sync", 0, _none, pure=False, traits=Trait.FENCE | Trait.WHOLE_GROUP)
# A device-scope memory fence: no access moves across it; any thread may run it alone.
_reg("fence", "sync", 0, _none, pure=False, traits=Trait.FENCE)

_ATOMIC_TRAITS = Trait.READS | Trait.WRITES | Trait.ATOMIC
for _n in ("atomic_add", "atomic_max", "atomic_min", "atomic_xchg"):
    _reg(_n, "atomic", 3, _atomic, pure=False, traits=_ATOMIC_TRAITS)
_reg("atomic_cas", "atomic", 4, _atomic, pure=False, traits=_ATOMIC_TRAITS)

for _n in ("simd_sum", "simd_max", "simd_min"):
    _reg(_n, "subgroup", 1, _simd_reduce, pure=False, traits=Trait.REDUCTION)
for _n in ("simd_any", "simd_all"):
    _reg(_n, "subgroup", 1, _simd_vote, pure=False, traits=Trait.REDUCTION)
for _n in ("simd_shuffle", "simd_shuffle_xor", "simd_shuffle_up", "simd_shuffle_down", "simd_broadcast"):
    _reg(_n, "subgroup", 2, _simd_shuffle, pure=False, traits=Trait.SHUFFLE)

_FRAG = Trait.FRAGMENT | Trait.WHOLE_GROUP
_reg("frag_fill", "fragment", 1, _frag_fill, attrs=("role", "dtype", "rows", "cols"), traits=_FRAG)
_reg("frag_load", "fragment", 3, _frag_load, pure=False, attrs=("role", "dtype", "rows", "cols", "layout"),
     traits=_FRAG | Trait.READS)
_reg("frag_store", "fragment", 4, _frag_store, pure=False, attrs=("layout",), traits=_FRAG | Trait.WRITES)
_reg("mma", "fragment", 3, _mma, pure=False, traits=_FRAG)
# Not pure: its operand may be a warpgroup multiply's result, which only exists after that multiply's wait.
_reg("frag_binary", "fragment", 2, _frag_binary, pure=False, attrs=("fn",), traits=_FRAG)
_reg("frag_rows", "fragment", 1, _acc_fn("frag_rows", FRAG_ROW_FNS), pure=False, attrs=("fn",), traits=_FRAG)
_reg("frag_unary", "fragment", 1, _acc_fn("frag_unary", (*FLOAT_UNARY, "abs")), pure=False, attrs=("fn",),
     traits=_FRAG)
_reg("frag_mask", "fragment", 4, _frag_mask, pure=False, traits=_FRAG)
_reg("frag_to_a", "fragment", 1, _frag_to_a, pure=False, attrs=("col0", "dtype"), traits=_FRAG)
_reg("frag_scale_rows", "fragment", 2, _frag_scale_rows, pure=False, traits=_FRAG)
_reg("mma_wg", "fragment", 5, _mma_wg, pure=False, attrs=("k", "k0", "b_major", "b_block", "pending", "commit"),
     traits=_FRAG | Trait.FENCE)
_reg("mma_wg_wait", "sync", 0, _mma_wg_wait, pure=False, attrs=("pending",), traits=Trait.FENCE)

_reg("var", "var", 0, _var, pure=False, attrs=("type",), traits=Trait.REMOVABLE)
_reg("var_load", "var", 1, _var_load, pure=False, traits=Trait.REMOVABLE)
_reg("var_store", "var", 2, _var_store, pure=False)

_reg("if", "control", 1, _cond, pure=False, num_regions=2)
_reg("for", "control", 3, _for, pure=False, num_regions=1, attrs=("unroll",))
_reg("loop", "control", 0, _none, pure=False, num_regions=1)
_reg("break", "control", 0, _none, pure=False, terminator=True)
_reg("continue", "control", 0, _none, pure=False, terminator=True)
_reg("return", "control", None, _return, pure=False, terminator=True)

_reg("call", "call", None, _call, pure=False, attrs=("callee", "result_type"), traits=Trait.FENCE)
_reg("tuple_make", "tuple", None, _tuple_make)
_reg("tuple_get", "tuple", 1, _tuple_get, attrs=("index",))


def opcodes_with(trait: Trait) -> frozenset[str]:
    """Every opcode that has all of ``trait``'s flags."""
    return frozenset(name for name, oi in OPS.items() if trait in oi.traits)


def info(opcode: str) -> OpInfo:
    try:
        return OPS[opcode]
    except KeyError:
        raise OpTypeError(f"unknown opcode {opcode!r}") from None


def infer_type(opcode: str, operand_types: Sequence[IRType], attrs: dict) -> IRType | None:
    """The result type of ``opcode`` on these operands, or OpTypeError."""
    oi = info(opcode)
    if oi.num_operands is not None and len(operand_types) != oi.num_operands:
        raise OpTypeError(f"{opcode} takes {oi.num_operands} operands, got {len(operand_types)}")
    return oi.rule(operand_types, attrs)


# Groups derived from the traits, named for their readers.
#: Ops whose result is the same for every thread of a subgroup when their
#: operands are (used by the divergence analysis that guards barriers).
UNIFORM_INDEX_OPS = opcodes_with(Trait.UNIFORM_INDEX)
#: Index ops that differ from thread to thread.
VARYING_INDEX_OPS = opcodes_with(Trait.VARYING_INDEX)
#: Ops that read / write the tensor named by their first operand.
READ_OPS = opcodes_with(Trait.READS)
WRITE_OPS = opcodes_with(Trait.WRITES)
#: Ops that order memory for every tensor (no access may move across them).
FENCE_OPS = opcodes_with(Trait.FENCE)
#: Ops every thread of a group must reach together on every GPU target (subgroup operations act
#: on the active lanes, so a partial last group is fine for them).
WHOLE_GROUP_OPS = opcodes_with(Trait.WHOLE_GROUP)
FRAGMENT_OPS = opcodes_with(Trait.FRAGMENT)
ATOMIC_OPS = opcodes_with(Trait.ATOMIC)
REDUCTION_OPS = opcodes_with(Trait.REDUCTION)
SHUFFLE_OPS = opcodes_with(Trait.SHUFFLE)
#: Impure ops that are still removable when their result is unused (they have no effect).
REMOVABLE_OPS = opcodes_with(Trait.REMOVABLE)
