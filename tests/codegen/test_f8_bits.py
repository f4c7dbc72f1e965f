"""The 8-bit floats as bytes (iron.codegen.f8_bits): every conversion the legalised IR spells out with integer
operations gives the interpreter's bits, and the interpreter's bits are the nearest f8 value, ties to even,
saturated (checked against an oracle that searches the sorted list of every f8 value, exactly in f64)."""

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from iron import In, T, Tensor, bf16, f16, f32, f64, i32, kernel, f8e4m3, f8e5m2, variants
from iron.codegen import f8_bits
from iron.codegen import legalize as L
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core import dtypes as D
from iron.core.errors import UnsupportedOnTarget
from iron.lang import atomic_add, program_id
from iron.runtime import interp

F8 = (f8e4m3, f8e5m2)


def _values(dt) -> tuple[np.ndarray, np.ndarray]:
    """Every finite f8 value of ``dt`` in increasing order (-0 left out) and its byte."""
    every = np.arange(256, dtype=np.uint8)
    vals = every.view(D.numpy_dtype(dt)).astype(np.float64)
    keep = np.isfinite(vals) & ~((vals == 0) & (every >= 0x80))
    order = np.argsort(vals[keep], kind="stable")
    return vals[keep][order], every[keep][order]


def nearest_f8(x: np.ndarray, dt) -> np.ndarray:
    """The byte of the f8 value nearest to each f64 ``x``, ties to the even byte, saturated, NaN as ml_dtypes has
    it (quiet, with the input's sign): the meaning docs/ir.md gives a cast, computed without any float rounding."""
    vals, codes = _values(dt)
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random f32 bits
        return _nearest(np.asarray(x).astype(np.float64), vals, codes, dt)


def _nearest(x: np.ndarray, vals: np.ndarray, codes: np.ndarray, dt) -> np.ndarray:
    clipped = np.clip(x, vals[0], vals[-1])
    hi = np.clip(np.searchsorted(vals, clipped, side="left"), 1, len(vals) - 1)
    lo = hi - 1
    below, above = clipped - vals[lo], vals[hi] - clipped
    pick_hi = (above < below) | ((above == below) & (codes[hi] % 2 == 0) & (codes[lo] % 2 == 1))
    pick_hi |= vals[hi] == clipped
    out = np.where(pick_hi, codes[hi], codes[lo]).astype(np.uint8)
    negative = np.signbit(x) & (out == codes[vals == 0][0])
    out = np.where(negative, out | 0x80, out)  # -0 keeps its sign
    nan = np.isnan(x)
    out[nan] = np.array([np.nan], np.float32).astype(D.numpy_dtype(dt)).view(np.uint8)[0] | (
        np.signbit(x[nan]).astype(np.uint8) << 7)
    return out


def _f32_cases(dt, rng) -> np.ndarray:
    """f32 values on, beside and halfway between every pair of neighbouring f8 values, specials, random bits."""
    vals, _ = _values(dt)
    mids = (vals[1:] + vals[:-1]) / 2  # exact in f64 and in f32
    grid = np.concatenate([vals, mids]).astype(np.float32)
    near = np.concatenate([grid, np.nextafter(grid, np.float32(np.inf)), np.nextafter(grid, np.float32(-np.inf))])
    specials = np.array([np.inf, -np.inf, np.nan, -np.nan, 3.4e38, -3.4e38, 1e-45, -1e-45, 1e-40, 480.0, 61440.0],
                        dtype=np.float32)
    noise = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([near, specials, noise])


@kernel(variants(T=[f8e4m3, f8e5m2]))
def to_f8(a: In[f32], out: Tensor[T]):
    i = program_id(0)
    out[i] = T(a[i])


@kernel(variants(T=[f8e4m3, f8e5m2]))
def from_f8(a: In[T], out: Tensor[f32]):
    i = program_id(0)
    out[i] = f32(a[i])


