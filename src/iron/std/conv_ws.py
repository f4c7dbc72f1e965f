"""Dense convolution with warp roles on Hopper: the implicit GEMM of conv_mma.py on gemm_ws.py's pipeline.

M = output pixels, N = output channels, K = taps x input channels (tap by channel), as conv_mma.py; the block
tile is 128 pixels x BN channels, fed by tile copies (TMA) through a ring of STAGES shared buffers: a producer
warpgroup at 40 registers, two consumer warpgroups at 232 on ``mma_wg``, full / empty barriers, no block
barrier in the main loop (gemm_ws.py's structure, whose helpers it shares).

The activations need no gather: each consumer's 64 pixels are a *patch* of PH x PW output pixels of one image
(PH PW = 64), and at stride 1 the input pixels that tap (ky, kx) multiplies with them are the same patch moved
by (ky dh - ph, kx dw - pw), one box of the (N, H, W, C_in) tensor: a tile copy with outer axes
(``copy_tile`` of rank 4), whose hardware zero-fills what lies outside the image (the padding) and past the
channels.  The weight (C_out, KH, KW, C_in) gives each step's BN x 64 panel the same way, zeros past the
channels (not the next tap's weights).  Patches tile every image (those reaching past its edge store only what
is inside it); conv1d is the case H = 1, PW = 64.  At stride 2 along W the input is seen as (N, H, W / 2, 2,
C_in): a patch row's input pixels for one tap are every other column from one parity, a box of rank 5, one per
patch row (any stride along H); BOX = "rows" copies a box per patch row at stride 1 too.  The epilogue stages
the accumulators in f32 and adds bias and residual, applies the activation and rounds once (conv_mma.py's
``store_nhwc``), in channels-last order, or NCHW's (8 pixels of a patch row per lane).

Where the tiles are too few to fill the machine, ``SPLIT`` cuts the K steps into ranges, each a work item of its
own that stores its f32 sums unrounded; :data:`conv_ws_finish`, a plain kernel, adds the ranges in order and
applies the epilogue (docs/std/conv.md, "K in ranges").

Only CUDA sm_90 runs ``mma_wg`` and the tile copies in hardware; the interpreter runs it too (its tests run on
the CPU), and the host (``conv.conv2d``) takes it on Hopper at stride 1, or 2 along an even W, for one group
or for groups of multiples of 64 channels (ResNeXt's, packed by conv.py), with the option ``conv_ws`` on (its
default).
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, kernel, variants
from iron.lang import (async_barriers, barrier_arrive, cast, copy_tile, frag_acc, frag_store, group_id, lane_id, local,
                       mma_wg, mma_wg_wait, num_groups, program_id, role_barrier, shared, simd_group_id, simd_size,
                       static_range, thread_id, vec, warp_roles)

from . import _host
from ._plans import Tuning
from .conv_mma import store_nhwc
from .gemm import ACTIVATIONS, activate, load_chunk, store_eight
from .gemm_wg import WG_SHARED_LIMIT
from .gemm_ws import (BLOCK, RELEASES, WS_BK, WS_BM, WS_REGISTERS, WS_ROLES, WS_SMS, WS_THREADS, free_slot,
                      full_slot, release_behind, release_last, tile_at)

__all__ = ["PATCH_WIDTHS", "SPLITS", "conv_ws", "conv_ws_config", "conv_ws_finish",
           "conv_ws_finish_geometry", "conv_ws_geometry", "conv_ws_part_shape", "conv_ws_runs", "conv_ws_shared_bytes",
           "patch_width"]

#: A patch's widths in output pixels (its height is 64 / width): 8 x 8 up to 1 x 64 (conv1d's).
PATCH_WIDTHS = (8, 16, 32, 64)
#: K ranges a tile's sums may be split into (conv_ws_finish adds them): more groups where the tiles alone leave
#: multiprocessors idle (ResNet's 512 channels at 7 x 7: 64 tiles of 128 x 128 for 132).
SPLITS = (1, 2, 3, 4)
#: The host's K split (:func:`conv_ws_config`): where 128-wide tiles fill at most half a wave, ``split`` 1 takes
#: 128-wide tiles in as many K ranges as still make one wave, each at least ``split_steps`` K steps long; 0 keeps
#: 64-wide tiles whole.
WS_PLAN: dict[str, int] = Tuning({"split": 0, "split_steps": 8})


def conv_ws_shared_bytes(binding: dict[str, Any]) -> int:
    """Shared memory one group of :data:`conv_ws` declares with ``binding``: the ring, the f32 staging rows of
    :func:`staging_subgroups` subgroups at a time, the barriers."""
    ring = binding["STAGES"] * (WS_BM + binding["BN"]) * WS_BK * 2
    return ring + staging_subgroups(binding) * 16 * (binding["BN"] + 4) * 4 + 16 * binding["STAGES"]


def staging_subgroups(binding: dict[str, Any]) -> int:
    """Consumer subgroups that stage their sums at once: a warpgroup's four where the ring leaves room, else
    two."""
    ring = binding["STAGES"] * (WS_BM + binding["BN"]) * WS_BK * 2
    return 4 if ring + 4 * 16 * (binding["BN"] + 4) * 4 + 16 * binding["STAGES"] <= WG_SHARED_LIMIT else 2


def ws_conv_fits(v: dict[str, Any]) -> bool:
    """The group's shared memory fits the devices that run ``mma_wg`` (sm_90's opt-in limit, 227 KiB)"""
    return conv_ws_shared_bytes(v) <= WG_SHARED_LIMIT


def ws_patch_box_at_stride_one(v: dict[str, Any]) -> bool:
    """one box per patch only at stride 1 (at stride 2 along W, a box per patch row)"""
    return v["BOX"] == "rows" or v["S"] == 1


def ws_split_plain(v: dict[str, Any]) -> bool:
    """a K split leaves the activation to conv_ws_finish (ACT "none")"""
    return v.get("SPLIT", 1) == 1 or v["ACT"] == "none"


@func
def k_range(tile, tiles, ktiles, splits):
    """(output tile, first K step, end) of work item ``tile``: items k tiles .. (k + 1) tiles - 1 take range k of
    ``splits`` even ranges of the ``ktiles`` K steps (the whole of them at one split)."""
    t = tile
    k_lo = 0
    k_hi = ktiles
    if splits > 1:
        k = tile // tiles
        t = tile - k * tiles
        k_lo = k * ktiles // splits
        k_hi = (k + 1) * ktiles // splits
    return t, k_lo, k_hi


@func
def patch_at(p, down, across, ph_, pw_):
    """(image, first output row, first output column) of patch ``p``: patches walk each image row by row
    (``across`` to a row of patches, ``down`` rows of them), images one after another."""
    per_image = down * across
    img = p // per_image
    rest = p - img * per_image
    return img, (rest // across) * ph_, (rest % across) * pw_


@func
def store_patch(y, bias, res, stage, sbase, ld, width, img, oh0, ow0, r0, col0, n, h_out, w_out, c_out, nchw,
                has_bias, has_res, act, mine, pw_):
    """Output channels col0 .. col0+width-1 of the patch's rows r0 .. r0+15 (pixel (oh0 + r / PW, ow0 + r % PW)
    of image ``img``) from one subgroup's staged f32 sums at stage[sbase ..] (rows ``ld`` apart), skipping pixels
    outside the image and channels past c_out (all of it unless ``mine``).  Channels-last: lanes take 8 channels
    of a pixel; NCHW (``nchw`` != 0): 8 pixels of a channel, consecutive in a patch row (PW >= 8), where w_out
    is a multiple of 8 (so the runs are 16-byte stores), else a pixel each, consecutive lanes along the row
    (unaligned 8-pixel runs were a store per element with the 32 lanes 32 channels apart: ResNet's 1 x 1
    256 -> 1024 at 14², NCHW, took 119.7 us on an H100 against 19.7 channels-last)."""
    n_pix = n * h_out * w_out
    if nchw != 0 and w_out % 8 != 0:  # rows whose 8-pixel runs are no 16-byte stores: a lane a pixel
        for task in range(lane_id(), width * 16, simd_size()):
            r = task % 16
            oh = oh0 + (r0 + r) // pw_
            ow = ow0 + (r0 + r) % pw_
            co = col0 + task // 16
            if mine and img < n and oh < h_out and ow < w_out and co < c_out:
                store_pixel_nchw(y, bias, res, stage[sbase + r * ld + task // 16], img, oh, ow, co, h_out, w_out,
                                 c_out, has_bias, has_res, act)
    elif nchw != 0:
        for task in range(lane_id(), width * 2, simd_size()):
            c = task % width
            rb = (task // width) * 8
            r = r0 + rb
            if mine and img < n and oh0 + r // pw_ < h_out and col0 + c < c_out:
                store_row_nchw(y, bias, res, stage, sbase + rb * ld + c, ld, img, oh0 + r // pw_, ow0 + r % pw_,
                               col0 + c, h_out, w_out, c_out, has_bias, has_res, act)
    else:
        chunks = width // 8
        for task in range(lane_id(), 16 * chunks, simd_size()):
            r = r0 + task // chunks
            oh = oh0 + r // pw_
            ow = ow0 + r % pw_
            col = col0 + (task % chunks) * 8
            if mine and img < n and oh < h_out and ow < w_out:
                store_nhwc(y, bias, res, stage, sbase + (task // chunks) * ld + (task % chunks) * 8,
                           (img * h_out + oh) * w_out + ow, col, n_pix, c_out, c_out, 0, has_bias, has_res, act)


@func
def store_sums(part, at, ld_part, stage, sbase, ld, width):
    """One subgroup's 16 rows of ``width`` staged f32 sums (stage[sbase ..], rows ``ld`` apart) to part[at ..]
    (rows ``ld_part`` apart), a 16-byte chunk a lane at a time: a K range's sums for conv_ws_finish, every pixel
    of the patch (those past the image too, which the finish never reads)."""
    chunks = width // 4
    for task in range(lane_id(), 16 * chunks, simd_size()):
        r = task // chunks
        c = (task - r * chunks) * 4
        part.store(at + r * ld_part + c, stage.load(sbase + r * ld + c, width=4))


@func
def store_pixel_nchw(y, bias, res, total, img, oh, ow, co, h_out, w_out, c_out, has_bias, has_res, act):
    """Pixel (oh, ow) of channel co of image img from its staged f32 sum: + bias + residual, activation, one
    rounding.  Lanes take consecutive pixels of a channel, so a subgroup's stores are runs of a patch row."""
    t = total
    if has_bias != 0:
        t = t + f32(bias[co])
    at_y = ((img * c_out + co) * h_out + oh) * w_out + ow
    if has_res != 0:
        t = t + f32(res[at_y])
    y[at_y] = cast(activate(t, act), y.dtype)


