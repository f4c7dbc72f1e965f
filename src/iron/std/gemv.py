"""Matrix-vector products: ``y = A x`` (rows) and ``y = x^T A`` (columns), memory bound.

Both read A exactly once, in 16-byte vector loads (4 f32, 8 f16/bf16), and accumulate in f32 with
a fixed, documented summation order: no float atomics, so a result does not change from run to
run.  ``gemv(A, x, transpose=False)`` picks the kernel and launches it (docs/std/gemv.md).
"""

from __future__ import annotations

from typing import Any

from iron import In, LaunchError, T, Tensor, bf16, f16, f32, kernel, variants
from iron.lang import (barrier, grid_size, group_id, lane_id, local, num_groups, program_id, shared,
                       simd_shuffle_xor, simd_size, static_range, thread_id)

from . import _host
from ._plans import planned

#: Threads per group of both kernels as ``gemv`` launches them (the columns kernel also takes 1024).
GROUP = 256
#: Vulkan (lavapipe and most drivers) caps a grid axis at 65535 groups; the kernels loop past it.
MAX_GROUPS = 65535
#: The columns kernel aims for at least this many groups: two per SM of a 132-SM GPU (the H200).
TARGET_GROUPS = 264
#: Column threads per group the columns kernel may use (powers of two; the rest of the group splits K).
COLUMN_THREADS = (32, 16, 8, 4, 2)
#: A split ``gemv_cols`` aims for this many (column block, K split) items: four groups of 256 per SM of a
#: 132-SM GPU; each split keeps at least MIN_SPLIT_ROWS rows, so its f32 partials stay a few percent of A.
SPLIT_TARGET = 528
MIN_SPLIT_ROWS = 64


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def gemv_rows(a: In[T], x: In[T], y: Tensor[T], m: int, k: int, vectors: bool):
    """y[r] = sum_c A[r, c] * x[c]: one subgroup per row, rows strided over the grid's subgroups.

    A: (m, k) row-major contiguous; x: (k,); y: (m,); all of dtype T (f32, f16, bf16); f32 products
    and sums, one rounding to T at the store.  m >= 1, k >= 1, m * k < 2**31.  The grid must be a
    whole number of groups and the group size a multiple of the subgroup width W (full subgroups).
    vectors: rows move as 16-byte vectors (the host sets it when k % VEC == 0 and A and x are 16-byte
    aligned; it must not otherwise).  Order: with vectors, lane l keeps VEC f32 accumulators;
    accumulator j adds (fma) A[r, c] x[c] for c = (l + i W) VEC + j, i = 0, 1, ... in order; the VEC
    accumulators meet in a pairwise tree, then the W lanes in a xor butterfly (log2 W levels).
    Without (the scalar path) lane l adds c = l, l + W, ... in order, then the butterfly.
    Non-finite: IEEE f32 arithmetic; a NaN in row r or in x makes y[r] NaN (also an Inf times 0);
    Infs of both signs give NaN, finite inputs whose sum overflows T give +-Inf.
    """
    w = simd_size()
    lane = lane_id()
    teams = grid_size(0) // w
    row = program_id(0) // w
    while row < m:
        base = row * k
        total = 0.0
        if vectors:
            acc = local(f32, VEC)
            # 16 vectors in flight per lane (the H200's bench, unroll 4 -> 16: 11008 x 4096 bf16 32.0 -> 27.0 us,
            # f16 30.0 -> 26.4; 4096 x 4096 13.6-14.3 -> 12.3-12.4 us)
            for c in range(lane * VEC, k, w * VEC, unroll=16):
                av = f32(a.load(base + c, width=VEC))
                xv = f32(x.load(c, width=VEC))
                for j in static_range(VEC):
                    acc[j] = av[j] * xv[j] + acc[j]
            span = VEC // 2
            for level in static_range(3):  # the pairwise tree over the VEC accumulators
                if span >= 1:
                    for j in static_range(span):
                        acc[j] = acc[j] + acc[j + span]
                span = span // 2
            total = acc[0]
        else:
            for c in range(lane, k, w, unroll=4):
                total = f32(a[base + c]) * f32(x[c]) + total
        half = w // 2
        while half > 0:  # a xor butterfly (not simd_sum: see docs/std/gemv.md, "sm_90 ptxas")
            total = total + simd_shuffle_xor(total, half)
            half = half // 2
        if lane == 0:
            y[row] = T(total)
        row += teams


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], THREADS=[256, 1024]))
def gemv_cols(a: In[T], x: In[T], y: Tensor[T], part: Tensor[f32], k: int, n: int, ct: int, kstep: int,
              vectors: bool):
    """y[c] = sum_r x[r] * A[r, c]: a group per block of CT * VEC columns and split of K rows.

    A: (k, n) row-major contiguous; x: (k,); y: (n,); dtype T (f32, f16, bf16); f32 products and sums.
    k >= 1, n >= 1, k * n < 2**31.  Groups of exactly THREADS threads (1-D); ct (column threads, CT) a
    power of two with CT * VEC <= 256; the grid a whole number of groups (work items loop over it).
    K is cut into S = ceil(k / kstep) splits of kstep rows; a work item is a (column block, split) pair,
    the block varying fastest.  With S = 1 the item writes y[c] (one rounding to T); with S > 1 it writes
    split sp's f32 sum to part[sp * n + c] (part: (S, n) f32) and ``gemv_cols_sum`` adds the splits.
    Thread t owns columns [b + (t % CT) VEC, + VEC) of block b and the split's rows r0 + s, r0 + s + R,
    ... (s = t // CT, R = THREADS / CT): one 16-byte load of A per row with vectors (the host's: n % VEC
    == 0 and A 16-byte aligned), else VEC scalar loads, each column checked against n (the tail).
    Order: each thread adds its rows in order (fma); a xor butterfly sums the max(1, W / CT) slices in
    one subgroup; the P = THREADS / max(CT, W) subgroup partials meet in shared memory and one thread
    per column adds them in slice order.  Deterministic: no atomics.
    Non-finite: IEEE f32 arithmetic; a NaN in column c or in x makes y[c] NaN (also Inf * 0).
    """
    buf = shared(f32, THREADS * VEC)
    t = thread_id(0)
    w = simd_size()
    slices = THREADS // ct
    col_thread = t % ct
    s = t // ct
    width = ct * VEC
    blocks = (n + width - 1) // width
    splits = (k + kstep - 1) // kstep
    item = group_id(0)
    while item < blocks * splits:
        block = item % blocks
        sp = item // blocks
        r0 = sp * kstep
        r1 = min(k, r0 + kstep)
        first = block * width + col_thread * VEC
        acc = local(f32, VEC)
        if vectors:
            if first < n:
                # unroll 8 measured the same as 4 in the H200's bench (x @ A split, f16 N=11008: 33.7 / 33.6 us)
                for r in range(r0 + s, r1, slices, unroll=4):
                    av = f32(a.load(r * n + first, width=VEC))
                    xr = f32(x[r])
                    for j in static_range(VEC):
                        acc[j] = av[j] * xr + acc[j]
        else:
            for r in range(r0 + s, r1, slices, unroll=4):
                xr = f32(x[r])
                for j in static_range(VEC):
                    if first + j < n:
                        acc[j] = f32(a[r * n + first + j]) * xr + acc[j]
        mask = ct
        while mask < w:  # lanes mask apart hold one column chunk's other K slices
            for j in static_range(VEC):
                acc[j] = acc[j] + simd_shuffle_xor(acc[j], mask)
            mask = mask * 2
        reps = max(ct, w) // ct  # slices one subgroup held (R)
        # Plane j of buf holds element j of every chunk, partial p at p * CT + chunk (a layout of
        # scalar stores: HIP rejects the aligned array that vectorised ones would need).
        if s % reps == 0:
            for j in static_range(VEC):
                buf[j * THREADS + (s // reps) * ct + col_thread] = acc[j]
        barrier()
        if t < width:
            col = block * width + t
            if col < n:
                plane = (t % VEC) * THREADS + t // VEC
                total = buf[plane]
                for p in range(1, THREADS // max(ct, w)):
                    total = total + buf[plane + p * ct]
                if splits == 1:
                    y[col] = T(total)
                else:
                    part[sp * n + col] = total
        barrier()
        item += num_groups(0)


@kernel(variants(T=[f32, f16, bf16]))
def gemv_cols_sum(part: In[f32], y: Tensor[T], n: int, splits: int):
    """y[c] = sum over sp of part[sp * n + c], splits in order (f32), one rounding to T: the second pass
    of a split ``gemv_cols``.  part (splits, n) f32; y (n,); a thread per column, looping over the grid."""
    c = program_id(0)
    while c < n:
        total = part[c]
        for sp in range(1, splits):
            total = total + part[sp * n + c]
        y[c] = T(total)
        c += grid_size(0)


def choose_column_threads(n: int, vec: int) -> int:
    """The widest column block (CT threads of VEC columns) that still gives TARGET_GROUPS groups.

    Wider blocks read longer row segments per group; narrower ones split K further and give more
    groups.  At least 2 threads (32 bytes, one memory sector) per row segment.
    """
    for ct in COLUMN_THREADS:
        if _host.ceil_div(n, ct * vec) >= TARGET_GROUPS:
            return ct
    return COLUMN_THREADS[-1]


def aligned(*arrays: Any, boundary: int = _host.VECTOR_BYTES) -> bool:
    """Whether every array's first element sits on a ``boundary``-byte boundary (unknown addresses
    count as aligned: the interpreter and Vulkan copy arrays into their own buffers)."""
    for a in arrays:
        if hasattr(a, "data_ptr"):
            address = int(a.data_ptr())
        else:
            iface = getattr(a, "__cuda_array_interface__", None) or getattr(a, "__array_interface__", None)
            address = int(iface["data"][0]) if iface is not None else 0
        if address % boundary:
            return False
    return True


def rows_grid(m: int) -> int:
    """Threads for ``gemv_rows``: 32 per row (a subgroup on NVIDIA; wider subgroups take several rows
    each, narrower ones leave the spare subgroups idle), capped at MAX_GROUPS groups (rows then loop)."""
    return min(_host.ceil_div(m * 32, GROUP), MAX_GROUPS) * GROUP


def cols_grid(n: int, vec: int, ct: int, threads: int = GROUP, splits: int = 1) -> int:
    """Threads for ``gemv_cols``: a group of ``threads`` per (block of ``ct * vec`` columns, K split),
    capped at MAX_GROUPS groups."""
    return min(_host.ceil_div(n, ct * vec) * splits, MAX_GROUPS) * threads


def split_rows(k: int, n: int, vec: int, ct: int = COLUMN_THREADS[0]) -> int:
    """kstep for a split ``gemv_cols`` with ``ct`` column threads: enough splits for about SPLIT_TARGET
    items, each of at least MIN_SPLIT_ROWS rows (one split, kstep = k, when K is short)."""
    blocks = _host.ceil_div(n, ct * vec)
    splits = max(1, min(_host.ceil_div(SPLIT_TARGET, blocks), k // MIN_SPLIT_ROWS))
    return _host.ceil_div(k, splits)


def column_plan(k: int, n: int, dt: Any, backend: str | None, like: Any = ()) -> tuple[int, int, int]:
    """(CT, kstep, threads) of the ``gemv_cols`` launch ``gemv`` makes for A (k, n).

    Without a split a group reads row segments of CT * 16 bytes, narrow when N is short (CT = 2: 32
    bytes); a split keeps them 512 bytes wide (CT = 32) and finds its parallelism in K instead.
    """
    vec = _host.vector_width(dt)
    ct = choose_column_threads(n, vec)
    kstep = split_rows(k, n, vec)
    if ct == COLUMN_THREADS[0] or kstep >= k:
        return ct, k, column_group_threads(dt, backend, like)
    return COLUMN_THREADS[0], kstep, GROUP


def sum_grid(n: int) -> int:
    """Threads for ``gemv_cols_sum``: one per column, capped at MAX_GROUPS groups of GROUP."""
    return min(_host.ceil_div(n, GROUP), MAX_GROUPS) * GROUP


def column_group_threads(dt: Any, backend: str | None, like: Any = ()) -> int:
    """Threads of a ``gemv_cols`` group: 1024 for f16/bf16 on CUDA, where the H200 measured it (x @ A,
    K=11008 N=4096: 61 -> 48 us, no shape slower), else GROUP (f32 there: 1024 was slower, 64 -> 75 us)."""
    return 1024 if dt.itemsize == 2 and _host.tuned_for_cuda_mma(backend, like) else GROUP


@planned
def gemv(A: Any, x: Any, out: Any = None, transpose: bool = False, backend: str | None = None) -> Any:
    """``A @ x`` (A (M, K)), or ``x @ A`` with ``transpose=True`` (A (K, N)); f32/f16/bf16, f32 sums.

    A and x must share a dtype and be contiguous; ``out`` (M,) or (N,) of that dtype is written and
    returned, else a new array like ``x`` is.
    """
    dt = _host.check_float(A, "gemv: A")
    xdt = _host.check_float(x, "gemv: x")
    if xdt != dt:
        raise LaunchError(f"gemv: A is {dt.name} but x is {xdt.name}; give both one dtype")
    shape = _host.shape_of(A)
    if len(shape) != 2:
        raise LaunchError(f"gemv: A must be a matrix (2-D), got shape {shape}")
    rows, cols = shape
    inner, outer = (rows, cols) if transpose else (cols, rows)
    _host.check_shape(x, (inner,), "gemv: x")
    if inner == 0 and outer:
        raise LaunchError(f"gemv: A has an empty extent {shape}: each output would be a sum of nothing")
    if rows * cols >= 1 << 31:
        raise LaunchError(f"gemv: A has {rows * cols} elements; the kernels index with i32 (< 2**31)")
    out = _host.output("gemv", out, x, (outer,), dt, {"A": A, "x": x})
    if outer == 0:
        return out
    _launch(A, x, out, rows, cols, transpose, dt, backend)
    return out


def _launch(A: Any, x: Any, out: Any, rows: int, cols: int, transpose: bool, dt: Any, backend: str | None) -> None:
    """The launches of :func:`gemv` for checked arguments; x and out are read and written as flat vectors
    (gemm's M = 1 products come here with x (1, K) and out (1, N))."""
    vec = _host.vector_width(dt)
    vectors = cols % vec == 0 and aligned(A, x)
    if transpose:
        ct, kstep, threads = column_plan(rows, cols, dt, backend, (A,))
        splits = _host.ceil_div(rows, kstep)
        part = _host.empty_like(x, (splits, cols), f32) if splits > 1 else _host.unread(x, f32)
        gemv_cols.variant(T=dt, VEC=vec, THREADS=threads).launch(
            A, x, out, part, rows, cols, ct, kstep, vectors, grid=(cols_grid(cols, vec, ct, threads, splits),),
            group=(threads,), backend=backend)
        if splits > 1:
            gemv_cols_sum.variant(T=dt).launch(part, out, cols, splits, grid=(sum_grid(cols),), group=(GROUP,),
                                               backend=backend)
    else:
        gemv_rows.variant(T=dt, VEC=vec).launch(A, x, out, rows, cols, vectors, grid=(rows_grid(rows),),
                                                 group=(GROUP,), backend=backend)


__all__ = ["aligned", "choose_column_threads", "cols_grid", "gemv", "gemv_cols", "gemv_rows", "rows_grid"]