ENCODERS = {dt: to_f8.variant(T=dt) for dt in F8}
DECODERS = {dt: from_f8.variant(T=dt) for dt in F8}


def _legal(k, target="spirv"):
    """``k`` (one specialisation) through the target's pipeline: (its IR, the legalised IR)."""
    ir = run_pipeline(k.ir, PassContext.for_target(target))
    return ir, L.legalize(ir, target)


def _run(ir, args, n):
    interp.run(ir, args, (n,), (64,))
    return args


@pytest.mark.parametrize("dt", F8, ids=str)
def test_interpreter_rounds_to_the_nearest_f8_and_saturates(dt, seed):
    a = _f32_cases(dt, seed.rng())
    ir, _ = _legal(ENCODERS[dt])
    out = np.zeros(a.size, D.numpy_dtype(dt))
    _run(ir, [a, out], a.size)
    want = nearest_f8(a, dt)
    assert np.array_equal(out.view(np.uint8), want), seed


@pytest.mark.parametrize("dt", F8, ids=str)
@pytest.mark.parametrize("target", ["cuda", "spirv", "hip", "metal"])
def test_f32_to_f8_bits_match_the_oracle(dt, target, seed):
    a = _f32_cases(dt, seed.rng())
    _, legal = _legal(ENCODERS[dt], target)
    assert all(p.type.dtype != dt for p in legal.params)  # bytes now
    out = _run(legal, [a, np.zeros(a.size, np.uint8)], a.size)[1]
    assert np.array_equal(out, nearest_f8(a, dt)), seed


@pytest.mark.parametrize("dt", F8, ids=str)
def test_f8_to_f32_is_exact_for_every_pattern(dt):
    every = np.arange(256, dtype=np.uint8)
    _, legal = _legal(DECODERS[dt])
    got = _run(legal, [every, np.zeros(256, np.float32)], 256)[1]
    want = every.view(D.numpy_dtype(dt)).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("mutant", ["truncating", "unsaturated"])
def test_a_wrong_encoder_fails_the_same_check(monkeypatch, mutant, seed):
    """The checks above have teeth: an encoder that truncates instead of rounding, or one without the clamp
    at the largest value (values past 448 would run into the NaN code and beyond), is caught."""
    real = f8_bits.encode_f8

    def truncating(e, x, dt, hint=None):
        u = e.op("band", e.op("bitcast", x, to=D.u32), e.const(0xFFF00000, D.u32))
        return real(e, e.op("bitcast", u, to=D.f32), dt, hint)

    if mutant == "truncating":
        monkeypatch.setattr(f8_bits, "encode_f8", truncating)
    else:
        unclamped = dataclasses.replace(f8_bits.FORMATS[f8e4m3], largest=0xFF)
        monkeypatch.setitem(f8_bits.FORMATS, f8e4m3, unclamped)
    a = _f32_cases(f8e4m3, seed.rng())
    _, legal = _legal(ENCODERS[f8e4m3])
    out = _run(legal, [a, np.zeros(a.size, np.uint8)], a.size)[1]
    assert not np.array_equal(out, nearest_f8(a, f8e4m3))


@kernel
def others_to_f8(a: In[i32], b: In[f64], c: In[f16], d: In[bf16], s: f8e4m3, oa: Tensor[f8e4m3],
                 ob: Tensor[f8e4m3], oc: Tensor[f8e5m2], od: Tensor[f8e4m3], prod: Tensor[f8e4m3],
                 cross: Tensor[f8e5m2]):
    i = program_id(0)
    oa[i] = f8e4m3(a[i])
    ob[i] = f8e4m3(b[i])
    oc[i] = f8e5m2(c[i])
    od[i] = f8e4m3(d[i])
    prod[i] = od[i] * s + ob[i]  # contracted to an fma on CUDA: rounded once
    cross[i] = f8e5m2(od[i])


