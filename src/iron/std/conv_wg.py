"""Dense convolution on warpgroups: conv_mma.py's implicit GEMM feeding ``mma_wg`` (Hopper's wgmma).

The same product as conv_mma.py (M = output pixels, N = output channels of a group, K = taps x input channels,
tap by channel) with gemm_wg.py's structure: two warpgroups (256 threads) own 128 pixels x BN channels, K goes
in steps of 64 channels of one tap through a ring of ``STAGES`` shared buffers, and each K step's tiles are
gathered with 16-byte asynchronous copies straight into the swizzled layout ``mma_wg`` reads (``sw128``): A's
chunks from channels-last x (zeros in the padding and past the channels), B's from the weight as (C_out, K).
The epilogue stages each 16 x 128 accumulator through shared memory for conv_mma.py's stores (bias, residual,
activation, one rounding; NHWC or NCHW).

Only CUDA sm_90 runs ``mma_wg``; the host (``conv.conv2d``) picks this kernel there and conv_mma elsewhere.  The
interpreter runs it too (its tests run on the CPU).
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.lang import (barrier, copy_async, copy_async_commit, copy_async_wait, frag_acc, frag_store, group_id,
                       mma_wg, mma_wg_wait, shared, simd_group_id, static_range, sw128, thread_id, u32)

from . import _host
from .conv_mma import MAX_GROUPS, advance, fill_rows, store_tile
from .gemm import ACTIVATIONS, swizzled_tile
from .gemm_wg import ACC_N, BLOCK, STAGE_LD, WG_BK, WG_BM, WG_SHARED_LIMIT, WG_THREADS

__all__ = ["WG_CONV_DEFAULT", "conv_wg", "conv_wg_config", "conv_wg_grid", "conv_wg_shared_bytes"]


@func
def stage_conv_wg(x, w, a_s, b_s, rows_s, a_at, b_at, dy, dx, c0, wk0, bn, tid, bn_size, h, wd, c_in, cin_g,
                  cout_g, red, xoff, wrow0):
    """Start copying one K step (channels c0 .. c0+63 of tap (dy, dx)) into one swizzled panel of each buffer:
    A (128 pixels x 64, k-major) and B (bn_size output channels x 64).  Chunk q is row q / 8, 8-element chunk
    q % 8; zeros outside the image, the channels or the output channels."""
    shift = dy * wd + dx
    for ch in static_range(WG_BM * 8 // WG_THREADS):
        q = tid + ch * WG_THREADS
        r = q // 8
        ci = c0 + (q % 8) * 8
        ok = u32(rows_s[3 * r + 1] + dy) < u32(h) and u32(rows_s[3 * r + 2] + dx) < u32(wd) and ci < cin_g
        copy_async(a_s, a_at + sw128(r, (q % 8) * 8), x, (rows_s[3 * r] + shift) * c_in + xoff + ci, 8, ok)
    for ch in static_range(bn_size * 8 // WG_THREADS):
        q = tid + ch * WG_THREADS
        r = q // 8
        ci = c0 + (q % 8) * 8
        copy_async(b_s, b_at + sw128(r, (q % 8) * 8), w, (wrow0 + bn + r) * red + wk0 + ci, 8,
                   bn + r < cout_g and ci < cin_g)


@func
def store_acc_conv(y, bias, res, stage, row0, col0, acc, mine, n_pix, cout_g, c_out, coff, hw_out, nchw, has_bias,
                   has_res, act):
    """Write one subgroup's 16 x 128 accumulator (pixels row0.., channels col0..) through its staging tile with
    conv_mma.py's stores (NHWC: 8 channels of a pixel a lane-task; NCHW: 8 pixels of a channel).  ``mine``:
    this subgroup's warpgroup has the staging tiles now (the other one only keeps the barriers company)."""
    sbase = (simd_group_id() % 4) * 16 * STAGE_LD
    if mine:
        frag_store(stage, sbase, STAGE_LD, acc)
    barrier()
    if mine:
        store_tile(y, bias, res, stage, sbase, STAGE_LD, 16, ACC_N, row0, col0, n_pix, cout_g, c_out, coff, hw_out,
                   nchw, has_bias, has_res, act)
    barrier()


