"""iron.std.elementwise: the registered rows on interp and lavapipe, mutants, four-target compiles, the
host functions (values on odd shapes, broadcasting, scalars, out=, the 2-D grid, errors) and the
non-finite policy."""

import math
from pathlib import Path

import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught, assert_rows_pass, mutant_rows

import iron
from iron.core.dtypes import numpy_dtype
from iron.core import dtypes as D
from iron.harness.tolerance import Depth, compare, derive_tolerance
from iron.std import elementwise as ew
from iron.std.suite import elementwise as SE



# ---------------------------------------------------------------- mutants: one edit of elementwise.py each

def mutant_module(tmp_path: Path, old: str, new: str):
    """A copy of iron/std/elementwise.py with ``old`` (which must occur exactly once) replaced by ``new``."""
    return edited_module(ew, tmp_path, (old, new))


MUTANTS = {
    # the scalar tail never writes the last element
    "unary_tail_short": ("std/elementwise/exp", "unary_kernel",
                         "                out[i + k] = T(_unary_math(f32(x[i + k]), OP, p0, p1))",
                         "                if i + k < n - 1:\n"
                         "                    out[i + k] = T(_unary_math(f32(x[i + k]), OP, p0, p1))"),
    # round half away from zero instead of to even
    "round_half_away": ("std/elementwise/round", "unary_kernel", "r = il.round(x)  # half to even",
                        "r = il.floor(x + 0.5)"),
    # relu through max(), which drops NaN
    "relu_drops_nan": ("std/elementwise/relu", "unary_kernel", "r = select(x < 0.0, 0.0, x)",
                       "r = il.max(x, 0.0)"),
    # log(1 + x): the cancellation log1p exists to avoid
    "log1p_cancels": ("std/elementwise/log1p", "unary_kernel", "r = il.log1p(x)", "r = il.log(1.0 + x)"),
    # the erf gelu computed with the tanh approximation: the tolerance tells the two apart
    "gelu_is_tanh_form": ("std/elementwise/gelu", "unary_kernel",
                          "r = select(x == -math.inf, -0.0, 0.5 * x * (1.0 + il.erf(x * _SQRT1_2)))",
                          "r = select(x == -math.inf, -0.0, 0.5 * x * (1.0 + il.tanh(0.7978845608 * "
                          "(x + 0.044715 * x * x * x))))"),
    # maximum ignoring NaN (fmax)
    "maximum_drops_nan": ("std/elementwise/maximum", "binary_kernel",
                          "r = select(isnan(x), x, select(isnan(y), y, il.max(x, y)))", "r = il.max(x, y)"),
    # remainder as C's fmod (the sign of x)
    "remainder_is_fmod": ("std/elementwise/remainder", "binary_kernel", "m + y, m)", "m, m)"),
    # the aligned broadcast reads the row from its start
    "bcast_row_offset": ("std/elementwise/mul", "binary_kernel", "y = f32(b.load(i % m, width=VEC))",
                         "y = f32(b.load(0, width=VEC))"),
    # the binary tail reads b one element late
    "binary_tail_late": ("std/elementwise/add", "binary_kernel", "z = f32(b[(i + k) % m])",
                         "z = f32(b[(i + k + 1) % m])"),
    # a multiply, then an add: two roundings where fma has one (caught on f32)
    "fma_two_roundings": ("std/elementwise/fma", "fma_kernel",
                          "il.fma(f32(a.load(i, width=VEC)), f32(b.load(i, width=VEC)), f32(c.load(i, width=VEC)))",
                          "f32(a.load(i, width=VEC)) * f32(b.load(i, width=VEC)) + f32(c.load(i, width=VEC))"),
    # cond taken as a bool of 0/1 only
    "where_cond_is_one": ("std/elementwise/where", "where_kernel", "cond.load(i, width=VEC) != 0",
                          "cond.load(i, width=VEC) == 1"),
}


#: The rows a mutant runs (default 7 and 4099: the tail, the vector path, the planted specials).
MUTANT_SHAPES = {"bcast_row_offset": [(5, 64), (9, 200)], "binary_tail_late": [7, (3, 7)]}


