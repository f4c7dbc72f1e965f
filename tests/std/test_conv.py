"""iron.std.conv: the registered rows on interp and lavapipe, mutants, four-target compiles, the host
functions (values on odd shapes, both layouts, out=, grids past one row, errors) and the non-finite policy."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_rows_pass, run_entry, spy_on_kernels, suite

import iron
from iron import config
from iron.core.dtypes import numpy_dtype
from iron.core import dtypes as D
from iron.harness import registry
from iron.harness.tolerance import Depth, compare, derive_tolerance
from iron.std import conv
from iron.std.suite import conv as SC



# ---------------------------------------------------------------- mutants: one edit of conv.py each

def mutant_module(tmp_path: Path, old: str, new: str):
    """A copy of iron/std/conv.py with ``old`` (which must occur exactly once) replaced by ``new``."""
    return edited_module(conv, tmp_path, (old, new))


#: Cheap shapes (a few taps, one group) that still see every mutation: padding, dilation 2, a bias.
_PAD = SC._dense_shape(1, 2, 5, 6, 3, 2, P=1, D=2)
MUTANTS = {
    # dense: the row padding one short (every window shifted down a row)
    "dense_padding_off_by_one": ("std/conv/conv2d", "conv2d_kernel", "ih0 = oh * sh - ph",
                                 "ih0 = oh * sh - (ph - 1)", [_PAD]),
    # dense: the column dilation ignored
    "dense_dilation_ignored": ("std/conv/conv2d", "conv2d_kernel", "iw = iw0 + ikw * dw",
                               "iw = iw0 + ikw", [_PAD]),
    # dense: the bias dropped
    "dense_bias_dropped": ("std/conv/conv2d", "conv2d_kernel", "y[yb + co * ys_c] = T(acc[i * TC + j] + bv[j])",
                           "y[yb + co * ys_c] = T(acc[i * TC + j])", [SC._dense_shape(1, 3, 4, 5, 2, 1, L=1)]),
    # dense NHWC vector path: every lane of a 16-byte load takes the first channel
    "dense_vector_lane": ("std/conv/conv2d", "conv2d_kernel", "a_s[(i * VEC + e) * BP + t] = xv[e]",
                          "a_s[(i * VEC + e) * BP + t] = xv[0]", [SC._dense_shape(1, 8, 3, 5, 9, 1, L=1)]),
    # dense: the ragged channel chunk stops one channel short
    "dense_channel_tail": ("std/conv/conv1d", "conv2d_kernel", "if ok and c0 + i < cin_g:",
                           "if ok and c0 + i < cin_g - 1:", [SC._conv1d_shape(1, 20, 9, 5, 1)]),
    # dense, grouped: every group reads group 0's input channels
    "dense_group_input": ("std/conv/conv2d", "conv2d_kernel", "xb = n * c_in * hw + g * cin_g * xs_c",
                          "xb = n * c_in * hw", [SC._dense_shape(2, 6, 5, 7, 9, 3, P=1, G=3)]),
    # depthwise NCHW: the row padding off by one
    "dw_nchw_padding": ("std/conv/depthwise_nchw", "dwconv2d_nchw_kernel", "q0 + j * GROUP < hw_out, oh * sh - ph, FAR",
                        "q0 + j * GROUP < hw_out, oh * sh - ph + 1, FAR",
                        [SC._dense_shape(1, 8, 3, 3, 8, 3, S=2, P=1)]),
    # depthwise NCHW KS x KS: the window's column check one too far (reads the next row's first input)
    "dwk_window_column": ("std/conv/depthwise_nchw_k", "dwconv2d_nchw_k_kernel", "if u32(iw0 + e) < u32(wd):",
                          "if u32(iw0 + e) <= u32(wd):", [SC._dense_shape(1, 2, 4, 5, 2, 3, P=1)]),
    # depthwise NCHW KS x KS: a row in the padding not skipped (reads the row above the plane)
    "dwk_padded_row": ("std/conv/depthwise_nchw_k", "dwconv2d_nchw_k_kernel",
                       "if u32(ih) < u32(h):         # the row check", "if ih < h:         # the row check",
                       [SC._dense_shape(1, 2, 4, 5, 2, 3, P=1)]),
    # depthwise NCHW KS x KS: the run's last output never stored
    "dwk_run_tail": ("std/conv/depthwise_nchw_k", "dwconv2d_nchw_k_kernel",
                     "for j in static_range(R):\n                    if ow0 + j < w_out:",
                     "for j in static_range(R - 1):\n                    if ow0 + j < w_out:",
                     [SC._dense_shape(1, 2, 3, 6, 2, 5, P=2)]),
    # depthwise NCHW KS x KS: the window read as if the stride were 1
    "dwk_stride_ignored": ("std/conv/depthwise_nchw_k", "dwconv2d_nchw_k_kernel",
                           "if checked == 0:\n" + " " * 44 + "acc[j] += win[S * j + kw] * wr[kw]",
                           "if checked == 0:\n" + " " * 44 + "acc[j] += win[j + kw] * wr[kw]",
                           [SC._dense_shape(1, 2, 9, 11, 2, 3, S=2, P=1)]),
    # depthwise NCHW KS x KS: small planes packed into a group, but every thread takes its plane's first pair
    "dwk_packed_pair": ("std/conv/depthwise_nchw_k", "dwconv2d_nchw_k_kernel",
                        "t = thread_id(0) - sub * items", "t = thread_id(0)", [SC._dense_shape(1, 4, 3, 5, 4, 3, P=1)]),
    # depthwise NHWC: the column dilation ignored
    "dw_nhwc_dilation": ("std/conv/depthwise_nhwc", "dwconv2d_nhwc_kernel",
                         "ih = ih0[j] + ikh * dh\n                        iw = iw0[j] + ikw * dw",
                         "ih = ih0[j] + ikh * dh\n                        iw = iw0[j] + ikw",
                         [SC._dense_shape(2, 3, 6, 13, 3, 3, D=2, P=2)]),
    # depthwise NHWC: the bias dropped
    "dw_nhwc_bias": ("std/conv/depthwise_nhwc", "dwconv2d_nhwc_kernel", "bv[e] = f32(bias[c + e])",
                     "bv[e] = 0.0", [SC._dense_shape(1, 40, 5, 4, 40, 3, P=1)]),
    # depthwise NHWC KS x KS: the window's columns applied as if the stride were 1
    "dwkh_stride_ignored": ("std/conv/depthwise_nhwc_k", "dwconv2d_nhwc_k_kernel",
                            "if q - j * S >= 0 and q - j * S < KS:", "if q - j >= 0 and q - j < KS:",
                            [SC._dense_shape(1, 8, 9, 11, 8, 3, S=2, P=1)]),
    # depthwise NHWC KS x KS: a column in the padding read (the previous row's last pixel)
    "dwkh_window_column": ("std/conv/depthwise_nhwc_k", "dwconv2d_nhwc_k_kernel",
                           "if u32(iw0 + q) < u32(wd):", "if iw0 + q < wd:",
                           [SC._dense_shape(1, 8, 4, 5, 8, 3, P=1)]),
    # depthwise NHWC KS x KS: a row in the padding not skipped
    "dwkh_padded_row": ("std/conv/depthwise_nhwc_k", "dwconv2d_nhwc_k_kernel",
                        "ih = oh * S - ph + kh\n            if u32(ih) < u32(h):",
                        "ih = oh * S - ph + kh\n            if ih < h:", [SC._dense_shape(2, 8, 4, 5, 8, 3, P=1)]),
    # depthwise NHWC KS x KS: a short last tile stores past its row (over the next row's first outputs)
    "dwkh_tile_tail": ("std/conv/depthwise_nhwc_k", "dwconv2d_nhwc_k_kernel",
                       "            if ow0 + j < w_out:\n                o = j * VEC",
                       "            if ow0 + j < w_out + 1:\n                o = j * VEC",
                       [SC._dense_shape(1, 8, 3, 5, 8, 3, P=1)]),
}


def f32_rows(name: str, mutant, seed: int, shapes) -> list:
    """The f32 rows of registration ``name`` with its kernel replaced (f32 has the tightest tolerance)."""
    entry = next(e for e in suite("conv") if e.name == name)
    dtypes = tuple(d for d in entry.dtypes if d in (None, D.f32))
    bindings = tuple(b for b in entry.bindings if b.get("T", D.f32) == D.f32)
    fake = registry.Registered("test", name + "#mutant", mutant, entry.setup, shapes, dtypes, bindings, None,
                               entry.origin)
    return run_entry(fake, "interp", seed)


@pytest.mark.parametrize("mutant", MUTANTS, ids=str)
def test_mutant_fails_its_oracle(mutant, tmp_path, seed):
    name, kernel, old, new, shapes = MUTANTS[mutant]
    module = mutant_module(tmp_path, old, new)
    rows = f32_rows(name, getattr(module, kernel), seed, shapes)
    assert rows and any(not r.ok for r in rows), f"the mutant {mutant} passed every row: the test is too weak"


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutation machinery itself changes nothing: a copy with a no-op edit passes its rows."""
    module = mutant_module(tmp_path, "ih0 = oh * sh - ph", "ih0 = oh * sh - ph ")
    assert_rows_pass(f32_rows("std/conv/conv2d", module.conv2d_kernel, seed, [_PAD]), seed)


