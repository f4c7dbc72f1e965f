"""Math helpers the GLSL emitter adds where Vulkan's precision rules allow too much error, run on the device.

``atan(y, x)`` may be 4096 ulp off under Vulkan's rules (lavapipe: ~17 ulp); Iron emits
``iron_atan2`` instead (src/iron/codegen/emit/portable_math.py): 2.9 ulp at most when every f32
operation is correctly rounded, and Vulkan lets ``lo / hi`` be 2.5 ulp off, which moves the result by
under one more ulp (3.45 seen on lavapipe), so the bound is 4 ulp.  Signed zeros, infinities and NaN
give C's results, rounded correctly.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iron import In, Tensor, f32, kernel
from iron.codegen.abi import pack_params
from iron.codegen.emit import emit_kernel
from iron.codegen.toolchains.spirv import compile_glsl
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.lang import atan2, cos, pow, program_id, sin


@kernel
def atan2_kernel(y: In[f32], x: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = atan2(y[i], x[i])


def _run(device, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = np.full_like(y, np.nan)
    ir = run_pipeline(atan2_kernel.ir(), PassContext.for_target("spirv"))
    device.launch(ir, [y, x, out], (y.size,), (256,))
    return out


def test_atan2_within_4_ulp_over_a_wide_range(device):
    rng = np.random.default_rng(7)
    n = 1 << 18
    y = (rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))).astype(np.float32)
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))).astype(np.float32)
    got = _run(device, y, x).astype(np.float64)
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    ulp = np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert ulp.max() <= 4.0, f"worst {ulp.max():.2f} ulp at y={y[ulp.argmax()]!r}, x={x[ulp.argmax()]!r}"


def test_atan2_special_values_follow_c(device):
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, np.nan], np.float32)
    yy, xx = (a.ravel().copy() for a in np.meshgrid(special, special))
    got = _run(device, yy, xx)
    want = np.arctan2(yy.astype(np.float64), xx.astype(np.float64)).astype(np.float32)  # correctly rounded
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), [(float(a), float(b), float(g), float(w))
                        for a, b, g, w in zip(yy[~same], xx[~same], got[~same], want[~same])]


@kernel
def sincos_kernel(x: In[f32], s: Tensor[f32], c: Tensor[f32]):
    i = program_id(0)
    s[i] = sin(x[i])
    c[i] = cos(x[i])


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)


def _sincos(device, x: np.ndarray, without_f64: bool = False) -> tuple[np.ndarray, np.ndarray]:
    s, c = np.full_like(x, np.nan), np.full_like(x, np.nan)
    ir = run_pipeline(sincos_kernel.ir(), PassContext.for_target("spirv"))
    if not without_f64:
        device.launch(ir, [x, s, c], (x.size,), (256,))
        return s, c
    # The helpers as a device without shaderFloat64 gets them (f32 reduction), run on this one.
    prof = dataclasses.replace(device.profile, features=device.profile.features - {"f64"})
    emitted = emit_kernel(ir, "spirv", prof)
    assert "double" not in emitted.source
    params = pack_params(emitted.abi, {}, (x.size,), {"x": x.size, "s": x.size, "c": x.size})
    device.run_spirv(compile_glsl(emitted.source).binary, emitted.abi, [x, s, c], params, (x.size,), (256,))
    return s, c


def _wide(n: int, top: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (np.sign(rng.standard_normal(n)) * np.exp(rng.uniform(np.log(1e-6), np.log(top), n))).astype(np.float32)


def _worst(x: np.ndarray, s: np.ndarray, c: np.ndarray) -> dict[str, tuple[float, float]]:
    x64 = x.astype(np.float64)
    out = {}
    for name, got, want in (("sin", s, np.sin(x64)), ("cos", c, np.cos(x64))):
        ulp = _ulps(got, want)
        out[name] = (float(ulp.max()), float(x[ulp.argmax()]))
    return out


def test_sin_and_cos_within_2_ulp_up_to_1_5e6(device):
    """Vulkan lets sin/cos be 2**-11 off (NVIDIA's driver: ~20 ulp near 0); Iron's iron_sin/iron_cos are not."""
    x = _wide(1 << 18, 1.5e6, 11)
    x[:4] = [np.float32(np.pi / 2), np.float32(np.pi), np.float32(3 * np.pi / 4), 1.5e6]
    for name, (ulp, at) in _worst(x, *_sincos(device, x)).items():
        assert ulp <= 2.0, f"{name}: worst {ulp:.2f} ulp at x={at!r}"


def test_next_to_multiples_of_half_pi_the_tiny_results_keep_their_accuracy(device):
    k = np.arange(1, 1 << 14, dtype=np.float64)
    near = np.float32(k * np.pi / 2)
    x = np.concatenate([near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(0))])
    x = x[: x.size // 256 * 256]
    for name, (ulp, at) in _worst(x, *_sincos(device, x)).items():
        assert ulp <= 2.0, f"{name}: worst {ulp:.2f} ulp at x={at!r}"


def test_without_f64_the_f32_reduction_is_within_2_ulp_away_from_multiples_of_half_pi(device):
    x = _wide(1 << 16, 6433.0, 12)
    r = np.abs(x.astype(np.float64) - np.round(x.astype(np.float64) / (np.pi / 2)) * (np.pi / 2))
    x = x[r > 1e-3][: 1 << 15]
    for name, (ulp, at) in _worst(x, *_sincos(device, x, without_f64=True)).items():
        assert ulp <= 2.0, f"{name}: worst {ulp:.2f} ulp at x={at!r}"


def test_sin_and_cos_special_values(device):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -7000.0], np.float32)
    s, c = np.full_like(x, 7.0), np.full_like(x, 7.0)
    ir = run_pipeline(sincos_kernel.ir(), PassContext.for_target("spirv"))
    device.launch(ir, [x, s, c], (x.size,), (x.size,))
    assert s[0] == 0 and not np.signbit(s[0]) and s[1] == 0 and np.signbit(s[1]) and c[0] == 1 and c[1] == 1
    assert np.isnan(s[2:5]).all() and np.isnan(c[2:5]).all()
    assert np.all(np.abs(s[5:]) <= 1) and np.all(np.abs(c[5:]) <= 1)  # large arguments: the driver's, bounded


@kernel
def pow_kernel(x: In[f32], y: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = pow(x[i], y[i])


def test_pow_special_values_follow_c(device):
    """iron_pow: C's pow at zeros, infinities, NaN and negative bases (pow(-inf, 0.5) is +inf, not NaN)."""
    xs = np.array([-np.inf, -2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, np.nan], np.float32)
    ys = np.array([-np.inf, -2.5, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, np.inf, np.nan], np.float32)
    xx, yy = (a.ravel().copy() for a in np.meshgrid(xs, ys))
    out = np.full_like(xx, 7.0)
    ir = run_pipeline(pow_kernel.ir(), PassContext.for_target("spirv"))
    device.launch(ir, [xx, yy, out], (xx.size,), (256,))
    with np.errstate(all="ignore"):
        want = np.power(xx.astype(np.float64), yy.astype(np.float64)).astype(np.float32)  # C's pow
    close = np.isclose(out, want, rtol=2e-6) & (np.signbit(out) == np.signbit(want))
    same = close | (np.isnan(out) & np.isnan(want))
    assert same.all(), [(float(a), float(b), float(g), float(w))
                        for a, b, g, w in zip(xx[~same], yy[~same], out[~same], want[~same])]
