"""What a launch takes, in call order, and how each scalar reaches the parameter block.

A :class:`Signature` is the part of a kernel a launch needs: each
parameter's name, whether it is a tensor, its dtype and whether the kernel
writes it.  It comes from the IR (:func:`of_kernel`) or, for kernels loaded
ahead of time, from the ABI in a build's manifest (:func:`of_abi`), so the
same binding code serves both.  Scalars are checked exactly as the
interpreter checks them (same errors, same rounding to the parameter's
dtype), then widened to their storage type (:mod:`iron.codegen.abi`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from ...codegen.abi import KernelABI, storage_dtype
from ...core import dtypes as D
from ...core.ir import Kernel
from ...core.types import ScalarType, TensorType


@dataclass(frozen=True)
class ParamSpec:
    name: str
    is_tensor: bool
    dtype: D.DType
    #: Tensors: whether the kernel may write it (then the aliasing rule and copy-back apply).
    written: bool = False


@dataclass(frozen=True)
class Signature:
    kernel: str
    params: tuple[ParamSpec, ...]

    def names(self) -> str:
        return ", ".join(p.name for p in self.params)


def of_kernel(kernel: Kernel) -> Signature:
    """The signature of an IR kernel (after the pass pipeline)."""
    specs = []
    for p in kernel.params:
        t = p.type
        if isinstance(t, TensorType):
            written = p.access != "read" if p.access is not None else not t.readonly
            specs.append(ParamSpec(p.name, True, t.dtype, written))
        elif isinstance(t, ScalarType):
            specs.append(ParamSpec(p.name, False, t.dtype))
        else:  # pragma: no cover - the frontend makes only tensor and scalar parameters
            raise TypeError(f"parameter {p.name} of type {t} cannot be bound at launch")
    return Signature(kernel.name, tuple(specs))


def of_abi(name: str, abi: KernelABI, order: list[str] | None = None) -> Signature:
    """The signature of an ABI (from a manifest): in ``order`` when given, else tensors then scalars."""
    specs = {t.name: ParamSpec(t.name, True, t.dtype, t.access != "read") for t in abi.tensors}
    specs.update({f.name: ParamSpec(f.name, False, f.dtype) for f in abi.fields if f.kind == "param"})
    names = order if order is not None else list(specs)
    missing = [n for n in names if n not in specs]
    if missing or len(names) != len(specs):
        raise ValueError(f"parameter order {names} does not match the ABI's parameters {list(specs)}")
    return Signature(name, tuple(specs[n] for n in names))


_F32_MAX = 3.4028234663852886e38
#: numpy scalar types a short path takes as they are (their values are exact in the parameter's type).
_NUMPY_INTS = frozenset({np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64})
_NUMPY_BOOL = np.bool_
_NUMPY_F32 = np.float32
_NUMPY_FLOATS = frozenset({np.float16, np.float32, np.float64})


def scalar_converter(kernel: str, spec: ParamSpec) -> Callable[[Any], int | float]:
    """A function from a launch argument to the value stored in the parameter block.

    Python bools, ints and floats in range, and numpy scalars whose values the parameter's dtype holds
    exactly (an ``np.float32`` for an f32, a numpy integer in range for an integer), take a short path;
    everything else (narrow dtypes, out-of-range values, wrong types) goes through the interpreter's check,
    which rounds to the dtype or raises the interpreter's LaunchError.
    """
    dt = spec.dtype
    slow = _checked(kernel, spec)
    if dt.is_int and dt.bits >= 32:
        lo, hi = D.min_value(dt), D.max_value(dt)
        ints = _NUMPY_INTS

        def integer(v: Any) -> int | float:
            t = type(v)
            if t is int:
                if lo <= v <= hi:
                    return v
            elif t in ints and lo <= v <= hi:
                return int(v)
            return slow(v)
        return integer
    if dt.is_bool:  # stored as a 32-bit 0 / 1
        return lambda v: int(v) if type(v) is bool or type(v) is _NUMPY_BOOL else slow(v)
    if dt == D.f64:
        exact64 = _NUMPY_FLOATS
        return lambda v: v if type(v) is float else float(v) if type(v) in exact64 else slow(v)
    if dt == D.f32:
        f32 = _NUMPY_F32
        return lambda v: (v if type(v) is float and -_F32_MAX <= v <= _F32_MAX else float(v) if type(v) is f32
                          else slow(v))
    return slow


def _checked(kernel: str, spec: ParamSpec) -> Callable[[Any], int | float]:
    from ..interp.args import _bind_scalar

    k, p = SimpleNamespace(name=kernel), SimpleNamespace(name=spec.name)
    store = D.numpy_dtype(storage_dtype(spec.dtype))

    def convert(v: Any) -> int | float:
        return _bind_scalar(k, p, spec.dtype, v).astype(store).item()
    return convert
