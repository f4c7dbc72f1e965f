"""numpy, only when the program has already imported it.

``import iron`` must not import numpy (iron.core stays import-light, see
tests/core/test_layers.py).  The launch path and the frontend only need
numpy to recognise numpy objects, and a numpy object can only exist once
numpy has been imported, so looking it up in ``sys.modules`` suffices.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Callable


def is_ndarray(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def is_numpy_scalar(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.generic)


def is_numpy_integer(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.integer)


#: torch dtype names whose Iron dtype has the same name.
_TORCH_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8",
                "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                "uint64": "u64", "bool": "bool"}
_MISSING = object()
#: How to read the element type of an argument, by the argument's type (None: not an array).  Launches
#: call this for every argument, so the decision is made once per type.
_readers: dict[type, Callable[[Any], Any] | None] = {int: None, float: None, bool: None}


def array_element_type(x: Any) -> Any:
    """The element dtype of an array argument, or None when ``x`` is no array Iron can launch with.

    numpy arrays and anything with a numpy ``dtype`` (CuPy) give a numpy dtype; torch tensors give an
    Iron dtype (by name: bf16 has no numpy dtype); an object with ``__cuda_array_interface__`` gives
    its ``typestr``.  Looked up without importing anything.
    """
    reader = _readers.get(type(x), _MISSING)
    if reader is _MISSING:
        reader = _readers[type(x)] = _reader_for(x)
    return None if reader is None else reader(x)


def _reader_for(x: Any) -> Callable[[Any], Any] | None:
    if is_ndarray(x):
        return operator.attrgetter("dtype")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        from ..core import dtypes as D

        by_dtype: dict[Any, Any] = {}

        def torch_element(t: Any) -> Any:
            dt = by_dtype.get(t.dtype, _MISSING)
            if dt is _MISSING:
                name = _TORCH_NAMES.get(str(t.dtype).removeprefix("torch."))
                dt = by_dtype[t.dtype] = D.by_name(name) if name else None
            return dt

        return torch_element
    if hasattr(x, "dtype") and hasattr(x, "shape"):
        return operator.attrgetter("dtype")
    if hasattr(x, "__cuda_array_interface__"):
        return lambda a: a.__cuda_array_interface__.get("typestr")
    return None


def element_signature(args: tuple) -> tuple:
    """``(type, element type)`` per array argument and the type of anything else: what decides a binding
    when every argument is a run-time one (the launch path's cache key; kept tight: it runs per launch)."""
    out = []
    for a in args:
        t = type(a)
        reader = _readers.get(t, _MISSING)
        if reader is _MISSING:
            reader = _readers[t] = _reader_for(a)
        out.append(t if reader is None else (t, reader(a)))
    return tuple(out)
