"""What a kernel expression evaluates to while it is being lowered.

An expression is either known at compile time (:class:`Py`: a Python int,
float, bool, dtype, module, builtin...) and folds, or it is an IR value
(:class:`RV`), or one of the frontend-only aggregates: a tensor or shared
array (:class:`TensorRef`), an element address (:class:`ElemRef`, only as
the first argument of ``load``/``store``/atomics), a register array
(:class:`RegArray`) or a tuple (:class:`TupleVal`).
"""

from __future__ import annotations

import types as pytypes
from dataclasses import dataclass
from typing import Any, Union

from ..core.dtypes import DType
from ..core.ir import Value
from ..core.types import FragmentType, IRType, ScalarType, TensorType, VectorType


@dataclass(frozen=True)
class Py:
    """A compile-time Python value.  Numbers are *weak*: they adopt the other operand's type."""

    value: Any

    @property
    def is_number(self) -> bool:
        return isinstance(self.value, (int, float)) and not isinstance(self.value, bool)


@dataclass(frozen=True)
class RV:
    """An IR value: a scalar, a vector or a matrix fragment."""

    value: Value

    @property
    def type(self) -> IRType:
        return self.value.type

    @property
    def dtype(self) -> DType:
        t = self.value.type
        assert isinstance(t, (ScalarType, VectorType, FragmentType))
        return t.dtype

    @property
    def is_scalar(self) -> bool:
        return isinstance(self.value.type, ScalarType)


@dataclass(frozen=True)
class TensorRef:
    """A global tensor parameter or a shared array; ``name`` is the user's name for messages."""

    value: Value
    name: str

    @property
    def type(self) -> TensorType:
        t = self.value.type
        assert isinstance(t, TensorType)
        return t

    @property
    def is_shared(self) -> bool:
        return self.type.space == "shared"


@dataclass(frozen=True)
class ElemRef:
    """The address ``tensor[index]``; only ``load``, ``store`` and atomics take one."""

    tensor: TensorRef
    index: RV


@dataclass(frozen=True)
class RegArray:
    """A register array: one ``var`` slot per element, indexed at compile time."""

    slots: tuple[Value, ...]
    elem: IRType
    name: str


@dataclass(frozen=True)
class TupleVal:
    """A tuple of values (a tuple expression or a helper's several results)."""

    items: tuple["FValue", ...]


FValue = Union[Py, RV, TensorRef, ElemRef, RegArray, TupleVal]


#: Why a host array cannot be used inside a kernel, and what to do instead.
HOST_ARRAY_HINT = ("a kernel sees only its arguments on the device: pass the array as an argument "
                   "(a Tensor[...] parameter) and index that")


def is_host_array(x: object) -> bool:
    """A numpy (or numpy-like) array: something with a shape and a dtype that is no kernel value."""
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__getitem__")


def describe(v: FValue) -> str:
    """A short description of a value for error messages."""
    if isinstance(v, Py):
        x = v.value
        if isinstance(x, DType):
            return f"the dtype {x.name}"
        if isinstance(x, pytypes.ModuleType):
            return f"the module {x.__name__}"
        if isinstance(x, (bool, int, float)):
            return f"the constant {x!r}"
        if isinstance(x, str):
            return f"the string {x!r}"
        if x is None:
            return "None"
        if is_host_array(x):
            return f"a host array ({type(x).__name__} of shape {tuple(x.shape)}) from outside the kernel"
        return f"the Python object {type(x).__name__}"
    if isinstance(v, RV):
        t = v.type
        if isinstance(t, FragmentType):
            return f"a fragment {t}"
        return f"a value of type {t}"
    if isinstance(v, TensorRef):
        kind = "shared array" if v.is_shared else "tensor"
        return f"the {kind} '{v.name}' ({v.type})"
    if isinstance(v, ElemRef):
        return f"an element of '{v.tensor.name}'"
    if isinstance(v, RegArray):
        return f"the register array '{v.name}' of {len(v.slots)} x {v.elem}"
    return f"a tuple of {len(v.items)} values"
