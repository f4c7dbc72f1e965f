"""GEMM of a few rows: C = act(A @ B^T + bias) for M <= 16 (a decode step of up to 16 sequences), gemm.py's
contract, bound by reading B once.

A decode step multiplies a handful of activation rows by a weight matrix; its time is the weight's bytes over
the copy rate.  A tile kernel built for square products computes 64 or 128 rows for those few and, with one
group per 128 or 256 output columns, runs too few groups to keep the memory busy (issue 22: 1.5 TB/s at 16
rows on an H100).  Here a group takes BN output columns (rows of the (n, k) weight) and the whole of K: its
16 x BK panel of A (rows past M read 0) and BN x BK panel of B go through a ring of STAGES shared buffers by
asynchronous 16-byte copies, and SPLIT subgroups share each K step (subgroup s multiplies fragments s, s +
SPLIT, ... of the step: 16 x 8 x 16 products, 16 rows of A against 8 columns of B), so every subgroup streams
while the group's copies stay in flight.  The subgroups' sums meet in shared memory, in subgroup order, then
bias, activation and one rounding to T as gemm.py's epilogue does.

Narrow tiles give more groups, wide ones read less of A from L2 per byte of B and fewer steps a byte: on an H100
the wide ones won (:func:`few_config`).  The host (``gemm.gemm``) runs it for 2 <= M <= 16 where the device has
``mma.sync``; the interpreter and Vulkan run it through the portable fragments (the tests).
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, kernel, variants
from iron.lang import (barrier, copy_async_commit, copy_async_wait, frag_a, frag_store, group_id, shared,
                       simd_group_id, static_range, thread_id)

from .gemm import ACTIVATIONS, PAD, acc_tile, load_b_frags, mma_row, stage_step, store_staged

#: Rows of A a group computes: one 16-row fragment (M <= FEW_ROWS).
FEW_ROWS = 16
#: Subgroups that multiply (the K split within a step); a wider group's other subgroups only copy.
SPLIT = 4
#: Candidates (BN, BK, STAGES) of scripts/device/few_tune.py, and the last, within Vulkan's 32 KiB of shared
#: memory, for the portable tests.
FEW_CONFIGS = ((32, 128, 4), (16, 128, 4), (64, 128, 4), (16, 256, 4), (32, 256, 3), (64, 64, 6), (32, 128, 6),
               (32, 256, 4), (32, 256, 5), (64, 256, 3), (16, 64, 3))


def few_chunks(v: dict[str, Any]) -> tuple[float, float]:
    """16-byte chunks of the A and of the B panel each thread copies per K step."""
    return FEW_ROWS * v["BK"] / 8 / v["THREADS"], v["BN"] * v["BK"] / 8 / v["THREADS"]


def few_tiles_split(v: dict[str, Any]) -> bool:
    """every thread copies 1 to 8 whole 16-byte chunks of each panel, and each subgroup whole fragments"""
    return v["BK"] % (16 * SPLIT) == 0 and all(c == int(c) and 1 <= c <= 8 for c in few_chunks(v))


def few_listed(v: dict[str, Any]) -> bool:
    """(BN, BK, STAGES) is one of FEW_CONFIGS"""
    return (v["BN"], v["BK"], v["STAGES"]) in FEW_CONFIGS


@func
def few_step(a_s, at_a, b_s, at_b, lda, sg, bk, fcols, c0, c1, c2, c3, c4, c5, c6, c7):
    """Subgroup ``sg``'s share of one K step: fragments sg, sg + SPLIT, ... (16 deep) of the 16-row A panel at
    a_s[at_a ..] against the BN = 8 fcols rows of B at b_s[at_b ..] (both rows ``lda`` apart, B read column-major);
    returns the fcols accumulators."""
    for ks in static_range(bk // 16 // SPLIT):
        kk = (ks * SPLIT + sg) * 16
        b0, b1, b2, b3, b4, b5, b6, b7 = load_b_frags(b_s, at_b + kk, 8 * lda, lda, 16, 8, "col", fcols)
        c0, c1, c2, c3, c4, c5, c6, c7 = mma_row(frag_a(a_s, at_a + kk, lda, 16, 16), b0, b1, b2, b3, b4, b5, b6, b7,
                                                 c0, c1, c2, c3, c4, c5, c6, c7, fcols)
    return c0, c1, c2, c3, c4, c5, c6, c7


@func
def stage_sums(red, red_ld, sg, computes, fcols, c0, c1, c2, c3, c4, c5, c6, c7):
    """Each multiplying subgroup's 16 x 8 fcols sums into its slice of ``red`` (rows ``red_ld`` apart), then the
    barrier after which every thread may add them up."""
    frags = (c0, c1, c2, c3, c4, c5, c6, c7)
    if computes:
        for j in static_range(fcols):
            frag_store(red, sg * FEW_ROWS * red_ld + j * 8, red_ld, frags[j])
    barrier()


@kernel(variants(T=[bf16, f16], BN=[32, 16, 64], BK=[128, 64, 256], STAGES=[4, 3, 6, 5], THREADS=[128, 256, 64, 32],
                 BIAS=[False, True], ACT=list(ACTIVATIONS), where=[few_listed, few_tiles_split]))
def gemm_few(a: In[T], b: In[T], bias: In[T], c: Tensor[T], m: int, n: int, k: int):
    """C = act(A @ B^T + bias) for m <= 16 on the matrix units.

    a: (m, k) row-major, 1 <= m <= 16; b: (n, k) row-major (an nn.Linear weight); bias: (n,) when BIAS (else
    one unread element); c: (m, n) row-major; T in f16/bf16.  Products exact, sums in f32, bias and ACT in f32,
    one rounding to T.  Launch: grid (ceil(n / BN) * THREADS,), group (THREADS,), THREADS >= SPLIT * the
    subgroup width.  Group g computes columns g*BN .. g*BN + BN - 1.  Loads past m, n, k read 0; stores past
    m, n are skipped.  Order: subgroup s < SPLIT adds, K step by K step, the products of fragments s, s +
    SPLIT, ... of each step (16 deep, each a dot product in the unit's order); then C's sum is subgroup 0's
    plus 1's plus ... in that order.  Non-finite: IEEE propagation, as gemm_mma.
    """
    lda = BK + PAD  # A panel [stage][row][k], B panel [stage][n][k]: fragments read B column-major
    a_stage = FEW_ROWS * lda
    b_stage = BN * lda
    a_s = shared(T, STAGES * a_stage)
    b_s = shared(T, STAGES * b_stage)
    red_ld = BN + 4
    red = shared(f32, SPLIT * FEW_ROWS * red_ld)
    cpr = BK // 8  # 16-byte chunks in a panel row
    a_chunks = FEW_ROWS * cpr // THREADS
    b_chunks = BN * cpr // THREADS
    tid = thread_id(0)
    sg = simd_group_id()
    computes = sg < SPLIT
    bn = group_id(0) * BN
    fcols = BN // 8
    fast = k % 8 == 0
    (c0, c1, c2, c3, c4, c5, c6, c7, u10, u11, u12, u13, u14, u15, u16, u17, u20, u21, u22, u23, u24, u25, u26, u27,
     u30, u31, u32, u33, u34, u35, u36, u37) = acc_tile(16, 8)
    ktiles = (k + BK - 1) // BK
    for st in static_range(STAGES - 1):
        if st < ktiles:
            stage_step(a, b, a_s, b_s, st * a_stage, st * b_stage, st * BK, 0, bn, m, n, k, tid, THREADS,
                       a_chunks, b_chunks, cpr, cpr, lda, lda, fast, fast, True)
        copy_async_commit()
    for kt in range(ktiles):
        copy_async_wait(STAGES - 2)  # step kt landed for this thread; after the barrier for all, and kt-1's
        barrier()  # buffer is free for step kt + STAGES - 1
        ahead = kt + STAGES - 1
        if ahead < ktiles:
            slot = ahead % STAGES
            stage_step(a, b, a_s, b_s, slot * a_stage, slot * b_stage, ahead * BK, 0, bn, m, n, k, tid, THREADS,
                       a_chunks, b_chunks, cpr, cpr, lda, lda, fast, fast, True)
        copy_async_commit()
        if computes:
            c0, c1, c2, c3, c4, c5, c6, c7 = few_step(a_s, (kt % STAGES) * a_stage, b_s, (kt % STAGES) * b_stage, lda,
                                                      sg, BK, fcols, c0, c1, c2, c3, c4, c5, c6, c7)
    copy_async_wait()
    stage_sums(red, red_ld, sg, computes, fcols, c0, c1, c2, c3, c4, c5, c6, c7)
    for task in range(tid, FEW_ROWS * fcols, THREADS):
        row = task // fcols
        col = bn + (task % fcols) * 8
        if row < m and col < n:
            at = row * red_ld + (task % fcols) * 8
            for s in static_range(1, SPLIT):
                for e in static_range(8):
                    red[at + e] = red[at + e] + red[s * FEW_ROWS * red_ld + at + e]
            store_staged(c, bias, red, at, row, col, n, BIAS, ACT)


def few_config(n: int, lanes: int = 32) -> dict[str, int]:
    """The binding (BN, BK, STAGES, THREADS) of :data:`gemm_few` for N output columns: up to 4096 columns 32 a group
    with K steps of 256 and 4 stages, past that 64 with steps of 128.  The fastest of few_tune.py's candidates on
    an H100 at 16 and 4 rows (benchmarks/h100-few-2026-12-07.jsonl); the 256-deep steps then took 4096 x 4096 from
    16.3 to 15.9 us and 4096 x 14336 from 47.8 to 46.4 (benchmarks/h100-few-2026-12-07b.jsonl), and tied past
    4096 columns; 16 columns a group, the most groups, was the slowest on every shape."""
    bn, bk, stages = (32, 256, 4) if n <= 4096 else (64, 128, 4)
    return {"BN": bn, "BK": bk, "STAGES": stages, "THREADS": SPLIT * lanes}


def few_geometry(n: int, binding: dict[str, int]) -> tuple[tuple[int], tuple[int]]:
    """(grid, group) of a :data:`gemm_few` launch."""
    return (-(-n // binding["BN"]) * binding["THREADS"],), (binding["THREADS"],)


def few_shared_bytes(binding: dict[str, int], itemsize: int = 2) -> int:
    """Shared memory one group declares: the ring of both panels and the subgroups' f32 sums."""
    ring = binding["STAGES"] * (FEW_ROWS + binding["BN"]) * (binding["BK"] + PAD) * itemsize
    return ring + SPLIT * FEW_ROWS * (binding["BN"] + 4) * 4


__all__ = ["FEW_CONFIGS", "FEW_ROWS", "SPLIT", "few_config", "few_geometry", "few_shared_bytes", "few_step", "gemm_few",
           "stage_sums"]
