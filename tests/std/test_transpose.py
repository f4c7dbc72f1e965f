"""iron.std.transpose: the registered rows on interp and lavapipe, mutants, four-target compiles, the host
function (values, out=, errors) and bit-exact copies of NaN, Inf and -0.0."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught, assert_rows_pass, mutant_rows

import iron
from iron.std import transpose as TR

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
DTYPE_IDS = ["f32", "f16", "bf16"]


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/transpose.py with each ``(old, new)`` edit made."""
    return edited_module(TR, tmp_path, *edits)


MUTANTS = {
    # the tile is read back as written: a copy of each tile, not its transpose.
    "tile_not_transposed": [("T(tile[tx, ty + k * (TILE // ROWS_PER_THREAD)])",
                             "T(tile[ty + k * (TILE // ROWS_PER_THREAD), tx])")],
    # each thread writes one row of the tile too few: a quarter of the output stays poisoned.
    "rows_per_thread_short": [("                for k in static_range(ROWS_PER_THREAD):\n"
                               "                    c = c0 + ty",
                               "                for k in static_range(ROWS_PER_THREAD - 1):\n"
                               "                    c = c0 + ty")],
    # the column tail is not masked on the way in: a row's end reads into the next row (or past x).
    "column_tail_unmasked": [("                    if r < rows and c < cols:", "                    if r < rows:")],
    # the output's row stride is x's (cols), not out's (rows): right only for square inputs.
    "output_stride_swapped": [("out[at + c * rows + r] = T(", "out[at + c * cols + r] = T(")],
    # the batch's matrices taken rows * rows apart: right only for square matrices (or a batch of one).
    "batch_stride_wrong": [("at = b * rows * cols", "at = b * rows * rows")],
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    module = mutant_module(tmp_path, *MUTANTS[mutant])
    assert_mutant_caught("std/transpose/tiles", module.transpose_tiles, seed)


def test_unmutated_copy_passes(tmp_path, seed):
    module = mutant_module(tmp_path)
    assert_rows_pass(mutant_rows("std/transpose/tiles", module.transpose_tiles, seed), seed)


# ---------------------------------------------------------------- host function

@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 1), (2, 95), (95, 2), (31, 33), (129, 40), (3, 9, 40), (2, 1, 33)])
def test_transpose_is_exact(shape, dtype, backend, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    y = TR.transpose(x, backend=backend)
    want = np.swapaxes(x, -1, -2)
    assert y.shape == want.shape and y.dtype == x.dtype and y.flags.c_contiguous
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_non_finite_values_are_copied_bit_for_bit(dtype, backend):
    """NaN (with a payload in f32), +-Inf and -0.0 pass through the f32 tile unchanged."""
    x = np.array([[np.nan, np.inf, -np.inf], [-0.0, 0.0, 1.5]], dtype=dtype)
    if dtype == np.float32:
        x.view(np.uint32)[0, 0] = 0x7FC00123     # a quiet NaN with a payload
    y = TR.transpose(x, backend=backend)
    bits = np.uint32 if dtype == np.float32 else np.uint16
    np.testing.assert_array_equal(y.view(bits), np.ascontiguousarray(x.T).view(bits))


def test_out_is_written_and_returned(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((40, 70)).astype(np.float16)
    out = np.full((70, 40), np.nan, np.float16)
    assert TR.transpose(x, out=out, backend="interp") is out
    np.testing.assert_array_equal(out, x.T)


def test_empty_extent_gives_an_empty_transpose():
    assert TR.transpose(np.zeros((0, 5), np.float32), backend="interp").shape == (5, 0)


@pytest.mark.parametrize("call, message", [
    (lambda: TR.transpose(np.ones(4, np.float32)), "2-D"),
    (lambda: TR.transpose(np.ones((2, 2, 2, 2), np.float32)), "2-D"),
    (lambda: TR.transpose(np.ones((2, 3), np.int32)), "f32, f16 or bf16"),
    (lambda: TR.transpose([[1.0]]), "expected an array"),
    (lambda: TR.transpose(np.ones((2, 3), np.float32), out=np.ones((2, 3), np.float32)),
     r"transpose: out has shape \(2, 3\)"),
    (lambda: TR.transpose(np.ones((2, 3), np.float32), out=np.ones((3, 2), np.float16)), "dtype f16"),
    (lambda: TR.transpose(np.ones((4, 4), np.float32)[:, ::2], backend="interp"), "C-contiguous"),
])
def test_bad_input_is_a_launch_error(call, message):
    with pytest.raises(iron.LaunchError, match=message):
        call()