@pytest.mark.parametrize("mutant", MUTANTS, ids=str)
def test_mutant_fails_its_oracle(mutant, tmp_path, seed):
    name, kernel, old, new = MUTANTS[mutant]
    module = mutant_module(tmp_path, old, new)
    assert_mutant_caught(name, getattr(module, kernel), seed, shapes=MUTANT_SHAPES.get(mutant, [7, 4099]))


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutation machinery itself changes nothing: a copy with a no-op edit passes its rows."""
    module = mutant_module(tmp_path, "SOFTPLUS_THRESHOLD = 20.0", "SOFTPLUS_THRESHOLD = 20.0 ")
    rows = mutant_rows("std/elementwise/softplus", module.unary_kernel, seed, shapes=[7, 4099])
    assert_rows_pass(rows, seed)


# ---------------------------------------------------------------- host functions

def _check(got: np.ndarray, want: np.ndarray, dtype: D.DType, depth: Depth) -> None:
    verdict = compare(np.asarray(got).reshape(-1), want.reshape(-1), derive_tolerance(dtype, depth))
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("dtype", [D.f32, D.f16, D.bf16], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["exp", "gelu_tanh", "log1p", "sigmoid", "floor", "sin"])
def test_unary_host_function_odd_shape(op, dtype):
    rng = np.random.default_rng(5)
    spec = SE.UNARY[op]
    x = spec.draw(rng, 3 * 5 * 19).reshape(3, 5, 19).astype(numpy_dtype(dtype))
    y = ew.unary(op, x, backend="interp")
    assert y.shape == x.shape and y.dtype == x.dtype
    want = spec.oracle(x.astype(np.float64))
    if op == "gelu_tanh":
        want_scale = SE._mixed(want, SE._gelu_tanh_amplified(x.astype(np.float64), want), dtype)
        verdict = compare(y.reshape(-1), iron.Expect(want.reshape(-1), want_scale.reshape(-1)),
                          derive_tolerance(dtype, Depth(1, spec.f32_steps)))
        assert verdict.ok, verdict.message
    else:
        _check(y, want, dtype, Depth(1, spec.f32_steps or 0))
    assert np.array_equal(getattr(ew, op)(x, backend="interp"), y, equal_nan=True)  # the named function


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_binary_broadcast_scalar_and_out(backend):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 6, 10)).astype(np.float32)
    for b in (rng.standard_normal((6, 10)), rng.standard_normal(10), rng.standard_normal((1, 10)),
              rng.standard_normal((4, 6, 10)), rng.standard_normal((1, 1, 1))):
        b = b.astype(np.float32)
        _check(ew.binary("sub", a, b, backend=backend), a.astype(np.float64) - b, D.f32, Depth(1, 1))
    for s in (2, 2.5, np.float32(-0.75), np.array(3.0)):
        _check(ew.mul(a, s, backend=backend), a.astype(np.float64) * float(s), D.f32, Depth(1, 1))
    out = np.empty_like(a)
    assert ew.binary("remainder", a, 0.5, out=out, backend=backend) is out
    assert np.allclose(out, np.remainder(a, np.float32(0.5)), rtol=1e-6, atol=0)
    ew.binary("maximum", a, 0.0, out=a, backend=backend)  # in place
    assert (a >= 0).all()


def test_where_fma_clamp_host_functions():
    rng = np.random.default_rng(7)
    a, b, c = (rng.standard_normal(1001).astype(np.float16) for _ in range(3))
    cond = rng.random(1001) < 0.3
    assert np.array_equal(ew.where(cond, a, b, backend="interp"), np.where(cond, a, b))
    assert np.array_equal(ew.where(cond.astype(np.uint8) * 7, a, b, backend="interp"), np.where(cond, a, b))
    _check(ew.fma(a, b, c, backend="interp"), a.astype(np.float64) * b + c, D.f16, Depth(1, 1))
    assert np.array_equal(ew.clamp(a, -0.5, 0.25, backend="interp"), np.clip(a, -0.5, 0.25))
    assert np.array_equal(ew.clamp(a, lo=0.0, backend="interp"), np.maximum(a, np.float16(0)))
    assert np.array_equal(ew.clamp(a, hi=0.0, backend="interp"), np.minimum(a, np.float16(0)))


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_launches_past_one_grid_row(backend, monkeypatch):
    """A grid of several rows (Vulkan caps a row at 65535 groups; 2 here): every element once."""
    monkeypatch.setattr(ew, "MAX_GROUPS_X", 2)
    n = 2 * 2 * ew.GROUP * 8 + 13  # f16: three rows of 512 threads, the last partial, and a tail
    rng = np.random.default_rng(8)
    x = rng.standard_normal(n).astype(np.float16)
    assert ew.flat_grid(-(-n // 8))[1] == 3
    _check(ew.exp(x, backend=backend), np.exp(x.astype(np.float64)), D.f16, Depth(1, 1))
    row = rng.standard_normal(13).astype(np.float16)
    _check(ew.add(x, row[:1], backend=backend), x.astype(np.float64) + row[0], D.f16, Depth(1, 1))
    cond = rng.random(n) < 0.5
    assert np.array_equal(ew.where(cond, x, -x, backend=backend), np.where(cond, x, -x))


def test_empty_input_launches_nothing():
    x = np.empty((0, 4), np.float32)
    assert ew.exp(x, backend="interp").shape == (0, 4)
    assert ew.add(x, x, backend="interp").shape == (0, 4)


@pytest.mark.parametrize("call, message", [
    (lambda: ew.unary("cube", np.ones(4, np.float32)), "unknown op 'cube'"),
    (lambda: ew.unary("clamp", np.ones(4, np.float32)), "clamp takes bounds"),
    (lambda: ew.binary("hypot", np.ones(4, np.float32), 1.0), "unknown op 'hypot'"),
    (lambda: ew.exp(np.ones(4, np.int32)), "f32, f16 or bf16"),
    (lambda: ew.exp([1.0, 2.0]), "expected an array"),
    (lambda: ew.exp(np.ones(4, np.float32), out=np.empty(4, np.float16)), "exp: out has dtype f16; exp writes f32"),
    (lambda: ew.exp(np.ones(4, np.float32), out=np.empty(5, np.float32)), "exp: out has shape"),
    (lambda: ew.add(np.ones(4, np.float16), np.ones(4, np.float32)), "cast one operand"),
    (lambda: ew.add(np.ones((4, 6), np.float32), np.ones(4, np.float32)), "does not broadcast"),
    (lambda: ew.add(np.ones((4, 6), np.float32), np.ones((2, 4, 6), np.float32)), "does not broadcast"),
    (lambda: ew.where(np.ones(4, np.float32), np.ones(4, np.float32), np.ones(4, np.float32)), "bool or u8"),
    (lambda: ew.where(np.ones(3, bool), np.ones(4, np.float32), np.ones(4, np.float32)), "cond"),
    (lambda: ew.fma(np.ones(4, np.float32), np.ones(4, np.float32), np.ones(3, np.float32)), "c: expected shape"),
    (lambda: ew.clamp(np.ones(4, np.float32)), "give lo, hi or both"),
])
def test_bad_input_is_a_launch_error(call, message):
    with pytest.raises(iron.LaunchError, match=message):
        call()


# ---------------------------------------------------------------- the non-finite policy

NONFINITE = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0])
#: What each op gives for NaN, +inf, -inf, +0, -0 and 1 (the contract, written out).
UNARY_POLICY = {
    "relu": [np.nan, np.inf, 0.0, 0.0, 0.0, 1.0],
    "sigmoid": [np.nan, 1.0, 0.0, 0.5, 0.5, 1 / (1 + math.exp(-1))],
    "silu": [np.nan, np.inf, 0.0, 0.0, 0.0, 1 / (1 + math.exp(-1))],
    "gelu": [np.nan, np.inf, 0.0, 0.0, 0.0, 0.5 * (1 + math.erf(1 / math.sqrt(2)))],
    "gelu_tanh": [np.nan, np.inf, 0.0, 0.0, 0.0, 1 / (1 + math.exp(-2 * math.sqrt(2 / math.pi) * 1.044715))],
    "softplus": [np.nan, np.inf, 0.0, math.log(2), math.log(2), math.log1p(math.e)],
    "tanh": [np.nan, 1.0, -1.0, 0.0, 0.0, math.tanh(1)],
    "erf": [np.nan, 1.0, -1.0, 0.0, 0.0, math.erf(1)],
    "exp": [np.nan, np.inf, 0.0, 1.0, 1.0, math.e],
    "log": [np.nan, np.inf, np.nan, -np.inf, -np.inf, 0.0],
    "log1p": [np.nan, np.inf, np.nan, 0.0, 0.0, math.log(2)],
    "rsqrt": [np.nan, 0.0, np.nan, np.inf, -np.inf, 1.0],
    "sign": [np.nan, 1.0, -1.0, 0.0, 0.0, 1.0],
    "round": [np.nan, np.inf, -np.inf, 0.0, 0.0, 1.0],
}


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("dtype", [D.f32, D.bf16], ids=lambda d: d.name)
def test_unary_non_finite_policy(backend, dtype):
    x = NONFINITE.astype(numpy_dtype(dtype))
    for op, want in UNARY_POLICY.items():
        _check(ew.unary(op, x, backend=backend), np.array(want), dtype, Depth(1, 3))


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_binary_non_finite_policy(backend):
    a = np.array([np.nan, 1.0, np.inf, -np.inf, 5.0, -5.0, np.inf, 0.0, -np.inf, -np.inf], np.float32)
    b = np.array([1.0, np.nan, -np.inf, np.inf, np.inf, np.inf, 2.0, 0.0, 0.5, -1.0], np.float32)
    policy = {
        "maximum": [np.nan, np.nan, np.inf, np.inf, np.inf, np.inf, np.inf, 0.0, 0.5, -1.0],
        "minimum": [np.nan, np.nan, -np.inf, -np.inf, 5.0, -5.0, 2.0, 0.0, -np.inf, -np.inf],
        "remainder": [np.nan, np.nan, np.nan, np.nan, 5.0, np.inf, np.nan, np.nan, np.nan, np.nan],
        "pow": [np.nan, 1.0, 0.0, np.inf, np.inf, np.inf, np.inf, 1.0, np.inf, -0.0],  # C: pow(1, NaN) = 1
        "add": [np.nan, np.nan, np.nan, np.nan, np.inf, np.inf, np.inf, 0.0, -np.inf, -np.inf],
        "atan2": [np.nan, np.nan, 3 * math.pi / 4, -math.pi / 4, 0.0, -0.0, math.pi / 2, 0.0, -math.pi / 2,
                  -math.pi / 2],
    }
    for op, want in policy.items():
        _check(ew.binary(op, a, b, backend=backend), np.array(want), D.f32, Depth(1, 2))
    assert np.isnan(ew.clamp(a, -1.0, 1.0, backend=backend)[0])
    assert np.isnan(ew.fma(a, b, b, backend=backend)[0])
