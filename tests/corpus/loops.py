"""Loop corpus kernels: run-time bounds, while/break/continue, unroll hints, register arrays."""

import numpy as np

from iron import In, T, Tensor, bf16, f16, f32, i32, kernel, variants
from iron.lang import grid_size, group_size, local, num_groups, program_id, static_range

from .case import CorpusCase, Depth, Expect, Run, empty, f64, launch_1d, randint, randn, round_up
from .intmath import c_div, c_rem, from_ints, to_ints, wrap

ROW_SIZES = (1, 7, 255, 1000)


# ---------------------------------------------------------------- for with run-time bounds

@kernel(variants(T=[f32, f16, bf16]))
def row_sum(a: In[T], out: Tensor[T], rows: int, cols: int):
    r = program_id(0)
    if r < rows:
        acc = 0.0
        for c in range(r % 3, cols):
            acc += f32(a[r * cols + c])
        out[r] = T(acc)


ROW_COLS = 37


def _row_sum_oracle(args, run: Run):
    a = f64(args[0]).reshape(run.size, ROW_COLS)
    mask = np.arange(ROW_COLS)[None, :] >= (np.arange(run.size) % 3)[:, None]  # ragged starts
    return {1: Expect((a * mask).sum(axis=1), (np.abs(a) * mask).sum(axis=1))}


ROW_SUM = CorpusCase(
    name="row_sum_runtime_bounds", kernel=row_sum,
    make_args=lambda run, rng: [randn(rng, run.size * ROW_COLS, run.T), empty(run.size, run.T), run.size, ROW_COLS],
    oracle=_row_sum_oracle, outputs=(1,), launch=launch_1d(), bindings=({"T": f32}, {"T": f16}, {"T": bf16}),
    sizes=ROW_SIZES, depth=lambda run: Depth(steps=1, f32_steps=ROW_COLS))


# ---------------------------------------------------------------- while True with break

@kernel
def collatz_steps(start: In[i32], steps_out: Tensor[i32], limit: int, n: int):
    i = program_id(0)
    if i < n:
        x = start[i]
        steps = 0
        while True:
            if x == 1:
                break
            if steps >= limit:
                break
            if x % 2 == 0:
                x = x // 2
            else:
                x = 3 * x + 1
            steps += 1
        steps_out[i] = steps


COLLATZ_LIMIT = 120


def _collatz_oracle(args, run: Run):
    out = []
    for x in to_ints(args[0]):
        steps = 0
        while x != 1 and steps < COLLATZ_LIMIT:
            x = c_div(x, 2) if c_rem(x, 2) == 0 else wrap(3 * x + 1, i32)
            steps += 1
        out.append(steps)
    return {1: from_ints(out, i32)}


COLLATZ = CorpusCase(
    name="while_true_break", kernel=collatz_steps,
    make_args=lambda run, rng: [randint(rng, run.size, i32, 1, 5000), empty(run.size, i32), COLLATZ_LIMIT, run.size],
    oracle=_collatz_oracle, outputs=(1,), launch=launch_1d(), sizes=(1, 7, 255), exact=True)


# ---------------------------------------------------------------- while with a condition and break

@kernel
def first_above(a: In[f32], found: Tensor[i32], thresh: float, rows: int, cols: int):
    r = program_id(0)
    if r < rows:
        j = 0
        at = -1
        while j < cols:
            if a[r * cols + j] > thresh:
                at = j
                break
            j += 1
        found[r] = at


SEARCH_COLS = 24


def _first_above_oracle(args, run: Run):
    hit = f64(args[0]).reshape(run.size, SEARCH_COLS) > float(args[2])
    return {1: np.where(hit.any(axis=1), hit.argmax(axis=1), -1)}


FIRST_ABOVE = CorpusCase(
    name="while_cond_break", kernel=first_above,
    make_args=lambda run, rng: [randn(rng, run.size * SEARCH_COLS, f32), empty(run.size, i32), np.float32(1.8),
                                run.size, SEARCH_COLS],
    oracle=_first_above_oracle, outputs=(1,), launch=launch_1d(), sizes=ROW_SIZES, exact=True)


# ---------------------------------------------------------------- continue

