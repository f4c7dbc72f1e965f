"""iron.std.conv_ws (convolution on warp roles, input boxes by tile copies; CUDA sm_90): mutants of its taps,
padding, patches, ring and epilogue caught by the registered oracle on the interpreter, its compile (NVRTC for
sm_90a: budgets kept, multiplies a pipeline, nothing spilled; refused elsewhere), the shared-memory model, the
patch widths, and where conv2d / conv1d take it.  Its registered rows run in test_conv_mma.py."""

from pathlib import Path

import numpy as np
import pytest
from std_testing import (assert_mutant_caught, assert_rows_pass, compile_for, edited_module, mutant_rows,
                         spy_on_kernels)

from iron import bf16, config, f16
from iron.codegen.targets import profile
from iron.core.errors import UnsupportedOnTarget
from iron.std import conv as C
from iron.std import conv_ws as W
from iron.std.suite import conv_mma as CS

BINDINGS = [{"T": bf16, "ACT": "none", "BN": 128, "STAGES": 4, "PW": 8, "S": 1, "BOX": "patch"},
            {"T": f16, "ACT": "relu", "BN": 256, "STAGES": 3, "PW": 64, "S": 1, "BOX": "patch"},
            {"T": bf16, "ACT": "silu", "BN": 128, "STAGES": 6, "PW": 16, "S": 2, "BOX": "rows"},
            {"T": f16, "ACT": "none", "BN": 64, "STAGES": 6, "PW": 32, "S": 1, "BOX": "rows"},
            {"T": bf16, "ACT": "none", "BN": 192, "STAGES": 4, "PW": 64, "S": 1, "BOX": "patch"},
            {"T": bf16, "ACT": "none", "BN": 128, "STAGES": 4, "PW": 8, "S": 1, "BOX": "patch", "SPLIT": 2}]

MUTANTS = {
    # the taps' rows and columns exchanged (a transposed kernel)
    "taps_transposed": [("(img, oh0 + ky * dh - ph, ow0 + kx * dw - pw, cg + c0)",
                         "(img, oh0 + kx * dh - ph, ow0 + ky * dw - pw, cg + c0)")],
    # the padding off by one: every window one row lower
    "padding_off_by_one": [("oh0 + ky * dh - ph,", "oh0 + ky * dh - ph + 1,")],
    # the channels' last partial K step dropped
    "drops_channel_tail": [("chunks = (cin_g + WS_BK - 1) // WS_BK", "chunks = cin_g // WS_BK")],
    # patch rows taken as 8 pixels wide whatever the patch's width
    "patch_rows_of_eight": [("oh = oh0 + r // pw_\n            ow = ow0 + r % pw_",
                             "oh = oh0 + r // 8\n            ow = ow0 + r % 8")],
    # both consumer warpgroups store the first patch
    "one_patch_stored": [("patch_at(2 * tm + wg, down, across, PH, PW)", "patch_at(2 * tm, down, across, PH, PW)")],
    # NCHW: the 8 pixels always stored as one vector, even past the row's end
    "nchw_runs_whole": [("if ow + 8 <= w_out and at_y % 8 == 0:", "if at_y % 8 == 0:")],
    # NCHW a lane a pixel: pixels past the row's end stored into the next row
    "nchw_pixels_past_the_edge": [("if mine and img < n and oh < h_out and ow < w_out and co < c_out:",
                                   "if mine and img < n and oh < h_out and co < c_out:")],
    # NCHW a lane a pixel: every lane of a channel's 16 given the first staged row
    "nchw_pixels_one_row": [("stage[sbase + r * ld + task // 16]", "stage[sbase + task // 16]")],
    # pixels past the image's right edge stored into the next row
    "stores_past_the_edge": [("if mine and img < n and oh < h_out and ow < w_out:",
                              "if mine and img < n and oh < h_out:")],
    # at stride 2, every patch row's box from the even columns
    "one_parity": [("ow0 + (off - rx) // 2, rx, cg + c0)", "ow0 + (off - rx) // 2, 0, cg + c0)")],
    # at stride 2, the rows of a patch one input row apart instead of sh
    "row_stride_one": [("(oh0 + r) * sh + ky * dh - ph, ow0 + (off", "(oh0 + r) + ky * dh - ph, ow0 + (off")],
    # a box per patch row at stride 1: every row's box from the patch's first row
    "rows_all_first": [("(img, (oh0 + r) * sh + ky * dh - ph, ow0 + kx", "(img, oh0 * sh + ky * dh - ph, ow0 + kx")],
    # groups: every tile reads the first group's input channels
    "one_group_read": [("cg = (tn * BN) // cout_g * cin_g", "cg = 0")],
}


