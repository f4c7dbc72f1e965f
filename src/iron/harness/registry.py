"""The test and bench registries: ``@test_kernel(kernel, ...)`` and ``@bench(kernel, ...)``.

Decorating a setup callback registers it, when its module is imported, for a kernel and a
matrix of shapes x dtypes x variant bindings; the runner (``python -m iron.runner``) imports the
project's modules (iron.toml ``[iron] modules``) and runs every registered item.  The decorators
return the function unchanged, so one setup can be registered as a test and as a bench.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.dtypes import DType
from ..core.errors import IronError
from .cases import Case, References, Setup, Shape, shape_label

SetupFn = Callable[[Case], Setup]


class RegistryError(IronError):
    """A registration that cannot work (a name used twice, a dtype the kernel has no variant for)."""


def base_kernel(kernel: Any) -> tuple[Any, dict[str, Any]]:
    """The ``@kernel`` object behind ``kernel`` and the binding a ``k.variant(...)`` fixed."""
    if hasattr(kernel, "resolver"):
        return kernel, {}
    inner = getattr(kernel, "kernel", None)
    if inner is not None and hasattr(inner, "resolver"):
        return inner, dict(kernel.binding)
    raise RegistryError(f"{kernel!r} is not an @iron.kernel (or k.variant(...)) object")


def dtype_parameter(kernel: Any) -> tuple[str, list[DType]] | None:
    """The kernel's dtype-valued variant parameter (``T`` first) and its values, if it has one."""
    base, fixed = base_kernel(kernel)
    values = {name: vs for name, vs in base.variant_values.items() if name not in fixed}
    typed = [n for n, vs in values.items() if vs and all(isinstance(v, DType) for v in vs)]
    if not typed:
        return None
    name = "T" if "T" in typed else typed[0]
    return name, list(values[name])


def _concrete_dtype(kernel: Any) -> DType | None:
    """The element type of the kernel's first tensor parameter with a fixed one (a row's dtype label)."""
    base, _ = base_kernel(kernel)
    return next((s.elem for s in base.params if s.kind == "tensor" and isinstance(s.elem, DType)), None)


@dataclass(frozen=True)
class Registered:
    """One ``@test_kernel`` or ``@bench`` registration."""

    kind: str
    name: str
    kernel: Any
    setup: SetupFn
    shapes: Sequence[Shape] | Mapping[str, Sequence[Shape]]
    dtypes: tuple[DType | None, ...]
    bindings: tuple[Mapping[str, Any], ...]
    reference: References | None
    origin: str

    @property
    def kernel_name(self) -> str:
        return str(getattr(self.kernel, "name", self.kernel))

    def shapes_for(self, backend: str) -> list[Shape]:
        """The shapes to run on ``backend`` (a dict of shapes is keyed by backend, ``"*"`` for the rest)."""
        if isinstance(self.shapes, Mapping):
            return list(pick(self.shapes, backend) or ())
        return list(self.shapes)

    def items(self, backend: str) -> list[Item]:
        """Every (shape, dtype, binding) point of the matrix on ``backend``, in order (a repeated point once)."""
        param = dtype_parameter(self.kernel)
        out: list[Item] = []
        seen: set[str] = set()
        for binding in self.bindings:
            for dtype in self.dtypes:
                full = dict(binding)
                if param is not None and dtype is not None:
                    full[param[0]] = dtype
                elif param is not None and isinstance(full.get(param[0]), DType):
                    dtype = full[param[0]]  # the dtype given in the binding itself
                for shape in self.shapes_for(backend):
                    item = Item(self, shape, dtype, full)
                    if item.id not in seen:
                        seen.add(item.id)
                        out.append(item)
        return out


def pick(table: Mapping[str, Any], backend: str) -> Any:
    """``table[backend]``, else ``table["*"]``, else None."""
    return table.get(backend, table.get("*"))


@dataclass(frozen=True)
class Item:
    """One row of a run: a registration at one shape, dtype and binding."""

    entry: Registered
    shape: Shape
    dtype: DType | None
    binding: Mapping[str, Any]

    @property
    def case_label(self) -> str:
        """The shape, plus the binding's values other than the dtype (``N=4K,BLOCK=128``)."""
        param = dtype_parameter(self.entry.kernel)
        extra = [f"{k}={v}" for k, v in self.binding.items() if param is None or k != param[0]]
        return ",".join([shape_label(self.shape), *extra])

    @property
    def dtype_label(self) -> str:
        return self.dtype.name if self.dtype is not None else "-"

    @property
    def id(self) -> str:
        """``name[case,dtype]``: stable across runs, what ``--skip`` / ``--only`` name."""
        return f"{self.entry.name}[{self.case_label},{self.dtype_label}]"

    def case(self, seed: int, backend: str, simd_width: int = 32) -> Case:
        """The case for this item, its generator seeded from ``seed`` and the item's id."""
        rng = np.random.default_rng(zlib.crc32(f"{seed}:{self.id}".encode()) & 0x7FFFFFFF)
        return Case(self.shape, self.dtype, dict(self.binding), rng, backend, simd_width)


