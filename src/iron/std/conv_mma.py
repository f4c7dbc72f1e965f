"""Dense convolution on the matrix units: an implicit GEMM over channels-last activations.

The convolution is the product out[p, co] = sum_r A[p, r] W[co, r] with p an output pixel (all images
flattened), co an output channel of the group and r = (tap (kh, kw), input channel): K is ordered tap by
channel, so W is the weight as (C_out, KH * KW * C_in/groups), which a channels-last weight (C_out, KH, KW,
C_in/groups) already is.  A is never written out: each K step gathers its tile straight from x (N, H, W,
C_in) with 16-byte asynchronous copies, eight channels of one tap and one pixel each, zero-filled where the
tap falls in the padding or past the channels.  A K step never spans two taps (a tap's channels take
ceil(C_in/groups / BK) steps), so the step walks (tap, channel block) with a cursor and no division; each
output pixel's image, input row and input column are computed once per tile into a shared table.

Everything else is gemm.py's matrix kernel: the warp tiles of fragments, the ring of ``STAGES`` shared
buffers, the block swizzle, and an epilogue through shared staging that adds the bias and a residual,
applies the activation, rounds once to T and stores the pixel's channels (NHWC) or a channel's pixels
(NCHW: the index map writes PyTorch's layout straight, 16 bytes at a time where the image allows).
Grouped convolution is the third grid axis.  Host function: :func:`iron.std.conv.conv2d` (and conv1d), which
picks this kernel for f16/bf16 with C_in/groups a multiple of 8 (on Hopper conv_wg.py's, past 64 output
channels a group).  Design and bounds: docs/std/conv.md.
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.lang import (barrier, cast, copy_async, copy_async_commit, copy_async_wait, frag_store, group_id, lane_id,
                       local, shared, simd_group_id, simd_size, static_range, thread_id, u32, vec)
from iron.jit.device import DeviceTraits

from . import _host
from .gemm import (ACTIVATIONS, AMD, APPLE, FRAGS, PAD, SM80_4W, WARP_GRIDS, WARP_TILES, acc_tile, activate, block_tile,
                   config_key, frag_dims, fragment_config, grid_dims, load_chunk, portable_small, store_eight,
                   swizzled_tile, warp_tile_step)

#: A row coordinate no bounds check accepts: the table entry of a pixel past the last one.
FAR = -(1 << 29)
#: Grid axis 1 holds the pixel tiles and axis 2 the groups: at most this many each (Vulkan's minimum).
MAX_GROUPS = 65535

#: CUDA mma.sync (m16n8k16), tuned on the H200 with scripts/device/conv_tune.py: a 128 x 128 block tile of four
#: 64 x 64 warp tiles, K steps of 32 in a ring of 4 (80 KiB).
CONV_SM80 = {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "4x8", "BK": 32, "STAGES": 4, "THREADS": 128}
#: Output channels of a group at most 64: a 128 x 64 block tile of four 64 x 32 warp tiles.
CONV_SM80_N64 = {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "4x4", "BK": 32, "STAGES": 4, "THREADS": 128}
#: Fewer 128 x 128 tiles than this take CONV_SM80_N64 (on the H200 it won below ~600 tiles and lost above
#: ~750: scripts/device/conv_tune.py, BENCHMARKS.md 2026-12-03): about 2.5 waves of two groups per SM.
WIDE_TILES_FROM = 640
#: scripts/device/conv_tune.py's candidates beside those two.
CONV_TUNING = ({**CONV_SM80, "BK": 64, "STAGES": 3}, {**CONV_SM80, "STAGES": 3},
               {**CONV_SM80, "WARPS": "4x2", "THREADS": 256, "STAGES": 3},
               {**CONV_SM80, "WARPS": "2x4", "THREADS": 256, "STAGES": 3}, {**CONV_SM80_N64, "STAGES": 3})


def _conv_configs() -> list[dict[str, Any]]:
    """Every configuration :func:`conv_config` chooses (at the subgroup widths Iron runs) and the tuning ones."""
    out = [CONV_SM80, CONV_SM80_N64, *CONV_TUNING]
    for threads in (128, 256):
        out += [{**SM80_4W, "THREADS": threads}, {**AMD, "THREADS": threads}]
    out.append({**APPLE, "THREADS": 128})
    out += [portable_small(lanes) for lanes in (8, 16, 32)]
    return out


CONV_CONFIGS = tuple(_conv_configs())
_CONV_KEYS = frozenset(map(config_key, CONV_CONFIGS))


def conv_chunks(v: dict[str, Any]) -> tuple[float, float]:
    """16-byte chunks of the A and of the B tile each thread copies per K step (B is (C_out, K): BN x BK)."""
    bm, bn = block_tile(v)
    return bm * v["BK"] / 8 / v["THREADS"], bn * v["BK"] / 8 / v["THREADS"]


def conv_config_listed(v: dict[str, Any]) -> bool:
    """the configuration is one of CONV_CONFIGS (what the host, the suite and conv_tune.py run)"""
    return config_key(v) in _CONV_KEYS


def conv_tiles_split(v: dict[str, Any]) -> bool:
    """every thread copies 1 to 8 whole 16-byte chunks of each tile, and K steps hold whole fragments"""
    fk = 8 if v["FRAG"] == "8x8x8" else 16
    return v["BK"] % fk == 0 and all(c == int(c) and 1 <= c <= 8 for c in conv_chunks(v))


@func
def fill_rows(rows_s, bm, bm_size, tid, threads, n_pix, hw_out, w_out, h, wd, sh, sw, ph, pw):
    """The tile's pixel table: rows_s[3 r ..] = (the pixel index of input (ih0, iw0) in x, ih0, iw0) for output
    pixel bm + r, where (ih0, iw0) is its window's top-left corner; ih0 = FAR past the last pixel."""
    for r in range(tid, bm_size, threads):
        p = bm + r
        img = p // hw_out
        q = p - img * hw_out
        oh = q // w_out
        ih0 = oh * sh - ph
        iw0 = (q - oh * w_out) * sw - pw
        rows_s[3 * r] = (img * h + ih0) * wd + iw0
        rows_s[3 * r + 1] = ih0 if p < n_pix else FAR
        rows_s[3 * r + 2] = iw0


