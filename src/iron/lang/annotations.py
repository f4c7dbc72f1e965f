"""Parameter annotations and variants: ``Tensor[T]``, ``In[T]``, ``Constexpr``, ``TypeVar``, ``variants``.

These are ordinary Python objects: the frontend reads a kernel's annotations
from its source and evaluates them in the function's namespace, so
``Tensor[T]`` must produce something it can inspect (:class:`TensorSpec`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

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


class VariantValues(dict):
    """One combination of variant values, as a rule of ``variants(where=...)`` sees it: ``v["BM"]`` or ``v.BM``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no variant parameter {name!r}; the parameters are {', '.join(self)}") from None


#: What a rule of ``variants(where=...)`` is: a predicate on one combination of variant values.
VariantRule = Callable[[VariantValues], Any]


class Variants:
    """The variant parameters of a kernel: an ordered name -> list of values mapping, and its rules.

    ``bindings()`` is the cartesian product, first parameter varying slowest, in the order the values
    were listed, less the combinations a rule of ``where`` rejects (combinations the kernel cannot
    compile): those are never built ahead of time, and a launch of one is an error naming the rule.
    """

    def __init__(self, params: dict[str, list[Any]], where: VariantRule | Sequence[VariantRule] | None = None):
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
        rules = () if where is None else tuple(where) if isinstance(where, (list, tuple)) else (where,)
        for rule in rules:
            if not callable(rule):
                raise ValueError(f"variants(where=...) takes a predicate on the variant values (or a list of "
                                 f"them), got {rule!r}")
        if rules and not self.params:
            raise ValueError("variants(where=...) needs variant parameters for its rules to judge")
        self.where: tuple[VariantRule, ...] = rules
        self._valid: list[dict[str, Any]] | None = None
        self._used: dict[str, tuple[Any, ...]] | None = None

    def product(self) -> list[dict[str, Any]]:
        """Every combination of the listed values, valid or not."""
        names = list(self.params)
        return [dict(zip(names, combo)) for combo in itertools.product(*self.params.values())]

    def bindings(self) -> list[dict[str, Any]]:
        """The valid combinations (computed once: the rules run on first use, not at import)."""
        if self._valid is None:
            valid = [b for b in self.product() if self.broken_rule(b) is None]
            if not valid:
                raise ValueError(f"{self!r}: the rules of where= reject every combination of the listed values")
            self._valid = valid
        return list(self._valid)

    def values(self) -> dict[str, tuple[Any, ...]]:
        """Each parameter's values that some valid combination takes, in the order listed (computed once: a
        registry asks for them per row it labels)."""
        if self._used is None:
            seen: dict[str, set[tuple[str, Any]]] = {name: set() for name in self.params}
            for b in self.bindings():
                for name, v in b.items():
                    seen[name].add(_tagged(v))
            self._used = {name: tuple(v for v in vs if _tagged(v) in seen[name]) for name, vs in self.params.items()}
        return dict(self._used)

    def broken_rule(self, binding: dict[str, Any]) -> VariantRule | None:
        """The first rule that rejects ``binding``'s variant values, or None (also when some are unbound)."""
        if not self.where or any(name not in binding for name in self.params):
            return None
        values = VariantValues((name, binding[name]) for name in self.params)
        for rule in self.where:
            try:
                ok = rule(values)
            except Exception as e:  # noqa: BLE001 - a rule is user code; say which one failed, on which values
                raise ValueError(f"the variants rule {rule_text(rule)!r} failed on {format_binding(values)}: "
                                 f"{type(e).__name__}: {e}") from e
            if not ok:
                return rule
        return None

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={list(vs)!r}" for n, vs in self.params.items())
        rules = f", where={[rule_text(r) for r in self.where]!r}" if self.where else ""
        return f"variants({inner}{rules})"


def variants(*, where: VariantRule | Sequence[VariantRule] | None = None, **params: list[Any]) -> Variants:
    """Declare variant parameters: ``variants(T=[f32, f16], BLOCK=[128, 256])``.

    ``where``: a predicate (or a list of them) on one combination, ``lambda v: v.BLOCK % v.VEC == 0``;
    only the combinations every rule accepts exist (docs/language.md "Variants").
    """
    return Variants(params, where)


def rule_text(rule: VariantRule) -> str:
    """How an error names a rule: a lambda's source text, else its name and its docstring's first line."""
    name = getattr(rule, "__name__", "")
    if name == "<lambda>":
        return _lambda_source(rule) or "a lambda"
    doc = (getattr(rule, "__doc__", None) or "").strip()
    label = getattr(rule, "__qualname__", None) or repr(rule)
    return f"{label}: {doc.splitlines()[0]}" if doc else label


def _lambda_source(fn: Any) -> str | None:
    """The text of lambda ``fn`` in its file (None when the file is not readable or holds several candidates)."""
    import ast
    import linecache

    code = fn.__code__
    try:
        lines = linecache.getlines(code.co_filename)
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError, OSError):
        return None
    found = [node for node in ast.walk(tree) if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno
             and [a.arg for a in node.args.args] == list(code.co_varnames[:code.co_argcount])]
    if len(found) != 1:
        return None
    return ast.get_source_segment("".join(lines), found[0])


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