@kernel(variants(T=[f32, i32]))
def positive_sum(a: In[T], out: Tensor[T], rows: int, cols: int):
    r = program_id(0)
    if r < rows:
        acc = T(0)
        for c in range(cols):
            v = a[r * cols + c]
            if v <= 0:
                continue
            acc += v
        out[r] = acc


POS_COLS = 21


def _positive_args(run: Run, rng: np.random.Generator) -> list:
    n = run.size * POS_COLS
    a = randint(rng, n, i32, -1000, 1000) if run.T == i32 else randn(rng, n, run.T)
    return [a, empty(run.size, run.T), run.size, POS_COLS]


def _positive_oracle(args, run: Run):
    if run.T == i32:
        a = args[0].astype(np.int64).reshape(run.size, POS_COLS)
        return {1: np.where(a > 0, a, 0).sum(axis=1)}
    a = f64(args[0]).reshape(run.size, POS_COLS)
    return {1: np.where(a > 0, a, 0).sum(axis=1)}  # positive terms: no cancellation


POSITIVE_SUM = CorpusCase(
    name="for_continue", kernel=positive_sum, make_args=_positive_args, oracle=_positive_oracle, outputs=(1,),
    launch=launch_1d(), bindings=({"T": f32}, {"T": i32}), sizes=ROW_SIZES, depth=lambda run: Depth(POS_COLS))


# ---------------------------------------------------------------- unroll hint, run-time trip count

@kernel(variants(T=[f32, f16]))
def row_dot(a: In[T], x: In[T], out: Tensor[f32], rows: int, cols: int):
    r = program_id(0)
    if r < rows:
        acc = 0.0
        for c in range(cols, unroll=4):
            acc += f32(a[r * cols + c]) * f32(x[c])
        out[r] = acc


DOT_COLS = 39  # no multiple of the unroll factor: the remainder loop runs too


def _row_dot_oracle(args, run: Run):
    a = f64(args[0]).reshape(run.size, DOT_COLS)
    x = f64(args[1])
    return {2: Expect(a @ x, np.abs(a) @ np.abs(x))}


ROW_DOT = CorpusCase(
    name="unroll_hint_dot", kernel=row_dot,
    make_args=lambda run, rng: [randn(rng, run.size * DOT_COLS, run.T), randn(rng, DOT_COLS, run.T),
                                empty(run.size, f32), run.size, DOT_COLS],
    oracle=_row_dot_oracle, outputs=(2,), launch=launch_1d(), bindings=({"T": f32}, {"T": f16}),
    sizes=ROW_SIZES, out_dtype=f32, depth=lambda run: Depth(steps=DOT_COLS + 1))


# ---------------------------------------------------------------- negative constant step

@kernel
def horner_desc(coef: In[i32], x: In[i32], out: Tensor[i32], deg: int, n: int):
    i = program_id(0)
    if i < n:
        xv = x[i]
        acc = 0
        for k in range(deg, -1, -1):
            acc = acc * xv + coef[k]
        out[i] = acc


HORNER_DEG = 9


def _horner_desc_oracle(args, run: Run):
    coef = to_ints(args[0])
    out = []
    for xv in to_ints(args[1]):
        acc = 0
        for k in range(HORNER_DEG, -1, -1):
            acc = wrap(acc * xv + coef[k], i32)
        out.append(acc)
    return {2: from_ints(out, i32)}


HORNER_DESC = CorpusCase(
    name="negative_step_loop", kernel=horner_desc,
    make_args=lambda run, rng: [randint(rng, HORNER_DEG + 1, i32, -1000, 1000), randint(rng, run.size, i32, -60, 60),
                                empty(run.size, i32), HORNER_DEG, run.size],
    oracle=_horner_desc_oracle, outputs=(2,), launch=launch_1d(), sizes=(1, 7, 255, 1000), exact=True)


# ---------------------------------------------------------------- constant trip count (fully unrollable)

