"""Math helpers the GLSL emitter adds where Vulkan's precision rules allow too much error, run on the device.

``atan(y, x)`` may be 4096 ulp off under Vulkan's rules (lavapipe: ~17 ulp); Iron emits
``iron_atan2`` instead (src/iron/codegen/emit/portable_math.py): 2.9 ulp at most when every f32
operation is correctly rounded, and Vulkan lets ``lo / hi`` be 2.5 ulp off, which moves the result by
under one more ulp (3.45 seen on lavapipe), so the bound is 4 ulp.  Signed zeros, infinities and NaN
give C's results, rounded correctly.
"""

from __future__ import annotations

import numpy as np

from iron import In, Tensor, f32, kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.lang import atan2, program_id


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
