"""Arguments from numpy, torch, CuPy-like and DLPack producers: recognised, checked, bound (no GPU needed)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from cudakernels import add, axpy, half_scale, ir

from iron.core import dtypes as D
from iron.core.errors import LaunchError
from iron.runtime.cuda import dlpack, interop
from iron.runtime.cuda.binding import bind
from iron.runtime.cuda.signature import of_kernel, scalar_converter

OWN_STREAM = 0x5000


class CAI:
    """An object offering only __cuda_array_interface__ (like a Numba device array)."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None, stream=None, version=3, readonly=False):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, readonly),
                                         "strides": strides, "version": version, "stream": stream}


def _bind(k, args, ordinal_of=lambda p: 0):
    sig = of_kernel(ir(k))
    conv = {p.name: scalar_converter(sig.kernel, p) for p in sig.params if not p.is_tensor}
    return bind(sig, args, 0, conv, ordinal_of, OWN_STREAM)


def test_kinds():
    assert interop.kind_of(np.zeros(3)) == "host"
    assert interop.kind_of(bytearray(8)) == "host"
    assert interop.kind_of(CAI(0x1000, (4,))) == "cai"
    assert interop.kind_of(object()) == "other"
    assert interop.kind_of([1.0, 2.0]) == "other"


def test_torch_tensors_bind_by_pointer_with_their_stream(torch):
    x = torch.Tensor(0x10000, 100, torch.float32)
    y = torch.Tensor(0x20000, 100, torch.float32)
    b = _bind(axpy, [x, y, 2.0, 100])
    assert b.kinds == ["torch", "torch", "scalar", "scalar"]
    assert (b.tensors["x"].ptr, b.tensors["y"].nbytes, b.counts["y"]) == (0x10000, 400, 100)
    assert b.streams == [0x77], "torch's current stream, to launch on"
    assert b.scalars == {"a": 2.0, "n": 100}
    cpu = torch.Tensor(0, 4, torch.float32, device=-1)
    assert interop.kind_of(cpu) == "host"


@pytest.mark.parametrize(("change", "message"), [
    ("dtype", "expects f32 elements, got an array of torch.float16"),
    ("device", "lives on GPU 1, but this device is GPU 0"),
    ("strided", "expects a C-contiguous array"),
])
def test_torch_tensors_are_checked(torch, change, message):
    kwargs = {"dtype": torch.float16 if change == "dtype" else torch.float32,
              "device": 1 if change == "device" else 0, "contiguous": change != "strided"}
    bad = torch.Tensor(0x10000, 100, **kwargs)
    with pytest.raises(LaunchError, match=message) as e:
        _bind(axpy, [bad, torch.Tensor(0x20000, 100, torch.float32), 1.0, 1])
    assert "kernel 'axpy', argument 'x'" in str(e.value)


def test_cuda_array_interface_objects():
    b = _bind(add, [CAI(0x1000, (2, 8)), CAI(0x2000, (16,), stream=2), CAI(0x3000, (16,))])
    assert [b.tensors[n].ptr for n in ("x", "y", "out")] == [0x1000, 0x2000, 0x3000]
    assert b.counts["x"] == 16 and b.streams == [2]
    ok_strides = CAI(0x4000, (2, 8), strides=(32, 4))
    assert _bind(add, [ok_strides, CAI(0x2000, (16,)), CAI(0x3000, (16,))]).counts["x"] == 16
    with pytest.raises(LaunchError, match="C-contiguous"):
        _bind(add, [CAI(0x4000, (2, 8), strides=(4, 8)), CAI(0x2000, (16,)), CAI(0x3000, (16,))])
    with pytest.raises(LaunchError, match="expects f32 elements, got an array of <i4"):
        _bind(add, [CAI(0x1000, (16,), "<i4"), CAI(0x2000, (16,)), CAI(0x3000, (16,))])
    with pytest.raises(LaunchError, match="lives on host memory"):
        _bind(add, [CAI(0x1000, (16,)), CAI(0x2000, (16,)), CAI(0x3000, (16,))], ordinal_of=lambda p: -1)
    _bind(add, [CAI(0x1000, (16,), readonly=True), CAI(0x2000, (16,)), CAI(0x3000, (16,))])
    with pytest.raises(LaunchError, match="argument 'out': the kernel may write to this tensor but the array is read"):
        _bind(add, [CAI(0x1000, (16,)), CAI(0x2000, (16,)), CAI(0x3000, (16,), readonly=True)])
    with pytest.raises(LaunchError, match="malformed"):
        bad = CAI(0x1000, (16,))
        del bad.__cuda_array_interface__["typestr"]
        _bind(add, [bad, CAI(0x2000, (16,)), CAI(0x3000, (16,))])


