"""iron.std.softmax: the registered rows on interp and lavapipe, mutants, four-target compiles, the host
functions (values, the register/online switch, errors) and the non-finite policy."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught, assert_rows_pass, run_entry, suite

import iron
from iron import config
from iron.core import dtypes as D
from iron.std import _host
from iron.harness.tolerance import compare, derive_tolerance
from iron.std import softmax as S
from iron.std.suite import softmax as SS

ENTRIES = suite("softmax")


@pytest.mark.parametrize("width", [8, 64])
def test_registered_rows_pass_at_other_subgroup_widths(width, seed):
    """8: more subgroups than lanes (the partials loop runs twice); 64: four subgroups."""
    config.set_option("simd_width", width)
    for entry in ENTRIES:
        assert_rows_pass(run_entry(entry, "interp", seed), seed)


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/softmax.py with each ``(old, new)`` edit made."""
    return edited_module(S, tmp_path, *edits)


MUTANTS = {
    # exp(x) instead of exp(x - max): overflows (rows shifted by +100) or underflows (-50).
    "max_not_subtracted": ("std/softmax/softmax", "softmax_rows",
                           [("r[i] = exp(r[i] - m)", "r[i] = exp(r[i])")]),
    # the group sum forgets the last subgroup's partial.
    "sum_drops_last_subgroup": ("std/softmax/softmax", "softmax_rows",
                                [("    p = 0.0\n    for i in range(lane_id(), num_simd_groups(), simd_size()):",
                                  "    p = 0.0\n    for i in range(lane_id(), num_simd_groups() - 1, simd_size()):")]),
    # the scalar (unaligned) path never writes a row's last element.
    "scalar_tail_unwritten": ("std/softmax/log_softmax", "softmax_rows",
                              [("if c < n:\n                        out[base + c] = T(r[j * VEC + k])",
                                "if c < n - 1:\n                        out[base + c] = T(r[j * VEC + k])")]),
    # the vector loads stride by 256 threads whatever the group size: short-row groups read wrong columns.
    "load_stride_ignores_group": ("std/softmax/softmax_short_rows", "softmax_rows",
                                  [tuple(f"c = (j * {g} + t) * VEC\n                if c < n:\n                    v = f32"
                                    for g in ("G", "GROUP"))]),
    # the online sum is never rescaled when the running max grows.
    "online_no_rescale": ("std/softmax/softmax_online", "softmax_rows_online",
                          [("                s = s * exp(m - ref) + part", "                s = s + part")]),
    # the online rescale inverted: exp(m_new - m_old).
    "online_rescale_inverted": ("std/softmax/softmax_online", "softmax_rows_online",
                                [("                s = s * exp(m - ref) + exp(xv - ref)",
                                  "                s = s * exp(ref - m) + exp(xv - ref)")]),
    # log_softmax subtracts log(sum) of the wrong quantity: the sum of the shifted values, not of exps.
    "log_sum_of_values": ("std/softmax/log_softmax", "softmax_rows", [("                acc[i] = exp(r[i])",
                                                                      "                acc[i] = r[i]")]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    name, kernel, edits = MUTANTS[mutant]
    module = mutant_module(tmp_path, *edits)
    assert_mutant_caught(name, getattr(module, kernel), seed)


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: a copy with no edit passes, so a caught mutant is caught by its edit."""
    module = mutant_module(tmp_path)
    from std_testing import mutant_rows

    assert_rows_pass(mutant_rows("std/softmax/softmax_online", module.softmax_rows_online, seed), seed)


# ---------------------------------------------------------------- host functions

def check(got: np.ndarray, x: np.ndarray, log_space: bool, backend: str = "interp",
          kernel_n: int | None = None) -> None:
    """``got`` against the float64 oracle of ``x``, within the tolerance of the kernel that ran (rows of
    ``kernel_n``, default x's)."""
    n = x.shape[-1]
    kernel_n = kernel_n or n
    x64 = x.astype(np.float64)
    want = SS.softmax_oracle(x64, n, log_space)
    dt = D.from_numpy(x.dtype)
    vec = _host.vector_width(dt)
    w = 8 if backend == "vulkan" else config.get("simd_width")
    chosen = S.register_plan(kernel_n, vec, w)
    if chosen is None:
        depth = SS.online_depth(kernel_n, vec, kernel_n % vec == 0, w, SS.spread(x64, n), log_space)
    else:
        group, items = chosen
        depth = SS.register_depth(vec * items, w, SS.spread(x64, n), log_space, group)
    verdict = compare(got, want, derive_tolerance(dt, depth))
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("shape", [(5,), (2, 3, 50), (3, 1023), (2, 16385), (1, 20000)])
def test_host_functions_match_the_oracle(shape, dtype, seed):
    """Odd shapes (1-D, 3-D, n not a multiple of VEC) and rows past what a group holds (online)."""
    check_both(shape, dtype, seed)


def check_both(shape, dtype, seed) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    for log_space, fn in ((False, S.softmax), (True, S.log_softmax)):
        got = fn(x, backend="interp")
        assert got.shape == x.shape and got.dtype == x.dtype
        check(got, x, log_space)


def test_largest_register_row(seed):
    """16384 columns: the register kernel at 64 registers per thread, the most a group holds (one more
    column takes the online kernel, above)."""
    assert S.register_items(16384, 4) == 16 and S.register_items(16384, 8) == 8
    assert S.register_items(16385, 4) is None and S.register_items(16385, 8) is None
    assert S.register_items(1, 4) == 1 and S.register_items(1025, 4) == 2 and S.register_items(2049, 8) == 2
    check_both((2, 16384), np.float32, seed)


def test_short_rows_take_one_subgroup_sized_group(seed):
    """Rows a 32-thread group holds in at most SHORT_ITEMS vectors per thread run in 32-thread groups;
    longer rows in 256-thread ones; past 64 registers per thread, the online kernel."""
    assert S.register_plan(1024, 8) == (S.SHORT_GROUP, 4) and S.register_plan(512, 4) == (S.SHORT_GROUP, 4)
    assert S.register_plan(1025, 8) == (S.GROUP, 1) and S.register_plan(513, 4) == (S.GROUP, 1)
    assert S.register_plan(16384, 8) == (S.GROUP, 8) and S.register_plan(16385, 8) is None
    assert S.register_plan(1024, 8, lane_width=64) == (S.GROUP, 1), "a group is never part of a subgroup"
    check_both((3, 1024), ml_dtypes.bfloat16, seed)
    check_both((3, 1025), ml_dtypes.bfloat16, seed)


def test_out_and_unaligned_views(seed):
    rng = np.random.default_rng(seed)
    buf = rng.standard_normal(4 * 1024 + 1).astype(np.float32)
    x = buf[1:].reshape(4, 1024)  # 4 bytes past a 16-byte boundary: vectors are off
    assert not S.vector_ok(1024, 4, x) and S.vector_ok(1024, 4, x.copy())
    out = np.full_like(x, np.nan)
    assert S.softmax(x, out=out, backend="interp") is out
    check(out, x, False)


def test_bad_inputs_raise_launch_errors():
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(iron.LaunchError, match="f32, f16 or bf16"):
        S.softmax(np.zeros((2, 8), np.int32))
    with pytest.raises(iron.LaunchError, match="out has dtype f16"):
        S.softmax(x, out=np.zeros((2, 8), np.float16))
    with pytest.raises(iron.LaunchError, match="out has shape"):
        S.log_softmax(x, out=np.zeros((2, 9), np.float32))
    with pytest.raises(iron.LaunchError, match="at least one axis"):
        S.softmax(np.float32(1.0) * np.ones((), np.float32))
    with pytest.raises(iron.LaunchError, match="expected an array"):
        S.softmax([1.0, 2.0])
    assert S.softmax(np.zeros((0, 5), np.float32)).shape == (0, 5)


# ---------------------------------------------------------------- non-finite policy

@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("n", [1000, 16400])  # the register kernel, the online kernel
def test_non_finite_policy(n, backend, seed):
    if backend == "vulkan":
        from std_testing import device

        device("vulkan")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((6, n)).astype(np.float32)
    x[0, n // 2] = np.nan               # a NaN: the row is NaN
    x[1, 3] = np.inf                    # +inf: inf - inf, the row is NaN
    x[2, :] = -np.inf                   # only -inf: NaN (as torch)
    x[3, : n // 2] = -np.inf            # leading -inf: zeros there, the rest a softmax of the tail
    x[4, 7] = -np.inf                   # one -inf: 0 (log: -inf) there
    p = S.softmax(x, backend=backend)
    lp = S.log_softmax(x, backend=backend)
    for out in (p, lp):
        assert np.isnan(out[:3]).all()
        assert not np.isnan(out[3:]).any()
    assert (p[3, : n // 2] == 0).all() and np.isneginf(lp[3, : n // 2]).all()
    assert p[4, 7] == 0 and np.isneginf(lp[4, 7])
    check(p[5:], x[5:], False, backend)
    check(lp[5:], x[5:], True, backend)
    # the -inf elements contribute exactly 0: the rest is the softmax of the finite tail
    check(np.ascontiguousarray(p[3:4, n // 2:]), np.ascontiguousarray(x[3:4, n // 2:]), False, backend, kernel_n=n)
