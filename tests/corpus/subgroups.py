"""Subgroup corpus kernels: reductions, shuffles, broadcast, votes.

Their results depend on the subgroup width W (a scan or a reduction is per
subgroup), so each oracle reads ``run.simd_width``; the tests run them at
W = 8, 32 and 64.  Launches use groups of 64 threads, a multiple of every W,
so subgroup ``k`` of the grid covers global threads ``[k W, (k + 1) W)``.
"""

import numpy as np

from iron import In, T, Tensor, f32, i32, kernel, variants
from iron.lang import (atomic_add, lane_id, program_id, simd_all, simd_any, simd_broadcast, simd_max, simd_min,
                       simd_shuffle, simd_shuffle_down, simd_shuffle_up, simd_shuffle_xor, simd_size, simd_sum)

from .case import CorpusCase, Depth, Expect, Run, empty, f64, launch_1d, log2_ceil, randint, randn, round_up, scalar
from .intmath import wrap

NUMERIC = ({"T": f32}, {"T": i32})
GROUP = 64


def _padded(a: np.ndarray, run: Run, fill: str = "zero") -> np.ndarray:
    """The input as the launch's threads see it: padded to whole groups."""
    n = round_up(run.size, GROUP)
    if fill == "zero":
        out = np.zeros(n, dtype=a.dtype)
        out[: run.size] = a
    else:  # "edge": thread i reads a[min(i, n - 1)]
        out = a[np.minimum(np.arange(n), run.size - 1)]
    return out