def wg_conv_ring_deep_enough(v: dict[str, Any]) -> bool:
    """STAGES > PENDING + 1: a buffer for the step landing, one per multiply in flight"""
    return v["STAGES"] > v["PENDING"] + 1


def wg_conv_ring_fits(v: dict[str, Any]) -> bool:
    """The group's shared memory fits the devices that run ``mma_wg`` (sm_90's opt-in limit, 227 KiB)"""
    return conv_wg_shared_bytes(v) <= WG_SHARED_LIMIT


@kernel(variants(T=[f16, bf16], BN=[128, 256], STAGES=[4, 3, 2], PENDING=[1, 0], ACT=list(ACTIVATIONS),
                 where=[wg_conv_ring_deep_enough, wg_conv_ring_fits]))
def conv_wg(x: In[T], w: In[T], bias: In[T], res: In[T], y: Tensor[T], c_in: int, h: int, wd: int, c_out: int,
            kw: int, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int, h_out: int, w_out: int, n_pix: int,
            taps: int, cin_g: int, cout_g: int, nchw: int, has_bias: int, has_res: int):
    """y = act(conv2d(x, w) + bias + res) on warpgroups (``mma_wg``): conv_mma's contract (docs/std/conv.md).

    Arguments, layouts and numerics as :data:`~iron.std.conv_mma.conv_mma` (cin_g % 8 == 0, 16-byte aligned
    arrays, i32 sizes); a group of 256 threads (two warpgroups of four 32-lane subgroups) owns 128 pixels x BN
    output channels; K in steps of 64 channels of one tap through STAGES buffers, PENDING steps of multiplies
    left running.  Launch: grid (ceil(cout_g / BN) 256, ceil(n_pix / 128), groups), group (256, 1).
    Reduction: per 16-deep K slice a dot product in the unit's order, the slices in order (tap by tap,
    channels ascending); then + bias + res in f32, the activation, one rounding to T.
    """
    a_stage = WG_BM * WG_BK
    b_stage = BN * WG_BK
    a_s = shared(T, STAGES * a_stage)
    b_s = shared(T, STAGES * b_stage)
    stage = shared(f32, 4 * 16 * STAGE_LD)  # one warpgroup's accumulators at a time
    rows_s = shared(i32, 3 * WG_BM)
    tid = thread_id(0)
    sg = simd_group_id()
    wg = sg // 4
    tm, tn = swizzled_tile()
    bm = tm * WG_BM
    bn = tn * BN
    g = group_id(2)
    red = taps * cin_g
    fill_rows(rows_s, bm, WG_BM, tid, WG_THREADS, n_pix, h_out * w_out, w_out, h, wd, sh, sw, ph, pw)
    barrier()
    acc0 = frag_acc(f32, 16, ACC_N)
    acc1 = frag_acc(f32, 16, ACC_N)
    ktiles = taps * ((cin_g + WG_BK - 1) // WG_BK)
    per_step = BN // ACC_N  # multiplies issued per K step
    depth = STAGES - 1 - PENDING  # K steps whose copies are on their way
    assert depth >= 1, "STAGES > PENDING + 1: a buffer for the step landing, one per multiply in flight"
    dy, dx, kx, c0, wk0 = 0, 0, 0, 0, 0  # the staging cursor (conv_mma.py)
    for st in static_range(depth):
        if st < ktiles:
            stage_conv_wg(x, w, a_s, b_s, rows_s, st * a_stage, st * b_stage, dy, dx, c0, wk0, bn, tid, BN, h, wd,
                          c_in, cin_g, cout_g, red, g * cin_g, g * cout_g)
            dy, dx, kx, c0, wk0 = advance(dy, dx, kx, c0, wk0, WG_BK, cin_g, kw, dh, dw)
        copy_async_commit()
    for kt in range(ktiles):
        # As gemm_wg: step kt has landed for everyone after the barrier (which also fences it for the matrix
        # unit), and step kt-1-PENDING's multiplies have retired, so its buffer takes step kt+depth.
        copy_async_wait(depth - 1)
        barrier()
        ahead = kt + depth
        if ahead < ktiles:
            slot = ahead % STAGES
            stage_conv_wg(x, w, a_s, b_s, rows_s, slot * a_stage, slot * b_stage, dy, dx, c0, wk0, bn, tid, BN, h,
                          wd, c_in, cin_g, cout_g, red, g * cin_g, g * cout_g)
            dy, dx, kx, c0, wk0 = advance(dy, dx, kx, c0, wk0, WG_BK, cin_g, kw, dh, dw)
        copy_async_commit()
        a_tile = (kt % STAGES) * a_stage + wg * BLOCK
        b_base = (kt % STAGES) * b_stage
        if BN == 256:
            acc1 = mma_wg(a_s, a_tile, b_s, b_base + ACC_N * WG_BK, acc1, k=WG_BK, b_major="k",
                          pending=min(7, PENDING * per_step + 1))
        acc0 = mma_wg(a_s, a_tile, b_s, b_base, acc0, k=WG_BK, b_major="k", pending=PENDING * per_step)
    if ktiles > 0:
        # Only after a multiply: on the path that skips the K loop, NVRTC re-zeroes the accumulator registers,
        # and a wait there makes ptxas serialise every wgmma of the kernel (its note C7515).
        mma_wg_wait(0)
    copy_async_wait()  # only empty groups remain; leave none in flight
    row0 = bm + wg * 64 + (sg % 4) * 16
    hw_out = h_out * w_out
    coff = g * cout_g
    for turn in static_range(2):
        store_acc_conv(y, bias, res, stage, row0, bn, acc0, wg == turn, n_pix, cout_g, c_out, coff, hw_out, nchw,
                       has_bias, has_res, ACT)
        if BN == 256:
            store_acc_conv(y, bias, res, stage, row0, bn + ACC_N, acc1, wg == turn, n_pix, cout_g, c_out, coff,
                           hw_out, nchw, has_bias, has_res, ACT)


#: The H200 default: 128 x 128 tiles (most of issue 19's shapes have at most a few hundred output channels),
#: 4 stages, one K step's multiplies left running.
WG_CONV_DEFAULT = {"BN": 128, "STAGES": 4, "PENDING": 1}


def conv_wg_shared_bytes(binding: dict[str, Any]) -> int:
    """Shared memory one group of :data:`conv_wg` declares with ``binding`` (ring, staging, pixel table)."""
    return binding["STAGES"] * (WG_BM + binding["BN"]) * WG_BK * 2 + 4 * 16 * STAGE_LD * 4 + 3 * WG_BM * 4


def conv_wg_config(cout_g: int, tiles: int) -> dict[str, Any]:
    """The :data:`conv_wg` configuration: 128 x 256 tiles where a group has more than 128 output channels and
    the 128 x 128 tiles (``tiles``) are plenty, else 128 x 128."""
    return {**WG_CONV_DEFAULT, "BN": 256, "STAGES": 4} if cout_g > 128 and tiles >= WG_WIDE_FROM else WG_CONV_DEFAULT


#: 128 x 128 tiles from which conv_wg takes 128 x 256 ones (when a group has more than 128 output channels): on
#: the H200 256 won at 768 and 1024 tiles (UNet 320, conv1d 512), 128 at 98 and 52 (ResNet 256 at 14², 512 at
#: 7²), and they tied at 282 (scripts/device/conv_tune.py, BENCHMARKS.md 2026-12-03).
WG_WIDE_FROM = 512


def conv_wg_grid(binding: dict[str, Any], n_pix: int, cout_g: int,
                 groups: int) -> tuple[tuple[int, int, int], tuple[int, int]] | None:
    """(grid, group) of :data:`conv_wg`, or None when the pixel tiles or the groups exceed a grid axis."""
    tiles = _host.ceil_div(n_pix, WG_BM)
    if tiles > MAX_GROUPS or groups > MAX_GROUPS:
        return None
    return (_host.ceil_div(cout_g, binding["BN"]) * WG_THREADS, tiles, groups), (WG_THREADS, 1)
