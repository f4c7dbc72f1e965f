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

        return numpy_dtype(self).type(value) if self.name != "bf16" else np.asarray(
            value, dtype=numpy_dtype(self))[()]


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

ALL_DTYPES: tuple[DType, ...] = (f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool_)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL_DTYPES}
FLOAT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_float)
INT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_int)

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


def numpy_dtype(dt: DType) -> Any:
    """The numpy dtype that stores ``dt`` (bf16 through ml_dtypes)."""
    import numpy as np

    if dt.name == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_NUMPY_NAMES[dt.name])


def from_numpy(npdt: Any) -> DType:
    """The Iron dtype of a numpy dtype; raises ValueError for unsupported ones."""
    import numpy as np

    npdt = np.dtype(npdt)
    if npdt.name == "bfloat16":
        return bf16
    for name, np_name in _NUMPY_NAMES.items():
        if npdt.name == np_name:
            return BY_NAME[name]
    raise ValueError(f"numpy dtype {npdt} has no Iron equivalent")


def max_value(dt: DType) -> float | int:
    import numpy as np

    if dt.is_float:
        return float(np.finfo(numpy_dtype(dt)).max) if dt.name != "bf16" else 3.3895313892515355e38
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
