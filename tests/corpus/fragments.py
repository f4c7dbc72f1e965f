"""Matrix-fragment corpus kernels: one small matmul tile per subgroup, vs a float64 matmul.

Tiles are numbered across the grid as ``group_id * num_simd_groups +
simd_group_id``; a launch has 64 threads per tile, so every subgroup width
(8, 32, 64) has enough subgroups, and the surplus ones skip the work through
a condition that is uniform over their subgroup.
"""

import numpy as np

from iron import In, T, Tensor, TypeVar, bf16, f16, f32, func, kernel, variants
from iron.core.dtypes import numpy_dtype
from iron.lang import exp, frag_a, frag_acc, frag_acc_to_a, frag_b, frag_load_acc, frag_mask, frag_row_max, \
    frag_row_sum, frag_scale_rows, frag_store, group_id, mma, num_simd_groups, recip, simd_group_id, static_range

from .case import CorpusCase, Depth, Expect, Run, empty, f64, randn

TILE_SIZES = (1, 3, 8)  # tile rows (16x8x16) or tiles (8x8x8)


def _tile_launch(tiles: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return (tiles * 64,), (64,)


# ---------------------------------------------------------------- 16x8x16, f32 accumulator, K in two steps

TILES_N = 2  # tile columns


@kernel(variants(T=[f16, bf16, f32], KT=[2]))
def mma_16x8x16(a: In[T], b: In[T], c0: In[f32], c: Tensor[f32], tiles_m: int, tiles_n: int):
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles_m * tiles_n:
        tm = tile // tiles_n
        tn = tile % tiles_n
        kdim = 16 * KT
        ndim = 8 * tiles_n
        acc = frag_load_acc(c0, tm * 16 * ndim + tn * 8, ndim, 16, 8)
        for kk in static_range(KT):
            fa = frag_a(a, tm * 16 * kdim + kk * 16, kdim, 16, 16)
            fb = frag_b(b, kk * 16 * ndim + tn * 8, ndim, 16, 8)
            acc = mma(fa, fb, acc)
        frag_store(c, tm * 16 * ndim + tn * 8, ndim, acc)


def _mma16_args(run: Run, rng: np.random.Generator) -> list:
    m, k, n = 16 * run.size, 16 * run["KT"], 8 * TILES_N
    return [randn(rng, m * k, run.T), randn(rng, k * n, run.T), randn(rng, m * n, f32), empty(m * n, f32),
            run.size, TILES_N]


def _mma16_oracle(args, run: Run):
    m, k, n = 16 * run.size, 16 * run["KT"], 8 * TILES_N
    a, b, c0 = f64(args[0]).reshape(m, k), f64(args[1]).reshape(k, n), f64(args[2]).reshape(m, n)
    return {3: Expect((c0 + a @ b).reshape(-1), (np.abs(c0) + np.abs(a) @ np.abs(b)).reshape(-1))}


MMA_16x8x16 = CorpusCase(
    name="mma_16x8x16", kernel=mma_16x8x16, make_args=_mma16_args, oracle=_mma16_oracle, outputs=(3,),
    launch=lambda run: _tile_launch(run.size * TILES_N), sizes=TILE_SIZES,
    bindings=({"T": f16, "KT": 2}, {"T": bf16, "KT": 2}, {"T": f32, "KT": 2}), out_dtype=f32,
    # Hardware sums each K step in its own order: the f32 tolerance times K.
    depth=lambda run: Depth(steps=16 * run["KT"] + 1), subgroup=True)


# ---------------------------------------------------------------- 16x8x16, f32 accumulator stored to f16 / bf16

@kernel(variants(T=[f16, bf16]))
def mma_narrow_store(a: In[T], b: In[T], c: Tensor[T], tiles_m: int, tiles_n: int):
    """The f32 accumulator stored straight to a T tensor: each element rounded once (a gemm's epilogue)."""
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles_m * tiles_n:
        tm = tile // tiles_n
        tn = tile % tiles_n
        ndim = 8 * tiles_n
        acc = frag_acc(f32, 16, 8)
        for kk in static_range(2):
            acc = mma(frag_a(a, tm * 512 + kk * 16, 32, 16, 16), frag_b(b, kk * 16 * ndim + tn * 8, ndim, 16, 8), acc)
        frag_store(c, tm * 16 * ndim + tn * 8, ndim, acc)


def _narrow_oracle(args, run: Run):
    m, k, n = 16 * run.size, 32, 8 * TILES_N
    a, b = f64(args[0]).reshape(m, k), f64(args[1]).reshape(k, n)
    return {2: Expect((a @ b).reshape(-1), (np.abs(a) @ np.abs(b)).reshape(-1))}


MMA_NARROW_STORE = CorpusCase(
    name="mma_narrow_store", kernel=mma_narrow_store,
    make_args=lambda run, rng: [randn(rng, 16 * run.size * 32, run.T), randn(rng, 32 * 8 * TILES_N, run.T),
                                empty(16 * run.size * 8 * TILES_N, run.T), run.size, TILES_N],
    oracle=_narrow_oracle, outputs=(2,), launch=lambda run: _tile_launch(run.size * TILES_N), sizes=TILE_SIZES,
    bindings=({"T": f16}, {"T": bf16}), depth=lambda run: Depth(steps=33), subgroup=True)


# ---------------------------------------------------------------- elementwise arithmetic on accumulators

@kernel(variants(T=[f16, bf16]))
def mma_elementwise(a: In[T], b: In[T], s: f32, c: Tensor[f32], tiles_m: int, tiles_n: int):
    """Two products of one tile, combined element by element: (a0 @ b0) * s + (a1 @ b1) - 1.5, and that times
    the second product again (a gemm's promotion of partial sums, then its epilogue's scale)."""
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles_m * tiles_n:
        tm = tile // tiles_n
        tn = tile % tiles_n
        ndim = 8 * tiles_n
        p0 = mma(frag_a(a, tm * 512, 32, 16, 16), frag_b(b, tn * 8, ndim, 16, 8), frag_acc(f32, 16, 8))
        p1 = mma(frag_a(a, tm * 512 + 16, 32, 16, 16), frag_b(b, 16 * ndim + tn * 8, ndim, 16, 8),
                 frag_acc(f32, 16, 8))
        mixed = p0 * s + p1 - 1.5
        frag_store(c, tm * 16 * ndim + tn * 8, ndim, 2.0 * (mixed * p1))


def _arith_oracle(args, run: Run):
    m, n = 16 * run.size, 8 * TILES_N
    a, b, s = f64(args[0]).reshape(m, 32), f64(args[1]).reshape(32, n), float(args[2])
    p0, p1 = a[:, :16] @ b[:16], a[:, 16:] @ b[16:]
    s0, s1 = np.abs(a[:, :16]) @ np.abs(b[:16]), np.abs(a[:, 16:]) @ np.abs(b[16:])
    mixed = p0 * s + p1 - 1.5
    scale = (s0 * abs(s) + s1 + 1.5) * np.abs(p1) + np.abs(mixed) * s1
    return {3: Expect((2.0 * mixed * p1).reshape(-1), 2.0 * scale.reshape(-1))}


MMA_ELEMENTWISE = CorpusCase(
    name="mma_elementwise", kernel=mma_elementwise,
    make_args=lambda run, rng: [randn(rng, 16 * run.size * 32, run.T), randn(rng, 32 * 8 * TILES_N, run.T),
                                np.float32(0.75), empty(16 * run.size * 8 * TILES_N, f32), run.size, TILES_N],
    oracle=_arith_oracle, outputs=(3,), launch=lambda run: _tile_launch(run.size * TILES_N), sizes=TILE_SIZES,
    bindings=({"T": f16}, {"T": bf16}), out_dtype=f32, depth=lambda run: Depth(steps=20), subgroup=True)


# ---------------------------------------------------------------- attention's steps on accumulators

@func
def score_tile(a, b, tm, tn, ndim):
    """The 16 x 8 product tile (tm, tn) of a (rows of 16) and b (ndim columns): the scores the kernels below
    work on."""
    return mma(frag_a(a, tm * 256, 16, 16, 16), frag_b(b, tn * 8, ndim, 16, 8), frag_acc(f32, 16, 8))


def _score_case(name: str, kernel, oracle, wide: bool = False, scalars: tuple = (), steps: int = 16 + 8 + 2):
    """A case of the kernels below: a (16 rows a tile row, 16 deep) and b of T, with ``wide`` a 16 x 16 f32 tile a
    tile row after them, the f32 output, the tile counts, then ``scalars``."""
    return CorpusCase(
        name=name, kernel=kernel,
        make_args=lambda run, rng: [randn(rng, 16 * run.size * 16, run.T), randn(rng, 16 * 8 * TILES_N, run.T),
                                    *([randn(rng, 16 * run.size * 16, f32)] if wide else []),
                                    empty(16 * run.size * 8 * TILES_N, f32), run.size, TILES_N, *scalars],
        oracle=oracle, outputs=(3 if wide else 2,),
        launch=lambda run: _tile_launch(run.size * TILES_N), sizes=TILE_SIZES, bindings=({"T": f16}, {"T": bf16}),
        out_dtype=f32, depth=lambda run: Depth(steps=steps), subgroup=True)


def _scores(args, run: Run):
    """The f64 scores of a case and the sums of their products' magnitudes, (16 size) x (8 TILES_N)."""
    m, n = 16 * run.size, 8 * TILES_N
    a, b = f64(args[0]).reshape(m, 16), f64(args[1]).reshape(16, n)
    return a @ b, np.abs(a) @ np.abs(b)


def _per_tile_row(x, fn):
    """``fn`` over each row of each subgroup's 8-column tile, repeated across the tile."""
    return np.repeat(fn(x.reshape(x.shape[0], TILES_N, 8), axis=-1), 8, axis=-1)


@kernel(variants(T=[f16, bf16]))
def mma_rows(a: In[T], b: In[T], c: Tensor[f32], tiles_m: int, tiles_n: int):
    """A product's rows reduced: (p - row max of p) + row sum of p / 2, every element of a row meeting its own
    row's max and sum (attention's softmax steps on a score tile)."""
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles_m * tiles_n:
        tm, tn = tile // tiles_n, tile % tiles_n
        p = score_tile(a, b, tm, tn, 8 * tiles_n)
        frag_store(c, (tm * 16 * tiles_n + tn) * 8, 8 * tiles_n, (p - frag_row_max(p)) + frag_row_sum(p) * 0.5)


def _rows_oracle(args, run: Run):
    p, s = _scores(args, run)
    want = p - _per_tile_row(p, np.max) + _per_tile_row(p, np.sum) * 0.5
    return {2: Expect(want.reshape(-1), (s + _per_tile_row(s, np.max) + _per_tile_row(s, np.sum) * 0.5).reshape(-1))}


MMA_ROWS = _score_case("mma_rows", mma_rows, _rows_oracle)


@kernel(variants(T=[f16, bf16]))
def mma_softmax(a: In[T], b: In[T], c: Tensor[f32], tiles_m: int, tiles_n: int):
    """The softmax of each row of a product tile, in registers: exp of the scores less their row's max, times the
    reciprocal of the row's sum, floored at 1/64 (a masked score's stand-in)."""
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles_m * tiles_n:
        tm, tn = tile // tiles_n, tile % tiles_n
        p = score_tile(a, b, tm, tn, 8 * tiles_n)
        e = exp(p - frag_row_max(p))
        frag_store(c, (tm * 16 * tiles_n + tn) * 8, 8 * tiles_n, max(e * recip(frag_row_sum(e)), 0.015625))


def _softmax_oracle(args, run: Run):
    p, s = _scores(args, run)
    e = np.exp(p - _per_tile_row(p, np.max))
    want = np.maximum(e / _per_tile_row(e, np.sum), 1 / 64)
    # a score's error (K products summed) moves its exponential by that much relative to it; exp's own ulps
    return {2: Expect(want.reshape(-1), (want * (4 * _per_tile_row(s, np.max) + 8)).reshape(-1))}


MMA_SOFTMAX = _score_case("mma_softmax", mma_softmax, _softmax_oracle)


@kernel(variants(T=[f16, bf16]))
def mma_masked(a: In[T], b: In[T], c: Tensor[f32], tiles_m: int, tiles_n: int, keys: int, shift: int):
    """Attention's masks on a product tile (rows: queries, columns: keys of the whole product): keys past ``keys``
    and past a query's position + ``shift`` take -64; each row then adds the sum of its keys within ``keys``."""
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles_m * tiles_n:
        tm, tn = tile // tiles_n, tile % tiles_n
        p = score_tile(a, b, tm, tn, 8 * tiles_n)
        causal = frag_mask(p, -64.0, cols=keys - tn * 8, diagonal=tm * 16 - tn * 8 + shift)
        kept = frag_row_sum(frag_mask(p, 0.0, cols=keys - tn * 8))
        frag_store(c, (tm * 16 * tiles_n + tn) * 8, 8 * tiles_n, causal + kept)


def _masked_oracle(args, run: Run):
    p, s = _scores(args, run)
    keys, shift = int(args[5]), int(args[6])
    q, k = np.meshgrid(np.arange(p.shape[0]), np.arange(p.shape[1]), indexing="ij")
    inside = k < keys
    want = np.where(inside & (k <= q + shift), p, -64.0) + _per_tile_row(np.where(inside, p, 0.0), np.sum)
    scale = s + _per_tile_row(np.where(inside, s, 0.0), np.sum) + 64
    return {2: Expect(want.reshape(-1), scale.reshape(-1))}


MMA_MASKED = _score_case("mma_masked", mma_masked, _masked_oracle, scalars=(8 * TILES_N - 3, 2))


@kernel(variants(T=[f16, bf16]))
def mma_scale_rows(a: In[T], b: In[T], w: In[f32], c: Tensor[f32], tiles_m: int, tiles_n: int):
    """A product tile's rows scaled by per-row factors of another width (the largest of each row of a 16 x 16
    tile of ``w``) and of its own (its rows' sums / 8): attention's rescaling of its output rows."""
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles_m * tiles_n:
        tm, tn = tile // tiles_n, tile % tiles_n
        p = score_tile(a, b, tm, tn, 8 * tiles_n)
        wide = frag_load_acc(w, tm * 256, 16, 16, 16)
        frag_store(c, (tm * 16 * tiles_n + tn) * 8, 8 * tiles_n,
                   frag_scale_rows(p, frag_row_max(wide)) + frag_scale_rows(p, frag_row_sum(p) * 0.125))


def _scale_rows_oracle(args, run: Run):
    p, s = _scores(args, run)
    top = f64(args[2]).reshape(p.shape[0], 16).max(axis=1, keepdims=True)
    sums, sum_scale = _per_tile_row(p, np.sum) * 0.125, _per_tile_row(s, np.sum) * 0.125
    return {3: Expect((p * top + p * sums).reshape(-1),
                      (s * np.abs(top) + s * np.abs(sums) + np.abs(p) * sum_scale).reshape(-1))}


MMA_SCALE_ROWS = _score_case("mma_scale_rows", mma_scale_rows, _scale_rows_oracle, wide=True, steps=16 + 8 + 3)


@kernel(variants(T=[f16, bf16]))
def mma_acc_to_a(pm: In[f32], b: In[T], c: Tensor[f32], tiles_m: int, tiles_n: int):
    """A 16 x 32 accumulator (attention's probabilities) fed to the next multiply as two 16 x 16 A fragments of T:
    C = round_T(P) @ B, K = 32 in two steps."""
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles_m * tiles_n:
        tm = tile // tiles_n
        tn = tile % tiles_n
        ndim = 8 * tiles_n
        probs = frag_load_acc(pm, tm * 512, 32, 16, 32)
        acc = mma(frag_acc_to_a(probs, 0, T), frag_b(b, tn * 8, ndim, 16, 8), frag_acc(f32, 16, 8))
        acc = mma(frag_acc_to_a(probs, 16, T), frag_b(b, 16 * ndim + tn * 8, ndim, 16, 8), acc)
        frag_store(c, tm * 16 * ndim + tn * 8, ndim, acc)


def _acc_to_a_oracle(args, run: Run):
    m, n = 16 * run.size, 8 * TILES_N
    rounded = f64(args[0].astype(numpy_dtype(run.T))).reshape(m, 32)  # each probability rounded once to T
    b = f64(args[1]).reshape(32, n)
    return {2: Expect((rounded @ b).reshape(-1), (np.abs(rounded) @ np.abs(b)).reshape(-1))}


MMA_ACC_TO_A = CorpusCase(
    name="mma_acc_to_a", kernel=mma_acc_to_a,
    make_args=lambda run, rng: [randn(rng, 16 * run.size * 32, f32), randn(rng, 32 * 8 * TILES_N, run.T),
                                empty(16 * run.size * 8 * TILES_N, f32), run.size, TILES_N],
    oracle=_acc_to_a_oracle, outputs=(2,), launch=lambda run: _tile_launch(run.size * TILES_N), sizes=TILE_SIZES,
    bindings=({"T": f16}, {"T": bf16}), out_dtype=f32, depth=lambda run: Depth(steps=33), subgroup=True)


# ---------------------------------------------------------------- 8x8x8, accumulator in the input dtype, B column-major

@kernel(variants(T=[f16, f32]))
def mma_8x8x8(a: In[T], bt: In[T], c: Tensor[T], tiles: int):
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles:
        acc = frag_acc(T, 8, 8)
        fa = frag_a(a, tile * 64, 8, 8, 8)
        fb = frag_b(bt, tile * 64, 8, 8, 8, layout="col")
        acc = mma(fa, fb, acc)
        frag_store(c, tile * 64, 8, acc)


def _mma8_oracle(args, run: Run):
    a = f64(args[0]).reshape(run.size, 8, 8)
    b = f64(args[1]).reshape(run.size, 8, 8).transpose(0, 2, 1)  # stored transposed: read column-major
    return {2: Expect((a @ b).reshape(-1), (np.abs(a) @ np.abs(b)).reshape(-1))}


MMA_8x8x8 = CorpusCase(
    name="mma_8x8x8", kernel=mma_8x8x8,
    make_args=lambda run, rng: [randn(rng, 64 * run.size, run.T), randn(rng, 64 * run.size, run.T),
                                empty(64 * run.size, run.T), run.size],
    oracle=_mma8_oracle, outputs=(2,), launch=lambda run: _tile_launch(run.size), sizes=TILE_SIZES,
    bindings=({"T": f16}, {"T": f32}), depth=lambda run: Depth(steps=8), subgroup=True)


# ---------------------------------------------------------------- 16x16x16 (MFMA, WMMA, cooperative matrices), B column-major

ACC = TypeVar("ACC")


@kernel(variants(T=[f16, bf16], ACC=[f32, f16]))
def mma_16x16x16(a: In[T], bt: In[T], c0: In[ACC], c: Tensor[ACC], tiles: int):
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles:
        acc = frag_load_acc(c0, tile * 256, 16, 16, 16)
        fa = frag_a(a, tile * 256, 16, 16, 16)
        fb = frag_b(bt, tile * 256, 16, 16, 16, layout="col")
        acc = mma(fa, fb, acc)
        frag_store(c, tile * 256, 16, acc)


def _mma16x16_oracle(args, run: Run):
    a = f64(args[0]).reshape(run.size, 16, 16)
    b = f64(args[1]).reshape(run.size, 16, 16).transpose(0, 2, 1)  # stored transposed: read column-major
    c0 = f64(args[2]).reshape(run.size, 16, 16)
    return {3: Expect((c0 + a @ b).reshape(-1), (np.abs(c0) + np.abs(a) @ np.abs(b)).reshape(-1))}


MMA_16x16x16 = CorpusCase(
    name="mma_16x16x16", kernel=mma_16x16x16,
    make_args=lambda run, rng: [randn(rng, 256 * run.size, run.T), randn(rng, 256 * run.size, run.T),
                                randn(rng, 256 * run.size, run["ACC"]), empty(256 * run.size, run["ACC"]), run.size],
    oracle=_mma16x16_oracle, outputs=(3,), launch=lambda run: _tile_launch(run.size), sizes=TILE_SIZES,
    bindings=({"T": f16, "ACC": f32}, {"T": bf16, "ACC": f32}, {"T": f16, "ACC": f16}),
    # A matrix unit may add the 16 products in any order, and an f16 accumulator rounds once at the end.
    depth=lambda run: Depth(steps=17), subgroup=True, out_dtype=lambda run: run["ACC"])


CASES = [MMA_16x8x16, MMA_NARROW_STORE, MMA_ELEMENTWISE, MMA_ROWS, MMA_SOFTMAX, MMA_MASKED, MMA_ACC_TO_A,
         MMA_SCALE_ROWS, MMA_8x8x8, MMA_16x16x16]
