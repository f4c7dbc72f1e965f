"""Matrix-fragment builtins: frag_a, frag_b, frag_acc, frag_load_acc, frag_store, frag_row_max, frag_row_sum,
frag_mask, frag_acc_to_a, frag_scale_rows, mma, mma_wg."""

from __future__ import annotations

from typing import Any

from ...core import dtypes as D
from ...core.ops import stores_accumulator
from ...core.types import MMA_SHAPES, WG_ACC_SHAPES, WG_DTYPES, WG_N, FragmentType, ScalarType, wg_k_step, wg_row
from ..lower_call import CallArgs, handles
from ..values import RV, FValue, Py, TensorRef, describe
from .memory import check_writable

_ROLE_DIMS = {"a": ("M", "K"), "b": ("K", "N"), "acc": ("M", "N")}


def _shapes_for(role: str) -> list[tuple[int, int]]:
    out = list(WG_ACC_SHAPES) if role == "acc" else []
    for m, n, k in MMA_SHAPES:
        shape = {"a": (m, k), "b": (k, n), "acc": (m, n)}[role]
        if shape not in out:
            out.append(shape)
    return out


def _dims(lw: Any, a: CallArgs, role: str) -> tuple[int, int]:
    names = _ROLE_DIMS[role]
    rows, cols = (lw.static_int(a[n], a.node_of(n), f"fragment dimension {n}") for n in names)
    if (rows, cols) not in _shapes_for(role):
        valid = ", ".join(f"{r}x{c}" for r, c in _shapes_for(role) if (r, c) not in WG_ACC_SHAPES)
        if role == "acc":
            valid += ", or 16xN with N a multiple of 8 up to 256 (warpgroup multiplies)"
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


@handles("frag_row_max", "frag_row_sum")
def frag_rows(lw: Any, a: CallArgs) -> FValue:
    acc = _fragment(lw, a, "acc", "acc")
    return lw.value("frag_rows", [acc.value], a.node, fn=a.name.removeprefix("frag_row_"))


@handles("frag_acc_to_a")
def frag_acc_to_a(lw: Any, a: CallArgs) -> FValue:
    acc = _fragment(lw, a, "acc", "acc")
    col0 = lw.static_int(a["col0"], a.node_of("col0"), "frag_acc_to_a's first column")
    dt = lw.static_dtype(a["dtype"], a.node_of("dtype"))
    if acc.type.rows != 16 or col0 < 0 or col0 + 16 > acc.type.cols:
        raise lw.type_error(f"frag_acc_to_a() takes 16 columns of a 16-row accumulator from column {col0}, got "
                            f"{acc.type}", a.node_of("col0"), hint="A fragments are 16 x 16: col0 + 16 <= the "
                            "accumulator's columns")
    if dt not in (D.f16, D.bf16, D.f32):
        raise lw.type_error(f"frag_acc_to_a() makes A fragments of f16, bf16 or f32, got {dt.name}", a.node_of("dtype"))
    return lw.value("frag_to_a", [acc.value], a.node, col0=col0, dtype=dt)


@handles("frag_scale_rows")
def frag_scale_rows(lw: Any, a: CallArgs) -> FValue:
    acc, factors = _fragment(lw, a, "acc", "acc"), _fragment(lw, a, "factors", "acc")
    if factors.type.rows != acc.type.rows or factors.dtype != acc.dtype:
        raise lw.type_error(f"frag_scale_rows() scales {acc.type} by the rows of {factors.type}", a.node_of("factors"),
                            hint="the factors are an accumulator of as many rows and the same dtype")
    return lw.value("frag_scale_rows", [acc.value, factors.value], a.node)


#: A bound of frag_mask left out: past any fragment's columns.
_NO_BOUND = 1 << 30


