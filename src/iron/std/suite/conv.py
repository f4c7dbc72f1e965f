"""Tests and benches of :mod:`iron.std.conv`: dense conv2d (NCHW and NHWC), conv1d, depthwise conv2d.

The oracle is float64 numpy written independently of the kernels: explicit zero padding, the sliding
windows of the padded input (numpy stride tricks, strided by the stride and the dilation) and one einsum
against the weights; the error scale of every output is the same einsum over |x| and |w| plus |bias|.
Shapes are named extents: N, C (input channels), H, W (or L), CO (output channels), K (kernel rows; KW
its columns when it differs), S/P/D (stride, padding, dilation; SW/PW/DW for the columns when they
differ), L (layout: 1 = NHWC), B (0 = no bias) and G (at most G groups per grid axis: the grid loops).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from iron import Depth, Expect, Setup, bench, bf16, f16, f32, test_kernel
from iron.std import _host, conv

#: The kernels bind the vector width with the dtype: one 16-byte access.
VECTORS = [{"T": f32, "VEC": 4}, {"T": f16, "VEC": 8}, {"T": bf16, "VEC": 8}]


def geometry(case: Any) -> dict[str, int]:
    """The case's convolution, every optional extent filled in."""
    s = dict(case.shape)
    g = {"N": s["N"], "C": s["C"], "H": s["H"], "W": s["W"], "CO": s.get("CO", s["C"]),
         "KH": s["K"], "KW": s.get("KW", s["K"]), "SH": s.get("S", 1), "PH": s.get("P", 0), "DH": s.get("D", 1),
         "L": s.get("L", 0), "B": s.get("B", 1)}
    g.update(SW=s.get("SW", g["SH"]), PW=s.get("PW", g["PH"]), DW=s.get("DW", g["DH"]))
    g["HO"] = (g["H"] + 2 * g["PH"] - g["DH"] * (g["KH"] - 1) - 1) // g["SH"] + 1
    g["WO"] = (g["W"] + 2 * g["PW"] - g["DW"] * (g["KW"] - 1) - 1) // g["SW"] + 1
    return g


