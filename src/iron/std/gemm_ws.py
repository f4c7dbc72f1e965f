"""GEMM with warp roles on Hopper: C = act(A @ B + bias), the contract of gemm.py, fed by tile copies (TMA).

One group of 384 threads computes 128 x BN output tiles of C (one, or with fewer groups than tiles every G-th,
its ring running on from tile to tile).  Warp roles split it: role 0, one warpgroup at a
40-register budget, is the producer, in which one thread issues per K step the tile copies of A's 128 x 64 and
B's BN x 64 (or 64 x BN) panels into a ring of STAGES shared buffers in ``mma_wg``'s swizzled layout, each
completing on the slot's ``full`` barrier; role 1, two warpgroups at 232 registers, are the consumers, each
multiplying its 64 rows by the whole BN columns with one ``mma_wg`` per K step (m64nBNk16 x 4: A is read once)
and releasing the slot on its ``empty`` barrier once the step's multiplies retired.  No block barrier runs in
the main loop, and no thread computes a copy's address: the tile copy hardware does, zero-filling the tails.
The epilogue stages the consumers' accumulators through shared memory, meeting at their role barrier, and
stores 16-byte chunks: rounded to T on the way in where there is no bias and no activation, else as f32 sums
that get bias, activation and one rounding on the way out; a warpgroup at a time where the ring leaves room,
else two subgroups.

The tile copies need rows of whole 16-byte chunks (``k % 8 == 0``, and ``n % 8 == 0`` for B given (k, n)) and
16-byte aligned tensors; the host (``gemm.gemm``) runs gemm_wg.py otherwise.  Only CUDA sm_90 runs
``mma_wg``; the interpreter runs it too (the tests of its arithmetic, tails and ring run on the CPU).
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, kernel, variants
from iron.lang import (async_barriers, barrier_arrive, barrier_wait, cluster_groups, cluster_sync, copy_tile, frag_acc,
                       group_id, lane_id, mma_wg, mma_wg_wait, num_groups, shared, simd_group_id, static_range,
                       thread_id, warp_roles)

from . import _host
from .gemm import ACTIVATIONS, SWIZZLE
from .gemm_wg import WG_SHARED_LIMIT, store_acc

#: Block tile rows (two consumer warpgroups of 64), K step (one swizzled row of 16-bit values).
WS_BM = 64 * 2
WS_BK = 64
#: The producer warpgroup and the two consumer warpgroups, and their registers per thread (CUTLASS's and
#: ThunderKittens' split of 384 threads: 128 x 40 + 256 x 232 = 384 x 168).
WS_ROLES = (128, 256)
WS_REGISTERS = (40, 232)
WS_THREADS = sum(WS_ROLES)
#: Elements of one swizzled 64 x 64 block (8 KiB): a consumer's A rows per step, and the 64-column blocks of
#: a B tile given (k, n).
BLOCK = 64 * 64
#: Consumer subgroups arrive on a slot's ``empty`` barrier (one lane each).
RELEASES = WS_ROLES[1] // 32


def ws_staged_bytes(binding: dict[str, Any]) -> int:
    """Bytes of one staged sum: 2 where the epilogue has no bias and no activation (the accumulators are
    rounded to T on their way into the staging rows), else 4 (f32; also for a binding without those flags)."""
    return 2 if binding.get("BIAS") is False and binding.get("ACT") == "none" else 4


def ws_staging_subgroups(binding: dict[str, Any]) -> int:
    """Consumer subgroups that stage their accumulators at once: a warpgroup's four where the ring leaves room
    for 4 x 16 staged rows, else two (the epilogue then takes four turns instead of two; the kernel's ``PER``
    says the same).  Rows are BN + 16 bytes long."""
    bn, stages, size = binding["BN"], binding["STAGES"], ws_staged_bytes(binding)
    four = stages * (WS_BM + bn) * WS_BK * 2 + 4 * 16 * (bn + 16 // size) * size + 16 * stages
    return 4 if four <= WG_SHARED_LIMIT else 2


def ws_shared_bytes(binding: dict[str, Any]) -> int:
    """Shared memory one group of :data:`gemm_ws` declares with ``binding`` (ring, staging, barriers)."""
    ring = binding["STAGES"] * (WS_BM + binding["BN"]) * WS_BK * 2
    size = ws_staged_bytes(binding)
    return ring + ws_staging_subgroups(binding) * 16 * (binding["BN"] + 16 // size) * size + 16 * binding["STAGES"]


def ws_fits(v: dict[str, Any]) -> bool:
    """The group's shared memory fits the devices that run ``mma_wg`` (sm_90's opt-in limit, 227 KiB)."""
    return ws_shared_bytes(v) <= WG_SHARED_LIMIT


def ws_whole_blocks(v: dict[str, Any]) -> bool:
    """B given (k, n) is copied in 64-column blocks: BN a multiple of 64 there (168 only for B given (n, k),
    whose tile is BN rows of K)."""
    return v["BT"] or v["BN"] % 64 == 0


@func
def tile_at(t, tiles_m, tiles_n):
    """(tile row, tile column) of output tile ``t``: tiles walk SWIZZLE tile rows at a time, column by column
    (gemm.py's order, so neighbouring groups share panels of A and B in L2)."""
    width = SWIZZLE * tiles_n
    first = (t // width) * SWIZZLE
    rows = min(tiles_m - first, SWIZZLE)
    within = t % width
    return first + within % rows, within // rows


@func
def cluster_tile(tile, rows_c, tiles_n, cluster, rank):
    """(tile row, tile column) of this group for a cluster's tile ``tile``: a cluster takes ``cluster`` tile rows
    of one tile column at a time (``rows_c`` of them down the output), its groups by rank."""
    tc, tn = tile_at(tile, rows_c, tiles_n)
    return tc * cluster + rank, tn


@func
def copy_rows_to_cluster(dst, base, src, src_rows, src_cols, row0, col, rows, cols, bars, s, cluster, rank):
    """The ``rows x cols`` box at (row0, col) of ``src`` (a src_rows x src_cols matrix) into the swizzled tile at
    ``dst[base ..]`` of every group of the cluster: each group copies its piece of whole 8-row atoms (the last
    may be shorter: 168 rows as 88 and 80) and multicasts it; a group alone copies the whole box."""
    piece = (rows // cluster + 7) // 8 * 8
    for q in static_range(cluster):
        if q == rank:
            copy_tile(dst, base + q * piece * cols, src, (src_rows, src_cols), (row0 + q * piece, col),
                      (min(piece, rows - q * piece), cols), bars, s, multicast=cluster > 1)


@func
def free_slot(empty, step, stages):
    """The producer's ring slot for K step ``step``, once the consumers released it: its ``empty`` barrier's
    phase of the previous lap (parity flipped: the first lap finds every slot free)."""
    s = step % stages
    barrier_wait(empty, s, ((step // stages) & 1) ^ 1)
    return s


@func
def full_slot(full, step, stages):
    """The consumers' ring slot for K step ``step``, once its tiles landed: its ``full`` barrier's phase of this
    lap."""
    s = step % stages
    barrier_wait(full, s, (step // stages) & 1)
    return s


@func
def release(empty, slot, cluster):
    """A ring slot goes back to the producer: to this group's, or in a cluster to every group's (each copies a
    piece of the slot's tiles into every group, so each must hear that this group's consumers are done)."""
    if cluster == 1:
        barrier_arrive(empty, slot)
    else:
        for q in static_range(cluster):
            barrier_arrive(empty, slot, rank=q)


@func
def release_behind(empty, kt, step, stages, cluster=1):
    """A consumer subgroup's release after issuing K step ``kt`` (``step`` over the ring) with one step's
    multiplies left running: the previous step's retired, so its slot goes back to the producer (one lane
    arrives)."""
    if kt > 0 and lane_id() == 0:
        release(empty, (step - 1) % stages, cluster)


@func
def release_last(empty, ktiles, step, stages, cluster=1):
    """After a tile's final wait (``step`` past its last K step): its last slot goes back to the producer (one
    lane), before the producer needs it again."""
    if ktiles > 0 and lane_id() == 0:
        release(empty, (step - 1) % stages, cluster)


@kernel(variants(T=[f16, bf16], BN=[256, 128, 168], STAGES=[3, 4, 2, 5, 6], BT=[False, True], BIAS=[False, True],
                 ACT=list(ACTIVATIONS), CLUSTER=[1, 2, 4], where=[ws_fits, ws_whole_blocks]))
def gemm_ws(a: In[T], b: In[T], bias: In[T], c: Tensor[T], m: int, n: int, k: int):
    """C = act(A @ B + bias) with a producer and two consumer warpgroups (docs/std/gemm.md, "Warp roles").

    a: (m, k) row-major; b: (k, n) row-major, or (n, k) row-major when BT; bias: (n,) when BIAS (else one
    unread element); c: (m, n) row-major; T in f16/bf16; k % 8 == 0, and n % 8 == 0 unless BT (tile copies
    move whole 16-byte chunks).  Products exact, sums in f32, bias and ACT in f32, one rounding to T.  Launch:
    grid (G * 384,) for any G >= 1 (a multiple of CLUSTER), group (384,), subgroups of 32 lanes: group g
    computes the output tiles g, g + G, ... of 128 x BN (persistent when G is below the tile count: the ring
    runs on across tiles, so the producer fetches the next tile while the consumers store the last).  CLUSTER
    2 or 4 (CUDA sm_90): that many groups take the tiles of as many tile rows in one tile column, each copying
    its share of the B tile into all (multicast), so B crosses L2 once for CLUSTER tiles.  Loads past m, n, k read 0;
    stores past m, n are skipped; every product of two extents < 2**31.
    Reduction: per 16-deep K slice a dot product in the unit's order, the slices in order.
    Non-finite: IEEE propagation, as gemm_fma.
    """
    a_stage = WS_BM * WS_BK
    b_stage = BN * WS_BK
    a_s = shared(T, STAGES * a_stage)
    b_s = shared(T, STAGES * b_stage)
    # Staged sums of T where the epilogue adds nothing (rounded once on their way in), else of f32 (ws_staged_bytes);
    # PER consumer subgroups stage at a time (ws_staging_subgroups), rows BN + 16 bytes long.
    SB = 2 if not BIAS and ACT == "none" else 4
    LD = BN + 16 // SB
    PER = 4 if STAGES * (WS_BM + BN) * WS_BK * 2 + 4 * 16 * LD * SB + 16 * STAGES <= WG_SHARED_LIMIT else 2
    stage = shared(T if SB == 2 else f32, PER * 16 * LD)
    full = async_barriers(STAGES, 1)
    empty = async_barriers(STAGES, RELEASES * CLUSTER)
    rank = cluster_groups(CLUSTER)
    role = warp_roles(WS_ROLES, registers=WS_REGISTERS)
    if CLUSTER > 1:
        cluster_sync()  # every group's barriers exist before another's copies and releases reach them
    tid = thread_id(0)
    tiles_m = (m + WS_BM - 1) // WS_BM
    tiles_n = (n + BN - 1) // BN
    ktiles = (k + WS_BK - 1) // WS_BK
    rows_c = (tiles_m + CLUSTER - 1) // CLUSTER  # a cluster's tiles: CLUSTER tile rows of one tile column
    step = 0  # K steps through the ring so far, over every tile of this group
    if role == 0:
        if tid == 0:
            for tile in range(group_id(0) // CLUSTER, rows_c * tiles_n, num_groups(0) // CLUSTER):
                tm, tn = cluster_tile(tile, rows_c, tiles_n, CLUSTER, rank)
                for kt in range(ktiles):
                    s = free_slot(empty, step, STAGES)
                    copy_tile(a_s, s * a_stage, a, (m, k), (tm * WS_BM, kt * WS_BK), (WS_BM, WS_BK), full, s)
                    if BT:
                        copy_rows_to_cluster(b_s, s * b_stage, b, n, k, tn * BN, kt * WS_BK, BN, WS_BK, full, s,
                                             CLUSTER, rank)
                    else:
                        for j in static_range(BN // 64):
                            if j % CLUSTER == rank:
                                copy_tile(b_s, s * b_stage + j * BLOCK, b, (k, n), (kt * WS_BK, tn * BN + j * 64),
                                          (WS_BK, 64), full, s, multicast=CLUSTER > 1)
                    barrier_arrive(full, s, bytes=(WS_BM + BN) * WS_BK * T.itemsize)
                    step += 1
    else:
        wg = (tid - WS_ROLES[0]) // 128
        for tile in range(group_id(0) // CLUSTER, rows_c * tiles_n, num_groups(0) // CLUSTER):
            tm, tn = cluster_tile(tile, rows_c, tiles_n, CLUSTER, rank)
            acc = frag_acc(f32, 16, BN)
            for kt in range(ktiles):
                s = full_slot(full, step, STAGES)
                acc = mma_wg(a_s, s * a_stage + wg * BLOCK, b_s, s * b_stage, acc, k=WS_BK,
                             b_major="k" if BT else "n", b_block=0 if BT else BLOCK, pending=1)
                release_behind(empty, kt, step, STAGES, CLUSTER)
                step += 1
            mma_wg_wait(0)
            release_last(empty, ktiles, step, STAGES, CLUSTER)
            row0 = tm * WS_BM + wg * 64 + (simd_group_id() % 4) * 16
            turn = (simd_group_id() - WS_ROLES[0] // 32) // PER
            slot = simd_group_id() % PER
            for w in static_range(8 // PER):
                store_acc(c, bias, stage, m, n, row0, tn * BN, acc, BIAS, ACT, turn == w, BN, True, slot)
    if CLUSTER > 1:
        cluster_sync()  # no group ends while another may still release a slot to it


def ws_geometry(m: int, n: int, bn: int, groups: int | None = None, cluster: int = 1) -> tuple[tuple[int], tuple[int]]:
    """(grid, group) of :data:`gemm_ws`: one group per 128 x ``bn`` output tile, or ``groups`` groups (at most
    one per tile) that each loop over every ``groups``-th tile; in clusters of ``cluster`` groups, whole
    clusters, each over ``cluster`` tile rows of a tile column."""
    tiles = _host.ceil_div(_host.ceil_div(m, WS_BM), cluster) * _host.ceil_div(n, bn)
    clusters = max(1, tiles if groups is None else min(tiles, max(1, groups // cluster)))
    return (clusters * cluster * WS_THREADS,), (WS_THREADS,)


#: 128 x 256 tiles through a four-stage ring.  On the H200 (2026-12-04, kernel times in interleaved rounds,
#: sums staged in T, BENCHMARKS.md) it ran 4096^3 at 0.93x cuBLAS and 8192^3 at 0.97x with B given (k, n)
#: and 0.98x given (n, k), against 0.88x, 0.91x and 0.91x with three stages.
WS_DEFAULT = {"BN": 256, "STAGES": 4}
#: Below this many 128 x 256 output tiles (about two per multiprocessor of an H200's 132) the host takes
#: 128 x 128 tiles: twice the groups to spread (512 x 4096 x 4096, B given (n, k), 2026-12-04: 0.85x cuBLAS
#: against 0.47x).
WS_WIDE_TILES = 256


#: Streaming multiprocessors of the H100 and H200 (SXM): a tile count is judged against waves of groups.
WS_SMS = 132
#: Where 128 x 256 tiles are too few and B is given (n, k) (nn.Linear's weight), clusters of two groups sharing
#: B's tile, 128 or 168 columns wide.  On an H100 (2026-12-06, scripts/device/gemm_tune.py, kernel times beside
#: cuBLAS; BENCHMARKS.md): 512 x 4096 x 4096 ran 27.7 us in clusters on 128-wide tiles through six stages
#: against 29.9 without (cuBLAS 24.4); 512 x 11008 x 4096 68.0 us in clusters on 168-wide tiles through five
#: against 69.2 without (cuBLAS 61.0).
WS_NARROW_CLUSTERED = ({"BN": 128, "STAGES": 6, "CLUSTER": 2}, {"BN": 168, "STAGES": 5, "CLUSTER": 2})


def ws_wave_fill(m: int, n: int, bn: int) -> float:
    """The share of the last wave's groups that have a 128 x ``bn`` tile (1.0: whole waves of WS_SMS)."""
    tiles = _host.ceil_div(m, WS_BM) * _host.ceil_div(n, bn)
    return tiles / (_host.ceil_div(tiles, WS_SMS) * WS_SMS)


def ws_config(m: int, n: int, transpose_b: bool = False) -> dict[str, int]:
    """The tile width, ring depth and cluster the host runs :data:`gemm_ws` with: :data:`WS_DEFAULT` where there
    are enough 128 x 256 tiles (:data:`WS_WIDE_TILES`); else, for B given (n, k), the clustered binding of
    :data:`WS_NARROW_CLUSTERED` whose tiles fill the last wave best (the narrower on a tie: 512 x 4096 takes 128
    columns, 512 x 11008 takes 168, two whole waves); else 128 x 128 tiles through four stages."""
    if _host.ceil_div(m, WS_BM) * _host.ceil_div(n, 256) >= WS_WIDE_TILES:
        return dict(WS_DEFAULT)
    if transpose_b:
        return dict(max(WS_NARROW_CLUSTERED, key=lambda c: ws_wave_fill(m, n, c["BN"])))
    return {"BN": 128, "STAGES": 4}


def runs_roles(profile: Any) -> bool:
    """Whether a device (its TargetProfile) runs :data:`gemm_ws`: wgmma, tile copies and register budgets."""
    return profile is not None and {"wgmma", "tma", "setmaxnreg"} <= profile.features


def ws_shapes_fit(n: int, k: int, transpose_b: bool) -> bool:
    """Whether tile copies can read the operands: rows of whole 16-byte chunks (8 16-bit elements)."""
    return k % 8 == 0 and (transpose_b or n % 8 == 0)


def ws_chosen(traits: Any, mnk: tuple[int, int, int], transpose_b: bool,
              operands: tuple[Any, ...]) -> dict[str, int] | None:
    """:func:`ws_config`'s binding where the host runs :data:`gemm_ws` for this call (a device with warp roles,
    tile copies and wgmma that has the group's shared memory for it, and operands tile copies can read: whole
    16-byte rows, 16-byte aligned), else None.  On the H200 it led gemm_wg.py's kernel on every shape
    measured, from 512 x 4096 x 4096 (30 us against 81) to 8192^3."""
    m, n, k = mnk
    if not (runs_roles(traits.profile) and ws_shapes_fit(n, k, transpose_b)
            and all(_host.starts_aligned(x, 16) for x in operands)):
        return None
    config = ws_config(m, n, transpose_b)
    return config if ws_shared_bytes(config) <= (traits.shared_limit or 0) else None


__all__ = ["WS_BM", "WS_DEFAULT", "WS_NARROW_CLUSTERED", "WS_SMS", "WS_THREADS", "WS_WIDE_TILES", "cluster_tile",
           "copy_rows_to_cluster", "free_slot",
           "full_slot", "gemm_ws", "release", "release_behind",
           "release_last", "runs_roles",
           "ws_chosen", "ws_config", "ws_wave_fill",
           "ws_geometry", "ws_shapes_fit", "ws_shared_bytes", "ws_staged_bytes", "ws_staging_subgroups"]