@func
def store_row_nchw(y, bias, res, stage, at, ld, img, oh, ow, co, h_out, w_out, c_out, has_bias, has_res, act):
    """Pixels (oh, ow .. ow+7) of channel co of image img from staged f32 sums (``ld`` apart): + bias +
    residual, activation, one rounding; one 16-byte store when all 8 lie inside the row and start 16-byte
    aligned, else element by element up to the row's end."""
    b = 0.0
    if has_bias != 0:
        b = f32(bias[co])
    part = local(f32, 8)
    for e in static_range(8):
        part[e] = stage[at + e * ld] + b
    at_y = ((img * c_out + co) * h_out + oh) * w_out + ow
    if ow + 8 <= w_out and at_y % 8 == 0:
        v = vec(part[0], part[1], part[2], part[3], part[4], part[5], part[6], part[7])
        if has_res != 0:
            v = v + f32(res.load(at_y, width=8))
        y.store(at_y, cast(activate(v, act), y.dtype))
    else:
        for e in static_range(8):
            if ow + e < w_out:
                t = part[e]
                if has_res != 0:
                    t = t + f32(res[at_y + e])
                y[at_y + e] = cast(activate(t, act), y.dtype)


@kernel(variants(T=[f16, bf16], BN=[128, 256, 64, 160, 192], STAGES=[4, 3, 5, 6], PW=list(PATCH_WIDTHS), S=[1, 2],
                 BOX=["patch", "rows"], ACT=list(ACTIVATIONS), SPLIT=list(SPLITS),
                 where=[ws_conv_fits, ws_patch_box_at_stride_one, ws_split_plain]))
