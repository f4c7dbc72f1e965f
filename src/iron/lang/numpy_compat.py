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
TORCH_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8",
                "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                "uint64": "u64", "bool": "bool", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
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
                name = TORCH_NAMES.get(str(t.dtype).removeprefix("torch."))
                dt = by_dtype[t.dtype] = D.by_name(name) if name else None
            return dt

        return torch_element
    if hasattr(x, "dtype") and hasattr(x, "shape"):
        return operator.attrgetter("dtype")
    if hasattr(x, "__cuda_array_interface__"):
        return lambda a: a.__cuda_array_interface__.get("typestr")
    return None


def element_signature(args: tuple) -> tuple:
    """``(type, element type and place)`` per array argument and the type of anything else: what decides a
    binding, and with ``backend="auto"`` the device, when every argument is a run-time one (the launch path's
    cache key; kept tight: it runs per launch).  The place is the array's device where it can be on more
    than one (torch: ``get_device()``, -1 in host memory; other device arrays: :func:`array_device`)."""
    out = []
    for a in args:
        t = type(a)
        reader = _signature_readers.get(t, _MISSING)
        if reader is _MISSING:
            reader = _signature_readers[t] = _signature_reader_for(a)
        out.append(t if reader is None else (t, reader(a)))
    return tuple(out)


def arg_signature(a: Any) -> Any:
    """One argument's part of :func:`element_signature`."""
    t = type(a)
    reader = _signature_readers.get(t, _MISSING)
    if reader is _MISSING:
        reader = _signature_readers[t] = _signature_reader_for(a)
    return t if reader is None else (t, reader(a))


def _signature_reader_for(x: Any) -> Callable[[Any], Any] | None:
    element = _readers.get(type(x), _MISSING)
    if element is _MISSING:
        element = _readers[type(x)] = _reader_for(x)
    if element is None:
        return None
    if is_ndarray(x):
        return element  # host memory
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return lambda t: (element(t), t.get_device())
    return lambda a: (element(a), array_device(a))


_signature_readers: dict[type, Callable[[Any], Any] | None] = {int: None, float: None, bool: None}


# ---------------------------------------------------------------- host arrays of other libraries
def host_array(x: Any) -> Any:
    """A numpy view of ``x``'s memory when ``x`` is a torch tensor in host memory (bf16 included, through
    ml_dtypes), so the interpreter reads and writes the caller's tensor in place; ``x`` itself otherwise."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor) or x.device.type != "cpu":
        return x
    t = x.detach()
    try:
        name = TORCH_NAMES.get(str(t.dtype).removeprefix("torch."))
        if name in ("bf16", "f8e4m3", "f8e5m2"):  # numpy has no such dtype: the bits, viewed through ml_dtypes
            from ..core import dtypes as D

            bits = torch.int16 if name == "bf16" else torch.uint8
            return t.view(bits).numpy().view(D.numpy_dtype(D.by_name(name)))
        return t.numpy()
    except (RuntimeError, TypeError) as e:  # conjugate / negative views, dtypes numpy lacks
        from ..core.errors import LaunchError

        raise LaunchError(f"a torch tensor of {t.dtype} the interpreter cannot view as a numpy array ({e}); "
                          f"pass a plain contiguous tensor (.resolve_conj().resolve_neg().contiguous())") from None


# ---------------------------------------------------------------- where an argument's data lives
#: How to tell where an argument's elements live, by the argument's type: a function giving a device name
#: ("cuda", "cuda:1") or None for host memory and scalars.  Launches with ``backend="auto"`` ask per argument.
_placers: dict[type, Callable[[Any], str | None]] = {int: lambda _: None, float: lambda _: None,
                                                     bool: lambda _: None}


def _cuda(ordinal: int) -> str:
    return "cuda" if ordinal == 0 else f"cuda:{ordinal}"


def _torch_device(t: Any) -> str | None:
    index = t.get_device()  # -1 in host memory
    if index < 0:
        return None
    return _cuda(index) if t.is_cuda else f"torch:{t.device.type}"


def _interface_device(x: Any) -> str | None:
    # A type that defines the interface (CuPy, Iron's CudaArray) is a device array without building the dict.
    if not hasattr(type(x), "__cuda_array_interface__") and getattr(x, "__cuda_array_interface__", None) is None:
        return None
    device = getattr(x, "device", None)
    ordinal = getattr(device, "id", None)  # CuPy
    if not isinstance(ordinal, int):
        ordinal = getattr(x, "ordinal", 0)  # Iron's CudaArray; else the default GPU (the binding checks it)
    return _cuda(ordinal if isinstance(ordinal, int) else 0)


def _placer_for(x: Any) -> Callable[[Any], str | None]:
    if is_ndarray(x) or is_numpy_scalar(x):
        return lambda _: None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return _torch_device
    return _interface_device


def array_device(x: Any) -> str | None:
    """The device holding ``x``'s elements ("cuda", "cuda:1"; another torch device as "torch:mps"), or None for
    host memory (numpy, torch CPU tensors) and scalars."""
    placer = _placers.get(type(x))
    if placer is None:
        placer = _placers[type(x)] = _placer_for(x)
    return placer(x)


def data_device(args: Any, names: Any = None, what: str = "the call") -> str | None:
    """The one device that holds the device arrays among ``args`` (None: all in host memory).  Arrays on two
    devices are an error naming them (``names``: the arguments' names, in order)."""
    found: str | None = None
    for a in args:
        placer = _placers.get(type(a))
        if placer is None:
            placer = _placers[type(a)] = _placer_for(a)
        where = placer(a)
        if where is None or where == found:
            continue
        if found is None:
            found = where
            continue
        return _mixed(args, names, what)
    return found


def _mixed(args: Any, names: Any, what: str) -> str:
    from ..core.errors import LaunchError

    names = list(names) if names is not None else [f"argument {i}" for i in range(len(args))]
    placed = [f"{n} on {array_device(a)}" for n, a in zip(names, args) if array_device(a) is not None]
    raise LaunchError(f"{what}: the arrays live on different devices ({', '.join(placed)}); a launch runs on "
                      f"one device: move them to one (tensor.to(...)) first")