@func
def stage_conv(x, w, a_s, b_s, rows_s, a_at, b_at, dy, dx, c0, wk0, bn, tid, threads, a_chunks, b_chunks, cpr, lda,
               h, wd, c_in, cin_g, cout_g, red, xoff, wrow0):
    """Start copying one K step: channels c0 .. c0 + 8 cpr - 1 of tap (dy, dx) (its offsets in input rows and
    columns) for the tile's pixels into a_s[a_at ..], and the same columns (wk0 + c0 ..) of W's rows bn .. for
    b_s[b_at ..].  Chunks outside the image, the channels or the output channels are zeros."""
    shift = dy * wd + dx
    for ch in static_range(a_chunks):
        q = tid + ch * threads
        r = q // cpr
        ci = c0 + (q % cpr) * 8
        ok = u32(rows_s[3 * r + 1] + dy) < u32(h) and u32(rows_s[3 * r + 2] + dx) < u32(wd) and ci < cin_g
        copy_async(a_s, a_at + r * lda + (q % cpr) * 8, x, (rows_s[3 * r] + shift) * c_in + xoff + ci, 8, ok)
    for ch in static_range(b_chunks):
        q = tid + ch * threads
        r = q // cpr
        ci = c0 + (q % cpr) * 8
        copy_async(b_s, b_at + r * lda + (q % cpr) * 8, w, (wrow0 + bn + r) * red + wk0 + ci, 8,
                   bn + r < cout_g and ci < cin_g)


