"""How a Python function becomes a ``torch.library`` custom op in two forms: a functional op that returns new
tensors, and an ``_out`` op that writes the tensors it is given and declares them mutated.

Both run the same function.  Called eagerly, the public function runs it directly (a custom op's dispatch
costs more host time than an Iron launch); while ``torch.compile`` traces, or when an input asks for
gradients (so that torch refuses: these ops have no derivative), the call goes through the op.  The fake
(meta) implementation of the functional op is the contract's shape rule; the ``_out`` op makes no tensor,
so its fake does nothing.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..core.errors import LaunchError

#: The namespace of the library's ops: ``torch.ops.iron.softmax``.
NAMESPACE = "iron"


def _needs_grad(args: tuple, kwargs: dict[str, Any]) -> bool:
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in (*args, *kwargs.values()))


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _schema(fn: Callable[..., Any], drop: Sequence[str]) -> str:
    """The functional schema of ``fn``'s annotated signature without the parameters ``drop``."""
    sig = inspect.signature(fn)
    kept = [p for name, p in sig.parameters.items() if name not in drop]

    def probe() -> None:  # a signature of its own to rewrite, leaving ``fn`` as it is
        pass

    probe.__signature__ = sig.replace(parameters=kept)  # type: ignore[attr-defined]
    return torch.library.infer_schema(probe, mutates_args=())


def _out_schema(functional: str, outs: Sequence[str]) -> str:
    """``(args) -> R`` with each of ``outs`` appended as a mutated tensor, returning nothing.  The defaults are
    dropped (a schema allows no plain argument after a defaulted one): the op is called with every argument."""
    args = [_without_default(a) for a in _split_arguments(functional[1:functional.rindex(") ->")])]
    args += [f"Tensor({chr(ord('a') + i)}!) {name}" for i, name in enumerate(outs)]
    return f"({', '.join(args)}) -> ()"


def _split_arguments(text: str) -> list[str]:
    """The comma-separated arguments of a schema, commas inside brackets (``int[2] s=[1, 1]``) kept."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + [tail] if tail else parts


def _without_default(argument: str) -> str:
    return argument.split("=", 1)[0]


class LibraryOp:
    """One function registered as ``iron::name`` and ``iron::name_out``; calling it runs the eager path or the
    op (see the module docstring).  ``outs``: the function's keyword parameters that take output tensors, in
    the order it returns them; ``fake``: the shapes and dtypes of the outputs, from the bound arguments."""

    def __init__(self, fn: Callable[..., Any], fake: Callable[[dict[str, Any]], Any], outs: Sequence[str] = ("out",),
                 name: str | None = None, namespace: str = NAMESPACE):
        self.fn = fn
        self.name = name or fn.__name__
        self.outs = tuple(outs)
        self.signature = inspect.signature(fn)
        self.inputs = [n for n in self.signature.parameters if n not in self.outs]
        self._input_signature = self.signature.replace(
            parameters=[p for n, p in self.signature.parameters.items() if n not in self.outs])
        functional = _schema(fn, self.outs)
        self.functional = torch.library.custom_op(f"{namespace}::{self.name}", self._run, mutates_args=(),
                                                  schema=functional)
        self.functional.register_fake(lambda *a, **k: fake(self._bound(a, k)))
        self.writing = torch.library.custom_op(f"{namespace}::{self.name}_out", self._write,
                                               mutates_args=self.outs, schema=_out_schema(functional, self.outs))
        self.writing.register_fake(lambda *a: None)
        functools.update_wrapper(self, fn)

    def _bound(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The op's arguments by name, defaults filled in (what a fake rule reads)."""
        bound = self._input_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.arguments

    def _run(self, *args: Any) -> Any:
        return self.fn(*args)

    def _write(self, *args: Any) -> None:
        k = len(self.outs)
        self.fn(*args[:-k], **dict(zip(self.outs, args[-k:])))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not (_compiling() or _needs_grad(args, kwargs)):
            return self.fn(*args, **kwargs)
        given = [kwargs.pop(name, None) for name in self.outs]
        if all(g is None for g in given):
            return self.functional(*args, **kwargs)
        if any(g is None for g in given):
            missing = [n for n, g in zip(self.outs, given) if g is None]
            raise LaunchError(f"iron.torch.{self.name}: as a torch op (under torch.compile, or with inputs that "
                              f"need gradients) it takes every output or none (missing: {', '.join(missing)})")
        bound = self.signature.bind_partial(*args, **kwargs)
        self.writing(*[bound.arguments.get(n, self.signature.parameters[n].default) for n in self.inputs], *given)
        return given[0] if len(given) == 1 else tuple(given)

    def __repr__(self) -> str:
        return f"<iron.torch op {NAMESPACE}::{self.name}>"


def library_op(fake: Callable[[dict[str, Any]], Any], outs: Sequence[str] = ("out",),
               name: str | None = None) -> Callable[[Callable[..., Any]], LibraryOp]:
    """Register the decorated function as ``iron::<name>`` and ``iron::<name>_out`` (see :class:`LibraryOp`)."""
    return lambda fn: LibraryOp(fn, fake, outs, name)
