"""Tests and benches of :mod:`iron.std.conv_mma`: the implicit-GEMM convolution on the matrix units.

The oracle is suite/conv.py's float64 one (explicit zero padding, sliding windows, one einsum), per group,
plus the residual and the activation in float64.  Shapes are conv.py's named extents, plus G (groups), O
(1: the output in NCHW), R (1: a residual) and B (0: no bias).  The kernel's configuration is the device's
(:func:`~iron.std.conv_mma.conv_config`), or the small portable one where the device has no matrix unit
(lavapipe), as gemm's suite does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iron import Expect, Setup, Then, bench, bf16, f16, f32, test_kernel
from iron.jit.device import device_traits

from ..conv_mma import conv_config, conv_grid, conv_mma, conv_tiles
from ..conv_wg import WG_CONV_DEFAULT, conv_wg, conv_wg_grid
from ..conv_ws import (conv_ws, conv_ws_finish, conv_ws_finish_geometry, conv_ws_geometry, conv_ws_part_shape,
                       patch_width)
from ..gemm import portable_small
from .conv import geometry, grouped
from .gemm import _act64, gemm_depth


def _shape(n, c, h, w, co, k, **extra) -> dict[str, int]:
    return {"N": n, "C": c, "H": h, "W": w, "CO": co, "K": k, **extra}


# Every tail: a 3 x 3 "same" tile whose pixels end mid-tile and whose channels (40 = one K step of 32 and a
# quarter) end mid-step; stride, dilation and asymmetric extents with NCHW output and a residual (pixels per
# image not a multiple of 8: the NCHW store element by element); 1 x 1; groups (4 of 8 channels in, 6 out:
# the channel tile mostly empty); more output channels than one tile (136) and NCHW output with whole 8-pixel
# runs (8 x 8 images); no bias.
SHAPES = [_shape(2, 40, 9, 10, 72, 3, P=1),
          _shape(2, 16, 7, 5, 24, 3, KW=2, S=2, SW=1, P=1, PW=2, DW=2, O=1, R=1),
          _shape(1, 32, 5, 6, 16, 1, R=1, B=0),
          _shape(2, 32, 6, 5, 24, 3, P=1, G=4, O=1),
          _shape(1, 24, 8, 8, 136, 3, S=2, P=1, O=1, R=1)]
#: lavapipe compiles the matrix kernels slowly: two shapes there.
VULKAN = [SHAPES[0], SHAPES[3]]
BINDINGS = [{"T": f16, "ACT": "none"}, {"T": bf16, "ACT": "relu"}]
#: bf16 fragments cannot come from shared memory on SPIR-V (bf16 is stored as bits there): f16 on vulkan.
MORE = [{"T": f16, "ACT": "silu"}, {"T": bf16, "ACT": "gelu_tanh"}]
BENCH = {"interp": [_shape(1, 16, 8, 8, 16, 3, P=1)], "vulkan": [],
         "*": [_shape(32, 64, 56, 56, 64, 3, P=1), _shape(8, 320, 64, 64, 320, 3, P=1)]}


def conv_binding(case: Any, cout_g: int, tiles: int) -> dict[str, Any]:
    """The device's configuration (conv_config), else the small portable one (lavapipe: no matrix unit)."""
    traits = device_traits(case.backend)
    return conv_config(traits, case["T"], cout_g, tiles) or portable_small(traits.lane_width)


def _conv_torch(x, w, bias, res, y, c_in, h, wd, c_out, kw, sh, sw, ph, pw, dh, dw, h_out, w_out, n_pix, taps,
                cin_g, cout_g, nchw, has_bias, has_res):
    import torch.nn.functional as F

    out = F.conv2d(x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2), bias if has_bias else None, (sh, sw), (ph, pw),
                   (dh, dw), c_in // cin_g)
    return out if nchw else out.permute(0, 2, 3, 1)


