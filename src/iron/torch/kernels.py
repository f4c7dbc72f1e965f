"""A user's ``@iron.kernel`` as a torch op, with one decorator::

    @iron.torch.kernel_op("mylib::scale", grid=lambda x, y, a: (x.numel(),))
    @iron.kernel
    def scale(x: In[f32], y: Tensor[f32], a: f32): ...

    scale(x, y, 2.0)                 # eager: the launch, as scale[grid](x, y, 2.0)
    torch.compile(model)             # traced as torch.ops.mylib.scale, with no graph break

The schema comes from the kernel's signature: read-only tensors (``In[...]``) are inputs, the other tensors
are declared mutated (torch functionalises them under ``torch.compile``), scalars become ``float`` / ``int`` /
``bool`` and typed constexprs their Python type.  The op returns nothing, so its fake does nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..core.errors import LaunchError
from ..jit.kernel import KernelFunction
from ..lang.params import ParamSpec
from ._ops import _compiling, _needs_grad

_CONSTEXPR_TYPES = {int: "int", float: "float", bool: "bool", str: "str"}


def _scalar_type(kernel: str, p: ParamSpec) -> str:
    if p.kind == "constexpr":
        kind = p.constexpr.kind if p.constexpr is not None else None
        if kind not in _CONSTEXPR_TYPES:
            raise LaunchError(f"kernel '{kernel}': constexpr parameter '{p.name}' needs a type to become an op "
                              f"argument: annotate it Constexpr[int], Constexpr[float], Constexpr[bool] or "
                              f"Constexpr[str]")
        return _CONSTEXPR_TYPES[kind]
    elem = p.elem
    if elem is None or not hasattr(elem, "is_float"):  # a type variable: any number
        return "Scalar"
    return "bool" if elem.is_bool else "float" if elem.is_float else "int"


def kernel_schema(kernel: KernelFunction) -> tuple[str, tuple[str, ...]]:
    """The op schema of ``kernel``'s signature and the names of the tensors it may write."""
    parts, written = [], []
    for p in kernel.params:
        if p.kind == "tensor":
            if p.readonly:
                parts.append(f"Tensor {p.name}")
            else:
                parts.append(f"Tensor({chr(ord('a') + len(written))}!) {p.name}")
                written.append(p.name)
        else:
            parts.append(f"{_scalar_type(kernel.name, p)} {p.name}")
    if not written:
        raise LaunchError(f"kernel '{kernel.name}' writes none of its tensors (every one is In[...]); an op "
                          f"of it would have no effect")
    return f"({', '.join(parts)}) -> ()", tuple(written)


class KernelOp:
    """A kernel launched as ``torch.ops.<namespace>.<name>`` while torch.compile traces, directly otherwise."""

    def __init__(self, kernel: KernelFunction, qualname: str, grid: Any, group: Any = None):
        if "::" not in qualname:
            raise LaunchError(f"kernel_op: name the op 'namespace::name' (e.g. 'mylib::{kernel.name}'), got "
                              f"{qualname!r}")
        self.kernel = kernel
        self.qualname = qualname
        self.grid = grid
        self.group = group
        schema, self.written = kernel_schema(kernel)
        self.op = torch.library.custom_op(qualname, self._launch, mutates_args=self.written, schema=schema)
        self.op.register_fake(lambda *args: None)
        self.__name__ = kernel.name
        self.__doc__ = kernel.__doc__

    def _geometry(self, value: Any, args: tuple) -> Any:
        return value(*args) if callable(value) else value

    def _launch(self, *args: Any) -> None:
        self.kernel.launch(*args, grid=self._geometry(self.grid, args), group=self._geometry(self.group, args))

    def __call__(self, *args: Any) -> None:
        if _compiling() or _needs_grad(args, {}):
            self.op(*args)
        else:
            self._launch(*args)

    def __repr__(self) -> str:
        return f"<iron.torch kernel op {self.qualname} of {self.kernel!r}>"


def kernel_op(name: str, *, grid: Sequence[int] | int | Callable[..., Any],
              group: Sequence[int] | int | Callable[..., Any] | None = None) -> Callable[[KernelFunction], KernelOp]:
    """Make the decorated ``@iron.kernel`` the torch op ``name`` ("namespace::name").  ``grid`` and ``group``:
    the launch geometry, or functions of the call's arguments (in the kernel's order) that give it."""

    def decorate(kernel: KernelFunction) -> KernelOp:
        if not isinstance(kernel, KernelFunction):
            raise LaunchError(f"kernel_op: decorate an @iron.kernel (put @iron.kernel below it), got "
                              f"{type(kernel).__name__}")
        return KernelOp(kernel, name, grid, group)

    return decorate
