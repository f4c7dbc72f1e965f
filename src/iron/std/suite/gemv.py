"""Tests and benches of iron.std.gemv: ``y = A x`` and ``y = x^T A`` against float64 numpy.

The oracle is ``A @ x`` in float64 with ``Expect(scale = |A| @ |x|)``: a dot product's rounding error
is relative to the sum of its |terms|, not to a result that may cancel.  The depth is the kernel's
documented summation order (gemv.py), counted per output element.
"""

from __future__ import annotations

import numpy as np

from iron import Depth, Expect, Setup, Then, bench, bf16, f16, f32, log2_ceil, test_kernel

from .. import _host
from ..gemv import (COLUMN_THREADS, GROUP, choose_column_threads, cols_grid, gemv_cols, gemv_cols_sum, gemv_rows,
                    rows_grid, split_rows, sum_grid)

VECTORS = [{"T": f32, "VEC": 4}, {"T": f16, "VEC": 8}, {"T": bf16, "VEC": 8}]
#: The columns kernel's bindings: groups of 256 (what ``gemv`` launches) ...
COLS_BINDINGS = [{**v, "THREADS": GROUP} for v in VECTORS]
#: ... and of 1024: four times the K slices per group, and the loads in flight, for a short N.
COLS_1024 = [{**v, "THREADS": 1024} for v in VECTORS]

# (M, K): one row and one column; K = 7 (no 16-byte row, the scalar path); K past one subgroup's
# stride (W * VEC = 128/256 at W = 32); K not a multiple of the vector; V = 0: the scalar path on a
# row vectors would tile (what the host picks for an unaligned array); G = 1 caps the grid at one group
# so each subgroup loops over many rows.
ROWS_SHAPES = [{"M": 1, "K": 1}, {"M": 1, "K": 7}, {"M": 3, "K": 7}, {"M": 5, "K": 64}, {"M": 9, "K": 129},
               {"M": 33, "K": 1000}, {"M": 4, "K": 2056}, {"M": 6, "K": 520, "V": 0}, {"M": 100, "K": 40, "G": 1}]
# (K, N, CT): N odd (the scalar column tail); K = 1; K larger than the group's K stride (256 / CT);
# CT from 1 to 32 (the butterfly and the shared combine in every proportion to W); V = 0: scalar loads
# where vectors would tile; G = 1: blocks loop.
COLS_SHAPES = [{"K": 1, "N": 1, "CT": 2}, {"K": 7, "N": 5, "CT": 2}, {"K": 7, "N": 5, "CT": 32},
               {"K": 300, "N": 33, "CT": 4}, {"K": 129, "N": 64, "CT": 8}, {"K": 40, "N": 1000, "CT": 16},
               {"K": 513, "N": 24, "CT": 1}, {"K": 33, "N": 96, "CT": 4, "V": 0}, {"K": 20, "N": 301, "CT": 2, "G": 1}]
# K in splits of KS rows (then gemv_cols_sum): a last split of one row; a partial last split over the
# scalar column tail; one row a split; splits over several column blocks with the grid capped at 3
# groups (items loop); KS = K (one split: y directly, no second pass).
SPLIT_SHAPES = [{"K": 129, "N": 64, "CT": 8, "KS": 64}, {"K": 300, "N": 33, "CT": 32, "KS": 70},
                {"K": 5, "N": 40, "CT": 4, "KS": 1}, {"K": 200, "N": 600, "CT": 32, "KS": 48, "G": 3},
                {"K": 100, "N": 72, "CT": 32, "KS": 100}]

ROWS_BENCH = {"interp": [{"M": 256, "K": 256}], "vulkan": [{"M": 1024, "K": 1024}],
              "*": [{"M": 4096, "K": 4096}, {"M": 11008, "K": 4096}, {"M": 4096, "K": 11008}]}
COLS_BENCH = {"interp": [{"K": 256, "N": 256}], "vulkan": [{"K": 1024, "N": 1024}],
              "*": [{"K": 4096, "N": 4096}, {"K": 4096, "N": 11008}, {"K": 11008, "N": 4096}]}


def _extent(case, name: str, default: int | None = None) -> int | None:
    return int(case.shape[name]) if name in case.shape else default


# ---------------------------------------------------------------- y = A x

def rows_depth(k: int, vec: int, w: int, vectors: bool) -> Depth:
    """f32 roundings on the longest path to y[r]: the lane's fmas, the VEC tree, then the log2 W
    butterfly over the lanes; one rounding to T."""
    if vectors:
        chain = _host.ceil_div(k, w * vec) + log2_ceil(vec)
    else:
        chain = _host.ceil_div(k, w)
    return Depth(steps=1, f32_steps=chain + log2_ceil(w))


def _rows_oracle(a, x, y, m, k, vectors):
    A = a.reshape(m, k)
    return Expect(A @ x, scale=np.abs(A) @ np.abs(x))


def _mv_torch(a, x, y, m, k, vectors):
    import torch

    return torch.mv(a.view(m, k), x)


def _mv_numpy(a, x, y, m, k, vectors):
    return (a.reshape(m, k).astype(np.float32) @ x.astype(np.float32)).astype(y.dtype)


@test_kernel(gemv_rows, shapes=ROWS_SHAPES, bindings=VECTORS, name="std/gemv/rows")
@bench(gemv_rows, shapes=ROWS_BENCH, bindings=VECTORS, reference={"cuda": _mv_torch, "*": _mv_numpy},
       name="std/gemv/rows")
