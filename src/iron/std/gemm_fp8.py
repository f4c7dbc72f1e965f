"""FP8 GEMM: C = (scale_a * scale_b) * (A @ B^T) from 8-bit float operands, rounded once to bf16 or f16.

The contract of ``torch._scaled_mm`` with per-tensor scales: A (M, K) and B given (N, K) (a linear layer's
weight), both K-major as the matrix units read 8-bit floats, each ``f8e4m3`` or ``f8e5m2``; the scales are
one-element f32 tensors (they stay on the device: no synchronisation to read them); the products are exact,
the sums f32.

On Hopper (:data:`gemm_fp8`) the structure is gemm_ws.py's: a producer warpgroup issuing tile copies (TMA) of
A's 128 x 128 and B's BN x 128 byte panels into a ring of STAGES swizzled buffers (one 128-byte row of K per
step), two consumer warpgroups each multiplying 64 rows by BN columns with ``mma_wg`` (``wgmma ... k32``, four
per step).  The hardware adds 8-bit products keeping fewer bits than f32 (about 14), so with FOLD each step
multiplies into a fresh accumulator and adds it to the f32 total (the promotion every 128 K that cuBLAS does
unless ``use_fast_accum``, and CUTLASS's and DeepGEMM's kernels do; 256-wide tiles by halves); the two
consumers take turns, one adding while the other's multiplies run; with OVERLAP too, each consumer keeps its own
multiplies running while it adds (two step sums taking turns).  Without FOLD one accumulator runs over all of K
(fast accumulation).  The epilogue scales the total, rounds it once to the output type and stores 16-byte chunks
through shared memory.

Elsewhere (:func:`scaled_mm` on the interpreter, Vulkan, HIP, Metal or before sm_90) the operands are widened
to f32 exactly and multiplied by gemm.py's FMA kernel, then scaled and rounded by :data:`scale_rows`.
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, TypeVar, U, bf16, f8e4m3, f8e5m2, f16, f32, kernel, variants
from iron.core.errors import LaunchError
from iron.jit.device import device_traits
from iron.lang import (async_barriers, barrier_arrive, cluster_groups, cluster_sync, copy_tile, frag_acc, group_id,
                       lane_id, mma_wg, mma_wg_wait, num_groups, program_id, shared, simd_group_id, static_range,
                       thread_id, warp_roles)

from . import _host
from .gemm_wg import WG_SHARED_LIMIT, store_acc
from .gemm_ws import (RELEASES, WS_BM, WS_REGISTERS, WS_ROLES, WS_SMS, WS_WIDE_TILES, cluster_tile,
                      copy_rows_to_cluster, free_slot, full_slot, release, release_behind, release_last, runs_roles,
                      ws_geometry, ws_wave_fill)

#: The output's dtype (bf16 as torch._scaled_mm's usual out_dtype, or f16).
OUT = TypeVar("OUT")
#: One K step: a 128-byte swizzled row of 8-bit values.
F8_BK = 128
#: The widest tile a folding consumer keeps whole: its total and a step sum take BN registers a thread, within
#: the 232 of its budget; wider tiles (256) fold by halves (a total of each half and one half-wide step sum).
F8_FOLD_WIDEST = 192
#: Staged rows of the epilogue: 16 per subgroup, a warpgroup's four at a time, BN + 8 elements long.
F8_STAGED = 4


def fp8_shared_bytes(binding: dict[str, Any]) -> int:
    """Shared memory one group of :data:`gemm_fp8` declares with ``binding`` (ring, staging, barriers)."""
    ring = binding["STAGES"] * (WS_BM + binding["BN"]) * F8_BK
    return ring + F8_STAGED * 16 * (binding["BN"] + 8) * 2 + 16 * binding["STAGES"]


def fp8_fits(v: dict[str, Any]) -> bool:
    """The ring fits sm_90's shared memory."""
    return fp8_shared_bytes(v) <= WG_SHARED_LIMIT


def fp8_overlap_folds(v: dict[str, Any]) -> bool:
    """OVERLAP is a way to fold on 128-wide tiles (a third accumulator of 64 registers)"""
    return not v["OVERLAP"] or (v["FOLD"] and v["BN"] == 128)