def _inputs(run: Run, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
    n = run.size if n is None else n
    return randint(rng, n, i32) if run.T == i32 else randn(rng, n, run.T)


# ---------------------------------------------------------------- simd_sum + atomic_add of partials

@kernel(variants(T=[f32, i32]))
def simd_total(a: In[T], total: Tensor[T]):
    i = program_id(0)
    s = simd_sum(a[i])
    if lane_id() == 0:
        atomic_add(total, 0, s)


def _total_args(run: Run, rng: np.random.Generator) -> list:
    start = _inputs(run, rng, 1)  # the accumulator starts at a random value, not zero
    return [_inputs(run, rng), start]


def _total_oracle(args, run: Run):
    if run.T == i32:
        return {1: np.array([wrap(int(args[0].astype(np.int64).sum()) + int(args[1][0]), i32)])}
    a = f64(args[0])
    return {1: Expect(np.array([a.sum() + f64(args[1])[0]]), np.array([np.abs(a).sum() + abs(f64(args[1])[0])]))}


SIMD_TOTAL = CorpusCase(
    # The grid is exactly the size: the last subgroup is partial and simd_sum
    # must combine only its active lanes.
    name="simd_sum_atomic_partials", kernel=simd_total, make_args=_total_args, oracle=_total_oracle,
    outputs=(1,), poisoned=(), launch=launch_1d(group=GROUP, pad=False), bindings=NUMERIC,
    depth=lambda run: Depth(run.simd_width + run.size // run.simd_width + 1), subgroup=True)


# ---------------------------------------------------------------- shuffle-xor butterfly

@kernel(variants(T=[f32, i32]))
def butterfly_sum(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    v = T(0)
    if i < n:
        v = a[i]
    m = simd_size() // 2
    while m > 0:
        v += simd_shuffle_xor(v, m)
        m = m // 2
    if i < n:
        out[i] = v


def _per_subgroup(p: np.ndarray, run: Run, reduce) -> np.ndarray:
    w = run.simd_width
    g = p.reshape(-1, w)
    return np.repeat(reduce(g), w)[: run.size]


def _butterfly_oracle(args, run: Run):
    if run.T == i32:
        p = _padded(args[0], run).astype(object)
        return {1: wrap(_per_subgroup(p, run, lambda g: g.sum(axis=1)), i32)}
    p = f64(_padded(args[0], run))
    total = _per_subgroup(p, run, lambda g: g.sum(axis=1))
    return {1: Expect(total, _per_subgroup(np.abs(p), run, lambda g: g.sum(axis=1)))}


BUTTERFLY = CorpusCase(
    name="shuffle_xor_butterfly", kernel=butterfly_sum, make_args=lambda run, rng: [_inputs(run, rng),
                                                                                   empty(run.size, run.T), run.size],
    oracle=_butterfly_oracle, outputs=(1,), launch=launch_1d(group=GROUP), bindings=NUMERIC,
    depth=lambda run: Depth(log2_ceil(run.simd_width)), subgroup=True)


# ---------------------------------------------------------------- shuffle-up inclusive scan

@kernel(variants(T=[i32, f32]))
def subgroup_scan(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    lane = lane_id()
    v = T(0)
    if i < n:
        v = a[i]
    d = 1
    while d < simd_size():
        u = simd_shuffle_up(v, d)
        if lane >= d:
            v += u
        d *= 2
    if i < n:
        out[i] = v


def _scan_oracle(args, run: Run):
    w = run.simd_width
    if run.T == i32:
        p = _padded(args[0], run).astype(object).reshape(-1, w)
        return {1: wrap(np.cumsum(p, axis=1).reshape(-1)[: run.size], i32)}
    p = f64(_padded(args[0], run)).reshape(-1, w)
    return {1: Expect(np.cumsum(p, axis=1).reshape(-1)[: run.size],
                      np.cumsum(np.abs(p), axis=1).reshape(-1)[: run.size])}


SCAN = CorpusCase(
    name="shuffle_up_scan", kernel=subgroup_scan,
    make_args=lambda run, rng: [_inputs(run, rng), empty(run.size, run.T), run.size],
    oracle=_scan_oracle, outputs=(1,), launch=launch_1d(group=GROUP), bindings=({"T": i32}, {"T": f32}),
    depth=lambda run: Depth(log2_ceil(run.simd_width)), subgroup=True)


# ---------------------------------------------------------------- broadcast, subgroup max/min

@kernel(variants(T=[f32, i32]))
def subgroup_stats(a: In[T], rel: Tensor[T], span: Tensor[T], n: int):
    i = program_id(0)
    v = a[min(i, n - 1)]
    last = simd_broadcast(v, simd_size() - 1)
    hi = simd_max(v)
    lo = simd_min(v)
    if i < n:
        rel[i] = v - last
        span[i] = hi - lo


def _stats_args(run: Run, rng: np.random.Generator) -> list:
    a = randint(rng, run.size, i32, -10**8, 10**8) if run.T == i32 else randn(rng, run.size, run.T)
    return [a, empty(run.size, run.T), empty(run.size, run.T), run.size]


def _stats_oracle(args, run: Run):
    w = run.simd_width
    p = _padded(args[0], run, fill="edge").astype(np.int64 if run.T == i32 else np.float64).reshape(-1, w)
    last = np.repeat(p[:, -1], w)[: run.size]
    hi = np.repeat(p.max(axis=1), w)[: run.size]
    lo = np.repeat(p.min(axis=1), w)[: run.size]
    v = p.reshape(-1)[: run.size]
    if run.T == i32:
        return {1: v - last, 2: hi - lo}
    return {1: Expect(v - last, np.abs(v) + np.abs(last)), 2: Expect(hi - lo, np.abs(hi) + np.abs(lo))}


STATS = CorpusCase(
    name="broadcast_max_min", kernel=subgroup_stats, make_args=_stats_args, oracle=_stats_oracle, outputs=(1, 2),
    launch=launch_1d(group=GROUP), bindings=NUMERIC, depth=lambda run: Depth(1), subgroup=True)


# ---------------------------------------------------------------- votes

@kernel
def subgroup_votes(a: In[f32], out: Tensor[i32], thresh: float, n: int):
    i = program_id(0)
    x = a[min(i, n - 1)]
    any_big = simd_any(x > thresh)
    all_above = simd_all(x > -thresh)
    if i < n:
        out[i] = i32(any_big) + 2 * i32(all_above)


VOTE_THRESH = 2.2


def _votes_oracle(args, run: Run):
    w = run.simd_width
    p = f64(_padded(args[0], run, fill="edge")).reshape(-1, w)
    thresh = float(np.float32(VOTE_THRESH))
    any_big = np.repeat((p > thresh).any(axis=1), w)[: run.size]
    all_above = np.repeat((p > -thresh).all(axis=1), w)[: run.size]
    return {1: any_big.astype(np.int64) + 2 * all_above}


SUBGROUP_VOTES = CorpusCase(
    name="simd_votes", kernel=subgroup_votes,
    make_args=lambda run, rng: [randn(rng, run.size, f32), empty(run.size, i32), scalar(VOTE_THRESH, f32), run.size],
    oracle=_votes_oracle, outputs=(1,), launch=launch_1d(group=GROUP), exact=True, subgroup=True)


# ---------------------------------------------------------------- rotation and shift-down

@kernel(variants(T=[f32, i32]))
def subgroup_rotate(a: In[T], rotated: Tensor[T], shifted: Tensor[T], n: int):
    i = program_id(0)
    v = a[min(i, n - 1)]
    r = simd_shuffle(v, lane_id() + 3)
    d = simd_shuffle_down(v, 2)
    if i < n:
        rotated[i] = r
        shifted[i] = d


def _rotate_oracle(args, run: Run):
    w = run.simd_width
    p = _padded(args[0], run, fill="edge").reshape(-1, w)
    lanes = np.arange(w)
    rotated = p[:, (lanes + 3) % w]  # the lane index is taken modulo W
    down = np.where(lanes + 2 < w, np.minimum(lanes + 2, w - 1), lanes)  # past the end: the lane's own value
    shifted = p[:, down]
    return {1: rotated.reshape(-1)[: run.size], 2: shifted.reshape(-1)[: run.size]}


ROTATE = CorpusCase(
    name="shuffle_rotate_down", kernel=subgroup_rotate,
    make_args=lambda run, rng: [_inputs(run, rng), empty(run.size, run.T), empty(run.size, run.T), run.size],
    oracle=_rotate_oracle, outputs=(1, 2), launch=launch_1d(group=GROUP), bindings=NUMERIC, exact=True,
    subgroup=True)


# ---------------------------------------------------------------- subgroup ops in a divergent branch

@kernel
def count_positive_lanes(a: In[f32], counts: Tensor[i32], n: int):
    i = program_id(0)
    c = -1
    if i < n:
        if a[i] > 0.0:
            c = simd_sum(1)
        else:
            c = -simd_sum(1)
        counts[i] = c


def _positive_lanes_oracle(args, run: Run):
    w = run.simd_width
    n = run.size
    total = round_up(n, GROUP)
    active = np.arange(total) < n
    pos = np.zeros(total, dtype=bool)
    pos[:n] = f64(args[0]) > 0
    groups_pos = (pos & active).reshape(-1, w).sum(axis=1)
    groups_neg = (~pos & active).reshape(-1, w).sum(axis=1)
    # Each branch's simd_sum combines the lanes that took that branch.
    want = np.where(pos, np.repeat(groups_pos, w), -np.repeat(groups_neg, w))
    return {1: want[:n]}


POSITIVE_LANES = CorpusCase(
    name="simd_sum_in_divergent_branch", kernel=count_positive_lanes,
    make_args=lambda run, rng: [randn(rng, run.size, f32), empty(run.size, i32), run.size],
    oracle=_positive_lanes_oracle, outputs=(1,), launch=launch_1d(group=GROUP), exact=True, subgroup=True)


CASES = [SIMD_TOTAL, BUTTERFLY, SCAN, STATS, SUBGROUP_VOTES, ROTATE, POSITIVE_LANES]