@handles("frag_mask")
def frag_mask(lw: Any, a: CallArgs) -> FValue:
    acc = _fragment(lw, a, "acc", "acc")
    value = lw.value_for_type(a["value"], ScalarType(acc.dtype), a.node_of("value"), what="the masked elements")
    bounds = []
    for n in ("cols", "diagonal"):
        given = a[n] if not (a[n] is None or (isinstance(a[n], Py) and a[n].value is None)) else Py(_NO_BOUND)
        bound = lw.to_index(given, a.node_of(n), f"frag_mask's {n}")
        bounds.append(bound if bound.dtype == D.i32 else lw.convert(bound, D.i32, a.node_of(n)))
    return lw.value("frag_mask", [acc.value, value.value, *(b.value for b in bounds)], a.node)


@handles("frag_store")
def frag_store(lw: Any, a: CallArgs) -> FValue:
    t = _tensor(lw, a)
    check_writable(lw, t, a.node)
    base = lw.to_index(a["base"], a.node_of("base"), "base index")
    ld = lw.to_index(a["ld"], a.node_of("ld"), "leading dimension")
    acc = _fragment(lw, a, "acc", "acc")
    if not stores_accumulator(acc.dtype, t.type.dtype):
        raise lw.type_error(f"an accumulator of {acc.dtype.name} stored to '{t.name}' of {t.type.dtype.name}",
                            a.node_of("acc"), hint="an f32 accumulator also stores to f16 and bf16 tensors (rounded "
                            "once); other types store to a tensor of their own type")
    lw.emit("frag_store", [t.value, base.value, ld.value, acc.value], a.node, layout=_layout(lw, a))
    return Py(None)


@handles("mma")
def mma(lw: Any, a: CallArgs) -> FValue:
    fa, fb, fc = _fragment(lw, a, "a", "a"), _fragment(lw, a, "b", "b"), _fragment(lw, a, "acc", "acc")
    return lw.value("mma", [fa.value, fb.value, fc.value], a.node)


