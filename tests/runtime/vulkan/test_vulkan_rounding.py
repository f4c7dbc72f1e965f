"""f32 ``sqrt`` and ``/`` on Vulkan are correctly rounded, bit for bit numpy's (docs/ir.md: "Arithmetic semantics").

Vulkan lets ``sqrt`` be as loose as ``1 / inversesqrt`` and ``/`` 2.5 ulp; NVIDIA's driver gave
``sqrt(1.5) = 1.2247447967529297`` (correctly rounded: 1.2247449159622192).  Where the profile has f64 the
GLSL emitter prints them as ``iron_sqrt`` / ``iron_div`` (src/iron/codegen/emit/portable_math.py): a guess
through double, one Newton step on an exact residual, then ``iron_nearest_f32`` picks the f32 whose
midpoints bracket the exact result.  Lavapipe's own ``sqrt`` and ``/`` are already exact, so besides the end
to end checks the helpers run here with deliberately wrong first guesses: the correction must do the work.

Subnormals: the helpers read and write them through bits, so they are exact even where a device flushes the
subnormal f32 values it converts (NVIDIA's driver without 32-bit DenormPreserve gave ``sqrt(7.572461e-39) = nan``
and ``-1.1388722e-33 / 1.2461959e+14 = -1e-45`` with the first helpers); the helper tests also run with every
conversion flushing (``float_flush.simulate_flushing``).  End to end, a device without DenormPreserve (lavapipe
keeps subnormals) may still flush the subnormal operands and results of the kernel's other f32 operations:
there each result is the correctly rounded one or, only where an operand or that result is subnormal, the
flushed form (``float_flush.flush_allowed``, docs/vulkan.md "Subnormals").
"""

from __future__ import annotations

import numpy as np
import pytest
from float_flush import accepted, flushed, keeps_subnormals, same, simulate_flushing
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


def _report(name: str, got: np.ndarray, want: np.ndarray, *inputs: np.ndarray, ok: np.ndarray | None = None) -> str:
    bad = np.nonzero(~(same(got, want) if ok is None else ok))[0]
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
        want_flushed_inputs = flushed(a) / flushed(b)
    assert ((np.abs(want) < TINY) & (want != 0)).sum() > 1000  # subnormal results were exercised
    ok = accepted(q, want, want_flushed_inputs, keeps_subnormals(device.info))
    assert ok.all(), _report("div", q, want, a, b, ok=ok)


def test_sqrt_is_correctly_rounded(device, seed):
    x = _sqrt_operands(seed.rng())
    _, r = _launch(device, x, np.ones_like(x))
    with np.errstate(all="ignore"):
        want = np.sqrt(x)
        want_flushed_inputs = np.sqrt(flushed(x))
    ok = accepted(r, want, want_flushed_inputs, keeps_subnormals(device.info))
    assert ok.all(), _report("sqrt", r, want, x, ok=ok)


def test_f16_division_and_sqrt_round_once(device, seed):
    """f16 runs in f32 and rounds back: exact only because the f32 results are (docs/backends.md)."""
    bits = np.arange(0, 0x7C00, dtype=np.uint16)  # every finite non-negative f16
    a = bits.view(np.float16)
    b = np.resize(np.roll(a, 1234), a.size)
    q, r = np.zeros_like(a), np.zeros_like(a)
    device.launch(run_pipeline(div_sqrt_f16.ir(), PassContext.for_target("spirv")), [a, b, q, r], (a.size,), (64,))
    exact = keeps_subnormals(device.info, 16)
    for name, got, op, operands in (("div", q, np.divide, (a, b)), ("sqrt", r, np.sqrt, (a,))):
        with np.errstate(all="ignore"):
            want = op(*[v.astype(np.float64) for v in operands]).astype(np.float16)
            want_flushed_inputs = op(*[flushed(v).astype(np.float64) for v in operands]).astype(np.float16)
        ok = accepted(got, want, want_flushed_inputs, exact)
        assert ok.all(), _report(name, got.astype(F32), want.astype(F32), *[v.astype(F32) for v in operands], ok=ok)


