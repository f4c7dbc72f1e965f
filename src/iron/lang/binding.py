"""From launch arguments to a complete binding: which specialisation a call runs.

Type variables bind from argument dtypes (a numpy array's dtype, a numpy
scalar's type; Python ints and floats bind nothing), constexpr parameters
from their values, and every variant parameter left over takes its first
listed value.  Each mistake is a :class:`LaunchError` that lists the
variants available.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core import dtypes as D
from ..core.dtypes import DType
from ..core.errors import LaunchError
from .annotations import Variants, format_binding, format_value
from .numpy_compat import TORCH_NAMES, array_element_type, is_numpy_scalar
from .params import NO_DEFAULT, ParamSpec

#: Up to this many variant combinations, an error lists each one; past it, each parameter's values.
LISTED_BINDINGS = 16


def type_vars(specs: Sequence[ParamSpec]) -> list[str]:
    """The type variables the parameters use, in order of first use."""
    out: list[str] = []
    for s in specs:
        tv = s.type_var
        if tv is not None and tv.name not in out:
            out.append(tv.name)
    return out


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps 1, 1.0 and True apart (a variant list may hold both)."""
    return type(a) is type(b) and a == b


class BindingResolver:
    """Resolves bindings for one kernel: its parameters, variants and fixed (``k.variant(...)``) values."""

    def __init__(self, kernel_name: str, specs: list[ParamSpec], variants: Variants):
        self.kernel_name = kernel_name
        self.specs = specs
        self.variants = variants
        self.free_type_vars = [t for t in type_vars(specs) if t not in variants.params]
        self.constexprs = {s.name: s for s in specs if s.kind == "constexpr"}

    @property
    def settable(self) -> list[str]:
        """Names a binding may set: variant parameters, free type variables, constexpr parameters."""
        return [*self.variants.params, *self.free_type_vars, *self.constexprs]

    def check_partial(self, given: dict[str, Any]) -> dict[str, Any]:
        """Validate ``k.variant(**given)`` values (not necessarily complete)."""
        for name, value in given.items():
            self._check_value(name, value, "k.variant(...)")
        return dict(given)

    def resolve(self, fixed: dict[str, Any], args: Sequence[Any], kwargs: dict[str, Any]
                ) -> tuple[dict[str, Any], list[Any]]:
        """The complete binding for a call, and the run-time arguments in IR parameter order."""
        values = self._assign(args, kwargs)
        binding = dict(fixed)
        origin = {name: "k.variant(...)" for name in fixed}
        runtime: list[Any] = []
        for s in self.specs:
            if s.name not in values:
                if s.kind == "constexpr" and s.default is not NO_DEFAULT and s.name not in binding:
                    values[s.name] = s.default
                elif s.kind == "constexpr" and s.name in binding:
                    continue
                else:
                    raise LaunchError(f"kernel '{self.kernel_name}' is missing the argument '{s.name}'"
                                      f"; it takes ({', '.join(x.name for x in self.specs)})")
            v = values[s.name]
            if s.kind == "constexpr":
                self._set(binding, origin, s.name, v, f"argument '{s.name}'")
            elif s.kind == "tensor":
                dt = self._array_dtype(s, v)
                self._bind_elem(binding, origin, s, dt, v)
                runtime.append(v)
            else:
                if is_numpy_scalar(v) and s.type_var is not None:
                    self._bind_elem(binding, origin, s, self._dtype_of(s, v.dtype))
                runtime.append(v)
        for name, v in kwargs.items():
            if name not in values:  # a variant parameter or type variable given by keyword
                self._set(binding, origin, name, v, f"keyword {name}=")
        return self.complete(binding, origin), runtime

    def complete(self, binding: dict[str, Any], origin: dict[str, str] | None = None) -> dict[str, Any]:
        """Fill unbound variant parameters with their first value; require every other name."""
        out = {}
        for name, values in self.variants.params.items():
            out[name] = binding[name] if name in binding else values[0]
        for name in self.free_type_vars:
            if name not in binding:
                raise LaunchError(f"kernel '{self.kernel_name}': cannot tell the dtype {name}; pass a numpy array "
                                  f"or numpy scalar for a parameter annotated with {name}, or list it in "
                                  f"variants({name}=[...])")
            out[name] = binding[name]
        for name, spec in self.constexprs.items():
            if name not in binding and spec.default is not NO_DEFAULT:
                out[name] = spec.default
                continue
            if name not in binding:
                raise LaunchError(f"kernel '{self.kernel_name}': the Constexpr parameter '{name}' has no value; "
                                  f"pass it as an argument (or {name}=...)")
            out[name] = binding[name]
        return out

    # ------------------------------------------------------------ pieces
    def _assign(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(self.specs):
            raise LaunchError(f"kernel '{self.kernel_name}' takes {len(self.specs)} argument(s) "
                              f"({', '.join(s.name for s in self.specs)}), got {len(args)}")
        values = {s.name: a for s, a in zip(self.specs, args)}
        names = {s.name for s in self.specs}
        for name, v in kwargs.items():
            if name in values:
                raise LaunchError(f"kernel '{self.kernel_name}': argument '{name}' given twice")
            if name in names:
                values[name] = v
            elif name not in self.variants.params and name not in self.free_type_vars:
                raise LaunchError(f"kernel '{self.kernel_name}' has no parameter or variant '{name}'; it takes "
                                  f"({', '.join(s.name for s in self.specs)})"
                                  + (f" and variants {', '.join(self.variants.params)}" if self.variants.params
                                     else ""))
        return values

    def _array_dtype(self, s: ParamSpec, v: Any) -> DType:
        element = array_element_type(v)
        if element is None:
            raise LaunchError(f"kernel '{self.kernel_name}', argument '{s.name}': expects an array (numpy; torch, "
                              f"CuPy or another CUDA array on the cuda backend), got {type(v).__name__}")
        return self._dtype_of(s, element)

    def _dtype_of(self, s: ParamSpec, npdt: Any) -> DType:
        if isinstance(npdt, DType):
            return npdt
        try:
            return D.from_numpy(npdt)
        except ValueError:
            raise LaunchError(f"kernel '{self.kernel_name}', argument '{s.name}': numpy dtype {npdt} has no Iron "
                              "equivalent") from None

    def _bind_elem(self, binding: dict[str, Any], origin: dict[str, str], s: ParamSpec, dt: DType,
                   value: Any = None) -> None:
        tv = s.type_var
        if tv is None:
            if dt != s.elem:
                raise LaunchError(f"kernel '{self.kernel_name}', argument '{s.name}': expects {s.elem} elements, "
                                  f"got {dt.name}; convert with {_conversion(value, s.elem)}")
            return
        self._set(binding, origin, tv.name, dt, f"the dtype of argument '{s.name}'")

    def _set(self, binding: dict[str, Any], origin: dict[str, str], name: str, value: Any, source: str) -> None:
        self._check_value(name, value, source)
        if name in binding and not _same(binding[name], value):
            raise LaunchError(f"kernel '{self.kernel_name}': conflicting values for {name}: "
                              f"{format_value(binding[name])} from {origin[name]} but {format_value(value)} from "
                              f"{source}" + self._listing())
        binding[name] = value
        origin[name] = source

    def _check_value(self, name: str, value: Any, source: str) -> None:
        if name in self.variants.params:
            listed = self.variants.params[name]
            if not any(_same(value, v) for v in listed):
                raise LaunchError(f"kernel '{self.kernel_name}' has no variant with {name}={format_value(value)} "
                                  f"(from {source})" + self._listing())
        elif name in self.free_type_vars:
            if not isinstance(value, DType):
                raise LaunchError(f"kernel '{self.kernel_name}': {name} is a dtype, got {value!r}")
        elif name in self.constexprs:
            spec = self.constexprs[name]
            assert spec.constexpr is not None
            if not spec.constexpr.accepts(value):
                raise LaunchError(f"kernel '{self.kernel_name}': '{name}' is {spec.constexpr!r}, got {value!r}")
        else:
            raise LaunchError(f"kernel '{self.kernel_name}' has no variant parameter, type variable or Constexpr "
                              f"named '{name}'; it has: {', '.join(self.settable) or 'none'}")

    def _listing(self) -> str:
        if not self.variants.params:
            return ""
        bindings = self.variants.bindings()
        if len(bindings) <= LISTED_BINDINGS:
            return "; available variants: " + " | ".join(format_binding(b) for b in bindings)
        # A product of many parameters: name each parameter's values, not every combination.
        axes = "; ".join(f"{name} in {{{', '.join(format_value(v) for v in values)}}}"
                         for name, values in self.variants.params.items())
        return f"; its variants ({len(bindings)} combinations): {axes}"


def _conversion(value: Any, want: Any) -> str:
    """How the user converts ``value`` to elements of ``want``: ``.to(torch.float32)`` for a torch tensor."""
    if type(value).__module__.split(".")[0] == "torch":
        name = next((t for t, i in TORCH_NAMES.items() if i == getattr(want, "name", None)), None)
        return f".to(torch.{name})" if name else ".to(...)"
    return ".astype(...)"
