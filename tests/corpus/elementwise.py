"""Elementwise corpus kernels: math, scalars, fma, select, branches, casts, integer bits.

Each kernel is written the way a user would write it; each case's oracle
recomputes the result in float64 (or exact integers) from the inputs.
"""

import numpy as np

from iron import In, T, Tensor, bf16, f8e4m3, f8e5m2, f16, f32, i16, i32, i64, kernel, u8, u32, variants
from iron.lang import exp, fma, load, log, program_id, select, sqrt, store, tanh

from .case import CorpusCase, Expect, Run, empty, f64, fixed_depth, launch_1d, np_dtype, randint, randn, scalar
from .intmath import c_div, c_rem, from_ints, shl, shr, to_ints, wrap

FLOATS = ({"T": f32}, {"T": f16}, {"T": bf16})


# ---------------------------------------------------------------- the seed kernel

@kernel(variants(T=[f32, f16, bf16]))
def iron_exp(a: Tensor[T], out: Tensor[T]):
    idx = program_id(0)
    store(out[idx], exp(load(a[idx])))


def _exp_args(run: Run, rng: np.random.Generator) -> list:
    return [randn(rng, run.size, run.T, scale=2.0), empty(run.size, run.T)]


IRON_EXP = CorpusCase(
    name="iron_exp", kernel=iron_exp, make_args=_exp_args,
    oracle=lambda args, run: {1: np.exp(f64(args[0]))},
    outputs=(1,), launch=launch_1d(pad=False), bindings=FLOATS)


# ---------------------------------------------------------------- unary chain

