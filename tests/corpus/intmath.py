"""Integer semantics of docs/ir.md, written independently of Iron, for the oracles.

Values are carried as Python ints or int64/object numpy arrays holding the
*mathematical* value; :func:`wrap` brings a result back into a dtype's range
(two's complement).  Division truncates toward zero and the remainder takes
the dividend's sign (C), division by zero gives 0, shift counts are taken
modulo the bit width, ``>>`` is arithmetic on signed and logical on unsigned
types.
"""

from __future__ import annotations

import numpy as np

from iron.core import dtypes as D


def wrap(v, dt: D.DType):
    """``v`` reduced to ``dt``'s range (Python int or object/int64 array)."""
    bits = dt.bits
    mask = (1 << bits) - 1
    if isinstance(v, np.ndarray):
        u = v.astype(object) & mask
        if dt.is_signed:
            u = np.where(u >= (1 << (bits - 1)), u - (1 << bits), u)
        return u.astype(object)
    u = int(v) & mask
    if dt.is_signed and u >= 1 << (bits - 1):
        u -= 1 << bits
    return u


def c_div(a: int, b: int) -> int:
    """C's ``a / b`` on integers (toward zero); 0 when ``b == 0``."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_rem(a: int, b: int) -> int:
    """C's ``a % b``: ``a - b * c_div(a, b)``, the sign of ``a``; 0 when ``b == 0``."""
    if b == 0:
        return 0
    return a - b * c_div(a, b)


def shl(a: int, count: int, dt: D.DType) -> int:
    return wrap(a << (count % dt.bits), dt)


def shr(a: int, count: int, dt: D.DType) -> int:
    """Arithmetic for signed ``dt`` (Python's ``>>`` on a negative int), logical for unsigned."""
    count %= dt.bits
    if dt.is_signed:
        return wrap(a, dt) >> count
    return (a & ((1 << dt.bits) - 1)) >> count


def to_ints(a: np.ndarray) -> list[int]:
    return [int(x) for x in np.asarray(a).reshape(-1)]


def from_ints(values: list[int], dt: D.DType) -> np.ndarray:
    """Python ints (already in range) as an array of ``dt``."""
    return np.array([wrap(v, dt) for v in values], dtype=np.int64 if dt.bits < 64 or dt.is_signed
                    else np.uint64).astype(D.numpy_dtype(dt))
