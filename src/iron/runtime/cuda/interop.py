"""Arrays from other libraries as kernel arguments: what lives on this GPU is passed by pointer.

Recognised, in this order: Iron's own :class:`~.array.CudaArray`; torch
tensors (``data_ptr()``; a CPU tensor is host memory); CuPy arrays;
anything with ``__cuda_array_interface__`` (Numba, JAX, ...); anything
whose ``__dlpack_device__`` is a CUDA device (read through DLPack); and
host memory: numpy arrays, or any object with the buffer protocol, which
the device copies in and out.  Each device array is checked for dtype,
C-contiguity and that it lives on this very GPU, with an error that names
the kernel and the argument.  A device array may carry its producer's
stream (torch's and CuPy's current stream, the interface's ``stream``):
launching there orders the kernel after the producer's pending work and
the consumer's later work after the kernel, with no copies and no waits.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...core import dtypes as D
from ...core.errors import LaunchError
from . import dlpack


@dataclass
class DeviceView:
    """A run of device memory an argument occupies."""

    ptr: int
    count: int
    nbytes: int
    #: The stream the producer's work on it is ordered on (a raw handle), or None.
    stream: int | None
    #: What must stay alive while the launch is enqueued (a DLPack capsule, the object).
    owner: Any = None


def kind_of(obj: Any) -> str:
    """"iron", "torch", "cupy", "cai", "dlpack", "host" or "other"."""
    from .array import CudaArray

    if isinstance(obj, CudaArray):
        return "iron"
    if isinstance(obj, np.ndarray):
        return "host"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return "torch" if obj.is_cuda else "host"
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(obj, cupy.ndarray):
        return "cupy"
    if hasattr(obj, "__cuda_array_interface__"):
        return "cai"
    if hasattr(obj, "__dlpack_device__") and dlpack.is_cuda(obj):
        return "dlpack"
    try:
        memoryview(obj)
    except TypeError:
        return "other"
    return "host"


@functools.cache
def torch_dtypes() -> dict[Any, D.DType]:
    """torch dtype -> Iron dtype, for the dtypes both have."""
    torch = sys.modules["torch"]
    names = {"float16": D.f16, "bfloat16": D.bf16, "float32": D.f32, "float64": D.f64, "int8": D.i8,
             "int16": D.i16, "int32": D.i32, "int64": D.i64, "uint8": D.u8, "uint16": D.u16, "uint32": D.u32,
             "uint64": D.u64, "bool": D.bool_, "float8_e4m3fn": D.f8e4m3, "float8_e5m2": D.f8e5m2}
    return {getattr(torch, n): dt for n, dt in names.items() if hasattr(torch, n)}


def torch_stream(ordinal: int) -> int:
    """torch's current stream on GPU ``ordinal`` as a raw handle (0: the legacy default stream)."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return int(raw(ordinal)) if raw is not None else int(torch.cuda.current_stream(ordinal).cuda_stream)


def cupy_stream() -> int:
    return int(sys.modules["cupy"].cuda.get_current_stream().ptr)


def device_view(obj: Any, kind: str, want: D.DType, ordinal: int, where: str,
                ordinal_of: Callable[[int], int], own_stream: int, written: bool = False) -> DeviceView:
    """``obj``'s memory, checked to hold C-contiguous ``want`` elements on GPU ``ordinal``."""
    if kind == "iron":
        if not obj.ptr and obj.size:
            raise LaunchError(f"{where}: this CudaArray was freed (or its device closed)")
        _expect(obj.dtype == want, where, want, obj.dtype.name)
        _expect_device(obj.ordinal, ordinal, where)
        return DeviceView(obj.ptr, obj.size, obj.nbytes, None, obj)
    if kind == "torch":
        got = torch_dtypes().get(obj.dtype)
        _expect(got == want, where, want, str(obj.dtype))
        _expect_device(obj.get_device(), ordinal, where)
        _contiguous(obj.is_contiguous(), where)
        return DeviceView(obj.data_ptr(), obj.numel(), obj.numel() * obj.element_size(), torch_stream(ordinal), obj)
    if kind == "cupy":
        _expect(_np_dtype_is(obj.dtype, want), where, want, str(obj.dtype))
        _expect_device(obj.device.id, ordinal, where)
        _contiguous(obj.flags.c_contiguous, where)
        return DeviceView(obj.data.ptr, obj.size, obj.nbytes, cupy_stream(), obj)
    if kind == "cai":
        return _from_interface(obj, want, ordinal, where, ordinal_of, written)
    if kind == "dlpack":
        return dlpack.view(obj, want, ordinal, where, own_stream)
    raise LaunchError(f"{where}: expects an array of {want.name}, got {type(obj).__name__}")


