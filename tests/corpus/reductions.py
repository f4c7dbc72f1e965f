"""Row and block reductions: a shared-memory tree, softmax, and a layernorm over subgroups."""

import numpy as np

from iron import In, T, Tensor, bf16, f16, f32, kernel, variants
from iron.lang import (barrier, exp, group_id, lane_id, program_id, rsqrt, shared, simd_size, simd_sum,
                       static_range, thread_id, widen)

from .case import CorpusCase, Depth, Expect, Run, ceil_div, empty, f64, launch_1d, log2_ceil, randn

FLOATS = ({"T": f32}, {"T": f16}, {"T": bf16})


# ---------------------------------------------------------------- threadgroup tree reduction

@kernel(variants(T=[f32, f16, bf16], BLOCK=[128]))
def block_sum(a: In[T], partial: Tensor[f32], n: int):
    buf = shared(f32, BLOCK)
    t = thread_id(0)
    i = program_id(0)
    v = 0.0
    if i < n:
        v = f32(a[i])
    buf[t] = v
    barrier()
    s = BLOCK // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        barrier()
        s = s // 2
    if t == 0:
        partial[group_id(0)] = buf[0]


def _block_sum_oracle(args, run: Run):
    block = run["BLOCK"]
    groups = ceil_div(run.size, block)
    a = np.zeros(groups * block)
    a[: run.size] = f64(args[0])
    a = a.reshape(groups, block)
    return {1: Expect(a.sum(axis=1), np.abs(a).sum(axis=1))}


BLOCK_SUM = CorpusCase(
    name="shared_tree_reduction", kernel=block_sum,
    make_args=lambda run, rng: [randn(rng, run.size, run.T), empty(ceil_div(run.size, run["BLOCK"]), f32), run.size],
    oracle=_block_sum_oracle, outputs=(1,),
    launch=lambda run: launch_1d(group=run["BLOCK"])(run),
    bindings=tuple({**b, "BLOCK": 128} for b in FLOATS), out_dtype=f32,
    depth=lambda run: Depth(steps=log2_ceil(run["BLOCK"])))


# ---------------------------------------------------------------- softmax over rows

@kernel(variants(T=[f32, f16, bf16], BLOCK=[64]))
def softmax_rows(x: In[T], out: Tensor[T], cols: int):
    row = group_id(0)
    t = thread_id(0)
    red = shared(f32, BLOCK)
    base = row * cols
    m = -3.0e38
    for c in range(t, cols, BLOCK):
        m = max(m, f32(x[base + c]))
    red[t] = m
    barrier()
    for k in static_range(6):
        s = BLOCK >> (k + 1)
        if t < s:
            red[t] = max(red[t], red[t + s])
        barrier()
    top = red[0]
    barrier()
    total = 0.0
    for c in range(t, cols, BLOCK):
        total += exp(f32(x[base + c]) - top)
    red[t] = total
    barrier()
    for k in static_range(6):
        s = BLOCK >> (k + 1)
        if t < s:
            red[t] += red[t + s]
        barrier()
    inv = 1.0 / red[0]
    for c in range(t, cols, BLOCK):
        out[base + c] = T(exp(f32(x[base + c]) - top) * inv)


SOFTMAX_ROWS = 3


def _softmax_oracle(args, run: Run):
    x = f64(args[0]).reshape(SOFTMAX_ROWS, run.size)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {1: (e / e.sum(axis=1, keepdims=True)).reshape(-1)}


def _softmax_depth(run: Run) -> Depth:
    # sub + exp, the per-thread sum and the 6-level tree, the reciprocal and the product.
    return Depth(steps=1, f32_steps=2 + ceil_div(run.size, run["BLOCK"]) + 6 + 2)


SOFTMAX = CorpusCase(
    name="softmax_shared", kernel=softmax_rows,
    make_args=lambda run, rng: [randn(rng, SOFTMAX_ROWS * run.size, run.T, scale=3.0),
                                empty(SOFTMAX_ROWS * run.size, run.T), run.size],
    oracle=_softmax_oracle, outputs=(1,),
    launch=lambda run: ((SOFTMAX_ROWS * run["BLOCK"],), (run["BLOCK"],)),
    bindings=tuple({**b, "BLOCK": 64} for b in FLOATS), sizes=(1, 7, 100, 255, 1000), depth=_softmax_depth)


# ---------------------------------------------------------------- layernorm, one subgroup per row

@kernel(variants(T=[f16, bf16, f32]))
def layernorm_rows(x: In[T], gamma: In[T], beta: In[T], out: Tensor[T], rows: int, cols: int, eps: float):
    row = program_id(0) // simd_size()
    lane = lane_id()
    if row < rows:
        base = row * cols
        s = 0.0
        for c in range(lane, cols, simd_size()):
            s += widen(x[base + c])
        mean = simd_sum(s) / f32(cols)
        var = 0.0
        for c in range(lane, cols, simd_size()):
            d = widen(x[base + c]) - mean
            var += d * d
        rstd = rsqrt(simd_sum(var) / f32(cols) + eps)
        for c in range(lane, cols, simd_size()):
            y = (widen(x[base + c]) - mean) * rstd
            out[base + c] = T(y * widen(gamma[c]) + widen(beta[c]))


LN_ROWS = 5
LN_EPS = 1e-5


def _layernorm_args(run: Run, rng: np.random.Generator) -> list:
    n = LN_ROWS * run.size
    return [randn(rng, n, run.T, scale=2.0, shift=0.5), randn(rng, run.size, run.T, shift=1.0),
            randn(rng, run.size, run.T), empty(n, run.T), LN_ROWS, run.size, np.float32(LN_EPS)]


def _layernorm_oracle(args, run: Run):
    x = f64(args[0]).reshape(LN_ROWS, run.size)
    g, b = f64(args[1]), f64(args[2])
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + float(np.float32(LN_EPS)))
    want = (x - mean) * rstd * g + b
    # The mean's error is relative to mean |x|, and it enters every (x - mean).
    scale = (np.abs(x) + np.abs(x).mean(axis=1, keepdims=True)) * rstd * np.abs(g) + np.abs(b)
    return {3: Expect(want.reshape(-1), scale.reshape(-1))}


def _layernorm_depth(run: Run) -> Depth:
    w = run.simd_width
    per_lane = ceil_div(run.size, w)
    # strided lane sums + the lane-order subgroup sum, divisions, rsqrt, the affine tail.
    return Depth(steps=1, f32_steps=2 * (per_lane + w) + 8)


LAYERNORM = CorpusCase(
    name="layernorm_simd_rows", kernel=layernorm_rows, make_args=_layernorm_args, oracle=_layernorm_oracle,
    outputs=(3,), launch=lambda run: ((LN_ROWS * 64,), (64,)), bindings=FLOATS, sizes=(1, 7, 100, 1000),
    depth=_layernorm_depth, subgroup=True)


CASES = [BLOCK_SUM, SOFTMAX, LAYERNORM]
