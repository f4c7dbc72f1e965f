"""Reference semantics of the pure elementwise ops, on numpy arrays.

This module is the one place where the meaning of ``const``, the unary,
binary, compare, ternary, cast and vector ops lives (docs/ir.md, "Arithmetic
semantics").  The interpreter evaluates every such op through
:func:`eval_pure`; the constant folder calls it too, so folding can never
disagree with running.

Values are arrays over threads: shape ``(n,)`` for a scalar type and
``(n, width)`` for a vector type, stored in the numpy dtype of the IR type
(:func:`iron.core.dtypes.numpy_dtype`; bf16 through ml_dtypes).

Rounding.  Every float result is rounded once to its type:

* ``+ - * /``, ``sqrt``, ``rem`` (fmod), ``min``/``max`` and the rounding
  functions run in f32 for f16/bf16/f32 and in f64 for f64.  f32 has more
  than twice the precision of f16/bf16 plus two bits, so rounding the f32
  result again to f16/bf16 equals rounding the exact result (no double
  rounding error for these operations).
* Transcendentals (``exp``, ``sin``, ``pow``, ``erf``...), ``recip`` and
  ``rsqrt`` run in f64 and are rounded once to the result type.  For the
  narrow types this is at least as accurate as an f32 evaluation; ``rsqrt``
  is 1/sqrt(x) with a single final rounding for f16/bf16/f32.
* ``fma`` is exact for every float type: for f16/bf16/f32 the product is
  exact in f64 and the sum is carried as an exact (high, low) pair that is
  rounded to odd and then to nearest; for f64 the Boldo-Melquiond emulation
  (exact product, exact sums, one round-to-odd addition) is used where no
  intermediate can overflow or underflow, and exact rational arithmetic for
  the remaining elements.
* Every conversion to bf16 goes through f32 with round-to-odd, because
  ml_dtypes converts f64 and 64-bit integers to bf16 via f32 with two
  roundings to nearest.  The 8-bit floats (f8e4m3, f8e5m2) round the same
  way and saturate: past the largest finite value (infinities included) a
  conversion gives that value with the input's sign; NaN stays NaN.  64-bit integers reach the float types as an exact
  (high 32 bits, low 32 bits) pair, so they too are rounded once.
* ``erf`` is C's ``erf`` (``math.erf``) applied element by element: libm
  accuracy, at about 0.2 s per million elements.

Integers wrap.  ``div`` truncates toward zero and ``rem`` takes the
dividend's sign; a zero divisor gives 0 for both, and ``INT_MIN / -1`` wraps
to ``INT_MIN`` (remainder 0).  Shift counts are taken modulo the bit width.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from . import dtypes as D
from .types import IRType, ScalarType, VectorType

Array = np.ndarray


class EvalError(Exception):
    """An op that :func:`eval_pure` does not evaluate (not pure, or not elementwise)."""


# ---------------------------------------------------------------- dtype helpers

@lru_cache(maxsize=None)
def np_dtype(dt: D.DType) -> np.dtype:
    """The numpy storage dtype of ``dt`` (cached: ml_dtypes is looked up once)."""
    return D.numpy_dtype(dt)


@lru_cache(maxsize=None)
def _iron_dtype(npdt: np.dtype) -> D.DType:
    return D.from_numpy(npdt)


_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _work_dtype(dt: D.DType) -> np.dtype:
    """Where exact IEEE operations run: f32 for f16/bf16/f32, f64 for f64."""
    return _F64 if dt.bits == 64 else _F32


def _result_dtype(t: IRType) -> D.DType:
    if isinstance(t, (ScalarType, VectorType)):
        return t.dtype
    raise EvalError(f"pure elementwise ops produce scalars or vectors, not {t}")


# ---------------------------------------------------------------- exact rounding

def _two_sum(a: Array, b: Array) -> tuple[Array, Array]:
    """Knuth's TwoSum: ``s = fl(a + b)`` and the exact error ``e`` (``s + e == a + b``)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _round_to_odd_f64(hi: Array, lo: Array) -> Array:
    """The f64 value of ``hi + lo`` rounded to odd, given ``hi = fl(hi + lo)``.

    Rounding to odd at 53 bits and then to nearest at p <= 51 bits equals one
    rounding to nearest of the exact value: that is what makes the exact
    (hi, lo) pairs below round correctly to every narrower type.
    """
    hi = np.array(hi, dtype=_F64, copy=True)
    inexact = (lo != 0) & np.isfinite(hi)
    even = (hi.view(np.int64) & 1) == 0
    fix = inexact & even
    if fix.any():
        toward = np.where(lo > 0, np.inf, -np.inf)
        hi[fix] = np.nextafter(hi[fix], toward[fix])
    return hi


