"""f32 ``sqrt`` and ``/`` on Vulkan are correctly rounded, bit for bit numpy's (docs/ir.md: "Arithmetic semantics").

Vulkan lets ``sqrt`` be as loose as ``1 / inversesqrt`` and ``/`` 2.5 ulp; NVIDIA's driver gave
``sqrt(1.5) = 1.2247447967529297`` (correctly rounded: 1.2247449159622192).  Where the profile has f64 the
GLSL emitter prints them as ``iron_sqrt`` / ``iron_div`` (src/iron/codegen/emit/portable_math.py): a guess
through double, one Newton step on an exact residual, then ``iron_nearest_f32`` picks the f32 whose
midpoints bracket the exact result.  Lavapipe's own ``sqrt`` and ``/`` are already exact, so besides the end
to end checks the helpers run here with deliberately wrong first guesses: the correction must do the work.
"""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_shaders import HEADER, abi_for, compile_glsl, t

from iron import In, Tensor, f16, f32, kernel
from iron.codegen.abi import pack_params
from iron.codegen.emit import emit_kernel, portable_math
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import profile
from iron.core import dtypes as D
from iron.lang import program_id, sqrt

F32 = np.float32
TINY = np.float32(np.finfo(np.float32).tiny)


@kernel
def div_sqrt(a: In[f32], b: In[f32], q: Tensor[f32], r: Tensor[f32]):
    i = program_id(0)
    q[i] = a[i] / b[i]
    r[i] = sqrt(a[i])


@kernel
def div_sqrt_f16(a: In[f16], b: In[f16], q: Tensor[f16], r: Tensor[f16]):
    i = program_id(0)
    q[i] = a[i] / b[i]
    r[i] = sqrt(a[i])


@kernel
def by_constants(a: In[f32], out: Tensor[f32]):
    i = program_id(0)
    x = a[i]
    out[4 * i + 0] = x / 4.0  # a power of two: printed as x * 0.25
    out[4 * i + 1] = x / 0.125
    out[4 * i + 2] = x / 3.0
    out[4 * i + 3] = x / 1.1754944e-38  # 2**-126: its inverse 2**126 is a normal f32 too


