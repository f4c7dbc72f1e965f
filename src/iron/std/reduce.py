"""Reductions along the last axis of a (rows, cols) tensor and over a whole tensor: sum, mean, max, min,
argmax.

Two kernels, ``reduce_rows`` (OP = sum or max) and ``argmax_rows``, each with two schedules picked at
launch by the uniform flag ``by_simd``: one group per row (long rows), or one subgroup per row, as
many rows per group as it has subgroups (rows of at most SHORT_ROW_BYTES, or MANY_ROWS rows and more).
mean is the sum divided once by ``count``; min is ``-max(-x)`` (``sign = -1``: negation is exact).  A whole tensor is reduced
in two deterministic stages, no float atomics: the row kernel over ``P`` contiguous chunks writes f32
partials (argmax: each chunk's best index), then one group finishes (``reduce_rows`` on the partials,
``argmax_finish``).

Reduction order of a sum (the tolerance follows it): each thread sums its elements in a VEC-wide f32
vector, lane k over the thread's strided 16-byte chunks in index order; the VEC lanes fold as a
pairwise tree; the row's unaligned head and tail elements (fewer than VEC each; every element when the
buffer is not 16-byte aligned) are added after, in index order; then ``simd_sum`` (a butterfly on a
full NVIDIA warp; lane order in the interpreter); then, in the group schedule, thread 0 adds the
subgroups' sums in subgroup order.  Output dtype: x's (as torch), rounded once from f32.

Non-finite policy (torch's): sum/mean follow IEEE (NaN in, NaN out; +inf with -inf gives NaN); max/min
are NaN when any element is NaN; argmax gives the index of the first NaN when there is one, else the
first index of the maximum.  max/min may return either zero when +0.0 and -0.0 tie.
"""

from __future__ import annotations

from typing import Any

import iron
from iron import In, T, Tensor, U, bf16, f16, f32, i32, kernel, variants
from iron.core.errors import LaunchError
from iron.lang import (barrier, group_id, group_size, lane_id, num_groups, num_simd_groups, select, shared,
                       simd_any, simd_group_id, simd_max, simd_min, simd_size, simd_sum, thread_id, vec)

from . import _host
from ._device import splat
from ._plans import planned

#: The kernels' min under a name that the host function ``min`` below does not shadow.
_fmin = iron.lang.min

NAN = float("nan")
INF = float("inf")
#: The index of "no element yet": larger than any real index.
NO_INDEX = 2147483647

#: Threads per group in every kernel here (the shared arrays hold one slot per subgroup of it).
GROUP = 256
#: Rows per group the host assumes in the subgroup-per-row schedule (256 / 32: one per subgroup of a
#: 32-wide device); on other widths the groups loop over blocks of rows, or some stay idle.
SIMD_ROWS = 8
#: Rows of at most this many bytes go one subgroup per row; longer ones one group per row ...
SHORT_ROW_BYTES = 4096
#: ... unless there are at least this many rows: then subgroups alone fill the GPU, and a row per subgroup
#: needs no shared memory or barrier (H200, 2026-11-30: 16384 x 4096 sum 0.83-0.95x of torch by groups,
#: 0.99-1.06x by subgroups; argmax 1.00 -> 1.66x; 4096 x 16384 within 4% either way).
MANY_ROWS = 4096
#: At most this many groups per grid axis (Vulkan's guaranteed minimum); the kernels loop over the rest.
MAX_GROUPS = 65535
#: Whole-tensor reductions: at most this many partials (about 8 groups per SM of an H200's 132).
MAX_PARTIALS = 1024
#: Whole-tensor reductions: each partial covers at least this many 16-byte vectors per thread.
VECTORS_PER_THREAD = 4


# ---------------------------------------------------------------- device helpers

@iron.func
def _combine(a, b, OP):
    """a + b, or the NaN-sticky max: a NaN, once seen, stays (scalars or vectors alike)."""
    if OP == "max":
        r = select((b > a) | (b != b), b, a)
    else:
        r = a + b
    return r


@iron.func
def _fold(v, OP):
    """The lanes of ``v`` combined as a pairwise tree: (0,4) (1,5) (2,6) (3,7), then (0,2) (1,3), then (0,1)."""
    if len(v) == 8:
        a = _combine(_combine(v[0], v[4], OP), _combine(v[2], v[6], OP), OP)
        b = _combine(_combine(v[1], v[5], OP), _combine(v[3], v[7], OP), OP)
    else:
        a = _combine(v[0], v[2], OP)
        b = _combine(v[1], v[3], OP)
    return _combine(a, b, OP)