def _f64_to_f32_odd(x: Array) -> Array:
    """f64 rounded to odd at f32 (24 bits): a later rounding to nearest at 16 bits or fewer is then the only one
    that counts (no double rounding)."""
    y = x.astype(_F32)
    back = y.astype(_F64)
    fix = (back != x) & np.isfinite(y) & ((y.view(np.uint32) & 1) == 0)
    if fix.any():
        toward = np.where(x > back, np.inf, -np.inf).astype(_F32)
        y[fix] = np.nextafter(y[fix], toward[fix])
    return y


def _f64_to_bf16(x: Array) -> Array:
    """Round f64 to bf16 once: round to odd at f32 (24 bits), then to nearest at 8 bits."""
    return _f64_to_f32_odd(x).astype(np_dtype(D.bf16))


def _to_f8(x: Array, dt: D.DType) -> Array:
    """f32 or f64 values rounded once to an 8-bit float, saturating (see :data:`iron.core.dtypes.f8e4m3`).

    f64 goes through f32 rounded to odd (24 bits, then to nearest at 4), as bf16 does; ml_dtypes then
    rounds to nearest even and gives NaN / inf past the largest value, which saturation replaces."""
    if x.dtype == _F64:
        x = _f64_to_f32_odd(x)
    npdt = np_dtype(dt)
    out = x.astype(npdt)
    over = ~np.isnan(x) & ~np.isfinite(out.astype(_F32))
    if over.any():
        out[over] = np.where(x[over] < 0, -D.max_value(dt), D.max_value(dt)).astype(npdt)
    return out


def round_exact(hi: Array, lo: Array | None, dt: D.DType) -> Array:
    """Round the exact value ``hi + lo`` (a TwoSum-normalised f64 pair) once to ``dt``.

    With ``lo`` None, ``hi`` itself is the exact value.
    """
    if dt.bits == 64:
        return np.asarray(hi, dtype=_F64)
    x = hi if lo is None else _round_to_odd_f64(hi, lo)
    if dt == D.bf16:
        return _f64_to_bf16(x)
    if dt.bits == 8 and dt.kind == "f":  # the 8-bit floats (identity checks: this runs per op)
        return _to_f8(np.asarray(x, dtype=_F64), dt)
    return x.astype(np_dtype(dt))


def round_f64(x: Array, dt: D.DType) -> Array:
    """``x`` (f64) rounded once to the float type ``dt``."""
    return round_exact(x, None, dt)


def _from_work(x: Array, dt: D.DType) -> Array:
    """An f32/f64 working result rounded to ``dt`` (exact ops only; see the module doc)."""
    if dt.bits == 8 and dt.kind == "f":
        return _to_f8(x, dt)
    return x.astype(np_dtype(dt), copy=False)


# ---------------------------------------------------------------- constants

def const_array(value: Any, t: IRType, n: int) -> Array:
    """``n`` copies of the constant ``value`` of type ``t``: shape (n,) or (n, width)."""
    dt = _result_dtype(t)
    npdt = np_dtype(dt)
    if isinstance(t, VectorType):
        vals = tuple(value) if isinstance(value, (tuple, list)) else (value,) * t.width
        if len(vals) != t.width:
            raise EvalError(f"vector constant of {len(vals)} elements for {t}")
        row = _scalar_values(vals, dt, npdt)
        return np.tile(row, (n, 1))
    return np.full((n,), _scalar_values((value,), dt, npdt)[0], dtype=npdt)


def _scalar_values(vals: tuple, dt: D.DType, npdt: np.dtype) -> Array:
    if dt.is_float:
        return round_f64(np.array([float(v) for v in vals], dtype=_F64), dt)
    if dt.is_bool:
        return np.array([bool(v) for v in vals], dtype=npdt)
    bits = dt.bits
    wrapped = []
    for v in vals:
        iv = int(v) % (1 << bits)
        if dt.is_signed and iv >= 1 << (bits - 1):
            iv -= 1 << bits
        wrapped.append(iv)
    return np.array(wrapped, dtype=npdt)


