"""iron.std.cast: the registered rows (all nine pairs) on interp and lavapipe, mutants, four-target
compiles, the host functions (every pair on odd shapes, dtype spellings, copy, out=, errors) and the
non-finite and rounding policy (ties to even, overflow to inf, NaN kept, subnormals)."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught

import iron
from iron.core.dtypes import numpy_dtype
from iron.core import dtypes as D
from iron.std import cast as C

FLOATS = (D.f32, D.f16, D.bf16)


# ---------------------------------------------------------------- mutants: one edit of cast.py each

def mutant_kernel(tmp_path: Path, old: str, new: str):
    """``cast_kernel`` from a copy of iron/std/cast.py with ``old`` (occurring once) replaced by ``new``."""
    return edited_module(C, tmp_path, (old, new)).cast_kernel


@pytest.mark.parametrize("old, new", [
    # the scalar tail stops one element short
    ("            if i + k < n:", "            if i + k < n - 1:"),
    # rounding through f16 first: double rounding, f16's range (f32 -> bf16 overflows at 65520)
    ("r = il.cast(f32(v), DST)", "r = il.cast(f16(v), DST)"),
    # rounding through bf16 first: 8 bits of mantissa where f16 keeps 11
    ("r = il.cast(f32(v), DST)", "r = il.cast(bf16(v), DST)"),
], ids=["tail_short", "through_f16", "through_bf16"])
def test_mutant_fails_its_oracle(old, new, tmp_path, seed):
    assert_mutant_caught("std/cast/cast", mutant_kernel(tmp_path, old, new), seed, shapes=[7, 255])


# ---------------------------------------------------------------- host functions

@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_every_pair_on_an_odd_shape(backend):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((3, 7, 11)) * 2.0 ** rng.uniform(-12, 12, (3, 7, 11))
    for src in FLOATS:
        with np.errstate(over="ignore"):
            x = base.astype(numpy_dtype(src))
        for dst in FLOATS:
            y = C.cast(x, dst, backend=backend)
            assert y.shape == x.shape and y.dtype == numpy_dtype(dst)
            with np.errstate(over="ignore"):
                want = x.astype(np.float64).astype(numpy_dtype(dst))
            assert np.array_equal(y.view(np.uint8), want.view(np.uint8)), (src, dst)  # bit for bit


def test_dtype_spellings_copy_and_out():
    x = np.linspace(-3, 3, 37, dtype=np.float32)
    want = x.astype(ml_dtypes.bfloat16)
    for spelling in ("bf16", "bfloat16", D.bf16, ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16)):
        assert np.array_equal(C.cast(x, spelling, backend="interp"), want)
    assert C.cast(x, np.float16, backend="interp").dtype == np.float16
    out = np.empty(37, ml_dtypes.bfloat16)
    assert C.cast(x, "bf16", out=out, backend="interp") is out and np.array_equal(out, want)
    h = x.astype(np.float16)
    c = C.copy(h, backend="interp")
    assert c is not h and c.dtype == h.dtype and np.array_equal(c, h)
    assert C.copy(np.empty((0, 3), np.float32), backend="interp").shape == (0, 3)


@pytest.mark.parametrize("call, message", [
    (lambda: C.cast(np.ones(4, np.float32), "f64"), "dtype must be f32, f16, bf16, f8e4m3 or f8e5m2, got f64"),
    (lambda: C.cast(np.ones(4, np.float32), "half-float"), "unknown dtype"),
    (lambda: C.cast(np.ones(4, np.int32), "f16"), "f32, f16, bf16, f8e4m3 or f8e5m2"),
    (lambda: C.cast(np.ones(4, np.float32), "f16", out=np.empty(4, np.float32)), "cast: out has dtype f32; cast writes f16"),
    (lambda: C.cast(np.ones(4, np.float32), "f16", out=np.empty(5, np.float16)), "cast: out has shape"),
    (lambda: C.copy("not an array"), "expected an array"),
])
def test_bad_input_is_a_launch_error(call, message):
    with pytest.raises(iron.LaunchError, match=message):
        call()


# ---------------------------------------------------------------- rounding and the non-finite policy

@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_ties_overflow_and_non_finite(backend):
    x = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 65519.0, 65520.0, -1e6, np.inf, -np.inf, np.nan, -0.0,
                  1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 3.3961775292304986e38, -3.4e38], np.float32)
    h = C.cast(x, "f16", backend=backend).astype(np.float64)
    assert list(h[:7]) == [1.0, 1 + 2.0 ** -9, 65504.0, np.inf, -np.inf, np.inf, -np.inf]
    assert np.isnan(h[7]) and h[8] == 0 and np.signbit(h[8])
    b = C.cast(x, "bf16", backend=backend).astype(np.float64)
    assert list(b[9:]) == [1.0, 1 + 2.0 ** -6, np.inf, -np.inf]
    assert list(b[5:7]) == [np.inf, -np.inf] and np.isnan(b[7])
    back = C.cast(C.cast(x, "bf16", backend=backend), "f16", backend=backend).astype(np.float64)
    assert np.isnan(back[7]) and back[5] == np.inf and back[11] == np.inf


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_subnormal_results_are_kept(backend):
    """f16's subnormals (below 2^-14) round to the nearest multiple of 2^-24, ties to even."""
    x = np.array([2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 5 * 2.0 ** -26, 1e-6, -2.0 ** -15], np.float32)
    got = C.cast(x, "f16", backend=backend).astype(np.float64)
    assert list(got) == [2.0 ** -24, 0.0, 2 * 2.0 ** -24, 2.0 ** -24, 17 * 2.0 ** -24, -2.0 ** -15]
    assert np.array_equal(C.cast(got.astype(np.float16), "f32", backend=backend), got.astype(np.float32))
