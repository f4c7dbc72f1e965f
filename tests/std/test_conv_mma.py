"""iron.std.conv_mma: the registered rows on interp and lavapipe (and at subgroup widths 8 and 64), the H200's
configurations on the interpreter, mutants, compiles for the four targets with each target's configuration,
and the host functions (conv2d / conv1d) on the matrix path: layouts, groups, residual, activation, 1 x 1 as
gemm, and the choice between the kernels (the direct one keeps groups and the epilogue too)."""

from pathlib import Path

import numpy as np
import pytest
from std_testing import (TOOLCHAIN_OF, assert_mutant_caught, assert_rows_pass, assert_wgmma_pipeline, compile_for,
                         edited_module, mutant_rows, run_entry, spy_on_kernels, suite)

from iron import bf16, config, f16
from iron.core.errors import UnsupportedOnTarget
from iron.std import conv as C
from iron.std import conv_mma as CM
from iron.std import conv_wg as CW
from iron.std import gemm as G
from iron.std.suite import conv_mma as CS

ENTRIES = suite("conv_mma")
RUNS = [pytest.param(e, b, id=f"{e.name}-{b}") for e in ENTRIES for b in ("interp", "vulkan") if e.items(b)]
TAIL = [CS.SHAPES[0], CS.SHAPES[3]]


@pytest.mark.parametrize("entry,backend", RUNS)
def test_registered_rows_pass(entry, backend, seed):
    assert_rows_pass(run_entry(entry, backend, seed), seed)


@pytest.mark.parametrize("width", [8, 64])
def test_at_other_subgroup_widths(width, seed):
    """8: 16 subgroups in a group of 128, 4 of them owning warp tiles; 64: groups of 256 threads."""
    config.set_option("simd_width", width)
    assert_rows_pass(mutant_rows("std/conv_mma/mma", CM.conv_mma, seed, shapes=TAIL), seed)


@pytest.mark.parametrize("cfg", [CM.CONV_SM80, CM.CONV_SM80_N64, *CM.CONV_TUNING], ids=lambda c: str(sorted(c.items())))
def test_h200_configurations_on_the_interpreter(cfg, seed, monkeypatch):
    """What the H200 runs (and conv_tune.py's candidates), checked where every thread is watched."""
    monkeypatch.setattr(CS, "conv_binding", lambda case, cout_g, tiles: cfg)
    assert_rows_pass(mutant_rows("std/conv_mma/mma", CM.conv_mma, seed, shapes=[CS.SHAPES[0], CS.SHAPES[4]]), seed)


@pytest.mark.parametrize("c_out,kernel", [(72, "conv_wg"), (64, "conv_mma")])
def test_conv2d_takes_warpgroups_where_the_device_runs_them(monkeypatch, c_out, kernel):
    """On a device whose profile has wgmma (Hopper), conv2d launches conv_wg, except for groups of at most 64
    output channels (conv_mma's 128 x 64 tiles): the host's choice, seen on the interpreter by lending it the
    profile test (both kernels run there)."""
    monkeypatch.setattr(C, "runs_warpgroups", lambda profile: True)
    launched = spy_on_kernels(monkeypatch, C, "conv_wg", "conv_mma")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 64, 6, 7)).astype(np.float16)
    w = rng.standard_normal((c_out, 64, 3, 3)).astype(np.float16)
    y = C.conv2d(x, w, None, 1, 1, backend="interp", activation="relu")
    want = _reference(x, w, None, (1, 1), (1, 1), (1, 1), 1, None, "relu")
    assert [name for name, _ in launched] == [kernel]
    assert np.abs(y.astype(np.float64) - want).max() < 2 ** -9 * np.abs(want).max()


# ---------------------------------------------------------------- mutants: one edit of conv_mma.py each

