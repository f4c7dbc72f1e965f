"""Math builtins: rounding and classification, transcendentals, float ``//``, ``%``, ``**``, logic."""

import numpy as np

from iron import In, T, Tensor, bf16, f16, f32, i32, kernel, variants
from iron.lang import (atan2, ceil, cos, erf, exp2, expm1, fast_exp2, floor, isfinite, isinf, isnan, log1p, log2, program_id,
                       recip, round, rsqrt, sign, sin, trunc)

from .case import CorpusCase, Depth, Expect, Run, empty, f64, launch_1d, np_dtype, randn

FLOATS = ({"T": f32}, {"T": f16}, {"T": bf16})


# ---------------------------------------------------------------- rounding and classification (exact)

@kernel(variants(T=[f32, f16, bf16]))
def rounding_and_classes(a: In[T], down: Tensor[T], up: Tensor[T], nearest: Tensor[T], toward0: Tensor[T],
                         sgn: Tensor[T], classes: Tensor[i32], n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        down[i] = floor(x)
        up[i] = ceil(x)
        nearest[i] = round(x)
        toward0[i] = trunc(x)
        sgn[i] = sign(x)
        classes[i] = i32(isnan(x)) + 2 * i32(isinf(x)) + 4 * i32(isfinite(x))


def _rounding_args(run: Run, rng: np.random.Generator) -> list:
    n = run.size
    a = (np.round(rng.standard_normal(n) * 8) / 2).astype(np_dtype(run.T))  # many exact halves: ties
    a[1::3] = randn(rng, n, run.T, scale=5.0)[1::3]
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5], dtype=np_dtype(run.T))
    a[: min(n, specials.size)] = specials[:n]
    return [a, *(empty(n, run.T) for _ in range(5)), empty(n, i32), n]


def _rounding_oracle(args, run: Run):
    x = f64(args[0])
    classes = np.isnan(x).astype(np.int64) + 2 * np.isinf(x) + 4 * np.isfinite(x)
    return {1: np.floor(x), 2: np.ceil(x), 3: np.rint(x), 4: np.trunc(x), 5: np.sign(x), 6: classes}


ROUNDING = CorpusCase(
    name="rounding_and_classes", kernel=rounding_and_classes, make_args=_rounding_args, oracle=_rounding_oracle,
    outputs=(1, 2, 3, 4, 5, 6), launch=launch_1d(), bindings=FLOATS, exact=True)


# ---------------------------------------------------------------- transcendentals, one per output

