"""Parameter annotations and variants: ``Tensor[T]``, ``In[T]``, ``Constexpr``, ``TypeVar``, ``variants``.

These are ordinary Python objects: the frontend reads a kernel's annotations
from its source and evaluates them in the function's namespace, so
``Tensor[T]`` must produce something it can inspect (:class:`TensorSpec`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from ..core.dtypes import DType
from .builtins import KernelOnlyError


class TypeVar:
    """A dtype variable (``T``), bound per specialisation from the launch arguments or ``variants``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a type variable needs an identifier as its name, got {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return f"TypeVar({self.name!r})"

    def __call__(self, value: Any) -> Any:
        raise KernelOnlyError(f"{self.name}(x) is a cast that only works inside a kernel, where {self.name} "
                              "is bound to a dtype")


T = TypeVar("T")
U = TypeVar("U")

ElementType = DType | TypeVar


@dataclass(frozen=True)
class TensorSpec:
    """What ``Tensor[T]`` / ``In[T]`` evaluate to: an element type and whether the kernel may write."""

    elem: ElementType
    readonly: bool

    def __repr__(self) -> str:
        return f"{'In' if self.readonly else 'Tensor'}[{self.elem!r}]"


class _TensorAnnotation:
    """``Tensor[dtype]`` (writable) or ``In[dtype]`` (read-only)."""

    def __init__(self, name: str, readonly: bool):
        self._name = name
        self._readonly = readonly

    def __getitem__(self, elem: Any) -> TensorSpec:
        if not isinstance(elem, (DType, TypeVar)):
            raise TypeError(f"{self._name}[...] takes a dtype or a type variable, got {elem!r}")
        return TensorSpec(elem, self._readonly)

    def __repr__(self) -> str:
        return self._name


Tensor = _TensorAnnotation("Tensor", readonly=False)
In = _TensorAnnotation("In", readonly=True)


@dataclass(frozen=True)
class ConstexprSpec:
    """``Constexpr`` or ``Constexpr[int]``: a compile-time parameter; ``kind`` restricts its Python type."""

    kind: type | None = None

    def accepts(self, value: Any) -> bool:
        if self.kind is None:
            return isinstance(value, (bool, int, float, str, DType))
        if self.kind is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, self.kind)

    def __getitem__(self, kind: Any) -> "ConstexprSpec":
        if kind not in (int, float, bool, str, DType):
            raise TypeError(f"Constexpr[...] takes int, float, bool, str or DType, got {kind!r}")
        return ConstexprSpec(kind)

    def __repr__(self) -> str:
        return "Constexpr" if self.kind is None else f"Constexpr[{self.kind.__name__}]"


Constexpr = ConstexprSpec()

#: Python types a variant value may have.
VARIANT_VALUE_TYPES = (DType, bool, int, float, str)


class Variants:
    """The variant parameters of a kernel: an ordered name -> list of values mapping.

    ``bindings()`` is the cartesian product, first parameter varying slowest,
    in the order the values were listed.
    """

    def __init__(self, params: dict[str, list[Any]]):
        for name, values in params.items():
            if not name.isidentifier():
                raise ValueError(f"variant parameter {name!r} is not an identifier")
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"variants({name}=...) takes a non-empty list of values, got {values!r}")
            for v in values:
                if not isinstance(v, VARIANT_VALUE_TYPES):
                    raise ValueError(f"variant value {v!r} of {name} is not a dtype, int, float, bool or str")
            if len(set(map(_tagged, values))) != len(values):
                raise ValueError(f"variants({name}=...) lists a value twice: {list(values)!r}")
        self.params: dict[str, tuple[Any, ...]] = {n: tuple(vs) for n, vs in params.items()}

    def bindings(self) -> list[dict[str, Any]]:
        names = list(self.params)
        return [dict(zip(names, combo)) for combo in itertools.product(*self.params.values())]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={list(vs)!r}" for n, vs in self.params.items())
        return f"variants({inner})"


def variants(**params: list[Any]) -> Variants:
    """Declare variant parameters: ``variants(T=[f32, f16], BLOCK=[128, 256])``."""
    return Variants(params)


def _tagged(value: Any) -> tuple[str, Any]:
    """A key that keeps ``1``, ``1.0`` and ``True`` apart."""
    return (type(value).__name__, value)


def binding_key(binding: dict[str, Any]) -> tuple:
    """A hashable, type-exact key of a binding dict (the cache key of a specialisation)."""
    return tuple(sorted((name, _tagged(value)) for name, value in binding.items()))


def format_binding(binding: dict[str, Any]) -> str:
    return ", ".join(f"{n}={format_value(v)}" for n, v in binding.items()) or "(no parameters)"


def format_value(v: Any) -> str:
    return v.name if isinstance(v, DType) else repr(v)
