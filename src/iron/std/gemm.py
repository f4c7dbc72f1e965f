"""GEMM: C = act(A @ B + bias), with f32 accumulation and one rounding to T.

Two kernels, one contract:

* :data:`gemm_fma` (f32, and f16/bf16 where no matrix unit runs): a 128x128 block tile per
  group of 256 threads, each thread an 8x8 register tile, K in steps of 8 through shared
  memory (A and B stored k-major and padded, so the inner loop reads 16-byte vectors without
  bank conflicts), double-buffered with a register prefetch of the next K step.
* :data:`gemm_mma` (f16/bf16): the matrix units through the fragment API.  Each subgroup owns
  a warp tile of up to 4 x 8 fragments (64x64 with CUDA's 16x8x16 ``mma.sync``), a group of
  ``WARPS`` subgroups a block tile; A and B tiles go through a ring of ``STAGES`` shared buffers
  filled by asynchronous 16-byte copies (``cp.async`` on CUDA), so the next K steps are on their
  way while one multiplies; fragments load from shared memory (``ldmatrix`` on CUDA).  The
  epilogue stages the f32 accumulators in shared memory, one pair of fragments at a time, to add
  the bias, apply the activation and store 16-byte vectors of T.

The host function :func:`gemm` picks the kernel and its configuration per backend.
"""

from __future__ import annotations

from typing import Any

from iron import In, LaunchError, T, Tensor, bf16, f16, f32, func, kernel, variants
from iron.lang import (barrier, cast, copy_async, copy_async_commit, copy_async_wait, exp, fma, frag_a, frag_acc,
                       frag_b, frag_store, group_id, lane_id, local, mma, num_groups, select, shared, simd_group_id,
                       simd_size, static_range, tanh, thread_id, vec)
from iron.codegen.mma import (AMD_MFMA_GFX90A, AMD_WMMA_RDNA3, CUDA_MMA_SYNC_M16N8K16, METAL_SIMDGROUP_8x8,
                              VULKAN_KHR_COOPERATIVE_MATRIX)
from iron.jit.device import DeviceTraits, device_traits

from . import _host
from ._plans import planned

#: The epilogue activations, a compile-time variant of both kernels.
ACTIVATIONS = ("none", "relu", "gelu_tanh", "silu")
#: Output tiles per "super row" of the block swizzle: neighbouring groups share A rows and B columns in L2.
SWIZZLE = 8


@func
def activate(x, act):
    """The epilogue activation in f32 (scalar or vector); ``act`` is compile-time."""
    y = x
    if act == "relu":
        y = select(x < 0.0, 0.0, x)  # not max(): that would turn a NaN into 0
    elif act == "silu":
        y = x / (1.0 + exp(-x))
    elif act == "gelu_tanh":
        y = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    return y


