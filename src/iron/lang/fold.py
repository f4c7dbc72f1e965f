"""Folding of compile-time expressions (``BLOCK // 2``, ``math.pi * 2``, ``T == f16``).

Folding follows the kernel language's semantics, not Python's, wherever the
two differ, so a constant expression means the same as the one computed at
run time: integer ``//`` and ``%`` truncate toward zero (C), float ``%`` is
``fmod``, float division by zero gives an IEEE infinity or NaN, and bool
arithmetic is an error.  Values keep Python's precision (ints unbounded,
floats double) until they meet a typed operand.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..core.dtypes import F32_TINY, DType


class FoldError(Exception):
    """A constant expression that has no value (the message says why)."""


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero."""
    if b == 0:
        raise FoldError("integer division by zero in a constant expression")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_rem(a: int, b: int) -> int:
    """The remainder of :func:`c_div` (the sign of the dividend)."""
    return a - b * c_div(a, b)


def ieee_div(a: float, b: float) -> float:
    if b != 0:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _floor(x: float) -> float:
    return x if math.isinf(x) or math.isnan(x) else float(math.floor(x))


def _pow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


def _numbers(op: str, a: Any, b: Any) -> None:
    if isinstance(a, bool) or isinstance(b, bool):
        raise FoldError(f"'{op}' on bool: bool takes no part in arithmetic (convert with i32(x))")
    if not (_is_num(a) and _is_num(b)):
        raise FoldError(f"'{op}' needs numbers, got {a!r} and {b!r}")


def fold_binary(op: str, a: Any, b: Any) -> Any:
    """``a op b`` for the operators of docs/language.md (op is the Python operator text)."""
    if op in ("&", "|", "^"):
        if isinstance(a, bool) and isinstance(b, bool):
            return {"&": a and b, "|": a or b, "^": a != b}[op]
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
            return {"&": a & b, "|": a | b, "^": a ^ b}[op]
        raise FoldError(f"'{op}' needs two ints or two bools, got {a!r} and {b!r}")
    _numbers(op, a, b)
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return ieee_div(float(a), float(b))
    if op == "//":
        return c_div(a, b) if both_int else _floor(ieee_div(float(a), float(b)))
    if op == "%":
        if both_int:
            return c_rem(a, b)
        return math.fmod(a, b) if b != 0 else math.nan
    if op == "**":
        if both_int and b >= 0:
            return a ** b
        return _pow(float(a), float(b))
    if op in ("<<", ">>"):
        if not both_int:
            raise FoldError(f"'{op}' needs integers, got {a!r} and {b!r}")
        if b < 0:
            raise FoldError(f"negative shift count {b} in a constant expression")
        return a << b if op == "<<" else a >> b
    raise FoldError(f"unknown operator {op}")


def fold_compare(op: str, a: Any, b: Any) -> bool:
    """``a op b`` for ``== != < <= > >= is is not``."""
    if op == "is":
        return a is b or (a == b and type(a) is type(b) and isinstance(a, DType))
    if op == "is not":
        return not fold_compare("is", a, b)
    if isinstance(a, bool) != isinstance(b, bool) and (_is_num(a) or _is_num(b)):
        raise FoldError(f"comparison of a bool with a number ({a!r} {op} {b!r}): convert one of them")
    if op in ("==", "!="):
        eq = a == b
        return bool(eq) if op == "==" else not eq
    if not ((_is_num(a) and _is_num(b)) or (isinstance(a, bool) and isinstance(b, bool))):
        raise FoldError(f"'{op}' compares numbers, got {a!r} and {b!r}")
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def fold_unary(op: str, a: Any) -> Any:
    """``-a``, ``+a``, ``~a``, ``not a``."""
    if op == "not":
        return not a
    if op == "~":
        if isinstance(a, int) and not isinstance(a, bool):
            return ~a
        raise FoldError(f"'~' needs an integer, got {a!r} (use 'not' for bools)")
    if not _is_num(a):
        raise FoldError(f"unary '{op}' needs a number, got {a!r}")
    return -a if op == "-" else a


def _sign(x: float) -> float:
    if math.isnan(x):
        return x
    return float((x > 0) - (x < 0))


#: Builtin math on compile-time numbers (arguments already checked to be numbers).
STATIC_MATH: dict[str, Callable[..., Any]] = {
    "exp": lambda x: _guard(math.exp, x),
    "exp2": lambda x: _pow(2.0, float(x)),
    "fast_exp2": lambda x: _fast_exp2(float(x)),
    "log": lambda x: _log(math.log, x),
    "log2": lambda x: _log(math.log2, x),
    "log1p": lambda x: -math.inf if x == -1 else math.nan if x < -1 or math.isnan(x) else math.log1p(x),
    "expm1": lambda x: _guard(math.expm1, x),
    "sqrt": lambda x: math.sqrt(x) if x >= 0 else math.nan,
    "rsqrt": lambda x: ieee_div(1.0, math.sqrt(x)) if x >= 0 else math.nan,
    "recip": lambda x: ieee_div(1.0, float(x)),
    "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "asin": lambda x: math.asin(x) if -1 <= x <= 1 else math.nan,
    "acos": lambda x: math.acos(x) if -1 <= x <= 1 else math.nan,
    "atan": math.atan,
    "sinh": lambda x: _guard(math.sinh, x), "cosh": lambda x: _guard(math.cosh, x), "tanh": math.tanh,
    "erf": math.erf,
    "floor": lambda x: _floor(float(x)),
    "ceil": lambda x: x if math.isinf(x) or math.isnan(x) else float(math.ceil(x)),
    "round": lambda x: x if math.isinf(x) or math.isnan(x) else float(round(x)),
    "trunc": lambda x: x if math.isinf(x) or math.isnan(x) else float(math.trunc(x)),
    "isnan": lambda x: math.isnan(x), "isinf": lambda x: math.isinf(x), "isfinite": lambda x: math.isfinite(x),
    "pow": lambda x, y: fold_binary("**", float(x), y),
    "atan2": math.atan2,
    "fma": lambda a, b, c: a * b + c,
    "abs": abs,
    "sign": lambda x: _sign(float(x)) if isinstance(x, float) else (x > 0) - (x < 0),
}


def _fast_exp2(x: float) -> float:
    """``fast_exp2`` of a compile-time number: the evaluator's rule (results under f32's smallest normal are 0)."""
    r = _pow(2.0, x)
    return 0.0 if r < F32_TINY else r


def _guard(f: Callable[[float], float], x: float) -> float:
    try:
        return f(x)
    except OverflowError:
        return math.inf


def _log(f: Callable[[float], float], x: float) -> float:
    if x == 0:
        return -math.inf
    if x < 0 or math.isnan(x):
        return math.nan
    return f(x)