#: The registered shape each mutant runs on: 9 x 10 outputs in 16 x 4 patches (past both edges, channels ending
#: mid-step); stride 2; NCHW rows of 13 (a lane a pixel); NCHW rows of 24 in 32-wide patches (8-pixel runs).
MUTANT_SHAPE = {"one_parity": 5, "row_stride_one": 5, "nchw_runs_whole": 8, "nchw_pixels_past_the_edge": 7,
                "nchw_pixels_one_row": 7}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_caught(name, tmp_path: Path, seed):
    if name == "one_group_read":  # two groups of 64 channels
        assert_mutant_caught("std/conv_mma/ws_groups", edited_module(W, tmp_path, *MUTANTS[name]).conv_ws, seed,
                             shapes=CS.WS_GROUPED[:1])
        return
    assert_mutant_caught("std/conv_mma/ws", edited_module(W, tmp_path, *MUTANTS[name]).conv_ws, seed,
                         shapes=[CS.WS_SHAPES[MUTANT_SHAPE.get(name, 0)]])


def test_unmutated_copy_passes(tmp_path: Path, seed):
    """The mutant machinery itself: an unedited copy passes, so a caught mutant is caught by its edit."""
    rows = mutant_rows("std/conv_mma/ws", edited_module(W, tmp_path).conv_ws, seed,
                       shapes=[CS.WS_SHAPES[i] for i in sorted(set(MUTANT_SHAPE.values()) | {0})])
    assert_rows_pass(rows, seed)


@pytest.mark.parametrize("binding", BINDINGS, ids=["bf16-128-s4-pw8", "f16-256-s3-pw64", "bf16-128-s6-pw16-stride2",
                                               "f16-64-s6-pw32", "bf16-192-s4-pw64",
                                               "bf16-128-s4-pw8-split2"])
def test_ptxas_keeps_the_budgets_and_the_pipeline(binding, require_toolchain):
    """For sm_90a: 168 registers at the launch bounds, the roles' budgets kept (no C7507), the multiplies a
    pipeline (no C7515), no stack or spills; each input and weight box is one 4-d tile copy."""
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import nvrtc

    require_toolchain("nvrtc")
    emitted = emit_kernel(W.conv_ws.variant(**binding).compiled("cuda"), "cuda")
    report = nvrtc.build(emitted.source, arch="sm_90").report
    (kernel,) = report["kernels"].values()
    assert kernel["registers"] == 168 and not report["setmaxnreg_ignored"] and report["wgmma_serialized"] == {}
    assert kernel["stack_bytes"] == kernel["spill_stores"] == kernel["spill_loads"] == 0
    rows = 64 // binding["PW"] if binding["BOX"] == "patch" else 1
    x_map = ("x", ("n", "h"), "wd_s", "c_in", (1, rows), (binding["PW"], 64)) if binding["S"] == 1 \
        else ("x", ("n", "h", "wd_s"), 2, "c_in", (1, 1, binding["PW"]), (1, 64))  # (n, h, W / 2, 2, c_in)
    assert [(m.tensor, m.outer, m.rows, m.cols, m.box_outer, m.box) for m in emitted.abi.maps] == [
        x_map, ("w", ("c_out", "kh"), "kw", "cin_g", (binding["BN"], 1), (1, 64))]
    x_boxes = 2 if binding["BOX"] == "patch" else 2 * 64 // binding["PW"]  # one per patch, or per patch row
    count = emitted.source.count
    assert count("cp.async.bulk.tensor.4d.shared::cluster.global.tile") == 1 + x_boxes * (binding["S"] == 1)
    assert count("cp.async.bulk.tensor.5d.shared::cluster.global.tile") == x_boxes * (binding["S"] == 2)