@func
def swizzled_tile():
    """(tile row, tile column) of this group: groups walk SWIZZLE tile rows at a time, column by column."""
    tiles_n = num_groups(0)
    tiles_m = num_groups(1)
    pid = group_id(1) * tiles_n + group_id(0)
    width = SWIZZLE * tiles_n
    first = (pid // width) * SWIZZLE
    rows = min(tiles_m - first, SWIZZLE)
    within = pid % width
    return first + within % rows, within // rows


@func
def load_chunk(t, ld, row, col, rows, cols, fast, width):
    """Elements (row, col .. col+width-1) of a row-major rows x cols matrix as a vector; 0 outside it.

    ``fast``: rows keep width-element chunks aligned (ld % width == 0), so a chunk wholly inside the
    matrix is one 16-byte (or 8-byte) load; a chunk on an edge reads element by element.
    """
    if fast and row < rows and col + width <= cols:
        v = t.load(row * ld + col, width=width)
    else:
        part = local(t.dtype, width)
        for e in static_range(width):
            if row < rows and col + e < cols:
                part[e] = t[row * ld + col + e]
        if width == 4:
            v = vec(part[0], part[1], part[2], part[3])
        else:
            v = vec(part[0], part[1], part[2], part[3], part[4], part[5], part[6], part[7])
    return v


@func
def stage_chunk(dst, at, t, ld, row, col, rows, cols, fast):
    """dst[at .. at+7] = elements (row, col .. col+7) of a row-major rows x cols matrix, 0 outside it.

    ``fast`` (rows keep 8-element chunks 16-byte aligned: ld % 8 == 0, so a chunk lies wholly inside
    or outside): one asynchronous 16-byte copy, landed by ``copy_async_wait``; the data never passes
    through registers, so nothing waits for it while the matrix units work.  Else element by element.
    """
    if fast:
        copy_async(dst, at, t, row * ld + col, 8, row < rows and col + 8 <= cols)
    else:
        for e in static_range(8):
            x = cast(0.0, t.dtype)
            if row < rows and col + e < cols:
                x = t[row * ld + col + e]
            dst[at + e] = x


@func
def stage_step(a, b, a_s, b_s, a_at, b_at, k0, bm, bn, m, n, k, tid, threads, a_chunks, b_chunks, a_cpr, b_cpr,
               lda, ldb, vec_a, vec_b, bt):
    """Start copying K step k0 .. k0+BK-1 of this group's A and B tiles to a_s[a_at ..] and b_s[b_at ..].

    A's tile is rows bm.. by k; B's is rows bn.. by k (``bt``: B given (n, k)) or rows k0.. by n from bn.
    When both matrices keep chunks aligned (the usual case) one uniform branch leads to straight-line
    asynchronous copies; else each matrix takes its own path (:func:`stage_chunk`).
    """
    b_row0 = bn if bt else k0
    b_col0 = k0 if bt else bn
    b_rows = n if bt else k
    b_cols = k if bt else n
    if vec_a and vec_b:
        stage_tiles(a, b, a_s, b_s, a_at, b_at, k0, bm, m, k, b_row0, b_col0, b_rows, b_cols, tid, threads,
                    a_chunks, b_chunks, a_cpr, b_cpr, lda, ldb, True, True)
    else:
        stage_tiles(a, b, a_s, b_s, a_at, b_at, k0, bm, m, k, b_row0, b_col0, b_rows, b_cols, tid, threads,
                    a_chunks, b_chunks, a_cpr, b_cpr, lda, ldb, vec_a, vec_b)


@func
def stage_tiles(a, b, a_s, b_s, a_at, b_at, k0, bm, m, k, b_row0, b_col0, b_rows, b_cols, tid, threads, a_chunks,
                b_chunks, a_cpr, b_cpr, lda, ldb, fast_a, fast_b):
    """The copies of :func:`stage_step`: each thread moves ``a_chunks`` / ``b_chunks`` 16-byte chunks."""
    for ch in static_range(a_chunks):
        q = tid + ch * threads
        stage_chunk(a_s, a_at + (q // a_cpr) * lda + (q % a_cpr) * 8, a, k, bm + q // a_cpr, k0 + (q % a_cpr) * 8,
                    m, k, fast_a)
    for ch in static_range(b_chunks):
        q = tid + ch * threads
        stage_chunk(b_s, b_at + (q // b_cpr) * ldb + (q % b_cpr) * 8, b, b_cols, b_row0 + q // b_cpr,
                    b_col0 + (q % b_cpr) * 8, b_rows, b_cols, fast_b)


# ---------------------------------------------------------------- FMA: 128x128 block, 8x8 per thread

FMA_BM = 128
FMA_BN = 128
FMA_BK = 8
FMA_THREADS = 256
FMA_LD = FMA_BM + 4  # k-major rows padded by 4 floats: the transposing stores spread over all banks


@kernel(variants(T=[f32, f16, bf16], BT=[False, True], BIAS=[False, True], ACT=list(ACTIVATIONS)))
def gemm_fma(a: In[T], b: In[T], bias: In[T], c: Tensor[T], m: int, n: int, k: int):
    """C = act(A @ B + bias) on the FMA units (docs/std/gemm.md).

    a: (m, k) row-major; b: (k, n) row-major, or (n, k) row-major when BT ("B transposed", the
    nn.Linear weight); bias: (n,) when BIAS (else any one element, unread); c: (m, n) row-major.
    T in f32/f16/bf16; products and sums in f32, bias added and ACT (none, relu, gelu_tanh, silu)
    applied in f32, one rounding to T.  Launch: grid (ceil(n/128)*256, ceil(m/128)), group (256, 1).
    Shapes: m, n >= 1, k >= 0 (k = 0 gives act(bias)), every product of two extents < 2**31 (i32
    indices); loads past m, n or k read 0, stores past m or n are skipped.  Reduction: each
    element is one fma chain over k = 0..k-1 in order.  Non-finite: IEEE propagation through the sum
    (NaN in a row of A or column of B gives NaN; inf gives +-inf, or NaN against a 0 or an opposite inf),
    then the activation's formula: relu keeps NaN and +inf (-inf gives 0); silu and gelu_tanh give NaN
    at -inf; finite sums past T's range round to +-inf.
    """
    tid = thread_id(0)
    tm, tn = swizzled_tile()
    bm = tm * FMA_BM
    bn = tn * FMA_BN
    a_s = shared(f32, 2 * FMA_BK * FMA_LD)  # [stage][k][m]
    b_s = shared(f32, 2 * FMA_BK * FMA_LD)  # [stage][k][n]
    acc = local(f32, 64)
    # This thread's output rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, columns likewise with tx: the
    # 16 threads of a row read 256 contiguous bytes of the B tile per vector load.
    ty = tid // 16
    tx = tid % 16
    # Global loads: one 4-vector of A (row tid/2, k (tid%2)*4) and of B per thread per K step; B's
    # chunk is k (tid%2)*4 of row n = tid/2 (BT), or columns (tid%32)*4 of row k = tid/32.
    vec_a = k % 4 == 0
    vec_b = (k if BT else n) % 4 == 0
    ktiles = (k + FMA_BK - 1) // FMA_BK
    for kt in range(ktiles + 1):
        # Iteration kt loads K step kt into registers (past the last step: zeros, no memory access),
        # multiplies step kt-1 from shared memory, then stores step kt into the other buffer: the
        # global loads fly while the FMAs run.
        k0 = kt * FMA_BK
        va = f32(load_chunk(a, k, bm + tid // 2, k0 + (tid % 2) * 4, m, k, vec_a, 4))
        if BT:
            vb = f32(load_chunk(b, k, bn + tid // 2, k0 + (tid % 2) * 4, n, k, vec_b, 4))
        else:
            vb = f32(load_chunk(b, n, k0 + tid // 32, bn + (tid % 32) * 4, k, n, vec_b, 4))
        if kt > 0:
            base = ((kt - 1) % 2) * FMA_BK * FMA_LD
            for kk in static_range(FMA_BK):
                row = base + kk * FMA_LD
                a0 = a_s.load(row + ty * 4, width=4)
                a1 = a_s.load(row + 64 + ty * 4, width=4)
                b0 = b_s.load(row + tx * 4, width=4)
                b1 = b_s.load(row + 64 + tx * 4, width=4)
                for i in static_range(8):
                    ai = a0[i] if i < 4 else a1[i - 4]
                    for j in static_range(8):
                        bj = b0[j] if j < 4 else b1[j - 4]
                        acc[i * 8 + j] = fma(ai, bj, acc[i * 8 + j])
        if kt < ktiles:
            base = (kt % 2) * FMA_BK * FMA_LD
            for e in static_range(4):
                a_s[base + ((tid % 2) * 4 + e) * FMA_LD + tid // 2] = va[e]
            if BT:
                for e in static_range(4):
                    b_s[base + ((tid % 2) * 4 + e) * FMA_LD + tid // 2] = vb[e]
            else:
                b_s.store(base + (tid // 32) * FMA_LD + (tid % 32) * 4, vb)
        barrier()
    vec_c = n % 4 == 0
    for i in static_range(8):
        row = bm + (i % 4) + ty * 4 + (i // 4) * 64
        if row < m:
            for h in static_range(2):
                col = bn + h * 64 + tx * 4
                y = vec(acc[i * 8 + h * 4], acc[i * 8 + h * 4 + 1], acc[i * 8 + h * 4 + 2], acc[i * 8 + h * 4 + 3])
                if vec_c and col + 4 <= n:
                    if BIAS:
                        y = y + f32(bias.load(col, width=4))
                    c.store(row * n + col, T(activate(y, ACT)))
                else:
                    for e in static_range(4):
                        if col + e < n:
                            x = y[e]
                            if BIAS:
                                x = x + f32(bias[col + e])
                            c[row * n + col + e] = T(activate(x, ACT))


# ---------------------------------------------------------------- matrix units: 4 x 8 fragments per subgroup

#: Fragment shapes (M x N x K) of :data:`gemm_mma`, and which one each matrix unit runs natively
#: (docs/matrix-units.md): CUDA mma.sync and Vulkan cooperative matrices on NVIDIA 16x8x16, AMD MFMA/WMMA
#: 16x16x16, Metal simdgroup_matrix 8x8x8; elsewhere every shape runs the portable path.
FRAGS = ("16x8x16", "16x16x16", "8x8x8")
#: Subgroups per group, as (along M) x (along N).
WARP_GRIDS = ("2x2", "2x1", "1x1", "1x2", "2x4", "4x2")
#: Fragments per subgroup (its warp tile), as (along M) x (along N): at most 4 x 8.
WARP_TILES = ("4x8", "4x4", "2x4", "2x2", "1x2")
PAD = 8  # elements added to each shared row: rows stay 16-byte aligned, fragment rows fall on distinct banks


@func
def frag_dims(frag):
    """(M, N, K) of a FRAGS name."""
    fm, fn, fk = 16, 8, 16
    if frag == "16x16x16":
        fn = 16
    elif frag == "8x8x8":
        fm, fn, fk = 8, 8, 8
    return fm, fn, fk


@func
def grid_dims(name):
    """(along M, along N) of a WARP_GRIDS or WARP_TILES name."""
    rows, cols = 4, 8
    if name == "2x2":
        rows, cols = 2, 2
    elif name == "2x1":
        rows, cols = 2, 1
    elif name == "1x1":
        rows, cols = 1, 1
    elif name == "1x2":
        rows, cols = 1, 2
    elif name == "4x4":
        rows, cols = 4, 4
    elif name == "2x4":
        rows, cols = 2, 4
    elif name == "4x2":
        rows, cols = 4, 2
    return rows, cols


@func
def load_b_frags(b_s, base, step, ld, fk, fn, layout, cols):
    """The B fragments of a warp tile's K step: columns base + j*step (row layout) or rows (col), j < cols.

    Always 8 values; those past ``cols`` repeat the first and are never multiplied.
    """
    f0 = frag_b(b_s, base, ld, fk, fn, layout=layout)
    f1 = frag_b(b_s, base + step, ld, fk, fn, layout=layout)
    if cols == 2:
        frags = (f0, f1, f0, f0, f0, f0, f0, f0)
    elif cols == 4:
        frags = (f0, f1, frag_b(b_s, base + 2 * step, ld, fk, fn, layout=layout),
                 frag_b(b_s, base + 3 * step, ld, fk, fn, layout=layout), f0, f0, f0, f0)
    else:
        frags = (f0, f1, frag_b(b_s, base + 2 * step, ld, fk, fn, layout=layout),
                 frag_b(b_s, base + 3 * step, ld, fk, fn, layout=layout),
                 frag_b(b_s, base + 4 * step, ld, fk, fn, layout=layout),
                 frag_b(b_s, base + 5 * step, ld, fk, fn, layout=layout),
                 frag_b(b_s, base + 6 * step, ld, fk, fn, layout=layout),
                 frag_b(b_s, base + 7 * step, ld, fk, fn, layout=layout))
    return frags


@func
def mma_row(fa, b0, b1, b2, b3, b4, b5, b6, b7, c0, c1, c2, c3, c4, c5, c6, c7, cols):
    """One A fragment against the first ``cols`` B fragments: a row of the warp tile's accumulators."""
    if cols == 2:
        out = (mma(fa, b0, c0), mma(fa, b1, c1), c2, c3, c4, c5, c6, c7)
    elif cols == 4:
        out = (mma(fa, b0, c0), mma(fa, b1, c1), mma(fa, b2, c2), mma(fa, b3, c3), c4, c5, c6, c7)
    else:
        out = (mma(fa, b0, c0), mma(fa, b1, c1), mma(fa, b2, c2), mma(fa, b3, c3), mma(fa, b4, c4),
               mma(fa, b5, c5), mma(fa, b6, c6), mma(fa, b7, c7))
    return out


@func
def acc_tile(fm, fn):
    """A warp tile's 4 x 8 f32 accumulators, zero (those past its WT stay unused and cost nothing)."""
    return (frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn),
            frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn),
            frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn),
            frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn),
            frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn),
            frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn),
            frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn),
            frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn), frag_acc(f32, fm, fn))


@func
def warp_tile_step(a_s, b_s, a_base, b_base, lda, ldb, fm, fn, fk, frows, fcols, bk, bt, col0,
                   c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13, c14, c15, c16, c17, c20, c21, c22, c23,
                   c24, c25, c26, c27, c30, c31, c32, c33, c34, c35, c36, c37):
    """One K step of a warp tile: ``bk`` deep, fk at a time, from the A tile at a_s[a_base ..] (rows of ``lda``,
    the warp tile's first row) and the B tile at b_s[b_base ..] ((n, k) rows of ``ldb`` when ``bt``, else (k, n)),
    the warp tile's columns from ``col0``; frows x fcols fragments of fm x fn.  Returns the 32 accumulators."""
    for ks in static_range(bk // fk):
        if bt:
            b0, b1, b2, b3, b4, b5, b6, b7 = load_b_frags(b_s, b_base + col0 * ldb + ks * fk, fn * ldb, ldb, fk, fn,
                                                          "col", fcols)
        else:
            b0, b1, b2, b3, b4, b5, b6, b7 = load_b_frags(b_s, b_base + ks * fk * ldb + col0, fn, ldb, fk, fn, "row",
                                                          fcols)
        at = a_base + ks * fk
        c00, c01, c02, c03, c04, c05, c06, c07 = mma_row(frag_a(a_s, at, lda, fm, fk), b0, b1, b2, b3, b4, b5, b6, b7,
                                                         c00, c01, c02, c03, c04, c05, c06, c07, fcols)
        if frows > 1:
            c10, c11, c12, c13, c14, c15, c16, c17 = mma_row(
                frag_a(a_s, at + fm * lda, lda, fm, fk), b0, b1, b2, b3, b4, b5, b6, b7,
                c10, c11, c12, c13, c14, c15, c16, c17, fcols)
        if frows > 2:
            c20, c21, c22, c23, c24, c25, c26, c27 = mma_row(
                frag_a(a_s, at + 2 * fm * lda, lda, fm, fk), b0, b1, b2, b3, b4, b5, b6, b7,
                c20, c21, c22, c23, c24, c25, c26, c27, fcols)
            c30, c31, c32, c33, c34, c35, c36, c37 = mma_row(
                frag_a(a_s, at + 3 * fm * lda, lda, fm, fk), b0, b1, b2, b3, b4, b5, b6, b7,
                c30, c31, c32, c33, c34, c35, c36, c37, fcols)
    return (c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13, c14, c15, c16, c17,
            c20, c21, c22, c23, c24, c25, c26, c27, c30, c31, c32, c33, c34, c35, c36, c37)


@func
def store_row(c, bias, stage, m, n, row0, col0, c0, c1, c2, c3, c4, c5, c6, c7, fm, fn, cols, computes, has_bias,
              act):
    """Write one row of a warp tile's fragments (rows row0.., columns col0 + j*fn, j < cols) through staging.

    Two fragments at a time go to the subgroup's f32 staging tile (fm x 2fn); after a barrier each
    lane takes 8 consecutive columns of a row: bias, activation, one rounding, a 16-byte store.
    ``computes``: this subgroup owns a warp tile (the others only keep the barriers company).
    """
    frags = (c0, c1, c2, c3, c4, c5, c6, c7)
    ld = 2 * fn + 4
    sbase = simd_group_id() * fm * ld
    chunks = 2 * fn // 8
    for p in static_range(cols // 2):
        if computes:
            frag_store(stage, sbase, ld, frags[2 * p])
            frag_store(stage, sbase + fn, ld, frags[2 * p + 1])
        barrier()
        if computes:
            for task in range(lane_id(), fm * chunks, simd_size()):
                row = row0 + task // chunks
                col = col0 + p * 2 * fn + (task % chunks) * 8
                if row < m and col < n:
                    store_staged(c, bias, stage, sbase + (task // chunks) * ld + (task % chunks) * 8, row, col, n,
                                 has_bias, act)
        barrier()


@func
def store_staged(c, bias, stage, at, row, col, n, has_bias, act):
    """C[row, col .. col+7] from 8 staged f32 sums at stage[at ..]: bias, activation, one rounding, one
    16-byte store (element by element on the N tail).  The epilogue of both matrix kernels.  Staged in C's
    type instead (the sums rounded once on their way in, where there is no bias and no activation), the 8
    values go out as they are."""
    whole = n % 8 == 0 and col + 8 <= n
    if stage.dtype == c.dtype:
        out = stage.load(at, width=8)
    else:
        lo = stage.load(at, width=4)
        hi = stage.load(at + 4, width=4)
        y = vec(lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3])
        if has_bias:
            y = y + f32(load_chunk(bias, 0, 0, col, 1, n, whole, 8))
        out = cast(activate(y, act), c.dtype)
    store_eight(c, row * n + col, out, whole, n - col)


@func
def store_eight(t, at, v, whole, left):
    """t[at .. at+7] = the 8-vector v: one 16-byte store when ``whole`` (all 8 inside and aligned), else the first
    ``left`` of them element by element (a row's tail)."""
    if whole:
        t.store(at, v)
    else:
        for e in static_range(8):
            if e < left:
                t[at + e] = v[e]


@func
def store_staged_rows(c, bias, stage, sbase, ld, width, m, n, row0, col0, has_bias, act, mine):
    """C[row0 .. row0+15, col0 .. col0+width-1] from one subgroup's 16 staged rows of ``width`` sums at
    stage[sbase ..] (rows ``ld`` apart), the caller having met its barrier: each lane takes 8 consecutive
    columns of a row (:func:`store_staged`); rows past m are skipped, and all of it unless ``mine``."""
    chunks = width // 8
    for task in range(lane_id(), 16 * chunks, simd_size()):
        row = row0 + task // chunks
        col = col0 + (task % chunks) * 8
        if mine and row < m and col < n:
            store_staged(c, bias, stage, sbase + (task // chunks) * ld + (task % chunks) * 8, row, col, n, has_bias,
                         act)


def mma_chunks(binding: dict[str, Any], transpose_b: bool) -> tuple[float, float]:
    """16-byte chunks of the A and of the B tile each thread of :data:`gemm_mma` copies per K step."""
    bm, bn = block_tile(binding)
    bk = binding["BK"]
    b_rows, b_cols = (bn, bk) if transpose_b else (bk, bn)
    return bm * bk / 8 / binding["THREADS"], b_rows * b_cols / 8 / binding["THREADS"]


def mma_tiles_split(v: dict[str, Any]) -> bool:
    """every thread copies 1 to 8 whole 16-byte chunks of each tile, and K steps hold whole fragments"""
    fk = 8 if v["FRAG"] == "8x8x8" else 16
    return v["BK"] % fk == 0 and all(c == int(c) and 1 <= c <= 8 for c in mma_chunks(v, v["BT"]))


def mma_config_listed(v: dict[str, Any]) -> bool:
    """the configuration is one of MMA_CONFIGS (what the host, the suite and gemm_tune.py run)"""
    return config_key(v) in _MMA_KEYS


@kernel(variants(T=[f16, bf16], FRAG=list(FRAGS), WARPS=list(WARP_GRIDS), WT=list(WARP_TILES), BK=[32, 16, 64],
                 THREADS=[128, 256, 64, 32, 512], STAGES=[2, 3, 4],
                 BT=[False, True], BIAS=[False, True], ACT=list(ACTIVATIONS),
                 where=[mma_config_listed, mma_tiles_split]))
def gemm_mma(a: In[T], b: In[T], bias: In[T], c: Tensor[T], m: int, n: int, k: int):
    """C = act(A @ B + bias) on the matrix units (docs/std/gemm.md).

    a: (m, k) row-major; b: (k, n) row-major, or (n, k) row-major when BT; bias: (n,) when BIAS (else
    one unread element); c: (m, n) row-major; T in f16/bf16.  Products exact, sums in f32 (fragment
    accumulators), bias and ACT in f32, one rounding to T.  FRAG is the fragment shape (fm x fn x fk);
    subgroup s < wm*wn of WARPS owns a warp tile of WT = r x c fragments, (r fm) x (c fn), of the
    (wm r fm) x (wn c fn) block tile (the others only load); K goes in BK steps through STAGES shared
    buffers (STAGES - 1 steps in flight).  Launch: grid (ceil(n/BN) * THREADS, ceil(m/BM)), group (THREADS, 1), with
    THREADS >= wm*wn*(subgroup width).  Shapes as gemm_fma: loads past m, n, k read 0; stores past
    m, n are skipped.  Reduction: per fk step a dot product in the unit's order, the steps in order.
    Non-finite: IEEE propagation, as gemm_fma.
    """
    fm, fn, fk = frag_dims(FRAG)
    wgm, wgn = grid_dims(WARPS)
    frows, fcols = grid_dims(WT)
    wtm = frows * fm
    wtn = fcols * fn
    bm_size = wgm * wtm
    bn_size = wgn * wtn
    lda = BK + PAD  # A tile [stage][row m][k]
    if BT:
        ldb = BK + PAD  # B tile [stage][n][k]: fragments read it column-major
        b_rows = bn_size
    else:
        ldb = bn_size + PAD  # B tile [stage][k][n]
        b_rows = BK
    a_stage = bm_size * lda
    b_stage = b_rows * ldb
    a_s = shared(T, STAGES * a_stage)
    b_s = shared(T, STAGES * b_stage)
    stage = shared(f32, wgm * wgn * fm * (2 * fn + 4))
    # 16-byte chunks of each K step: a_chunks / b_chunks per thread.
    a_cpr = BK // 8
    b_cpr = (ldb - PAD) // 8
    a_chunks = bm_size * a_cpr // THREADS
    b_chunks = b_rows * b_cpr // THREADS
    assert a_chunks * THREADS == bm_size * a_cpr and b_chunks * THREADS == b_rows * b_cpr, \
        "every thread loads whole 16-byte chunks of both tiles"
    assert a_chunks >= 1 and b_chunks >= 1 and a_chunks <= 8 and b_chunks <= 8, "1 to 8 chunks of each tile per thread"
    tid = thread_id(0)
    sg = simd_group_id()
    computes = sg < wgm * wgn
    wm = sg // wgn
    wn = sg % wgn
    tm, tn = swizzled_tile()
    bm = tm * bm_size
    bn = tn * bn_size
    vec_a = k % 8 == 0
    vec_b = (k if BT else n) % 8 == 0
    (c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13,
     c14, c15, c16, c17, c20, c21, c22, c23, c24, c25, c26, c27,
     c30, c31, c32, c33, c34, c35, c36, c37) = acc_tile(fm, fn)
    ktiles = (k + BK - 1) // BK
    # A pipeline STAGES deep: K steps kt+1 .. kt+STAGES-1 are on their way while step kt multiplies.
    for st in static_range(STAGES - 1):
        if st < ktiles:
            stage_step(a, b, a_s, b_s, st * a_stage, st * b_stage, st * BK, bm, bn, m, n, k, tid, THREADS,
                       a_chunks, b_chunks, a_cpr, b_cpr, lda, ldb, vec_a, vec_b, BT)
        copy_async_commit()
    for kt in range(ktiles):
        # This thread's copies of step kt have landed; after the barrier everyone's have, and everyone is
        # done with step kt-1's buffer, which step kt+STAGES-1 now refills.
        copy_async_wait(STAGES - 2)
        barrier()
        ahead = kt + STAGES - 1
        if ahead < ktiles:
            slot = ahead % STAGES
            stage_step(a, b, a_s, b_s, slot * a_stage, slot * b_stage, ahead * BK, bm, bn, m, n, k, tid, THREADS,
                       a_chunks, b_chunks, a_cpr, b_cpr, lda, ldb, vec_a, vec_b, BT)
        copy_async_commit()  # every iteration commits one group (maybe empty): the wait above counts on it
        if computes:
            (c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13, c14, c15,
             c16, c17, c20, c21, c22, c23, c24, c25, c26, c27, c30, c31, c32, c33, c34, c35, c36, c37) = warp_tile_step(
                a_s, b_s, (kt % STAGES) * a_stage + wm * wtm * lda, (kt % STAGES) * b_stage, lda, ldb, fm, fn, fk,
                frows, fcols, BK, BT, wn * wtn, c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13, c14, c15,
                c16, c17, c20, c21, c22, c23, c24, c25, c26, c27, c30, c31, c32, c33, c34, c35, c36, c37)
    copy_async_wait()  # only empty groups remain; leave none in flight
    row0 = bm + wm * wtm
    col0 = bn + wn * wtn
    store_row(c, bias, stage, m, n, row0, col0, c00, c01, c02, c03, c04, c05, c06, c07, fm, fn, fcols, computes,
              BIAS, ACT)
    if frows > 1:
        store_row(c, bias, stage, m, n, row0 + fm, col0, c10, c11, c12, c13, c14, c15, c16, c17, fm, fn, fcols,
                  computes, BIAS, ACT)
    if frows > 2:
        store_row(c, bias, stage, m, n, row0 + 2 * fm, col0, c20, c21, c22, c23, c24, c25, c26, c27, fm, fn, fcols,
                  computes, BIAS, ACT)
        store_row(c, bias, stage, m, n, row0 + 3 * fm, col0, c30, c31, c32, c33, c34, c35, c36, c37, fm, fn, fcols,
                  computes, BIAS, ACT)


# ---------------------------------------------------------------- configurations and the host function

#: The H200 configuration (CUDA mma.sync m16n8k16): 4 subgroups of 64x64 warp tiles, a 128x128 block tile,
#: K steps of 64 with two in flight: 3 x 36 KiB of A/B tiles plus 5 KiB of epilogue staging (dynamic shared
#: memory, past CUDA's static 48 KiB), 253 registers, two groups per SM.  The fastest of
#: scripts/device/gemm_tune.py's configurations on the H200 (BENCHMARKS.md, 2026-11-30).
SM80 = {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "4x8", "BK": 64, "STAGES": 3}
#: The same warp tiles in K steps of 32, double-buffered within 48 KiB of static shared memory: CUDA devices
#: that cannot opt in to SM80's 110 KiB (sm_86, sm_89: 99 KiB), the interpreter, and Vulkan's 16x8x16
#: cooperative matrices.
SM80_4W = {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "4x8", "BK": 32, "STAGES": 2}
#: 8 subgroups of 64x64 warp tiles: a 128x256 block tile (twice the reuse of each A tile), 4 stages of
#: BK 32 (116 KiB); one group of 256 threads per SM (registers).  A tuning alternative to SM80.
SM80_WIDE = {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x8", "BK": 32, "STAGES": 4}
#: AMD MFMA / WMMA: 64x64 warp tiles of 16x16x16 fragments.
AMD = {"FRAG": "16x16x16", "WARPS": "2x2", "WT": "4x4", "BK": 32}
#: Metal simdgroup_matrix: 32x64 warp tiles of 8x8x8; K steps of 16 keep the tiles in 32 KiB.
APPLE = {"FRAG": "8x8x8", "WARPS": "2x2", "WT": "4x8", "BK": 16}
#: The smallest configuration (32x32 block, 2 fragments per subgroup): the portable path on a device
#: without matrix units, where a big warp tile only costs compile time (lavapipe's JIT grows steeply
#: with the number of portable mma ops in a kernel).
PORTABLE_SMALL = {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "1x2"}


#: scripts/device/gemm_tune.py's candidates beside SM80 (BENCHMARKS.md has their figures): (WARPS, WT, BK,
#: THREADS, STAGES) of 16x8x16 fragments.
TUNING = (("2x4", "4x4", 32, 256, 2), ("2x4", "4x4", 32, 256, 3), ("2x4", "4x4", 32, 256, 4),
          ("2x2", "4x8", 32, 128, 3), ("2x2", "4x8", 32, 128, 4), ("2x4", "4x8", 32, 256, 3),
          ("2x4", "4x8", 32, 256, 4), ("4x2", "4x8", 32, 256, 3), ("4x2", "4x8", 32, 256, 4),
          ("2x4", "4x8", 16, 256, 4), ("2x2", "4x8", 64, 128, 2), ("2x2", "4x8", 64, 128, 3),
          ("2x4", "4x4", 64, 256, 2), ("2x4", "4x4", 64, 256, 3), ("2x4", "4x8", 64, 256, 3))


def _mma_configs() -> list[dict[str, Any]]:
    """Every configuration :func:`fragment_config` and :func:`portable_small` choose at the subgroup widths
    Iron runs (8 to 64; portable_small to 32), SM80_4W with a ring of 4 K steps of 16 (tests/std), and the
    tuning candidates."""
    out = [{**SM80, "THREADS": 128}, {**SM80_WIDE, "THREADS": 256}, {**SM80_4W, "BK": 16, "STAGES": 4, "THREADS": 128}]
    for threads in (128, 256):
        out += [{**SM80_4W, "THREADS": threads}, {**AMD, "THREADS": threads}]
    out.append({**APPLE, "THREADS": 128})
    for lanes in (8, 16, 32):  # at 64 lanes its 32x32 tile has too few chunks for 256 threads
        out += [portable_small(lanes), {**portable_small(lanes), "STAGES": 3}]
    out += [{"FRAG": "16x8x16", "WARPS": w, "WT": wt, "BK": bk, "THREADS": th, "STAGES": st}
            for w, wt, bk, th, st in TUNING]
    return out


def config_key(binding: dict[str, Any]) -> tuple:
    """(FRAG, WARPS, WT, BK, THREADS, STAGES) of a gemm_mma binding (STAGES 2 when it names none)."""
    return (binding["FRAG"], binding["WARPS"], binding["WT"], binding["BK"], binding["THREADS"],
            binding.get("STAGES", 2))


def block_tile(binding: dict[str, Any]) -> tuple[int, int]:
    """(rows, columns) of C one group of :data:`gemm_mma` computes with ``binding``."""
    fm, fn = {"16x8x16": (16, 8), "16x16x16": (16, 16), "8x8x8": (8, 8)}[binding["FRAG"]]
    wgm, wgn = (int(x) for x in binding["WARPS"].split("x"))
    frows, fcols = (int(x) for x in binding["WT"].split("x"))
    return wgm * frows * fm, wgn * fcols * fn


def mma_shared_bytes(binding: dict[str, Any], itemsize: int, transpose_b: bool) -> int:
    """Shared memory one group of :data:`gemm_mma` declares with ``binding`` (its ring and epilogue staging)."""
    fm, fn = {"16x8x16": (16, 8), "16x16x16": (16, 16), "8x8x8": (8, 8)}[binding["FRAG"]]
    bm, bn = block_tile(binding)
    bk = binding["BK"]
    wgm, wgn = (int(x) for x in binding["WARPS"].split("x"))
    b_tile = bn * (bk + PAD) if transpose_b else bk * (bn + PAD)
    ring = binding.get("STAGES", 2) * (bm * (bk + PAD) + b_tile) * itemsize
    return ring + wgm * wgn * fm * (2 * fn + 4) * 4


def portable_small(lanes: int) -> dict[str, Any]:
    """:data:`PORTABLE_SMALL` for a subgroup width of ``lanes`` (8, 16 or 32): 4 subgroups per group."""
    return {**PORTABLE_SMALL, "BK": 16 if lanes <= 16 else 32, "THREADS": 4 * lanes}


#: Every gemm_mma configuration that exists (:func:`mma_config_listed`): a new one is added here.
MMA_CONFIGS = tuple(_mma_configs())
_MMA_KEYS = frozenset(map(config_key, MMA_CONFIGS))


def fragment_config(traits: DeviceTraits, dtype: Any, transpose_b: bool = False) -> dict[str, Any] | None:
    """The :data:`gemm_mma` configuration for a device, or None where the FMA kernel serves ``dtype`` better.

    ``traits``: the device's (:func:`iron.jit.device.device_traits`): its matrix unit, subgroup width and
    shared-memory limit decide; ``transpose_b``: B comes as (n, k).
    """
    lanes = traits.lane_width
    unit = traits.matrix_unit
    threads = max(128, 4 * lanes)
    if unit is CUDA_MMA_SYNC_M16N8K16 and mma_shared_bytes(SM80, 2, transpose_b) <= (traits.shared_limit or 0):
        return {**SM80, "THREADS": 4 * lanes}
    if traits.interpreted or unit is CUDA_MMA_SYNC_M16N8K16:
        return {**SM80_4W, "THREADS": threads}
    if unit is METAL_SIMDGROUP_8x8:
        return {**APPLE, "THREADS": threads}
    if dtype == bf16:
        return None  # SPIR-V and HIP keep bf16 as bits: a shared bf16 array cannot feed fragments there
    if unit in (AMD_MFMA_GFX90A, AMD_WMMA_RDNA3) and lanes in (32, 64):
        return {**AMD, "THREADS": 4 * lanes}
    if unit is VULKAN_KHR_COOPERATIVE_MATRIX and traits.offers_fragment((16, 8, 16, "f16", "f32")) and lanes in (32, 64):
        return {**SM80_4W, "THREADS": 4 * lanes}
    return None


def launch_geometry(m: int, n: int, threads: int, tile: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(grid, group) of either kernel: one group per output tile, tiles along N on axis 0."""
    return (_host.ceil_div(n, tile[1]) * threads, _host.ceil_div(m, tile[0])), (threads, 1)


@planned
def gemm(a: Any, b: Any, bias: Any = None, activation: str | None = None, out: Any = None,
         backend: str | None = None, transpose_b: bool = False) -> Any:
    """C = activation(A @ B + bias), rounded once to the inputs' dtype.

    a: (M, K); b: (K, N), or (N, K) with ``transpose_b`` (an nn.Linear weight); bias: (N,) or None;
    activation: None, "relu", "gelu_tanh" or "silu"; all one float dtype, C-contiguous (numpy on
    interp/vulkan, torch tensors on cuda).  f16/bf16 run on the matrix units where the device has
    them (:func:`fragment_config`; on Hopper the warp-role kernel of gemm_ws.py where tile copies can read the
    operands and the output has enough tiles, else the warpgroup kernel of gemm_wg.py), everything else on the
    FMA kernel; one row with no bias or activation (M = 1) is gemv's matrix-vector product (f32 sums too), and 2 to
    16 rows against B given (n, k) on ``mma.sync`` devices take gemm_few.py's narrow groups (a decode step's batch).
    Returns ``out`` (M, N).
    """
    dt = _host.check_float(a, "gemm: a")
    if _host.dtype_of(b, "gemm: b") != dt:
        raise LaunchError(f"gemm: b has dtype {_host.dtype_of(b).name}, a has {dt.name}: pass one dtype")
    a_shape, b_shape = _host.shape_of(a), _host.shape_of(b)
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise LaunchError(f"gemm: a and b must be 2-D, got shapes {a_shape} and {b_shape}")
    m, k = a_shape
    n, kb = b_shape if transpose_b else b_shape[::-1]
    if kb != k:
        want = f"({n}, {k})" if transpose_b else f"({k}, {n})"
        raise LaunchError(f"gemm: a is {a_shape}, so b must be {want} "
                          f"({'N, K: transpose_b' if transpose_b else 'K, N'}); got {b_shape}")
    act = "none" if activation is None else activation
    if act not in ACTIVATIONS:
        raise LaunchError(f"gemm: activation must be None or one of {', '.join(ACTIVATIONS[1:])}; got {activation!r}")
    if bias is not None:
        if _host.dtype_of(bias, "gemm: bias") != dt:
            raise LaunchError(f"gemm: bias has dtype {_host.dtype_of(bias).name}, a has {dt.name}")
        _host.check_shape(bias, (n,), "gemm: bias")
    out = _host.output("gemm", out, a, (m, n), dt, {"a": a, "b": b, "bias": bias})
    if not _one_row(m, n, k, bias, act) and any(_host.device_starts_off(x, 16) for x in (a, b, bias, out)
                                                if x is not None):
        raise LaunchError("gemm: a, b, bias and out must start on 16-byte boundaries on a GPU (the kernels copy, load "
                          "and store 16-byte pieces); pass copies (.clone()) of views that start mid-vector")
    return _launch_gemm(a, b, bias, act, out, (m, n, k), dt, backend, bool(transpose_b))


def _one_row(m: int, n: int, k: int, bias: Any, act: str) -> bool:
    """Whether :func:`_launch_gemm` runs gemv's matrix-vector product (which takes any alignment)."""
    return m == 1 and k > 0 and bias is None and act == "none" and n * k < 1 << 31


def _launch_gemm(a: Any, b: Any, bias: Any, act: str, out: Any, mnk: tuple[int, int, int], dt: Any,
                backend: str | None, transpose_b: bool) -> Any:
    """:func:`gemm`'s launch on checked operands (for other host functions: a planned function inside another
    one's plan would plan twice); returns ``out``."""
    m, n, k = mnk
    if m == 0 or n == 0:
        return out
    if _one_row(m, n, k, bias, act):
        # One row (a decode step's projection): a matrix-vector product, bound by reading b once, which the
        # gemv kernels stream at the copy rate and a tile kernel, computing 64 or 128 rows for one, does not.
        from . import gemv

        gemv._launch(b, a, out, *((n, k) if transpose_b else (k, n)), not transpose_b, dt, backend)
        return out
    unread_bias = a if bias is None else bias  # BIAS off: never read
    traits = device_traits(backend, (a,))
    cfg = fragment_config(traits, dt, bool(transpose_b)) if dt != f32 else None
    flags = {"T": dt, "BT": bool(transpose_b), "BIAS": bias is not None, "ACT": act}
    from .gemm_wg import WG_BM, WG_DEFAULT, WG_THREADS, gemm_wg, runs_warpgroups, wg_shared_bytes
    from .gemm_few import FEW_ROWS, few_config, few_geometry, few_shared_bytes, gemm_few
    from .gemm_ws import gemm_ws, ws_chosen, ws_geometry

    if cfg is not None and transpose_b and 2 <= m <= FEW_ROWS and traits.matrix_unit is CUDA_MMA_SYNC_M16N8K16:
        # A few rows (a decode step of a batch): weight-bandwidth bound, many narrow groups (gemm_few.py).
        few = few_config(n, traits.lane_width)
        if few_shared_bytes(few) <= (traits.shared_limit or 0):
            grid, group = few_geometry(n, few)
            gemm_few.variant(T=dt, BIAS=bias is not None, ACT=act, **few).launch(
                a, b, unread_bias, out, m, n, k, grid=grid, group=group, backend=backend)
            return out
    ws = ws_chosen(traits, (m, n, k), transpose_b, (a, b)) if cfg is not None else None
    if ws is not None:
        # Hopper and operands tile copies can read: warp roles (gemm_ws.py).
        grid, group = ws_geometry(m, n, ws["BN"], None, ws.get("CLUSTER", 1))
        gemm_ws.variant(**flags, **ws).launch(a, b, unread_bias, out, m, n, k, grid=grid, group=group,
                                              backend=backend)
        return out
    if cfg is not None and runs_warpgroups(traits.profile) and wg_shared_bytes(WG_DEFAULT) <= (traits.shared_limit or 0):
        # Hopper: warpgroup multiplies from swizzled tiles (gemm_wg.py), faster than mma.sync fragments.
        grid, group = launch_geometry(m, n, WG_THREADS, (WG_BM, WG_DEFAULT["BN"]))
        gemm_wg.variant(**flags, **WG_DEFAULT).launch(a, b, unread_bias, out, m, n, k, grid=grid, group=group,
                                                      backend=backend)
        return out
    if cfg is None:
        kern = gemm_fma.variant(**flags)
        grid, group = launch_geometry(m, n, FMA_THREADS, (FMA_BM, FMA_BN))
    else:
        kern = gemm_mma.variant(**flags, **cfg)
        grid, group = launch_geometry(m, n, cfg["THREADS"], block_tile(cfg))
    kern.launch(a, b, unread_bias, out, m, n, k, grid=grid, group=group, backend=backend)
    return out