@iron.func
def _body(lo, hi, VEC, aligned):
    """[a, b): the VEC-aligned body of [lo, hi); empty (a = b = lo) when the buffer is not 16-byte aligned."""
    a = lo
    b = lo
    if aligned:
        a = _fmin(hi, (lo + (VEC - 1)) // VEC * VEC)
        b = a + (hi - a) // VEC * VEC
    return a, b


@iron.func
def _thread_partial(x, lo, hi, t, nt, VEC, OP, sign, aligned):
    """Thread ``t`` of ``nt``'s f32 partial over [lo, hi): 16-byte loads over the body, scalar head and tail.
    max works on ``sign * x`` (sign = -1: the min, negated)."""
    a, b = _body(lo, hi, VEC, aligned)
    acc = splat(-INF if OP == "max" else 0.0, VEC)
    for i in range(a + t * VEC, b, nt * VEC):
        v = f32(x.load(i, width=VEC))
        if OP == "max":
            v = v * sign
        acc = _combine(acc, v, OP)
    s = _fold(acc, OP)
    for j in range(lo + t, a, nt):
        s = _combine(s, f32(x[j]) * sign if OP == "max" else f32(x[j]), OP)
    for j in range(b + t, hi, nt):
        s = _combine(s, f32(x[j]) * sign if OP == "max" else f32(x[j]), OP)
    return s


@iron.func
def _simd_combine(s, OP):
    """Every lane gets its subgroup's result; max is NaN when a lane holds NaN (simd_max ignores NaN)."""
    if OP == "max":
        r = select(simd_any(s != s), NAN, simd_max(s))
    else:
        r = simd_sum(s)
    return r


@iron.func
def _group_combine(s, red, OP):
    """The group's result on thread 0: subgroups first, then thread 0 combines them in subgroup order."""
    s = _simd_combine(s, OP)
    if lane_id() == 0:
        red[simd_group_id()] = s
    barrier()
    if thread_id(0) == 0:
        for k in range(1, num_simd_groups()):
            s = _combine(s, red[k], OP)
    barrier()
    return s


@iron.func
def _finish(r, count, sign, OP):
    if OP == "max":
        r = r * sign
    else:
        r = r / count
    return r


@iron.func
def _better(v, j, w, k):
    """Does (value v, index j) beat (w, k)? NaN beats numbers, then larger values, then lower indices."""
    return ((v != v) & ((w == w) | (j < k))) | (v > w) | ((v == w) & (j < k))


@iron.func
def _arg_merge(v, j, w, k):
    take = _better(w, k, v, j)
    return select(take, w, v), select(take, k, j)


@iron.func
def _arg_thread(x, lo, hi, t, nt, VEC, aligned):
    """Thread ``t`` of ``nt``'s best (f32 value, absolute index) over [lo, hi); (-inf, NO_INDEX) if none."""
    a, b = _body(lo, hi, VEC, aligned)
    bv = splat(-INF, VEC)
    bi = splat(NO_INDEX, VEC)
    if VEC == 4:
        iota = vec(0, 1, 2, 3)
    else:
        iota = vec(0, 1, 2, 3, 4, 5, 6, 7)
    for i in range(a + t * VEC, b, nt * VEC):
        v = f32(x.load(i, width=VEC))
        j = iota + i
        take = _better(v, j, bv, bi)
        bv = select(take, v, bv)
        bi = select(take, j, bi)
    if VEC == 8:
        v0, i0 = _arg_merge(bv[0], bi[0], bv[4], bi[4])
        v1, i1 = _arg_merge(bv[1], bi[1], bv[5], bi[5])
        v2, i2 = _arg_merge(bv[2], bi[2], bv[6], bi[6])
        v3, i3 = _arg_merge(bv[3], bi[3], bv[7], bi[7])
    else:
        v0, i0, v1, i1, v2, i2, v3, i3 = bv[0], bi[0], bv[1], bi[1], bv[2], bi[2], bv[3], bi[3]
    v0, i0 = _arg_merge(v0, i0, v2, i2)
    v1, i1 = _arg_merge(v1, i1, v3, i3)
    s, si = _arg_merge(v0, i0, v1, i1)
    for j in range(lo + t, a, nt):
        s, si = _arg_merge(s, si, f32(x[j]), j)
    for j in range(b + t, hi, nt):
        s, si = _arg_merge(s, si, f32(x[j]), j)
    return s, si


@iron.func
def _arg_simd(v, j):
    """Every lane gets its subgroup's best (value, index): the lowest index among the NaN lanes, else
    among the lanes holding the maximum."""
    nan = simd_any(v != v)
    top = simd_max(v)
    hit = select(nan, v != v, v == top)
    best = simd_min(select(hit, j, NO_INDEX))
    return select(nan, NAN, top), best


@iron.func
def _arg_group(v, j, redv, redi):
    """The group's best (value, index) on thread 0: subgroups first, then thread 0 in subgroup order."""
    v, j = _arg_simd(v, j)
    if lane_id() == 0:
        redv[simd_group_id()] = v
        redi[simd_group_id()] = j
    barrier()
    if thread_id(0) == 0:
        for k in range(1, num_simd_groups()):
            v, j = _arg_merge(v, j, redv[k], redi[k])
    barrier()
    return v, j


# ---------------------------------------------------------------- kernels
#
# NOTE: in the subgroup-per-row schedule a subgroup past the last row redoes the last row and stores
# nothing, instead of skipping it under an `if`: that `if` around the row's loops and simd_sum made
# NVRTC 13.5's ptxas fail for sm_90 ("C7600 Register allocation failed with register count of '7'").

@kernel(variants(T=[f32, f16, bf16], U=[f32, f16, bf16], VEC=[4, 8], OP=["sum", "max"]))
def reduce_rows(x: In[T], out: Tensor[U], rows: int, cols: int, n: int, count: float, sign: float, by_simd: bool,
                aligned: bool):
    """out[r] = sum(x[lo:hi]) / count (OP sum) or sign * max(sign * x[lo:hi]) (OP max), lo = r*cols,
    hi = min(lo + cols, n): mean is count = cols, min is sign = -1.

    x: T (f32/f16/bf16), flat, contiguous, rows x cols (the last row cut short at n: how a whole tensor
    splits into chunks; n = rows * cols otherwise); out: U (T for results, f32 for partials), rows
    elements.  ``by_simd``: one subgroup per row (group g takes rows g * S .. g * S + S - 1, S its number of
    subgroups; the host launches rows / SIMD_ROWS groups); else one group per row.
    ``aligned``: x's buffer starts 16-byte aligned (else every load is scalar).  Domain: n < 2**31,
    groups of GROUP threads (1-D), any number of groups (they loop over rows).  Rows may start and end
    anywhere (scalar head and tail).  Order: module docstring; one rounding to U.  Non-finite: sum IEEE,
    max NaN if any element is NaN.
    """
    red = shared(f32, GROUP)
    if by_simd:
        lane = lane_id()
        per_group = num_simd_groups()
        for blk in range(group_id(0), (rows + per_group - 1) // per_group, num_groups(0)):
            mine = blk * per_group + simd_group_id()
            row = _fmin(mine, rows - 1)    # past the end: redo the last row, store nothing (see NOTE)
            lo = row * cols
            s = _thread_partial(x, lo, _fmin(lo + cols, n), lane, simd_size(), VEC, OP, sign, aligned)
            s = _simd_combine(s, OP)
            if lane == 0 and mine < rows:
                out[row] = U(_finish(s, count, sign, OP))
    else:
        t = thread_id(0)
        for row in range(group_id(0), rows, num_groups(0)):
            lo = row * cols
            s = _thread_partial(x, lo, _fmin(lo + cols, n), t, group_size(0), VEC, OP, sign, aligned)
            s = _group_combine(s, red, OP)
            if t == 0:
                out[row] = U(_finish(s, count, sign, OP))


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def argmax_rows(x: In[T], out: Tensor[i32], rows: int, cols: int, n: int, by_simd: bool, aligned: bool):
    """out[r] = the index within row r of the max of x[lo:hi] (lo = r*cols, hi = min(lo + cols, n)).

    x: T (f32/f16/bf16), flat, contiguous, rows x cols, the last row may be cut short at n (whole-tensor
    stage 1); out: i32, rows elements.  Rows must be non-empty.  ``by_simd`` and ``aligned`` and the domain
    as in ``reduce_rows``.  Ties: the lowest index.  NaN: the index of the row's first NaN.  The policy is
    a total order on (value, index) pairs, so the result is exact whatever the combine order.
    """
    redv = shared(f32, GROUP)
    redi = shared(i32, GROUP)
    if by_simd:
        lane = lane_id()
        per_group = num_simd_groups()
        for blk in range(group_id(0), (rows + per_group - 1) // per_group, num_groups(0)):
            mine = blk * per_group + simd_group_id()
            row = _fmin(mine, rows - 1)
            lo = row * cols
            v, j = _arg_thread(x, lo, _fmin(lo + cols, n), lane, simd_size(), VEC, aligned)
            v, j = _arg_simd(v, j)
            if lane == 0 and mine < rows:
                out[row] = j - lo
    else:
        t = thread_id(0)
        for row in range(group_id(0), rows, num_groups(0)):
            lo = row * cols
            v, j = _arg_thread(x, lo, _fmin(lo + cols, n), t, group_size(0), VEC, aligned)
            v, j = _arg_group(v, j, redv, redi)
            if t == 0:
                out[row] = j - lo


@kernel(variants(T=[f32, f16, bf16]))
def argmax_finish(x: In[T], part: In[i32], out: Tensor[i32], parts: int, chunk: int):
    """out[0] = the flat index of x's max, given part[k] = the argmax within chunk k (x[k*chunk ...]).

    One group of GROUP threads; thread t takes partials t, t + GROUP, ... and re-reads their values
    from x (exact in f32).  Ties and NaN as ``argmax_rows``.
    """
    redv = shared(f32, GROUP)
    redi = shared(i32, GROUP)
    t = thread_id(0)
    v = -INF
    j = NO_INDEX
    for k in range(t, parts, group_size(0)):
        g = k * chunk + part[k]
        v, j = _arg_merge(v, j, f32(x[g]), g)
    v, j = _arg_group(v, j, redv, redi)
    if t == 0:
        out[0] = j


# ---------------------------------------------------------------- host

def _rows_and_cols(x: Any, axis: int | None, what: str) -> tuple[tuple[int, ...], int, int]:
    """(output shape, rows, cols) of a reduction of ``x`` over ``axis`` (-1 / the last, or None)."""
    shape = _host.shape_of(x)
    n = _host.size_of(x)
    if n >= 2**31:
        raise LaunchError(f"{what}: {n} elements; the kernels index with i32 (at most 2**31 - 1)")
    if axis is None:
        return (), 1, n
    if not shape:
        raise LaunchError(f"{what}: axis={axis} needs an array with at least one dimension; use axis=None")
    if axis not in (-1, len(shape) - 1):
        raise LaunchError(f"{what}: axis={axis}: only the last axis (-1) or None (the whole tensor) is supported")
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return shape[:-1], rows, shape[-1]


def _output(x: Any, out: Any, shape: tuple[int, ...], dtype: Any, what: str) -> Any:
    return _host.output(what, out, x, shape, dtype, {"x": x})


def is_aligned(x: Any) -> bool:
    """x's first element sits on a 16-byte boundary (or its address is unknown): the vector loads are legal."""
    address = None
    if hasattr(x, "data_ptr"):
        address = int(x.data_ptr())
    else:
        for attr in ("__array_interface__", "__cuda_array_interface__"):
            iface = getattr(x, attr, None)
            if iface is not None:
                address = int(iface["data"][0])
                break
    return address is None or address % _host.VECTOR_BYTES == 0


def by_subgroup(rows: int, cols: int, dt: Any) -> bool:
    """One subgroup per row: rows of at most SHORT_ROW_BYTES, or at least MANY_ROWS rows."""
    return cols * dt.itemsize <= SHORT_ROW_BYTES or rows >= MANY_ROWS


def row_groups(rows: int, by_simd: bool) -> int:
    """Groups of a row launch: one per row (or per SIMD_ROWS rows), at most MAX_GROUPS (they loop)."""
    groups = _host.ceil_div(rows, SIMD_ROWS) if by_simd else rows
    return groups if groups < MAX_GROUPS else MAX_GROUPS


def chunking(n: int, vec: int) -> tuple[int, int]:
    """(parts, chunk): a whole tensor of n elements as ``parts`` rows of ``chunk`` (a multiple of vec), the
    last cut short; parts <= MAX_PARTIALS and each chunk at least GROUP * vec * VECTORS_PER_THREAD."""
    if n == 0:
        return 1, 0
    parts = _host.ceil_div(n, GROUP * vec * VECTORS_PER_THREAD)
    parts = parts if parts < MAX_PARTIALS else MAX_PARTIALS
    chunk = _host.ceil_div(_host.ceil_div(n, parts), vec) * vec
    return _host.ceil_div(n, chunk), chunk


def _reduce(op: str, x: Any, axis: int | None, out: Any, backend: str | None) -> Any:
    dt = _host.check_float(x, op)
    shape, rows, cols = _rows_and_cols(x, axis, op)
    if op in ("max", "min") and cols == 0 and rows:
        raise LaunchError(f"{op}: a reduction over an empty axis has no identity")
    result = _output(x, out, shape, dt, op)
    kind = "sum" if op in ("sum", "mean") else "max"
    sign = -1.0 if op == "min" else 1.0
    vec = _host.vector_width(dt)
    aligned = is_aligned(x)
    if axis is not None:
        if rows:
            simd = by_subgroup(rows, cols, dt)
            count = float(cols) if op == "mean" else 1.0
            reduce_rows.variant(T=dt, U=dt, VEC=vec, OP=kind).launch(
                x, result, rows, cols, rows * cols, count, sign, simd, aligned,
                grid=(row_groups(rows, simd) * GROUP,), group=(GROUP,), backend=backend)
        return result
    n = cols
    parts, chunk = chunking(n, vec)
    partial = _host.empty_like(x, parts, iron.f32)
    reduce_rows.variant(T=dt, U=f32, VEC=vec, OP=kind).launch(
        x, partial, parts, chunk, n, 1.0, sign, False, aligned, grid=(row_groups(parts, False) * GROUP,),
        group=(GROUP,), backend=backend)
    # The partials are each chunk's own result (min already negated back): the finish reduces them alike.
    count = float(n) if op == "mean" else 1.0
    reduce_rows.variant(T=f32, U=dt, VEC=4, OP=kind).launch(
        partial, result, 1, parts, parts, count, sign, False, True, grid=(GROUP,), group=(GROUP,), backend=backend)
    return result


@planned
def sum(x: Any, axis: int | None = -1, out: Any = None, backend: str | None = None) -> Any:  # noqa: A001
    """Sum over the last axis (axis=-1) or the whole tensor (axis=None); f32 accumulation, output x's dtype."""
    return _reduce("sum", x, axis, out, backend)


@planned
def mean(x: Any, axis: int | None = -1, out: Any = None, backend: str | None = None) -> Any:
    """Mean over the last axis or the whole tensor: the f32 sum divided once by the count (empty: NaN)."""
    return _reduce("mean", x, axis, out, backend)


@planned
def max(x: Any, axis: int | None = -1, out: Any = None, backend: str | None = None) -> Any:  # noqa: A001
    """Maximum over the last axis or the whole tensor (NaN if any element is NaN); output x's dtype."""
    return _reduce("max", x, axis, out, backend)


@planned
def min(x: Any, axis: int | None = -1, out: Any = None, backend: str | None = None) -> Any:  # noqa: A001
    """Minimum over the last axis or the whole tensor (NaN if any element is NaN); output x's dtype."""
    return _reduce("min", x, axis, out, backend)


@planned
def argmax(x: Any, axis: int | None = -1, out: Any = None, backend: str | None = None) -> Any:
    """i32 index of the maximum (first on ties, the first NaN if any) along the last axis, or flat (None)."""
    dt = _host.check_float(x, "argmax")
    shape, rows, cols = _rows_and_cols(x, axis, "argmax")
    if cols == 0 and rows:
        raise LaunchError("argmax: an empty axis has no maximum")
    result = _output(x, out, shape, iron.i32, "argmax")
    vec = _host.vector_width(dt)
    aligned = is_aligned(x)
    if axis is not None:
        if rows:
            simd = by_subgroup(rows, cols, dt)
            argmax_rows.variant(T=dt, VEC=vec).launch(x, result, rows, cols, rows * cols, simd, aligned,
                                                      grid=(row_groups(rows, simd) * GROUP,), group=(GROUP,),
                                                      backend=backend)
        return result
    n = cols
    parts, chunk = chunking(n, vec)
    part = _host.empty_like(x, parts, iron.i32)
    argmax_rows.variant(T=dt, VEC=vec).launch(x, part, parts, chunk, n, False, aligned,
                                              grid=(row_groups(parts, False) * GROUP,), group=(GROUP,),
                                              backend=backend)
    argmax_finish.variant(T=dt).launch(x, part, result, parts, chunk, grid=(GROUP,), group=(GROUP,),
                                       backend=backend)
    return result


__all__ = ["argmax", "argmax_finish", "argmax_rows", "by_subgroup", "chunking", "is_aligned", "max", "mean", "min",
           "reduce_rows", "row_groups", "sum"]
