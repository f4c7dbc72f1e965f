"""Kernels built from parts: helper functions, several variant parameters, constexpr parameters."""

import numpy as np

import iron
from iron import Constexpr, In, T, Tensor, f16, f32, i32, kernel, variants
from iron.lang import group_id, program_id, static_range, thread_id

from .case import CorpusCase, Depth, Expect, Run, ceil_div, empty, f64, launch_1d, randint, randn
from .intmath import wrap


# ---------------------------------------------------------------- helpers, one returning a tuple

@iron.func
def square(x):
    return x * x


@iron.func
def min_max(x, y):
    return min(x, y), max(x, y)


@iron.func
def spread_squared(x, y):
    lo, hi = min_max(x, y)
    return square(hi - lo)


@kernel(variants(T=[f32, f16, i32]))
def helper_calls(a: In[T], b: In[T], lo: Tensor[T], hi: Tensor[T], spread: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        small, large = min_max(a[i], b[i])
        lo[i] = small
        hi[i] = large
        spread[i] = spread_squared(a[i], b[i])


def _helper_args(run: Run, rng: np.random.Generator) -> list:
    gen = (lambda: randint(rng, run.size, i32, -20000, 20000)) if run.T == i32 else (
        lambda: randn(rng, run.size, run.T))
    return [gen(), gen(), empty(run.size, run.T), empty(run.size, run.T), empty(run.size, run.T), run.size]


def _helper_oracle(args, run: Run):
    if run.T == i32:
        a, b = args[0].astype(object), args[1].astype(object)
        return {2: np.minimum(a, b), 3: np.maximum(a, b), 4: wrap((a - b) ** 2, i32)}
    a, b = f64(args[0]), f64(args[1])
    return {2: np.minimum(a, b), 3: np.maximum(a, b), 4: Expect((a - b) ** 2, (np.abs(a) + np.abs(b)) ** 2)}


HELPERS = CorpusCase(
    name="func_helpers", kernel=helper_calls, make_args=_helper_args, oracle=_helper_oracle, outputs=(2, 3, 4),
    launch=launch_1d(), bindings=({"T": f32}, {"T": f16}, {"T": i32}), depth=lambda run: Depth(3))


# ---------------------------------------------------------------- two variant parameters (T x BLOCK)

@kernel(variants(T=[f32, f16], BLOCK=[64, 128]))
def two_per_thread(a: In[T], out: Tensor[T], n: int):
    base = group_id(0) * (2 * BLOCK) + thread_id(0)
    for k in static_range(2):
        j = base + k * BLOCK
        if j < n:
            x = a[j]
            out[j] = x * x - x


def _two_per_thread_launch(run: Run):
    block = run["BLOCK"]
    return (ceil_div(run.size, 2 * block) * block,), (block,)


MULTI_VARIANT = CorpusCase(
    name="variants_t_x_block", kernel=two_per_thread,
    make_args=lambda run, rng: [randn(rng, run.size, run.T), empty(run.size, run.T), run.size],
    oracle=lambda args, run: {1: Expect(f64(args[0]) ** 2 - f64(args[0]), f64(args[0]) ** 2 + np.abs(f64(args[0])))},
    outputs=(1,), launch=_two_per_thread_launch,
    bindings=tuple({"T": t, "BLOCK": b} for t in (f32, f16) for b in (64, 128)), depth=lambda run: Depth(2))


# ---------------------------------------------------------------- constexpr parameter

@kernel
def poly_constexpr(a: In[f32], out: Tensor[f32], n: int, DEG: Constexpr[int]):
    i = program_id(0)
    if i < n:
        x = a[i]
        acc = 0.0
        for k in static_range(DEG + 1):
            acc = acc * x + f32(k + 1)
        out[i] = acc


def _constexpr_case(deg: int) -> CorpusCase:
    def oracle(args, run: Run):
        x = f64(args[0])
        powers = x[:, None] ** np.arange(deg, -1, -1)[None, :]  # coefficient k + 1 goes with x**(deg - k)
        coef = np.arange(1, deg + 2, dtype=np.float64)
        return {1: Expect(powers @ coef, np.abs(powers) @ coef)}

    return CorpusCase(
        name=f"constexpr_deg{deg}", kernel=poly_constexpr,
        make_args=lambda run, rng: [randn(rng, run.size, f32), empty(run.size, f32), run.size, deg],
        oracle=oracle, outputs=(1,), launch=launch_1d(), depth=lambda run: Depth(2 * (deg + 1)))


CASES = [HELPERS, MULTI_VARIANT, _constexpr_case(2), _constexpr_case(5)]
