"""Float ``%`` on Vulkan is C's ``fmod`` exactly, as on the interpreter, for every finite input.

The GLSL helper once computed ``x - trunc(x / y) * y``: in f32 that loses the remainder once
``|x / y|`` passes 2**24, and even in f64 once it passes 2**29 (``1e9 % 2.4887531`` gave 0.0 on
lavapipe, the interpreter 0.7233).  ``iron_fmod`` now works on the integer significands
(src/iron/codegen/emit/portable_math.py), so these tests ask for bit equality, signed zeros included.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from iron import In, T, Tensor, bf16, f16, f32, kernel, variants
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.lang import program_id


@kernel(variants(T=[f32, f16, bf16]))
def rem_kernel(x: In[T], y: In[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = x[i] % y[i]


@kernel
def rem_by_literal(x: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = x[i] % 2.4887531


_NUMPY = {f32: np.float32, f16: np.float16, bf16: ml_dtypes.bfloat16}


def _on_vulkan(device, k, args: list[np.ndarray]) -> np.ndarray:
    n = args[0].size
    ir = k.ir() if callable(k.ir) else k.ir  # a kernel's method, a variant's attribute
    device.launch(run_pipeline(ir, PassContext.for_target("spirv")), args, (n,), (64,))
    return args[-1]


def _on_interpreter(k, args: list[np.ndarray]) -> np.ndarray:
    k.launch(*args, grid=(args[0].size,), group=(64,), backend="interp")
    return args[-1]


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    g, w = got.astype(np.float64), want.astype(np.float64)
    return ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))


def _wide_operands(rng: np.random.Generator, n: int, np_dtype: type, lo: float, hi: float) -> np.ndarray:
    """Random signs and magnitudes spread evenly over exp(lo) .. exp(hi), in np_dtype."""
    return (rng.choice([-1.0, 1.0], n) * np.exp(rng.uniform(lo, hi, n))).astype(np_dtype)


def test_huge_quotients_keep_their_remainder(device):
    """The issue's case: |x / y| >= 2**24 (and >= 2**29) no longer gives 0 or a wrong remainder."""
    x = np.array([1e9, -1e9, 3e9, 3.4e38, -1e30, 16777217.0, 6.6827146e9], np.float32)
    y = np.array([2.4887531, 2.4887531, 2.4887531, 1e-30, 7.0, 0.3, 0.6766637], np.float32)
    got = _on_vulkan(device, rem_kernel.variant(T=f32), [x, y, np.full_like(x, np.nan)])
    want = np.fmod(x, y)
    assert got[0] == pytest.approx(0.7233398, abs=1e-6)
    assert _same_bits(got, want).all(), list(zip(x, y, got, want))
    literal = _on_vulkan(device, rem_by_literal, [x[:3].copy(), np.full(3, np.nan, np.float32)])
    assert _same_bits(literal, np.fmod(x[:3], np.float32(2.4887531))).all(), literal


@pytest.mark.parametrize("dtype", [f32, f16, bf16], ids=lambda d: d.name)
def test_random_operands_match_the_interpreter_bit_for_bit(device, dtype):
    rng = np.random.default_rng(16)
    np_dtype = _NUMPY[dtype]
    n = 1 << 14
    span = {f32: 60.0, f16: 10.0, bf16: 60.0}[dtype]  # f16 spans 6e-8 .. 65504
    x = _wide_operands(rng, n, np_dtype, -span, span)
    y = _wide_operands(rng, n, np_dtype, -span, span)
    x[:8] = np.array([0.0, -0.0, 5.0, -5.0, 1.0, -3.0, 0.0, 7.0], np_dtype)  # exact multiples: signed zeros
    y[:8] = np.array([3.0, 3.0, 2.5, 2.5, 1.0, 1.5, -0.0, np.inf], np_dtype)
    k = rem_kernel.variant(T=dtype)
    got = _on_vulkan(device, k, [x, y, np.zeros_like(x)])
    want = _on_interpreter(k, [x, y, np.zeros_like(x)])
    same = _same_bits(got, want)
    examples = list(zip(x[~same][:4], y[~same][:4], got[~same][:4], want[~same][:4]))
    assert same.all(), f"{(~same).sum()} of {n} differ, e.g. {examples}"
    with np.errstate(invalid="ignore", divide="ignore"):  # x % 0 is NaN
        assert _same_bits(want, np.fmod(x.astype(np.float64), y.astype(np.float64)).astype(np_dtype)).all()
        quotients = np.abs(x.astype(np.float64) / y.astype(np.float64))
    assert (quotients > 2.0 ** 29).sum() > n // 10 or dtype == f16  # huge quotients were really tested


def test_special_values_and_subnormals_follow_c(device):
    tiny = np.float32(1.4e-45)  # the smallest subnormal
    special = np.array([0.0, -0.0, 1.0, -1.0, 3.5, np.inf, -np.inf, np.nan, tiny, -3 * tiny, 1.1754942e-38,
                        3.4028235e38, 1e-40], np.float32)
    xx, yy = (a.ravel().copy() for a in np.meshgrid(special, special))
    k = rem_kernel.variant(T=f32)
    got = _on_vulkan(device, k, [xx, yy, np.zeros_like(xx)])
    with np.errstate(invalid="ignore"):
        want = np.fmod(xx, yy)
    same = _same_bits(got, want)
    assert same.all(), [(float(a), float(b), float(g), float(w))
                        for a, b, g, w in zip(xx[~same], yy[~same], got[~same], want[~same])]