def conv_ws(x: In[T], w: In[T], bias: In[T], res: In[T], y: Tensor[T], part: Tensor[f32], n: int, c_in: int, h: int,
            wd_s: int, c_out: int, kh: int, kw: int, sh: int, ph: int, pw: int, dh: int, dw: int, h_out: int,
            w_out: int, nchw: int, has_bias: int, has_res: int, cin_g: int):
    """y = act(conv2d(x, w) + bias + res) on warp roles and tile copies (docs/std/conv.md).

    x (n, h, wd_s S, c_in) channels-last; w (c_out, kh, kw, cin_g); y and res (n, h_out, w_out, c_out), or
    (n, c_out, h_out, w_out) when nchw != 0 (then PW >= 8); BOX "patch" copies a patch's input as one box
    (stride 1 only: sh is not read), "rows" as one box per patch row (input rows sh apart); bias
    (c_out) read when has_bias != 0, res when has_res != 0 (else one unread element each).  Groups of cin_g input
    channels (cin_g = c_in: one group; else cin_g a multiple of 64 and each group's c_out cin_g / c_in output
    channels a multiple of BN, so that a tile and a K step stay within one group); strides
    (1, 1) when S == 1, (sh, 2) when S == 2 (x's width then even: wd_s = W / 2, x seen as (n, h, wd_s, 2, c_in),
    one box per patch row); padding (ph, pw) before (after: h_out, w_out say it), dilation (dh, dw).  Needs
    c_in % 8 == 0 and every
    array 16-byte aligned (tile copies move rows of whole 16-byte chunks), every size < 2**31.  A group of 384
    threads (a producer warpgroup, two consumers) computes output tiles of two patches of 64 / PW x PW pixels
    by BN channels; launch: grid (G 384,) for any G >= 1, group (384,), subgroups of 32 lanes, group g taking
    tiles g, g + G, ...  Products exact, sums in f32 (per 16-deep K slice a dot product in the unit's order,
    the slices in order: tap by tap, channels ascending), then + bias + res in f32, the activation, one rounding
    to T.  Padding contributes exact zeros; NaN/Inf propagate.  SPLIT > 1 (ACT "none"): the K steps split into
    SPLIT even ranges (:func:`k_range`), work item k tiles + t being range k of tile t; each range's f32 sums go to
    part (SPLIT, 2 tiles_m, 64, tiles_n BN), row 64 q + r of a slice holding pixel r (r / PW, r % PW) of patch q,
    and y, bias, res are not touched: :data:`conv_ws_finish` adds the ranges in order and does the rest
    (``part`` is not read or written at SPLIT 1).
    """
    PH = 64 // PW
    a_stage = WS_BM * WS_BK
    b_stage = BN * WS_BK
    a_s = shared(T, STAGES * a_stage)
    b_s = shared(T, STAGES * b_stage)
    LD = BN + 4
    PER = 4 if STAGES * (WS_BM + BN) * WS_BK * 2 + 4 * 16 * LD * 4 + 16 * STAGES <= WG_SHARED_LIMIT else 2
    stage = shared(f32, PER * 16 * LD)
    full = async_barriers(STAGES, 1)
    empty = async_barriers(STAGES, RELEASES)
    role = warp_roles(WS_ROLES, registers=WS_REGISTERS)
    tid = thread_id(0)
    across = (w_out + PW - 1) // PW
    down = (h_out + PH - 1) // PH
    tiles_m = (n * down * across + 1) // 2
    tiles_n = (c_out + BN - 1) // BN
    chunks = (cin_g + WS_BK - 1) // WS_BK
    cout_g = c_out // (c_in // cin_g)
    taps = kh * kw
    ktiles = taps * chunks
    tiles = tiles_m * tiles_n
    step = 0  # K steps through the ring so far, over every tile of this group
    if role == 0:
        if tid == 0:
            for tile in range(group_id(0), tiles * SPLIT, num_groups(0)):
                ot, k_lo, k_hi = k_range(tile, tiles, ktiles, SPLIT)
                tm, tn = tile_at(ot, tiles_m, tiles_n)
                # The patches' places and the tap's counters are carried, not divided out per K step: this one
                # thread's instructions between copies bound the ring's refill rate (Nsight Compute: the
                # consumers waited on full slots half the time while the producer never waited on an empty one).
                img_a, oh_a, ow_a = patch_at(2 * tm, down, across, PH, PW)
                img_b, oh_b, ow_b = patch_at(2 * tm + 1, down, across, PH, PW)
                imgs, ohs, ows = [img_a, img_b], [oh_a, oh_b], [ow_a, ow_b]
                cg = (tn * BN) // cout_g * cin_g  # the tile's group's first input channel
                c0 = 0
                ky = 0
                kx = 0
                if SPLIT > 1:  # the range's first K step: tap k_lo / chunks, its chunk k_lo % chunks
                    tap = k_lo // chunks
                    c0 = (k_lo - tap * chunks) * WS_BK
                    ky = tap // kw
                    kx = tap - ky * kw
                for kt in range(k_lo, k_hi):
                    s = free_slot(empty, step, STAGES)
                    for j in static_range(2):
                        img, oh0, ow0 = imgs[j], ohs[j], ows[j]
                        if BOX == "patch":  # the patch moved by the tap: one box (stride 1)
                            copy_tile(a_s, s * a_stage + j * BLOCK, x, (n, h, wd_s, c_in),
                                      (img, oh0 + ky * dh - ph, ow0 + kx * dw - pw, cg + c0), (1, PH, PW, WS_BK), full,
                                      s)
                        elif S == 1:  # a box per patch row, input rows sh apart
                            for r in static_range(PH):
                                copy_tile(a_s, s * a_stage + j * BLOCK + r * PW * WS_BK, x, (n, h, wd_s, c_in),
                                          (img, (oh0 + r) * sh + ky * dh - ph, ow0 + kx * dw - pw, cg + c0),
                                          (1, 1, PW, WS_BK), full, s)
                        else:  # a box per patch row: input column 2 (ow0 + fx) + rx, parity rx
                            off = kx * dw - pw
                            rx = off & 1
                            for r in static_range(PH):
                                copy_tile(a_s, s * a_stage + j * BLOCK + r * PW * WS_BK, x, (n, h, wd_s, 2, c_in),
                                          (img, (oh0 + r) * sh + ky * dh - ph, ow0 + (off - rx) // 2, rx, cg + c0),
                                          (1, 1, PW, 1, WS_BK), full, s)
                    copy_tile(b_s, s * b_stage, w, (c_out, kh, kw, cin_g), (tn * BN, ky, kx, c0), (BN, 1, 1, WS_BK),
                              full, s)
                    barrier_arrive(full, s, bytes=(WS_BM + BN) * WS_BK * T.itemsize)
                    step += 1
                    c0 += WS_BK  # K runs tap by tap, channels ascending: the next chunk, else the next tap
                    if c0 >= cin_g:
                        c0 = 0
                        kx += 1
                        if kx == kw:
                            kx = 0
                            ky += 1
    else:
        wg = (tid - WS_ROLES[0]) // 128
        sg = simd_group_id()
        for tile in range(group_id(0), tiles * SPLIT, num_groups(0)):
            ot, k_lo, k_hi = k_range(tile, tiles, ktiles, SPLIT)
            tm, tn = tile_at(ot, tiles_m, tiles_n)
            acc = frag_acc(f32, 16, BN)
            for kt in range(k_hi - k_lo):
                s = full_slot(full, step, STAGES)
                acc = mma_wg(a_s, s * a_stage + wg * BLOCK, b_s, s * b_stage, acc, k=WS_BK, b_major="k", b_block=0,
                             pending=1)
                release_behind(empty, kt, step, STAGES)
                step += 1
            mma_wg_wait(0)
            release_last(empty, k_hi - k_lo, step, STAGES)
            turn = (sg - WS_ROLES[0] // 32) // PER
            sbase = (sg % PER) * 16 * LD
            if SPLIT > 1:  # this range's sums, for conv_ws_finish: staged, then out in 16-byte chunks
                cpad = tiles_n * BN
                row = ((tile // tiles) * tiles_m * 2 + 2 * tm + wg) * 64 + (sg % 4) * 16
                for t in static_range(8 // PER):
                    if turn == t:
                        frag_store(stage, sbase, LD, acc)
                    role_barrier()
                    if turn == t:
                        store_sums(part, row * cpad + tn * BN, cpad, stage, sbase, LD, BN)
                    role_barrier()
            else:
                img, oh0, ow0 = patch_at(2 * tm + wg, down, across, PH, PW)
                for t in static_range(8 // PER):
                    if turn == t:
                        frag_store(stage, sbase, LD, acc)
                    role_barrier()
                    store_patch(y, bias, res, stage, sbase, LD, BN, img, oh0, ow0, (sg % 4) * 16, tn * BN, n, h_out,
                                w_out, c_out, nchw, has_bias, has_res, ACT, turn == t, PW)
                    role_barrier()


@kernel(variants(T=[f16, bf16], ACT=list(ACTIVATIONS), SPLIT=list(SPLITS[1:])))
def conv_ws_finish(part: In[f32], bias: In[T], res: In[T], y: Tensor[T], n: int, h_out: int, w_out: int, c_out: int,
                   pw_: int, cpad: int, nchw: int, has_bias: int, has_res: int):
    """y = act(part's SPLIT ranges + bias + res): the end of a convolution whose K steps conv_ws split.

    part (SPLIT, P, 64, cpad) f32 (P: the patches rounded up to even): slice k holds range k's sums, its row
    64 q + r pixel (r / pw_, r % pw_) of patch q, patches of 64 / pw_ x pw_ pixels walking each image row by row,
    images in order (conv_ws's :func:`patch_at`); y and res (n, h_out, w_out, c_out), or (n, c_out, h_out, w_out)
    when nchw != 0; bias (c_out) read when has_bias != 0, res when has_res != 0 (else one unread element each).
    Sums in f32: the ranges in order, then + bias + res, the activation, one rounding to T.  Needs pw_ in
    PATCH_WIDTHS, c_out <= cpad, cpad % 8 == 0, every size < 2**31.  Launch: a thread per 8 channels of an
    output pixel, grid (n h_out w_out ceil(c_out / 8),) or more, any group; consecutive threads take consecutive
    channels of a pixel (NHWC) or one channel group's consecutive pixels (NCHW), so that stores run along y.
    """
    ph_ = 64 // pw_
    n_pix = n * h_out * w_out
    hw = h_out * w_out
    chunks = (c_out + 7) // 8
    i = program_id(0)
    if i < n_pix * chunks:
        p = i // chunks
        co = (i - p * chunks) * 8
        if nchw != 0:
            co = (i // n_pix) * 8
            p = i - (co // 8) * n_pix
        img = p // hw
        oh = (p - img * hw) // w_out
        ow = p - img * hw - oh * w_out
        across = (w_out + pw_ - 1) // pw_
        down = (h_out + ph_ - 1) // ph_
        row = ((img * down + oh // ph_) * across + ow // pw_) * 64 + (oh % ph_) * pw_ + ow % pw_
        rows = (n * down * across + 1) // 2 * 128
        lo = part.load(row * cpad + co, width=4)
        hi = part.load(row * cpad + co + 4, width=4)
        for k in static_range(1, SPLIT):
            lo = lo + part.load((k * rows + row) * cpad + co, width=4)
            hi = hi + part.load((k * rows + row) * cpad + co + 4, width=4)
        v = vec(lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3])
        whole = c_out % 8 == 0 and co + 8 <= c_out
        if has_bias != 0:
            v = v + f32(load_chunk(bias, 0, 0, co, 1, c_out, whole, 8))
        if nchw != 0:  # 8 planes, this pixel in each
            at_y = (img * c_out + co) * hw + p - img * hw
            for e in static_range(8):
                if co + e < c_out:
                    t = v[e]
                    if has_res != 0:
                        t = t + f32(res[at_y + e * hw])
                    y[at_y + e * hw] = cast(activate(t, ACT), y.dtype)
        else:
            if has_res != 0:
                v = v + f32(load_chunk(res, c_out, p, co, n_pix, c_out, whole, 8))
            store_eight(y, p * c_out + co, cast(activate(v, ACT), y.dtype), whole, c_out - co)


def patch_width(h_out: int, w_out: int) -> int:
    """The patch width (:data:`PATCH_WIDTHS`) whose patches cover an h_out x w_out image with the fewest pixels
    past its edges, the widest of those (longer rows per box); conv1d (h_out = 1) takes 64."""
    def covered(pw_: int) -> int:
        return _host.ceil_div(w_out, pw_) * pw_ * _host.ceil_div(h_out, 64 // pw_) * (64 // pw_)
    return min(reversed(PATCH_WIDTHS), key=covered)


def conv_ws_config(n: int, h_out: int, w_out: int, c_out: int, stride_w: int = 1, cout_g: int = 0,
                   ksteps: int = 0) -> dict[str, Any]:
    """The binding the host runs :data:`conv_ws` with: :func:`patch_width`, the stride along W, a box per patch at
    stride 1 (per patch row at stride 2), and the tile width by the tile count (measured on an H100,
    2026-12-06, docs/std/conv.md): 256 channels through three stages where c_out is a multiple of 256 and
    that still makes a wave of tiles; 64 through four for at most 64 channels or when 128-wide tiles would
    fill at most half a wave (more, narrower tiles then beat fewer wide ones: ResNet's 512 x 7 x 7); 160
    through four where that width divides c_out and 128 does not; 192 through four where it divides c_out and 256
    does not (Whisper's 384 channels on the H200, 2026-12-07: 0.81x the time of 128-wide tiles); else 128
    through four.  Grouped (``cout_g``, a group's output channels, below c_out): the widest of 128 and 64 that
    divides it, through four.  Where 128-wide tiles fill at most half a wave and :data:`WS_PLAN` splits, 128-wide
    tiles in the most K ranges (SPLIT) that still make one wave, of at least ``split_steps`` of the ``ksteps`` K
    steps each (:func:`ws_split`)."""
    pw_ = patch_width(h_out, w_out)
    tiles_m = _host.ceil_div(n * _host.ceil_div(h_out, 64 // pw_) * _host.ceil_div(w_out, pw_), 2)

    def tiles(bn: int) -> int:
        return tiles_m * _host.ceil_div(c_out, bn)
    split = 1
    ranges = ws_split(tiles(128), ksteps) if c_out > 64 and tiles(128) <= WS_SMS // 2 else 1
    if 0 < cout_g < c_out:  # a tile within one group
        bn, stages = (128 if cout_g % 128 == 0 and tiles(128) > WS_SMS // 2 else 64), 4
    elif c_out % 256 == 0 and tiles(256) >= WS_SMS:
        bn, stages = 256, 3
    elif ranges > 1:  # 128-wide tiles in K ranges: at most a wave of work items
        bn, stages, split = 128, 4, ranges
    elif c_out <= 64 or tiles(128) <= WS_SMS // 2:
        bn, stages = 64, 4
    elif c_out % 160 == 0 and c_out % 128:  # UNet's 320: two 160-wide tiles, not three 128-wide ones
        bn, stages = 160, 4
    elif c_out % 192 == 0 and c_out % 256:  # Whisper's 384: two 192-wide tiles, each activation tile read twice
        bn, stages = 192, 4
    else:
        bn, stages = 128, 4
    return {"BN": bn, "STAGES": stages, "PW": pw_, "S": stride_w, "BOX": "patch" if stride_w == 1 else "rows",
            "SPLIT": split}


def ws_split(tiles: int, ksteps: int) -> int:
    """K ranges for ``tiles`` output tiles of ``ksteps`` K steps (:data:`WS_PLAN`): the most of :data:`SPLITS` that
    keep tiles x ranges within one wave (so the partial sums stay a few MiB) and each range at least
    ``split_steps`` long; 1 when the plan does not split."""
    if not WS_PLAN["split"]:
        return 1
    return max(s for s in SPLITS if s == 1 or (tiles * s <= WS_SMS and ksteps // s >= WS_PLAN["split_steps"]))


def conv_ws_runs(stride: tuple[int, int], groups: int, width: int, cin_g: int = 0, cout_g: int = 0) -> bool:
    """Whether :data:`conv_ws` computes a convolution with these (sh, sw) strides over an input ``width`` wide:
    stride 1, or 2 along an even W (and any along H); one group, or groups of whole 64-channel K steps and
    64-channel tiles (``cin_g``, ``cout_g`` multiples of 64: packed ResNeXt groups)."""
    return (groups == 1 or (cin_g % 64 == 0 and cout_g % 64 == 0)) and (
        stride == (1, 1) or (stride[1] == 2 and width % 2 == 0))


def conv_ws_geometry(binding: dict[str, Any], n: int, h_out: int, w_out: int, c_out: int,
                     groups: int | None = None) -> tuple[tuple[int], tuple[int]]:
    """(grid, group) of :data:`conv_ws`: one group per output tile (two patches by BN channels), or ``groups``
    groups (at most one per tile) that each loop over every ``groups``-th tile."""
    pw_ = binding["PW"]
    patches = n * _host.ceil_div(h_out, 64 // pw_) * _host.ceil_div(w_out, pw_)
    tiles = _host.ceil_div(patches, 2) * _host.ceil_div(c_out, binding["BN"]) * binding.get("SPLIT", 1)
    return (max(1, tiles if groups is None else min(tiles, groups)) * WS_THREADS,), (WS_THREADS,)


def conv_ws_part_shape(binding: dict[str, Any], n: int, h_out: int, w_out: int, c_out: int) -> tuple[int, ...]:
    """The shape of :data:`conv_ws`'s f32 partial sums at ``binding``'s SPLIT > 1 (:data:`conv_ws_finish`'s
    ``part``): (SPLIT, patches rounded up to even, 64, c_out rounded up to whole tiles)."""
    pw_ = binding["PW"]
    patches = n * _host.ceil_div(h_out, 64 // pw_) * _host.ceil_div(w_out, pw_)
    return (binding["SPLIT"], 2 * _host.ceil_div(patches, 2), 64, _host.ceil_div(c_out, binding["BN"]) * binding["BN"])


#: Threads a group of :data:`conv_ws_finish`.
FINISH_THREADS = 256


def conv_ws_finish_geometry(n: int, h_out: int, w_out: int, c_out: int) -> tuple[tuple[int], tuple[int]]:
    """(grid, group) of :data:`conv_ws_finish`: a thread per 8 channels of an output pixel, in whole groups."""
    work = n * h_out * w_out * _host.ceil_div(c_out, 8)
    return (_host.ceil_div(work, FINISH_THREADS) * FINISH_THREADS,), (FINISH_THREADS,)