def rows_setup(case):
    m, k, vec = case["M"], case["K"], case["VEC"]
    vectors = k % vec == 0 and _extent(case, "V", 1) != 0
    groups = _extent(case, "G")
    grid = rows_grid(m) if groups is None else groups * GROUP
    return Setup(args=[case.randn(m, k), case.randn(k), case.empty(m), m, k, vectors], grid=grid, group=GROUP,
                 oracle=_rows_oracle, depth=rows_depth(k, vec, case.simd_width, vectors), flops=2 * m * k)


# ---------------------------------------------------------------- y = x^T A

def cols_depth(k: int, ct: int, w: int, threads: int = GROUP, kstep: int | None = None) -> Depth:
    """f32 roundings to y[c]: the thread's fmas over its slice of a K split, the log2 R butterfly, the
    P - 1 adds of the subgroup partials (R = max(1, W / CT), P = THREADS / max(CT, W)), then the S - 1
    adds of the splits (S = ceil(k / kstep)); one rounding to T."""
    kstep = k if kstep is None else kstep
    slices = threads // ct
    chain = _host.ceil_div(min(k, kstep), slices) + log2_ceil(max(1, w // ct)) + threads // max(ct, w) - 1
    return Depth(steps=1, f32_steps=chain + _host.ceil_div(k, kstep) - 1)


def _cols_oracle(a, x, y, part, k, n, ct, kstep, vectors):
    A = a.reshape(k, n)
    return Expect(x @ A, scale=np.abs(x) @ np.abs(A))


def _vm_torch(a, x, y, part, k, n, ct, kstep, vectors):
    return x @ a.view(k, n)


def _vm_numpy(a, x, y, part, k, n, ct, kstep, vectors):
    return (x.astype(np.float32) @ a.reshape(k, n).astype(np.float32)).astype(y.dtype)


def _cols(case, ct: int, kstep: int) -> Setup:
    """``gemv_cols`` with CT and kstep (the G extent caps the grid), then ``gemv_cols_sum`` when K splits."""
    k, n, vec, threads = case["K"], case["N"], case["VEC"], case["THREADS"]
    splits = _host.ceil_div(k, kstep)
    groups = _extent(case, "G")
    grid = cols_grid(n, vec, ct, threads, splits) if groups is None else groups * threads
    vectors = n % vec == 0 and _extent(case, "V", 1) != 0
    part = case.empty(splits, n, dtype=f32) if splits > 1 else case.empty(1, dtype=f32)
    then = [Then(gemv_cols_sum.variant(T=case.T), ["part", "y", n, splits], grid=sum_grid(n), group=GROUP)]
    item = case.T.itemsize
    return Setup(args=[case.randn(k, n), case.randn(k), case.empty(n), part, k, n, ct, kstep, vectors], grid=grid,
                 group=threads, oracle=_cols_oracle, outputs=["y"], then=then if splits > 1 else [],
                 depth=cols_depth(k, ct, case.simd_width, threads, kstep), flops=2 * k * n,
                 bytes_moved=(k * n + k + n) * item)  # what x @ A must move (not the split's f32 partials)


@test_kernel(gemv_cols, shapes=COLS_SHAPES, bindings=COLS_BINDINGS, name="std/gemv/cols")
@bench(gemv_cols, shapes=COLS_BENCH, bindings=COLS_BINDINGS, reference={"cuda": _vm_torch, "*": _vm_numpy},
       name="std/gemv/cols")
@test_kernel(gemv_cols, shapes=COLS_SHAPES[1::2], bindings=COLS_1024, name="std/gemv/cols_1024")
@bench(gemv_cols, shapes={"cuda": COLS_BENCH["*"]}, bindings=COLS_1024, reference={"cuda": _vm_torch},
       name="std/gemv/cols_1024")
def cols_setup(case):
    """Without a split: every K row in one group per column block (CT by the shape, else the host's)."""
    return _cols(case, _extent(case, "CT", choose_column_threads(case["N"], case["VEC"])), case["K"])


@test_kernel(gemv_cols, shapes=SPLIT_SHAPES, bindings=COLS_BINDINGS, name="std/gemv/cols_split")
@bench(gemv_cols, shapes=COLS_BENCH, bindings=COLS_BINDINGS, reference={"cuda": _vm_torch, "*": _vm_numpy},
       name="std/gemv/cols_split")
def cols_split_setup(case):
    """K split (KS rows, else the host's ``split_rows``) over 32 column threads, then the sum pass."""
    ct = _extent(case, "CT", COLUMN_THREADS[0])
    return _cols(case, ct, _extent(case, "KS", split_rows(case["K"], case["N"], case["VEC"], ct)))


# ---------------------------------------------------------------- the split's second pass

# (S, N): one split; several over a column count past one group (grid-strided with G = 1).
SUM_SHAPES = [{"S": 1, "N": 5}, {"S": 7, "N": 300}, {"S": 3, "N": 1000, "G": 1}]


def _sum_oracle(part, y, n, splits):
    return Expect(part.reshape(splits, n).sum(axis=0), scale=np.abs(part.reshape(splits, n)).sum(axis=0))


@test_kernel(gemv_cols_sum, shapes=SUM_SHAPES, bindings=[{"T": f32}, {"T": f16}, {"T": bf16}],
             name="std/gemv/cols_sum")
def cols_sum_setup(case):
    splits, n = case["S"], case["N"]
    groups = _extent(case, "G")
    return Setup(args=[case.randn(splits, n, dtype=f32), case.empty(n), n, splits],
                 grid=sum_grid(n) if groups is None else groups * GROUP, group=GROUP, oracle=_sum_oracle,
                 depth=Depth(steps=1, f32_steps=splits - 1))