MUTANTS = {
    # the taps walk W backwards (a flipped kernel: cross-correlation and convolution confused)
    "taps_flipped": ("(wrow0 + bn + r) * red + wk0 + ci", "(wrow0 + bn + r) * red + (red - cin_g - wk0) + ci"),
    # the padding off by one: every window one row lower
    "padding_off_by_one": ("ih0 = oh * sh - ph\n", "ih0 = oh * sh - ph + 1\n"),
    # the next tap's W columns one K step on instead of one tap on: right only when C_in / groups == BK
    "tap_stride_is_bk": ("nwk0 = wk0 + cin_g", "nwk0 = wk0 + bk"),
    # a group's input channels taken from group 0
    "group_input_offset": ("(rows_s[3 * r] + shift) * c_in + xoff + ci", "(rows_s[3 * r] + shift) * c_in + ci"),
    # NCHW output written as if the 8 pixels were always whole
    "nchw_tail_as_whole": ("if hw_out % 8 == 0 and p0 + 8 <= n_pix:", "if p0 + 8 <= n_pix:"),
    # the residual added after the activation
    "residual_after_activation": ("            v = v + f32(load_chunk(res, c_out, p, coff + co, n_pix, coff + cout_g, "
                                  "whole, 8))\n        store_eight(y, p * c_out + coff + co, cast(activate(v, act), ",
                                  "            v = activate(v, act) + f32(load_chunk(res, c_out, p, coff + co, n_pix, "
                                  "coff + cout_g, whole, 8))\n        store_eight(y, p * c_out + coff + co, cast(v, "),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path: Path, seed):
    module = edited_module(CM, tmp_path, MUTANTS[mutant])
    name = "std/conv_mma/variants" if mutant == "residual_after_activation" else "std/conv_mma/mma"
    assert_mutant_caught(name, module.conv_mma, seed)


def test_unmutated_copy_passes(tmp_path: Path, seed):
    module = edited_module(CM, tmp_path)
    assert_rows_pass(mutant_rows("std/conv_mma/mma", module.conv_mma, seed), seed)


# ---------------------------------------------------------------- compiles, with each target's configuration

TARGET_CONFIGS = {"cuda": CM.CONV_SM80, "hip": {**G.AMD, "THREADS": 256}, "metal": {**G.APPLE, "THREADS": 128},
                  "spirv": G.portable_small(8)}


def _compile_params():
    params = []
    for target, cfg in TARGET_CONFIGS.items():
        for t, act in ((f16, "relu"), (bf16, "silu")):
            params.append(pytest.param(target, CM.conv_mma.variant(T=t, ACT=act, **cfg), id=f"{target}-{t.name}"))
    params.append(pytest.param("cuda", CM.conv_mma.variant(T=bf16, ACT="none", **CM.CONV_SM80_N64), id="cuda-n64"))
    return params


@pytest.mark.parametrize("target,launch", _compile_params())
def test_compiles(target, launch, require_toolchain):
    require_toolchain(TOOLCHAIN_OF[target])
    if target in ("spirv", "hip") and launch.binding["T"] == bf16:
        # Both keep bf16 as bits: fragments cannot read a shared bf16 array (the host keeps the direct kernel).
        with pytest.raises(UnsupportedOnTarget, match="bf16"):
            compile_for(target, launch)
        return
    compile_for(target, launch)


# ---------------------------------------------------------------- the host functions on the matrix path

def _reference(x, w, b, stride, pad, dil, groups, res, act):
    e = CS.grouped(x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
                   stride, pad, dil, groups)
    value = e.value + (0 if res is None else res.astype(np.float64))
    return CS._act64(value, act or "none")