@pytest.mark.parametrize("target", ["hip", "spirv", "metal"])
def test_refused_on_targets_without_wgmma(target):
    with pytest.raises(UnsupportedOnTarget, match="mma_wg"):
        compile_for(target, W.conv_ws.variant(**BINDINGS[0]))


@pytest.mark.parametrize("target", ["cuda", "hip", "spirv", "metal"])
def test_finish_compiles_everywhere(target, require_toolchain):
    """conv_ws_finish (plain loads, adds and stores) compiles with every target's toolchain, both dtypes."""
    from std_testing import TOOLCHAIN_OF

    require_toolchain(TOOLCHAIN_OF[target])
    for binding in ({"T": bf16, "ACT": "silu", "SPLIT": 2}, {"T": f16, "ACT": "gelu_tanh", "SPLIT": 4}):
        compile_for(target, W.conv_ws_finish.variant(**binding))


def test_shared_bytes_model_matches_the_kernel():
    from iron.codegen.capabilities import shared_bytes

    for binding in BINDINGS:
        assert shared_bytes(W.conv_ws.variant(**binding).ir) == W.conv_ws_shared_bytes(binding)
    assert all(W.conv_ws_shared_bytes(v) <= profile("cuda", "sm_90").shared_limit for v in W.conv_ws.variants)
    # six stages of 128 x 128 tiles leave room for a warpgroup's four staging subgroups; four of 128 x 256 for two
    assert W.staging_subgroups(BINDINGS[2]) == 4 and W.staging_subgroups({"BN": 256, "STAGES": 4}) == 2


@pytest.mark.parametrize("h_out, w_out, width", [(56, 56, 8), (64, 64, 64), (1, 4096, 64), (1, 3000, 64),
                                                 (14, 14, 16), (7, 7, 8), (28, 28, 32), (9, 10, 16)])
def test_patch_width_covers_the_image_with_the_fewest_pixels_past_it(h_out, w_out, width):
    assert W.patch_width(h_out, w_out) == width


@pytest.mark.parametrize("shape, stride, bn", [
    ((32, 56, 56, 64), 1, 64),  # at most 64 channels
    ((32, 28, 28, 128), 1, 128),  # ResNet's stride-2 entry (its output)
    ((32, 14, 14, 256), 1, 128),  # 256 wide would make 64 tiles: under a wave
    ((32, 7, 7, 512), 1, 64),  # 128 wide would make 64 tiles: half a wave, so narrower ones
    ((8, 64, 64, 320), 1, 160),  # UNet: two 160-wide tiles, not three 128-wide ones
    ((8, 64, 64, 384), 1, 192),  # two 192-wide tiles, not three 128-wide ones
    ((8, 1, 3000, 384), 1, 192),  # Whisper's front end, stride 1 and 2
    ((8, 1, 1500, 384), 2, 192),
    ((8, 1, 4096, 512), 1, 256),  # conv1d: 512 tiles 256 wide
    ((32, 14, 14, 1024), 1, 256),
    ((8, 28, 28, 768), 1, 256),  # 192 divides it, but so does 256
])
def test_host_tile_width_follows_the_tile_count(shape, stride, bn):
    """The host's conv_ws binding for issue 19's shapes: the widths that were fastest on an H100 (2026-12-06) and,
    for 384 channels, on the H200 (2026-12-07)."""
    n, h_out, w_out, c_out = shape
    got = W.conv_ws_config(n, h_out, w_out, c_out, stride)
    assert (got["BN"], got["STAGES"]) == (bn, 3 if bn == 256 else 4)
    assert got["PW"] == W.patch_width(h_out, w_out) and got["BOX"] == ("patch" if stride == 1 else "rows")
    assert W.ws_conv_fits(got)