# ---------------------------------------------------------------- float ops

def _float_exact_binary(fn: Callable[[Array, Array], Array]) -> Callable:
    def run(a: Array, b: Array, dt: D.DType) -> Array:
        w = _work_dtype(dt)
        return _from_work(fn(a.astype(w, copy=False), b.astype(w, copy=False)), dt)
    return run


def _float_f64_binary(fn: Callable[[Array, Array], Array]) -> Callable:
    def run(a: Array, b: Array, dt: D.DType) -> Array:
        return round_f64(fn(a.astype(_F64), b.astype(_F64)), dt)
    return run


def _float_exact_unary(fn: Callable[[Array], Array]) -> Callable:
    def run(a: Array, dt: D.DType) -> Array:
        return _from_work(fn(a.astype(_work_dtype(dt), copy=False)), dt)
    return run


def _float_f64_unary(fn: Callable[[Array], Array]) -> Callable:
    def run(a: Array, dt: D.DType) -> Array:
        return round_f64(fn(a.astype(_F64)), dt)
    return run


_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _fast_exp2(a: Array, dt: D.DType) -> Array:
    """2^x with results under f32's smallest normal flushed to +0 (for f32 and narrower): what the fast hardware
    instruction may return (CUDA's ex2.approx.ftz), so that the interpreter shows a kernel relying on denormals."""
    r = np.exp2(a.astype(_F64))
    if dt != D.f64:
        r = np.where(r < D.F32_TINY, 0.0, r)
    return round_f64(r, dt)


def _erf_f64(x: Array) -> Array:
    """C's erf (through ``math.erf``) on every element; an exact libm reference, not fast."""
    if x.size == 0:
        return x.copy()
    return _erf_scalar(x).astype(_F64)


_FLOAT_UNARY: dict[str, Callable[[Array, D.DType], Array]] = {
    "neg": _float_exact_unary(np.negative),
    "abs": _float_exact_unary(np.abs),
    "sign": _float_exact_unary(np.sign),
    "sqrt": _float_exact_unary(np.sqrt),
    "floor": _float_exact_unary(np.floor),
    "ceil": _float_exact_unary(np.ceil),
    "round": _float_exact_unary(np.rint),
    "trunc": _float_exact_unary(np.trunc),
    "exp": _float_f64_unary(np.exp),
    "exp2": _float_f64_unary(np.exp2),
    "fast_exp2": _fast_exp2,
    "log": _float_f64_unary(np.log),
    "log2": _float_f64_unary(np.log2),
    "log1p": _float_f64_unary(np.log1p),
    "expm1": _float_f64_unary(np.expm1),
    "rsqrt": _float_f64_unary(lambda x: 1.0 / np.sqrt(x)),
    "recip": _float_f64_unary(lambda x: 1.0 / x),
    "sin": _float_f64_unary(np.sin),
    "cos": _float_f64_unary(np.cos),
    "tan": _float_f64_unary(np.tan),
    "asin": _float_f64_unary(np.arcsin),
    "acos": _float_f64_unary(np.arccos),
    "atan": _float_f64_unary(np.arctan),
    "sinh": _float_f64_unary(np.sinh),
    "cosh": _float_f64_unary(np.cosh),
    "tanh": _float_f64_unary(np.tanh),
    "erf": _float_f64_unary(_erf_f64),
}

def _min_num(a: Array, b: Array) -> Array:
    """IEEE minNum with -0 < +0: numpy's fmin leaves the sign of a zero tie unspecified
    (it differs with the position in the array), which would let constant folding and the
    interpreter disagree."""
    r = np.fmin(a, b)
    tie = (a == 0) & (b == 0)
    return np.where(tie, np.where(np.signbit(a), a, b), r) if tie.any() else r


def _max_num(a: Array, b: Array) -> Array:
    """IEEE maxNum with +0 > -0 (see :func:`_min_num`)."""
    r = np.fmax(a, b)
    tie = (a == 0) & (b == 0)
    return np.where(tie, np.where(np.signbit(a), b, a), r) if tie.any() else r