def host_array(obj: Any, want: D.DType, written: bool, where: str) -> np.ndarray:
    """``obj`` as a numpy array over its own memory (never a copy), checked like the interpreter."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        try:
            arr = obj.detach().numpy()
        except (TypeError, RuntimeError) as e:
            raise LaunchError(f"{where}: a CPU torch tensor of {obj.dtype} cannot be viewed as a numpy array "
                              f"({e}); move it to the GPU with .cuda()") from None
    elif isinstance(obj, np.ndarray):
        arr = obj
    else:
        arr = np.asarray(memoryview(obj))
    np_want = D.numpy_dtype(want)
    if arr.dtype != np_want:
        raise LaunchError(f"{where}: expects a numpy array of {np_want} ({want.name}), got an array of {arr.dtype}; "
                          f"convert it with .astype(...)")
    _contiguous(arr.flags.c_contiguous, where)
    if written and not arr.flags.writeable:
        raise LaunchError(f"{where}: the kernel may write to this tensor but the array is read-only")
    return arr


def _from_interface(obj: Any, want: D.DType, ordinal: int, where: str,
                    ordinal_of: Callable[[int], int], written: bool) -> DeviceView:
    cai = obj.__cuda_array_interface__
    try:
        shape = tuple(int(s) for s in cai["shape"])
        typestr, (ptr, readonly) = cai["typestr"], cai["data"]
        dtype = np.dtype(typestr)
    except (KeyError, TypeError, ValueError) as e:
        raise LaunchError(f"{where}: a malformed __cuda_array_interface__ ({e})") from None
    _expect(_np_dtype_is(dtype, want), where, want, typestr)
    if written and readonly:
        raise LaunchError(f"{where}: the kernel may write to this tensor but the array is read-only")
    count = int(np.prod(shape)) if shape else 1
    strides = cai.get("strides")
    if strides is not None and count > 1:
        expect, step = [], dtype.itemsize
        for s in reversed(shape):
            expect.append(step)
            step *= s
        _contiguous(all(st == e or n == 1 for st, e, n in zip(strides, reversed(expect), shape)), where)
    if count and ptr:
        _expect_device(ordinal_of(int(ptr)), ordinal, where)
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    return DeviceView(int(ptr or 0), count, count * dtype.itemsize, int(stream) if stream else None, obj)


def _np_dtype_is(npdt: Any, want: D.DType) -> bool:
    try:
        return D.from_numpy(npdt) == want
    except (TypeError, ValueError):
        return False


def _expect(ok: bool, where: str, want: D.DType, got: str) -> None:
    if not ok:
        raise LaunchError(f"{where}: expects {want.name} elements, got an array of {got}; convert it first")


def _expect_device(got: int, ordinal: int, where: str) -> None:
    if got != ordinal:
        place = "host memory" if got < 0 else f"GPU {got}"
        raise LaunchError(f"{where}: the array lives on {place}, but this device is GPU {ordinal}; "
                          f"move it (e.g. tensor.to('cuda:{ordinal}'))")


def _contiguous(ok: bool, where: str) -> None:
    if not ok:
        raise LaunchError(f"{where}: expects a C-contiguous array, got a strided view; pass a contiguous copy "
                          f"(.contiguous() / np.ascontiguousarray(...)); the kernel writes into the array it is given")