_CONSTANTS = np.array([4.0, 0.125, 3.0, 2.0 ** -126], F32)  # by_constants's divisors


def test_division_by_constants(device):
    x = np.concatenate([_edges(), -_edges(), [np.inf, np.nan, 0.0, -0.0]]).astype(F32)
    out = np.zeros(4 * x.size, F32)
    device.launch(run_pipeline(by_constants.ir(), PassContext.for_target("spirv")), [x, out], (x.size,), (64,))
    with np.errstate(all="ignore"):
        want = np.stack([x / c for c in _CONSTANTS], 1).ravel()
        want_flushed_inputs = np.stack([flushed(x) / c for c in _CONSTANTS], 1).ravel()
    ok = accepted(out, want, want_flushed_inputs, keeps_subnormals(device.info))
    assert ok.all(), _report("x / c", out, want, np.repeat(x, 4), np.resize(_CONSTANTS, out.size), ok=ok)


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
""" + "{helpers}" + """
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= p.grid_x) return;
  bool root = floatBitsToUint(y[i]) == 0u;  // y = +0 asks for sqrt(x) (by its bits: a flushing device takes a
                                           // subnormal y for 0 in a float comparison)
  out_[i] = iron_nearest_f32(guess[i], iron_f32_value(floatBitsToUint(x[i])), iron_f32_value(floatBitsToUint(y[i])),
                             root);
}
"""


def _helpers(texts: list[str], flush: bool) -> str:
    """Helper texts for a test shader; with ``flush``, converting like a device that flushes subnormals."""
    text = "\n\n".join(texts)
    return simulate_flushing(text) if flush else text


def _run_nearest(device, x: np.ndarray, y: np.ndarray, guess: np.ndarray, flush: bool) -> np.ndarray:
    abi = abi_for("nearest", [("x", t(D.f32)), ("y", t(D.f32)), ("guess", t(D.u32)), ("out", t(D.u32))],
                  access={"x": "read", "y": "read", "guess": "read"})
    out = np.zeros(x.size, np.uint32)
    shader = _NEAREST_SHADER.replace("{helpers}", _helpers([_NEAREST], flush))
    device.run_spirv(compile_glsl(shader), abi, [x, y, guess.astype(np.uint32), out],
                     pack_params(abi, {}, (x.size,), {}), (x.size,), (64,))
    return out


@pytest.mark.parametrize("flush", [False, True], ids=["", "flushing"])
def test_nearest_f32_moves_a_guess_one_ulp_off_to_the_correct_result(device, seed, flush):
    """iron_nearest_f32 alone, fed the correct bits and their neighbours: it must return the correct bits, also
    where every conversion flushes subnormal f32 values (it builds them from their bits)."""
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
    assert (want < 0x00800000).sum() > 1000 and (x < TINY).sum() > 1000  # subnormal results and operands
    for step in (-1, 0, 1):
        guess = want.astype(np.int64) + step
        usable = (guess >= 0) & (guess <= 0x7F800000)  # no guess below 0 or past infinity
        got = _run_nearest(device, x[usable], y[usable], guess[usable], flush)
        assert (got == want[usable]).all(), _report(f"nearest(guess {step:+d} ulp)", _f32(got),
                                                    _f32(want[usable]), x[usable], y[usable])


def _perturbed(helper: str, line: str, expression: str, ulps: int) -> str:
    """The helper's text with its first guess ``expression`` moved by ``ulps`` f32 ulps (kept finite)."""
    text = portable_math.helper_text(helper, "", "", "", "")
    assert line in text, f"{helper}'s first guess changed: update this test"
    moved = f"iron_f32_value(uint(clamp(int(iron_f32_bits({expression})) + ({ulps}), 0, 0x7f7fffff)))"
    guess = next(g for g in (f"double(float({expression}))", f"iron_f32_value(iron_f32_bits({expression}))")
                 if g in line)
    return text.replace(line, line.replace(guess, moved))