def windows(x: np.ndarray, kh: int, kw: int, stride: tuple[int, int], pad: tuple[int, int],
            dil: tuple[int, int]) -> np.ndarray:
    """(N, C, H_out, W_out, KH, KW): every output's input window of NCHW ``x``, padding explicit."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    view = sliding_window_view(xp, (dil[0] * (kh - 1) + 1, dil[1] * (kw - 1) + 1), axis=(2, 3))
    return view[:, :, ::stride[0], ::stride[1], ::dil[0], ::dil[1]]


def grouped(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int], pad: tuple[int, int],
            dil: tuple[int, int], groups: int) -> Expect:
    """Float64 grouped conv of NCHW x and (CO, C / groups, KH, KW) w: dense_nchw per group."""
    cin_g, cout_g = x.shape[1] // groups, w.shape[0] // groups
    parts = [dense_nchw(x[:, g * cin_g:(g + 1) * cin_g], w[g * cout_g:(g + 1) * cout_g],
                        None if b is None else b[g * cout_g:(g + 1) * cout_g], stride, pad, dil) for g in range(groups)]
    return Expect(np.concatenate([p.value for p in parts], axis=1),
                  scale=np.concatenate([p.scale for p in parts], axis=1))


def dense_nchw(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
               pad: tuple[int, int], dil: tuple[int, int]) -> Expect:
    """Float64 dense conv of NCHW x and (CO, C, KH, KW) w, with the sum of |terms| as the scale."""
    win = windows(x, w.shape[2], w.shape[3], stride, pad, dil)
    # optimize: a float64 BLAS contraction over (c, i, j), 5x faster than the plain loop on the bench shape
    y = np.einsum("nchwij,ocij->nohw", win, w, optimize=True)
    scale = np.einsum("nchwij,ocij->nohw", np.abs(win), np.abs(w), optimize=True)
    if b is not None:
        y, scale = y + b[None, :, None, None], scale + np.abs(b)[None, :, None, None]
    return Expect(y, scale=scale)


def depthwise_nchw(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
                   pad: tuple[int, int], dil: tuple[int, int]) -> Expect:
    """Float64 depthwise conv of NCHW x and (C, 1, KH, KW) w."""
    win = windows(x, w.shape[2], w.shape[3], stride, pad, dil)
    y = np.einsum("nchwij,cij->nchw", win, w[:, 0])
    scale = np.einsum("nchwij,cij->nchw", np.abs(win), np.abs(w[:, 0]))
    if b is not None:
        y, scale = y + b[None, :, None, None], scale + np.abs(b)[None, :, None, None]
    return Expect(y, scale=scale)


def to_nhwc(e: Expect) -> Expect:
    return Expect(np.transpose(e.value, (0, 2, 3, 1)), scale=np.transpose(e.scale, (0, 2, 3, 1)))


def _depth(terms: int) -> Depth:
    # One sequential f32 chain per output: terms - 1 additions, the products (each rounded relative to
    # its own term: at most one step of sum|terms| together) and the bias addition; then one rounding
    # to T.  `terms` = C * KH * KW (dense) or KH * KW (depthwise).
    return Depth(steps=1, f32_steps=terms + 1)


# ---------------------------------------------------------------- dense conv2d

def _conv2d_torch(x, w, bias, y, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out, n_pix, nhwc,
                  vec_ok, has_bias, groups):
    import torch.nn.functional as F

    b = bias if has_bias else None
    if nhwc:  # channels_last views: cuDNN's NHWC path; the output's NHWC view is contiguous
        out = F.conv2d(x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2), b, (sh, sw), (ph, pw), (dh, dw), groups)
        return out.permute(0, 2, 3, 1)
    return F.conv2d(x, w, b, (sh, sw), (ph, pw), (dh, dw), groups)


def _conv2d_numpy(x, w, bias, y, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out, n_pix, nhwc,
                  vec_ok, has_bias, groups):
    xs, ws = (x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2)) if nhwc else (x, w)
    cin_g, cout_g = c_in // groups, c_out // groups
    win = windows(xs.astype(np.float32), kh, kw, (sh, sw), (ph, pw), (dh, dw))
    out = np.concatenate([np.einsum("nchwij,ocij->nohw", win[:, g * cin_g:(g + 1) * cin_g],
                                    ws[g * cout_g:(g + 1) * cout_g].astype(np.float32), optimize=True)
                          for g in range(groups)], axis=1)
    if has_bias:
        out += bias.astype(np.float32)[None, :, None, None]
    return (out.transpose(0, 2, 3, 1) if nhwc else out).astype(y.dtype)


def _dense_shape(n, c, h, w, co, k, **extra) -> dict[str, int]:
    return {"N": n, "C": c, "H": h, "W": w, "CO": co, "K": k, **extra}


DENSE_TESTS = [
    _dense_shape(2, 5, 9, 7, 6, 3, S=2, SW=1, P=1, PW=2, DW=2),         # every axis different, NCHW
    _dense_shape(2, 5, 9, 7, 6, 3, S=2, SW=1, P=1, PW=2, DW=2, L=1),    # the same in NHWC (scalar path)
    _dense_shape(1, 8, 6, 5, 9, 3, KW=2, P=1, L=1, B=0),                # NHWC vector path, 3x2, no bias
    _dense_shape(1, 3, 6, 7, 4, 5, KW=3, S=2, P=2),                     # 5x3, stride 2
    _dense_shape(1, 4, 11, 9, 5, 3, P=2, D=2, L=1),                     # dilation 2
    _dense_shape(2, 8, 13, 13, 70, 1, L=1),                             # 1x1: two pixel and channel tiles
    _dense_shape(1, 20, 4, 5, 3, 1, P=1),                               # C > KC (ragged chunk); a padded 1x1
    _dense_shape(1, 1, 1, 1, 1, 1),                                     # the degenerate 1x1 of 1x1
    _dense_shape(2, 6, 5, 7, 9, 3, P=1, G=3),                           # 3 groups (2 channels in, 3 out each)
    _dense_shape(1, 16, 4, 5, 12, 3, P=1, L=1, G=2),                    # NHWC groups, the vector path
]
DENSE_BENCH = {"interp": [_dense_shape(1, 8, 8, 8, 8, 3, P=1), _dense_shape(1, 8, 8, 8, 8, 3, P=1, L=1)],
               "vulkan": [_dense_shape(1, 32, 28, 28, 32, 3, P=1), _dense_shape(1, 32, 28, 28, 32, 3, P=1, L=1)],
               "*": [_dense_shape(32, 64, 56, 56, 64, 3, P=1), _dense_shape(32, 64, 56, 56, 64, 3, P=1, L=1)]}


@test_kernel(conv.conv2d_kernel, shapes=DENSE_TESTS, bindings=VECTORS, name="std/conv/conv2d")
@bench(conv.conv2d_kernel, shapes=DENSE_BENCH, bindings=VECTORS, name="std/conv/conv2d",
       reference={"cuda": _conv2d_torch, "*": _conv2d_numpy})
def conv2d_setup(case):
    g = geometry(case)
    n, c, co, kh, kw, nhwc = g["N"], g["C"], g["CO"], g["KH"], g["KW"], g["L"]
    groups = dict(case.shape).get("G", 1)
    cin_g = c // groups
    x = case.randn(n, g["H"], g["W"], c) if nhwc else case.randn(n, c, g["H"], g["W"])
    w = case.randn(co, kh, kw, cin_g) if nhwc else case.randn(co, cin_g, kh, kw)
    y = case.empty(n, g["HO"], g["WO"], co) if nhwc else case.empty(n, co, g["HO"], g["WO"])
    n_pix = n * g["HO"] * g["WO"]
    stride, pad, dil = (g["SH"], g["SW"]), (g["PH"], g["PW"]), (g["DH"], g["DW"])

    def oracle(x, w, bias, y, *_):
        if nhwc:
            return {"y": to_nhwc(grouped(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2),
                                         bias if g["B"] else None, stride, pad, dil, groups))}
        return {"y": grouped(x, w, bias if g["B"] else None, stride, pad, dil, groups)}

    vec_ok = int(nhwc and cin_g % case["VEC"] == 0)
    return Setup(args=[x, w, case.randn(co), y, c, g["H"], g["W"], co, kh, kw, stride[0], stride[1], pad[0],
                       pad[1], dil[0], dil[1], g["HO"], g["WO"], n_pix, nhwc, vec_ok, g["B"], groups],
                 grid=(min(_host.ceil_div(n_pix, conv.BP), conv.MAX_GROUPS) * conv.GROUP,
                       _host.ceil_div(co // groups, conv.BC), groups),
                 group=(conv.GROUP, 1), oracle=oracle, depth=_depth(cin_g * kh * kw),
                 flops=2 * n_pix * co * cin_g * kh * kw)


# ---------------------------------------------------------------- conv1d (the dense kernel with H = KH = 1)

def _conv1d_torch(x, w, bias, y, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out, n_pix, nhwc,
                  vec_ok, has_bias, groups):
    import torch.nn.functional as F

    return F.conv1d(x, w, bias if has_bias else None, sw, pw, dw, groups)


def _conv1d_numpy(x, w, bias, y, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out, n_pix, nhwc,
                  vec_ok, has_bias, groups):
    out = _conv2d_numpy(x[:, :, None, :], w[:, :, None, :], bias, y, c_in, h, wd, c_out, kh, kw, sh, sw, ph, pw,
                        dh, dw, h_out, w_out, n_pix, nhwc, vec_ok, has_bias, groups)
    return out[:, :, 0, :]


def _conv1d_shape(n, c, length, co, k, **extra) -> dict[str, int]:
    return {"N": n, "C": c, "Lx": length, "CO": co, "K": k, **extra}


CONV1D_TESTS = [_conv1d_shape(2, 5, 17, 3, 3, S=2, P=1, D=2), _conv1d_shape(1, 24, 9, 66, 1, B=0),
                _conv1d_shape(1, 2, 13, 4, 5, P=2)]
CONV1D_BENCH = {"interp": [_conv1d_shape(1, 16, 64, 16, 3, P=1)], "vulkan": [_conv1d_shape(1, 64, 512, 64, 3, P=1)],
                "*": [_conv1d_shape(8, 512, 4096, 512, 3, P=1)]}


@test_kernel(conv.conv2d_kernel, shapes=CONV1D_TESTS, bindings=VECTORS, name="std/conv/conv1d")
@bench(conv.conv2d_kernel, shapes=CONV1D_BENCH, bindings=VECTORS, name="std/conv/conv1d",
       reference={"cuda": _conv1d_torch, "*": _conv1d_numpy})
def conv1d_setup(case):
    s = dict(case.shape)
    n, c, length, co, k = s["N"], s["C"], s["Lx"], s["CO"], s["K"]
    stride, pad, dil, has_bias = s.get("S", 1), s.get("P", 0), s.get("D", 1), s.get("B", 1)
    l_out = (length + 2 * pad - dil * (k - 1) - 1) // stride + 1
    n_pix = n * l_out

    def oracle(x, w, bias, y, *_):
        e = dense_nchw(x[:, :, None, :], w[:, :, None, :], bias if has_bias else None, (1, stride), (0, pad),
                       (1, dil))
        return {"y": Expect(e.value[:, :, 0, :], scale=e.scale[:, :, 0, :])}

    return Setup(args=[case.randn(n, c, length), case.randn(co, c, k), case.randn(co), case.empty(n, co, l_out),
                       c, 1, length, co, 1, k, 1, stride, 0, pad, 1, dil, 1, l_out, n_pix, 0, 0, has_bias, 1],
                 grid=(min(_host.ceil_div(n_pix, conv.BP), conv.MAX_GROUPS) * conv.GROUP,
                       _host.ceil_div(co, conv.BC)),
                 group=(conv.GROUP, 1), oracle=oracle, depth=_depth(c * k), flops=2 * n_pix * co * c * k)


# ---------------------------------------------------------------- depthwise conv2d

def _depthwise_torch(x, w, bias, y, ch, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out, *rest):
    """NCHW (rest: planes, has_bias) or NHWC (rest: n_pix, vec_ok, has_bias, through channels_last views)."""
    import torch.nn.functional as F

    b = bias if rest[-1] else None
    if len(rest) == 3:
        return F.conv2d(x.permute(0, 3, 1, 2), w, b, (sh, sw), (ph, pw), (dh, dw), ch).permute(0, 2, 3, 1)
    return F.conv2d(x, w, b, (sh, sw), (ph, pw), (dh, dw), ch)


def _depthwise_numpy(x, w, bias, y, ch, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, h_out, w_out, *rest):
    has_bias, nhwc = rest[-1], len(rest) == 3
    xs = x.transpose(0, 3, 1, 2) if nhwc else x
    win = windows(xs.astype(np.float32), kh, kw, (sh, sw), (ph, pw), (dh, dw))
    out = np.einsum("nchwij,cij->nchw", win, w[:, 0].astype(np.float32), optimize=True)
    if has_bias:
        out += bias.astype(np.float32)[None, :, None, None]
    return (out.transpose(0, 2, 3, 1) if nhwc else out).astype(y.dtype)


DW_TESTS = [
    _dense_shape(2, 5, 9, 7, 5, 3, S=2, SW=1, P=1, PW=2, DW=2),
    _dense_shape(1, 8, 13, 11, 8, 5, P=2, B=0),
    _dense_shape(2, 3, 6, 13, 3, 3, D=2, P=2),
    _dense_shape(1, 16, 12, 12, 16, 3, S=2, P=1),
    _dense_shape(1, 1, 1, 1, 1, 1),
    _dense_shape(1, 8, 3, 3, 8, 3, S=2, P=0),
]
#: NHWC only: C = 40 and 264 put more than one channel group in a row (264: past 32 lanes of 8); 7x7 = 49
#: taps take 2 (f32) or 4 (f16/bf16) passes of staged weights.
DW_NHWC_TESTS = DW_TESTS + [_dense_shape(1, 40, 5, 4, 40, 3, P=1), _dense_shape(1, 264, 2, 3, 264, 7, P=3)]
#: On CUDA 3x3 at stride 1 and 2 (MobileNet's downsampling).  NHWC always runs its generic kernel; NCHW sends
#: these two to dwconv2d_nchw_k_kernel (DWK_BENCH has the same shapes), so the generic NCHW rows compare.
DW_BENCH = {"interp": [_dense_shape(1, 16, 12, 12, 16, 3, P=1)], "vulkan": [_dense_shape(2, 64, 28, 28, 64, 3, P=1)],
            "*": [_dense_shape(32, 256, 56, 56, 256, 3, P=1), _dense_shape(32, 256, 112, 112, 256, 3, S=2, P=1)]}


def _depthwise_common(case: Any) -> tuple[dict[str, int], np.ndarray, np.ndarray, list[int], Any]:
    g = geometry(case)
    w = case.randn(g["C"], 1, g["KH"], g["KW"])
    stride, pad, dil = (g["SH"], g["SW"]), (g["PH"], g["PW"]), (g["DH"], g["DW"])
    scalars = [g["C"], g["H"], g["W"], g["KH"], g["KW"], *stride, *pad, *dil, g["HO"], g["WO"]]

    def expect(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> Expect:
        return depthwise_nchw(x, w, bias if g["B"] else None, stride, pad, dil)
    return g, w, case.randn(g["C"]), scalars, expect


@test_kernel(conv.dwconv2d_nchw_kernel, shapes=DW_TESTS, name="std/conv/depthwise_nchw")
@bench(conv.dwconv2d_nchw_kernel, shapes=DW_BENCH, name="std/conv/depthwise_nchw",
       reference={"cuda": _depthwise_torch, "*": _depthwise_numpy})
def depthwise_nchw_setup(case):
    g, w, bias, scalars, expect = _depthwise_common(case)
    n, c = g["N"], g["C"]
    planes = n * c
    return Setup(args=[case.randn(n, c, g["H"], g["W"]), w, bias, case.empty(n, c, g["HO"], g["WO"]), *scalars,
                       planes, g["B"]],
                 grid=(min(_host.ceil_div(g["HO"] * g["WO"], conv.GROUP * conv.DW_PX), conv.MAX_GROUPS) * conv.GROUP,
                       min(planes, conv.MAX_GROUPS)),
                 group=(conv.GROUP, 1), oracle=lambda x, w, bias, *_: {"y": expect(x, w, bias)},
                 depth=_depth(g["KH"] * g["KW"]), flops=2 * planes * g["HO"] * g["WO"] * g["KH"] * g["KW"])


@test_kernel(conv.dwconv2d_nhwc_kernel, shapes=DW_NHWC_TESTS, bindings=VECTORS, name="std/conv/depthwise_nhwc")
@bench(conv.dwconv2d_nhwc_kernel, shapes=DW_BENCH, bindings=VECTORS, name="std/conv/depthwise_nhwc",
       reference={"cuda": _depthwise_torch, "*": _depthwise_numpy})
def depthwise_nhwc_setup(case):
    g, w, bias, scalars, expect = _depthwise_common(case)
    n, c, vec = g["N"], g["C"], case["VEC"]
    n_pix = n * g["HO"] * g["WO"]
    gx, gy = conv.dw_nhwc_group(c, vec)
    tiles = min(_host.ceil_div(n_pix, gy * conv.DWH_PX), conv.MAX_GROUPS)
    return Setup(args=[case.randn(n, g["H"], g["W"], c), w, bias, case.empty(n, g["HO"], g["WO"], c), *scalars,
                       n_pix, int(c % vec == 0), g["B"]],
                 grid=(_host.ceil_div(c, vec * gx) * gx, tiles * gy), group=(gx, gy),
                 oracle=lambda x, w, bias, *_: {"y": to_nhwc(expect(x.transpose(0, 3, 1, 2), w, bias))},
                 depth=_depth(g["KH"] * g["KW"]), flops=2 * n_pix * c * g["KH"] * g["KW"])


# ---------------------------------------------------------------- depthwise NCHW, KS x KS, stride 1 or 2

def _generic_args(x, w, bias, y, ch, h, wd, ph, pw, h_out, w_out, planes, has_bias) -> tuple[Any, ...]:
    """dwconv2d_nchw_k_kernel's arguments as the generic NCHW kernel's (KH = KW = KS, dilation 1).  The stride
    (a variant, not an argument) follows from the extents: stride 1 gives H + 2 PH - KS + 1 rows and columns
    likewise, stride 2 gives that only where a single output fits, which either stride computes alike."""
    k = w.shape[2]
    s = 1 if (h_out, w_out) == (h + 2 * ph - k + 1, wd + 2 * pw - k + 1) else 2
    return x, w, bias, y, ch, h, wd, k, k, s, s, ph, pw, 1, 1, h_out, w_out, planes, has_bias


def _depthwise_k_torch(*args):
    return _depthwise_torch(*_generic_args(*args))


def _depthwise_k_numpy(*args):
    return _depthwise_numpy(*_generic_args(*args))


#: K is the filter's size and the KS variant the row runs, S the stride and the S variant (the setup binds
#: both: a shape never meets another variant).  W_out = W + 2 PW - K + 1 (at S = 1) against runs of 4 (f32)
#: and 8 (f16/bf16) outputs: 11 and 9 are multiples of neither, 12 of 4 only, 3 falls short of one run; PW past K // 2 gives windows of padding alone; H = 1 puts
#: K - 1 of the K rows in padding.  G caps each grid axis at G groups: 70 rows of 8 (f32) or 4 (f16/bf16)
#: runs are 3 or 2 tiles of 256 per plane, and there are 3 planes, so one group walks both loops; planes of 3
#: (row, run) pairs go 85 to a group (the 256th thread idles), and 100 of them take one group two passes.
DWK_TESTS = [
    _dense_shape(2, 3, 9, 11, 3, 3, P=1),              # W_out 11
    _dense_shape(1, 4, 6, 5, 4, 3, B=0),               # padding 0; W_out 3 < one run; no bias
    _dense_shape(1, 2, 1, 6, 2, 3, P=1),               # H = 1
    _dense_shape(1, 1, 1, 1, 1, 3, P=1),               # a 1 x 1 image
    _dense_shape(1, 3, 7, 10, 3, 5, P=1, PW=3),        # asymmetric, PW past K // 2; W_out 12
    _dense_shape(2, 2, 1, 3, 2, 5, P=2, B=0),          # H = 1, W_out 3
    _dense_shape(1, 3, 70, 30, 3, 5, P=2, G=1),        # one group walks 2-3 tiles x 3 planes
    _dense_shape(2, 50, 3, 4, 50, 3, P=1, G=1),        # 3 pairs a plane: packs of 85 planes, 2 passes
    _dense_shape(1, 2, 8, 9, 2, 7, P=3),               # W_out 9
    _dense_shape(1, 3, 5, 7, 3, 7, P=3, PW=1, B=0),    # asymmetric; W_out 3
    _dense_shape(1, 1, 1, 1, 1, 7, P=3),               # a 1 x 1 image
    # stride 2: windows of S (R - 1) + KS inputs; W_out 6, 9, 4, 1, 3 and one group walking 35 rows
    _dense_shape(2, 3, 9, 11, 3, 3, S=2, P=1),
    _dense_shape(1, 2, 17, 20, 2, 5, S=2, P=2, PW=1, B=0),   # asymmetric
    _dense_shape(1, 3, 8, 8, 3, 7, S=2, P=3),
    _dense_shape(1, 1, 2, 2, 1, 3, S=2, P=1),          # one output
    _dense_shape(1, 2, 6, 8, 2, 3, S=2, B=0),          # no padding: the last column never read
    _dense_shape(1, 3, 70, 30, 3, 3, S=2, P=1, G=1),
]
DWK_BENCH = {"interp": [_dense_shape(1, 16, 12, 12, 16, k, P=k // 2) for k in (3, 5, 7)]
             + [_dense_shape(1, 16, 24, 24, 16, 3, S=2, P=1)],
             "vulkan": [_dense_shape(2, 64, 28, 28, 64, k, P=k // 2) for k in (3, 5, 7)]
             + [_dense_shape(2, 64, 56, 56, 64, 3, S=2, P=1)],
             "*": [_dense_shape(32, 256, 56, 56, 256, k, P=k // 2) for k in (3, 5, 7)]
             + [_dense_shape(32, 256, 112, 112, 256, 3, S=2, P=1)]}


@test_kernel(conv.dwconv2d_nchw_k_kernel, shapes=DWK_TESTS, name="std/conv/depthwise_nchw_k")
@bench(conv.dwconv2d_nchw_k_kernel, shapes=DWK_BENCH, name="std/conv/depthwise_nchw_k",
       reference={"cuda": _depthwise_k_torch, "*": _depthwise_k_numpy})
def depthwise_nchw_k_setup(case):
    g, w, bias, _, expect = _depthwise_common(case)
    n, c, k, stride = g["N"], g["C"], g["KH"], g["SH"]
    assert k == g["KW"] and stride == g["SW"] in (1, 2) and g["DH"] == g["DW"] == 1, \
        "a square filter, one stride of 1 or 2, dilation 1"
    planes = n * c
    cap = dict(case.shape).get("G", conv.MAX_GROUPS)
    return Setup(args=[case.randn(n, c, g["H"], g["W"]), w, bias, case.empty(n, c, g["HO"], g["WO"]), c, g["H"],
                       g["W"], g["PH"], g["PW"], g["HO"], g["WO"], planes, g["B"]],
                 grid=conv.dw_nchw_k_grid(g["HO"], g["WO"], planes, case.T, cap), group=(conv.GROUP, 1),
                 oracle=lambda x, w, bias, *_: {"y": expect(x, w, bias)}, binding={"KS": k, "S": stride},
                 depth=_depth(k * k), flops=2 * planes * g["HO"] * g["WO"] * k * k)


# ---------------------------------------------------------------- depthwise NHWC, KS x KS, stride 1 or 2

def _nhwc_generic_args(x, w, bias, y, ch, h, wd, ph, pw, h_out, w_out, tiles, has_bias) -> tuple[Any, ...]:
    """dwconv2d_nhwc_k_kernel's arguments as the generic NHWC kernel's (as _generic_args does for NCHW)."""
    k = w.shape[2]
    s = 1 if (h_out, w_out) == (h + 2 * ph - k + 1, wd + 2 * pw - k + 1) else 2
    n_pix = x.shape[0] * h_out * w_out
    return x, w, bias, y, ch, h, wd, k, k, s, s, ph, pw, 1, 1, h_out, w_out, n_pix, 1, has_bias


def _depthwise_nhwc_k_torch(*args):
    return _depthwise_torch(*_nhwc_generic_args(*args))


def _depthwise_nhwc_k_numpy(*args):
    return _depthwise_numpy(*_nhwc_generic_args(*args))


#: C a multiple of 8 (the kernel's contract: whole 16-byte vectors of f16/bf16), one tile = 4 outputs of a row.
#: lavapipe runs 3x3 at stride 1 and 5x5 at stride 2 (6 of the 12 specialisations, each ~4 s to compile).
#: W_out 11 (a short last tile), 3 (less than a tile); no padding; H = 1; a 1 x 1 image; PW past K // 2; C =
#: 24 (a group of 4 lanes, 3 busy), 264 (two channel groups); G caps the tile axis so one group walks it.
DWKH_TESTS = [
    _dense_shape(2, 8, 9, 11, 8, 3, P=1),
    _dense_shape(1, 16, 6, 5, 16, 3, B=0),
    _dense_shape(1, 24, 1, 6, 24, 3, P=1),
    _dense_shape(1, 8, 1, 1, 8, 3, P=1),
    _dense_shape(1, 40, 7, 10, 40, 5, P=1, PW=3),
    _dense_shape(2, 16, 9, 11, 16, 3, S=2, P=1),
    _dense_shape(1, 8, 17, 20, 8, 5, S=2, P=2, PW=1, B=0),
    _dense_shape(1, 264, 4, 6, 264, 3, S=2, P=1),
    _dense_shape(1, 8, 2, 2, 8, 3, S=2, P=1),
    _dense_shape(1, 8, 70, 30, 8, 3, S=2, P=1, G=1),
]


@test_kernel(conv.dwconv2d_nhwc_k_kernel, shapes={"vulkan": [DWKH_TESTS[0], DWKH_TESTS[6]], "*": DWKH_TESTS},
             name="std/conv/depthwise_nhwc_k")
@bench(conv.dwconv2d_nhwc_k_kernel, shapes=DW_BENCH, name="std/conv/depthwise_nhwc_k",
       reference={"cuda": _depthwise_nhwc_k_torch, "*": _depthwise_nhwc_k_numpy})
def depthwise_nhwc_k_setup(case):
    g, w, bias, _, expect = _depthwise_common(case)
    n, c, k, stride = g["N"], g["C"], g["KH"], g["SH"]
    assert k == g["KW"] and stride == g["SW"] in (1, 2) and g["DH"] == g["DW"] == 1 and c % 8 == 0, \
        "a square filter, one stride of 1 or 2, dilation 1, whole vectors of channels"
    vec = _host.vector_width(case.T)
    gx, gy = conv.dw_nhwc_group(c, vec)
    tiles = n * g["HO"] * _host.ceil_div(g["WO"], conv.DWH_PX)
    cap = dict(case.shape).get("G", conv.MAX_GROUPS)
    return Setup(args=[case.randn(n, g["H"], g["W"], c), w, bias, case.empty(n, g["HO"], g["WO"], c), c, g["H"],
                       g["W"], g["PH"], g["PW"], g["HO"], g["WO"], tiles, g["B"]],
                 grid=(_host.ceil_div(c, vec * gx) * gx, min(_host.ceil_div(tiles, gy), cap) * gy), group=(gx, gy),
                 oracle=lambda x, w, bias, *_: {"y": to_nhwc(expect(x.transpose(0, 3, 1, 2), w, bias))},
                 binding={"KS": k, "S": stride}, depth=_depth(k * k), flops=2 * n * g["HO"] * g["WO"] * c * k * k)
