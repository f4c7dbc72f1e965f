"""How a kernel's output is judged against its float64 oracle: tolerances, poisoning, comparison.

A float output passes when ``|got - want| <= rtol * scale + atol`` for every element, where
``scale`` is what the error is proportional to (``|want|`` by default; ``sum |term|`` for a sum,
whose error bound is relative to its terms, not to a possibly cancelled result).  A non-finite expected
value is matched exactly: an infinity only by the same infinity, NaN only by NaN (and a NaN never passes
where a finite value is expected); a finite one only by a finite value, except that a value within
tolerance of the dtype's largest finite one may overflow to the infinity of its sign.

``rtol`` follows from the arithmetic (see docs/runner.md): a correctly rounded operation adds at
most the unit roundoff ``u`` of its dtype (f32 ``5.96e-8``, f16 ``4.88e-4``, bf16 ``3.91e-3``), so a
value that went through ``d`` roundings is off by about ``d * u`` of its scale.  The base per dtype
is two roundings' worth (f16 ``1e-3``, bf16 ``8e-3``), f32 ``1e-6`` (GPU math libraries are faithful
only to a few ulp); ``rtol = BASE[dtype] * max(1, steps / 2)`` plus, in an f16/bf16 kernel with an
f32 accumulator, ``BASE[f32] * max(1, f32_steps / 2)``.  ``atol`` is the dtype's smallest normal
number, which absorbs results that underflow.  Integer and boolean outputs compare exactly.

Poison: every write-only output is filled with NaN (floats) or a sentinel (the minimum of a signed
integer dtype, the maximum of an unsigned one, True for bool) before each run, so an element the
kernel forgot to write fails.  An oracle that expects an element unwritten expects the poison.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..core import dtypes as D
from ..core.dtypes import DType

#: Relative tolerance of two roundings' worth per float dtype.
BASE_RTOL: dict[str, float] = {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3, "f64": 1e-13, "f8e4m3": 0.125, "f8e5m2": 0.25}


@dataclass(frozen=True)
class Depth:
    """Rounding steps on the longest path to an output element.

    ``steps`` are roundings in the output dtype (a sequential sum of n terms: n - 1; a tree or
    butterfly sum: ceil(log2 n)); ``f32_steps`` those of an f32 accumulator inside an f16/bf16
    kernel (in an f32 kernel the two simply add up).
    """

    steps: int = 1
    f32_steps: int = 0


@dataclass(frozen=True)
class Tolerance:
    """``|got - want| <= rtol * scale + atol``; ``exact`` demands identical values."""

    rtol: float = 0.0
    atol: float = 0.0
    exact: bool = False

    def __str__(self) -> str:
        return "exact" if self.exact else f"rtol={self.rtol:.3g}, atol={self.atol:.3g}"


EXACT = Tolerance(exact=True)


@dataclass(frozen=True)
class Expect:
    """An oracle's value for one output and, optionally, the scale its error is relative to."""

    value: Any
    scale: Any = None


@dataclass(frozen=True)
class Verdict:
    """The comparison of one output: ``worst`` is the largest error over its allowance (<= 1 passes)."""

    ok: bool
    worst: float | None
    message: str | None = None


def log2_ceil(n: int) -> int:
    """Rounding steps of a tree or butterfly reduction over ``n`` terms."""
    return math.ceil(math.log2(n)) if n > 1 else 0


def finfo(dt: DType) -> Any:
    """``np.finfo`` that also knows bf16."""
    npdt = D.numpy_dtype(dt)
    return ml_dtypes.finfo(npdt) if npdt.kind != "f" else np.finfo(npdt)


def derive_tolerance(dtype: DType, depth: Depth | int = 1) -> Tolerance:
    """The tolerance of an output of ``dtype`` after ``depth`` roundings (exact for integers and bool)."""
    if isinstance(depth, int):
        depth = Depth(depth)
    if not dtype.is_float:
        return EXACT
    if dtype.name not in BASE_RTOL:
        raise ValueError(f"no base tolerance for {dtype}; pass tolerance=Tolerance(rtol=..., atol=...)")
    if dtype.bits >= 32:
        rtol = BASE_RTOL[dtype.name] * max(1.0, (depth.steps + depth.f32_steps) / 2)
    else:
        rtol = BASE_RTOL[dtype.name] * max(1.0, depth.steps / 2)
        if depth.f32_steps:
            rtol += BASE_RTOL["f32"] * max(1.0, depth.f32_steps / 2)
    return Tolerance(rtol=rtol, atol=float(finfo(dtype).tiny))


def is_float_array(a: Any) -> bool:
    dt = np.asarray(a).dtype
    return D.is_float_numpy(dt)


def widen(value: Any) -> Any:
    """An argument as the oracle sees it: float arrays as float64 copies (exact), other arrays copied."""
    if isinstance(value, np.ndarray):
        return value.astype(np.float64) if is_float_array(value) else value.copy()
    return value


def poison_value(dt: np.dtype) -> Any:
    if D.is_float_numpy(dt):
        return np.nan
    if dt.kind == "b":
        return True
    info = np.iinfo(dt)
    return info.min if dt.kind == "i" else info.max


def poison(a: np.ndarray) -> None:
    """Fill ``a`` with its dtype's poison, in place."""
    a[...] = poison_value(a.dtype)


