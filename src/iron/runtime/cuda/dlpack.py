"""Reading a CUDA array through DLPack (``__dlpack__`` / ``__dlpack_device__``), with ctypes.

Used for producers that offer neither ``data_ptr()`` nor
``__cuda_array_interface__``.  The consumer passes the stream it will use
(``__dlpack__(stream=...)``) so that the producer orders its pending work
before it.  The capsule is kept, not consumed: while it lives, the producer
keeps the memory alive, and when it is dropped the producer's own capsule
destructor releases it.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ...core import dtypes as D
from ...core.errors import LaunchError

#: DLDeviceType values that are CUDA memory: kDLCUDA, kDLCUDAHost, kDLCUDAManaged.
CUDA_TYPES = {2: "CUDA", 3: "CUDA host", 13: "CUDA managed"}
_CODES = {0: "i", 1: "u", 2: "f", 4: "bf", 6: "bool"}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


def is_cuda(obj: Any) -> bool:
    try:
        device_type, _ = obj.__dlpack_device__()
    except Exception:
        return False
    return int(device_type) == 2


def dtype_of(code: int, bits: int, lanes: int) -> D.DType | None:
    """The Iron dtype of a DLPack dtype, or None."""
    if lanes != 1 or code not in _CODES:
        return None
    kind = _CODES[code]
    name = "bool" if kind == "bool" else f"{kind}{bits}"
    try:
        return D.by_name(name)
    except ValueError:
        return None


def tensor_of(capsule: Any) -> DLTensor:
    """The DLTensor a "dltensor" capsule points at (its DLManagedTensor starts with it)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    address = get(capsule, b"dltensor")
    return DLTensor.from_address(address)


def view(obj: Any, want: D.DType, ordinal: int, where: str, stream: int) -> Any:
    """A :class:`~.interop.DeviceView` of ``obj``'s memory, read through DLPack."""
    from .interop import DeviceView

    try:
        capsule = obj.__dlpack__(stream=stream)
    except TypeError:
        capsule = obj.__dlpack__()
    t = tensor_of(capsule)
    got = dtype_of(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    if got != want:
        raise LaunchError(f"{where}: expects {want.name} elements, got a DLPack array of "
                          f"{got.name if got else f'code {t.dtype.code} bits {t.dtype.bits}'}; convert it first")
    if t.device.device_type != 2 or t.device.device_id != ordinal:
        raise LaunchError(f"{where}: the array lives on DLPack device {t.device.device_type}:{t.device.device_id}, "
                          f"but this device is CUDA GPU {ordinal}")
    shape = [t.shape[i] for i in range(t.ndim)]
    count = 1
    for s in shape:
        count *= s
    if t.strides and count > 1:
        step, ok = 1, True
        for i in reversed(range(t.ndim)):
            ok = ok and (shape[i] == 1 or t.strides[i] == step)
            step *= shape[i]
        if not ok:
            raise LaunchError(f"{where}: expects a C-contiguous array, got a strided DLPack view; pass a "
                              f"contiguous copy")
    ptr = (t.data or 0) + t.byte_offset
    return DeviceView(ptr, count, count * want.itemsize, None, capsule)