@kernel(variants(T=[f32, f16, bf16]))
def unary_chain(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        out[i] = exp(-abs(x)) * sqrt(abs(x) + 1.0) + tanh(abs(x))


def _unary_oracle(args, run: Run):
    x = np.abs(f64(args[0]))
    return {1: np.exp(-x) * np.sqrt(x + 1.0) + np.tanh(x)}


UNARY_CHAIN = CorpusCase(
    name="unary_chain", kernel=unary_chain,
    make_args=lambda run, rng: [randn(rng, run.size, run.T, scale=2.0), empty(run.size, run.T), run.size],
    oracle=_unary_oracle, outputs=(1,), launch=launch_1d(), bindings=FLOATS,
    # exp, add, sqrt, mul, tanh, add: the sum of two positive terms adds one
    # rounding to the worse of its operands' chains (add -> sqrt -> mul).
    depth=fixed_depth(5))


# ---------------------------------------------------------------- scalar operand

@kernel(variants(T=[f32, f16, bf16]))
def scale_shift(a: In[T], out: Tensor[T], s: T, n: int):
    i = program_id(0)
    if i < n:
        out[i] = (s - a[i]) * s / 4.0


def _scale_shift_oracle(args, run: Run):
    a, s = f64(args[0]), float(args[2])
    return {1: Expect((s - a) * s / 4.0, scale=(np.abs(s) + np.abs(a)) * abs(s) / 4.0)}


SCALE_SHIFT = CorpusCase(
    name="scale_shift", kernel=scale_shift,
    make_args=lambda run, rng: [randn(rng, run.size, run.T), empty(run.size, run.T),
                                scalar(rng.uniform(0.5, 3.0), run.T), run.size],
    oracle=_scale_shift_oracle, outputs=(1,), launch=launch_1d(), bindings=FLOATS,
    depth=fixed_depth(2))  # sub, mul (the division by 4 is exact)


# ---------------------------------------------------------------- saxpy with fma

@kernel(variants(T=[f32, f16, bf16]))
def saxpy(alpha: T, x: In[T], y: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        out[i] = fma(alpha, x[i], y[i])


SAXPY = CorpusCase(
    name="saxpy_fma", kernel=saxpy,
    make_args=lambda run, rng: [scalar(rng.uniform(-2, 2), run.T), randn(rng, run.size, run.T),
                                randn(rng, run.size, run.T), empty(run.size, run.T), run.size],
    # One rounding of the exact a*x+y, so the error is relative to the result
    # itself even under cancellation: a mul-then-add would fail here.
    oracle=lambda args, run: {3: float(args[0]) * f64(args[1]) + f64(args[2])},
    outputs=(3,), launch=launch_1d(), bindings=FLOATS, depth=fixed_depth(1))


# ---------------------------------------------------------------- select and clamp

@kernel(variants(T=[f32, f16, bf16]))
def select_clamp(a: In[T], leaky: Tensor[T], clamped: Tensor[T], sign_bit: Tensor[T], lo: T, hi: T, n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        leaky[i] = select(x > 0.0, x, x * 0.125)
        clamped[i] = min(max(x, lo), hi)
        sign_bit[i] = T(1.0) if x < 0.0 else T(0.0)


def _select_args(run: Run, rng: np.random.Generator) -> list:
    a = randn(rng, run.size, run.T, scale=2.0)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=np_dtype(run.T))
    a[: min(run.size, special.size)] = special[: run.size]
    return [a, empty(run.size, run.T), empty(run.size, run.T), empty(run.size, run.T),
            scalar(-1.0, run.T), scalar(1.5, run.T), run.size]


def _select_oracle(args, run: Run):
    x = f64(args[0])
    lo, hi = float(args[4]), float(args[5])
    leaky = np.where(x > 0, x, (x * 0.125).astype(np_dtype(run.T)).astype(np.float64))
    with np.errstate(invalid="ignore"):
        return {1: leaky, 2: np.fmin(np.fmax(x, lo), hi), 3: np.where(x < 0, 1.0, 0.0)}


SELECT_CLAMP = CorpusCase(
    name="select_clamp", kernel=select_clamp, make_args=_select_args, oracle=_select_oracle,
    outputs=(1, 2, 3), launch=launch_1d(), bindings=FLOATS, exact=True)


# ---------------------------------------------------------------- divergent branches

@kernel(variants(T=[f32, f16]))
def piecewise(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        y = x
        if x < -1.0:
            y = -x * 2.0
        elif x < 0.0:
            y = x * x
        elif x < 1.0:
            y = sqrt(x)
        else:
            y = log(x) + 1.0
        out[i] = y


def _piecewise_oracle(args, run: Run):
    x = f64(args[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.select([x < -1, x < 0, x < 1], [-x * 2, x * x, np.sqrt(x)], np.log(x) + 1.0)
    return {1: y}


PIECEWISE = CorpusCase(
    name="piecewise_branches", kernel=piecewise,
    make_args=lambda run, rng: [randn(rng, run.size, run.T, scale=2.0), empty(run.size, run.T), run.size],
    oracle=_piecewise_oracle, outputs=(1,), launch=launch_1d(), bindings=({"T": f32}, {"T": f16}),
    depth=fixed_depth(2))


# ---------------------------------------------------------------- early return

@kernel(variants(T=[f32, i32]))
def tail_return(a: In[T], b: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i >= n:
        return
    out[i] = a[i] * b[i] - 1


def _tail_args(run: Run, rng: np.random.Generator) -> list:
    if run.T == i32:
        gen = lambda: randint(rng, run.size, i32)
    else:
        gen = lambda: randn(rng, run.size, run.T)
    return [gen(), gen(), empty(run.size, run.T), run.size]


def _tail_oracle(args, run: Run):
    if run.T == i32:
        return {2: wrap(args[0].astype(object) * args[1].astype(object) - 1, i32)}
    a, b = f64(args[0]), f64(args[1])
    return {2: Expect(a * b - 1.0, scale=np.abs(a * b) + 1.0)}


TAIL_RETURN = CorpusCase(
    name="early_return_tail", kernel=tail_return, make_args=_tail_args, oracle=_tail_oracle,
    outputs=(2,), launch=launch_1d(), bindings=({"T": f32}, {"T": i32}), depth=fixed_depth(2))


# ---------------------------------------------------------------- casts among floats

@kernel(variants(T=[f16, bf16]))
def float_round_trip(a: In[f32], narrow: Tensor[T], error: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        h = T(x)
        narrow[i] = h
        error[i] = f32(h) - x


def _round_trip_args(run: Run, rng: np.random.Generator) -> list:
    a = randn(rng, run.size, f32, scale=100.0)
    # Ties to even and subnormals of the narrow type, where rounding bugs hide.
    specials = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-8, 2.0**-20, -3e-6, 65504.0, 0.1],
                        dtype=np.float32)
    a[: min(run.size, specials.size)] = specials[: run.size]
    return [a, empty(run.size, run.T), empty(run.size, f32), run.size]


def _round_trip_oracle(args, run: Run):
    a = args[0]
    narrow = a.astype(np_dtype(run.T))  # numpy and ml_dtypes round f32 to nearest even
    # The difference of two floats within a factor of two is exact (Sterbenz).
    return {1: narrow, 2: narrow.astype(np.float32) - a}


FLOAT_ROUND_TRIP = CorpusCase(
    name="cast_float_round_trip", kernel=float_round_trip, make_args=_round_trip_args, oracle=_round_trip_oracle,
    outputs=(1, 2), launch=launch_1d(), bindings=({"T": f16}, {"T": bf16}), exact=True)


# ---------------------------------------------------------------- 8-bit floats

@kernel(variants(T=[f8e4m3, f8e5m2]))
def f8_round_trip(a: In[f32], b: In[i32], narrow: Tensor[T], error: Tensor[f32], ints: Tensor[T],
                  product: Tensor[T], widened: Tensor[f16], n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        h = T(x)
        narrow[i] = h
        error[i] = f32(h) - x
        ints[i] = T(b[i])
        product[i] = h * h  # in f32, rounded back once
        widened[i] = f16(h)


def _f8_round_trip_args(run: Run, rng: np.random.Generator) -> list:
    a = randn(rng, run.size, f32, scale=100.0)
    # Ties to even, subnormals, the largest value and past it (saturation), infinities.
    specials = np.array([1.0625, 1.1875, 3 * 2.0**-10, 2.0**-10, 2.0**-17, -3e-3, 448.0, 464.0, 470.0, 57344.0,
                         61440.0, -1e9, np.inf, -np.inf, 0.1, -0.0], dtype=np.float32)
    a[: min(run.size, specials.size)] = specials[: run.size]
    b = randint(rng, run.size, i32, -70000, 70000)
    return [a, b, empty(run.size, run.T), empty(run.size, f32), empty(run.size, run.T), empty(run.size, run.T),
            empty(run.size, f16), run.size]


def _saturated(x: np.ndarray, dt) -> np.ndarray:
    """ml_dtypes rounds to nearest even but gives NaN / inf past the largest value: clip first (equivalent)."""
    top = {"f8e4m3": 448.0, "f8e5m2": 57344.0}[dt.name]
    return np.clip(x, -top, top).astype(np_dtype(dt))


def _f8_round_trip_oracle(args, run: Run):
    a, b = args[0].astype(np.float32), args[1]
    narrow = _saturated(a, run.T)
    wide = narrow.astype(np.float64)
    return {2: narrow, 3: narrow.astype(np.float32) - a, 4: _saturated(b.astype(np.float32), run.T),
            5: _saturated(wide * wide, run.T), 6: narrow.astype(np.float16)}


F8_ROUND_TRIP = CorpusCase(
    name="cast_f8_round_trip", kernel=f8_round_trip, make_args=_f8_round_trip_args, oracle=_f8_round_trip_oracle,
    outputs=(2, 3, 4, 5, 6), launch=launch_1d(), bindings=({"T": f8e4m3}, {"T": f8e5m2}), exact=True)


# ---------------------------------------------------------------- casts with integers

@kernel
def int_casts(a: In[f32], b: In[i32], trunc: Tensor[i32], low8: Tensor[u8], mid16: Tensor[i16],
              as_float: Tensor[f32], widened: Tensor[i64], flags: Tensor[i32], n: int):
    i = program_id(0)
    if i < n:
        trunc[i] = i32(a[i] * 100.0)
        low8[i] = u8(b[i])
        mid16[i] = i16(b[i] >> 3)
        as_float[i] = f32(b[i])
        widened[i] = i64(b[i]) * 3
        flags[i] = i32(a[i] > 0.0) + 2 * i32(b[i] < 0)


def _int_casts_args(run: Run, rng: np.random.Generator) -> list:
    n = run.size
    return [randn(rng, n, f32, scale=50.0), randint(rng, n, i32), empty(n, i32), empty(n, u8), empty(n, i16),
            empty(n, f32), empty(n, i64), empty(n, i32), n]


def _int_casts_oracle(args, run: Run):
    a, b = args[0], args[1]
    scaled = a * np.float32(100.0)  # the kernel's f32 product, then truncation toward zero
    return {2: np.trunc(scaled).astype(np.int32), 3: b.astype(np.uint8), 4: (b >> 3).astype(np.int16),
            5: b.astype(np.float32), 6: b.astype(np.int64) * 3, 7: (a > 0).astype(np.int32) + 2 * (b < 0)}


INT_CASTS = CorpusCase(
    name="cast_int", kernel=int_casts, make_args=_int_casts_args, oracle=_int_casts_oracle,
    outputs=(2, 3, 4, 5, 6, 7), launch=launch_1d(), exact=True)


# ---------------------------------------------------------------- integer bit operations

@kernel(variants(T=[i32, u32, i16, u8]))
def int_bitops(a: In[T], b: In[T], mixed: Tensor[T], arith: Tensor[T], divmod_: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        x = a[i]
        y = b[i]
        mixed[i] = ((x & y) | (x << 3)) ^ (~y >> 2)
        arith[i] = (x + y) * 3 - (x >> (y & 7))
        d = y | 1
        divmod_[i] = x // d + x % d


def _bitops_oracle(args, run: Run):
    dt = run.T
    mixed, arith, dm = [], [], []
    for x, y in zip(to_ints(args[0]), to_ints(args[1])):
        not_y = wrap(~y, dt)
        mixed.append(wrap((x & y) | shl(x, 3, dt), dt) ^ shr(not_y, 2, dt))
        arith.append(wrap((x + y) * 3 - shr(x, y & 7, dt), dt))
        d = wrap(y | 1, dt)
        dm.append(wrap(c_div(x, d) + c_rem(x, d), dt))
    return {2: from_ints(mixed, dt), 3: from_ints(arith, dt), 4: from_ints(dm, dt)}


INT_BITOPS = CorpusCase(
    name="int_bitops", kernel=int_bitops,
    make_args=lambda run, rng: [randint(rng, run.size, run.T), randint(rng, run.size, run.T),
                                empty(run.size, run.T), empty(run.size, run.T), empty(run.size, run.T), run.size],
    oracle=_bitops_oracle, outputs=(2, 3, 4), launch=launch_1d(),
    bindings=({"T": i32}, {"T": u32}, {"T": i16}, {"T": u8}), sizes=(1, 7, 255, 1000), exact=True)


CASES = [IRON_EXP, UNARY_CHAIN, SCALE_SHIFT, SAXPY, SELECT_CLAMP, PIECEWISE, TAIL_RETURN, FLOAT_ROUND_TRIP,
         F8_ROUND_TRIP, INT_CASTS, INT_BITOPS]