@pytest.mark.parametrize("shape, ksteps, split", [
    ((32, 7, 7, 512), 72, 2),  # ResNet's 512 at 7 x 7: 64 tiles 128 wide, two ranges of 36 K steps
    ((8, 7, 7, 512), 72, 4),  # 16 tiles: four ranges make 64 groups (five would not be one of SPLITS)
    ((8, 7, 7, 512), 24, 3),  # ranges of at least 8 K steps
    ((8, 7, 7, 512), 12, 1),  # too few K steps to split: 64-wide tiles whole
    ((32, 14, 14, 256), 72, 1),  # 128-wide tiles fill more than half a wave: no split
])
def test_host_splits_k_where_tiles_are_few(monkeypatch, shape, ksteps, split):
    """With WS_PLAN's split on, 128-wide tiles in the most K ranges that make at most one wave of 132 groups, each
    at least split_steps long; else the widths above, whole."""
    monkeypatch.setitem(W.WS_PLAN, "split", 1)
    got = W.conv_ws_config(*shape, 1, 0, ksteps)
    assert got["SPLIT"] == split and got["BN"] == (128 if split > 1 or shape[3] == 256 else 64)
    assert W.ws_split(64, 72) == 2 and W.ws_split(67, 72) == 1  # 134 groups would pass one wave
    monkeypatch.setitem(W.WS_PLAN, "split", 0)
    assert W.conv_ws_config(*shape, 1, 0, ksteps)["SPLIT"] == 1


def test_conv2d_keeps_the_gather_with_the_option_off(monkeypatch):
    """With the option conv_ws off (on by default) conv2d takes conv_wg's gather."""
    config.set_option("conv_ws", False)
    monkeypatch.setattr(C, "runs_roles", lambda profile: True)
    monkeypatch.setattr(C, "runs_warpgroups", lambda profile: True)
    launched = spy_on_kernels(monkeypatch, C, "conv_ws", "conv_wg", "conv_mma")
    x = np.ones((1, 6, 6, 16), np.float16)
    C.conv2d(x, np.ones((72, 3, 3, 16), np.float16), None, 1, 1, backend="interp", layout="NHWC")
    assert [name for name, _ in launched] == ["conv_wg"]


