"""iron.std.gemv: the registered rows on interp and lavapipe (and at subgroup widths 8 and 64), mutants,
four-target compiles, the host function (values on unseen shapes, out=, errors) and the non-finite policy."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught, assert_rows_pass, device, mutant_rows, run_entry, suite

import iron
from iron import config
from iron.core import dtypes as D
from iron.harness.tolerance import Expect, compare, derive_tolerance
from iron.std import _host
from iron.std import gemv as G
from iron.std.suite import gemv as GS

ENTRIES = suite("gemv")
FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]
FLOAT_IDS = ["f32", "f16", "bf16"]


@pytest.mark.parametrize("width", [8, 64])
def test_registered_rows_pass_at_other_subgroup_widths(width, seed):
    """8: CT 16 and 32 exceed the subgroup (R = 1: no butterfly, 256 / CT partials); 64: a subgroup is
    wider than the 32 threads per row the host launches, so each subgroup loops over two rows."""
    config.set_option("simd_width", width)
    for entry in ENTRIES:
        assert_rows_pass(run_entry(entry, "interp", seed), seed)


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/gemv.py with each ``(old, new)`` edit made."""
    return edited_module(G, tmp_path, *edits)


MUTANTS = {
    # the scalar path stops one element short of the row (an off-by-one tail).
    "rows_scalar_tail_short": ("std/gemv/rows", "gemv_rows", [("for c in range(lane, k, w, unroll=4):",
                                                               "for c in range(lane, k - 1, w, unroll=4):")]),
    # the vector accumulators' tree forgets the last one.
    "rows_tree_drops_accumulator": ("std/gemv/rows", "gemv_rows",
                                    [("acc[j] = acc[j] + acc[j + span]",
                                      "acc[j] = acc[j] + acc[j + span] * f32(j + span < VEC - 1)")]),
    # the butterfly stops one level early: half the lanes' partials are dropped.
    "rows_butterfly_short": ("std/gemv/rows", "gemv_rows", [("        while half > 0:", "        while half > 1:")]),
    # the column tail (n % VEC != 0) is skipped: the last partial chunk stays unwritten/zero.
    "cols_tail_skipped": ("std/gemv/cols", "gemv_cols", [("                    if first + j < n:",
                                                          "                    if first + VEC <= n:")]),
    # the combine drops the last subgroup's partial.
    "cols_drops_last_partial": ("std/gemv/cols", "gemv_cols", [("for p in range(1, THREADS // max(ct, w)):",
                                                                 "for p in range(1, THREADS // max(ct, w) - 1):")]),
    # the combine reads the planes of a 256-thread group: right at 256, wrong at 1024.
    "cols_1024_plane_stride": ("std/gemv/cols_1024", "gemv_cols", [("plane = (t % VEC) * THREADS + t // VEC",
                                                                    "plane = (t % VEC) * 256 + t // VEC")]),
    # each thread starts its K slice one row late.
    "cols_slice_off_by_one": ("std/gemv/cols", "gemv_cols",
                              [("for r in range(r0 + s, r1, slices, unroll=4):\n                    av",
                                "for r in range(r0 + s + 1, r1, slices, unroll=4):\n                    av")]),
    # a K split stops one row short of the next one's first.
    "cols_split_drops_a_row": ("std/gemv/cols_split", "gemv_cols", [("r1 = min(k, r0 + kstep)",
                                                                      "r1 = min(k, r0 + kstep - 1)")]),
    # with several splits, the last one's partials land on the first's.
    "cols_split_partial_row": ("std/gemv/cols_split", "gemv_cols", [("part[sp * n + col] = total",
                                                                      "part[min(sp, 1) * n + col] = total")]),
    # the second pass forgets the last split.
    "cols_sum_drops_last_split": ("std/gemv/cols_sum", "gemv_cols_sum", [("for sp in range(1, splits):",
                                                                          "for sp in range(1, splits - 1):")]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    name, kernel, edits = MUTANTS[mutant]
    module = mutant_module(tmp_path, *edits)
    assert_mutant_caught(name, getattr(module, kernel), seed)


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: an unedited copy passes, so a caught mutant is caught by its edit."""
    module = mutant_module(tmp_path)
    assert_rows_pass(mutant_rows("std/gemv/cols", module.gemv_cols, seed), seed)


# ---------------------------------------------------------------- the host function

def check(got: np.ndarray, A: np.ndarray, x: np.ndarray, transpose: bool, backend: str) -> None:
    """``got`` against float64 ``A @ x`` (or ``x @ A``) within the depth of the kernel the host picked."""
    A64, x64 = A.astype(np.float64), x.astype(np.float64)
    want = Expect(x64 @ A64, np.abs(x64) @ np.abs(A64)) if transpose else Expect(A64 @ x64, np.abs(A64) @ np.abs(x64))
    dt = D.from_numpy(A.dtype)
    vec = _host.vector_width(dt)
    w = 8 if backend == "vulkan" else config.get("simd_width")
    rows, cols = A.shape
    if transpose:
        ct, kstep, threads = G.column_plan(rows, cols, dt, backend)
        depth = GS.cols_depth(rows, ct, w, threads, kstep)
    else:
        depth = GS.rows_depth(cols, vec, w, cols % vec == 0 and G.aligned(A, x))
    verdict = compare(got, want, derive_tolerance(dt, depth))
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_host_gemv_matches_the_oracle(backend, dtype, seed):
    """Shapes the registry never saw: (37, 515), (1, 4104), a single column, K split in 4 and 15 (x @ A
    of (300, 72) and (1000, 40)), and both orientations."""
    device(backend)
    rng = np.random.default_rng(seed)
    for rows, cols in ((37, 515), (1, 4104), (300, 1), (64, 72), (300, 72), (1000, 40)):
        A = rng.standard_normal((rows, cols)).astype(dtype)
        for transpose in (False, True):
            x = rng.standard_normal(rows if transpose else cols).astype(dtype)
            y = G.gemv(A, x, transpose=transpose, backend=backend)
            assert y.shape == ((cols,) if transpose else (rows,)) and y.dtype == A.dtype
            check(y, A, x, transpose, backend)


def test_out_and_unaligned_inputs(seed):
    rng = np.random.default_rng(seed)
    buf = rng.standard_normal(40 * 64 + 1).astype(np.float32)
    A = buf[1:].reshape(40, 64)  # 4 bytes past a 16-byte boundary: the host takes the scalar path
    assert not G.aligned(A) and G.aligned(A.copy())
    x = rng.standard_normal(64).astype(np.float32)
    out = np.full(40, np.nan, np.float32)
    assert G.gemv(A, x, out=out, backend="interp") is out
    check(out, A, x, False, "interp")


def test_column_plan_splits_k_when_n_is_short():
    from iron import bf16, f16, f32

    assert G.column_plan(300, 72, f32, "interp") == (32, 75, G.GROUP)
    assert G.column_plan(37, 515, f32, "interp") == (G.choose_column_threads(515, 4), 37, G.GROUP)  # K too short
    # the Llama shapes: 512-byte rows segments, about SPLIT_TARGET items
    for k, n in ((4096, 4096), (11008, 4096), (4096, 11008)):
        for dt in (f16, bf16, f32):
            ct, kstep, threads = G.column_plan(k, n, dt, "cuda")
            items = -(-n // (ct * (8 if dt.itemsize == 2 else 4))) * -(-k // kstep)
            assert ct == 32 and threads == G.GROUP and G.SPLIT_TARGET <= items < 2 * G.SPLIT_TARGET, (k, n, dt)
    assert G.column_plan(64, 1 << 20, f16, "cuda")[:2] == (32, 64)  # wide N: no split


def test_column_threads_choice():
    """Wide blocks while the columns give enough groups, down to 2 threads (32 bytes) per row segment."""
    assert G.choose_column_threads(4096, 4) == 2  # 512 groups at 2, 256 (< 264) at 4
    assert G.choose_column_threads(11008, 4) == 8 and G.choose_column_threads(11008, 8) == 4
    assert G.choose_column_threads(1 << 20, 8) == 32 and G.choose_column_threads(5, 4) == 2
    assert G.cols_grid(10 ** 9, 4, 2) == G.MAX_GROUPS * G.GROUP and G.rows_grid(1) == G.GROUP


def test_bad_inputs_raise_launch_errors():
    A = np.zeros((4, 8), np.float32)
    x = np.zeros(8, np.float32)
    with pytest.raises(iron.LaunchError, match="f32, f16 or bf16"):
        G.gemv(A.astype(np.int32), x)
    with pytest.raises(iron.LaunchError, match="A is f32 but x is f16"):
        G.gemv(A, x.astype(np.float16))
    with pytest.raises(iron.LaunchError, match=r"x: expected shape \(8,\)"):
        G.gemv(A, np.zeros(4, np.float32))
    with pytest.raises(iron.LaunchError, match=r"x: expected shape \(4,\)"):
        G.gemv(A, x, transpose=True)
    with pytest.raises(iron.LaunchError, match="matrix"):
        G.gemv(np.zeros(8, np.float32), x)
    assert G.gemv(np.zeros((0, 8), np.float32), x).shape == (0,)  # no rows: an empty result
    with pytest.raises(iron.LaunchError, match="empty extent"):  # no columns: sums of nothing
        G.gemv(np.zeros((4, 0), np.float32), np.zeros(0, np.float32))
    with pytest.raises(iron.LaunchError, match="gemv: out has shape"):
        G.gemv(A, x, out=np.zeros(5, np.float32))
    with pytest.raises(iron.LaunchError, match="gemv: out has dtype .*; gemv writes f32"):
        G.gemv(A, x, out=np.zeros(4, np.float16))
    with pytest.raises(iron.LaunchError, match="expected an array"):
        G.gemv([[1.0]], x)


# ---------------------------------------------------------------- non-finite policy

@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_non_finite_policy(backend, seed):
    """A NaN (or Inf * 0) poisons exactly the outputs whose dot product it enters; Infs of one sign give
    that Inf; the other outputs stay finite and correct."""
    device(backend)
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((6, 40)).astype(np.float32)
    x = rng.standard_normal(40).astype(np.float32)
    A[1, 7] = np.nan
    A[2, 3] = np.inf
    A[3, 5], x[5] = np.inf, 0.0  # inf * 0: NaN in row 3 only (column 5 of other rows is finite * 0)
    A[4, 9], A[4, 10] = np.inf, -np.inf  # +inf and -inf products: NaN
    x[9], x[10] = 1.0, 1.0
    y = G.gemv(A, x, backend=backend)
    assert np.isnan(y[1]) and np.isnan(y[3]) and np.isnan(y[4])
    assert y[2] == np.inf * np.sign(x[3])
    check(y[[0, 5]], A[[0, 5]], x, False, backend)
    # the columns kernel: the same values, transposed
    yt = G.gemv(np.ascontiguousarray(A.T), x, transpose=True, backend=backend)
    assert np.isnan(yt[1]) and np.isnan(yt[3]) and np.isnan(yt[4]) and yt[2] == y[2]
    check(yt[[0, 5]], np.ascontiguousarray(A[[0, 5]].T), x, True, backend)


def test_column_groups_of_1024_threads_only_for_16_bit_types_on_cuda():
    from iron import bf16, f16, f32

    assert G.column_group_threads(f16, "cuda") == G.column_group_threads(bf16, "cuda") == 1024
    assert G.column_group_threads(f32, "cuda") == G.GROUP
    assert G.column_group_threads(f16, "interp") == G.column_group_threads(f16, "vulkan") == G.GROUP