_DIV_GUESS = ("  precise double q = iron_f32_value(iron_f32_bits(min(x * inverse, "
              "double(uintBitsToFloat(0x7f7fffffu)))));", "min(x * inverse, double(uintBitsToFloat(0x7f7fffffu)))")
_SQRT_GUESS = ("  precise double r = double(float(d * t));", "d * t")


@pytest.mark.parametrize("ulps, flush", [(-9, False), (-3, False), (-1, False), (1, False), (2, False), (9, False),
                                         (0, True), (-9, True), (1, True), (9, True)])
def test_helpers_correct_a_first_guess_that_is_ulps_off(device, seed, ulps, flush):
    """A driver's double division or inversesqrt may be loose, or narrowed to its f32 one: the Newton step and
    iron_nearest_f32 must still give the correctly rounded result.  With ``flush`` every conversion between
    f32 and double flushes subnormal f32 values, as NVIDIA's driver without 32-bit DenormPreserve: the helpers
    must still be exact (the first ones gave NaN for sqrt of a subnormal and -1e-45 for a quotient of -0)."""
    helpers = _helpers([_NEAREST, _perturbed("iron_div_f64", *_DIV_GUESS, ulps),
                        _perturbed("iron_sqrt_f64", *_SQRT_GUESS, ulps)], flush)
    shader = HEADER + """#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) writeonly buffer Q { float q[]; };
layout(set = 0, binding = 3) writeonly buffer R { float r[]; };
layout(push_constant) uniform Params { uint grid_x; uint grid_y; uint grid_z; } p;
""" + helpers + """
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
    assert same(q, want_q).all(), _report("div", q, want_q, a, b)
    assert same(r, want_r).all(), _report("sqrt", r, want_r, a)


# ------------------------------------------------------------------ what a device without DenormPreserve may give

def test_flushing_allows_zeros_for_subnormals_only():
    """The H200's results with the first helpers (NVIDIA's driver, no 32-bit DenormPreserve) are rejected: a NaN
    square root, the smallest subnormal or a neighbour where the correctly rounded quotient is 0 or subnormal.
    The flushed forms the documentation allows pass, and only where an operand or the result is subnormal."""
    x = np.array([7.572461e-39], F32)
    with np.errstate(all="ignore"):
        want, want_flushed_inputs = np.sqrt(x), np.sqrt(flushed(x))
    assert not accepted(np.array([np.nan], F32), want, want_flushed_inputs, exact=False).any()
    assert accepted(np.array([0.0, 8.701989e-20], F32), np.repeat(want, 2), np.repeat(want_flushed_inputs, 2),
                    exact=False).all()
    assert not accepted(np.array([0.0, -0.0], F32), np.repeat(want, 2), np.repeat(want_flushed_inputs, 2),
                        exact=True).any()
    a = np.array([-1.1388722e-33, -3.5219714e-19, 4.771457e-12, 1e-45, 1.5, -1e-45], F32)
    b = np.array([1.2461959e+14, -1.3538186e+23, -1.3390481e+27, 2.0, 1.1754944e-38, 2.0], F32)
    nvidia = np.array([-1e-45, 2.602e-42, -3.563321e-39], F32)
    with np.errstate(all="ignore"):
        want, want_flushed_inputs = a / b, flushed(a) / flushed(b)
    assert not accepted(nvidia, want[:3], want_flushed_inputs[:3], exact=False).any()
    assert same(want[:3], np.array([-0.0, 2.601e-42, -3.56332e-39], F32)).all()
    flushing = np.array([-0.0, 0.0, -0.0, 0.0, 1.2760589e+38, -0.0], F32)  # the results flushed, or 1e-45 read as 0
    assert accepted(flushing, want, want_flushed_inputs, exact=False).all()
    wrong_sign = -flushing
    assert not accepted(wrong_sign, want, want_flushed_inputs, exact=False).any()
    normal = np.array([1.5], F32) / np.array([3.0], F32)  # nothing subnormal: exact, no zero allowed
    assert not accepted(np.array([0.0], F32), normal, normal, exact=False).any()