_FLOAT_BINARY: dict[str, Callable[[Array, Array, D.DType], Array]] = {
    "add": _float_exact_binary(np.add),
    "sub": _float_exact_binary(np.subtract),
    "mul": _float_exact_binary(np.multiply),
    "div": _float_exact_binary(np.divide),
    "rem": _float_exact_binary(np.fmod),
    "min": _float_exact_binary(_min_num),
    "max": _float_exact_binary(_max_num),
    "pow": _float_f64_binary(np.power),
    "atan2": _float_f64_binary(np.arctan2),
}


def _float_predicate(fn: Callable[[Array], Array]) -> Callable:
    def run(a: Array, dt: D.DType) -> Array:
        return fn(a.astype(_work_dtype(dt), copy=False))
    return run


_FLOAT_PREDICATES = {"isnan": _float_predicate(np.isnan), "isinf": _float_predicate(np.isinf),
                     "isfinite": _float_predicate(np.isfinite)}


# ---------------------------------------------------------------- fma

def fma(a: Array, b: Array, c: Array, dt: D.DType) -> Array:
    """``a*b + c`` rounded once to ``dt`` (exact for every float type; see the module doc)."""
    a64, b64, c64 = (x.astype(_F64) for x in (a, b, c))
    if dt.bits == 64:
        return _fma_f64(a64, b64, c64)
    # The product of two <= 24-bit significands is exact in f64, and f64 has
    # the exponent range for it; the sum is kept exact as a (hi, lo) pair.
    hi, lo = _two_sum(a64 * b64, c64)
    return round_exact(hi, lo, dt)


_SPLITTER = float(2 ** 27 + 1)


def _split(x: Array) -> tuple[Array, Array]:
    """Veltkamp's split of f64 values into two halves of 26 significant bits."""
    g = _SPLITTER * x
    hi = g - (g - x)
    return hi, x - hi


def _fma_f64(a: Array, b: Array, c: Array) -> Array:
    ph = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    pl = ((ah * bh - ph) + ah * bl + al * bh) + al * bl
    th, tl = _two_sum(c, ph)
    vs, ve = _two_sum(tl, pl)
    v = _round_to_odd_f64(vs, ve)
    z = th + v
    # A zero product plus a zero keeps IEEE's sign rule (-0 only for -0 + -0).
    z = np.where((ph == 0) & (c == 0), ph + c, z)
    # The emulation is exact unless a split or product overflows, or a
    # product's error term or the result leaves the normal range.
    big, tiny = 2.0 ** 995, 2.0 ** -960
    abs_p = np.abs(ph)
    safe = (np.abs(a) < big) & (np.abs(b) < big) & (np.abs(c) < big)
    safe &= ((abs_p > tiny) & (abs_p < big)) | (a == 0) | (b == 0)
    safe &= (np.abs(z) > tiny) | ((z == 0) & (th == 0) & (pl == 0))
    finite_ab = np.isfinite(a) & np.isfinite(b)
    special = ~(finite_ab & np.isfinite(c))
    if special.any():
        # IEEE specials: an infinite or NaN c with a finite product is c itself
        # (the exact product cannot overflow); otherwise a*b + c is exact.
        z = np.where(special, np.where(finite_ab, c, ph + c), z)
        safe |= special
    if not safe.all():
        idx = np.nonzero(~safe)
        z = np.array(z, copy=True)
        z[idx] = [_fma_scalar(float(x), float(y), float(w)) for x, y, w in zip(a[idx], b[idx], c[idx])]
    return z