# ---------------------------------------------------------------- host functions

def _close(got: np.ndarray, want: iron.Expect, dtype: D.DType, terms: int) -> None:
    tol = derive_tolerance(dtype, Depth(1, terms + 1))
    verdict = compare(np.asarray(got).astype(np.float64).reshape(-1),
                      iron.Expect(want.value.reshape(-1), scale=want.scale.reshape(-1)), tol)
    assert verdict.ok, verdict.message


def _f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


@pytest.mark.parametrize("dtype", [D.f32, D.f16, D.bf16], ids=lambda d: d.name)
def test_conv2d_host_both_layouts(dtype):
    """Odd shapes the registry never saw: 11 output channels, a 3x2 kernel, every parameter per axis."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 6, 7, 10)).astype(numpy_dtype(dtype))
    w = rng.standard_normal((11, 6, 3, 2)).astype(numpy_dtype(dtype))
    b = rng.standard_normal(11).astype(numpy_dtype(dtype))
    args = dict(stride=(1, 2), padding=(2, 0), dilation=(1, 3))
    want = SC.dense_nchw(_f64(x), _f64(w), _f64(b), (1, 2), (2, 0), (1, 3))
    y = conv.conv2d(x, w, b, **args, backend="interp")
    assert y.shape == want.value.shape == (2, 11, 9, 4) and y.dtype == x.dtype
    _close(y, want, dtype, 6 * 3 * 2)
    xh, wh = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(w.transpose(0, 2, 3, 1))
    out = np.empty((2, 9, 4, 11), x.dtype)
    assert conv.conv2d(xh, wh, b, **args, layout="NHWC", out=out, backend="interp") is out
    _close(out, SC.to_nhwc(want), dtype, 6 * 3 * 2)


def test_conv1d_host_matches_conv2d_and_oracle():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((3, 7, 31)).astype(np.float32)
    w = rng.standard_normal((5, 7, 4)).astype(np.float32)
    y = conv.conv1d(x, w, stride=3, padding=2, dilation=2, backend="interp")
    want = SC.dense_nchw(_f64(x)[:, :, None], _f64(w)[:, :, None], None, (1, 3), (0, 2), (1, 2))
    assert y.shape == (3, 5, 10)
    _close(y, iron.Expect(want.value[:, :, 0], scale=want.scale[:, :, 0]), D.f32, 7 * 4)
    # a non-contiguous input is copied, not misread
    xt = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
    assert np.array_equal(conv.conv1d(xt, w, stride=3, padding=2, dilation=2, backend="interp"), y)


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_depthwise_host_both_layouts(backend):
    rng = np.random.default_rng(13)
    for dt, c in ((np.float32, 12), (np.float16, 24), (ml_dtypes.bfloat16, 9)):   # 9: the scalar NHWC path
        x = rng.standard_normal((2, c, 10, 7)).astype(dt)
        w = rng.standard_normal((c, 1, 3, 5)).astype(dt)
        b = rng.standard_normal(c).astype(dt)
        want = SC.depthwise_nchw(_f64(x), _f64(w), _f64(b), (2, 1), (1, 2), (1, 1))
        dtype = D.from_numpy(np.dtype(dt))
        _close(conv.depthwise_conv2d(x, w, b, stride=(2, 1), padding=(1, 2), backend=backend), want, dtype, 15)
        xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        yh = conv.depthwise_conv2d(xh, w, b, stride=(2, 1), padding=(1, 2), layout="NHWC", backend=backend)
        _close(yh, SC.to_nhwc(want), dtype, 15)


# ---------------------------------------------------------------- depthwise NCHW, KS x KS at stride 1

def test_depthwise_nchw_picks_the_ks_kernel(monkeypatch):
    """3x3, 5x5 and 7x7 at stride 1 or 2 (both ways) and dilation 1 take dwconv2d_nchw_k_kernel; everything
    else the generic one."""
    launched = spy_on_kernels(monkeypatch, conv, "dwconv2d_nchw_k_kernel", "dwconv2d_nchw_kernel")
    x = np.ones((1, 2, 9, 9), np.float32)
    for ks in (3, 5, 7):
        for stride in (1, 2):
            conv.depthwise_conv2d(x, np.ones((2, 1, ks, ks), np.float32), padding=ks // 2, stride=stride,
                                  backend="interp")
            assert launched.pop() == ("dwconv2d_nchw_k_kernel", {"T": D.f32, "KS": ks, "S": stride})
    for (kh, kw), args in (((3, 3), dict(stride=3)), ((3, 3), dict(stride=(1, 2))), ((3, 3), dict(dilation=2)),
                           ((3, 5), {}), ((1, 1), {}), ((9, 9), {})):
        conv.depthwise_conv2d(x, np.ones((2, 1, kh, kw), np.float32), padding=1, backend="interp", **args)
        assert launched.pop() == ("dwconv2d_nchw_kernel", {"T": D.f32})


def test_depthwise_nhwc_picks_the_ks_kernel(monkeypatch):
    """3x3 and 5x5 at stride 1 or 2 (both ways), dilation 1, C a multiple of the vector width take
    dwconv2d_nhwc_k_kernel; everything else the generic NHWC kernel."""
    launched = spy_on_kernels(monkeypatch, conv, "dwconv2d_nhwc_k_kernel", "dwconv2d_nhwc_kernel")
    x = np.ones((1, 9, 9, 8), np.float32)
    for ks in (3, 5):
        for stride in (1, 2):
            conv.depthwise_conv2d(x, np.ones((8, 1, ks, ks), np.float32), padding=ks // 2, stride=stride,
                                  layout="NHWC", backend="interp")
            assert launched.pop() == ("dwconv2d_nhwc_k_kernel", {"T": D.f32, "KS": ks, "S": stride})
    for c, (kh, kw), args in ((8, (3, 3), dict(stride=3)), (8, (3, 3), dict(stride=(1, 2))),
                              (8, (3, 3), dict(dilation=2)), (8, (7, 7), {}), (8, (3, 5), {}), (6, (3, 3), {})):
        conv.depthwise_conv2d(np.ones((1, 9, 9, c), np.float32), np.ones((c, 1, kh, kw), np.float32), padding=1,
                              layout="NHWC", backend="interp", **args)
        assert launched.pop() == ("dwconv2d_nhwc_kernel", {"T": D.f32, "VEC": 4})


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("ks", [3, 5])
def test_depthwise_nhwc_ks_matches_the_generic_kernel(ks, stride, monkeypatch):
    """Bit for bit the generic NHWC kernel's chain, NaN and -Inf in x and asymmetric padding past KS // 2."""
    rng = np.random.default_rng(26 + ks)
    x = rng.standard_normal((2, 9, 10, 16)).astype(np.float32)
    x[0, 2, 3, 5], x[1, 6, 7, 9] = np.nan, -np.inf
    w = rng.standard_normal((16, 1, ks, ks)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    pad = (ks // 2, ks // 2 + 1)
    got = conv.depthwise_conv2d(x, w, b, stride=stride, padding=pad, layout="NHWC", backend="interp")
    assert np.isnan(got).any() and np.isinf(got).any()
    monkeypatch.setattr(conv, "dw_nhwc_ks", lambda *_: False)
    config.touch()  # the call plan of the call above launches the KS kernel: not replayed
    assert np.array_equal(got, conv.depthwise_conv2d(x, w, b, stride=stride, padding=pad, layout="NHWC",
                                                     backend="interp"), equal_nan=True)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("ks", [3, 5, 7])
def test_depthwise_nchw_ks_matches_oracle_and_generic(ks, stride, monkeypatch):
    """Against the oracle, NaN and -Inf in x included, and bit for bit against the generic kernel's chain."""
    rng = np.random.default_rng(16 + ks)
    x = rng.standard_normal((2, 3, 9, 10)).astype(np.float32)
    x[0, 0, 2, 3], x[1, 2, 6, 7] = np.nan, -np.inf
    w = rng.standard_normal((3, 1, ks, ks)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    pad = (ks // 2, ks // 2 + 1)                                  # asymmetric, past KS // 2 along W
    st = (stride, stride)
    got = conv.depthwise_conv2d(x, w, b, stride=stride, padding=pad, backend="interp")
    want = SC.depthwise_nchw(_f64(x), _f64(w), _f64(b), st, pad, (1, 1)).value
    assert np.isnan(want).any() and np.isinf(want).any()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want)) and np.array_equal(got[np.isinf(got)], want[np.isinf(want)])
    finite = np.isfinite(want)                                    # their windows hold no NaN/Inf: the clean oracle
    clean = SC.depthwise_nchw(_f64(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)), _f64(w), _f64(b), st,
                              pad, (1, 1))
    _close(got[finite], iron.Expect(clean.value[finite], scale=clean.scale[finite]), D.f32, ks * ks)
    monkeypatch.setattr(conv, "dw_nchw_ks", lambda *_: False)     # the generic kernel on the same problem
    config.touch()  # the call plan of the call above launches the KS kernel: not replayed
    assert np.array_equal(got, conv.depthwise_conv2d(x, w, b, stride=stride, padding=pad, backend="interp"),
                          equal_nan=True)


def _inf_weight_over_padding(module, ks: int, backend: str) -> None:
    """An Inf weight at tap (0, 0) of channel 0: the outputs whose tap (0, 0) lies in the padding skip it and
    stay finite (oracle with that weight 0), the others are +-Inf (the sign of the input under it); no NaN."""
    rng = np.random.default_rng(17)
    p = ks // 2
    x = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    w = rng.standard_normal((2, 1, ks, ks)).astype(np.float32)
    w[0, 0, 0, 0] = np.inf
    y = module.depthwise_conv2d(x, w, padding=p, backend=backend)
    assert not np.isnan(y).any(), "a padded tap multiplied an Inf weight"
    w0 = w.copy()
    w0[0, 0, 0, 0] = 0.0
    want = SC.depthwise_nchw(_f64(x), _f64(w0), None, (1, 1), (p, p), (1, 1))
    skipped = np.ones(y.shape, bool)
    skipped[0, 0, p:, p:] = False
    _close(y[skipped], iron.Expect(want.value[skipped], scale=want.scale[skipped]), D.f32, ks * ks)
    assert np.array_equal(y[0, 0, p:, p:], np.inf * np.sign(x[0, 0, :6 - p, :7 - p]))


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("ks", [3, 5, 7])
def test_depthwise_nchw_ks_inf_weight_over_padding(ks, backend):
    _inf_weight_over_padding(conv, ks, backend)


@pytest.mark.parametrize("old, new", [("elif u32(iw0 + S * j + kw) < u32(wd):", "else:"),   # padded taps not skipped
                                      ("if (not isfinite(wsum)) if checked == 1 else isfinite(wsum):",
                                       "if checked == 0:")])                               # no row takes that path
def test_depthwise_nchw_ks_inf_weight_mutants(old, new, tmp_path):
    """The checked path (a filter row with a non-finite weight) keeps 0 * Inf out: its mutants give NaN."""
    with pytest.raises(AssertionError, match="multiplied an Inf weight"):
        _inf_weight_over_padding(mutant_module(tmp_path, old, new), 3, "interp")


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_grids_past_one_row(backend, monkeypatch):
    """With at most one group per grid axis every kernel loops over its tiles / planes: all outputs once."""
    monkeypatch.setattr(conv, "MAX_GROUPS", 1)
    rng = np.random.default_rng(14)
    x = rng.standard_normal((2, 3, 24, 26)).astype(np.float32)      # 1248 output pixels: five dense tiles
    w = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    _close(conv.conv2d(x, w, backend=backend), SC.dense_nchw(_f64(x), _f64(w), None, (1, 1), (0, 0), (1, 1)),
           D.f32, 3)
    wd = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    want = SC.depthwise_nchw(_f64(x), _f64(wd), None, (1, 1), (1, 1), (1, 1))
    _close(conv.depthwise_conv2d(x, wd, padding=1, backend=backend), want, D.f32, 9)   # 6 planes, 1 group
    want_d2 = SC.depthwise_nchw(_f64(x), _f64(wd), None, (1, 1), (2, 2), (2, 2))         # generic: 2 tiles
    _close(conv.depthwise_conv2d(x, wd, padding=2, dilation=2, backend=backend), want_d2, D.f32, 9)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))                    # 1 x 256 lanes: 1024 pixels a tile
    _close(conv.depthwise_conv2d(xh, wd, padding=1, layout="NHWC", backend=backend), SC.to_nhwc(want), D.f32, 9)


