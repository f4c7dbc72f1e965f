"""Tolerances from dtype and depth, poisoning, and the comparison that judges every row."""

import ml_dtypes
import numpy as np
import pytest

from iron import Depth, Expect, Tolerance
from iron.core import dtypes as D
from iron.harness.tolerance import EXACT, compare, derive_tolerance, log2_ceil, poison, widen


def test_tolerances_follow_dtype_and_depth():
    assert derive_tolerance(D.f32) == Tolerance(1e-6, float(np.finfo(np.float32).tiny))
    assert derive_tolerance(D.f16, Depth(8)).rtol == pytest.approx(4e-3)
    assert derive_tolerance(D.bf16, Depth(1)).rtol == pytest.approx(8e-3)
    # an f16 kernel with an f32 accumulator of 64 steps: one f16 rounding plus the accumulator's share
    assert derive_tolerance(D.f16, Depth(1, 64)).rtol == pytest.approx(1e-3 + 32e-6)
    assert derive_tolerance(D.f32, Depth(10, 10)).rtol == pytest.approx(1e-5)
    assert derive_tolerance(D.i32, Depth(5)) is EXACT and derive_tolerance(D.f32, 4).rtol == pytest.approx(2e-6)
    assert log2_ceil(1) == 0 and log2_ceil(1000) == 10


def test_poison_fills_nan_or_a_sentinel():
    a, b, c = np.zeros(3, np.float16), np.zeros(3, np.int8), np.zeros(3, np.uint32)
    bf = np.zeros(2, ml_dtypes.bfloat16)
    for x in (a, b, c, bf):
        poison(x)
    assert np.isnan(a).all() and np.isnan(bf.astype(np.float32)).all()
    assert (b == -128).all() and (c == 2**32 - 1).all()


def test_an_unwritten_element_fails_and_a_matching_one_passes():
    want = np.arange(4, dtype=np.float64)
    got = want.astype(np.float32)
    assert compare(got, want, derive_tolerance(D.f32)).ok
    got[2] = np.nan  # left poisoned
    v = compare(got, want, derive_tolerance(D.f32))
    assert not v.ok and v.worst is None and "1/4 elements differ" in v.message and "[2] got nan" in v.message
    # where the oracle expects the poison, the poison passes
    assert compare(got, np.where(np.arange(4) == 2, np.nan, want), derive_tolerance(D.f32)).ok


def test_worst_is_the_error_over_its_allowance():
    tol = Tolerance(rtol=1e-3, atol=0.0)
    v = compare(np.array([1.0005, 2.0], np.float32), np.array([1.0, 2.0]), tol)
    assert v.ok and v.worst == pytest.approx(0.5, rel=1e-3)
    v = compare(np.array([1.003], np.float32), np.array([1.0]), tol)
    assert not v.ok and v.worst == pytest.approx(3.0, rel=1e-3)


def test_a_cancelled_sum_is_judged_against_its_terms():
    terms = np.array([1.0, -0.9999])
    got = np.float32(terms.astype(np.float32).sum())
    tol = derive_tolerance(D.f32)
    assert not compare(np.array([got]), np.array([terms.sum()]), tol).ok
    assert compare(np.array([got]), Expect(np.array([terms.sum()]), np.array([np.abs(terms).sum()])), tol).ok


def test_integers_compare_exactly_and_sizes_must_agree():
    assert compare(np.array([1, 2], np.int32), np.array([1, 2]), EXACT).ok
    v = compare(np.array([1, 3], np.int32), np.array([1, 2]), EXACT)
    assert not v.ok and "exact" in v.message
    assert not compare(np.zeros(3, np.float32), np.zeros(4), derive_tolerance(D.f32)).ok


def test_overflow_to_infinity_of_the_right_sign_passes_near_the_top_of_the_range():
    tol = derive_tolerance(D.f16)
    assert compare(np.array([np.inf], np.float16), np.array([65519.0]), tol).ok
    assert not compare(np.array([-np.inf], np.float16), np.array([65519.0]), tol).ok
    assert not compare(np.array([np.inf], np.float16), np.array([1000.0]), tol).ok


