"""What the library's host functions share: reading an argument's dtype, allocating an output of the
same kind (numpy on the host, torch/CuPy/Iron arrays on the device), and launch geometry.

The host functions accept whatever a launch accepts (docs/cuda.md "Interop"); an output they allocate
lives where the input lives, so ``softmax(torch_tensor_on_gpu)`` returns a tensor on the same GPU.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..codegen.mma import CUDA_MMA_SYNC_M16N8K16
from ..core import dtypes as D
from ..core.errors import LaunchError
from ..jit.device import device_traits
from ..lang.numpy_compat import array_element_type
from ._plans import recording

#: Bytes one thread moves per access in the memory-bound kernels: one 128-bit load or store.
VECTOR_BYTES = 16
#: Float dtypes every library kernel is stamped for.
FLOATS = (D.f32, D.f16, D.bf16)
#: What cast.py converts between: the floats and the 8-bit floats.
CAST_FLOATS = (*FLOATS, D.f8e4m3, D.f8e5m2)


#: The most elements one array of a launch may hold: the kernels index with i32 (the runtimes reject more).
MAX_ELEMENTS = 2**31 - 1


def leading_rows(x: Any, start: int, stop: int, what: str) -> Any:
    """``x[start:stop]``, the view of rows ``start`` .. ``stop`` of ``x``'s first axis, for a host function that
    launches on parts of its arguments (a call plan does not replay such a call: the view is not at ``x``'s
    address, :mod:`._plans`)."""
    try:
        return x[start:stop]
    except (TypeError, IndexError, KeyError) as err:
        raise LaunchError(f"{what}: a {type(x).__name__} that cannot be sliced along its first axis ({err}); "
                          f"pass a numpy array, a torch tensor or a CuPy array") from None


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tuned_for_cuda_mma(backend: str | None, like: Sequence[Any] = ()) -> bool:
    """Whether the device a launch with ``backend`` on arrays ``like`` these runs on multiplies on NVIDIA's
    mma.sync tensor cores: where the kernels' CUDA-specific shapes (wide gemv groups, 16-lane attention teams,
    64-query prefill blocks) were measured."""
    return device_traits(backend, like).matrix_unit is CUDA_MMA_SYNC_M16N8K16


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


_DTYPE_ALIASES = {"float32": "f32", "float": "f32", "float16": "f16", "half": "f16", "bfloat16": "bf16",
                  "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


def float_dtype(dtype: Any, fn: str, allowed: tuple[D.DType, ...] = FLOATS) -> D.DType:
    """The float dtype a host function ``fn`` is asked for: an Iron dtype, its name ("bf16"), a numpy dtype or a
    torch dtype (``torch.bfloat16``); a LaunchError names ``fn`` otherwise."""
    if isinstance(dtype, D.DType):
        dt = dtype
    elif isinstance(dtype, str) or type(dtype).__module__ == "torch":
        name = str(dtype).removeprefix("torch.")
        try:
            dt = D.by_name(_DTYPE_ALIASES.get(name, name))
        except ValueError:
            raise LaunchError(f"{fn}: unknown dtype {dtype!r}; use {_names(allowed)}") from None
    else:
        try:
            dt = D.from_numpy(dtype)
        except (ValueError, TypeError):
            raise LaunchError(f"{fn}: unknown dtype {dtype!r}; use {_names(allowed)}") from None
    if dt not in allowed:
        raise LaunchError(f"{fn}: dtype must be {_names(allowed)}, got {dt.name}")
    return dt


def check_float(x: Any, what: str = "input", allowed: tuple[D.DType, ...] = FLOATS) -> D.DType:
    dt = dtype_of(x, what)
    if dt not in allowed:
        raise LaunchError(f"{what}: the library kernel takes {_names(allowed)}; got {dt.name}")
    return dt


def _names(dtypes: tuple[D.DType, ...]) -> str:
    """"f32, f16 or bf16"."""
    return ", ".join(d.name for d in dtypes[:-1]) + f" or {dtypes[-1].name}"


def shape_of(x: Any) -> tuple[int, ...]:
    shape = getattr(x, "shape", None)
    if shape is None and hasattr(x, "__cuda_array_interface__"):
        shape = x.__cuda_array_interface__["shape"]
    if shape is None:
        raise LaunchError(f"expected an array with a shape, got {type(x).__name__}")
    return tuple(map(int, shape))


def size_of(x: Any) -> int:
    return math.prod(shape_of(x))


def empty_like(x: Any, shape: int | Sequence[int] | None = None, dtype: D.DType | None = None) -> Any:
    """An uninitialised array of ``shape`` and ``dtype`` (default: ``x``'s) of ``x``'s kind and device: a host
    function's scratch (its call plan allocates it again on every call, :mod:`._plans`)."""
    made = allocate(x, shape, dtype)
    record = recording()
    if record is not None:
        record.scratch(x, shape, dtype, made)
    return made


def view(x: Any, make: Callable[[Any], Any]) -> Any:
    """``make(x)``, a view of ``x`` at ``x``'s address that a host function makes (its call plan makes it again
    where it needs the array, and launches by ``x``'s address where it needs only that)."""
    made = make(x)
    record = recording()
    if record is not None:
        record.view(x, make, made)
    return made


def unread(x: Any, dtype: D.DType) -> Any:
    """An argument a launch passes but its kernel never reads or writes (a pass's partials where one pass is
    all, the prefill's offsets for dense tensors), as ``dtype``.  A torch tensor: ``x``'s own bytes seen as
    ``dtype`` (one view, 1.2 us of host time as measured for the prefill's offsets, which a call plan does not
    even replay: it launches by ``x``'s address, :func:`view`); the view spans exactly ``x``'s bytes, which the
    aliasing rule takes as the same buffer.  Anything else, or a tensor that cannot be seen so (its last
    dimension strided or not a whole number of ``dtype``): one allocated element (a numpy one is copied to the
    device and back by a device launch, so a view of ``x`` would copy ``x`` again)."""
    return view(x, functools.partial(_seen_as, dtype=dtype))


def _seen_as(x: Any, dtype: D.DType) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        try:
            return x.view(getattr(torch, _TORCH_DTYPES[dtype.name]))
        except RuntimeError:
            pass
    return allocate(x, 1, dtype)


def bytes_as(x: Any, dtype: D.DType) -> Any:
    """``x``'s bytes seen as a 1-D array of ``dtype`` (little-endian; the byte count a whole number of ``dtype``),
    for a kernel that reads them in wider words than ``x``'s elements: numpy, torch and CuPy arrays through their
    own views (of a contiguous copy where ``x`` is strided), any other device array through an object exposing
    the same memory."""
    return view(x, functools.partial(_bytes_as, dtype=dtype))


def _bytes_as(x: Any, dtype: D.DType) -> Any:
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        x = np.ascontiguousarray(x)
        if x.ctypes.data % dtype.itemsize:  # a slice off the word boundary: an aligned copy
            x = x.copy()
        return x.reshape(-1).view(D.numpy_dtype(dtype))
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return x.contiguous().reshape(-1).view(getattr(torch, _TORCH_DTYPES[dtype.name]))
    if type(x).__module__.split(".")[0] == "cupy":
        return x.ravel().view(D.numpy_dtype(dtype))
    return _DeviceBytes(x, dtype)


class _DeviceBytes:
    """A contiguous device array's memory as a 1-D array of another dtype (``__cuda_array_interface__``); keeps
    the array alive."""

    __slots__ = ("base", "__cuda_array_interface__")

    def __init__(self, base: Any, dtype: D.DType) -> None:
        interface = getattr(base, "__cuda_array_interface__", None)
        if not isinstance(interface, dict) or not is_contiguous(base):
            raise LaunchError(f"cannot read a {kind_of(base)} as {dtype.name} words: pass a contiguous numpy "
                              f"array, torch tensor, CuPy array or device array")
        nbytes = size_of(base) * dtype_of(base).itemsize
        self.base = base
        self.__cuda_array_interface__ = {**interface, "shape": (nbytes // dtype.itemsize,), "strides": None,
                                         "typestr": D.numpy_dtype(dtype).str}


def allocator(x: Any, shape: int | Sequence[int] | None, dtype: D.DType | None) -> Callable[[Any], Any]:
    """``allocate(like, shape, dtype)`` for arrays ``like`` of ``x``'s type, with everything but the device
    decided now (a call plan allocates with it on every call)."""
    torch = sys.modules.get("torch")
    if torch is not None and type(x) is torch.Tensor:
        size = shape_of(x) if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        kind = getattr(torch, _TORCH_DTYPES[(dtype or dtype_of(x)).name])
        if size == tuple(x.shape) and kind is x.dtype and x.is_contiguous():
            return torch.empty_like  # like's twin (the signature holds its shape, dtype and layout): no parsing
        empty, device = torch.empty, x.device  # the signature holds every array's device: like's is x's
        return lambda like: empty(size, dtype=kind, device=device)
    return lambda like: allocate(like, shape, dtype)


def allocate(x: Any, shape: int | Sequence[int] | None = None, dtype: D.DType | None = None) -> Any:
    """:func:`empty_like`, unrecorded."""
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
                 "u8": "uint8", "i8": "int8", "f64": "float64", "u32": "uint32"}


def check_shape(x: Any, shape: Sequence[int], what: str) -> None:
    got = shape_of(x)
    if tuple(got) != tuple(shape):
        raise LaunchError(f"{what}: expected shape {tuple(shape)}, got {got}")


# ---------------------------------------------------------------- the user's out= (and residual_out=)

def output(fn: str, out: Any, like: Any, shape: Sequence[int], dtype: D.DType, reads: dict[str, Any],
           in_place: Sequence[str] = (), name: str = "out") -> Any:
    """``out`` checked under the user's names, or (None) a new array of ``shape`` and ``dtype`` like ``like``.

    Checked before any launch, so the error names ``fn`` and ``name`` (not a kernel's parameter) and
    nothing has run: ``out`` must be an array of ``like``'s kind and device, of ``shape`` and ``dtype``,
    C-contiguous, and must not overlap any array of ``reads`` (the inputs, by the user's names) --
    except that it may be exactly an input listed in ``in_place`` (same memory, shape and dtype), for
    the kernels whose threads each read an element before writing only that element.  The GPU
    backends run threads concurrently, so a kernel reading what another thread writes would give
    wrong results there while the interpreter, in lock-step, got them right.
    """
    made = _output(fn, out, like, shape, dtype, reads, in_place, name)
    record = recording()
    if record is not None:
        record.output(fn, out, like, shape, dtype, reads, in_place, name, made)
    return made


def _output(fn: str, out: Any, like: Any, shape: Sequence[int], dtype: D.DType, reads: dict[str, Any],
            in_place: Sequence[str], name: str) -> Any:
    if out is None:
        return allocate(like, shape, dtype)
    what = f"{fn}: {name}"
    got = dtype_of(out, what)
    if kind_of(out) != kind_of(like):
        raise LaunchError(f"{what} is a {kind_of(out)}, the input a {kind_of(like)}: pass {name} of the same "
                          f"kind (or leave {name}=None to allocate it)")
    device, in_device = getattr(out, "device", None), getattr(like, "device", None)
    if kind_of(out) == "torch tensor" and device != in_device:
        raise LaunchError(f"{what} is on {device}, the input on {in_device}: pass {name} on the same device")
    if got != dtype:
        raise LaunchError(f"{what} has dtype {got.name}; {fn} writes {dtype.name} there")
    if shape_of(out) != tuple(shape):
        raise LaunchError(f"{what} has shape {shape_of(out)}; {fn} writes shape {tuple(shape)} there")
    if not is_contiguous(out):
        raise LaunchError(f"{what} must be C-contiguous (the kernel writes it as one flat buffer)")
    for input_name, x in reads.items():
        if x is None or x is out and input_name in in_place or not overlaps(out, x):
            continue
        if input_name in in_place and same_memory(out, x):
            continue
        allowed = f" ({name}={input_name} itself is allowed)" if input_name in in_place else ""
        raise LaunchError(f"{what} overlaps {input_name}: {fn} cannot write its result over the memory it reads"
                          f"{allowed}; pass a separate {name} (or leave it None)")
    return out


def kind_of(x: Any) -> str:
    """What sort of array ``x`` is, as an error says it (decided once per type: every call asks)."""
    t = type(x)
    kind = _KINDS.get(t)
    if kind is None:
        module = t.__module__.split(".")[0]
        kind = _KINDS[t] = {"numpy": "numpy array", "torch": "torch tensor", "cupy": "CuPy array"}.get(
            module, t.__name__)
    return kind


_KINDS: dict[type, str] = {}


def is_contiguous(x: Any) -> bool:
    flags = getattr(x, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    if hasattr(x, "is_contiguous"):
        return bool(x.is_contiguous())
    cai = getattr(x, "__cuda_array_interface__", None)
    if isinstance(cai, dict) and cai.get("strides") is not None:
        itemsize = int(cai["typestr"][2:])
        want = itemsize
        for extent, stride in reversed(list(zip(cai["shape"], cai["strides"]))):
            if extent > 1 and stride != want:
                return False
            want *= extent
    return True


def starts_aligned(x: Any, align: int) -> bool:
    """Whether ``x``'s first element sits on an ``align``-byte boundary (tile copies read from 16-byte ones)."""
    span = _span(x)
    return span is not None and span[1] % align == 0


def device_starts_off(x: Any, align: int) -> bool:
    """Whether ``x`` is an array a GPU reads in place (not a host one: the interpreter and Vulkan copy those into
    buffers of their own) whose first element is off an ``align``-byte boundary."""
    span = _span(x)
    return span is not None and str(span[0]) not in ("host", "cpu") and span[1] % align != 0


def _span(x: Any) -> tuple[Any, int, int] | None:
    """(address space, first byte, one past the last byte) of an array's elements; None when empty or unknown.
    How to read it is decided once per type (every call with ``out=`` asks, for each input)."""
    reader = _SPANS.get(type(x))
    if reader is None:
        reader = _SPANS[type(x)] = _span_reader(x)
    return reader(x)


def _span_reader(x: Any) -> Callable[[Any], tuple[Any, int, int] | None]:
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        return _numpy_span
    if hasattr(type(x), "data_ptr") and hasattr(type(x), "stride"):  # torch
        return _torch_span
    return _interface_span  # reads the attribute per object: None for one without it


def _numpy_span(x: Any) -> tuple[Any, int, int] | None:
    if x.size == 0:
        return None
    np = sys.modules["numpy"]
    lo, hi = np.lib.array_utils.byte_bounds(x) if hasattr(np.lib, "array_utils") else np.byte_bounds(x)
    return "host", lo, hi


def _torch_span(x: Any) -> tuple[Any, int, int] | None:
    count = x.numel()
    if count == 0:
        return None
    start, size = x.data_ptr(), x.element_size()
    if x.is_contiguous():  # the common case, without a walk over the strides
        return x.device, start, start + count * size
    lo = start + size * sum(min(0, (n - 1) * st) for n, st in zip(x.shape, x.stride()))
    hi = start + size * (1 + sum(max(0, (n - 1) * st) for n, st in zip(x.shape, x.stride())))
    return x.device, lo, hi


def _interface_span(x: Any) -> tuple[Any, int, int] | None:
    cai = getattr(x, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        return None
    shape = tuple(cai["shape"])
    if any(n == 0 for n in shape):
        return None
    itemsize = int(cai["typestr"][2:])
    strides = cai.get("strides")
    if strides is None:
        strides, step = [], itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    start = int(cai["data"][0])
    lo = start + sum(min(0, (n - 1) * st) for n, st in zip(shape, strides))
    hi = start + itemsize + sum(max(0, (n - 1) * st) for n, st in zip(shape, strides))
    return ("cuda", getattr(x, "device", None).__repr__()), lo, hi


_SPANS: dict[type, Callable[[Any], tuple[Any, int, int] | None]] = {}


def overlaps(a: Any, b: Any) -> bool:
    """Whether two arrays may share memory (numpy's bounds check; address ranges for device arrays)."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.size > 0 and b.size > 0 and bool(np.may_share_memory(a, b))
    sa, sb = _span(a), _span(b)
    return sa is not None and sb is not None and sa[0] == sb[0] and sa[1] < sb[2] and sb[1] < sa[2]


def same_memory(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same elements: the same address range, shape and dtype (an in-place call)."""
    return _span(a) == _span(b) and shape_of(a) == shape_of(b) and dtype_of(a) == dtype_of(b)


__all__ = ["FLOATS", "MAX_ELEMENTS", "VECTOR_BYTES", "ceil_div", "check_float", "check_shape", "dtype_of",
           "empty_like", "float_dtype", "is_contiguous", "kind_of", "leading_rows", "output", "overlaps",
           "same_memory", "shape_of", "size_of", "vector_width"]
