"""iron.std.reduce: the registered rows on interp and lavapipe (and at subgroup widths 8 and 64), mutants,
four-target compiles, the host functions (values, both schedules, whole tensors, ties, errors) and the
non-finite policy."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught, assert_rows_pass, device, mutant_rows, run_entry, suite

import iron
from iron import config
from iron.core import dtypes as D
from iron.harness.tolerance import Depth, Expect, compare, derive_tolerance
from iron.runner.execute import simd_width
from iron.std import _host
from iron.std import reduce as R
from iron.std.suite import reduce as RS

ENTRIES = suite("reduce")
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
DTYPE_IDS = ["f32", "f16", "bf16"]


@pytest.mark.parametrize("width", [8, 64])
def test_registered_rows_pass_at_other_subgroup_widths(width, seed):
    """8: 32 subgroups per group (the in-order combine loops longer; head < VEC <= W); 64: four subgroups."""
    config.set_option("simd_width", width)
    for entry in ENTRIES:
        assert_rows_pass(run_entry(entry, "interp", seed), seed)


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/reduce.py with each ``(old, new)`` edit made."""
    return edited_module(R, tmp_path, *edits)


MUTANTS = {
    # the scalar tail forgets a row's last element.
    "tail_drops_last": ("std/reduce/sum_rows", "reduce_rows",
                        [("    for j in range(b + t, hi, nt):\n        s = _combine(",
                          "    for j in range(b + t, hi - 1, nt):\n        s = _combine(")]),
    # the aligned head is skipped: rows that start off a 16-byte boundary lose up to VEC - 1 elements.
    "head_skipped": ("std/reduce/mean_rows", "reduce_rows",
                     [("    for j in range(lo + t, a, nt):\n        s = _combine(",
                       "    for j in range(a + t, a, nt):\n        s = _combine(")]),
    # thread 0 never adds the last subgroup's result.
    "last_subgroup_dropped": ("std/reduce/sum_rows", "reduce_rows",
                              [("            s = _combine(s, red[k], OP)",
                                "            if k < num_simd_groups() - 1:\n"
                                "                s = _combine(s, red[k], OP)")]),
    # the subgroup combine takes the max where it should add.
    "simd_wrong_combine": ("std/reduce/sum_rows", "reduce_rows",
                           [("        r = simd_sum(s)", "        r = simd_max(s)")]),
    # min forgets to negate back: -min(x) comes out.
    "min_not_negated_back": ("std/reduce/min_rows", "reduce_rows",
                             [("        r = r * sign\n", "        r = r\n")]),
    # the last chunk of a whole tensor is not cut at n: reads past the end.
    "last_chunk_uncut": ("std/reduce/partials", "reduce_rows",
                         [("_thread_partial(x, lo, _fmin(lo + cols, n), t, group_size(0), VEC, OP, sign, aligned)",
                           "_thread_partial(x, lo, lo + cols, t, group_size(0), VEC, OP, sign, aligned)")]),
    # the mean of the final stage divides by one too few.
    "mean_off_by_one": ("std/reduce/finish", "reduce_rows",
                        [("        r = r / count", "        r = r / (count - 1.0)")]),
    # argmax ties go to the last lane holding the maximum.
    "argmax_last_tie": ("std/reduce/argmax_rows", "argmax_rows",
                        [("    best = simd_min(select(hit, j, NO_INDEX))",
                          "    best = simd_max(select(hit, j, -1))")]),
    # the subgroup-per-row argmax writes the flat index, not the index within the row.
    "argmax_absolute_index": ("std/reduce/argmax_rows", "argmax_rows",
                              [("            if lane == 0 and mine < rows:\n                out[row] = j - lo",
                                "            if lane == 0 and mine < rows:\n                out[row] = j")]),
    # argmax stage 1 breaks ties toward the later index.
    "argmax_ties_prefer_later": ("std/reduce/argmax_partials", "argmax_rows",
                             [("    return ((v != v) & ((w == w) | (j < k))) | (v > w) | ((v == w) & (j < k))",
                               "    return ((v != v) & ((w == w) | (j < k))) | (v > w) | ((v == w) & (j > k))")]),
    # the finish forgets the within-chunk index: it compares chunk starts.
    "finish_ignores_part": ("std/reduce/argmax_finish", "argmax_finish",
                            [("        g = k * chunk + part[k]", "        g = k * chunk")]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    name, kernel, edits = MUTANTS[mutant]
    module = mutant_module(tmp_path, *edits)
    assert_mutant_caught(name, getattr(module, kernel), seed)


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: a copy with no edit passes, so a caught mutant is caught by its edit."""
    module = mutant_module(tmp_path)
    assert_rows_pass(mutant_rows("std/reduce/sum_rows", module.reduce_rows, seed), seed)
    assert_rows_pass(mutant_rows("std/reduce/argmax_rows", module.argmax_rows, seed), seed)


def test_nan_policy_mutant_caught(tmp_path):
    """The non-finite test below can fail: with simd_max's NaN-ignoring result kept, a NaN is lost."""
    module = mutant_module(tmp_path, ("        r = select(simd_any(s != s), NAN, simd_max(s))",
                                      "        r = simd_max(s)"))
    x = np.arange(64, dtype=np.float32).reshape(2, 32)
    x[:, 5] = np.nan
    assert not np.isnan(module.max(x, backend="interp")).any()
    assert np.isnan(R.max(x, backend="interp")).all()


# ---------------------------------------------------------------- host functions: values

def width(backend: str) -> int:
    return simd_width(device(backend))


def row_depth(rows: int, cols: int, dt: D.DType, w: int, aligned: bool = True, mean: bool = False) -> Depth:
    vec = _host.vector_width(dt)
    threads = w if R.by_subgroup(rows, cols, dt) else R.GROUP
    return Depth(steps=1, f32_steps=RS.sum_chain(cols, vec, threads, w, aligned) + mean)


def whole_depth(n: int, dt: D.DType, w: int, aligned: bool = True, mean: bool = False) -> Depth:
    """Stage 1 over each chunk, then the finish over the f32 partials (f32 vectors of 4)."""
    vec = _host.vector_width(dt)
    parts, chunk = R.chunking(n, vec)
    chain = RS.sum_chain(chunk, vec, R.GROUP, w, aligned) + RS.sum_chain(parts, 4, R.GROUP, w)
    return Depth(steps=1, f32_steps=chain + mean)


def check_sum(got, x, depth: Depth, axis, mean: bool = False) -> None:
    x64 = x.astype(np.float64)
    count = x.shape[-1] if axis is not None else x.size
    want = x64.sum(axis=axis) / (count if mean else 1)
    scale = np.abs(x64).sum(axis=axis) / (count if mean else 1)
    verdict = compare(got, Expect(want, scale=scale), derive_tolerance(D.from_numpy(x.dtype), depth))
    assert verdict.ok, verdict.message


def check_all(x: np.ndarray, axis, backend: str = "interp") -> None:
    """The five host functions on ``x`` against float64 numpy: sums within the derived tolerance, the rest
    exactly; output shapes and dtypes as numpy's (argmax i32)."""
    dt, w = D.from_numpy(x.dtype), width(backend)
    x64 = x.astype(np.float64)
    for mean, fn in ((False, R.sum), (True, R.mean)):
        got = fn(x, axis=axis, backend=backend)
        assert got.shape == x64.sum(axis=axis).shape and got.dtype == x.dtype
        rows = x.size // max(1, x.shape[-1])
        depth = (row_depth(rows, x.shape[-1], dt, w, R.is_aligned(x), mean) if axis is not None
                 else whole_depth(x.size, dt, w, R.is_aligned(x), mean))
        check_sum(got, x, depth, axis, mean)
    for fn, ref in ((R.max, np.max), (R.min, np.min)):
        got = fn(x, axis=axis, backend=backend)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.astype(np.float64), ref(x64, axis=axis))
    got = R.argmax(x, axis=axis, backend=backend)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.argmax(x64, axis=axis))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(7,), (2, 3, 50), (3, 1023), (3, 1025), (2, 5000), (1, 1)])