def test_widen_gives_the_oracle_exact_float64_copies():
    a = np.array([0.1, 3.0], np.float16)
    w = widen(a)
    assert w.dtype == np.float64 and np.array_equal(w, a.astype(np.float64)) and widen(3) == 3
    i = np.array([1, 2], np.int32)
    assert widen(i) is not i and widen(i).dtype == np.int32


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("scale", ["values", "per_element", "scalar"])
def test_chunked_comparison_sees_every_chunk(monkeypatch, scale, threads):
    """Outputs are judged a chunk at a time (on 4 threads: 15 chunks over the pool, merged in order): bad
    elements in any chunk count, the worst come first."""
    import iron.harness.tolerance as T

    monkeypatch.setattr(T, "COMPARE_CHUNK", 7)
    monkeypatch.setattr(T, "COMPARE_THREADS", threads)
    monkeypatch.setattr(T, "_pool", None)
    rng = np.random.default_rng(3)
    want = rng.standard_normal(100)
    got = want.astype(np.float32)
    got[[3, 50, 99]] += np.float32([0.5, 2.0, 1.0])  # in the first, a middle and the last (partial) chunk
    got[20] = np.nan
    expect = {"values": Expect(want), "per_element": Expect(want, np.abs(want) + 1.0),
              "scalar": Expect(want, np.float64(4.0))}[scale]
    tol = Tolerance(rtol=1e-3, atol=0.0)
    v = compare(got, expect, tol)
    assert not v.ok and v.worst is None  # the NaN has no finite ratio
    assert "4/100 elements differ" in v.message
    assert v.message.index("[20] got nan") < v.message.index("[50]") < v.message.index("[99]") < v.message.index("[3]")
    got[20] = want[20]
    v = compare(got, expect, tol)
    s = np.abs(want) if scale == "values" else (np.abs(want) + 1.0 if scale == "per_element" else 4.0)
    ratio = np.abs(got.astype(np.float64) - want) / (tol.rtol * s)
    assert v.worst == pytest.approx(ratio.max()) and "3/100 elements differ" in v.message


# A tolerance scaled by an infinite |want| allowed any value: non-finite expected values match exactly.
_INF, _NAN = np.inf, np.nan


@pytest.mark.parametrize("got, want", [
    ([-_INF, 0.0, 123.0], [_INF, _INF, -_INF]),  # the case: wrong sign, finite for infinite
    ([1.0], [_INF]),
    ([65504.0], [_INF]),                         # the largest finite value is not infinity
    ([-_INF], [_INF]),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_non_finite_expected_value_is_matched_exactly(got, want, dtype):
    want = np.array(want)
    tol = derive_tolerance(D.f32 if dtype == np.float32 else D.f16)
    v = compare(np.array(got, dtype), want, tol)
    assert not v.ok and "differ" in v.message
    # the same through an explicit scale (a sum's |terms|), which is infinite there too
    assert not compare(np.array(got, dtype), Expect(want, np.abs(want)), tol).ok


def test_nan_is_matched_only_by_nan():
    """Held before the fix too (a NaN error is never within an allowance); kept beside the rule it belongs to."""
    tol = derive_tolerance(D.f32)
    for got, want in ((np.nan, np.inf), (np.nan, -np.inf), (np.inf, np.nan), (0.0, np.nan), (np.nan, 1.0)):
        assert not compare(np.array([got], np.float32), np.array([want]), tol).ok


def test_an_infinite_scale_does_not_let_a_wrong_infinity_pass_for_a_finite_expected_value():
    tol = derive_tolerance(D.f32)
    # an infinite allowance does not make a NaN or an infinity of the wrong sign pass for a finite expected value
    for got in (np.nan, -np.inf):
        assert not compare(np.array([got], np.float32), Expect(np.array([1.0]), np.array([np.inf])), tol).ok


def test_matching_non_finite_values_pass():
    tol = derive_tolerance(D.f32)
    want = np.array([np.inf, -np.inf, np.nan, 1.0])
    v = compare(want.astype(np.float32), want, tol)
    assert v.ok and v.worst == 0.0
    assert compare(want.astype(np.float32), Expect(want, np.abs(want) + 1.0), tol).ok
    assert compare(want.astype(np.float32), want, EXACT).ok
    assert not compare(np.array([np.inf, np.inf, np.nan, 1.0], np.float32), want, EXACT).ok
