"""Tests and benches of iron.std.cast: all nine (source, destination) pairs of f32/f16/bf16, compared
exactly with numpy's (ml_dtypes' for bf16) correctly rounded conversion of the float64 value; and the
sixteen pairs with an 8-bit float on either side (``std/cast/f8``), against the same conversion of the value
clipped to the 8-bit float's largest (a conversion into them saturates), drawn from their range when they are
the source.

Inputs span the destination's whole range: magnitudes from 2^-30 to 2^20 (f16's subnormals and its
overflow at 65520 included), exact ties of f16 and bf16 (1 + 2^-11 and 1 + 3 * 2^-11 round to
even: down and up; 1 + 2^-8 and 1 + 3 * 2^-8 for bf16), values just below and above the f16 and
bf16 overflow thresholds, NaN, +-inf and +-0.  A conversion is one correctly rounded operation, so
the result is exact (Depth 0): truncation, double rounding through the other 16-bit type or a
flush of subnormals all fail.

Bench (the H200 set): every pair at N = 16M (copies included); Vulkan 4M, interp 64K.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iron import Case, Setup, Tolerance, bench, test_kernel
from iron.core import dtypes as D
from iron.std import cast as C
from iron.std import elementwise as ew

TEST_SHAPES = [1, 7, 255, 4099]
BENCH_SHAPES = {"interp": [1 << 16], "vulkan": [1 << 22], "*": [1 << 24]}

#: Planted at the start of cases of 24 elements or more (the vector path of every pair).
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0,
                     1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -(1 + 2.0 ** -11),        # f16 ties to even
                     1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -(1 + 3 * 2.0 ** -8),      # bf16 ties to even
                     65504.0, 65519.0, 65520.0, -65536.0, 1e5,                     # f16's largest, its overflow
                     3.3895313892515355e38, 3.3961775292304986e38, 3.4e38,          # bf16's largest, overflow
                     2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 1e-6, 2.0 ** -14])     # f16 subnormals, ties


#: Exponent ranges drawn for a source of each 8-bit float (its subnormals to its largest, and a little past).
F8_EXPONENTS = {D.f8e4m3: (-11, 10), D.f8e5m2: (-18, 17)}


def _draw(case: Case) -> np.ndarray:
    rng, n = case.rng, case.n
    mags = 2.0 ** rng.uniform(*F8_EXPONENTS.get(case["T"], (-30, 20)), n)
    x = np.where(rng.random(n) < 0.5, -mags, mags)
    x = np.where(rng.random(n) < 0.25, rng.standard_normal(n), x)  # and plain values around 1
    if n >= 24:
        x[:SPECIALS.size] = SPECIALS
    with np.errstate(over="ignore"):
        return x.astype(D.numpy_dtype(case["T"]))


def cast_setup(case: Case) -> Setup:
    n, src, dst = case.n, case["T"], case["U"]
    x = _draw(case)

    def oracle(x, out, n):
        with np.errstate(over="ignore"):
            return x.astype(D.numpy_dtype(dst)).astype(np.float64)  # one correct rounding of the exact value

    return Setup(args=[x, case.empty(n, dtype=dst), n],
                 grid=ew.flat_grid(max(1, -(-n // case["VEC"]))), group=(ew.GROUP, 1),
                 oracle=oracle, tolerance=Tolerance(exact=True))


#: The 8-bit floats' largest values: a conversion into them saturates there (docs/language.md).
F8_LARGEST = {D.f8e4m3: 448.0, D.f8e5m2: 57344.0}


def f8_cast_setup(case: Case) -> Setup:
    """:func:`cast_setup` for pairs with an 8-bit float: the oracle clips to the destination's largest value first
    (ml_dtypes gives NaN or inf past it, where a conversion saturates), then rounds once."""
    n, dst = case.n, case["U"]
    x = _draw(case)
    top = F8_LARGEST.get(dst) if case["T"] != dst else None  # a copy keeps every value, infinities too

    def oracle(x, out, n):
        wide = x.astype(np.float64)
        if top is not None:
            wide = np.clip(wide, -top, top)  # NaN stays NaN
        with np.errstate(over="ignore"):
            return wide.astype(D.numpy_dtype(dst)).astype(np.float64)

    return Setup(args=[x, case.empty(n, dtype=dst), n],
                 grid=ew.flat_grid(max(1, -(-n // case["VEC"]))), group=(ew.GROUP, 1),
                 oracle=oracle, tolerance=Tolerance(exact=True))


def _cast_torch(x: Any, out: Any, n: int) -> Any:
    return x.to(out.dtype) if x.dtype != out.dtype else x.clone()


def _cast_numpy(x: Any, out: Any, n: int) -> Any:
    with np.errstate(over="ignore"):
        return x.astype(out.dtype)


test_kernel(C.cast_kernel, shapes=TEST_SHAPES, bindings=list(C.PAIRS), name="std/cast/cast")(cast_setup)
bench(C.cast_kernel, shapes=BENCH_SHAPES, bindings=list(C.PAIRS), name="std/cast/cast",
      reference={"cuda": _cast_torch, "*": _cast_numpy})(cast_setup)
test_kernel(C.cast_kernel, shapes=TEST_SHAPES, bindings=list(C.F8_PAIRS), name="std/cast/f8")(f8_cast_setup)
