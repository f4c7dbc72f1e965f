"""iron.std.rope: the registered rows on interp and lavapipe, mutants, four-target compiles, the host
function (both layouts, tables and positions, in place, unaligned, errors) and the non-finite policy."""

import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught, assert_rows_pass, device, mutant_rows

import iron
from iron.core import dtypes as D
from iron.harness.tolerance import Expect, compare, derive_tolerance
from iron.std import rope as R
from iron.std.suite import rope as RS

FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]
FLOAT_IDS = ["f32", "f16", "bf16"]


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/rope.py with each ``(old, new)`` edit made."""
    return edited_module(R, tmp_path, *edits, unique=False)


MUTANTS = {
    # the second half rotated the wrong way (vector path of "half").
    "half_second_sign": ("std/rope/cached", "rope_cached",
                         [("cast(x2 * c + x1 * s, out.dtype)", "cast(x2 * c - x1 * s, out.dtype)")]),
    # the interleaved pairs swapped the wrong way (a rotation by minus the angle).
    "interleaved_swap_sign": ("std/rope/cached", "rope_cached",
                              [("swapped = vec(-v[1], v[0], -v[3], v[2])", "swapped = vec(v[1], -v[0], v[3], -v[2])"),
                               ("swapped = vec(-v[1], v[0], -v[3], v[2], -v[5], v[4], -v[7], v[6])",
                                "swapped = vec(v[1], -v[0], v[3], -v[2], v[5], -v[4], v[7], -v[6])")]),
    # the scalar path leaves the last pair of each row unwritten.
    "scalar_tail_skipped": ("std/rope/cached", "rope_cached",
                            [("            for j in range(P):\n                if p0 + j < half:",
                              "            for j in range(P):\n                if p0 + j < half - 1:")]),
    # a work unit stops one head short.
    "head_block_short": ("std/rope/cached", "rope_cached",
                         [("h1 = min(heads, h0 + hb)", "h1 = min(heads, h0 + hb - 1)")]),
    # the frequency exponent loses its factor 2: theta ** (-i / d).
    "positions_exponent": ("std/rope/positions", "rope_positions",
                           [("exp2(-((f32(2 * p) / f32(d)) * log2_theta))",
                             "exp2(-((f32(p) / f32(d)) * log2_theta))")]),
    # the position read off by one.
    "positions_off_by_one": ("std/rope/positions", "rope_positions",
                             [("position = f32(pos[token])", "position = f32(pos[token] + 1)")]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    name, kernel, edits = MUTANTS[mutant]
    module = mutant_module(tmp_path, *edits)
    assert_mutant_caught(name, getattr(module, kernel), seed)


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: an unedited copy passes, so a caught mutant is caught by its edit."""
    module = mutant_module(tmp_path)
    assert_rows_pass(mutant_rows("std/rope/cached", module.rope_cached, seed), seed)


# ---------------------------------------------------------------- the host function

def check(got: np.ndarray, x: np.ndarray, pos: np.ndarray, layout: str, table: tuple | None,
          theta: float = RS.THETA) -> None:
    """``got`` against the float64 rotation: by the f32 ``table`` it was given, else by the exact angle
    with the kernel's angle allowance (iron.std.suite.rope)."""
    dt = D.from_numpy(x.dtype)
    x64 = x.astype(np.float64)
    rtol = derive_tolerance(dt, RS.DEPTH).rtol
    if table is not None:
        value, scale = RS.rotate64(x64, table[0], table[1], layout)
    else:
        d = x.shape[-1]
        angle = pos.astype(np.float64)[:, None] * theta ** (-np.arange(0, d, 2) / d)[None, :]
        value, scale = RS.rotate64(x64, np.cos(angle), np.sin(angle), layout)
        a, b = RS._pairs(np.abs(x64), layout)
        err = RS.angle_error(pos, d, theta)[:, None, :] * (a + b)
        scale = scale + RS._join(err, err, layout) / rtol
    verdict = compare(got, Expect(value, scale), derive_tolerance(dt, RS.DEPTH))
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_host_rope_matches_the_oracle(backend, dtype, seed):
    """Shapes the registry never saw: 10 heads (units of 4, 4, 2), head_dim 80 and 96, one token;
    theta 500000 (Llama 3) for the positions."""
    device(backend)
    rng = np.random.default_rng(seed)
    for tokens, heads, d in ((6, 10, 80), (1, 3, 96), (5, 2, 10)):
        x = rng.standard_normal((tokens, heads, d)).astype(dtype)
        pos = rng.integers(0, RS.MAX_POS + 1, tokens).astype(np.int32)
        table = R.rope_cache(pos, d)
        for layout in R.LAYOUTS:
            got = R.rope(x, table, layout, backend=backend)
            assert got.shape == x.shape and got.dtype == x.dtype
            check(got, x, pos, layout, table)
            check(R.rope(x, pos, layout, theta=500000.0, backend=backend), x, pos, layout, None, 500000.0)