_REGISTRIES: dict[str, dict[str, Registered]] = {"test": {}, "bench": {}}


def _origin(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else repr(fn)


def _register(kind: str, kernel: Any, shapes: Any, dtypes: Sequence[DType] | None,
              bindings: Sequence[Mapping[str, Any]] | None, name: str | None,
              reference: References | None) -> Callable[[SetupFn], SetupFn]:
    base_kernel(kernel)  # a clear error now rather than at run time
    if isinstance(shapes, int) or (isinstance(shapes, Mapping) and not _keyed_by_backend(shapes)):
        shapes = [shapes]
    elif not isinstance(shapes, Mapping):
        shapes = list(shapes)
    param = dtype_parameter(kernel)
    if dtypes is None:
        if param and bindings and all(param[0] in b for b in bindings):
            dtypes = [None]  # each binding names its own dtype
        else:
            dtypes = list(param[1]) if param else [_concrete_dtype(kernel)]
    elif param is not None:
        missing = [d for d in dtypes if d is not None and d not in param[1]]
        if missing:
            raise RegistryError(f"kernel '{kernel.name}' has no variant {param[0]}={missing[0]}; its variants: "
                                f"{', '.join(str(d) for d in param[1])}")
    if reference is not None and not isinstance(reference, Mapping):
        reference = {"*": reference}

    def decorate(fn: SetupFn) -> SetupFn:
        if not callable(fn):
            raise RegistryError(f"@{'test_kernel' if kind == 'test' else 'bench'}(...) decorates a setup function")
        entry = Registered(kind, name or fn.__name__, kernel, fn, shapes, tuple(dtypes), tuple(bindings or ({},)),
                           reference, _origin(fn))
        table = _REGISTRIES[kind]
        old = table.get(entry.name)
        if old is not None and old.origin.split(":")[0] != entry.origin.split(":")[0]:
            raise RegistryError(f"two {kind}s are named '{entry.name}' ({old.origin} and {entry.origin}); "
                                f"give one another name with name=...")
        table[entry.name] = entry  # a module imported again replaces its own registrations
        return fn
    return decorate


def _keyed_by_backend(shapes: Mapping[str, Any]) -> bool:
    """``{"interp": [...], "*": [...]}`` (lists of shapes), as opposed to named extents ``{"M": 64}``."""
    return bool(shapes) and all(isinstance(v, (list, tuple)) for v in shapes.values())


def test_kernel(kernel: Any, *, shapes: Any = (1024,), dtypes: Sequence[DType] | None = None,
                bindings: Sequence[Mapping[str, Any]] | None = None,
                name: str | None = None) -> Callable[[SetupFn], SetupFn]:
    """Register ``setup(case) -> Setup`` as a test of ``kernel`` against its oracle.

    ``shapes``: a sequence of shapes (an int of elements, a tuple of extents, named extents
    ``{"M": 64, "N": 32}``), or a dict of such sequences by backend (``"*"`` for the others);
    a single multi-axis shape is written ``[(128, 64)]``.  ``dtypes`` default to the kernel's dtype variants (``T``).
    ``bindings`` adds other variant values (``[{"BLOCK": 128}, {"BLOCK": 256}]``).
    """
    return _register("test", kernel, shapes, dtypes, bindings, name, None)


test_kernel.__test__ = False  # type: ignore[attr-defined]  # pytest: not a test


def bench(kernel: Any, *, shapes: Any = (1 << 24,), dtypes: Sequence[DType] | None = None,
          bindings: Sequence[Mapping[str, Any]] | None = None, name: str | None = None,
          reference: References | Callable[..., Any] | None = None) -> Callable[[SetupFn], SetupFn]:
    """Register ``setup(case) -> Setup`` as a bench of ``kernel``, measured beside ``reference``.

    ``reference`` maps a backend to an implementation called with the same arguments (numpy
    arrays; torch tensors on the device for ``"cuda"``) that returns the outputs; ``"*"`` serves
    every other backend.  Both outputs are checked (docs/runner.md).
    """
    return _register("bench", kernel, shapes, dtypes, bindings, name, reference)


def registered(kind: str) -> list[Registered]:
    """Every registration of ``kind`` ("test" or "bench"), in registration order."""
    return list(_REGISTRIES[kind].values())


def clear() -> None:
    """Forget every registration (tests of the registry use it)."""
    for table in _REGISTRIES.values():
        table.clear()


def select(kind: str, backend: str, filters: Sequence[str] = (), dtypes: Sequence[str] = ()) -> list[Item]:
    """The items of ``kind`` on ``backend`` whose id or kernel name contains any filter, of the given dtypes."""
    out = []
    for entry in registered(kind):
        for item in entry.items(backend):
            if filters and not any(f in item.id or f in entry.kernel_name for f in filters):
                continue
            if dtypes and item.dtype_label not in dtypes:
                continue
            out.append(item)
    return out


__all__ = ["Item", "Registered", "RegistryError", "base_kernel", "bench", "clear", "dtype_parameter", "pick",
           "registered", "select", "test_kernel"]
