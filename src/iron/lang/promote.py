"""The promotion rules of docs/language.md, at the level of dtypes.

Two typed operands meet at one dtype: float beats int, the wider float wins
(f16 with bf16 gives f32), the wider int wins and at one width unsigned
beats signed.  A weak literal (a Python int or float) takes the other
operand's dtype; alone, an int literal is i32 and a float literal f32.
bool never takes part in arithmetic.
"""

from __future__ import annotations

import math

from ..core import dtypes as D
from ..core.dtypes import DType


def promote(a: DType, b: DType) -> DType:
    """The common dtype of two typed operands (callers reject bool first)."""
    if a == b:
        return a
    if a.is_float and b.is_float:
        if a.bits != b.bits:
            return a if a.bits > b.bits else b
        return D.f32  # f16 with bf16: neither holds the other
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if not a.is_signed else b


def literal_dtype(value: int | float | bool, other: DType | None) -> DType:
    """The dtype a weak literal takes next to an operand of dtype ``other`` (None: alone)."""
    if isinstance(value, bool):
        return D.bool_
    if isinstance(value, int):
        if other is not None and not other.is_bool:
            return other
        return D.i32
    if other is not None and other.is_float:
        return other
    return D.f32


def literal_fits(value: int | float | bool, dt: DType) -> bool:
    """Whether the literal ``value`` converts to ``dt`` without wrapping or overflowing to infinity."""
    if dt.is_bool:
        return isinstance(value, bool)
    if dt.is_int:
        if isinstance(value, float):
            return False
        return D.min_value(dt) <= int(value) <= D.max_value(dt)
    if isinstance(value, float) and not math.isfinite(value):
        return True
    try:
        return abs(float(value)) <= D.max_value(dt)
    except OverflowError:  # an int too large for a double
        return False


def common_literal_dtype(values: list[int | float | bool]) -> DType:
    """The dtype a group of literals takes when no typed operand is present (vec(1, 2.5) -> f32)."""
    if all(isinstance(v, bool) for v in values):
        return D.bool_
    if any(isinstance(v, float) for v in values):
        return D.f32
    return D.i32