@kernel(variants(T=[f8e4m3, f8e5m2], U=[f8e4m3, f8e5m2], OUT=[bf16, f16], BN=[128, 256, 192], STAGES=[4, 5, 3],
                 FOLD=[True, False], OVERLAP=[False, True], CLUSTER=[1, 2, 4], where=[fp8_fits, fp8_overlap_folds]))
def gemm_fp8(a: In[T], b: In[U], scale_a: In[f32], scale_b: In[f32], c: Tensor[OUT], m: int, n: int, k: int):
    """C = OUT((scale_a[0] * scale_b[0]) * (A @ B^T)) with a producer and two consumer warpgroups (module doc).

    a: (m, k) row-major of T; b: (n, k) row-major of U (T, U in f8e4m3 / f8e5m2); scale_a, scale_b: one f32
    each; c: (m, n) row-major of OUT (bf16 or f16); k % 16 == 0 and 16-byte aligned tensors (tile copies move
    whole 16-byte chunks).  Products exact, sums f32 (FOLD: each 128-deep K step summed on its own, then added
    to the total in order, OVERLAP the same additions; the hardware keeps fewer bits within a step), the scale
    in f32 (one product, then one multiply per element), one rounding to OUT.  Launch: grid (G * 384,) for any
    G >= 1 (a multiple of CLUSTER), group (384,), subgroups of 32 lanes: group g computes the output tiles g,
    g + G, ... of 128 x BN; CLUSTER 2 or 4 (CUDA sm_90): that many groups take as many tile rows of one tile
    column, each copying its share of B's panel into all (multicast), as gemm_ws does.  Loads past m, n, k read
    0; stores past m, n are skipped; every product of two extents < 2**31.
    Non-finite: IEEE propagation through the sums and the scale (e5m2 holds infinities; e4m3 only NaN).
    """
    a_stage = WS_BM * F8_BK
    b_stage = BN * F8_BK
    a_s = shared(T, STAGES * a_stage)
    b_s = shared(U, STAGES * b_stage)
    LD = BN + 8
    stage = shared(OUT, F8_STAGED * 16 * LD)
    full = async_barriers(STAGES, 1)
    empty = async_barriers(STAGES, RELEASES * CLUSTER)
    rank = cluster_groups(CLUSTER)
    role = warp_roles(WS_ROLES, registers=WS_REGISTERS)
    if CLUSTER > 1:
        cluster_sync()  # every group's barriers exist before another's copies and releases reach them
    tid = thread_id(0)
    tiles_m = (m + WS_BM - 1) // WS_BM
    tiles_n = (n + BN - 1) // BN
    ktiles = (k + F8_BK - 1) // F8_BK
    rows_c = (tiles_m + CLUSTER - 1) // CLUSTER  # a cluster's tiles: CLUSTER tile rows of one tile column
    step = 0  # K steps through the ring so far, over every tile of this group
    if role == 0:
        if tid == 0:
            for tile in range(group_id(0) // CLUSTER, rows_c * tiles_n, num_groups(0) // CLUSTER):
                tm, tn = cluster_tile(tile, rows_c, tiles_n, CLUSTER, rank)
                for kt in range(ktiles):
                    s = free_slot(empty, step, STAGES)
                    copy_tile(a_s, s * a_stage, a, (m, k), (tm * WS_BM, kt * F8_BK), (WS_BM, F8_BK), full, s)
                    copy_rows_to_cluster(b_s, s * b_stage, b, n, k, tn * BN, kt * F8_BK, BN, F8_BK, full, s, CLUSTER,
                                         rank)
                    barrier_arrive(full, s, bytes=(WS_BM + BN) * F8_BK)
                    step += 1
    else:
        wg = (tid - WS_ROLES[0]) // 128
        scale = scale_a[0] * scale_b[0]
        for tile in range(group_id(0) // CLUSTER, rows_c * tiles_n, num_groups(0) // CLUSTER):
            tm, tn = cluster_tile(tile, rows_c, tiles_n, CLUSTER, rank)
            half = BN // 2 if FOLD and BN > F8_FOLD_WIDEST else BN  # the width of a step sum
            acc = frag_acc(f32, 16, half)  # by halves: the low half's total
            if OVERLAP:
                # Two step sums take turns: step kt's multiplies run while step kt - 1's sum joins the total (the
                # same additions in the same order as FOLD's, without waiting for each step's multiplies).  Steps
                # go in pairs so that neither sum changes registers while its multiplies run.
                mine = wg * 64 * F8_BK  # this warpgroup's rows of the A tile
                even = frag_acc(f32, 16, BN)
                odd = frag_acc(f32, 16, BN)  # zero until the first pair's: adding it changes nothing
                for kp in range(ktiles // 2):
                    s = full_slot(full, step, STAGES)
                    even = mma_wg(a_s, s * a_stage + mine, b_s, s * b_stage, frag_acc(f32, 16, BN), k=F8_BK,
                                  pending=1)
                    release_behind(empty, 2 * kp, step, STAGES, CLUSTER)
                    acc = acc + odd  # step 2 kp - 1's sum, retired
                    step += 1
                    s = full_slot(full, step, STAGES)
                    odd = mma_wg(a_s, s * a_stage + mine, b_s, s * b_stage, frag_acc(f32, 16, BN), k=F8_BK,
                                 pending=1)
                    release_behind(empty, 1, step, STAGES, CLUSTER)
                    acc = acc + even  # step 2 kp's sum, retired
                    step += 1
                if ktiles % 2 == 1:  # the last step alone, waited for
                    s = full_slot(full, step, STAGES)
                    last = mma_wg(a_s, s * a_stage + mine, b_s, s * b_stage, frag_acc(f32, 16, BN), k=F8_BK)
                    release_behind(empty, ktiles - 1, step, STAGES, CLUSTER)
                    acc = acc + odd
                    step += 1
                    release_last(empty, ktiles, step, STAGES, CLUSTER)
                    acc = acc + last
                else:
                    mma_wg_wait(0)
                    release_last(empty, ktiles, step, STAGES, CLUSTER)
                    acc = acc + odd
            elif half < BN:
                # By halves: the total is two 64 x BN / 2 fragments (BN / 2 registers each) and the step sum one,
                # within the 232-register budget; each half's sum joins its total as soon as its multiplies retired.
                mine = wg * 64 * F8_BK  # this warpgroup's rows of the A tile
                hi = frag_acc(f32, 16, half)
                for kt in range(ktiles):
                    s = full_slot(full, step, STAGES)
                    low = mma_wg(a_s, s * a_stage + mine, b_s, s * b_stage, frag_acc(f32, 16, half), k=F8_BK)
                    acc = acc + low
                    high = mma_wg(a_s, s * a_stage + mine, b_s, s * b_stage + half * F8_BK,
                                  frag_acc(f32, 16, half), k=F8_BK)
                    if lane_id() == 0:
                        release(empty, s, CLUSTER)
                    hi = hi + high
                    step += 1
            else:
                for kt in range(ktiles):
                    s = full_slot(full, step, STAGES)
                    if FOLD:
                        # This step's sums on their own, then into the total: the slot is free once they retired.
                        part = mma_wg(a_s, s * a_stage + wg * 64 * F8_BK, b_s, s * b_stage, frag_acc(f32, 16, BN),
                                      k=F8_BK, pending=0)
                        if lane_id() == 0:
                            release(empty, s, CLUSTER)
                        acc = acc + part
                    else:
                        acc = mma_wg(a_s, s * a_stage + wg * 64 * F8_BK, b_s, s * b_stage, acc, k=F8_BK, pending=1)
                        release_behind(empty, kt, step, STAGES, CLUSTER)
                    step += 1
                if not FOLD:
                    mma_wg_wait(0)
                    release_last(empty, ktiles, step, STAGES, CLUSTER)
            acc = acc * scale
            row0 = tm * WS_BM + wg * 64 + (simd_group_id() % 4) * 16
            turn = (simd_group_id() - WS_ROLES[0] // 32) // F8_STAGED
            slot = simd_group_id() % F8_STAGED
            for w in static_range(8 // F8_STAGED):
                if half < BN:
                    store_acc(c, c, stage, m, n, row0, tn * BN, acc, False, "none", turn == w, half, True, slot)
                    store_acc(c, c, stage, m, n, row0, tn * BN + half, hi * scale, False, "none", turn == w, half,
                              True, slot)
                else:
                    store_acc(c, c, stage, m, n, row0, tn * BN, acc, False, "none", turn == w, BN, True, slot)
    if CLUSTER > 1:
        cluster_sync()  # no group ends while another may still release a slot to it


@kernel(variants(T=[f32], OUT=[bf16, f16]))
def scale_rows(x: In[T], scale_a: In[f32], scale_b: In[f32], c: Tensor[OUT], count: int):
    """c[i] = OUT((scale_a[0] * scale_b[0]) * x[i]) for i < count: the portable path's epilogue, the same
    arithmetic as :data:`gemm_fp8`'s (one f32 product of the scales, one multiply, one rounding)."""
    i = program_id(0)
    if i < count:
        c[i] = OUT((scale_a[0] * scale_b[0]) * x[i])


#: Folding 128 x 256 tiles by halves through four stages, in persistent groups (:func:`fp8_groups`).  On an H100
#: (2026-12-06, scripts/device/h200_wave.sh gemm, kernel times beside torch._scaled_mm in one process;
#: benchmarks/h100-wave-fp8-2026-12-06.jsonl): 4096^3 at 0.89x cuBLAS and 8192 x 11008 x 4096 at 0.87x, where
#: 128 x 128 tiles ran 0.71x and 0.70x (a 128-wide tile needs a third more bytes from L2 a product).
FP8_DEFAULT = {"BN": 256, "STAGES": 4, "FOLD": True}
#: Folding where 128 x 256 tiles are too few (gemm_ws.py's WS_WIDE_TILES): whole step sums on 128 or 192 columns,
#: whichever fills the last wave of groups best (one group a tile).  Same run: 512 x 11008 x 4096 on 192 columns
#: 47.0 us against 128's 58.0 (cuBLAS 36.5); 512 x 4096 x 4096 on 128 columns (a whole wave) 18.7 us against
#: 192's 21.2 (14.1).
FP8_NARROW = ({"BN": 128, "STAGES": 5, "FOLD": True}, {"BN": 192, "STAGES": 4, "FOLD": True})
#: Fast accumulation on 128 x 256 tiles through four stages, in persistent groups (an H100, 4096^3: 103.1 us against
#: one group a tile's 108.4, cuBLAS with fast accumulation 97.7; benchmarks/h100-fp8-persistent-2026-12-06.jsonl).
FP8_FAST = {"BN": 256, "STAGES": 4, "FOLD": False}
#: Fast accumulation where 128 x 256 tiles are too few: 128 x 128 tiles in clusters of two sharing B's panel.  On
#: an H100 (2026-12-06, benchmarks/h100-fp8-clusters-2026-12-06.jsonl): 512 x 4096 x 4096 16.1 us against
#: FP8_FAST's 24.5 (cuBLAS with fast accumulation 13.8), 512 x 11008 x 4096 50.0 against 52.5 (35.0).  Clusters
#: gained nothing for folding (4096^3 on 128 x 128 tiles: 148.0 us against 144.5).
FP8_FAST_NARROW = {"BN": 128, "STAGES": 5, "FOLD": False, "CLUSTER": 2}


def fp8_config(m: int, n: int, fast_accum: bool) -> dict[str, Any]:
    """The binding :func:`scaled_mm` runs :data:`gemm_fp8` with on Hopper.  Where folding would take 192-wide
    tiles, fast accumulation takes them too (folding is the more exact of the two, which ``fast_accum`` allows):
    at 512 x 11008 x 4096 they beat FP8_FAST_NARROW's clustered 128-wide tiles on the H200 in one process
    (2026-12-07, benchmarks/h200-fp8-2026-12-07.jsonl: 46.2 us against 48.2), as on an H100 across two runs of
    2026-12-06 (47.0 against 50.0)."""
    if _host.ceil_div(m, WS_BM) * _host.ceil_div(n, 256) >= WS_WIDE_TILES:
        return dict(FP8_FAST if fast_accum else FP8_DEFAULT)
    fold = max(FP8_NARROW, key=lambda c: (ws_wave_fill(m, n, c["BN"]), c["BN"]))
    return dict(FP8_FAST_NARROW if fast_accum and fold["BN"] != 192 else fold)


def fp8_groups(config: dict[str, Any]) -> int | None:
    """Groups :func:`scaled_mm` launches with ``config``: one per multiprocessor looping over the tiles on 256-wide
    tiles (the next tile's panels land during a tile's epilogue), else None (one group a tile)."""
    return WS_SMS if config["BN"] == 256 else None


def fp8_geometry(m: int, n: int, bn: int, groups: int | None = None,
                 cluster: int = 1) -> tuple[tuple[int], tuple[int]]:
    """(grid, group) of :data:`gemm_fp8`: gemm_ws.py's :func:`~iron.std.gemm_ws.ws_geometry` (the tiles are as
    tall, the same clusters)."""
    return ws_geometry(m, n, bn, groups, cluster)


_FP8 = (f8e4m3, f8e5m2)


def scaled_mm(a: Any, b: Any, scale_a: Any, scale_b: Any, out_dtype: Any = bf16, out: Any = None,
              fast_accum: bool = False, backend: str | None = None) -> Any:
    """C = out_dtype((scale_a * scale_b) * (a @ b^T)), torch._scaled_mm's per-tensor contract.

    a: (M, K) and b: (N, K), each f8e4m3 or f8e5m2 (torch's float8_e4m3fn / float8_e5m2), C-contiguous;
    scale_a, scale_b: one-element f32 tensors (the dequantising scales); out_dtype bf16 or f16.
    ``fast_accum``: let the sums run over all of K in the matrix unit's own precision (Hopper), as
    ``use_fast_accum`` does; by default every 128-deep step is added to an f32 total.  Returns ``out`` (M, N).
    """
    ta, tb = _host.dtype_of(a, "scaled_mm: a"), _host.dtype_of(b, "scaled_mm: b")
    if ta not in _FP8 or tb not in _FP8:
        raise LaunchError(f"scaled_mm: a and b must be f8e4m3 or f8e5m2, got {ta.name} and {tb.name}")
    if out_dtype not in (bf16, f16):
        raise LaunchError(f"scaled_mm: out_dtype must be bf16 or f16, got {out_dtype}")
    a_shape, b_shape = _host.shape_of(a), _host.shape_of(b)
    if len(a_shape) != 2 or len(b_shape) != 2 or a_shape[1] != b_shape[1]:
        raise LaunchError(f"scaled_mm: a (M, K) and b (N, K) must share K, got shapes {a_shape} and {b_shape}")
    for s, what in ((scale_a, "scale_a"), (scale_b, "scale_b")):
        if _host.dtype_of(s, f"scaled_mm: {what}") != f32 or _host.shape_of(s) not in ((), (1,)):
            raise LaunchError(f"scaled_mm: {what} must be one f32 element (a per-tensor scale)")
    (m, k), n = a_shape, b_shape[0]
    out = _host.output("scaled_mm", out, a, (m, n), out_dtype, {"a": a, "b": b})
    if m == 0 or n == 0:
        return out
    traits = device_traits(backend, (a,))
    config = fp8_config(m, n, fast_accum)
    if (runs_roles(traits.profile) and k % 16 == 0 and all(_host.starts_aligned(x, 16) for x in (a, b))
            and fp8_shared_bytes(config) <= (traits.shared_limit or 0)):
        grid, group = fp8_geometry(m, n, config["BN"], fp8_groups(config), config.get("CLUSTER", 1))
        gemm_fp8.variant(T=ta, U=tb, OUT=out_dtype, **config).launch(
            a, b, scale_a, scale_b, out, m, n, k, grid=grid, group=group, backend=backend)
        return out
    return _portable(a, b, scale_a, scale_b, out, (m, n, k), out_dtype, backend)


def _portable(a: Any, b: Any, scale_a: Any, scale_b: Any, out: Any, mnk: tuple[int, int, int], out_dtype: Any,
              backend: str | None) -> Any:
    """Widen both operands to f32 (exact), gemm.py's f32 kernel, then :data:`scale_rows`."""
    from .cast import cast
    from .gemm import gemm

    m, n, k = mnk
    wide = [cast(x, f32, backend=backend) for x in (a, b)]
    sums = gemm(wide[0], wide[1], transpose_b=True, backend=backend)
    scale_rows.variant(T=f32, OUT=out_dtype).launch(sums, scale_a, scale_b, out, m * n, grid=(m * n,),
                                                    group=(min(256, m * n),), backend=backend)
    return out


__all__ = ["FP8_DEFAULT", "FP8_FAST", "FP8_FAST_NARROW", "FP8_NARROW", "OUT", "fp8_config", "fp8_geometry",
           "fp8_groups", "fp8_shared_bytes", "gemm_fp8", "scale_rows", "scaled_mm"]