def compare(got: Any, expect: Expect | Any, tol: Tolerance) -> Verdict:
    """Judge ``got`` against the oracle's ``expect``; NaN matches NaN (an element left poisoned on purpose)."""
    if not isinstance(expect, Expect):
        expect = Expect(expect)
    got = np.asarray(got)
    want = np.asarray(expect.value)
    if got.size != want.size:
        return Verdict(False, None, f"{got.size} elements, the oracle gave {want.size}")
    got, want = got.reshape(-1), want.reshape(-1)
    if not is_float_array(got) or tol.exact:
        if is_float_array(got) or is_float_array(want):
            g, w = got.astype(np.float64), want.astype(np.float64)
            bad = ~((g == w) | (np.isnan(g) & np.isnan(w)))
        else:
            bad = got.astype(np.int64) != want.astype(np.int64) if got.dtype.kind != "b" else got != want.astype(bool)
        return _verdict(got, want, bad, "exact")
    scale = None if expect.scale is None else np.asarray(expect.scale, dtype=np.float64).reshape(-1)
    return _compare_floats(got, want, scale, tol)


#: Elements compared at a time, so the float64 temporaries stay in cache: a bench row's 64M outputs in
#: one piece made each of the ~20 passes below stream 512 MB (10.5 s for 64M bf16 values on a CPU here).
COMPARE_CHUNK = 1 << 18
#: Threads that compare chunks at once (numpy's loops run outside Python's lock); outputs of fewer
#: than this many chunks are compared on the calling thread.
COMPARE_THREADS = min(8, os.cpu_count() or 1)
_pool: ThreadPoolExecutor | None = None


def _map_chunks(fn: Any, starts: range) -> list[Any]:
    """``fn`` over the chunk starts, on the comparison pool when there are enough of them; in order."""
    global _pool
    if COMPARE_THREADS < 2 or len(starts) < COMPARE_THREADS:
        return [fn(s) for s in starts]
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=COMPARE_THREADS, thread_name_prefix="iron-compare")
    return list(_pool.map(fn, starts))


def _compare_floats(got: np.ndarray, want: np.ndarray, scale: np.ndarray | None, tol: Tolerance) -> Verdict:
    """:func:`compare` for float outputs, chunk by chunk: each element within ``rtol * scale + atol``."""
    top = float(ml_dtypes.finfo(got.dtype).max)

    def chunk(start: int) -> tuple[float, np.ndarray, np.ndarray]:
        part = slice(start, start + COMPARE_CHUNK)
        g, w = got[part].astype(np.float64), want[part].astype(np.float64)
        s = np.abs(w) if scale is None else np.abs(scale if scale.size == 1 else scale[part])
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            err = np.abs(g - w)
            allowed = tol.rtol * s + tol.atol
            finite = np.isfinite(w)
            # An allowance scaled by an infinite |want| (or scale) would pass anything: a non-finite expected
            # value is matched exactly (infinities by sign, NaN only by NaN), and a finite one only by finite
            # values within the allowance.
            ok = np.where(finite, np.isfinite(g) & (err <= allowed), (g == w) | (np.isnan(g) & np.isnan(w)))
            # A value within tolerance of the dtype's largest finite one may round to infinity of its sign.
            ok |= np.isinf(g) & finite & (np.sign(g) == np.sign(w)) & (np.abs(w) + allowed > top)
            ratio = np.where(ok & ~np.isfinite(err), 0.0, err / np.where(allowed > 0, allowed, np.inf))
            ratio = np.where(ok, np.minimum(ratio, 1.0), ratio)
        peak = float(np.nanmax(np.where(np.isnan(ratio), np.inf, ratio))) if ratio.size else 0.0
        bad = np.flatnonzero(~ok)
        return peak, bad + start, err[bad]

    parts = _map_chunks(chunk, range(0, got.size, COMPARE_CHUNK))
    peak = max((p for p, _, _ in parts), default=0.0)
    bad_at = [b for _, b, _ in parts if b.size]
    bad_err = [e for _, b, e in parts if b.size]
    worst = peak if math.isfinite(peak) else None
    if not bad_at:
        return Verdict(True, worst if worst is not None else 0.0)
    idx, err = np.concatenate(bad_at), np.concatenate(bad_err)
    idx = idx[np.argsort(-np.where(np.isnan(err), np.inf, err), kind="stable")]
    shown = ", ".join(f"[{i}] got {_fmt(got[i])} want {_fmt(want[i])}" for i in idx[:4])
    return Verdict(False, worst, f"{idx.size}/{got.size} elements differ ({tol}); worst: {shown}")


def _verdict(got: np.ndarray, want: np.ndarray, bad: np.ndarray, tol: str) -> Verdict:
    """The verdict of an exact comparison: the first differing elements shown."""
    nbad = int(np.count_nonzero(bad))
    if nbad == 0:
        return Verdict(True, 0.0)
    shown = ", ".join(f"[{i}] got {_fmt(got[i])} want {_fmt(want[i])}" for i in np.flatnonzero(bad)[:4])
    return Verdict(False, None, f"{nbad}/{got.size} elements differ ({tol}); worst: {shown}")


def _fmt(v: Any) -> str:
    if isinstance(v, (np.floating, float)) or (hasattr(v, "dtype") and D.is_float_numpy(v.dtype)):
        return f"{float(v):.7g}"
    return str(v.item() if hasattr(v, "item") else v)


__all__ = ["BASE_RTOL", "Depth", "EXACT", "Expect", "Tolerance", "Verdict", "compare", "derive_tolerance", "finfo",
           "log2_ceil", "poison", "poison_value", "widen"]