def test_host_arrays_are_checked_like_the_interpreter():
    x = np.zeros(8, np.float32)
    with pytest.raises(LaunchError, match="expects a numpy array of float32 .*got an array of float64"):
        _bind(add, [np.zeros(8), x, x.copy()])
    with pytest.raises(LaunchError, match="C-contiguous"):
        _bind(add, [np.zeros(16, np.float32)[::2], x, x.copy()])
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    _bind(add, [ro, x, x.copy()])  # read-only input: fine
    with pytest.raises(LaunchError, match="may write to this tensor but the array is read-only"):
        _bind(add, [x, x.copy(), ro])
    with pytest.raises(LaunchError, match=r"takes 3 argument\(s\) \(x, y, out\), got 2"):
        _bind(add, [x, x])
    with pytest.raises(LaunchError, match="got str"):
        _bind(add, ["no", x, x.copy()])
    mem = bytearray(np.ones(8, np.float32).tobytes())
    b = _bind(add, [memoryview(mem).cast("f"), x, x.copy()])
    assert isinstance(b.tensors["x"], np.ndarray) and b.tensors["x"].sum() == 8


def test_the_aliasing_rule_holds_for_host_and_device_memory(torch):
    x = np.zeros(16, np.float32)
    _bind(add, [x, x, x])  # the very same buffer: an in-place kernel
    with pytest.raises(LaunchError, match="'x' and 'out' overlap without being the same buffer"):
        _bind(add, [x[1:], x[:-1].copy(), x[:-1]])
    def t(p, n=16):
        return torch.Tensor(p, n, torch.float32)

    _bind(add, [t(0x1000), t(0x1000), t(0x1000)])
    _bind(add, [t(0x1000), t(0x1004), t(0x2000)])  # two inputs may overlap: nothing writes them
    with pytest.raises(LaunchError, match="'y' and 'out' overlap"):
        _bind(add, [t(0x3000), t(0x1000), t(0x1004)])
    with pytest.raises(LaunchError, match="'x' and 'out' overlap"):
        _bind(add, [t(0x1000, 32), t(0x3000), t(0x1040, 4)])
    _bind(add, [t(0x1000, 0), t(0x3000), t(0x1000)])  # an empty tensor overlaps nothing


def test_the_32_bit_element_limit():
    with pytest.raises(LaunchError, match="at most 2147483647 elements"):
        _bind(add, [CAI(0x1000, (2**31,)), CAI(0x2000, (4,)), CAI(0x3000, (4,))])


def _capsule(ptr, shape, code=2, bits=32, device=(2, 0), strides=None):
    """A real "dltensor" capsule over made-up memory (kept alive by the returned tuple)."""
    shape_arr = (ctypes.c_int64 * len(shape))(*shape)
    strides_arr = (ctypes.c_int64 * len(shape))(*strides) if strides else None
    t = dlpack.DLTensor()
    t.data, t.ndim, t.byte_offset = ptr, len(shape), 16
    t.device.device_type, t.device.device_id = device
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
    t.shape = shape_arr
    t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64)) if strides else None
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(t), b"dltensor", None), (t, shape_arr, strides_arr)


class DLProducer:
    def __init__(self, capsule, device=(2, 0)):
        self.capsule, self.device, self.streams = capsule, device, []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.capsule


def test_dlpack_producers():
    cap, _keep = _capsule(0x9000, (4, 4))  # _keep holds the DLTensor the capsule points at
    producer = DLProducer(cap)
    assert interop.kind_of(producer) == "dlpack"
    view = dlpack.view(producer, D.f32, 0, "here", OWN_STREAM)
    assert (view.ptr, view.count, view.nbytes) == (0x9000 + 16, 16, 64)
    assert producer.streams == [OWN_STREAM], "the producer is told the stream the kernel will use"
    assert dlpack.dtype_of(4, 16, 1) == D.bf16 and dlpack.dtype_of(6, 8, 1) == D.bool_
    assert dlpack.dtype_of(2, 32, 4) is None
    with pytest.raises(LaunchError, match="expects f16 elements, got a DLPack array of f32"):
        dlpack.view(producer, D.f16, 0, "here", OWN_STREAM)
    with pytest.raises(LaunchError, match="CUDA GPU 1"):
        dlpack.view(producer, D.f32, 1, "here", OWN_STREAM)
    strided, _keep2 = _capsule(0x9000, (4, 4), strides=(1, 4))
    with pytest.raises(LaunchError, match="strided DLPack"):
        dlpack.view(DLProducer(strided), D.f32, 0, "here", OWN_STREAM)
    assert interop.kind_of(DLProducer(cap, device=(1, 0))) == "other", "a CPU DLPack array without a buffer"


def test_f16_scalars_and_sizes_bind(torch):
    x = torch.Tensor(0x10000, 10, torch.float16)
    b = _bind(half_scale, [x, 0.1, 3])
    assert b.scalars["s"] == float(np.float32(np.float16(0.1))), "rounded to f16, carried as f32"
    assert b.counts["x"] == 10