@handles("mma_wg")
def mma_wg(lw: Any, a: CallArgs) -> FValue:
    tiles = []
    registers = isinstance(a["a"], RV) and isinstance(a["a"].type, FragmentType)
    if registers:  # A from registers: a 16 x 16 A fragment, one K slice of 16
        fa = _fragment(lw, a, "a", "a")
        if (fa.type.rows, fa.type.cols) != (16, 16) or fa.type.dtype.name not in ("f16", "bf16"):
            raise lw.type_error(f"mma_wg() takes A from registers as frag_a(t, base, ld, 16, 16) of f16 or bf16, got "
                                f"{describe(fa)}", a.node_of("a"))
        if lw.static_int(a["k"], a.node_of("k"), "k") != 16:
            raise lw.type_error("mma_wg() with A from registers multiplies one K slice: k=16", a.node_of("k"))
        tiles += [fa, lw.to_index(a["a_tile"], a.node_of("a_tile"), "A tile offset")]
    for name, offset in (("a", "a_tile"), ("b", "b_tile"))[1 if registers else 0:]:
        t = a[name]
        if not (isinstance(t, TensorRef) and t.type.space == "shared"):
            raise lw.type_error(f"mma_wg() reads its {name.upper()} tile from a shared array, got {describe(t)}",
                                a.node_of(name), hint="stage the tile in shared(...) with sw128 offsets")
        if t.type.dtype not in WG_DTYPES:
            raise lw.type_error(f"mma_wg() multiplies f16, bf16, f8e4m3 or f8e5m2 tiles; '{t.name}' holds "
                                f"{t.type.dtype.name}", a.node_of(name))
        tiles += [t, lw.to_index(a[offset], a.node_of(offset), f"{name.upper()} tile offset")]
    acc = _fragment(lw, a, "acc", "acc")
    if (acc.type.rows, acc.type.dtype.name) != (16, "f32") or acc.type.cols not in WG_N:
        raise lw.type_error(f"mma_wg() accumulates into frag_acc(f32, 16, N) with N a multiple of 8 up to 256, got "
                            f"{describe(acc)}",
                            a.node_of("acc"))
    dt = tiles[-2].type.dtype
    step, row = wg_k_step(dt), wg_row(dt)
    k = lw.static_int(a["k"], a.node_of("k"), "k")
    if k % step or not step <= k <= row:
        raise lw.type_error(f"mma_wg()'s k on {dt.name} tiles is a multiple of {step} up to {row}, got {k}",
                            a.node_of("k"), hint=f"a swizzled tile row holds {row} elements of {dt.name}; step K "
                                                 f"in tiles of at most {row}")
    major = a["b_major"]
    if not (isinstance(major, Py) and major.value in ("k", "n")):
        raise lw.type_error(f'b_major must be "k" (B stored n-by-k) or "n" (k-by-n), got {describe(major)}',
                            a.node_of("b_major"))
    if major.value == "n" and dt.bits == 8:
        raise lw.type_error("mma_wg() reads 8-bit tiles K-major only: B stored n-by-k, b_major=\"k\"",
                            a.node_of("b_major"), hint="store B transposed (N rows of K), as a linear layer's weight")
    block = lw.static_int(a["b_block"], a.node_of("b_block"), "b_block")
    if block < 0 or block % 512:
        raise lw.type_error(f"b_block is a multiple of 512 elements (one 1024-byte swizzle atom), got {block}",
                            a.node_of("b_block"))
    if major.value == "n" and acc.type.cols > 64 and block == 0:
        raise lw.type_error("B stored k-by-n needs b_block: the elements between its 64-column blocks",
                            a.node_of("b_block"))
    k0 = lw.static_int(a["k0"], a.node_of("k0"), "k0")
    if k0 % step or not 0 <= k0 <= row - k:
        raise lw.type_error(f"mma_wg()'s k0 is the tiles' first K column: a multiple of {step} with k0 + k <= {row}, "
                            f"got {k0} (k = {k})", a.node_of("k0"), hint=f"a swizzled tile row holds {row} elements")
    at, ao, bt, bo = tiles
    if at.type.dtype != bt.type.dtype and not (registers or at.type.dtype.bits == bt.type.dtype.bits == 8):
        raise lw.type_error(f"mma_wg()'s A tile holds {at.type.dtype.name} and its B tile {bt.type.dtype.name}",
                            a.node_of("b"), hint="16-bit tiles have one dtype; 8-bit ones may mix e4m3 and e5m2")
    if registers and at.type.dtype != bt.type.dtype:
        raise lw.type_error(f"mma_wg()'s A fragment holds {at.type.dtype.name} and its B tile "
                            f"{bt.type.dtype.name}", a.node_of("b"))
    commit = a["commit"]
    if not (isinstance(commit, Py) and isinstance(commit.value, bool)):
        raise lw.type_error(f"mma_wg()'s commit is True or False, got {describe(commit)}", a.node_of("commit"))
    pending = _pending(lw, a)
    if not commit.value and pending:
        raise lw.type_error("mma_wg(commit=False) waits for nothing: its group closes at the next mma_wg, whose "
                            "pending counts it", a.node_of("pending"))
    extra = {} if commit.value else {"commit": False}
    return lw.value("mma_wg", [at.value, ao.value, bt.value, bo.value, acc.value], a.node, k=k, k0=k0,
                    b_major=major.value, b_block=block, pending=pending, **extra)


def _pending(lw: Any, a: CallArgs) -> int:
    n = lw.static_int(a["pending"], a.node_of("pending"), "pending")
    if not 0 <= n <= 7:
        raise lw.type_error(f"{a.name}() leaves 0 to 7 warpgroup multiplies in flight, got {n}", a.node_of("pending"))
    return n


@handles("mma_wg_wait")
def mma_wg_wait(lw: Any, a: CallArgs) -> FValue:
    lw.emit("mma_wg_wait", (), a.node, pending=_pending(lw, a))
    return Py(None)