def test_every_source_rounds_once(seed):
    """i32, f64 (rounded to odd at f32 first), f16, bf16 and an f8 scalar parameter: the legalised IR gives
    the interpreter's bits, and those are the nearest f8 values of the exact inputs."""
    rng = seed.rng()
    n = 4096
    vals, _ = _values(f8e4m3)
    mids = (vals[1:] + vals[:-1]) / 2
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    # f8 ties nudged by far less than an f32 ulp: rounding through f32 to nearest would land on the tie.
    b = rng.choice(mids, n) + rng.choice([-1, 1], n) * np.abs(rng.choice(mids, n)) * 2.0 ** -40
    b[:6] = [np.inf, -np.inf, 1e300, -0.0, 5e-324, 448.0]
    c = (rng.standard_normal(n) * 1e4).astype(np.float16)
    d = (rng.standard_normal(n) * 30).astype(ml_dtypes.bfloat16)
    for target in ("cuda", "spirv"):
        ir = run_pipeline(others_to_f8.ir(), PassContext.for_target(target, fp_contract=True))
        want = [np.zeros(n, D.numpy_dtype(t)) for t in (f8e4m3, f8e4m3, f8e5m2, f8e4m3, f8e4m3, f8e5m2)]
        _run(ir, [a, b, c, d, 3.0, *want], n)
        legal = L.legalize(ir, target)
        got = [np.zeros(n, np.uint8) for _ in want]
        # bf16 travels as u16 bits where the target lowers it too
        inputs = [x.view(D.numpy_dtype(p.type.dtype)) for x, p in zip((a, b, c, d), legal.params)]
        _run(legal, [*inputs, np.float32(3.0), *got], n)
        for k, (g, w) in enumerate(zip(got, want)):
            assert np.array_equal(g, w.view(np.uint8)), (target, k, seed)
    assert np.array_equal(want[0].view(np.uint8), nearest_f8(a, f8e4m3))
    assert np.array_equal(want[1].view(np.uint8), nearest_f8(b, f8e4m3))
    assert np.array_equal(want[2].view(np.uint8), nearest_f8(c.astype(np.float64), f8e5m2))
    exact = want[3].astype(np.float64) * 3.0 + want[1].astype(np.float64)
    assert np.array_equal(want[4].view(np.uint8), nearest_f8(exact, f8e4m3))


def test_host_side_constructors_saturate_like_a_cast():
    assert float(f8e4m3(500.0)) == 448.0
    assert float(f8e5m2(float("inf"))) == 57344.0
    assert float(f8e4m3(-1e9)) == -448.0
    assert np.isnan(float(f8e4m3(float("nan"))))


@kernel
def f8_atomic(a: Tensor[f8e4m3], b: In[f8e4m3]):
    atomic_add(a, 0, b[program_id(0)])


def test_an_f8_atomic_is_a_located_error():
    with pytest.raises(UnsupportedOnTarget) as info:
        L.legalize(run_pipeline(f8_atomic.ir(), PassContext.for_target("cuda")), "cuda")
    assert "f8 values" in str(info.value) and "test_f8_bits.py" in str(info.value)


@kernel
def no_f8(a: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = a[i] * 2.0


@kernel
def f8_in_registers_only(a: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = f32(f8e4m3(a[i]))  # no f8 tensor: only a value in between


def test_the_pass_leaves_kernels_without_f8_alone_and_finds_f8_values():
    ir = run_pipeline(no_f8.ir(), PassContext.for_target("cuda"))
    assert f8_bits.lower_f8_to_bits(ir, "cuda") is ir  # nothing to rewrite: no copy of the IR
    ir = run_pipeline(f8_in_registers_only.ir(), PassContext.for_target("cuda"))
    legal = f8_bits.lower_f8_to_bits(ir, "cuda")
    assert legal is not ir and not any(f8_bits._f8_type(op.result.type) for op in legal.walk() if op.result)