@pytest.mark.parametrize("shape, stride, groups, nhwc, kernel", [
    ((2, 16, 7, 9, 72, 3, 3), 1, 1, True, "conv_ws"),
    ((2, 16, 7, 9, 72, 3, 3), 2, 1, True, "conv_wg"),  # stride 2 over an odd W: the gather
    ((2, 16, 7, 10, 72, 3, 3), 2, 1, True, "conv_ws"),  # over an even W: a box per patch row
    ((2, 16, 7, 9, 72, 3, 3), 1, 1, False, "conv_ws"),  # NCHW: x to channels-last, NCHW stores
    ((2, 16, 7, 9, 144, 3, 3), 1, 2, True, "conv_wg"),  # groups
    ((2, 16, 7, 9, 64, 3, 3), 1, 1, True, "conv_ws"),  # 64 output channels: 128 x 64 tiles
    ((2, 16, 7, 9, 64, 3, 3), 2, 1, False, "conv_mma"),  # stride 2 over an odd W, 64 channels: 128 x 64 tiles
    ((1, 64, 6, 7, 64, 3, 3), 1, 8, True, "conv_ws"),  # 8 groups of 8, packed into one group
    ((1, 128, 6, 8, 128, 3, 3), 2, 16, True, "conv_ws"),  # 16 of 8 packed into 2 groups of 64, stride 2
    ((1, 128, 6, 16, 128, 3, 3), 1, 16, False, "conv_ws"),  # the same into NCHW rows of 16
    ((1, 128, 6, 12, 128, 3, 3), 1, 16, False, "conv_mma"),  # into NCHW rows of 12: conv_mma's stores
])
def test_conv2d_takes_warp_roles_where_the_device_runs_them(monkeypatch, shape, stride, groups, nhwc, kernel):
    """conv2d on a device with warp roles, tile copies and wgmma (lent to the interpreter, which runs all three
    kernels) launches conv_ws with one group at stride 1 (or 2 along an even W), either layout, and matches
    float64 (the option conv_ws on, its default)."""
    monkeypatch.setattr(C, "runs_roles", lambda profile: True)
    monkeypatch.setattr(C, "runs_warpgroups", lambda profile: True)
    launched = spy_on_kernels(monkeypatch, C, "conv_ws", "conv_wg", "conv_mma")
    n, c, h, wd, co, kh, kw = shape
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float16)
    w = rng.standard_normal((co, c // groups, kh, kw)).astype(np.float16)
    b = rng.standard_normal(co).astype(np.float16)
    res_shape = (n, (h + 2 - 3) // stride + 1, (wd + 2 - 3) // stride + 1, co)
    res = rng.standard_normal(res_shape if nhwc else (res_shape[0], co, *res_shape[1:3])).astype(np.float16)
    if nhwc:
        y = C.conv2d(x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy(), b, stride, 1, groups=groups,
                     backend="interp", layout="NHWC", residual=res, activation="relu")
        got = y.transpose(0, 3, 1, 2)
        want = CS._act64(CS.grouped(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), (stride,) * 2,
                                    (1, 1), (1, 1), groups).value + res.transpose(0, 3, 1, 2), "relu")
    else:
        got = C.conv2d(x, w, b, stride, 1, groups=groups, backend="interp", residual=res, activation="relu")
        want = CS._act64(CS.grouped(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), (stride,) * 2,
                                    (1, 1), (1, 1), groups).value + res, "relu")
    assert [name for name, _ in launched] == [kernel]
    if kernel == "conv_ws":
        packed = groups // C.group_pack(groups, c // groups, co // groups)
        host = W.conv_ws_config(n, res_shape[1], res_shape[2], co, stride, co // packed)
        assert launched[0][1] == {"T": f16, "ACT": "relu", **host}
    assert np.abs(got.astype(np.float64) - want).max() < 2 ** -8 * np.abs(want).max()


#: Mutants of the K split (registration std/conv_mma/ws_split): in conv_ws, the producer's counters left at the
#: first tap for every range (each range copies the first K steps' tiles) and a tile's rows of sums stored a tile
#: wide apart, not a padded C_out (wrong past one tile column); in conv_ws_finish, the last range not added, and
#: NCHW channels stored into adjacent elements instead of planes h_out w_out apart.
SPLIT_MUTANTS = {
    "ranges_from_the_first_tap": ("conv_ws", [("if SPLIT > 1:  # the range's first K step",
                                               "if SPLIT > 99:  # the range's first K step")]),
    "sums_rows_packed": ("conv_ws", [("part.store(at + r * ld_part + c,", "part.store(at + r * width + c,")]),
    "last_range_dropped": ("conv_ws_finish", [("for k in static_range(1, SPLIT):",
                                               "for k in static_range(1, SPLIT - 1):")]),
    "nchw_planes_adjacent": ("conv_ws_finish", [("y[at_y + e * hw] = cast", "y[at_y + e] = cast")]),
}


@pytest.mark.parametrize("name", list(SPLIT_MUTANTS))
def test_split_mutant_caught(name, tmp_path: Path, seed, monkeypatch):
    kernel, edits = SPLIT_MUTANTS[name]
    module = edited_module(W, tmp_path, *edits)
    if kernel == "conv_ws_finish":  # the registration's second launch
        monkeypatch.setattr(CS, "conv_ws_finish", module.conv_ws_finish)
    assert_mutant_caught("std/conv_mma/ws_split", module.conv_ws if kernel == "conv_ws" else W.conv_ws, seed)


@pytest.mark.parametrize("shape, nhwc, act, split", [
    ((2, 16, 7, 9, 72, 3, 3), True, "relu", 2),
    ((2, 72, 7, 9, 136, 3, 3), False, "silu", 3),  # 2 K steps a tap, ranges ending mid-tap; NCHW rows of 9
    ((1, 16, 6, 16, 24, 3, 3), False, "gelu_tanh", 4),  # NCHW rows of 16
])
def test_conv2d_splits_k_into_ranges_and_finishes(monkeypatch, shape, nhwc, act, split):
    """conv2d with the host's conv_ws binding at SPLIT ranges (conv_ws's f32 sums, then conv_ws_finish with the
    bias, residual and activation) matches float64 in either layout."""
    monkeypatch.setattr(C, "runs_roles", lambda profile: True)
    monkeypatch.setattr(C, "runs_warpgroups", lambda profile: True)
    host = W.conv_ws_config
    monkeypatch.setattr(C, "conv_ws_config", lambda *a, **k: {**host(*a, **k), "SPLIT": split})
    launched = spy_on_kernels(monkeypatch, C, "conv_ws", "conv_ws_finish")
    n, c, h, wd, co, kh, kw = shape
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float16)
    w = rng.standard_normal((co, c, kh, kw)).astype(np.float16)
    b = rng.standard_normal(co).astype(np.float16)
    res = rng.standard_normal((n, co, h, wd)).astype(np.float16)
    want = CS._act64(CS.grouped(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), (1, 1), (1, 1),
                                (1, 1), 1).value + res, act)
    if nhwc:
        got = C.conv2d(x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy(), b, 1, 1, backend="interp",
                       layout="NHWC", residual=res.transpose(0, 2, 3, 1).copy(), activation=act).transpose(0, 3, 1, 2)
    else:
        got = C.conv2d(x, w, b, 1, 1, backend="interp", residual=res, activation=act)
    assert [(name, binding.get("SPLIT"), binding["ACT"]) for name, binding in launched] == [
        ("conv_ws", split, "none"), ("conv_ws_finish", split, act)]
    assert np.abs(got.astype(np.float64) - want).max() < 2 ** -8 * np.abs(want).max()


