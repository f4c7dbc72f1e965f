"""What the library's host functions share: reading an argument's dtype, allocating an output of the
same kind (numpy on the host, torch/CuPy/Iron arrays on the device), and launch geometry.

The host functions accept whatever a launch accepts (docs/cuda.md "Interop"); an output they allocate
lives where the input lives, so ``softmax(torch_tensor_on_gpu)`` returns a tensor on the same GPU.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from ..core import dtypes as D
from ..core.errors import LaunchError
from ..lang.numpy_compat import array_element_type

#: Bytes one thread moves per access in the memory-bound kernels: one 128-bit load or store.
VECTOR_BYTES = 16
#: Float dtypes every library kernel is stamped for.
FLOATS = (D.f32, D.f16, D.bf16)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def backend_name(backend: str | None) -> str:
    """The backend a launch with ``backend`` runs on (None: the configured or best one)."""
    from iron.runtime import resolve_backend

    return resolve_backend(backend)


def vector_width(dtype: D.DType) -> int:
    """Elements per 16-byte access: 4 for f32, 8 for f16/bf16."""
    return VECTOR_BYTES // dtype.itemsize


def dtype_of(x: Any, what: str = "input") -> D.DType:
    """The Iron dtype of an array argument; a LaunchError names ``what`` when it is no array."""
    element = array_element_type(x)
    if element is None:
        raise LaunchError(f"{what}: expected an array (numpy, torch, CuPy or an Iron CudaArray), got "
                          f"{type(x).__name__}")
    if isinstance(element, D.DType):
        return element
    try:
        return D.from_numpy(element)
    except (ValueError, TypeError):
        raise LaunchError(f"{what}: element type {element} is not one Iron handles") from None


def check_float(x: Any, what: str = "input") -> D.DType:
    dt = dtype_of(x, what)
    if dt not in FLOATS:
        raise LaunchError(f"{what}: the library kernel takes f32, f16 or bf16; got {dt.name}")
    return dt


def shape_of(x: Any) -> tuple[int, ...]:
    shape = getattr(x, "shape", None)
    if shape is None and hasattr(x, "__cuda_array_interface__"):
        shape = x.__cuda_array_interface__["shape"]
    if shape is None:
        raise LaunchError(f"expected an array with a shape, got {type(x).__name__}")
    return tuple(int(s) for s in shape)


def size_of(x: Any) -> int:
    n = 1
    for s in shape_of(x):
        n *= s
    return n


def empty_like(x: Any, shape: int | Sequence[int] | None = None, dtype: D.DType | None = None) -> Any:
    """An uninitialised array of ``shape`` and ``dtype`` (default: ``x``'s) of ``x``'s kind and device."""
    shape = shape_of(x) if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
    dtype = dtype or dtype_of(x)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        return np.empty(shape, D.numpy_dtype(dtype))
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype.name]), device=x.device)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(x, cupy.ndarray):
        return cupy.empty(shape, dtype=D.numpy_dtype(dtype))
    device = getattr(x, "device", None)
    if device is not None and hasattr(device, "empty"):  # an Iron CudaArray
        return device.empty(shape, dtype)
    raise LaunchError(f"cannot allocate an output like a {type(x).__name__}: pass out= explicitly")


_TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32", "i64": "int64",
                 "u8": "uint8", "i8": "int8", "f64": "float64"}


def check_shape(x: Any, shape: Sequence[int], what: str) -> None:
    got = shape_of(x)
    if tuple(got) != tuple(shape):
        raise LaunchError(f"{what}: expected shape {tuple(shape)}, got {got}")


__all__ = ["FLOATS", "VECTOR_BYTES", "ceil_div", "check_float", "check_shape", "dtype_of", "empty_like",
           "shape_of", "size_of", "vector_width"]