@func
def store_nhwc(y, bias, res, stage, at, p, co, n_pix, cout_g, c_out, coff, has_bias, has_res, act):
    """Output channels co .. co+7 of pixel p from 8 staged f32 sums: + bias + residual, activation, one rounding,
    one 16-byte store (element by element on the channel tail)."""
    if p < n_pix and co < cout_g:
        lo = stage.load(at, width=4)
        hi = stage.load(at + 4, width=4)
        v = vec(lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3])
        whole = cout_g % 8 == 0 and co + 8 <= cout_g
        if has_bias != 0:
            v = v + f32(load_chunk(bias, 0, 0, coff + co, 1, coff + cout_g, whole, 8))
        if has_res != 0:
            v = v + f32(load_chunk(res, c_out, p, coff + co, n_pix, coff + cout_g, whole, 8))
        store_eight(y, p * c_out + coff + co, cast(activate(v, act), y.dtype), whole, cout_g - co)


@func
def store_nchw(y, bias, res, stage, at, ld, p0, co, n_pix, cout_g, c_out, coff, hw_out, has_bias, has_res, act):
    """Pixels p0 .. p0+7 of output channel co from staged f32 sums (``ld`` apart): + bias + residual, activation,
    one rounding; one 16-byte store when the 8 pixels are whole and 16-byte aligned in one image (H_out W_out
    a multiple of 8; p0 is), else element by element."""
    if p0 < n_pix and co < cout_g:
        b = 0.0
        if has_bias != 0:
            b = f32(bias[coff + co])
        part = local(f32, 8)
        for e in static_range(8):
            part[e] = stage[at + e * ld] + b
        if hw_out % 8 == 0 and p0 + 8 <= n_pix:
            img = p0 // hw_out
            at_y = (img * c_out + coff + co) * hw_out + p0 - img * hw_out
            v = vec(part[0], part[1], part[2], part[3], part[4], part[5], part[6], part[7])
            if has_res != 0:
                v = v + f32(res.load(at_y, width=8))
            y.store(at_y, cast(activate(v, act), y.dtype))
        else:
            for e in static_range(8):
                p = p0 + e
                if p < n_pix:
                    img = p // hw_out
                    at_y = (img * c_out + coff + co) * hw_out + p - img * hw_out
                    s = part[e]
                    if has_res != 0:
                        s = s + f32(res[at_y])
                    y[at_y] = cast(activate(s, act), y.dtype)


