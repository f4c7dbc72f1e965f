"""Convolutions: dense conv1d/conv2d (NCHW and NHWC) and depthwise conv2d, direct, f32 accumulation.

The dense kernel is an implicit GEMM through shared memory: out[p, co] = sum_r A[p, r] B[r, co] over the
output pixels p (all images flattened, so no tile is wasted on a ragged H x W), the output channels co and
r = (tap, input channel).  A group stages 16 input channels of one tap for its 256 pixels (padding as
zeros) and the tap's weights for its 64 channels, and each thread accumulates an 8 x 8 register tile.
The layout is only strides, so NCHW, NHWC and conv1d (H = KH = 1) share it.  The depthwise kernels keep a
few outputs a thread in registers and read their windows from global memory (L1 serves the overlap); NCHW
3x3, 5x5 and 7x7 at stride 1 or 2 take a kernel specialised on the filter's size and stride that loads
each window row once into registers for a run of consecutive outputs.  Otherwise stride, padding,
dilation, the kernel's extent and every size are run-time values: one specialisation per dtype.  Host
functions (numpy on interp/vulkan, torch CUDA tensors on cuda): :func:`conv1d`, :func:`conv2d`,
:func:`depthwise_conv2d`.  Design and bounds: docs/std/conv.md.
"""

from __future__ import annotations

from typing import Any

from iron import In, LaunchError, T, Tensor, bf16, config, f16, f32, func, i32, kernel, u32, variants
from iron.lang import (barrier, grid_size, group_id, group_size, isfinite, local, num_groups, program_id, shared,
                       static_range, thread_id, vec)

from iron.jit.device import device_traits

from . import _host
from ._plans import planned
from .conv_mma import conv_config, conv_grid, conv_mma, conv_shared_bytes, conv_tiles
from .conv_wg import conv_wg, conv_wg_config, conv_wg_grid, conv_wg_shared_bytes
from .conv_ws import (conv_ws, conv_ws_config, conv_ws_finish, conv_ws_finish_geometry, conv_ws_geometry,
                      conv_ws_part_shape, conv_ws_runs, conv_ws_shared_bytes)
from .elementwise import _launch_binary, _launch_unary
from .gemm import ACTIVATIONS, _launch_gemm
from .gemm_wg import runs_warpgroups
from .gemm_ws import WS_BK, runs_roles
from .transpose import _launch_transpose

# ---------------------------------------------------------------- tile shapes