HOST_CASES = [  # (N, C, H, W, C_out, KH, KW, stride, padding, dilation, groups, residual, activation)
    (2, 16, 7, 9, 24, 3, 3, (1, 1), (1, 1), (1, 1), 1, False, None),
    (2, 16, 7, 9, 24, 3, 3, (2, 1), (1, 2), (2, 1), 1, True, "relu"),
    (1, 32, 5, 5, 16, 1, 1, (1, 1), (0, 0), (1, 1), 1, False, "silu"),
    (1, 32, 6, 5, 32, 3, 3, (1, 1), (1, 1), (1, 1), 4, True, None),
    # Groups of few channels, packed (group_pack): ResNeXt's 8 a group, 8 groups to a pack; 4 a group, 16 to a
    # pack (alone, 4 input channels a group would leave the matrix path); a grouped 1 x 1 that packs into one
    # group, which is a gemm.
    (2, 64, 5, 6, 64, 3, 3, (1, 1), (1, 1), (1, 1), 8, True, "relu"),
    (1, 64, 5, 5, 64, 3, 3, (2, 2), (1, 1), (1, 1), 16, False, None),
    (1, 32, 4, 4, 32, 1, 1, (1, 1), (0, 0), (1, 1), 4, False, None),
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", HOST_CASES, ids=str)
def test_conv2d_host_on_the_matrix_path(case, layout, monkeypatch):
    """conv2d's f16 calls go to conv_mma (or, channels-last 1 x 1, to gemm) and match float64 within f16."""
    n, c, h, wd, co, kh, kw, stride, pad, dil, groups, with_res, act = case
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float16)
    w = rng.standard_normal((co, c // groups, kh, kw)).astype(np.float16)
    b = rng.standard_normal(co).astype(np.float16)
    want = _reference(x, w, b, stride, pad, dil, groups, None, act)
    res = rng.standard_normal(want.shape).astype(np.float16) if with_res else None
    want = _reference(x, w, b, stride, pad, dil, groups, res, act)
    launched = spy_on_kernels(monkeypatch, C, "conv_mma", "conv2d_kernel")
    launched_gemm = spy_on_kernels(monkeypatch, G, "gemm_mma")
    to = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if layout == "NHWC" else (lambda a: a)
    y = C.conv2d(to(x), to(w), b, stride, pad, dil, layout, backend="interp", groups=groups, activation=act,
                 residual=None if res is None else to(res))
    got = y.transpose(0, 3, 1, 2) if layout == "NHWC" else y
    scale = max(1.0, np.abs(want).max())
    assert np.abs(got.astype(np.float64) - want).max() < 2 ** -9 * scale
    one_by_one = layout == "NHWC" and kh == kw == 1 and not with_res
    assert [name for name, _ in launched + launched_gemm] == (["gemm_mma"] if one_by_one else ["conv_mma"])


def test_a_strided_residual_is_read_as_its_values():
    """A residual view that is not contiguous is copied first (the kernels read it by the output's index)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 16, 4, 6)).astype(np.float16)
    w = rng.standard_normal((8, 16, 1, 1)).astype(np.float16)
    wide = rng.standard_normal((1, 8, 4, 12)).astype(np.float16)
    res = wide[:, :, :, ::2]
    assert not res.flags.c_contiguous
    y = C.conv2d(x, w, backend="interp", residual=res)
    want = _reference(x, w, None, (1, 1), (0, 0), (1, 1), 1, res, None)
    assert np.abs(y.astype(np.float64) - want).max() < 2 ** -9 * np.abs(want).max()


def test_conv1d_host_on_the_matrix_path():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 30)).astype(np.float16)
    w = rng.standard_normal((24, 8, 3)).astype(np.float16)
    res = rng.standard_normal((2, 24, 15)).astype(np.float16)
    y = C.conv1d(x, w, None, 2, 1, backend="interp", groups=2, activation="relu", residual=res)
    want = _reference(x[:, :, None], w[:, :, None], None, (1, 2), (0, 1), (1, 1), 2, res[:, :, None], "relu")[:, :, 0]
    assert np.abs(y.astype(np.float64) - want).max() < 2 ** -9 * np.abs(want).max()


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_direct_path_keeps_groups_and_the_epilogue(layout):
    """f32 (and channels not a multiple of 8) stay on the direct kernel, groups included: residual and
    activation follow as elementwise passes."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 12, 6, 5)).astype(np.float32)
    res = rng.standard_normal((1, 8, 6, 5)).astype(np.float32)
    to = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if layout == "NHWC" else (lambda a: a)
    back = (lambda a: a.transpose(0, 3, 1, 2)) if layout == "NHWC" else (lambda a: a)
    for groups in (1, 2):
        w = rng.standard_normal((8, 12 // groups, 3, 3)).astype(np.float32)
        y = back(C.conv2d(to(x), to(w), None, 1, 1, layout=layout, backend="interp", groups=groups,
                          activation="relu", residual=to(res)))
        want = np.maximum(CS.grouped(x.astype(np.float64), w.astype(np.float64), None, (1, 1), (1, 1), (1, 1),
                                     groups).value + res, 0)
        assert np.abs(y - want).max() < 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("call, message", [
    (lambda x, w: C.conv2d(x, w, groups=3), "groups must be a positive int dividing"),
    (lambda x, w: C.conv2d(x, w, groups=2), r"w expects 32 \(w is \(C_out, C_in / groups, KH, KW\)"),
    (lambda x, w: C.conv2d(x, w, activation="tanh"), "activation must be None or one of relu"),
    (lambda x, w: C.conv2d(x, w, residual=np.zeros((1, 8, 3, 3), np.float16)), "residual"),
    (lambda x, w: C.conv2d(x, w, residual=np.zeros((1, 8, 4, 4), np.float32)), "residual has dtype f32"),
])
def test_bad_epilogue_arguments_are_launch_errors(call, message):
    import iron

    x = np.zeros((1, 16, 4, 4), np.float16)
    w = np.zeros((8, 16, 1, 1), np.float16)
    with pytest.raises(iron.LaunchError, match=message):
        call(x, w)


# ---------------------------------------------------------------- conv_wg: compiles, refusals, shared memory

WG_COMPILE = [{"T": f16, "ACT": "relu", **CW.WG_CONV_DEFAULT}, {"T": bf16, "ACT": "none", "BN": 256, "STAGES": 4,
                                                                "PENDING": 1}]


@pytest.mark.parametrize("binding", WG_COMPILE, ids=["128", "256"])
def test_conv_wg_compiles_for_sm90a(binding, require_toolchain):
    require_toolchain("nvrtc")
    compile_for("cuda", CW.conv_wg.variant(**binding))


@pytest.mark.parametrize("target", ["hip", "spirv", "metal"])
def test_conv_wg_refused_on_targets_without_wgmma(target):
    with pytest.raises(UnsupportedOnTarget, match="mma_wg"):
        compile_for(target, CW.conv_wg.variant(**WG_COMPILE[0]))


@pytest.mark.parametrize("binding", WG_COMPILE, ids=["128", "256"])
def test_ptxas_keeps_conv_wg_a_pipeline(binding, require_toolchain):
    """ptxas serialised conv_wg's wgmma (C7515) while its final wait also ran on the path that skips the K loop;
    the shipped rings must stay pipelines (tests/std/test_gemm_wg.py holds gemm_wg's)."""
    require_toolchain("nvrtc")
    assert_wgmma_pipeline(CW.conv_wg.variant(**binding))


def test_shared_bytes_models_match_the_kernels():
    """The host checks a configuration against the device's shared memory with these models: they must be what
    the kernels declare (the widest conv_wg ring fits sm_90's opt-in limit, 227 KiB)."""
    from iron.codegen.capabilities import shared_bytes
    from iron.codegen.targets import profile

    for binding in WG_COMPILE:
        assert shared_bytes(CW.conv_wg.variant(**binding).ir) == CW.conv_wg_shared_bytes(binding)
    assert CW.conv_wg_shared_bytes(WG_COMPILE[1]) <= profile("cuda", "sm_90").shared_limit
    for cfg in (CM.CONV_SM80, CM.CONV_SM80_N64, G.portable_small(32), {**G.AMD, "THREADS": 256},
                {**G.APPLE, "THREADS": 128}):
        assert shared_bytes(CM.conv_mma.variant(T=f16, ACT="none", **cfg).ir) == CM.conv_shared_bytes(cfg, 2)


def test_groups_of_few_channels_run_packed_and_a_wrong_pack_shows(monkeypatch, tmp_path):
    """group_pack: the most groups (a power of two) whose outputs fill at most 64 channels; conv2d launches
    pack_group_weights before conv_mma for them (and not with the option off), and a packing kernel that puts
    every group's weights at the first group's inputs gives wrong outputs."""
    assert [C.group_pack(*a) for a in ((32, 8, 8), (32, 4, 4), (4, 8, 8), (6, 8, 8), (2, 64, 64), (8, 8, 16),
                                       (64, 1, 2))] == [8, 16, 4, 2, 1, 4, C.PACK_MAX]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 5, 6, 64)).astype(np.float16)  # NHWC
    w = rng.standard_normal((64, 3, 3, 8)).astype(np.float16)  # (C_out, KH, KW, C_in / groups), 8 groups
    want = _reference(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), None, (1, 1), (1, 1), (1, 1), 8, None, None)
    launched = spy_on_kernels(monkeypatch, C, "conv_mma", "pack_group_weights")
    y = C.conv2d(x, w, None, 1, 1, layout="NHWC", backend="interp", groups=8).transpose(0, 3, 1, 2)
    assert np.abs(y.astype(np.float64) - want).max() < 2 ** -9 * np.abs(want).max()
    assert [name for name, _ in launched] == ["pack_group_weights", "conv_mma"]
    launched.clear()
    monkeypatch.setenv("IRON_CONV_PACK_GROUPS", "0")
    config.reload()
    C.conv2d(x, w, None, 1, 1, layout="NHWC", backend="interp", groups=8)
    assert [name for name, _ in launched] == ["conv_mma"]
    monkeypatch.delenv("IRON_CONV_PACK_GROUPS")
    config.reload()
    bad = edited_module(C, tmp_path, ("src = c - ((co // cout_g) % pack) * cin_g", "src = c"))
    y = bad.conv2d(x, w, None, 1, 1, layout="NHWC", backend="interp", groups=8).transpose(0, 3, 1, 2)
    assert np.abs(y.astype(np.float64) - want).max() > 0.1 * np.abs(want).max()