def _bits(v: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(v, F32).view(np.uint32)


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(F32)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return (_bits(got) == _bits(want)) | (np.isnan(got) & np.isnan(want))


def _report(name: str, got: np.ndarray, want: np.ndarray, *inputs: np.ndarray) -> str:
    bad = np.nonzero(~_same(got, want))[0]
    rows = [f"{name}{tuple(repr(v[k]) for v in inputs)}: {got[k]!r}, correctly rounded {want[k]!r}" for k in bad[:12]]
    return f"{bad.size} of {got.size} differ:\n" + "\n".join(rows)


def _random_finite(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniform over the finite f32 bit patterns (every exponent equally likely, subnormals included)."""
    bits = rng.integers(0, 0x7F800000, n, dtype=np.uint32) | (rng.integers(0, 2, n, dtype=np.uint32) << 31)
    return _f32(bits)


def _edges() -> np.ndarray:
    """Powers of two and their neighbours, the ends of the range, small integers, 1.5 (NVIDIA's case)."""
    powers = _bits(np.ldexp(F32(1), np.arange(-149, 128)).astype(F32))
    around = np.concatenate([powers - 1, powers, powers + 1])
    ends = [0x00000001, 0x00000002, 0x007FFFFF, 0x00800000, 0x00800001, 0x7F7FFFFF, 0x7F7FFFFE, 0x3F800000]
    small = _bits(np.arange(1, 300, dtype=F32))
    out = _f32(np.concatenate([around, ends, small]).astype(np.uint32))
    return np.concatenate([out, [F32(1.5), F32(2.0), F32(3.0), F32(0.1)]]).astype(F32)


def _division_operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = 40_000
    a, b = [_random_finite(rng, n)], [_random_finite(rng, n)]  # overflow, underflow, subnormal results
    near = rng.uniform(0.5, 2.0, (2, n)).astype(F32)  # ordinary ratios
    a.append(near[0])
    b.append(near[1])
    e = _edges()
    a.append(np.repeat(e, e.size // 8 + 1)[: e.size * 8])
    b.append(np.resize(np.roll(e, 3), e.size * 8))
    # Quotients right next to a midpoint between two f32s: a = RN(m * b) for 25-bit midpoints m.
    m = (rng.integers(1 << 24, 1 << 25, n) | 1).astype(np.float64) * 2.0 ** rng.integers(-30, 30, n)
    y = rng.uniform(1, 2, n).astype(F32) * np.exp2(rng.integers(-20, 20, n)).astype(F32)
    a.append((m * y.astype(np.float64)).astype(F32))
    b.append(y)
    # Exact quotients, and exact ties between subnormals (ties to even): (2k + 1) * 2**-150 * b / b.
    q = rng.uniform(1, 2, n).astype(F32) * np.exp2(rng.integers(-60, 60, n)).astype(F32)
    y = (rng.integers(1, 1 << 12, n) * np.exp2(rng.integers(-20, 20, n))).astype(F32)
    a.append((q.astype(np.float64) * y.astype(np.float64)).astype(F32))
    b.append(y)
    k = rng.integers(0, 1 << 20, n) * 2 + 1
    scale = rng.choice([1.0, 3.0, 5.0], n) * np.exp2(rng.integers(30, 60, n))
    a.append((k * scale * 2.0 ** -150).astype(F32))
    b.append(scale.astype(F32))
    a.append(np.array([1, -1, 0, -0.0, np.inf, -np.inf, np.nan, 3e38, 1e-45, 5, 0, np.inf, 1e-45], F32))
    b.append(np.array([0, 0, 0, 5, 2, np.inf, 1, 1e-45, 3e38, np.nan, -0.0, -0.0, -np.inf], F32))
    return np.concatenate(a).astype(F32), np.concatenate(b).astype(F32)


def _sqrt_operands(rng: np.random.Generator) -> np.ndarray:
    n = 40_000
    m = (rng.integers(1 << 24, 1 << 25, n) | 1).astype(np.float64) * 2.0 ** rng.integers(-90, 40, n)
    exact = (rng.integers(1, 1 << 12, n) * np.exp2(rng.integers(-70, 50, n))).astype(F32)
    return np.concatenate([np.abs(_random_finite(rng, n)), _edges(), (m * m).astype(F32),  # near midpoints
                           exact * exact, rng.uniform(0.25, 4, n).astype(F32),
                           [0, -0.0, np.inf, -np.inf, np.nan, -1, -1e-45]]).astype(F32)


def _launch(device, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q, r = np.zeros_like(a), np.zeros_like(a)
    device.launch(run_pipeline(div_sqrt.ir(), PassContext.for_target("spirv")), [a, b, q, r], (a.size,), (64,))
    return q, r


def test_division_is_correctly_rounded(device, seed):
    a, b = _division_operands(seed.rng())
    q, _ = _launch(device, a, b)
    with np.errstate(all="ignore"):
        want = a / b
    assert ((np.abs(want) < TINY) & (want != 0)).sum() > 1000  # subnormal results were exercised
    assert _same(q, want).all(), _report("div", q, want, a, b)


def test_sqrt_is_correctly_rounded(device, seed):
    x = _sqrt_operands(seed.rng())
    _, r = _launch(device, x, np.ones_like(x))
    with np.errstate(all="ignore"):
        want = np.sqrt(x)
    assert _same(r, want).all(), _report("sqrt", r, want, x)


def test_f16_division_and_sqrt_round_once(device, seed):
    """f16 runs in f32 and rounds back: exact only because the f32 results are (docs/backends.md)."""
    bits = np.arange(0, 0x7C00, dtype=np.uint16)  # every finite non-negative f16
    a = bits.view(np.float16)
    b = np.resize(np.roll(a, 1234), a.size)
    q, r = np.zeros_like(a), np.zeros_like(a)
    device.launch(run_pipeline(div_sqrt_f16.ir(), PassContext.for_target("spirv")), [a, b, q, r], (a.size,), (64,))
    with np.errstate(all="ignore"):
        want_q = (a.astype(np.float64) / b.astype(np.float64)).astype(np.float16)
        want_r = np.sqrt(a.astype(np.float64)).astype(np.float16)
    g, w = q.astype(F32), want_q.astype(F32)
    assert _same(g, w).all(), _report("div", g, w, a.astype(F32), b.astype(F32))
    g, w = r.astype(F32), want_r.astype(F32)
    assert _same(g, w).all(), _report("sqrt", g, w, a.astype(F32))


def test_division_by_constants(device):
    x = np.concatenate([_edges(), -_edges(), [np.inf, np.nan, 0.0, -0.0]]).astype(F32)
    out = np.zeros(4 * x.size, F32)
    device.launch(run_pipeline(by_constants.ir(), PassContext.for_target("spirv")), [x, out], (x.size,), (64,))
    with np.errstate(all="ignore"):
        want = np.stack([x / F32(4.0), x / F32(0.125), x / F32(3.0), x / F32(2.0 ** -126)], 1).ravel()
    assert _same(out, want).all(), _report("x / c", out, want)


def test_emitter_uses_the_helpers_only_with_f64():
    ir = run_pipeline(div_sqrt.ir(), PassContext.for_target("spirv"))
    source = emit_kernel(ir, "spirv").source
    assert "iron_div(" in source and "iron_sqrt(" in source and "iron_nearest_f32(" in source
    plain = emit_kernel(ir, "spirv", profile("spirv", "vulkan-baseline")).source  # no f64: the plain ops
    assert "iron_div" not in plain and "iron_sqrt" not in plain and " / " in plain and "sqrt(" in plain
    consts = emit_kernel(run_pipeline(by_constants.ir(), PassContext.for_target("spirv")), "spirv").source
    assert "* 0.25" in consts and "* 8.0" in consts and "iron_div(" in consts


# ------------------------------------------------------------------ the correction step with wrong guesses

_NEAREST = portable_math.helper_text("iron_nearest_f32", "", "", "", "")

_NEAREST_SHADER = HEADER + """#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Y { float y[]; };
layout(set = 0, binding = 2) readonly buffer G { uint guess[]; };
layout(set = 0, binding = 3) buffer Out { uint out_[]; };
layout(push_constant) uniform Params { uint grid_x; uint grid_y; uint grid_z; } p;
""" + _NEAREST + """
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= p.grid_x) return;
  bool root = y[i] == 0.0;  // y = 0 asks for sqrt(x)
  out_[i] = iron_nearest_f32(guess[i], double(x[i]), double(y[i]), root);
}
"""


def _run_nearest(device, x: np.ndarray, y: np.ndarray, guess: np.ndarray) -> np.ndarray:
    abi = abi_for("nearest", [("x", t(D.f32)), ("y", t(D.f32)), ("guess", t(D.u32)), ("out", t(D.u32))],
                  access={"x": "read", "y": "read", "guess": "read"})
    out = np.zeros(x.size, np.uint32)
    device.run_spirv(compile_glsl(_NEAREST_SHADER), abi, [x, y, guess.astype(np.uint32), out],
                     pack_params(abi, {}, (x.size,), {}), (x.size,), (64,))
    return out


def test_nearest_f32_moves_a_guess_one_ulp_off_to_the_correct_result(device, seed):
    """iron_nearest_f32 alone, fed the correct bits and their neighbours: it must return the correct bits."""
    a, b = _division_operands(seed.rng())
    a, b = np.abs(a), np.abs(b)
    with np.errstate(all="ignore"):
        q = a / b
    ok = np.isfinite(a) & np.isfinite(b) & (a != 0) & (b != 0) & ~np.isnan(q)
    a, b, q = a[ok], b[ok], q[ok]
    s = _sqrt_operands(seed.rng())
    s = s[np.isfinite(s) & (s > 0)]
    x = np.concatenate([a, s]).astype(F32)
    y = np.concatenate([b, np.zeros_like(s)]).astype(F32)
    want = _bits(np.concatenate([q, np.sqrt(s)]).astype(F32))
    for step in (-1, 0, 1):
        guess = want.astype(np.int64) + step
        usable = (guess >= 0) & (guess <= 0x7F800000)  # no guess below 0 or past infinity
        got = _run_nearest(device, x[usable], y[usable], guess[usable])
        assert (got == want[usable]).all(), _report(f"nearest(guess {step:+d} ulp)", _f32(got),
                                                    _f32(want[usable]), x[usable], y[usable])


def _perturbed(helper: str, line: str, expression: str, ulps: int) -> str:
    """The helper's text with its first guess ``expression`` moved by ``ulps`` f32 ulps (kept finite)."""
    text = portable_math.helper_text(helper, "", "", "", "")
    assert line in text, f"{helper}'s first guess changed: update this test"
    moved = (f"double(uintBitsToFloat(uint(clamp(int(floatBitsToUint(float({expression}))) + ({ulps}), 0, "
             f"0x7f7fffff))))")
    return text.replace(line, line.replace(f"double(float({expression}))", moved))


_DIV_GUESS = ("  precise double q = double(float(min(x * inverse, double(uintBitsToFloat(0x7f7fffffu)))));",
              "min(x * inverse, double(uintBitsToFloat(0x7f7fffffu)))")
_SQRT_GUESS = ("  precise double r = double(float(d * t));", "d * t")


@pytest.mark.parametrize("ulps", [-9, -3, -1, 1, 2, 9])
def test_helpers_correct_a_first_guess_that_is_ulps_off(device, seed, ulps):
    """A driver's double division or inversesqrt may be loose, or narrowed to its f32 one: the Newton step and
    iron_nearest_f32 must still give the correctly rounded result."""
    shader = HEADER + """#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) writeonly buffer Q { float q[]; };
layout(set = 0, binding = 3) writeonly buffer R { float r[]; };
layout(push_constant) uniform Params { uint grid_x; uint grid_y; uint grid_z; } p;
""" + "\n\n".join([_NEAREST, _perturbed("iron_div_f64", *_DIV_GUESS, ulps),
                   _perturbed("iron_sqrt_f64", *_SQRT_GUESS, ulps)]) + """
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= p.grid_x) return;
  q[i] = iron_div(a[i], b[i]);
  r[i] = iron_sqrt(a[i]);
}
"""
    a, b = _division_operands(seed.rng())
    s = _sqrt_operands(seed.rng())
    a, b = np.concatenate([a, s]), np.concatenate([b, np.ones_like(s)])
    abi = abi_for("perturbed", [("a", t(D.f32)), ("b", t(D.f32)), ("q", t(D.f32)), ("r", t(D.f32))],
                  access={"a": "read", "b": "read", "q": "write", "r": "write"})
    q, r = np.zeros_like(a), np.zeros_like(a)
    device.run_spirv(compile_glsl(shader), abi, [a, b, q, r], pack_params(abi, {}, (a.size,), {}), (a.size,), (64,))
    with np.errstate(all="ignore"):
        want_q, want_r = a / b, np.sqrt(a)
    assert _same(q, want_q).all(), _report("div", q, want_q, a, b)
    assert _same(r, want_r).all(), _report("sqrt", r, want_r, a)