@kernel(variants(T=[f32, f16, bf16]))
def transcendentals(a: In[T], b: In[T], o_sin: Tensor[T], o_cos: Tensor[T], o_atan2: Tensor[T], o_erf: Tensor[T],
                    o_log1p: Tensor[T], o_expm1: Tensor[T], o_rsqrt: Tensor[T], o_recip: Tensor[T],
                    o_exp2: Tensor[T], o_log2: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        y = b[i]
        o_sin[i] = sin(x)
        o_cos[i] = cos(x)
        o_atan2[i] = atan2(x, y)
        o_erf[i] = erf(x)
        o_log1p[i] = log1p(abs(x))
        o_expm1[i] = expm1(x)
        o_rsqrt[i] = rsqrt(abs(x) + 0.5)
        o_recip[i] = recip(y)
        o_exp2[i] = exp2(x)
        o_log2[i] = log2(abs(x) + 1.0)


def _transcendental_args(run: Run, rng: np.random.Generator) -> list:
    n = run.size
    return [randn(rng, n, run.T, scale=1.5), randn(rng, n, run.T, shift=0.2), *(empty(n, run.T) for _ in range(10)),
            n]


def _transcendental_oracle(args, run: Run):
    x, y = f64(args[0]), f64(args[1])
    ax = np.abs(x)
    # The input is exact, so each result is one rounding of the true value,
    # except where the kernel rounds an argument first (|x| + c): that
    # rounding moves the result by |f'(arg)| * |arg| * u, hence those scales.
    return {
        2: Expect(np.sin(x), np.abs(np.sin(x)) + ax * np.abs(np.cos(x))),
        3: Expect(np.cos(x), np.abs(np.cos(x)) + ax * np.abs(np.sin(x))),
        4: np.arctan2(x, y),
        5: np.vectorize(_erf)(x),
        6: np.log1p(ax),
        7: np.expm1(x),
        8: Expect(1 / np.sqrt(ax + 0.5), 1 / np.sqrt(ax + 0.5) * 1.5),
        9: 1 / y,
        10: np.exp2(x),
        11: Expect(np.log2(ax + 1), np.log2(ax + 1) + 1 / np.log(2)),
    }


def _erf(v: float) -> float:
    import math

    return math.erf(v)


TRANSCENDENTALS = CorpusCase(
    name="transcendentals", kernel=transcendentals, make_args=_transcendental_args, oracle=_transcendental_oracle,
    outputs=tuple(range(2, 12)), launch=launch_1d(), bindings=FLOATS, sizes=(1, 7, 255, 1000),
    depth=lambda run: Depth(2))


# ---------------------------------------------------------------- fast_exp2: exp2 that may flush tiny results

@kernel(variants(T=[f32, f16, bf16]))
def fast_exp2s(a: In[T], o: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        o[i] = fast_exp2(a[i])


#: f32's smallest normal: fast_exp2 may return 0 below it (the interpreter does; CUDA's ex2.approx.ftz too).
TINY = 2.0 ** -126


def _fast_exp2_args(run: Run, rng: np.random.Generator) -> list:
    n = run.size
    lo = -150.0 if run.T == f32 else -30.0  # f32: through the denormals; 16-bit: down to their own underflow
    a = rng.uniform(lo, 15.0, n).astype(np_dtype(run.T))
    specials = np.array([-np.inf, np.inf, np.nan, -127.0, -126.0, -125.5, 0.0, -0.0], dtype=np_dtype(run.T))
    a[: min(n, specials.size)] = specials[:n]
    return [a, empty(n, run.T), n]


def _fast_exp2_oracle(args, run: Run):
    with np.errstate(over="ignore"):
        want = np.exp2(f64(args[0]))
    # Under 2^-126 both 0 and the true value pass (an allowance of 2^-116 at any rtol >= 2^-20); above, one
    # rounding of the true value, as exp2.
    return {1: Expect(want, np.where(want < TINY, 2.0 ** -96, np.abs(want)))}


FAST_EXP2 = CorpusCase(
    name="fast_exp2", kernel=fast_exp2s, make_args=_fast_exp2_args, oracle=_fast_exp2_oracle, outputs=(1,),
    launch=launch_1d(), bindings=FLOATS, sizes=(1, 9, 255, 1000), depth=lambda run: Depth(2))


# ---------------------------------------------------------------- float //, %, **, chained comparisons, and/or/not

@kernel(variants(T=[f32, f16]))
def float_operators(a: In[T], b: In[T], quot: Tensor[T], rem_: Tensor[T], cube: Tensor[T], logic: Tensor[i32],
                    n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        y = b[i]
        quot[i] = x // y
        rem_[i] = x % y
        cube[i] = x ** 3.0
        logic[i] = i32(-1.0 < x <= 1.0) + 2 * i32(x > 0.0 and not y > 0.0) + 4 * i32(x < -1.0 or y < -1.0)


def _float_ops_oracle(args, run: Run):
    x, y = args[0], args[1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        quot = np.floor(x / y)  # numpy divides in the array dtype, rounding once like the kernel
        rem_ = np.fmod(x, y)  # exact in every dtype
    x64, y64 = f64(x), f64(y)
    logic = ((-1 < x64) & (x64 <= 1)).astype(np.int64) + 2 * ((x64 > 0) & ~(y64 > 0)) + 4 * ((x64 < -1) | (y64 < -1))
    return {2: Expect(quot, np.abs(quot)), 3: Expect(rem_, np.abs(rem_)), 4: x64 ** 3, 5: logic}


FLOAT_OPERATORS = CorpusCase(
    name="float_floordiv_mod_pow_logic", kernel=float_operators,
    make_args=lambda run, rng: [randn(rng, run.size, run.T, scale=3.0), randn(rng, run.size, run.T),
                                empty(run.size, run.T), empty(run.size, run.T), empty(run.size, run.T),
                                empty(run.size, i32), run.size],
    oracle=_float_ops_oracle, outputs=(2, 3, 4, 5), launch=launch_1d(), bindings=({"T": f32}, {"T": f16}),
    sizes=(1, 7, 255, 1000), depth=lambda run: Depth(1))


CASES = [ROUNDING, TRANSCENDENTALS, FAST_EXP2, FLOAT_OPERATORS]