def test_rows_match_the_oracle(shape, dtype, seed):
    """1-D and 3-D inputs; rows on both sides of the schedule switch (4096 bytes) for each dtype."""
    rng = np.random.default_rng(seed)
    check_all((rng.standard_normal(shape) * 3).astype(dtype), -1)


def test_many_long_rows_go_one_subgroup_per_row(monkeypatch, seed):
    """Long rows take the subgroup schedule once there are MANY_ROWS of them (lowered here to 4 so the
    interpreter runs it): values as the oracle's, through the schedule the host picked."""
    assert R.by_subgroup(1, 1024, D.f32) and not R.by_subgroup(R.MANY_ROWS - 1, 1025, D.f32)
    assert R.by_subgroup(R.MANY_ROWS, 16384, D.f16)
    monkeypatch.setattr(R, "MANY_ROWS", 4)
    assert R.by_subgroup(4, 3000, D.f32) and not R.by_subgroup(3, 3000, D.f32)
    rng = np.random.default_rng(seed)
    check_all((rng.standard_normal((5, 3000)) * 3).astype(np.float32), -1)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1,), (3, 7), (4099,), (40001,), (3, 20000)])
def test_whole_tensor_matches_the_oracle(shape, dtype, seed):
    """axis=None: one chunk, and up to tens of chunks with a short last one (two stages)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) + 0.5).astype(dtype)
    assert R.chunking(x.size, _host.vector_width(D.from_numpy(x.dtype)))[0] >= (2 if x.size > 20000 else 1)
    check_all(x, None)


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_both_backends_agree_with_the_oracle_on_odd_shapes(backend, seed):
    rng = np.random.default_rng(seed)
    for shape, axis in (((13, 77), -1), ((5, 3001), -1), ((30011,), None)):
        check_all(rng.standard_normal(shape).astype(np.float32), axis, backend)


def test_unaligned_view_takes_the_scalar_path(seed):
    """A view 4 bytes past a 16-byte boundary: vector loads would be misaligned, so every load is scalar."""
    rng = np.random.default_rng(seed)
    buf = rng.standard_normal(4 * 3000 + 1).astype(np.float32)
    x = buf[1:].reshape(4, 3000)
    assert not R.is_aligned(x) and R.is_aligned(x.copy())
    check_all(x, -1)
    check_all(x.reshape(-1), None)


def test_out_is_written_and_returned(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((6, 100)).astype(np.float16)
    out = np.full(6, np.nan, np.float16)
    assert R.max(x, out=out, backend="interp") is out
    np.testing.assert_array_equal(out, x.max(axis=-1))
    idx = np.full(6, -1, np.int32)
    assert R.argmax(x, out=idx, backend="interp") is idx
    np.testing.assert_array_equal(idx, x.argmax(axis=-1))
    total = np.zeros((), np.float16)
    assert R.sum(x, axis=None, out=total, backend="interp") is total


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_argmax_ties_take_the_first_index(backend):
    """Equal maxima in different threads, vector lanes, subgroups and chunks: the lowest index wins."""
    x = np.zeros((4, 3000), np.float32)
    x[1, [2999, 1500, 7]] = 1.0           # across threads and subgroups of the group schedule
    x[2, :] = -np.inf                      # all -inf: index 0
    x[3, [4, 3]] = 2.0                     # neighbouring vector lanes
    np.testing.assert_array_equal(R.argmax(x, backend=backend), [0, 7, 0, 3])
    np.testing.assert_array_equal(R.argmax(x[:, :50].copy(), backend=backend), [0, 7, 0, 3])   # subgroup schedule
    flat = np.zeros(50000, np.float16)
    flat[[45000, 20001, 9]] = 3.0          # across chunks of a whole tensor
    assert int(R.argmax(flat, axis=None, backend=backend)) == 9
    assert int(R.argmax(np.zeros(50000, np.float32), axis=None, backend=backend)) == 0


# ---------------------------------------------------------------- non-finite policy

@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("cols", [6, 3000])
def test_non_finite_policy(cols, dtype, backend):
    """NaN anywhere: sum/mean/max/min NaN, argmax the first NaN; +inf with -inf: sum NaN; infinities are
    ordinary extremes for max/min/argmax.  Both schedules (6: one subgroup per row; 3000: a group)."""
    nan, inf = np.nan, np.inf
    x = np.ones((4, cols), np.float64)
    x[0, [cols - 1, cols // 2]] = nan                 # two NaNs: the first is at cols // 2
    x[1, [0, cols - 2]] = [inf, -inf]
    x[2, :] = -inf
    x[3, cols - 1] = inf
    x = x.astype(dtype)
    sums = R.sum(x, backend=backend).astype(np.float64)
    assert np.isnan(sums[0]) and np.isnan(sums[1]) and sums[2] == -inf and sums[3] == inf
    assert np.isnan(R.mean(x, backend=backend).astype(np.float64)[0])
    np.testing.assert_array_equal(R.max(x, backend=backend).astype(np.float64), [nan, inf, -inf, inf])
    np.testing.assert_array_equal(R.min(x, backend=backend).astype(np.float64), [nan, -inf, -inf, 1.0])
    np.testing.assert_array_equal(R.argmax(x, backend=backend), [cols // 2, 0, 0, cols - 1])


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_non_finite_policy_whole_tensor(backend):
    x = np.arange(60000, dtype=np.float32) % 7
    x[[50001, 30000]] = np.nan
    assert np.isnan(R.sum(x, axis=None, backend=backend)) and np.isnan(R.max(x, axis=None, backend=backend))
    assert np.isnan(R.min(x, axis=None, backend=backend))
    assert int(R.argmax(x, axis=None, backend=backend)) == 30000
    y = np.zeros(60000, np.float32)
    y[59999] = -np.inf
    assert R.min(y, axis=None, backend=backend) == -np.inf and int(R.argmax(y, axis=None, backend=backend)) == 0


def test_empty_inputs():
    np.testing.assert_array_equal(R.sum(np.zeros((3, 0), np.float32), backend="interp"), [0, 0, 0])
    assert np.isnan(R.mean(np.zeros((2, 0), np.float32), backend="interp")).all()
    assert R.sum(np.zeros((0, 5), np.float32), backend="interp").shape == (0,)
    assert R.sum(np.zeros(0, np.float32), axis=None, backend="interp") == 0
    assert np.isnan(R.mean(np.zeros(0, np.float16), axis=None, backend="interp"))


# ---------------------------------------------------------------- host functions: errors

@pytest.mark.parametrize("call, message", [
    (lambda: R.sum(np.ones(4, np.int32)), "f32, f16 or bf16"),
    (lambda: R.sum([1.0, 2.0]), "expected an array"),
    (lambda: R.mean(np.ones((2, 3), np.float32), axis=0), "only the last axis"),
    (lambda: R.max(np.ones((2, 0), np.float32)), "empty axis"),
    (lambda: R.argmax(np.ones(0, np.float32), axis=None), "empty axis"),
    (lambda: R.min(np.ones((), np.float32)), "at least one dimension"),
    (lambda: R.sum(np.ones((2, 3), np.float32), out=np.ones(3, np.float32)), "sum: out has shape (3,); sum writes shape (2,)"),
    (lambda: R.sum(np.ones((2, 3), np.float32), out=np.ones(2, np.float16)), "dtype f16"),
    (lambda: R.argmax(np.ones((2, 3), np.float32), out=np.ones(2, np.float32)), "argmax: out has dtype f32; argmax writes i32"),
    (lambda: R.sum(np.ones((8, 8), np.float32)[:, ::2], backend="interp"), "C-contiguous"),
])
def test_bad_input_is_a_launch_error(call, message):
    with pytest.raises(iron.LaunchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_chunking_covers_the_tensor():
    for n in (1, 7, 4096, 4097, 100003, 1 << 24, (1 << 24) + 3):
        for vec in (4, 8):
            parts, chunk = R.chunking(n, vec)
            assert chunk % vec == 0 and 1 <= parts <= R.MAX_PARTIALS
            assert (parts - 1) * chunk < n <= parts * chunk
    assert R.chunking(1 << 24, 4) == (1024, 16384)
