"""A kernel's parameters, read from its annotations.

Annotations are evaluated in the kernel's own namespace (module globals and
closure), as Python would, so ``Tensor[T]``, ``In[f16]``, ``Constexpr[int]``,
``f32`` and ``int`` all work, and so do string annotations.  Type variables
stay unbound here; a launch or ``k.variant(...)`` binds them.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from typing import Any, Sequence

from ..core import dtypes as D
from ..core.dtypes import DType
from ..core.errors import KernelTypeError, UnknownNameError, UnsupportedSyntaxError
from .annotations import ConstexprSpec, TensorSpec, TypeVar
from .source import ParsedFunction

NO_DEFAULT = object()

_PYTHON_SCALARS: dict[Any, DType] = {int: D.i32, float: D.f32, bool: D.bool_}

_ANNOTATION_HINT = ("annotate tensors as Tensor[T] or In[T], scalars as a dtype (f32, i32, T...) or int/float/bool, "
                    "compile-time parameters as Constexpr")


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter: ``kind`` is "tensor", "scalar" or "constexpr"."""

    name: str
    kind: str
    elem: DType | TypeVar | None = None
    readonly: bool = False
    constexpr: ConstexprSpec | None = None
    default: Any = NO_DEFAULT

    @property
    def type_var(self) -> TypeVar | None:
        return self.elem if isinstance(self.elem, TypeVar) else None


def check_signature(parsed: ParsedFunction, what: str) -> None:
    """Reject parameter forms kernels do not support (``*args``, keyword-only...)."""
    a = parsed.tree.args
    bad = a.vararg or a.kwarg or a.kwonlyargs
    if bad:
        node = a.vararg or a.kwarg or a.kwonlyargs[0]
        raise UnsupportedSyntaxError(f"{what} '{parsed.name}' cannot take *args, **kwargs or keyword-only "
                                     "parameters", parsed.loc(node), hint="list every parameter by name")


def evaluate_annotation(parsed: ParsedFunction, node: ast.expr, kernel_name: str | None,
                        type_vars: Sequence[str] = ()) -> Any:
    """The value of an annotation expression in the function's namespace.

    ``type_vars`` are dtype-valued variant parameters: ``Tensor[T]`` may name
    one without a ``T`` defined in Python (as the body may).
    """
    namespace = dict(parsed.fn.__globals__)
    namespace.update(parsed.closure)
    namespace.update({name: TypeVar(name) for name in type_vars})
    try:
        value = eval(compile(ast.Expression(body=node), parsed.file, "eval"), namespace)  # noqa: S307
        if isinstance(value, str):  # a string annotation, or `from __future__ import annotations` style
            value = eval(value, namespace)  # noqa: S307
        return value
    except NameError as e:
        name = getattr(e, "name", None) or str(e)
        close = difflib.get_close_matches(name, sorted(namespace), n=3, cutoff=0.75)
        raise UnknownNameError(f"name '{name}' in an annotation is not defined", parsed.loc(node),
                               hint=f"did you mean {' or '.join(map(repr, close))}?" if close else _ANNOTATION_HINT,
                               kernel=kernel_name) from None
    except Exception as e:  # noqa: BLE001 - any failure of user code in an annotation is the user's mistake
        raise KernelTypeError(f"cannot evaluate the annotation {ast.unparse(node)!r}: {e}", parsed.loc(node),
                              hint=_ANNOTATION_HINT, kernel=kernel_name) from None


def kernel_params(parsed: ParsedFunction, kernel_name: str, type_vars: Sequence[str] = ()) -> list[ParamSpec]:
    """The kernel's parameters in order, with their kinds and element types (see evaluate_annotation)."""
    args = parsed.tree.args.posonlyargs + parsed.tree.args.args
    defaults = list(parsed.fn.__defaults__ or ())
    first_default = len(args) - len(defaults)
    out = []
    for i, a in enumerate(args):
        default = defaults[i - first_default] if i >= first_default else NO_DEFAULT
        if a.annotation is None:
            raise KernelTypeError(f"kernel parameter '{a.arg}' has no annotation", parsed.loc(a),
                                  hint=_ANNOTATION_HINT, kernel=kernel_name)
        ann = evaluate_annotation(parsed, a.annotation, kernel_name, type_vars)
        spec = _spec(a.arg, ann)
        if spec is None:
            raise KernelTypeError(f"kernel parameter '{a.arg}' has an unsupported annotation {ann!r}",
                                  parsed.loc(a.annotation), hint=_ANNOTATION_HINT, kernel=kernel_name)
        if default is not NO_DEFAULT:
            if spec.kind != "constexpr":
                raise UnsupportedSyntaxError(f"kernel parameter '{a.arg}' has a default value, but only Constexpr "
                                             "parameters may", parsed.loc(a), kernel=kernel_name,
                                             hint="pass it at every launch, or make it Constexpr")
            assert spec.constexpr is not None
            if not spec.constexpr.accepts(default):
                raise KernelTypeError(f"the default {default!r} of '{a.arg}' is not a {spec.constexpr!r}",
                                      parsed.loc(a), kernel=kernel_name,
                                      hint="a Constexpr holds an int, float, bool, str or dtype")
            spec = ParamSpec(spec.name, spec.kind, spec.elem, spec.readonly, spec.constexpr, default)
        out.append(spec)
    return out


def _spec(name: str, ann: Any) -> ParamSpec | None:
    if isinstance(ann, TensorSpec):
        return ParamSpec(name, "tensor", ann.elem, ann.readonly)
    if isinstance(ann, ConstexprSpec):
        return ParamSpec(name, "constexpr", constexpr=ann)
    if isinstance(ann, (DType, TypeVar)):
        return ParamSpec(name, "scalar", ann)
    if isinstance(ann, type) and ann in _PYTHON_SCALARS:
        return ParamSpec(name, "scalar", _PYTHON_SCALARS[ann])
    return None