def _conv_numpy(x, w, bias, res, y, c_in, h, wd, c_out, kw, sh, sw, ph, pw, dh, dw, h_out, w_out, n_pix, taps,
                cin_g, cout_g, nchw, has_bias, has_res):
    e = grouped(x.transpose(0, 3, 1, 2).astype(np.float32), w.transpose(0, 3, 1, 2).astype(np.float32),
                bias.astype(np.float32) if has_bias else None, (sh, sw), (ph, pw), (dh, dw), c_in // cin_g)
    return (e.value if nchw else e.value.transpose(0, 2, 3, 1)).astype(y.dtype)


def _ws_stride(x, wd_s, sh) -> tuple[int, int]:
    """conv_ws's strides from its arguments: W / wd_s along W."""
    return sh, x.shape[2] // wd_s


def _conv_ws_torch(x, w, bias, res, y, n, c_in, h, wd_s, c_out, kh, kw, sh, ph, pw, dh, dw, h_out, w_out, nchw,
                   has_bias, has_res, cin_g):
    import torch.nn.functional as F

    out = F.conv2d(x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2), bias if has_bias else None, _ws_stride(x, wd_s, sh),
                   (ph, pw), (dh, dw), c_in // cin_g)
    return out if nchw else out.permute(0, 2, 3, 1)


def _conv_ws_numpy(x, w, bias, res, y, n, c_in, h, wd_s, c_out, kh, kw, sh, ph, pw, dh, dw, h_out, w_out, nchw,
                   has_bias, has_res, cin_g):
    e = grouped(x.transpose(0, 3, 1, 2).astype(np.float32), w.transpose(0, 3, 1, 2).astype(np.float32),
                bias.astype(np.float32) if has_bias else None, _ws_stride(x, wd_s, sh), (ph, pw), (dh, dw),
                c_in // cin_g)
    return (e.value if nchw else e.value.transpose(0, 2, 3, 1)).astype(y.dtype)


@test_kernel(conv_mma, shapes={"vulkan": VULKAN, "*": SHAPES}, bindings=BINDINGS[:1], name="std/conv_mma/mma")
@test_kernel(conv_mma, shapes={"vulkan": [], "*": SHAPES}, bindings=BINDINGS[1:] + MORE, name="std/conv_mma/variants")
@bench(conv_mma, shapes=BENCH, bindings=[{"T": bf16, "ACT": "none"}], name="std/conv_mma/mma",
       reference={"cuda": _conv_torch, "*": _conv_numpy})
def mma_setup(case):
    return _setup(case, conv_binding)


# Warpgroups (mma_wg: CUDA sm_90, and the interpreter): 128 x 128 and 128 x 256 tiles, a synchronous ring.
WG_BINDINGS = [{"T": f16, "ACT": "none", **WG_CONV_DEFAULT}, {"T": bf16, "ACT": "relu", "BN": 256, "STAGES": 4,
                                                             "PENDING": 1},
               {"T": bf16, "ACT": "silu", "BN": 128, "STAGES": 3, "PENDING": 0}]


@test_kernel(conv_wg, shapes={"vulkan": [], "*": SHAPES}, bindings=WG_BINDINGS, name="std/conv_mma/wg")
@bench(conv_wg, shapes={**BENCH, "vulkan": []}, bindings=[{"T": bf16, "ACT": "none", **WG_CONV_DEFAULT}],
       name="std/conv_mma/wg", reference={"cuda": _conv_torch, "*": _conv_numpy})
def wg_setup(case):
    return _setup(case, None)


# Warp roles and tile copies (conv_ws: CUDA sm_90, and the interpreter): one group, channels-last, stride 1 or 2
# along an even W.  Patches past the image on both axes and channels ending mid-step (40); dilation with
# asymmetric kernel and padding, a residual; an image one row high (conv1d's patches, 1 x 64) with more channels
# than a 128-wide tile; 1 x 1 without bias; 8 x 8 patches exactly tiling 16 x 16 (an odd patch count: the last
# tile's second patch lies past the last image); stride 2 (a box per patch row from one column parity) with
# padding on both sides, and conv1d at stride 2 with dilation; NCHW output with rows of 13 (no 16-byte runs: a
# lane a pixel) and a residual, and with rows of 24 (aligned 8-pixel runs) in 32-wide patches that reach past
# the row's end, past a 128-wide tile.
WS_SHAPES = [_shape(2, 40, 9, 10, 72, 3, P=1),
             _shape(2, 16, 7, 5, 24, 3, KW=2, P=1, PW=2, DW=2, R=1),
             _shape(2, 24, 1, 70, 136, 1, KW=3, PW=1),
             _shape(1, 32, 5, 6, 16, 1, R=1, B=0),
             _shape(1, 16, 24, 24, 24, 3, P=1),
             _shape(2, 24, 9, 12, 40, 3, S=2, P=1, R=1),
             _shape(1, 16, 1, 40, 24, 1, KW=3, S=1, SW=2, PW=2, DW=2),
             _shape(2, 16, 7, 13, 24, 3, P=1, O=1, R=1),
             _shape(1, 16, 4, 24, 136, 3, P=1, O=1)]
# Groups of 64 channels in and out (packed ResNeXt groups) on 64-wide tiles: each tile and K step within one
# group; 128 channels a group on 64- and 128-wide tiles, with stride 2.
WS_GROUPED = [_shape(1, 128, 6, 7, 128, 3, P=1, G=2, R=1), _shape(2, 256, 5, 8, 256, 3, S=2, P=1, G=2)]
WS_GROUPED_BINDINGS = [{"T": bf16, "ACT": "relu", "BN": 64, "STAGES": 4}]
WS_BINDINGS = [{"T": f16, "ACT": "none", "BN": 128, "STAGES": 4},
               {"T": bf16, "ACT": "relu", "BN": 256, "STAGES": 3},
               {"T": bf16, "ACT": "silu", "BN": 128, "STAGES": 6, "BOX": "rows"},
               {"T": f16, "ACT": "gelu_tanh", "BN": 64, "STAGES": 4},
               {"T": bf16, "ACT": "none", "BN": 160, "STAGES": 4}]


# K split into ranges, then conv_ws_finish adds them (the activation is the finish's; ACT "none" here, the host's
# tests run the others): channel and pixel tails, one K step in three ranges (two empty), NCHW rows of 13 with a
# residual, and 136 NCHW channels past a 128-wide tile.
WS_SPLIT = [WS_SHAPES[0], WS_SHAPES[3], WS_SHAPES[7], WS_SHAPES[8]]
WS_SPLIT_BINDINGS = [{"T": bf16, "ACT": "none", "BN": 128, "STAGES": 4, "SPLIT": 2},
                     {"T": f16, "ACT": "none", "BN": 64, "STAGES": 4, "SPLIT": 3}]


@test_kernel(conv_ws, shapes={"vulkan": [], "*": WS_SHAPES}, bindings=WS_BINDINGS, name="std/conv_mma/ws")
@test_kernel(conv_ws, shapes={"vulkan": [], "*": WS_SPLIT}, bindings=WS_SPLIT_BINDINGS, name="std/conv_mma/ws_split")
@test_kernel(conv_ws, shapes={"vulkan": [], "*": WS_GROUPED}, bindings=WS_GROUPED_BINDINGS,
             name="std/conv_mma/ws_groups")
@bench(conv_ws, shapes={**BENCH, "vulkan": []}, bindings=[{"T": bf16, "ACT": "none", "BN": 128, "STAGES": 4}],
       name="std/conv_mma/ws", reference={"cuda": _conv_ws_torch, "*": _conv_ws_numpy})
def ws_setup(case):
    g = geometry(case)
    s = dict(case.shape)
    groups, has_res, nchw = s.get("G", 1), s.get("R", 0), s.get("O", 0)
    n, c, co, kh, kw = g["N"], g["C"], g["CO"], g["KH"], g["KW"]
    cin_g = c // groups
    ho, wo = g["HO"], g["WO"]
    out_shape = (n, co, ho, wo) if nchw else (n, ho, wo, co)
    stride, pad, dil = (g["SH"], g["SW"]), (g["PH"], g["PW"]), (g["DH"], g["DW"])
    binding = {"PW": patch_width(ho, wo), "S": g["SW"], **({"BOX": "rows"} if g["SW"] == 2 else {})}
    split = case.binding.get("SPLIT", 1)
    full = {"BN": case["BN"], "SPLIT": split, **binding}
    grid, group = conv_ws_geometry(full, n, ho, wo, co)
    part = case.empty(*conv_ws_part_shape(full, n, ho, wo, co), dtype=f32) if split > 1 else case.empty(1, dtype=f32)
    then = [Then(conv_ws_finish.variant(T=case["T"], ACT=case["ACT"], SPLIT=split),
                 ["part", "bias", "res", "y", n, ho, wo, co, binding["PW"], part.shape[-1], nchw, g["B"], has_res],
                 *conv_ws_finish_geometry(n, ho, wo, co))] if split > 1 else []
    return Setup(args=[case.randn(n, g["H"], g["W"], c), case.randn(co, kh, kw, cin_g), case.randn(co),
                       case.randn(*out_shape), case.empty(*out_shape), part, n, c, g["H"], g["W"] // g["SW"], co, kh,
                       kw, g["SH"], *pad, *dil, ho, wo, nchw, g["B"], has_res, cin_g],
                 grid=grid, group=group, binding=binding, outputs=["y"], then=then,
                 oracle=_oracle(case, g, (stride, pad, dil), groups, nchw, has_res),
                 depth=gemm_depth(cin_g * kh * kw + has_res, bool(g["B"]), case["ACT"]),
                 flops=2 * n * ho * wo * co * cin_g * kh * kw, matrix=True)


def _oracle(case: Any, g: dict[str, int], window: tuple[Any, Any, Any], groups: int, nchw: int, has_res: int) -> Any:
    """The float64 oracle of a convolution row: ``window`` = (stride, padding, dilation) pairs; y in NCHW or NHWC,
    plus the residual, then the activation."""
    def oracle(x, w, bias, res, y, *_):
        e = grouped(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), bias if g["B"] else None, *window, groups)
        value, scale = e.value, e.scale
        if not nchw:
            value, scale = value.transpose(0, 2, 3, 1), scale.transpose(0, 2, 3, 1)
        if has_res:
            value, scale = value + res, scale + np.abs(res)
        return {"y": Expect(_act64(value, case["ACT"]), scale=scale)}
    return oracle


def _setup(case: Any, choose: Any) -> Setup:
    """conv_mma's (``choose``: its configuration) or conv_wg's (None: the case binds BN, STAGES, PENDING)."""
    g = geometry(case)
    s = dict(case.shape)
    groups, nchw, has_res = s.get("G", 1), s.get("O", 0), s.get("R", 0)
    n, c, co, kh, kw = g["N"], g["C"], g["CO"], g["KH"], g["KW"]
    cin_g, cout_g = c // groups, co // groups
    ho, wo = g["HO"], g["WO"]
    stride, pad, dil = (g["SH"], g["SW"]), (g["PH"], g["PW"]), (g["DH"], g["DW"])
    out_shape = (n, co, ho, wo) if nchw else (n, ho, wo, co)
    n_pix = n * ho * wo
    if choose is None:
        binding = {}
        grid, group = conv_wg_grid({"BN": case["BN"]}, n_pix, cout_g, groups)
    else:
        binding = choose(case, cout_g, conv_tiles(n_pix, cout_g, groups))
        grid, group = conv_grid(binding, n_pix, cout_g, groups)

    return Setup(args=[case.randn(n, g["H"], g["W"], c), case.randn(co, kh, kw, cin_g), case.randn(co),
                       case.randn(*out_shape), case.empty(*out_shape), c, g["H"], g["W"], co, kw, *stride, *pad,
                       *dil, ho, wo, n_pix, kh * kw, cin_g, cout_g, nchw, g["B"], has_res],
                 grid=grid, group=group, binding=binding,
                 oracle=_oracle(case, g, (stride, pad, dil), groups, nchw, has_res),
                 depth=gemm_depth(cin_g * kh * kw + has_res, bool(g["B"]), case["ACT"]),
                 flops=2 * n_pix * co * cin_g * kh * kw, matrix=True)