def test_empty_batch_launches_nothing():
    x = np.empty((0, 3, 5, 5), np.float32)
    assert conv.conv2d(x, np.ones((2, 3, 3, 3), np.float32), backend="interp").shape == (0, 2, 3, 3)
    assert conv.depthwise_conv2d(x, np.ones((3, 1, 3, 3), np.float32), backend="interp").shape == (0, 3, 3, 3)


def test_nonfinite_inputs_propagate():
    """NaN in x gives NaN exactly in the outputs whose window holds it; Inf gives +-Inf or NaN as IEEE does."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1], x[0, 1, 4, 3] = np.nan, np.inf
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    wd = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    cases = [(conv.conv2d(x, w, padding=1, backend="interp"),
              SC.dense_nchw(_f64(x), _f64(w), None, (1, 1), (1, 1), (1, 1)).value),
             (conv.depthwise_conv2d(x, wd, padding=1, backend="interp"),
              SC.depthwise_nchw(_f64(x), _f64(wd), None, (1, 1), (1, 1), (1, 1)).value),
             (conv.depthwise_conv2d(x, wd, padding=1, stride=2, backend="interp"),        # the generic NCHW kernel
              SC.depthwise_nchw(_f64(x), _f64(wd), None, (2, 2), (1, 1), (1, 1)).value),
             (conv.depthwise_conv2d(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), wd, padding=1, layout="NHWC",
                                    backend="interp").transpose(0, 3, 1, 2),
              SC.depthwise_nchw(_f64(x), _f64(wd), None, (1, 1), (1, 1), (1, 1)).value)]
    for got, want in cases:
        assert np.isnan(want).any() and np.isinf(want).any()
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(np.isinf(got), np.isinf(want)) and np.array_equal(got[np.isinf(got)],
                                                                                 want[np.isinf(want)])
        finite = np.isfinite(want)
        assert np.allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


X4 = np.ones((1, 3, 5, 5), np.float32)


@pytest.mark.parametrize("call, message", [
    (lambda: conv.conv2d(X4, np.ones((2, 4, 3, 3), np.float32)), "x has 3 input channels, w expects 4"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 6, 3), np.float32)), "kernel spans 6 (size 6, dilation 1), larger "
                                                                  "than the padded input 5"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3, 3), np.float32), dilation=(1, 3)), "along W the kernel spans 7"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3, 3), np.float32), stride=0), "stride and dilation must be >= 1"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3, 3), np.float32), padding=-1), "padding >= 0"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3, 3), np.float32), stride=1.5), "expected an int or a pair"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3, 3), np.float32), layout="NCWH"), "layout must be 'NCHW' or 'NHWC'"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3, 3), np.float16)), "w has dtype f16, x has f32"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3), np.float32)), "w must have 4 dimensions"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3, 3), np.float32), np.ones(3, np.float32)), "bias: expected shape (2,)"),
    (lambda: conv.conv2d(X4, np.ones((2, 3, 3, 3), np.float32), out=np.empty((1, 2, 3, 4), np.float32)),
     "conv2d: out has shape (1, 2, 3, 4); conv2d writes shape (1, 2, 3, 3)"),
    (lambda: conv.conv2d(X4.astype(np.int32), np.ones((2, 3, 3, 3), np.int32)), "takes f32, f16 or bf16"),
    (lambda: conv.conv1d(X4[:, :, 0], np.ones((2, 3, 9), np.float32), padding=1), "along L the kernel spans 9"),
    (lambda: conv.conv1d(X4[:, :, 0], np.ones((2, 3, 2), np.float32), stride=(1, 1)), "must be ints"),
    (lambda: conv.depthwise_conv2d(X4, np.ones((3, 2, 3, 3), np.float32)), "w must be (C, 1, KH, KW) with C = 3"),
    (lambda: conv.depthwise_conv2d(X4, np.ones((3, 1, 3, 3), np.float32), layout="NHWC"),
     "w must be (C, 1, KH, KW) with C = 5"),
    (lambda: conv.conv2d([[1.0]], np.ones((2, 3, 3, 3), np.float32)), "x: expected an array"),
])
def test_bad_arguments_are_launch_errors(call, message):
    with pytest.raises(iron.LaunchError) as err:
        call()
    assert message in str(err.value)


def test_vector_paths_need_16_byte_aligned_device_arrays():
    """A torch/CuPy view may start mid-vector: the host then takes the scalar path (host arrays are copied)."""
    class DeviceView:
        def __init__(self, ptr: int):
            self.ptr = ptr

        def data_ptr(self) -> int:
            return self.ptr

    assert conv._aligned(np.ones(3, np.float32), DeviceView(1 << 20), DeviceView(4096 + 16))
    assert not conv._aligned(DeviceView(1 << 20), DeviceView(4096 + 4))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_padding_forms(layout):
    """Asymmetric (top, bottom) / (left, right) padding, 'same' (odd and even kernels, dilated) and 'valid',
    each against the oracle of the input padded explicitly: the kernel zero-fills past the input, so the
    padding after is only a larger output."""
    rng = np.random.default_rng(14)
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    for kernel, padding, dilation, want_hw in (((3, 2), ((2, 0), (1, 3)), (1, 1), (7, 12)),
                                               ((3, 3), "same", (1, 1), (7, 9)),
                                               ((2, 4), "same", (2, 1), (7, 9)),
                                               ((3, 2), "valid", (1, 1), (5, 8))):
        w = rng.standard_normal((4, 3, *kernel)).astype(np.float32)
        if padding == "same":
            sides = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)]
        else:
            sides = [(0, 0), (0, 0)] if padding == "valid" else padding
        padded = np.pad(_f64(x), [(0, 0), (0, 0), *sides])
        want = SC.dense_nchw(padded, _f64(w), None, (1, 1), (0, 0), dilation)
        if layout == "NCHW":
            y = conv.conv2d(x, w, padding=padding, dilation=dilation, backend="interp")
        else:
            xh, wh = (np.ascontiguousarray(a.transpose(0, 2, 3, 1)) for a in (x, w))
            y = conv.conv2d(xh, wh, padding=padding, dilation=dilation, layout="NHWC", backend="interp")
            want = SC.to_nhwc(want)
        assert y.shape == want.value.shape
        assert (y.shape[1:3] if layout == "NHWC" else y.shape[2:]) == want_hw
        _close(y, want, D.f32, 3 * kernel[0] * kernel[1])


def test_conv1d_padding_forms():
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 5, 20)).astype(np.float32)
    w = rng.standard_normal((3, 5, 4)).astype(np.float32)
    for padding, sides, length in (((1, 3), (1, 3), 21), ("same", (1, 2), 20), ("valid", (0, 0), 17),
                                   (2, (2, 2), 21)):
        want = SC.dense_nchw(np.pad(_f64(x), [(0, 0), (0, 0), sides])[:, :, None], _f64(w)[:, :, None], None,
                             (1, 1), (0, 0), (1, 1))
        y = conv.conv1d(x, w, padding=padding, backend="interp")
        assert y.shape == (2, 3, length)
        _close(y, iron.Expect(want.value[:, :, 0], scale=want.scale[:, :, 0]), D.f32, 5 * 4)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_depthwise_padding_forms_and_conv2d_groups_equal_to_channels(layout, monkeypatch):
    """depthwise_conv2d takes conv2d's padding forms (asymmetric on the specialised 3x3 / 5x5 / 7x7 kernels and
    the generic ones, 'same', 'valid'), and conv2d with groups = C_in = C_out runs the depthwise kernels (no
    dense launch) with its residual and activation after: both against the explicitly padded oracle."""
    rng = np.random.default_rng(16)
    launched = spy_on_kernels(monkeypatch, conv, "conv2d_kernel", "dwconv2d_nchw_k_kernel", "dwconv2d_nchw_kernel",
                              "dwconv2d_nhwc_k_kernel", "dwconv2d_nhwc_kernel")
    to = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if layout == "NHWC" else (lambda a: a)
    for c, k, stride, padding, dilation in ((8, 3, 1, ((1, 2), (0, 1)), 1), (8, 3, 2, ((2, 0), (1, 1)), 1),
                                            (16, 5, 1, "same", 1), (8, 3, 1, "valid", 2),
                                            (3, 7, 2, ((3, 3), (2, 4)), 1)):
        x = rng.standard_normal((2, c, 9, 11)).astype(np.float32)
        w = rng.standard_normal((c, 1, k, k)).astype(np.float32)
        if padding == "same":
            sides = [(dilation * (k - 1) // 2, dilation * (k - 1) - dilation * (k - 1) // 2)] * 2
        else:
            sides = [(0, 0), (0, 0)] if padding == "valid" else list(padding)
        want = SC.depthwise_nchw(np.pad(_f64(x), [(0, 0), (0, 0), *sides]), _f64(w), None, (stride, stride),
                                 (0, 0), (dilation, dilation))
        res = rng.standard_normal(want.value.shape).astype(np.float32)
        back = (lambda a: a.transpose(0, 3, 1, 2)) if layout == "NHWC" else (lambda a: a)
        launched.clear()
        y = back(conv.depthwise_conv2d(to(x), w, None, stride, padding, dilation, layout, backend="interp"))
        _close(y, want, D.f32, k * k)
        y = back(conv.conv2d(to(x), to(w), None, stride, padding, dilation, layout, backend="interp", groups=c,
                             activation="relu", residual=to(res)))
        names = [name for name, _ in launched]
        assert "conv2d_kernel" not in names and len(names) == 2, names
        got = np.maximum(want.value + res, 0)
        assert np.abs(y - got).max() < 1e-4 * max(1.0, np.abs(got).max())


def test_padding_errors_say_what_is_accepted():
    x, w = np.zeros((1, 2, 8, 8), np.float32), np.zeros((3, 2, 3, 3), np.float32)
    with pytest.raises(iron.LaunchError, match="stride 1"):
        conv.conv2d(x, w, stride=2, padding="same", backend="interp")
    for bad in ("full", (1, 2, 3), ((1, 2), (3,)), (-1, 0), 1.5):
        with pytest.raises(iron.LaunchError, match="padding"):
            conv.conv2d(x, w, padding=bad, backend="interp")