#: Dense kernel: a group of GROUP threads owns BP output pixels x BC output channels and walks the
#: reduction one tap (kh, kw) and KC input channels at a time through shared memory; each thread keeps a
#: TP x TC register tile (32 pixel lanes x 8 channel lanes: one warp = 32 pixels of one channel lane).
GROUP = 256
BP, BC, KC = 256, 64, 16
TP, TC = 8, 8
PIX_LANES = BP // TP
CH_LANES = BC // TC
#: The k loop over a shared-memory stage is unrolled this much (a full unroll quadruples compile times
#: for little gain: the body is already TP * TC = 64 FMAs).
K_UNROLL = 4
#: Read the register tile's operands from shared memory as 16-byte vectors (a thread's pixels then run in
#: two runs of 4, BP/2 apart, and its channels are 8 contiguous ones).  Off for now: the HIP and Metal
#: emitters declare such arrays as `__shared__ alignas(16) float a[..]` / `threadgroup alignas(16) float
#: a[..]`, which hip-clang and the Metal compiler reject ("an attribute list cannot appear here"; NVRTC
#: accepts it).  Off, a thread's pixels and channels are strided (32 and 8 apart) so that no four of its
#: shared reads are adjacent: the vectorize pass would merge them and meet the same bug.
SHARED_VEC = False
#: Depthwise kernels: outputs per thread; NHWC stages weights for at most DW_WCAP floats at once.
DW_PX = 2
DWH_PX = 4
DW_WCAP = 4096
#: Depthwise NCHW, KS x KS at stride 1 or 2 (dwconv2d_nchw_k_kernel): a thread's run of consecutive outputs
#: of one row spans this many bytes of T (4 f32, 8 f16/bf16): a warp's window loads then span 512 bytes a load.
DW_RUN_BYTES = 16
#: A row coordinate that fails every bounds check (a pixel past the end).
FAR = -(1 << 29)
#: Lavapipe and many Vulkan devices allow at most this many groups per grid axis; kernels loop past it.
MAX_GROUPS = 65535


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def conv2d_kernel(x: In[T], w: In[T], bias: In[T], y: Tensor[T], c_in: int, h: int, wd: int, c_out: int,
                  kh: int, kw: int, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int, h_out: int,
                  w_out: int, n_pix: int, nhwc: int, vec_ok: int, has_bias: int, groups: int):
    """Dense (or grouped) 2-D convolution, direct, as an implicit GEMM through shared memory.

    nhwc == 0: x (N, C_in, H, W), w (C_out, C_in / groups, KH, KW), y (N, C_out, H_out, W_out).
    nhwc != 0: x (N, H, W, C_in), w (C_out, KH, KW, C_in / groups), y (N, H_out, W_out, C_out).
    All C-contiguous, dtype T; bias (C_out) read only when has_bias != 0.  Zero padding (ph, pw),
    strides (sh, sw), dilations (dh, dw); H_out = (H + 2ph - dh(KH-1) - 1) // sh + 1 (same for W);
    n_pix = N * H_out * W_out.  Grid: (tiles * 256, ceil(C_out / groups / 64), groups); tiles may be fewer
    than the ceil(n_pix / 256) pixel tiles (the kernel loops over them).  The layout is only strides.
    Each output is one sequential f32 multiply-add chain from 0 over the taps (kh, kw) row-major and,
    inside each tap, the input channels ascending (both layouts); then + bias and one rounding to T.
    vec_ok != 0 (NHWC with C_in / groups % VEC == 0) moves x and w in VEC-element (16-byte) loads along C.
    Padding contributes exact zeros (0 * w: an Inf/NaN weight over padding gives NaN, as explicit
    zero padding does); NaN/Inf inputs propagate as IEEE arithmetic does.
    """
    a_s = shared(f32, KC * BP)
    b_s = shared(f32, KC * BC)
    t = thread_id(0)
    tp = t % PIX_LANES
    tc = t // PIX_LANES
    hw = h * wd
    hw_out = h_out * w_out
    khw = kh * kw
    g = group_id(2)
    cin_g = c_in // groups
    cout_g = c_out // groups
    red = cin_g * khw
    # the layout as strides: x's pixel and channel, w's tap and channel, y's pixel and channel
    xs_p = c_in if nhwc != 0 else 1
    xs_c = 1 if nhwc != 0 else hw
    ws_t = cin_g if nhwc != 0 else 1
    ws_c = 1 if nhwc != 0 else khw
    ys_p = c_out if nhwc != 0 else 1
    ys_c = 1 if nhwc != 0 else hw_out
    n_tiles = (n_pix + BP - 1) // BP
    co0 = group_id(1) * BC
    tile = group_id(0)
    while tile < n_tiles:
        p0 = tile * BP
        p = p0 + t                       # the pixel this thread stages (BP == GROUP)
        ih0 = FAR
        iw0 = 0
        xb = 0
        if p < n_pix:
            n = p // hw_out
            q = p - n * hw_out
            oh = q // w_out
            ih0 = oh * sh - ph
            iw0 = (q - oh * w_out) * sw - pw
            xb = n * c_in * hw + g * cin_g * xs_c  # this image's first channel of the group
        acc = local(f32, TP * TC)
        for tap in range(khw):
            ikh = tap // kw
            ikw = tap - ikh * kw
            ih = ih0 + ikh * dh
            iw = iw0 + ikw * dw
            ok = u32(ih) < u32(h) and u32(iw) < u32(wd)
            xa = 0
            if ok:
                xa = xb + (ih * wd + iw) * xs_p
            wa = tap * ws_t
            for c0 in range(0, cin_g, KC):
                barrier()
                if vec_ok != 0:
                    # A and B in VEC-element loads along the contiguous C (NHWC, C_in % VEC == 0)
                    for i in static_range(KC // VEC):
                        if ok and c0 + i * VEC < cin_g:
                            xv = f32(x.load(xa + c0 + i * VEC, width=VEC))
                            for e in static_range(VEC):
                                a_s[(i * VEC + e) * BP + t] = xv[e]
                        else:
                            for e in static_range(VEC):
                                a_s[(i * VEC + e) * BP + t] = 0.0
                    for s in static_range((BC * KC // VEC + GROUP - 1) // GROUP):
                        idx = t + GROUP * s
                        if idx < BC * KC // VEC:
                            iv = idx % (KC // VEC)
                            cl = idx // (KC // VEC)
                            co = co0 + cl
                            if co < cout_g and c0 + iv * VEC < cin_g:
                                wvv = f32(w.load((g * cout_g + co) * red + wa + c0 + iv * VEC, width=VEC))
                                for e in static_range(VEC):
                                    b_s[(iv * VEC + e) * BC + cl] = wvv[e]
                            else:
                                for e in static_range(VEC):
                                    b_s[(iv * VEC + e) * BC + cl] = 0.0
                else:
                    # A: channels c0.. of the tap for BP pixels, zeros for padding and past the ends
                    for i in static_range(KC):
                        v = 0.0
                        if ok and c0 + i < cin_g:
                            v = f32(x[xa + (c0 + i) * xs_c])
                        a_s[i * BP + t] = v
                    # B: the tap's weights for BC output x KC input channels, as [ci][co]
                    for s in static_range(BC * KC // GROUP):
                        idx = t + GROUP * s
                        i = idx % KC
                        cl = idx // KC
                        co = co0 + cl
                        wv = 0.0
                        if co < cout_g and c0 + i < cin_g:
                            wv = f32(w[(g * cout_g + co) * red + wa + (c0 + i) * ws_c])
                        b_s[i * BC + cl] = wv
                barrier()
                for k in range(KC, unroll=K_UNROLL):
                    av = local(f32, TP)
                    bw = local(f32, TC)
                    if SHARED_VEC:
                        for r in static_range(TP // 4):
                            va = a_s.load(k * BP + r * (BP // 2) + tp * 4, width=4)
                            for e in static_range(4):
                                av[r * 4 + e] = va[e]
                        for r in static_range(TC // 4):
                            vb = b_s.load(k * BC + tc * TC + r * 4, width=4)
                            for e in static_range(4):
                                bw[r * 4 + e] = vb[e]
                    else:
                        for i in static_range(TP):
                            av[i] = a_s[k * BP + tp + PIX_LANES * i]
                        for j in static_range(TC):
                            bw[j] = b_s[k * BC + tc + CH_LANES * j]
                    for i in static_range(TP):
                        for j in static_range(TC):
                            acc[i * TC + j] += av[i] * bw[j]
        # epilogue: + bias, one rounding, the store
        bv = local(f32, TC)
        if has_bias != 0:
            for j in static_range(TC):
                co = co0 + (tc * TC + j if SHARED_VEC else tc + CH_LANES * j)
                if co < cout_g:
                    bv[j] = f32(bias[g * cout_g + co])
        for i in static_range(TP):
            pix = p0 + ((i // 4) * (BP // 2) + tp * 4 + i % 4 if SHARED_VEC else tp + PIX_LANES * i)
            if pix < n_pix:
                n = pix // hw_out
                q = pix - n * hw_out
                yb = n * c_out * hw_out + q * ys_p
                for j in static_range(TC):
                    co = g * cout_g + co0 + (tc * TC + j if SHARED_VEC else tc + CH_LANES * j)
                    if co < g * cout_g + cout_g:
                        y[yb + co * ys_c] = T(acc[i * TC + j] + bv[j])
        tile += num_groups(0)


@kernel(variants(T=[f32, f16, bf16]))
def dwconv2d_nchw_kernel(x: In[T], w: In[T], bias: In[T], y: Tensor[T], ch: int, h: int, wd: int, kh: int,
                         kw: int, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int, h_out: int, w_out: int,
                         planes: int, has_bias: int):
    """Depthwise 2-D convolution (groups = C), NCHW; memory-bound.

    x (N, C, H, W), w (C, 1, KH, KW), bias (C) read only when has_bias != 0, y (N, C, H_out, W_out); all
    C-contiguous, dtype T; planes = N * C.  Padding, stride, dilation and H_out/W_out as in conv2d.
    Grid: (groups(0) * 256, groups(1)): a group owns a tile of GROUP * DW_PX outputs of one plane (axis 0:
    the tiles of a plane, axis 1: the planes; either may be short, the kernel loops); a thread DW_PX of
    them, 256 apart (coalesced), and reads the plane's weights as uniform loads.  Each output is one f32
    multiply-add chain over (kh, kw) row-major from 0, then + bias and one rounding to T.  Padded taps
    are skipped (even an Inf weight adds nothing there); NaN/Inf that are read propagate as IEEE does.
    """
    t = thread_id(0)
    hw_out = h_out * w_out
    hw = h * wd
    khw = kh * kw
    per_plane = (hw_out + GROUP * DW_PX - 1) // (GROUP * DW_PX)
    step_h = GROUP // w_out              # a thread's next output is GROUP further: this many rows ...
    step_w = GROUP - step_h * w_out      # ... and columns on
    plane = group_id(1)
    while plane < planes:
        c = plane % ch
        xb = plane * hw
        tile = group_id(0)
        while tile < per_plane:
            q0 = tile * (GROUP * DW_PX) + t
            ih0 = local(i32, DW_PX)
            iw0 = local(i32, DW_PX)
            oh = q0 // w_out
            ow = q0 - oh * w_out
            for j in static_range(DW_PX):
                if j > 0:
                    oh += step_h
                    ow += step_w
                    if ow >= w_out:
                        ow -= w_out
                        oh += 1
                ih0[j] = select_i32(q0 + j * GROUP < hw_out, oh * sh - ph, FAR)
                iw0[j] = ow * sw - pw
            acc = local(f32, DW_PX)
            rowlim = local(i32, DW_PX)       # W where the tap row is inside the input, else 0: one check a tap
            rowb = local(i32, DW_PX)
            for ikh in range(kh):
                for j in static_range(DW_PX):
                    ih = ih0[j] + ikh * dh
                    rowlim[j] = select_i32(u32(ih) < u32(h), wd, 0)
                    rowb[j] = xb + ih * wd
                for ikw in range(kw):
                    wv = f32(w[c * khw + ikh * kw + ikw])
                    for j in static_range(DW_PX):
                        iw = iw0[j] + ikw * dw
                        if u32(iw) < u32(rowlim[j]):
                            acc[j] += f32(x[rowb[j] + iw]) * wv
            bv = 0.0
            if has_bias != 0:
                bv = f32(bias[c])
            for j in static_range(DW_PX):
                q = q0 + j * GROUP
                if q < hw_out:
                    y[plane * hw_out + q] = T(acc[j] + bv)
            tile += num_groups(0)
        plane += num_groups(1)


@kernel(variants(T=[f32, f16, bf16], KS=[3, 5, 7], S=[1, 2]))
def dwconv2d_nchw_k_kernel(x: In[T], w: In[T], bias: In[T], y: Tensor[T], ch: int, h: int, wd: int, ph: int, pw: int,
                           h_out: int, w_out: int, planes: int, has_bias: int):
    """Depthwise 2-D convolution (groups = C), NCHW, a KS x KS filter (KS = 3, 5 or 7), stride S (1 or 2) in
    both directions, dilation 1.

    x (N, C, H, W), w (C, 1, KS, KS), bias (C) read only when has_bias != 0, y (N, C, H_out, W_out); all
    C-contiguous, dtype T; planes = N * C.  Zero padding ph, pw >= 0 (any: asymmetric, or past KS // 2);
    H_out = (H + 2 ph - KS) // S + 1 >= 1, likewise W_out; every size from 1 (a 1 x 1 image).
    A thread owns a run of R = DW_RUN_BYTES / sizeof(T) consecutive outputs of one output row (4 f32, 8
    f16/bf16; a row's last run may be shorter: W_out need not be a multiple of R, nor reach it).  For each of
    the KS input rows under its run that lies inside the image it loads the filter row's KS weights (as f32)
    and the S (R - 1) + KS inputs of the row's window (zeros outside the image) into registers, once, and does
    the R * KS multiply-adds from there.  Grid (dw_nchw_k_grid): (groups(0) * 256, groups(1)); axis 0 walks
    the tiles of 256 of a plane's M = H_out * ceil(W_out / R) (row, run) pairs, axis 1 the planes, P = max(1,
    256 // M) at a time (thread t of group g takes plane P g + t // M, pair t % M: small planes share a group);
    either axis may be short (the kernel loops); threads past the end do nothing.  Each output is one f32
    multiply-add chain over (kh, kw) row-major from 0, then + bias and one rounding to T: the generic
    kernel's order.  Padded taps add nothing: rows in the padding are skipped; padded columns under a filter
    row of finite weights run as exact zeros (0 * w = +-0 leaves the sum's value; at most the sign of a zero
    sum can differ from skipping), and under a row with an Inf/NaN weight they are skipped (no 0 * Inf =
    NaN).  NaN/Inf that are read propagate as IEEE arithmetic does.
    """
    R = DW_RUN_BYTES // (4 if T is f32 else 2)
    runs = (w_out + R - 1) // R                  # runs of an output row
    items = h_out * runs                         # (row, run) pairs of a plane
    per_plane = (items + GROUP - 1) // GROUP
    pack = max(1, GROUP // items)                # planes a group takes at once: 1 unless a plane is small
    sub = thread_id(0) // items                  # this thread's plane among them (0 when pack == 1) ...
    t = thread_id(0) - sub * items               # ... and its (row, run) pair there
    hw = h * wd
    hw_out = h_out * w_out
    plane = group_id(1) * pack + sub
    while plane < planes and sub < pack:
        c = plane % ch
        bv = 0.0
        if has_bias != 0:
            bv = f32(bias[c])
        tile = group_id(0)
        while tile < per_plane:
            i = tile * GROUP + t
            if i < items:
                oh = i // runs
                ow0 = (i - oh * runs) * R
                iw0 = ow0 * S - pw               # the window's first input column
                acc = local(f32, R)
                wr = local(f32, KS)
                win = local(f32, S * (R - 1) + KS)
                for kh in static_range(KS):
                    ih = oh * S + kh - ph
                    if u32(ih) < u32(h):         # the row check: a row in the padding adds nothing
                        wsum = 0.0
                        for kw in static_range(KS):
                            wr[kw] = f32(w[c * (KS * KS) + kh * KS + kw])
                            wsum += wr[kw]
                        rb = plane * hw + ih * wd + iw0
                        for e in static_range(S * (R - 1) + KS):
                            win[e] = 0.0
                            if u32(iw0 + e) < u32(wd):
                                win[e] = f32(x[rb + e])
                        # checked == 0 (the row's weights finite; a sum that overflows goes to checked == 1):
                        # padded columns read as zeros and their taps run as exact zeros, no check a tap;
                        # checked == 1 (an Inf/NaN weight, where 0 * w is NaN) skips the padded taps one by one
                        for checked in static_range(2):
                            if (not isfinite(wsum)) if checked == 1 else isfinite(wsum):
                                for kw in static_range(KS):
                                    for j in static_range(R):
                                        if checked == 0:
                                            acc[j] += win[S * j + kw] * wr[kw]
                                        elif u32(iw0 + S * j + kw) < u32(wd):
                                            acc[j] += win[S * j + kw] * wr[kw]
                yb = plane * hw_out + oh * w_out + ow0
                for j in static_range(R):
                    if ow0 + j < w_out:
                        y[yb + j] = T(acc[j] + bv)
            tile += num_groups(0)
        plane += num_groups(1) * pack


@func
def nhwc_threads(width):
    """A depthwise NHWC group's geometry (group (gx, gy), gx threads of ``width`` channels across a pixel):
    (tx, ty, gx, gy, t, cw, c0, c, cl, slot) -- the thread, the group's size, the flat thread index, the
    group's channels (cw from c0), this thread's first channel c, and the channel cl it stages with the
    shared-memory slot of its weights (the ``width`` weights of a thread gx apart)."""
    tx = thread_id(0)
    ty = thread_id(1)
    gx = group_size(0)
    gy = group_size(1)
    t = ty * gx + tx
    cw = gx * width
    c0 = group_id(0) * cw
    cl = t % cw
    return tx, ty, gx, gy, t, cw, c0, c0 + tx * width, cl, (cl % width) * gx + cl // width


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def dwconv2d_nhwc_kernel(x: In[T], w: In[T], bias: In[T], y: Tensor[T], ch: int, h: int, wd: int, kh: int,
                         kw: int, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int, h_out: int, w_out: int,
                         n_pix: int, vec_ok: int, has_bias: int):
    """Depthwise 2-D convolution (groups = C), NHWC; memory-bound.

    x (N, H, W, C), w (C, 1, KH, KW), bias (C) read only when has_bias != 0, y (N, H_out, W_out, C); all
    C-contiguous, dtype T; n_pix = N * H_out * W_out.  Padding, stride, dilation as in conv2d.
    Group (gx, gy), gx * gy = 256, gx a power of two <= 32: thread (tx, ty) owns VEC channels of DWH_PX = 4
    consecutive pixels (vec_ok != 0, i.e. C % VEC == 0: one 16-byte load per tap and pixel; else VEC
    scalar loads); gx threads cover gx * VEC contiguous channels of a pixel (coalesced).  Grid:
    (ceil(C / (VEC gx)) * gx, groups(1) * gy); the kernel loops past groups(1).  The group stages its
    channels' weights in shared memory (f32, [tap][channel], DW_WCAP floats a pass).  Each output is one
    f32 multiply-add chain over (kh, kw) row-major from 0, then + bias and one rounding to T.  Padded taps
    are skipped; NaN/Inf that are read propagate as IEEE arithmetic does.
    """
    ws = shared(f32, DW_WCAP)
    tx, ty, gx, gy, t, cw, c0, c, cl, slot = nhwc_threads(VEC)
    khw = kh * kw
    taps = DW_WCAP // cw                 # taps staged per pass
    hw_out = h_out * w_out
    n_tiles = (n_pix + gy * DWH_PX - 1) // (gy * DWH_PX)
    tile = group_id(1)
    while tile < n_tiles:
        pb = (tile * gy + ty) * DWH_PX
        ih0 = local(i32, DWH_PX)
        iw0 = local(i32, DWH_PX)
        xb = local(i32, DWH_PX)
        n = pb // hw_out                 # the first pixel's coordinates; the next ones step along W
        oh = (pb - n * hw_out) // w_out
        ow = pb - n * hw_out - oh * w_out
        for j in static_range(DWH_PX):
            if j > 0:
                ow += 1
                if ow == w_out:
                    ow = 0
                    oh += 1
                    if oh == h_out:
                        oh = 0
                        n += 1
            ih0[j] = select_i32(pb + j < n_pix, oh * sh - ph, FAR)
            iw0[j] = ow * sw - pw
            xb[j] = n * h * wd
        acc = local(f32, DWH_PX * VEC)
        for r0 in range(0, khw, taps):
            barrier()
            for rl in range(t // cw, min(taps, khw - r0), GROUP // cw):   # cw divides GROUP
                wv = 0.0
                if c0 + cl < ch:
                    wv = f32(w[(c0 + cl) * khw + r0 + rl])
                ws[rl * cw + slot] = wv
            barrier()
            ikh = r0 // kw
            ikw = r0 - ikh * kw
            for rl in range(min(taps, khw - r0)):
                if c < ch:
                    wvec = local(f32, VEC)
                    for e in static_range(VEC):
                        wvec[e] = ws[rl * cw + e * gx + tx]
                    for j in static_range(DWH_PX):
                        ih = ih0[j] + ikh * dh
                        iw = iw0[j] + ikw * dw
                        if u32(ih) < u32(h) and u32(iw) < u32(wd):
                            at = (xb[j] + ih * wd + iw) * ch + c
                            if vec_ok != 0:
                                xv = f32(x.load(at, width=VEC))
                                for e in static_range(VEC):
                                    acc[j * VEC + e] += xv[e] * wvec[e]
                            else:
                                for e in static_range(VEC):
                                    if c + e < ch:
                                        acc[j * VEC + e] += f32(x[at + e]) * wvec[e]
                ikw += 1
                if ikw == kw:
                    ikw = 0
                    ikh += 1
        if c < ch:
            bv = local(f32, VEC)
            if has_bias != 0:
                for e in static_range(VEC):
                    if c + e < ch:
                        bv[e] = f32(bias[c + e])
            for j in static_range(DWH_PX):
                p = pb + j
                o = j * VEC
                if p < n_pix and vec_ok == 0:
                    for e in static_range(VEC):
                        if c + e < ch:
                            y[p * ch + c + e] = T(acc[o + e] + bv[e])
                elif p < n_pix:
                    if VEC == 8:
                        y.store(p * ch + c, T(vec(acc[o] + bv[0], acc[o + 1] + bv[1], acc[o + 2] + bv[2],
                                                  acc[o + 3] + bv[3], acc[o + 4] + bv[4], acc[o + 5] + bv[5],
                                                  acc[o + 6] + bv[6], acc[o + 7] + bv[7])))
                    else:
                        y.store(p * ch + c, T(vec(acc[o] + bv[0], acc[o + 1] + bv[1], acc[o + 2] + bv[2],
                                                  acc[o + 3] + bv[3])))
        tile += num_groups(1)


@kernel(variants(T=[f32, f16, bf16], KS=[3, 5], S=[2, 1]))
def dwconv2d_nhwc_k_kernel(x: In[T], w: In[T], bias: In[T], y: Tensor[T], ch: int, h: int, wd: int, ph: int,
                           pw: int, h_out: int, w_out: int, tiles: int, has_bias: int):
    """Depthwise 2-D convolution (groups = C), NHWC, a KS x KS filter (KS = 3 or 5), stride S (1 or 2) in both
    directions, dilation 1, C a multiple of the vector width (16 bytes of T) and 16-byte aligned rows.

    x (N, H, W, C), w (C, 1, KS, KS), bias (C) read only when has_bias != 0, y (N, H_out, W_out, C); all
    C-contiguous, dtype T; tiles = N * H_out * ceil(W_out / DWH_PX).  Zero padding ph, pw >= 0; H_out, W_out
    >= 1.  Group (gx, gy) as dwconv2d_nhwc_kernel (dw_nhwc_group): thread (tx, ty) owns VEC channels of a
    tile of DWH_PX consecutive outputs of one output row (a row's last tile may be short).  For each filter
    row inside the image it walks the (DWH_PX - 1) S + KS input columns under the tile once, one 16-byte
    load each, and adds each column to the outputs whose window holds it: every output's taps still come
    in (kh, kw) row-major order, so each output is the generic kernel's f32 multiply-add chain from 0, then
    + bias and one rounding to T.  Padded taps are skipped (rows and columns outside the image add
    nothing).  The group stages its channels' KS * KS weights once (f32, [tap][channel]).  Grid:
    (ceil(C / (VEC gx)) * gx, groups(1) * gy); the kernel loops past groups(1).  NaN/Inf that are read
    propagate as IEEE arithmetic does.
    """
    VEC = 4 if T is f32 else 8
    ws = shared(f32, KS * KS * 256)
    tx, ty, gx, gy, t, cw, c0, c, cl, slot = nhwc_threads(VEC)
    for r in range(t // cw, KS * KS, GROUP // cw):
        wv = 0.0
        if c0 + cl < ch:
            wv = f32(w[(c0 + cl) * KS * KS + r])
        ws[r * cw + slot] = wv
    barrier()
    wt = (w_out + DWH_PX - 1) // DWH_PX  # tiles of an output row
    tile = group_id(1) * gy + ty
    while tile < tiles and c < ch:
        nr = tile // wt                  # n * H_out + oh
        ow0 = (tile - nr * wt) * DWH_PX
        n = nr // h_out
        oh = nr - n * h_out
        acc = local(f32, DWH_PX * VEC)
        for kh in static_range(KS):
            ih = oh * S - ph + kh
            if u32(ih) < u32(h):
                wrow = local(f32, KS * VEC)
                for kw in static_range(KS):
                    for e in static_range(VEC):
                        wrow[kw * VEC + e] = ws[(kh * KS + kw) * cw + e * gx + tx]
                iw0 = ow0 * S - pw
                base = ((n * h + ih) * wd + iw0) * ch + c
                for q in static_range((DWH_PX - 1) * S + KS):
                    if u32(iw0 + q) < u32(wd):
                        xv = f32(x.load(base + q * ch, width=VEC))
                        for j in static_range(DWH_PX):
                            if q - j * S >= 0 and q - j * S < KS:  # column q is tap q - j S of output j
                                for e in static_range(VEC):
                                    acc[j * VEC + e] += xv[e] * wrow[(q - j * S) * VEC + e]
        bv = local(f32, VEC)
        if has_bias != 0:
            bl = f32(bias.load(c, width=VEC))
            for e in static_range(VEC):
                bv[e] = bl[e]
        for j in static_range(DWH_PX):
            if ow0 + j < w_out:
                o = j * VEC
                at = (nr * w_out + ow0 + j) * ch + c
                if VEC == 8:
                    y.store(at, T(vec(acc[o] + bv[0], acc[o + 1] + bv[1], acc[o + 2] + bv[2], acc[o + 3] + bv[3],
                                      acc[o + 4] + bv[4], acc[o + 5] + bv[5], acc[o + 6] + bv[6],
                                      acc[o + 7] + bv[7])))
                else:
                    y.store(at, T(vec(acc[o] + bv[0], acc[o + 1] + bv[1], acc[o + 2] + bv[2], acc[o + 3] + bv[3])))
        tile += num_groups(1) * gy


@kernel(variants(T=[f16, bf16]))
def pack_group_weights(w: In[T], out: Tensor[T], taps: int, cin_g: int, cout_g: int, pack: int, total: int):
    """out (C_out, taps, pack * cin_g) = w (C_out, taps, cin_g) laid block-diagonally: output channel co (group
    co // cout_g) keeps its weights at the input channels of its group's place among ``pack`` consecutive groups
    and zeros elsewhere, so ``pack`` groups run as one group of pack * cin_g inputs and pack * cout_g outputs.
    total = C_out * taps * pack * cin_g; any grid (the threads loop)."""
    width = pack * cin_g
    for i in range(program_id(0), total, grid_size(0)):
        c = i % width
        rest = i // width
        co = rest // taps
        src = c - ((co // cout_g) % pack) * cin_g
        v = T(0.0)
        if src >= 0 and src < cin_g:
            v = w[rest * cin_g + src]
        out[i] = v


#: At most this many groups a pack: the multiplies by zero cost pack times the FLOPs, and 8 and 16 are what was
#: measured (ResNeXt's groups of 8 and 4 on an H100, docs/std/conv.md).
PACK_MAX = 16


def group_pack(groups: int, cin_g: int, cout_g: int) -> int:
    """How many groups of a grouped convolution share one group of the matrix path (:func:`pack_group_weights`):
    the most, a power of two dividing ``groups`` and at most :data:`PACK_MAX`, whose output channels fill at most
    64 (the narrowest tile), so that few channels a group (ResNeXt's 4 or 8) neither leave most of a tile's
    columns empty nor take a K step per tap of mostly padding.  1 where a group has 64 output channels or more."""
    p = 1
    while groups % (2 * p) == 0 and 2 * p * cout_g <= 64 and 2 * p <= PACK_MAX:
        p *= 2
    return p


def _pack_groups(w: Any, c_out: int, taps: int, cin_g: int, cout_g: int, pack: int, dt: Any,
                 backend: str | None) -> Any:
    """The channels-last weight (C_out, taps, cin_g) of ``pack``-group packs, block-diagonal (a scratch array)."""
    total = c_out * taps * pack * cin_g
    out = _host.empty_like(w, (c_out, taps, pack * cin_g))
    pack_group_weights.variant(T=dt).launch(w, out, taps, cin_g, cout_g, pack, total,
                                            grid=(min(_host.ceil_div(total, 256), 4096) * 256,), group=(256,),
                                            backend=backend)
    return out


@func
def select_i32(cond: bool, a: i32, b: i32):
    """``a`` where ``cond`` holds, else ``b`` (both evaluated; neither loads)."""
    return a if cond else b


# ---------------------------------------------------------------- host functions

def _pair(v: int | tuple[int, int], what: str) -> tuple[int, int]:
    pair = (v, v) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(pair) != 2 or not all(isinstance(e, int) and not isinstance(e, bool) for e in pair):
        raise LaunchError(f"{what}: expected an int or a pair of ints, got {v!r}")
    return pair  # type: ignore[return-value]


def _extent(size: int, k: int, s: int, p: int | tuple[int, int], d: int, axis: str) -> int:
    """Output extent along one axis, ``p`` the padding on each side or (before, after); a LaunchError when the
    dilated kernel does not fit the padded input."""
    before, after = (p, p) if isinstance(p, int) else p
    if s < 1 or d < 1 or before < 0 or after < 0:
        raise LaunchError(f"conv: stride and dilation must be >= 1 and padding >= 0 along {axis}; "
                          f"got stride {s}, padding {p}, dilation {d}")
    span = d * (k - 1) + 1
    padded = size + before + after
    if span > padded:
        raise LaunchError(f"conv: along {axis} the kernel spans {span} (size {k}, dilation {d}), larger than "
                          f"the padded input {padded} (size {size} + padding {before} + {after})")
    return (padded - span) // s + 1


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _padding(padding: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
             op: str) -> list[tuple[int, int]]:
    """(before, after) zero padding per spatial axis from PyTorch's forms and one more: an int (every side),
    one int per axis (both its sides), one (before, after) pair per axis (asymmetric; for one axis a pair of
    ints is that pair), "valid" (none) or "same" (the output as large as the input: stride 1 only, and the
    dilated kernel's extra span split as PyTorch splits it, the odd element after)."""
    dims = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * dims
        if padding == "same":
            if any(s != 1 for s in stride):
                raise LaunchError(f"{op}: padding='same' needs stride 1 (as in PyTorch); got stride {stride}")
            return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)]
    elif _is_int(padding):
        return [(padding, padding)] * dims
    elif isinstance(padding, (tuple, list)):
        items = [padding] if dims == 1 and len(padding) == 2 and all(map(_is_int, padding)) else list(padding)
        sides = [(p, p) if _is_int(p) else tuple(p) if isinstance(p, (tuple, list)) else () for p in items]
        if len(sides) == dims and all(len(s) == 2 and all(map(_is_int, s)) for s in sides):
            return sides  # type: ignore[return-value]
    raise LaunchError(f"{op}: padding must be an int, {dims} int(s), {dims} (before, after) pair(s), 'same' or "
                      f"'valid'; got {padding!r}")


def _contiguous(a: Any, what: str) -> Any:
    """``a`` itself when C-contiguous, else a contiguous copy (numpy, torch)."""
    flags = getattr(a, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        if flags.c_contiguous:
            return a
        import numpy as np

        return np.ascontiguousarray(a)
    if hasattr(a, "is_contiguous"):
        return a if a.is_contiguous() else a.contiguous()
    return a


def _operands(x: Any, w: Any, bias: Any, x_rank: int, w_rank: int, op: str) -> tuple[Any, Any, Any, Any]:
    """(dtype, x, w, bias) checked for rank and dtype, made contiguous."""
    dt = _host.check_float(x, f"{op}: x")
    if _host.dtype_of(w, f"{op}: w") != dt:
        raise LaunchError(f"{op}: w has dtype {_host.dtype_of(w).name}, x has {dt.name}; they must match")
    xs, ws = _host.shape_of(x), _host.shape_of(w)
    if len(xs) != x_rank:
        raise LaunchError(f"{op}: x must have {x_rank} dimensions, got shape {xs}")
    if len(ws) != w_rank:
        raise LaunchError(f"{op}: w must have {w_rank} dimensions, got shape {ws}")
    if bias is not None and _host.dtype_of(bias, f"{op}: bias") != dt:
        raise LaunchError(f"{op}: bias has dtype {_host.dtype_of(bias).name}, x has {dt.name}; they must match")
    x, w = _contiguous(x, "x"), _contiguous(w, "w")
    return dt, x, w, None if bias is None else _contiguous(bias, "bias")


def _output(x: Any, out: Any, shape: tuple[int, ...], dt: Any, op: str, reads: dict[str, Any]) -> Any:
    return _host.output(op, out, x, shape, dt, reads)


def _aligned(*arrays: Any) -> bool:
    """Whether every device array starts on 16 bytes (a torch/CuPy view may not); host arrays are copied."""
    for a in arrays:
        if hasattr(a, "data_ptr"):
            ptr = a.data_ptr()
        elif hasattr(a, "__cuda_array_interface__"):
            ptr = a.__cuda_array_interface__["data"][0]
        else:
            continue
        if ptr % _host.VECTOR_BYTES:
            return False
    return True


def _check_bias(bias: Any, channels: int, op: str) -> None:
    if bias is not None:
        _host.check_shape(bias, (channels,), f"{op}: bias")


def _check_int32(op: str, *arrays_or_sizes: int) -> None:
    for n in arrays_or_sizes:
        if n >= 1 << 31:
            raise LaunchError(f"{op}: a tensor of {n} elements exceeds the kernels' 32-bit indexing")


def _dense(x: Any, w: Any, bias: Any, out: Any, dt: Any, nhwc: bool, geometry: tuple[int, ...],
           backend: str | None, groups: int = 1, residual: Any = None, act: str = "none") -> Any:
    """The dense (or grouped) convolution into ``out``: the implicit GEMM on the matrix units where it serves the
    call (:func:`_matrix`), else conv2d_kernel with the residual and the activation as elementwise passes after it.
    geometry = (N, C_in, H, W, C_out, KH, KW, sh, sw, ph, pw, dh, dw, H_out, W_out)."""
    n, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out = geometry
    n_pix = n * h_out * w_out
    if n_pix == 0 or c_out == 0:
        return out
    red = c_in // groups * kh * kw
    _check_int32("conv", n * c_in * h * wd, c_out * red, n_pix * c_out)
    if _matrix(x, w, bias, residual, out, dt, nhwc, geometry, groups, act, backend):
        return out
    if groups > MAX_GROUPS:
        raise LaunchError(f"conv: {groups} groups; the kernels take at most {MAX_GROUPS} (one per grid row)")
    vw = _host.vector_width(dt)
    tiles = min(_host.ceil_div(n_pix, BP), MAX_GROUPS)
    kernel_ = conv2d_kernel.variant(T=dt, VEC=vw)
    kernel_.launch(x, w, w if bias is None else bias, out, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw, dh, dw,
                   h_out, w_out, n_pix, int(nhwc), int(nhwc and (c_in // groups) % vw == 0 and _aligned(x, w)),
                   int(bias is not None), groups,
                   grid=(tiles * GROUP, _host.ceil_div(c_out // groups, BC), groups), group=(GROUP, 1),
                   backend=backend)
    return _passes_after(out, residual, act, backend)


def _passes_after(out: Any, residual: Any, act: str, backend: str | None) -> Any:
    """``out`` += residual, then the activation, as elementwise passes (one rounding each): the epilogue of the
    kernels that do not fuse it."""
    if residual is not None or act != "none":
        if residual is not None:
            _launch_binary("add", out, residual, out, backend)
        if act != "none":
            _launch_unary(act, out, out, backend)
    return out


def _matrix(x: Any, w: Any, bias: Any, residual: Any, out: Any, dt: Any, nhwc: bool, geometry: tuple[int, ...],
            groups: int, act: str, backend: str | None) -> bool:
    """Run the convolution as an implicit GEMM (conv_ws.py on Hopper with one group at stride 1 or 2 along an even
    W, conv_wg.py on Hopper otherwise, conv_mma.py elsewhere) when the dtype, the channels, the device and the
    alignment allow; False (nothing launched) otherwise.  A group of at most 64
    output channels stays on conv_mma's 128 x 64 tiles on Hopper too (conv_wg's are 128 channels wide).  NCHW
    input goes to channels-last through batched transposes (x and, past 1 x 1, w); the kernel writes NCHW
    output by its index map.  A channels-last 1 x 1 convolution at stride 1 without padding, groups or
    residual is a plain gemm of (N H W, C_in) by w^T.  Groups of few channels run :func:`group_pack` of them a
    group, their weights block-diagonal (option ``conv_pack_groups``)."""
    n, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out = geometry
    own_cin = c_in // groups  # the weight's input channels a group
    pack = group_pack(groups, own_cin, c_out // groups) if config.get("conv_pack_groups") else 1
    groups //= pack
    cin_g, cout_g = c_in // groups, c_out // groups
    if dt not in (f16, bf16) or cin_g % 8 or not _aligned(x, w, out, bias, residual):
        return False
    traits = device_traits(backend, (x,))
    n_pix = n * h_out * w_out
    tiles = conv_tiles(n_pix, cout_g, groups)
    if runs_warpgroups(traits.profile) and cout_g > 64:  # Hopper: the gather feeds warpgroup multiplies
        kern, cfg = conv_wg, conv_wg_config(cout_g, tiles)
        need, geo = conv_wg_shared_bytes(cfg), conv_wg_grid(cfg, n_pix, cout_g, groups)
    else:
        kern, cfg = conv_mma, conv_config(traits, dt, cout_g, tiles)
        if cfg is None:
            return False
        need, geo = conv_shared_bytes(cfg, dt.itemsize), conv_grid(cfg, n_pix, cout_g, groups)
    if need > (traits.shared_limit or float("inf")):
        return False
    gemm_1x1 = nhwc and (kh, kw, sh, sw, ph, pw, groups) == (1, 1, 1, 1, 0, 0, 1) and residual is None
    ws = None
    if not gemm_1x1:
        # Grouped into NCHW rows that are no multiple of 8 (a lane a pixel in conv_ws's epilogue), conv_mma's
        # stores were faster on an H100 (ResNeXt at 28 x 28: 72.5 us against 99.5).
        grouped_nchw_odd = groups > 1 and not nhwc and w_out % 8
        ksteps = kh * kw * _host.ceil_div(cin_g, WS_BK)
        ws = conv_ws_config(n, h_out, w_out, c_out, sw, cout_g, ksteps) if config.get("conv_ws") and \
            conv_ws_runs((sh, sw), groups, wd, cin_g, cout_g) and runs_roles(traits.profile) and \
            not grouped_nchw_odd else None
        if ws is not None and conv_ws_shared_bytes(ws) > (traits.shared_limit or float("inf")):
            ws = None
        if geo is None and ws is None:
            return False
    if not nhwc:
        if c_in > 1 and h * wd > 1:
            x_t = _host.empty_like(x, (n, h, wd, c_in))
            _launch_transpose(x, x_t, n, c_in, h * wd, backend)
            x = x_t
        if kh * kw > 1 and own_cin > 1:
            w_t = _host.empty_like(w, (c_out, kh, kw, own_cin))
            _launch_transpose(w, w_t, c_out, own_cin, kh * kw, backend)
            w = w_t
    if pack > 1:  # pack groups a group, their weights block-diagonal
        w = _pack_groups(w, c_out, kh * kw, own_cin, c_out // (groups * pack), pack, dt, backend)
    if gemm_1x1:
        _launch_gemm(_host.view(x, lambda a: a.reshape(n_pix, c_in)), _host.view(w, lambda a: a.reshape(c_out, c_in)),
                     bias, act, _host.view(out, lambda a: a.reshape(n_pix, c_out)), (n_pix, c_out, c_in), dt,
                     backend, True)
        return True
    if ws is not None:  # Hopper: the input's taps as boxes by tile copies, warp roles
        _launch_ws(x, w, bias, residual, out, ws, dt, act, nhwc, geometry, cin_g, backend)
        return True
    kern.variant(T=dt, ACT=act, **cfg).launch(
        x, w, w if bias is None else bias, w if residual is None else residual, out, c_in, h, wd, c_out, kw, sh,
        sw, ph, pw, dh, dw, h_out, w_out, n_pix, kh * kw, cin_g, cout_g, int(not nhwc), int(bias is not None),
        int(residual is not None), grid=geo[0], group=geo[1], backend=backend)
    return True


def _launch_ws(x: Any, w: Any, bias: Any, residual: Any, out: Any, ws: dict[str, Any], dt: Any, act: str, nhwc: bool,
               geometry: tuple[int, ...], cin_g: int, backend: str | None) -> None:
    """conv_ws at binding ``ws`` on channels-last x and w; at SPLIT > 1 its K ranges' f32 sums into a scratch
    buffer, then conv_ws_finish adds them and writes ``out`` (bias, residual, activation)."""
    n, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out = geometry
    split = ws.get("SPLIT", 1)
    part = _host.empty_like(x, conv_ws_part_shape(ws, n, h_out, w_out, c_out), f32) if split > 1 else \
        _host.unread(x, f32)
    b, r = w if bias is None else bias, w if residual is None else residual
    flags = (int(not nhwc), int(bias is not None), int(residual is not None))
    grid, group = conv_ws_geometry(ws, n, h_out, w_out, c_out)
    conv_ws.variant(T=dt, ACT="none" if split > 1 else act, **ws).launch(
        x, w, b, r, out, part, n, c_in, h, wd // sw, c_out, kh, kw, sh, ph, pw, dh, dw, h_out, w_out, *flags, cin_g,
        grid=grid, group=group, backend=backend)
    if split > 1:
        grid, group = conv_ws_finish_geometry(n, h_out, w_out, c_out)
        conv_ws_finish.variant(T=dt, ACT=act, SPLIT=split).launch(
            part, b, r, out, n, h_out, w_out, c_out, ws["PW"], _host.shape_of(part)[3], *flags, grid=grid,
            group=group, backend=backend)


def _epilogue(out_shape: tuple[int, ...], dt: Any, residual: Any, activation: str | None,
              op: str) -> tuple[str, Any]:
    """(the activation's name, "none" for None; the residual, contiguous) after checking both: the residual
    has the output's shape and dtype."""
    act = "none" if activation is None else activation
    if act not in ACTIVATIONS:
        raise LaunchError(f"{op}: activation must be None or one of {', '.join(ACTIVATIONS[1:])}; got {activation!r}")
    if residual is not None:
        if _host.dtype_of(residual, f"{op}: residual") != dt:
            raise LaunchError(f"{op}: residual has dtype {_host.dtype_of(residual).name}, x has {dt.name}")
        _host.check_shape(residual, out_shape, f"{op}: residual")
        residual = _contiguous(residual, "residual")
    return act, residual


def _groups(groups: Any, c_in: int, c_out: int, op: str) -> int:
    if not _is_int(groups) or groups < 1 or c_in % groups or c_out % groups:
        raise LaunchError(f"{op}: groups must be a positive int dividing C_in = {c_in} and C_out = {c_out}; "
                          f"got {groups!r}")
    return groups


@planned
def conv1d(x: Any, w: Any, bias: Any = None, stride: int = 1, padding: int | tuple[int, int] | str = 0,
           dilation: int = 1, out: Any = None, backend: str | None = None, groups: int = 1,
           activation: str | None = None, residual: Any = None) -> Any:
    """y (N, C_out, L_out) = act(conv1d(x (N, C_in, L), w (C_out, C_in / groups, K)) + bias + residual).

    padding: an int (both sides), (before, after), "same" or "valid" (:func:`_padding`).  L_out = (L + before +
    after - dilation (K - 1) - 1) // stride + 1; the dense 2-D convolution with H = KH = 1.  activation: None,
    "relu", "gelu_tanh" or "silu"; residual: (N, C_out, L_out), added before the activation.
    """
    dt, x, w, bias = _operands(x, w, bias, 3, 3, "conv1d")
    (n, c_in, length), (c_out, wc, k) = _host.shape_of(x), _host.shape_of(w)
    groups = _groups(groups, c_in, c_out, "conv1d")
    if wc * groups != c_in:
        raise LaunchError(f"conv1d: x has {c_in} input channels, w expects {wc * groups} (w is (C_out, C_in / "
                          f"groups, K) with groups = {groups})")
    if not all(_is_int(v) for v in (stride, dilation)):
        raise LaunchError("conv1d: stride and dilation must be ints")
    if k < 1:
        raise LaunchError("conv1d: the kernel size K must be >= 1")
    _check_bias(bias, c_out, "conv1d")
    (pad,) = _padding(padding, (k,), (stride,), (dilation,), "conv1d")
    l_out = _extent(length, k, stride, pad, dilation, "L")
    act, residual = _epilogue((n, c_out, l_out), dt, residual, activation, "conv1d")
    out = _output(x, out, (n, c_out, l_out), dt, "conv1d", {"x": x, "w": w, "bias": bias, "residual": residual})
    return _dense(x, w, bias, out, dt, False,
                  (n, c_in, 1, length, c_out, 1, k, 1, stride, 0, pad[0], 1, dilation, 1, l_out), backend, groups,
                  residual, act)


@planned
def conv2d(x: Any, w: Any, bias: Any = None, stride: int | tuple[int, int] = (1, 1),
           padding: int | tuple[Any, Any] | str = (0, 0), dilation: int | tuple[int, int] = (1, 1),
           layout: str = "NCHW", out: Any = None, backend: str | None = None, groups: int = 1,
           activation: str | None = None, residual: Any = None) -> Any:
    """y = act(conv2d(x, w) + bias + residual): a dense (or grouped) 2-D convolution with zero padding.

    layout "NCHW": x (N, C_in, H, W), w (C_out, C_in / groups, KH, KW) (PyTorch's), y (N, C_out, H_out, W_out).
    layout "NHWC": x (N, H, W, C_in), w (C_out, KH, KW, C_in / groups) (PyTorch's weight in channels_last order:
    ``w.permute(0, 2, 3, 1)``), y (N, H_out, W_out, C_out).  padding: an int, (ph, pw), ((top, bottom),
    (left, right)), "same" or "valid" (:func:`_padding`).  groups: as PyTorch's (depthwise has its own function).
    activation: None, "relu", "gelu_tanh" or "silu"; residual: y's shape, added before the activation (a ResNet
    block's shortcut).  f16/bf16 with C_in / groups a multiple of 8 run on the matrix units (conv_mma.py) in one
    pass, one rounding; otherwise the direct kernel and elementwise passes after it.  groups = C_in = C_out
    (depthwise) runs :func:`depthwise_conv2d`'s kernels.
    """
    if layout not in ("NCHW", "NHWC"):
        raise LaunchError(f"conv2d: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    nhwc = layout == "NHWC"
    dt, x, w, bias = _operands(x, w, bias, 4, 4, "conv2d")
    xs, ws = _host.shape_of(x), _host.shape_of(w)
    (n, h, wd, c_in) = xs if nhwc else (xs[0], xs[2], xs[3], xs[1])
    (c_out, kh, kw, wc) = ws if nhwc else (ws[0], ws[2], ws[3], ws[1])
    groups = _groups(groups, c_in, c_out, "conv2d")
    if wc * groups != c_in:
        wshape = "(C_out, KH, KW, C_in / groups)" if nhwc else "(C_out, C_in / groups, KH, KW)"
        raise LaunchError(f"conv2d: x has {c_in} input channels, w expects {wc * groups} (w is {wshape} in {layout}, "
                          f"groups = {groups})")
    if kh < 1 or kw < 1:
        raise LaunchError(f"conv2d: the kernel must be at least 1 x 1, got {kh} x {kw}")
    _check_bias(bias, c_out, "conv2d")
    (sh, sw), (dh, dw) = _pair(stride, "conv2d: stride"), _pair(dilation, "conv2d: dilation")
    pad_h, pad_w = _padding(padding, (kh, kw), (sh, sw), (dh, dw), "conv2d")
    h_out, w_out = _extent(h, kh, sh, pad_h, dh, "H"), _extent(wd, kw, sw, pad_w, dw, "W")
    shape = (n, h_out, w_out, c_out) if nhwc else (n, c_out, h_out, w_out)
    act, residual = _epilogue(shape, dt, residual, activation, "conv2d")
    out = _output(x, out, shape, dt, "conv2d", {"x": x, "w": w, "bias": bias, "residual": residual})
    # The kernels read taps at oh * sh - top + kh * dh and zero-fill what falls outside the input, so the
    # padding after (bottom, right) is only a larger output extent.
    if 1 < groups == c_in == c_out:  # depthwise (one filter per channel): its own memory-bound kernels
        if nhwc:  # (C, KH, KW, 1) and (C, 1, KH, KW) are one memory order
            w = _host.view(w, lambda a: a.reshape(c_out, 1, kh, kw))
        _depthwise(x, w, bias, out, dt, nhwc, (n, c_in, h, wd, kh, kw, sh, sw, pad_h[0], pad_w[0], dh, dw, h_out,
                                               w_out), backend)
        return _passes_after(out, residual, act, backend)
    return _dense(x, w, bias, out, dt, nhwc,
                  (n, c_in, h, wd, c_out, kh, kw, sh, sw, pad_h[0], pad_w[0], dh, dw, h_out, w_out), backend, groups,
                  residual, act)


@planned
def depthwise_conv2d(x: Any, w: Any, bias: Any = None, stride: int | tuple[int, int] = (1, 1),
                     padding: int | tuple[Any, Any] | str = (0, 0), dilation: int | tuple[int, int] = (1, 1),
                     layout: str = "NCHW", out: Any = None, backend: str | None = None) -> Any:
    """Depthwise 2-D convolution (groups = C, one filter per channel) with zero padding, optional bias.

    w is (C, 1, KH, KW) in both layouts; x and y are (N, C, H, W) / (N, C, H_out, W_out) in "NCHW" and
    (N, H, W, C) / (N, H_out, W_out, C) in "NHWC".  padding: conv2d's forms (:func:`_padding`).
    ``conv2d(x, w, groups=C)`` with C_out = C runs the same kernels.
    """
    if layout not in ("NCHW", "NHWC"):
        raise LaunchError(f"depthwise_conv2d: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    nhwc = layout == "NHWC"
    op = "depthwise_conv2d"
    dt, x, w, bias = _operands(x, w, bias, 4, 4, op)
    xs, (wc, one, kh, kw) = _host.shape_of(x), _host.shape_of(w)
    (n, h, wd, c) = xs if nhwc else (xs[0], xs[2], xs[3], xs[1])
    if wc != c or one != 1:
        raise LaunchError(f"{op}: w must be (C, 1, KH, KW) with C = {c} (the input's channels); "
                          f"got {(wc, one, kh, kw)}")
    if kh < 1 or kw < 1:
        raise LaunchError(f"{op}: the kernel must be at least 1 x 1, got {kh} x {kw}")
    _check_bias(bias, c, op)
    (sh, sw), (dh, dw) = _pair(stride, f"{op}: stride"), _pair(dilation, f"{op}: dilation")
    pad_h, pad_w = _padding(padding, (kh, kw), (sh, sw), (dh, dw), op)
    h_out, w_out = _extent(h, kh, sh, pad_h, dh, "H"), _extent(wd, kw, sw, pad_w, dw, "W")
    out = _output(x, out, (n, h_out, w_out, c) if nhwc else (n, c, h_out, w_out), dt, op,
                  {"x": x, "w": w, "bias": bias})
    return _depthwise(x, w, bias, out, dt, nhwc, (n, c, h, wd, kh, kw, sh, sw, pad_h[0], pad_w[0], dh, dw, h_out,
                                                  w_out), backend)


def _depthwise(x: Any, w: Any, bias: Any, out: Any, dt: Any, nhwc: bool, geometry: tuple[int, ...],
               backend: str | None) -> Any:
    """The depthwise kernels into ``out``; geometry = (N, C, H, W, KH, KW, sh, sw, ph, pw, dh, dw, H_out, W_out)
    with (ph, pw) the padding before (after only makes H_out, W_out larger: the kernels zero-fill past H, W)."""
    n, c, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out = geometry
    op = "depthwise_conv2d"
    if n * c * h_out * w_out == 0:
        return out
    _check_int32(op, n * c * h * wd, n * c * h_out * w_out)
    b = w if bias is None else bias
    geometry = (c, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out)
    if nhwc and dw_nhwc_ks(kh, kw, (sh, sw), (dh, dw)) and c % _host.vector_width(dt) == 0 and _aligned(x, out, b):
        vw = _host.vector_width(dt)
        gx, gy = dw_nhwc_group(c, vw)
        tiles = n * h_out * _host.ceil_div(w_out, DWH_PX)
        dwconv2d_nhwc_k_kernel.variant(T=dt, KS=kh, S=sh).launch(
            x, w, b, out, c, h, wd, ph, pw, h_out, w_out, tiles, int(bias is not None),
            grid=(_host.ceil_div(c, vw * gx) * gx, min(_host.ceil_div(tiles, gy), MAX_GROUPS) * gy),
            group=(gx, gy), backend=backend)
    elif nhwc:
        vw = _host.vector_width(dt)
        gx, gy = dw_nhwc_group(c, vw)
        n_pix = n * h_out * w_out
        tiles = min(_host.ceil_div(n_pix, gy * DWH_PX), MAX_GROUPS)
        dwconv2d_nhwc_kernel.variant(T=dt, VEC=vw).launch(
            x, w, b, out, *geometry, n_pix, int(c % vw == 0 and _aligned(x, out)), int(bias is not None),
            grid=(_host.ceil_div(c, vw * gx) * gx, tiles * gy), group=(gx, gy), backend=backend)
    elif dw_nchw_ks(kh, kw, (sh, sw), (dh, dw)):
        dwconv2d_nchw_k_kernel.variant(T=dt, KS=kh, S=sh).launch(
            x, w, b, out, c, h, wd, ph, pw, h_out, w_out, n * c, int(bias is not None),
            grid=dw_nchw_k_grid(h_out, w_out, n * c, dt, MAX_GROUPS), group=(GROUP, 1), backend=backend)
    else:
        per_plane = _host.ceil_div(h_out * w_out, GROUP * DW_PX)
        dwconv2d_nchw_kernel.variant(T=dt).launch(
            x, w, b, out, *geometry, n * c, int(bias is not None),
            grid=(min(per_plane, MAX_GROUPS) * GROUP, min(n * c, MAX_GROUPS)), group=(GROUP, 1), backend=backend)
    return out


def dw_nchw_k_grid(h_out: int, w_out: int, planes: int, dt: Any, cap: int) -> tuple[int, int]:
    """dwconv2d_nchw_k_kernel's grid, at most ``cap`` groups an axis: the tiles of 256 (row, run) pairs of a
    plane, and the planes in packs of 256 // pairs (1 unless a plane has fewer than 128 pairs)."""
    items = h_out * _host.ceil_div(w_out, DW_RUN_BYTES // dt.itemsize)
    pack = max(1, GROUP // items)
    return min(_host.ceil_div(items, GROUP), cap) * GROUP, min(_host.ceil_div(planes, pack), cap)


def dw_nchw_ks(kh: int, kw: int, stride: tuple[int, int], dilation: tuple[int, int]) -> bool:
    """Whether NCHW depthwise takes dwconv2d_nchw_k_kernel: a square 3x3, 5x5 or 7x7 filter, stride 1 or 2 (the
    same both ways), dilation 1."""
    return kh == kw and kh in (3, 5, 7) and stride in ((1, 1), (2, 2)) and dilation == (1, 1)


def dw_nhwc_ks(kh: int, kw: int, stride: tuple[int, int], dilation: tuple[int, int]) -> bool:
    """Whether NHWC depthwise runs dwconv2d_nhwc_k_kernel (with C a multiple of the vector width): a square
    3x3 or 5x5 filter, the same stride 1 or 2 both ways, no dilation."""
    return kh == kw and kh in (3, 5) and stride[0] == stride[1] and stride[0] in (1, 2) and dilation == (1, 1)


def dw_nhwc_group(c: int, vec: int) -> tuple[int, int]:
    """The NHWC depthwise group: gx threads across the channel vectors (a power of two up to 32), 256 in all."""
    lanes = _host.ceil_div(c, vec)
    gx = 1
    while gx < lanes and gx < 32:
        gx *= 2
    return gx, GROUP // gx


__all__ = ["PACK_MAX", "conv1d", "conv2d", "conv2d_kernel", "depthwise_conv2d", "dwconv2d_nchw_k_kernel", "group_pack",
           "pack_group_weights",
           "dwconv2d_nchw_kernel", "dwconv2d_nhwc_k_kernel", "dwconv2d_nhwc_kernel"]
