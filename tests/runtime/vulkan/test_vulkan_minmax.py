"""min / max on Vulkan as on the interpreter: IEEE minNum / maxNum with -0 below +0 (docs/ir.md).

The GLSL emitter writes them as helpers (``portable_math.iron_fmin`` / ``iron_fmax``), because GLSL's own
``min`` / ``max`` are undefined for NaN and need not order signed zeros.  NVIDIA's Vulkan driver (580, H200) got
two earlier forms wrong: one select over ``a > b || (a == b && signbit(b))`` gave ``-2^20`` for
``max(f32(-abs(t)), -2^20)`` on every thread when the shader also held the f64 division helper (fuzzer seed 2128,
reduced), and any float comparison there sees a subnormal as zero but returns it unflushed
(``min(0, 1e-45)`` gave ``1e-45``).  The helpers now decide on an integer key of the bits.  On lavapipe every
form is right; these tests are the ones that failed on that driver, and hold every device to the special
values.
"""

from __future__ import annotations

import itertools

import numpy as np
from float_flush import accepted, flushed, keeps_subnormals, same

from iron import In, Tensor, f32, i32, kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.lang import program_id, thread_id


@kernel(fp_contract=False)
def seed_2128(fa: In[f32], fo: Tensor[f32]):
    """Fuzzer seed 2128 reduced: a division in the shader, then a clamp of a negated integer magnitude."""
    i = program_id(0)
    t = thread_id(0)
    af = fa[i]
    fo[i * 2 + 0] = min(max((65535.0 / (abs(af) + 1.0)) * af, -1048576.0), 1048576.0)
    fo[i * 2 + 1] = min(max(f32(-abs(t)), -1048576.0), 1048576.0)


@kernel(fp_contract=False)
def min_max(x: In[f32], y: In[f32], out: Tensor[f32], q: Tensor[f32]):
    i = program_id(0)
    a = x[i]
    b = y[i]
    out[i * 4 + 0] = min(a, b)
    out[i * 4 + 1] = max(a, b)
    out[i * 4 + 2] = max(a, -1048576.0)
    out[i * 4 + 3] = min(a, 1048576.0)
    q[i] = a / (abs(b) + 1.0)  # the f64 division helper in the same shader, as in seed 2128


def _spirv(k):
    return run_pipeline(k.ir(), PassContext.for_target("spirv"))


def test_fuzzer_seed_2128_clamps_each_thread_its_own_value(device):
    group = 64
    fa = (np.arange(4 * group, dtype=np.float32) - 100.0) * 0.75
    got = np.full(2 * fa.size, 7.0, np.float32)
    device.launch(_spirv(seed_2128), [fa, got], (fa.size,), (group,))
    want = np.full_like(got, 7.0)
    seed_2128.launch(fa, want, grid=(fa.size,), group=(group,), backend="interp")
    assert np.array_equal(got[1::2], -(np.arange(fa.size) % group).astype(np.float32))
    assert np.array_equal(got, want)


VALUES = np.array([np.nan, -0.0, 0.0, -1.0, 1.0, np.inf, -np.inf, -2e6, 2e6, 1e-45, -1e-45, 3.4e38], np.float32)


def test_min_and_max_of_special_values_match_the_interpreter(device):
    pairs = np.array(list(itertools.product(VALUES, VALUES)), np.float32)
    x, y = np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])
    n = x.size

    def interp(xv: np.ndarray, yv: np.ndarray) -> np.ndarray:
        out, q = np.full(4 * n, 7.0, np.float32), np.zeros(n, np.float32)
        min_max.launch(xv, yv, out, q, grid=(n,), group=(1,), backend="interp")
        return out

    got, q = np.full(4 * n, 7.0, np.float32), np.zeros(n, np.float32)
    device.launch(_spirv(min_max), [x, y, got, q], (n,), (1,))
    want = interp(x, y)
    ok = same(got, want)
    # a device without 32-bit DenormPreserve may see a subnormal operand as a zero of its sign (docs/vulkan.md)
    subnormal = np.repeat((flushed(x) != x) | (flushed(y) != y), 4)
    allowed = accepted(got, want, interp(flushed(x), flushed(y)), keeps_subnormals(device.info))
    ok[subnormal] = allowed[subnormal]
    names = ("min(a, b)", "max(a, b)", "max(a, -2^20)", "min(a, 2^20)")
    bad = [f"{names[k % 4]} at a={x[k // 4]!r}, b={y[k // 4]!r}: {got[k]!r}, interpreter {want[k]!r}"
           for k in np.nonzero(~ok)[0]]
    assert not bad, "\n".join(bad)
