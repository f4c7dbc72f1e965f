"""The dtype table: every scalar element type Iron knows, in one place.

Kept free of numpy so that `iron.core` stays import-light; the numpy
mapping lives in :func:`numpy_dtype`, imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DType:
    """A scalar element type.

    ``kind`` is one of ``"f"`` (IEEE-like float), ``"i"`` (signed int),
    ``"u"`` (unsigned int) or ``"b"`` (bool).
    """

    name: str
    kind: str
    bits: int

    def __hash__(self) -> int:
        # Names are unique among dtypes; launch caches hash dtypes on every call.
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in ("i", "u")

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def __call__(self, value: Any) -> Any:
        """Inside a kernel, ``f32(x)`` is a cast; the frontend lowers it.

        Outside a kernel it converts a Python scalar, which makes dtypes
        usable as plain constructors in host code.
        """
        import numpy as np

        if self.name in _ML_DTYPES:  # rounded once (and saturated for 8-bit floats) as a kernel's cast would
            from .eval import round_f64

            return round_f64(np.asarray([value], dtype=np.float64), self)[0]
        return numpy_dtype(self).type(value)


f16 = DType("f16", "f", 16)
bf16 = DType("bf16", "f", 16)
f32 = DType("f32", "f", 32)
f64 = DType("f64", "f", 64)
i8 = DType("i8", "i", 8)
i16 = DType("i16", "i", 16)
i32 = DType("i32", "i", 32)
i64 = DType("i64", "i", 64)
u8 = DType("u8", "u", 8)
u16 = DType("u16", "u", 16)
u32 = DType("u32", "u", 32)
u64 = DType("u64", "u", 64)
bool_ = DType("bool", "b", 8)
#: 8-bit floats (OCP FP8): E4M3 (finite only, NaN 0x7F / 0xFF, largest 448; torch's ``float8_e4m3fn``) and
#: E5M2 (IEEE-like, largest 57344; ``float8_e5m2``).  Conversions to them round to nearest even and saturate
#: (a finite or infinite value past the largest becomes the largest of its sign; NaN stays NaN), as the
#: hardware's ``satfinite`` conversions do; arithmetic on them runs in f32, rounded back after every op.
f8e4m3 = DType("f8e4m3", "f", 8)
f8e5m2 = DType("f8e5m2", "f", 8)

ALL_DTYPES: tuple[DType, ...] = (f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool_, f8e4m3, f8e5m2)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL_DTYPES}
FLOAT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_float)
#: f32's smallest normal: ``fast_exp2`` may return 0 below it (the evaluator and constant folding do).
F32_TINY = 2.0 ** -126
INT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_int)
FP8_DTYPES = (f8e4m3, f8e5m2)

_NUMPY_NAMES = {
    "f16": "float16", "f32": "float32", "f64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
}


def by_name(name: str) -> DType:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(BY_NAME)}") from None


#: Iron dtypes numpy has no type for, by their ml_dtypes names.
_ML_DTYPES = {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
_ML_NAMES = frozenset(_ML_DTYPES.values())


def numpy_dtype(dt: DType) -> Any:
    """The numpy dtype that stores ``dt`` (bf16 and the 8-bit floats through ml_dtypes)."""
    import numpy as np

    if dt.name in _ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, _ML_DTYPES[dt.name]))
    return np.dtype(_NUMPY_NAMES[dt.name])


def is_float_numpy(npdt: Any) -> bool:
    """Whether a numpy dtype holds floats: numpy's own, or ml_dtypes' bf16 and 8-bit floats."""
    import numpy as np

    npdt = np.dtype(npdt)
    return npdt.kind == "f" or npdt.name in _ML_NAMES


def from_numpy(npdt: Any) -> DType:
    """The Iron dtype of a numpy dtype; raises ValueError for unsupported ones."""
    import numpy as np

    npdt = np.dtype(npdt)
    for name, ml_name in _ML_DTYPES.items():
        if npdt.name == ml_name:
            return BY_NAME[name]
    for name, np_name in _NUMPY_NAMES.items():
        if npdt.name == np_name:
            return BY_NAME[name]
    raise ValueError(f"numpy dtype {npdt} has no Iron equivalent")


#: The largest finite value of the float types numpy's finfo does not know.
_LARGEST = {"bf16": 3.3895313892515355e38, "f8e4m3": 448.0, "f8e5m2": 57344.0}


def max_value(dt: DType) -> float | int:
    import numpy as np

    if dt.is_float:
        return _LARGEST.get(dt.name) or float(np.finfo(numpy_dtype(dt)).max)
    if dt.is_bool:
        return 1
    return int(np.iinfo(numpy_dtype(dt)).max)


def min_value(dt: DType) -> float | int:
    import numpy as np

    if dt.is_float:
        return -max_value(dt)
    if dt.is_bool:
        return 0
    return int(np.iinfo(numpy_dtype(dt)).min)