@func
def store_conv_row(y, bias, res, stage, row0, col0, c0, c1, c2, c3, c4, c5, c6, c7, fm, fn, cols, computes, n_pix,
                   cout_g, c_out, coff, hw_out, nchw, has_bias, has_res, act):
    """Write one row of a warp tile's fragments (pixels row0.., channels col0 + j fn, j < cols) through staging,
    two fragments at a time (fm x 2fn f32): NHWC lanes take 8 channels of a pixel, NCHW lanes 8 pixels of a
    channel.  ``computes``: this subgroup owns a warp tile (the others only keep the barriers company)."""
    frags = (c0, c1, c2, c3, c4, c5, c6, c7)
    ld = 2 * fn + 4
    sbase = simd_group_id() * fm * ld
    for p in static_range(cols // 2):
        if computes:
            frag_store(stage, sbase, ld, frags[2 * p])
            frag_store(stage, sbase + fn, ld, frags[2 * p + 1])
        barrier()
        if computes:
            store_tile(y, bias, res, stage, sbase, ld, fm, 2 * fn, row0, col0 + p * 2 * fn, n_pix, cout_g, c_out, coff,
                       hw_out, nchw, has_bias, has_res, act)
        barrier()


@func
def store_tile(y, bias, res, stage, sbase, ld, rows, cols, row0, col0, n_pix, cout_g, c_out, coff, hw_out, nchw,
               has_bias, has_res, act):
    """A subgroup's staged rows x cols f32 tile (stage[sbase ..], rows ``ld`` apart: pixels row0.., channels
    col0..) to y, its lanes taking 8 channels of a pixel (NHWC) or 8 pixels of a channel (NCHW) at a time."""
    if nchw != 0:
        for task in range(lane_id(), cols * (rows // 8), simd_size()):
            c = task % cols
            rb = (task // cols) * 8
            store_nchw(y, bias, res, stage, sbase + rb * ld + c, ld, row0 + rb, col0 + c, n_pix, cout_g, c_out, coff,
                       hw_out, has_bias, has_res, act)
    else:
        for task in range(lane_id(), rows * (cols // 8), simd_size()):
            r = task // (cols // 8)
            c = (task % (cols // 8)) * 8
            store_nhwc(y, bias, res, stage, sbase + r * ld + c, row0 + r, col0 + c, n_pix, cout_g, c_out, coff,
                       has_bias, has_res, act)


@kernel(variants(T=[f16, bf16], FRAG=list(FRAGS), WARPS=list(WARP_GRIDS), WT=list(WARP_TILES), BK=[32, 16, 64],
                 THREADS=[128, 256, 64, 32], STAGES=[2, 3, 4], ACT=list(ACTIVATIONS),
                 where=[conv_config_listed, conv_tiles_split]))
def conv_mma(x: In[T], w: In[T], bias: In[T], res: In[T], y: Tensor[T], c_in: int, h: int, wd: int, c_out: int,
             kw: int, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int, h_out: int, w_out: int, n_pix: int,
             taps: int, cin_g: int, cout_g: int, nchw: int, has_bias: int, has_res: int):
    """y = act(conv2d(x, w) + bias + res) as an implicit GEMM on the matrix units (docs/std/conv.md).

    x (N, H, W, C_in) channels-last; w (C_out, KH, KW, C_in/groups), groups = C_in / cin_g = C_out / cout_g
    (grid axis 2 is the group); y and res (N, H_out, W_out, C_out) when nchw == 0, (N, C_out, H_out, W_out)
    when nchw != 0; bias (C_out) read when has_bias != 0, res when has_res != 0.  taps = KH KW; zero padding
    (ph, pw) before (the padding after only makes H_out, W_out larger), strides (sh, sw), dilations (dh, dw);
    n_pix = N H_out W_out.  Needs cin_g % 8 == 0 and every array 16-byte aligned (whole 16-byte chunks
    of channels), every array's size and (H W + padding) C_in < 2**31.  Launch: grid (ceil(cout_g / BN)
    THREADS, ceil(n_pix / BM), groups), group (THREADS, 1).  Products exact, sums in f32 (per fk step a
    dot product in the unit's order, the steps in order: tap by tap, channels ascending), then + bias +
    res in f32, the activation, one rounding to T.  Padding contributes exact zeros; NaN/Inf propagate.
    """
    fm, fn, fk = frag_dims(FRAG)
    wgm, wgn = grid_dims(WARPS)
    frows, fcols = grid_dims(WT)
    wtm = frows * fm
    wtn = fcols * fn
    bm_size = wgm * wtm
    bn_size = wgn * wtn
    lda = BK + PAD  # both tiles [stage][row][k]: A by pixel, B by output channel
    a_stage = bm_size * lda
    b_stage = bn_size * lda
    a_s = shared(T, STAGES * a_stage)
    b_s = shared(T, STAGES * b_stage)
    stage = shared(f32, wgm * wgn * fm * (2 * fn + 4))
    rows_s = shared(i32, 3 * bm_size)
    cpr = BK // 8
    a_chunks = bm_size * cpr // THREADS
    b_chunks = bn_size * cpr // THREADS
    assert a_chunks * THREADS == bm_size * cpr and b_chunks * THREADS == bn_size * cpr, \
        "every thread copies whole 16-byte chunks of both tiles"
    assert 1 <= a_chunks <= 8 and 1 <= b_chunks <= 8 and BK % fk == 0, \
        "1 to 8 chunks of each tile per thread, K steps of whole fragments"
    tid = thread_id(0)
    sg = simd_group_id()
    computes = sg < wgm * wgn
    wm = sg // wgn
    wn = sg % wgn
    tm, tn = swizzled_tile()
    bm = tm * bm_size
    bn = tn * bn_size
    g = group_id(2)
    red = taps * cin_g
    fill_rows(rows_s, bm, bm_size, tid, THREADS, n_pix, h_out * w_out, w_out, h, wd, sh, sw, ph, pw)
    barrier()
    (c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13,
     c14, c15, c16, c17, c20, c21, c22, c23, c24, c25, c26, c27,
     c30, c31, c32, c33, c34, c35, c36, c37) = acc_tile(fm, fn)
    ktiles = taps * ((cin_g + BK - 1) // BK)
    # The staging cursor: the next K step's tap (its row and column offsets dy, dx and column kx), channel block
    # c0 and first column of W (wk0).  Steps are staged in order, so the cursor only advances.
    dy, dx, kx, c0, wk0 = 0, 0, 0, 0, 0
    # A pipeline STAGES deep: K steps kt+1 .. kt+STAGES-1 are on their way while step kt multiplies.
    for st in static_range(STAGES - 1):
        if st < ktiles:
            stage_conv(x, w, a_s, b_s, rows_s, st * a_stage, st * b_stage, dy, dx, c0, wk0, bn, tid, THREADS,
                       a_chunks, b_chunks, cpr, lda, h, wd, c_in, cin_g, cout_g, red, g * cin_g, g * cout_g)
            dy, dx, kx, c0, wk0 = advance(dy, dx, kx, c0, wk0, BK, cin_g, kw, dh, dw)
        copy_async_commit()
    for kt in range(ktiles):
        # This thread's copies of step kt have landed; after the barrier everyone's have, and everyone is done
        # with step kt-1's buffer, which step kt+STAGES-1 now refills.
        copy_async_wait(STAGES - 2)
        barrier()
        ahead = kt + STAGES - 1
        if ahead < ktiles:
            slot = ahead % STAGES
            stage_conv(x, w, a_s, b_s, rows_s, slot * a_stage, slot * b_stage, dy, dx, c0, wk0, bn, tid, THREADS,
                       a_chunks, b_chunks, cpr, lda, h, wd, c_in, cin_g, cout_g, red, g * cin_g, g * cout_g)
            dy, dx, kx, c0, wk0 = advance(dy, dx, kx, c0, wk0, BK, cin_g, kw, dh, dw)
        copy_async_commit()  # every iteration commits one group (maybe empty): the wait above counts on it
        if computes:
            (c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13, c14, c15,
             c16, c17, c20, c21, c22, c23, c24, c25, c26, c27, c30, c31, c32, c33, c34, c35, c36, c37) = warp_tile_step(
                a_s, b_s, (kt % STAGES) * a_stage + wm * wtm * lda, (kt % STAGES) * b_stage, lda, lda, fm, fn, fk,
                frows, fcols, BK, True, wn * wtn, c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13, c14,
                c15, c16, c17, c20, c21, c22, c23, c24, c25, c26, c27, c30, c31, c32, c33, c34, c35, c36, c37)
    copy_async_wait()  # only empty groups remain; leave none in flight
    row0 = bm + wm * wtm
    col0 = bn + wn * wtn
    hw_out = h_out * w_out
    coff = g * cout_g
    store_conv_row(y, bias, res, stage, row0, col0, c00, c01, c02, c03, c04, c05, c06, c07, fm, fn, fcols, computes,
                   n_pix, cout_g, c_out, coff, hw_out, nchw, has_bias, has_res, ACT)
    if frows > 1:
        store_conv_row(y, bias, res, stage, row0 + fm, col0, c10, c11, c12, c13, c14, c15, c16, c17, fm, fn, fcols,
                       computes, n_pix, cout_g, c_out, coff, hw_out, nchw, has_bias, has_res, ACT)
    if frows > 2:
        store_conv_row(y, bias, res, stage, row0 + 2 * fm, col0, c20, c21, c22, c23, c24, c25, c26, c27, fm, fn, fcols,
                       computes, n_pix, cout_g, c_out, coff, hw_out, nchw, has_bias, has_res, ACT)
        store_conv_row(y, bias, res, stage, row0 + 3 * fm, col0, c30, c31, c32, c33, c34, c35, c36, c37, fm, fn, fcols,
                       computes, n_pix, cout_g, c_out, coff, hw_out, nchw, has_bias, has_res, ACT)


@func
def advance(dy, dx, kx, c0, wk0, bk, cin_g, kw, dh, dw):
    """The staging cursor's next K step: the next channel block of the tap, else the tap's successor (row-major)."""
    ny, nx, nkx, nc0, nwk0 = dy, dx, kx, c0 + bk, wk0
    if nc0 >= cin_g:
        nc0 = 0
        nwk0 = wk0 + cin_g
        nkx = kx + 1
        nx = dx + dw
        if nkx == kw:
            nkx = 0
            nx = 0
            ny = dy + dh
    return ny, nx, nkx, nc0, nwk0


# ---------------------------------------------------------------- configurations and the launch

def conv_config(traits: DeviceTraits, dtype: Any, cout_g: int, tiles: int = 0) -> dict[str, Any] | None:
    """The :data:`conv_mma` configuration for a device, or None where its matrix units do not serve ``dtype``
    (gemm's :func:`~iron.std.gemm.fragment_config` decides).  On CUDA's mma.sync with room for the ring, the
    tuned :data:`CONV_SM80`, or its 64-channel-wide tile when a group has at most 64 output channels or when
    the 128 x 128 tiles would be fewer than :data:`WIDE_TILES_FROM` (``tiles``: 128-pixel tiles x 128-channel
    tiles x groups), where twice the groups fill the device better."""
    base = fragment_config(traits, dtype, True)
    if base is None:
        return None
    if base["BK"] == 64 and not traits.interpreted:  # gemm's SM80: CUDA mma.sync with the opt-in shared memory
        return CONV_SM80_N64 if cout_g <= 64 or tiles < WIDE_TILES_FROM else CONV_SM80
    return base


def conv_tiles(n_pix: int, cout_g: int, groups: int) -> int:
    """The 128 x 128 output tiles of a convolution (:func:`conv_config`'s ``tiles``)."""
    return _host.ceil_div(n_pix, 128) * _host.ceil_div(cout_g, 128) * groups


def conv_shared_bytes(binding: dict[str, Any], itemsize: int) -> int:
    """Shared memory one group of :data:`conv_mma` declares with ``binding`` (ring, staging, pixel table)."""
    fm, fn, _ = {"16x8x16": (16, 8, 16), "16x16x16": (16, 16, 16), "8x8x8": (8, 8, 8)}[binding["FRAG"]]
    bm, bn = block_tile(binding)
    wgm, wgn = (int(v) for v in binding["WARPS"].split("x"))
    ring = binding.get("STAGES", 2) * (bm + bn) * (binding["BK"] + PAD) * itemsize
    return ring + wgm * wgn * fm * (2 * fn + 4) * 4 + 3 * bm * 4


def conv_grid(binding: dict[str, Any], n_pix: int, cout_g: int,
              groups: int) -> tuple[tuple[int, int, int], tuple[int, int]] | None:
    """(grid, group) of :data:`conv_mma`, or None when the pixel tiles or the groups exceed a grid axis."""
    bm, bn = block_tile(binding)
    tiles = _host.ceil_div(n_pix, bm)
    if tiles > MAX_GROUPS or groups > MAX_GROUPS:
        return None
    return (_host.ceil_div(cout_g, bn) * binding["THREADS"], tiles, groups), (binding["THREADS"], 1)


__all__ = ["CONV_CONFIGS", "CONV_SM80", "CONV_SM80_N64", "conv_config", "conv_grid", "conv_mma", "conv_shared_bytes",
           "conv_tiles"]