def test_conv1d_takes_the_hosts_split(monkeypatch):
    """WS_PLAN's rule end to end: conv1d (H = 1, 64-pixel patches) with two 128-wide tiles and 6 K steps splits
    them into four uneven ranges (1, 2, 1, 2 steps) at split_steps 1, and matches float64 with a residual and
    relu, in NCL."""
    monkeypatch.setattr(C, "runs_roles", lambda profile: True)
    monkeypatch.setattr(C, "runs_warpgroups", lambda profile: True)
    monkeypatch.setitem(W.WS_PLAN, "split", 1)
    monkeypatch.setitem(W.WS_PLAN, "split_steps", 1)
    launched = spy_on_kernels(monkeypatch, C, "conv_ws", "conv_ws_finish")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 128, 40)).astype(np.float16)
    w = rng.standard_normal((136, 128, 3)).astype(np.float16)
    b = rng.standard_normal(136).astype(np.float16)
    res = rng.standard_normal((1, 136, 40)).astype(np.float16)
    got = C.conv1d(x, w, b, 1, 1, backend="interp", residual=res, activation="relu")
    want = CS._act64(CS.grouped(x[:, :, None].astype(np.float64), w[:, :, None].astype(np.float64),
                                b.astype(np.float64), (1, 1), (0, 1), (1, 1), 1).value[:, :, 0] + res, "relu")
    assert [(name, binding["SPLIT"]) for name, binding in launched] == [("conv_ws", 4), ("conv_ws_finish", 4)]
    assert np.abs(got.astype(np.float64) - want).max() < 2 ** -8 * np.abs(want).max()