def test_rope_cache_is_the_float64_table():
    pos = np.array([0, 1, 4095, 8191], np.int32)
    cos_t, sin_t = R.rope_cache(pos, 8, theta=10000.0)
    assert cos_t.dtype == np.float32 and cos_t.shape == (4, 4)
    angle = 8191.0 * 10000.0 ** (-2 * 3 / 8)
    assert cos_t[3, 3] == np.float32(math.cos(angle)) and sin_t[3, 3] == np.float32(math.sin(angle))
    assert (cos_t[0] == 1).all() and (sin_t[0] == 0).all()


def test_in_place_and_unaligned(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 4, 64)).astype(np.float16)
    pos = np.array([5, 600, 8191], np.int32)
    table = R.rope_cache(pos, 64)
    want = R.rope(x, table, "interleaved", backend="interp")
    y = x.copy()
    assert R.rope(y, table, "interleaved", out=y, backend="interp") is y
    np.testing.assert_array_equal(y, want)
    buf = np.empty(x.size + 1, np.float16)
    shifted = buf[1:].reshape(x.shape)  # 2 bytes past a 16-byte boundary: the scalar path
    shifted[...] = x
    assert not R.aligned(shifted)
    check(R.rope(shifted, table, "half", backend="interp"), x, pos, "half", table)


def test_bad_inputs_raise_launch_errors():
    x = np.zeros((2, 3, 8), np.float32)
    pos = np.zeros(2, np.int32)
    table = R.rope_cache(pos, 8)
    with pytest.raises(iron.LaunchError, match="layout"):
        R.rope(x, pos, "neox")
    with pytest.raises(iron.LaunchError, match=r"\(tokens, heads, head_dim\)"):
        R.rope(np.zeros((2, 8), np.float32), pos)
    with pytest.raises(iron.LaunchError, match="even"):
        R.rope(np.zeros((2, 3, 7), np.float32), pos)
    with pytest.raises(iron.LaunchError, match="f32, f16 or bf16"):
        R.rope(x.astype(np.int32), pos)
    with pytest.raises(iron.LaunchError, match="positions must be i32"):
        R.rope(x, pos.astype(np.int64))
    with pytest.raises(iron.LaunchError, match=r"positions: expected shape \(2,\)"):
        R.rope(x, np.zeros(3, np.int32))
    with pytest.raises(iron.LaunchError, match=r"cos: expected shape \(2, 4\)"):
        R.rope(x, (table[0][:, :3].copy(), table[1]))
    with pytest.raises(iron.LaunchError, match="sin table must be f32"):
        R.rope(x, (table[0], table[1].astype(np.float16)))
    with pytest.raises(iron.LaunchError, match=r"\(cos, sin\) pair"):
        R.rope(x, (table[0],))
    with pytest.raises(iron.LaunchError, match="theta"):
        R.rope(x, pos, theta=-1.0)
    with pytest.raises(iron.LaunchError, match="rope: out has dtype f16; rope writes f32"):
        R.rope(x, pos, out=np.zeros(x.shape, np.float16))
    with pytest.raises(iron.LaunchError, match="head_dim"):
        R.rope_cache(pos, 7)
    assert R.rope(np.zeros((0, 3, 8), np.float32), np.zeros(0, np.int32)).shape == (0, 3, 8)


# ---------------------------------------------------------------- non-finite policy

@pytest.mark.parametrize("layout", R.LAYOUTS)
@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_non_finite_policy(backend, layout, seed):
    """A NaN or Inf in one element makes both outputs of its pair non-finite; every other pair is exact."""
    device(backend)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 2, 16)).astype(np.float32)
    pos = np.array([3, 70, 8191], np.int32)
    x[0, 1, 2] = np.nan
    x[2, 0, 5] = np.inf
    table = R.rope_cache(pos, 16)
    for arg, tab in ((table, table), (pos, None)):
        got = R.rope(x, arg, layout, backend=backend)
        bad = np.zeros(x.shape, bool)
        for t, h, e in ((0, 1, 2), (2, 0, 5)):
            i = e % 8 if layout == "half" else e // 2
            pair = (i, i + 8) if layout == "half" else (2 * i, 2 * i + 1)
            assert not np.isfinite(got[t, h, list(pair)]).any()
            bad[t, h, list(pair)] = True
        assert np.isfinite(got[~bad]).all()
        # the other pairs: as if the bad pairs were zeros (whose rotation is zero)
        check(np.where(bad, 0, got).astype(np.float32), np.where(bad, 0, x).astype(np.float32), pos, layout, tab)
