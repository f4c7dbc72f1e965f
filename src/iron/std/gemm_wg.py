"""GEMM on warpgroups: C = act(A @ B + bias) through ``mma_wg`` (Hopper's wgmma), the same contract as gemm.py.

Two warpgroups (256 threads) own a 128 x BN block tile of C, each its 64 rows; K goes in steps of 64
through a ring of ``STAGES`` shared buffers filled by asynchronous 16-byte copies straight into the
swizzled layout ``mma_wg`` reads (``sw128``), so no thread reshuffles the tiles and the matrix unit
reads them without bank conflicts.  A subgroup's accumulators are 16 x 128 fragments (one per 128
columns of the block tile: ``BN / 128`` of them); the epilogue stages each through shared memory for
the bias, the activation, one rounding and 16-byte stores, as gemm.py's matrix kernel does.

Only CUDA sm_90 runs ``mma_wg``; the host (``gemm.gemm``) picks this kernel there and ``gemm_mma``
elsewhere.  The interpreter runs it too (every test of its arithmetic and tails runs on the CPU).
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, kernel, variants
from iron.codegen.targets import PROFILES
from iron.lang import (barrier, copy_async_commit, copy_async_wait, frag_acc, frag_store, mma_wg, mma_wg_wait,
                       role_barrier, shared, simd_group_id, static_range, sw128, thread_id)

from .gemm import ACTIVATIONS, stage_chunk, store_staged_rows, swizzled_tile

#: Block tile rows (two warpgroups of 64), K step (one swizzled row of 16-bit values), threads.
WG_BM = 128
WG_BK = 64
WG_THREADS = 256
#: Columns of one accumulator fragment (and of one epilogue pass); its staging rows are padded by 4 floats.
ACC_N = 128
STAGE_LD = ACC_N + 4
#: Elements of one swizzled 64 x 64 block (8 KiB): A's warpgroup tiles and, for B given (k, n), the
#: 64-column blocks of a B tile.
BLOCK = 64 * 64


@func
def stage_step_wg(a, b, a_s, b_s, a_at, b_at, k0, bm, bn, m, n, k, tid, bn_size, vec_a, vec_b, bt, panels):
    """Start copying K step k0 .. k0 + 64 panels - 1 of this group's A and B tiles into their swizzled buffers:
    ``panels`` panels of 64 K each, one after the other in both buffers.  When both matrices keep whole
    16-byte chunks (the usual case) one uniform branch leads to straight-line asynchronous copies."""
    if vec_a and vec_b:
        for p in static_range(panels):
            stage_panel(a, b, a_s, b_s, a_at + p * WG_BM * WG_BK, b_at + p * bn_size * WG_BK, k0 + p * WG_BK, bm, bn,
                        m, n, k, tid, bn_size, True, True, bt)
    else:
        for p in static_range(panels):
            stage_panel(a, b, a_s, b_s, a_at + p * WG_BM * WG_BK, b_at + p * bn_size * WG_BK, k0 + p * WG_BK, bm, bn,
                        m, n, k, tid, bn_size, vec_a, vec_b, bt)


@func
def stage_panel(a, b, a_s, b_s, a_at, b_at, k0, bm, bn, m, n, k, tid, bn_size, vec_a, vec_b, bt):
    """Start copying K k0 .. k0+63 of this group's A and B tiles into one swizzled panel of each buffer.

    A (128 x 64, k-major): chunk q is row q / 8, 8-element chunk q % 8.  B given (n, k) (``bt``):
    bn_size x 64 the same way.  B given (k, n): 64 rows of k, each bn_size / 8 chunks of n, stored as
    64-column blocks (``BLOCK`` apart) of 64 k-rows.  Each thread copies whole 16-byte chunks.
    """
    for ch in static_range(WG_BM * 8 // WG_THREADS):
        q = tid + ch * WG_THREADS
        stage_chunk(a_s, a_at + sw128(q // 8, (q % 8) * 8), a, k, bm + q // 8, k0 + (q % 8) * 8, m, k, vec_a)
    for ch in static_range(bn_size * 8 // WG_THREADS):
        q = tid + ch * WG_THREADS
        if bt:
            stage_chunk(b_s, b_at + sw128(q // 8, (q % 8) * 8), b, k, bn + q // 8, k0 + (q % 8) * 8, n, k, vec_b)
        else:
            per_row = bn_size // 8
            kk = q // per_row
            col = (q % per_row) * 8
            stage_chunk(b_s, b_at + (col // 64) * BLOCK + sw128(kk, col % 64), b, n, k0 + kk, bn + col, k, n, vec_b)


@func
def store_acc(c, bias, stage, m, n, row0, col0, acc, has_bias, act, mine, width=ACC_N, roles=False, slot=-1):
    """Write one subgroup's 16 x width accumulator (rows row0.., columns col0..) through its staging rows.

    ``mine``: this subgroup has the staging rows now (the others only keep the barriers company); ``slot``:
    which 16 staging rows are its own (its index in its warpgroup unless given); after a barrier (``roles``:
    the caller's role barrier, gemm_ws.py's consumers), :func:`~iron.std.gemm.store_staged_rows`.  Staging
    of f32 rounds nothing; staging of C's type rounds each sum once (only without bias and activation).
    Rows are ``width`` + 16 bytes apart: 16-byte aligned, and a subgroup's stores spread over the banks.
    """
    ld = width + (4 if stage.dtype == f32 else 8)
    sbase = (simd_group_id() % 4 if slot < 0 else slot) * 16 * ld
    if mine:
        frag_store(stage, sbase, ld, acc)
    _meet(roles)
    store_staged_rows(c, bias, stage, sbase, ld, width, m, n, row0, col0, has_bias, act, mine)
    _meet(roles)


@func
def _meet(roles):
    """The group's barrier, or (``roles``) the caller's role barrier."""
    if roles:
        role_barrier()
    else:
        barrier()


def wg_ring_deep_enough(v: dict[str, Any]) -> bool:
    """STAGES > PENDING + 1: a buffer for the step landing, one per multiply in flight"""
    return v["STAGES"] > v["PENDING"] + 1


def wg_ring_fits(v: dict[str, Any]) -> bool:
    """The group's shared memory fits the devices that run ``mma_wg`` (sm_90's opt-in limit, 227 KiB): the
    deepest, widest rings (4 stages of two 64-deep panels at BN 256: 417 KiB) can launch nowhere, so
    ``iron build`` does not build them."""
    return wg_shared_bytes(v) <= WG_SHARED_LIMIT


@kernel(variants(T=[f16, bf16], BN=[128, 256], STAGES=[4, 3, 2], PENDING=[1, 0], KP=[1, 2], BT=[False, True],
                 BIAS=[False, True], ACT=list(ACTIVATIONS), where=[wg_ring_deep_enough, wg_ring_fits]))
def gemm_wg(a: In[T], b: In[T], bias: In[T], c: Tensor[T], m: int, n: int, k: int):
    """C = act(A @ B + bias) on warpgroups (``mma_wg``; docs/std/gemm.md).

    a: (m, k) row-major; b: (k, n) row-major, or (n, k) row-major when BT; bias: (n,) when BIAS (else
    one unread element); c: (m, n) row-major; T in f16/bf16.  Products exact, sums in f32 (the
    accumulators), bias and ACT in f32, one rounding to T.  A group of 256 threads (two warpgroups of
    four subgroups, which must have 32 lanes) owns a 128 x BN block tile; K goes in steps of 64 KP (KP
    panels of 64) through STAGES shared buffers, STAGES - 1 - PENDING steps of copies on their way while
    PENDING steps of multiplies run behind the one being issued (STAGES > PENDING + 1).  Launch: grid
    (ceil(n/BN) * 256, ceil(m/128)), group (256, 1).  Shapes as gemm_fma: loads past m, n, k read 0;
    stores past m, n are skipped; every product of two extents < 2**31.
    Reduction: per 16-deep K slice a dot product in the unit's order, the slices in order.
    Non-finite: IEEE propagation, as gemm_fma.
    """
    a_stage = KP * WG_BM * WG_BK
    b_stage = KP * BN * WG_BK
    a_s = shared(T, STAGES * a_stage)
    b_s = shared(T, STAGES * b_stage)
    stage = shared(f32, 4 * 16 * STAGE_LD)  # one warpgroup's accumulators at a time
    tid = thread_id(0)
    sg = simd_group_id()
    wg = sg // 4
    tm, tn = swizzled_tile()
    bm = tm * WG_BM
    bn = tn * BN
    vec_a = k % 8 == 0
    vec_b = (k if BT else n) % 8 == 0
    acc0 = frag_acc(f32, 16, ACC_N)
    acc1 = frag_acc(f32, 16, ACC_N)
    step = KP * WG_BK
    ktiles = (k + step - 1) // step
    per_step = KP * (BN // ACC_N)  # multiplies issued per K step
    depth = STAGES - 1 - PENDING  # K steps whose copies are on their way
    assert depth >= 1, "STAGES > PENDING + 1: a buffer for the step landing, one per multiply in flight"
    for st in static_range(depth):
        if st < ktiles:
            stage_step_wg(a, b, a_s, b_s, st * a_stage, st * b_stage, st * step, bm, bn, m, n, k, tid, BN, vec_a,
                          vec_b, BT, KP)
        copy_async_commit()
    for kt in range(ktiles):
        # This thread's copies of step kt have landed; after the barrier (which also fences them for the
        # matrix unit) everyone's have, and both warpgroups have retired step kt-1-PENDING's multiplies,
        # whose buffer step kt+depth now refills.
        copy_async_wait(depth - 1)
        barrier()
        ahead = kt + depth
        if ahead < ktiles:
            slot = ahead % STAGES
            stage_step_wg(a, b, a_s, b_s, slot * a_stage, slot * b_stage, ahead * step, bm, bn, m, n, k, tid, BN,
                          vec_a, vec_b, BT, KP)
        copy_async_commit()
        # The step's multiplies (per panel, one per 128 columns) are issued back to back, none waiting but the
        # last, which waits until only this step's and PENDING earlier steps' are running.
        for p in static_range(KP):
            a_tile = (kt % STAGES) * a_stage + p * WG_BM * WG_BK + wg * BLOCK
            b_base = (kt % STAGES) * b_stage + p * BN * WG_BK
            if BN == 256:
                acc1 = mma_wg(a_s, a_tile, b_s, b_base + (ACC_N * WG_BK if BT else 2 * BLOCK), acc1, k=WG_BK,
                              b_major="k" if BT else "n", b_block=0 if BT else BLOCK,
                              pending=min(7, PENDING * per_step + 2 * p + 1))
            acc0 = mma_wg(a_s, a_tile, b_s, b_base, acc0, k=WG_BK, b_major="k" if BT else "n",
                          b_block=0 if BT else BLOCK,
                          pending=PENDING * per_step if p == KP - 1 else min(7, PENDING * per_step + per_step))
    mma_wg_wait(0)
    copy_async_wait()  # only empty groups remain; leave none in flight
    row0 = bm + wg * 64 + (sg % 4) * 16
    for w in static_range(2):
        store_acc(c, bias, stage, m, n, row0, bn, acc0, BIAS, ACT, wg == w)
        if BN == 256:
            store_acc(c, bias, stage, m, n, row0, bn + ACC_N, acc1, BIAS, ACT, wg == w)


#: The H200 configuration: a 128 x 256 block tile, 4 stages (4 x 48 KiB of tiles + 33 KiB of staging), one
#: K step's multiplies running while the next one's are issued.
WG_DEFAULT = {"BN": 256, "STAGES": 4, "PENDING": 1, "KP": 1}


def wg_shared_bytes(binding: dict[str, Any]) -> int:
    """Shared memory one group of :data:`gemm_wg` declares with ``binding`` (ring, staging; 16-bit T)."""
    ring = binding["STAGES"] * binding.get("KP", 1) * (WG_BM + binding["BN"]) * WG_BK * 2
    return ring + 4 * 16 * STAGE_LD * 4


#: The most shared memory one group may take on a device that runs ``mma_wg``.
WG_SHARED_LIMIT = max(p.shared_limit for p in PROFILES.values() if "wgmma" in p.features)


def runs_warpgroups(profile: Any) -> bool:
    """Whether a device (its TargetProfile) runs ``mma_wg``: CUDA sm_90 (wgmma)."""
    return profile is not None and "wgmma" in profile.features


__all__ = ["WG_BM", "WG_BK", "WG_DEFAULT", "WG_THREADS", "gemm_wg", "runs_warpgroups", "wg_shared_bytes"]
