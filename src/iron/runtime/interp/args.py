"""Checking a launch's geometry and binding its arguments to the kernel's parameters.

Every mistake a caller can make here becomes a :class:`LaunchError` that
names the kernel, the parameter, what it got and what it expects.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, Sequence

import numpy as np

from ...core import dtypes as D
from ...core.errors import LaunchError
from ...core.eval import const_array, np_dtype
from ...core.ir import Kernel, Param
from ...core.types import ScalarType, TensorType
from ...lang.numpy_compat import array_device, host_array
from ..aliasing import check_tensor_aliasing
from .memory import Buffer

#: Index arithmetic is 32-bit (i32), so a tensor holds fewer than 2**31 elements.
MAX_TENSOR_ELEMENTS = 2**31 - 1

MAX_AXES = 3


def normalize_geometry(grid: Any, group: Any) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """``grid`` and ``group`` padded to three axes, and the grid's own axis count."""
    g = _axes("grid", grid)
    b = _axes("group", group)
    pad = (1,) * MAX_AXES
    return (g + pad)[:MAX_AXES], (b + pad)[:MAX_AXES], len(g)


def _axes(what: str, value: Any) -> tuple[int, ...]:
    items = (value,) if _is_int(value) else value
    if not isinstance(items, (tuple, list)) or not 1 <= len(items) <= MAX_AXES:
        raise LaunchError(f"{what} must be a tuple of 1 to {MAX_AXES} positive ints, got {value!r}")
    for v in items:
        if not _is_int(v) or int(v) < 1:
            raise LaunchError(f"{what} must be a tuple of 1 to {MAX_AXES} positive ints, got {value!r}")
    return tuple(int(v) for v in items)


def _is_int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, (bool, np.bool_))


def bind_arguments(kernel: Kernel, args: Sequence[Any]) -> list[Buffer | Any]:
    """Buffers (views of the caller's arrays) for tensors, numpy scalars for scalars."""
    params = kernel.params
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise LaunchError(f"kernel '{kernel.name}' takes {len(params)} argument(s) ({names}), got {len(args)}")
    args = [host_array(a) if p.is_tensor else a for p, a in zip(params, args)]
    bound = [_bind(kernel, p, a) for p, a in zip(params, args)]
    check_tensor_aliasing(kernel, args)
    return bound


def _bind(kernel: Kernel, p: Param, arg: Any) -> Buffer | Any:
    t = p.type
    if isinstance(t, TensorType):
        return _bind_tensor(kernel, p, t, arg)
    if isinstance(t, ScalarType):
        return _bind_scalar(kernel, p, t.dtype, arg)
    raise LaunchError(f"kernel '{kernel.name}': parameter '{p.name}' has type {t}, which a launch cannot bind")


def _bind_tensor(kernel: Kernel, p: Param, t: TensorType, arg: Any) -> Buffer:
    want = np_dtype(t.dtype)
    where = f"kernel '{kernel.name}', argument '{p.name}'"
    if not isinstance(arg, np.ndarray):
        device = array_device(arg)
        hint = (f"; it lives on {device}: leave the backend at auto (it follows the data) or pass "
                f"backend='{device}'" if device is not None else "")
        raise LaunchError(f"{where}: expects a numpy array of {want} ({t}), got {type(arg).__name__}{hint}")
    if arg.dtype != want:
        raise LaunchError(f"{where}: expects a numpy array of {want} ({t}), got an array of {arg.dtype}; "
                          f"convert it with .astype(...)")
    if not arg.flags.c_contiguous:
        raise LaunchError(f"{where}: expects a C-contiguous array, got a strided view; "
                          f"pass np.ascontiguousarray(...) (the kernel writes into the array it is given)")
    if not t.readonly and not arg.flags.writeable:
        raise LaunchError(f"{where}: the kernel may write to this tensor but the array is read-only")
    if arg.size > MAX_TENSOR_ELEMENTS:
        raise LaunchError(f"{where}: {arg.size} elements; kernels index tensors with 32-bit ints, so a tensor "
                          f"holds at most {MAX_TENSOR_ELEMENTS} elements: split the work into several launches")
    return Buffer(p.name, t.dtype, arg.reshape(-1), int(arg.size))


def _bind_scalar(kernel: Kernel, p: Param, dt: D.DType, arg: Any) -> Any:
    where = f"kernel '{kernel.name}', argument '{p.name}'"
    value = arg.item() if isinstance(arg, (np.ndarray, np.generic)) and np.ndim(arg) == 0 else arg
    is_bool = isinstance(value, bool)
    if dt.is_bool:
        if not is_bool:
            raise LaunchError(f"{where}: expects a bool, got {arg!r}")
    elif dt.is_int:
        if is_bool or not isinstance(value, Integral):
            raise LaunchError(f"{where}: expects an integer ({dt}), got {arg!r}")
        lo, hi = D.min_value(dt), D.max_value(dt)
        if not lo <= int(value) <= hi:
            raise LaunchError(f"{where}: {value} does not fit {dt} (range {lo} .. {hi})")
    elif is_bool or not isinstance(value, Real):
        raise LaunchError(f"{where}: expects a number ({dt}), got {arg!r}")
    return const_array(value, ScalarType(dt), 1)[0]