@kernel(variants(T=[f32, f16]))
def poly8(c: In[T], x: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        xv = x[i]
        acc = c[7]
        for k in range(7):
            acc = acc * xv + c[6 - k]
        out[i] = acc


def _poly8_oracle(args, run: Run):
    c, x = f64(args[0]), f64(args[1])
    powers = x[:, None] ** np.arange(8)[None, :]
    # Horner's error bound is relative to sum |c_k| |x|^k (2 roundings a step).
    return {2: Expect(powers @ c, np.abs(powers) @ np.abs(c))}


POLY8 = CorpusCase(
    name="constant_loop_unrolled", kernel=poly8,
    make_args=lambda run, rng: [randn(rng, 8, run.T), randn(rng, run.size, run.T, scale=0.8), empty(run.size, run.T),
                                run.size],
    oracle=_poly8_oracle, outputs=(2,), launch=launch_1d(), bindings=({"T": f32}, {"T": f16}),
    depth=lambda run: Depth(14))


# ---------------------------------------------------------------- register arrays

@kernel(variants(T=[f32, f16]))
def reg_accum4(a: In[T], out: Tensor[f32], rows: int):
    r = program_id(0)
    if r < rows:
        acc = local(f32, 4)
        weights = [1.0, -2.0, 0.5, 4.0]
        for k in range(8):
            for j in static_range(4):
                acc[j] += f32(a[r * 32 + k * 4 + j])
        for j in static_range(4):
            out[r * 4 + j] = acc[j] * weights[j]


def _reg_accum_oracle(args, run: Run):
    a = f64(args[0]).reshape(run.size, 8, 4)
    w = np.array([1.0, -2.0, 0.5, 4.0])
    return {1: Expect((a.sum(axis=1) * w).reshape(-1), (np.abs(a).sum(axis=1) * np.abs(w)).reshape(-1))}


REG_ACCUM = CorpusCase(
    name="register_array_static_range", kernel=reg_accum4,
    make_args=lambda run, rng: [randn(rng, run.size * 32, run.T), empty(run.size * 4, f32), run.size],
    oracle=_reg_accum_oracle, outputs=(1,), launch=launch_1d(), bindings=({"T": f32}, {"T": f16}),
    sizes=ROW_SIZES, out_dtype=f32, depth=lambda run: Depth(steps=8))


# ---------------------------------------------------------------- break inside a constant loop

@kernel
def first_hit8(a: In[f32], out: Tensor[i32], thresh: float, n: int):
    i = program_id(0)
    if i < n:
        at = 8
        for k in range(8):
            if a[i * 8 + k] > thresh:
                at = k
                break
        out[i] = at


def _first_hit8_oracle(args, run: Run):
    hit = f64(args[0]).reshape(run.size, 8) > float(args[2])
    return {1: np.where(hit.any(axis=1), hit.argmax(axis=1), 8)}


FIRST_HIT8 = CorpusCase(
    # Unrolling a constant loop must keep the break's meaning.
    name="constant_loop_break", kernel=first_hit8,
    make_args=lambda run, rng: [randn(rng, run.size * 8, f32), empty(run.size, i32), np.float32(1.2), run.size],
    oracle=_first_hit8_oracle, outputs=(1,), launch=launch_1d(), sizes=ROW_SIZES, exact=True)


# ---------------------------------------------------------------- unroll hint, run-time start, continue and break

@kernel
def capped_positive_sum(a: In[i32], out: Tensor[i32], cap: int, rows: int, cols: int):
    r = program_id(0)
    if r < rows:
        acc = 0
        for c in range(r % 4, cols, unroll=4):
            v = a[r * cols + c]
            if v <= 0:
                continue
            acc += v
            if acc > cap:
                break
        out[r] = acc


CAPPED_COLS = 30
CAP = 2500


def _capped_oracle(args, run: Run):
    a = args[0].astype(np.int64).reshape(run.size, CAPPED_COLS)
    out = []
    for r in range(run.size):
        acc = 0
        for v in a[r, r % 4:]:
            if v <= 0:
                continue
            acc += int(v)
            if acc > CAP:
                break
        out.append(acc)
    return {1: np.array(out)}


CAPPED_SUM = CorpusCase(
    # After unrolling by 4 from a start that is no multiple of 4, the adjacent
    # loads must not become aligned vector loads; continue and break must
    # survive the copies.
    name="unroll_hint_continue_break", kernel=capped_positive_sum,
    make_args=lambda run, rng: [randint(rng, run.size * CAPPED_COLS, i32, -400, 400), empty(run.size, i32), CAP,
                                run.size, CAPPED_COLS],
    oracle=_capped_oracle, outputs=(1,), launch=launch_1d(), sizes=ROW_SIZES, exact=True)


# ---------------------------------------------------------------- grid-stride loop

@kernel(variants(T=[f32, i32]))
def grid_stride(a: In[T], out: Tensor[T], padding: Tensor[i32], n: int):
    p = program_id(0)
    for j in range(p, n, grid_size(0)):
        out[j] = a[j] * 2 + 1
    padding[p] = num_groups(0) * group_size(0) - grid_size(0)


STRIDE_THREADS = 100  # fewer threads than elements, and no multiple of the group


def _grid_stride_args(run: Run, rng: np.random.Generator) -> list:
    a = randint(rng, run.size, i32, -10**6, 10**6) if run.T == i32 else randn(rng, run.size, run.T)
    return [a, empty(run.size, run.T), empty(STRIDE_THREADS, i32), run.size]


def _grid_stride_oracle(args, run: Run):
    a = args[0].astype(np.int64) if run.T == i32 else f64(args[0])
    want = a * 2 + 1
    padding = np.full(STRIDE_THREADS, round_up(STRIDE_THREADS, 64) - STRIDE_THREADS)
    if run.T == i32:
        return {1: want, 2: padding}
    return {1: Expect(want, np.abs(2 * a) + 1), 2: padding}


GRID_STRIDE = CorpusCase(
    name="grid_stride_loop", kernel=grid_stride, make_args=_grid_stride_args, oracle=_grid_stride_oracle,
    outputs=(1, 2), launch=lambda run: ((STRIDE_THREADS,), (64,)), bindings=({"T": f32}, {"T": i32}),
    depth=lambda run: Depth(1))


# ---------------------------------------------------------------- return from inside a loop

@kernel
def find_or_minus_one(a: In[f32], found: Tensor[i32], thresh: float, rows: int, cols: int):
    r = program_id(0)
    if r >= rows:
        return
    for k in range(cols):
        if a[r * cols + k] > thresh:
            found[r] = k
            return
    found[r] = -1


FIND_RETURN = CorpusCase(
    name="return_inside_loop", kernel=find_or_minus_one,
    make_args=lambda run, rng: [randn(rng, run.size * SEARCH_COLS, f32), empty(run.size, i32), np.float32(1.8),
                                run.size, SEARCH_COLS],
    oracle=_first_above_oracle, outputs=(1,), launch=launch_1d(), sizes=ROW_SIZES, exact=True)


# ---------------------------------------------------------------- nested loops: break inner, continue outer

@kernel
def count_runs(a: In[i32], out: Tensor[i32], rows: int, cols: int):
    r = program_id(0)
    if r < rows:
        total = 0
        for start in range(cols):
            if a[r * cols + start] == 0:
                continue
            length = 0
            for k in range(start, cols):
                if a[r * cols + k] == 0:
                    break
                length += 1
            total += length
        out[r] = total


RUN_COLS = 17


def _count_runs_oracle(args, run: Run):
    a = args[0].reshape(run.size, RUN_COLS)
    out = []
    for row in a:
        total = 0
        for start in range(RUN_COLS):
            if row[start] == 0:
                continue
            k = start
            while k < RUN_COLS and row[k] != 0:
                k += 1
            total += k - start
        out.append(total)
    return {1: np.array(out)}


COUNT_RUNS = CorpusCase(
    name="nested_loops_break_continue", kernel=count_runs,
    make_args=lambda run, rng: [randint(rng, run.size * RUN_COLS, i32, 0, 2), empty(run.size, i32), run.size,
                                RUN_COLS],
    oracle=_count_runs_oracle, outputs=(1,), launch=launch_1d(), sizes=(1, 7, 255), exact=True)


CASES = [ROW_SUM, COLLATZ, FIRST_ABOVE, POSITIVE_SUM, ROW_DOT, HORNER_DESC, POLY8, REG_ACCUM, FIRST_HIT8,
         CAPPED_SUM, GRID_STRIDE,
         FIND_RETURN, COUNT_RUNS]
