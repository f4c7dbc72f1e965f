"""iron.std.norms: the registered rows on interp and lavapipe, mutants, four-target compiles, the host
functions (values, the register/long switch, in-place residual, errors) and the non-finite policy."""

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
from iron.std import norms as N
from iron.std.softmax import register_items
from iron.std.suite import norms as NS

ENTRIES = suite("norms")
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
DTYPE_IDS = ["f32", "f16", "bf16"]


def test_registered_rows_pass_at_subgroup_width_8(seed):
    """More subgroups (32) than lanes: the partials loop and the Welford merges run longer."""
    config.set_option("simd_width", 8)
    for entry in ENTRIES:
        assert_rows_pass(run_entry(entry, "interp", seed), seed)


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/norms.py with each ``(old, new)`` edit made."""
    return edited_module(N, tmp_path, *edits)


LN_RSTD = "rstd = rsqrt(group_sum(acc[0], red, GROUP) / f32(n) + eps)"
MUTANTS = {
    # eps dropped: rows of scale 1e-3 have a variance of eps's size.
    "layernorm_eps_dropped": ("std/norms/layernorm", "layernorm_rows",
                              [(LN_RSTD, "rstd = rsqrt(group_sum(acc[0], red, GROUP) / f32(n))")]),
    # the one-pass variance E[x^2] - E[x]^2: rows shifted by 100 lose it to cancellation.
    "layernorm_one_pass_variance": (
        "std/norms/layernorm", "layernorm_rows",
        [("if i < live else 0.0\n            acc[i] = r[i] * r[i]",
          "if i < live else 0.0\n            acc[i] = (r[i] + mean) * (r[i] + mean) if i < live else 0.0"),
         (LN_RSTD, "rstd = rsqrt(group_sum(acc[0], red, GROUP) / f32(n) - mean * mean + eps)")]),
    # the scalar path leaves each row's last column unwritten.
    "layernorm_tail_unwritten": ("std/norms/layernorm_nobias", "layernorm_rows",
                                 [("                    if c < n:\n                        yv = ",
                                   "                    if c < n - 1:\n                        yv = ")]),
    # Chan's merge without the between-means term d^2 na nb / n.
    "layernorm_long_merge_drops_term": ("std/norms/layernorm_long", "layernorm_rows_long",
                                        [("return nn, ma + d * f, qa + qb + d * d * na * f",
                                          "return nn, ma + d * f, qa + qb")]),
    "rmsnorm_eps_dropped": ("std/norms/rmsnorm", "rmsnorm_rows",
                            [("rsqrt(group_sum(acc[0], red, parity * GROUP) / f32(n) + eps)",
                              "rsqrt(group_sum(acc[0], red, parity * GROUP) / f32(n))")]),
    # the fused add normalises x instead of h = x + residual.
    "add_rmsnorm_normalises_x": ("std/norms/add_rmsnorm", "rmsnorm_rows",
                                 [(" " * 24 + "v = f32(hv)", " " * 24 + "v = f32(x.load(base + c, width=VEC))")]),
    # the long kernel's sum of squares stops one chunk early.
    "rmsnorm_long_sum_misses_last_chunk": (
        "std/norms/rmsnorm_long", "rmsnorm_rows_long",
        [("for c in range(t * VEC, n, GROUP * VEC, unroll=4):\n                if ADD:",
          "for c in range(t * VEC, n - VEC, GROUP * VEC, unroll=4):\n                if ADD:")]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    name, kernel, edits = MUTANTS[mutant]
    assert_mutant_caught(name, getattr(mutant_module(tmp_path, *edits), kernel), seed)


def test_unmutated_copy_passes(tmp_path, seed):
    """A copy with no edit passes: a caught mutant is caught by its edit, not by the copying."""
    module = mutant_module(tmp_path)
    assert_rows_pass(mutant_rows("std/norms/layernorm_long", module.layernorm_rows_long, seed), seed)


# ---------------------------------------------------------------- host functions

def tolerance(kind: str, x: np.ndarray, backend: str):
    n = x.shape[-1]
    dt = D.from_numpy(x.dtype)
    vec = _host.vector_width(dt)
    w = 8 if backend == "vulkan" else config.get("simd_width")
    items = register_items(n, vec)
    aligned = n % vec == 0
    if kind == "layernorm":
        depth = NS.layernorm_long_depth(n, vec, aligned, w) if items is None else NS.layernorm_depth(vec * items, w)
    else:
        depth = NS.rms_long_depth(n, vec, aligned, w) if items is None else NS.rms_depth(vec * items, w)
    return derive_tolerance(dt, depth)


def assert_close(got: np.ndarray, want: Expect, tol) -> None:
    verdict = compare(got, want, tol)
    assert verdict.ok, verdict.message


def inputs(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    residual = rng.standard_normal(shape).astype(dtype)
    w = (rng.standard_normal(n) + 1).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    return x, residual, w, b


def check_all(x, residual, w, b, backend: str = "interp", plain_rms: bool = True) -> None:
    n = x.shape[-1]

    def f(a):
        return a.astype(np.float64)
    for bias in (b, None):
        y = N.layernorm(x, w, bias, backend=backend)
        assert y.shape == x.shape and y.dtype == x.dtype
        want = NS.layernorm_oracle(f(x), f(w), f(b), n, 1e-5, bias is not None)
        assert_close(y, want, tolerance("layernorm", x, backend))
    if plain_rms:
        y = N.rmsnorm(x, w, backend=backend)
        assert_close(y, NS.rms_oracle(f(x), f(w), n, 1e-6), tolerance("rms", x, backend))
    y, h = N.add_rmsnorm(x, residual, w, backend=backend)
    exact = f(x) + f(residual)
    assert_close(h, Expect(exact, np.abs(f(x)) + np.abs(f(residual))), tolerance("rms", x, backend))
    assert_close(y, NS.rms_oracle(f(h), f(w), n, 1e-6), tolerance("rms", x, backend))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(5,), (2, 3, 50), (3, 1023), (2, 16385), (1, 20000)])
def test_host_functions_match_the_oracle(shape, dtype, seed):
    """Odd shapes (1-D, 3-D, n not a multiple of VEC) and rows past what a group holds (the long kernels)."""
    check_all(*inputs(shape, dtype, seed))


def test_largest_register_row(seed):
    """16384 columns: the register kernels at 64 registers per thread, the most a group holds (rmsnorm's
    plain variant left out: its fused twin runs the same code after the add; each costs seconds here)."""
    assert register_items(16384, 4) == 16 and register_items(16385, 4) is None
    check_all(*inputs((2, 16384), np.float32, seed), plain_rms=False)


def test_add_rmsnorm_updates_the_residual_in_place(seed):
    x, residual, w, _ = inputs((4, 1000), np.float16, seed)
    expect_h = (x.astype(np.float32) + residual.astype(np.float32)).astype(np.float16)
    stream = residual.copy()
    y, h = N.add_rmsnorm(x, stream, w, residual_out=stream, backend="interp")
    assert h is stream and np.array_equal(stream, expect_h)
    y2 = N.rmsnorm(expect_h, w, backend="interp")
    assert np.array_equal(y, y2)  # the same kernel arithmetic on the same h


def test_bad_inputs_raise_launch_errors():
    x = np.zeros((2, 8), np.float32)
    w = np.ones(8, np.float32)
    with pytest.raises(iron.LaunchError, match="weight: expected shape"):
        N.layernorm(x, np.ones(9, np.float32))
    with pytest.raises(iron.LaunchError, match="weight has dtype f16"):
        N.rmsnorm(x, np.ones(8, np.float16))
    with pytest.raises(iron.LaunchError, match="bias: expected shape"):
        N.layernorm(x, w, np.ones(7, np.float32))
    with pytest.raises(iron.LaunchError, match="residual: expected shape"):
        N.add_rmsnorm(x, np.zeros((2, 9), np.float32), w)
    with pytest.raises(iron.LaunchError, match="residual has dtype"):
        N.add_rmsnorm(x, np.zeros((2, 8), np.float16), w)
    with pytest.raises(iron.LaunchError, match="f32, f16 or bf16"):
        N.rmsnorm(np.zeros((2, 8), np.int32), w)
    with pytest.raises(iron.LaunchError, match="out has shape"):
        N.layernorm(x, w, out=np.zeros((2, 7), np.float32))
    assert N.rmsnorm(np.zeros((0, 8), np.float32), w).shape == (0, 8)


# ---------------------------------------------------------------- non-finite policy

@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("n", [1000, 16400])  # the register kernels, the long ones
def test_non_finite_policy(n, backend, seed):
    if backend == "vulkan":
        device("vulkan")
    x, _, w, b = inputs((4, n), np.float32, seed)
    x[0, 5] = np.nan
    x[1, 9] = np.inf
    x[2, 3] = -np.inf
    ln = N.layernorm(x, w, b, backend=backend)
    rms = N.rmsnorm(x, w, backend=backend)
    assert np.isnan(ln[:3]).all() and np.isfinite(ln[3]).all()   # NaN or +-inf: the row is NaN
    assert np.isnan(rms[0]).all() and np.isfinite(rms[3]).all()
    for row, col in ((1, 9), (2, 3)):                             # rmsnorm: inf squares to inf
        assert np.isnan(rms[row, col])
        others = np.delete(rms[row], col)
        assert (others == 0).all()