def _fma_scalar(a: float, b: float, c: float) -> float:
    """One correctly rounded f64 fma of finite operands in exact rational arithmetic (the rare slow path)."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        # A zero product keeps IEEE's signed-zero rule; a cancellation gives +0.
        return a * b + c if (a == 0 or b == 0) else 0.0
    try:
        return float(exact)  # int / int true division: correctly rounded, subnormals included
    except OverflowError:  # rounds past the largest finite f64
        return math.inf if exact > 0 else -math.inf


# ---------------------------------------------------------------- integer ops

def _int_div_parts(a: Array, b: Array, dt: D.DType) -> tuple[Array, Array, Array]:
    """Truncating quotient with a safe divisor; returns (q, safe divisor, zero mask)."""
    zero = b == 0
    if dt.is_signed:
        minus_one = b == -1
        safe = np.where(zero | minus_one, 1, b).astype(a.dtype)
        q = a // safe
        r = a - q * safe
        q = q + ((r != 0) & ((a < 0) != (safe < 0))).astype(a.dtype)
        q = np.where(minus_one, np.negative(a), q)  # INT_MIN / -1 wraps to INT_MIN
        safe = np.where(minus_one, b, safe).astype(a.dtype)
    else:
        safe = np.where(zero, 1, b).astype(a.dtype)
        q = a // safe
    return q, safe, zero


def _int_div(a: Array, b: Array, dt: D.DType) -> Array:
    q, _, zero = _int_div_parts(a, b, dt)
    return np.where(zero, 0, q).astype(a.dtype)


def _int_rem(a: Array, b: Array, dt: D.DType) -> Array:
    q, safe, zero = _int_div_parts(a, b, dt)
    r = a - q * safe
    return np.where(zero, 0, r).astype(a.dtype)


def _shift_count(b: Array, dt: D.DType) -> Array:
    """Shift counts modulo the bit width (two's complement ``&`` is a true modulo)."""
    return (b & (dt.bits - 1)).astype(np_dtype(dt))


def _int_sign(a: Array, dt: D.DType) -> Array:
    if dt.is_signed:
        return np.sign(a)
    return (a != 0).astype(a.dtype)


_INT_BINARY: dict[str, Callable[[Array, Array, D.DType], Array]] = {
    "add": lambda a, b, dt: a + b,
    "sub": lambda a, b, dt: a - b,
    "mul": lambda a, b, dt: a * b,
    "div": _int_div,
    "rem": _int_rem,
    "min": lambda a, b, dt: np.minimum(a, b),
    "max": lambda a, b, dt: np.maximum(a, b),
    "shl": lambda a, b, dt: np.left_shift(a, _shift_count(b, dt)),
    "shr": lambda a, b, dt: np.right_shift(a, _shift_count(b, dt)),
}

_BITS_BINARY: dict[str, Callable[[Array, Array], Array]] = {
    "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor,
    "land": np.logical_and, "lor": np.logical_or,
}

_INT_UNARY: dict[str, Callable[[Array, D.DType], Array]] = {
    "neg": lambda a, dt: np.negative(a),
    "abs": lambda a, dt: np.abs(a) if dt.is_signed else a.copy(),
    "sign": _int_sign,
    "bnot": lambda a, dt: np.invert(a),
}

_COMPARE: dict[str, Callable[[Array, Array], Array]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}


# ---------------------------------------------------------------- casts

def cast(x: Array, src: D.DType, dst: D.DType) -> Array:
    """Convert ``x`` of ``src`` to ``dst`` with the IR's cast semantics."""
    npdst = np_dtype(dst)
    if dst.is_bool:
        return x != 0
    if src.is_bool:
        return x.astype(npdst)
    if src.is_float and dst.is_float:
        return round_f64(x.astype(_F64), dst)
    if src.is_float:
        return _float_to_int(x.astype(_F64), dst)
    if dst.is_float:
        return _int_to_float(x, src, dst)
    return x.astype(npdst)  # int -> int wraps (two's complement)


def _float_to_int(x: Array, dst: D.DType) -> Array:
    """Truncate toward zero; NaN gives 0; out of range saturates."""
    npdst = np_dtype(dst)
    lo, hi = D.min_value(dst), D.max_value(dst)
    t = np.trunc(x)
    too_low = t < float(lo)
    too_high = t >= float(hi + 1)  # 2**bits-ish bounds are exact in f64
    ok = ~(too_low | too_high | np.isnan(t))
    out = np.where(ok, t, 0.0).astype(npdst)
    out[too_low] = lo
    out[too_high] = hi
    return out


def _int_to_float(x: Array, src: D.DType, dst: D.DType) -> Array:
    """Round an integer once to a float type."""
    if src.bits <= 32:
        return round_f64(x.astype(_F64), dst)  # exact in f64
    # 64-bit: the magnitude as an exact pair (high 32 bits + low 32 bits).
    if src.is_signed:
        negative = x < 0
        mag = np.where(negative, np.negative(x), x).view(np.uint64)  # |INT64_MIN| = 2**63 as u64
    else:
        negative = np.zeros(x.shape, dtype=bool)
        mag = x
    high = (mag >> np.uint64(32)).astype(_F64) * 4294967296.0
    low = (mag & np.uint64(0xFFFFFFFF)).astype(_F64)
    hi, lo = _two_sum(high, low)
    hi = np.where(negative, -hi, hi)
    lo = np.where(negative, -lo, lo)
    return round_exact(hi, lo, dst)


def bitcast(x: Array, dst: D.DType) -> Array:
    """Reinterpret the bits of ``x`` as ``dst`` (same size); to bool means nonzero."""
    view = np.ascontiguousarray(x).view(np_dtype(D.u8 if dst.is_bool else dst))
    return view != 0 if dst.is_bool else view.copy()


# ---------------------------------------------------------------- dispatch

def _unary(opcode: str, a: Array, dt: D.DType) -> Array:
    if dt.is_float:
        if opcode in _FLOAT_PREDICATES:
            return _FLOAT_PREDICATES[opcode](a, dt)
        return _FLOAT_UNARY[opcode](a, dt)
    if opcode == "lnot":
        return np.logical_not(a)
    return _INT_UNARY[opcode](a, dt)


def _binary(opcode: str, a: Array, b: Array, dt: D.DType) -> Array:
    if opcode in _BITS_BINARY:
        return _BITS_BINARY[opcode](a, b)
    if dt.is_float:
        return _FLOAT_BINARY[opcode](a, b, dt)
    return _INT_BINARY[opcode](a, b, dt)


def _compare(opcode: str, a: Array, b: Array, dt: D.DType) -> Array:
    if dt.is_float:
        w = _work_dtype(dt)
        a, b = a.astype(w, copy=False), b.astype(w, copy=False)
    return _COMPARE[opcode](a, b)


def _select(cond: Array, a: Array, b: Array) -> Array:
    if cond.ndim < a.ndim:
        cond = cond[..., None]
    return np.where(cond, a, b)


def eval_pure(opcode: str, attrs: dict, operands: list[Array], result_type: IRType) -> Array:
    """Evaluate one pure elementwise op over arrays of per-thread values.

    ``operands`` are arrays of shape (n,) or (n, width) in their IR types'
    numpy dtypes; the result has the shape and dtype of ``result_type``.
    ``const`` (no operands) returns one row: shape (1,) or (1, width); use
    :func:`const_array` for ``n`` copies.
    """
    rdt = _result_dtype(result_type)
    with np.errstate(all="ignore"):
        if opcode == "const":
            return const_array(attrs["value"], result_type, 1)
        if opcode == "vec_make":
            return np.stack(operands, axis=-1)
        if opcode == "vec_extract":
            return operands[0][..., attrs["index"]].copy()
        if opcode == "select":
            return _select(*operands)
        if opcode == "fma":
            return fma(*operands, rdt)
        if opcode in ("cast", "bitcast"):
            (x,) = operands
            src = _iron_dtype(x.dtype)
            return cast(x, src, rdt) if opcode == "cast" else bitcast(x, rdt)
        if opcode in _COMPARE:
            a, b = operands
            return _compare(opcode, a, b, _iron_dtype(a.dtype))
        if len(operands) == 1 and opcode in _UNARY_OPS:
            return _unary(opcode, operands[0], _iron_dtype(operands[0].dtype))
        if len(operands) == 2 and opcode in _BINARY_OPS:
            return _binary(opcode, operands[0], operands[1], rdt)
    raise EvalError(f"'{opcode}' is not a pure elementwise op with {len(operands)} operands")


_UNARY_OPS = frozenset(_FLOAT_UNARY) | frozenset(_FLOAT_PREDICATES) | frozenset(_INT_UNARY) | {"lnot"}
_BINARY_OPS = frozenset(_FLOAT_BINARY) | frozenset(_INT_BINARY) | frozenset(_BITS_BINARY)

#: Every opcode :func:`eval_pure` evaluates.
PURE_ELEMENTWISE_OPS = (_UNARY_OPS | _BINARY_OPS | frozenset(_COMPARE)
                        | {"const", "vec_make", "vec_extract", "select", "fma", "cast", "bitcast"})
