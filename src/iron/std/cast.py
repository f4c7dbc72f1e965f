"""Copies and float conversions among f32, f16, bf16 and the 8-bit floats: one vectorized pass, round to
nearest even (saturating into f8e4m3 / f8e5m2, as a kernel's cast does: docs/language.md).

    from iron.std import cast
    h = cast.cast(x, "bf16")        # x: f32/f16/bf16/f8 array of any shape
    q = cast.cast(x, "f8e4m3")      # quantise (scale first: values past 448 saturate)
    y = cast.copy(x)                # same dtype, a new buffer (or out=)
"""

from __future__ import annotations

from typing import Any

import iron.lang as il
from iron import In, T, Tensor, U, bf16, f8e4m3, f8e5m2, f16, f32, func, kernel, variants
from iron.core import dtypes as D
from iron.core.errors import LaunchError
from iron.lang import grid_size, program_id

from . import _host
from .elementwise import GROUP, MAX_ELEMENTS, flat_grid
from ._plans import planned

_FLOATS = (f32, f16, bf16)
_F8 = (f8e4m3, f8e5m2)


def vector_for(src: D.DType, dst: D.DType) -> int:
    """Elements per thread: 16 bytes of the wider side (4 with an f32 side, else 8; 8 between 8-bit floats, the
    widest vector every target has)."""
    return min(8, _host.VECTOR_BYTES // max(src.itemsize, dst.itemsize))


#: Every (source, destination) pair of f32/f16/bf16 with its vector width; T == U is the copy.
PAIRS = tuple({"T": s, "U": d, "VEC": vector_for(s, d)} for s in _FLOATS for d in _FLOATS)
#: The pairs with an 8-bit float on either side (quantising and dequantising), copies of them included.
F8_PAIRS = tuple({"T": s, "U": d, "VEC": vector_for(s, d)} for s in _FLOATS + _F8 for d in _FLOATS + _F8
                 if s in _F8 or d in _F8)


@kernel(variants(T=[f32, f16, bf16, f8e4m3, f8e5m2], U=[f32, f16, bf16, f8e4m3, f8e5m2], VEC=[4, 8]))
def cast_kernel(x: In[T], out: Tensor[U], n: int):
    """out[i] = U(x[i]): the exact value of x rounded once to U, to nearest even (a copy when T == U).

    x: n contiguous elements of T; out: n of U (f32/f16/bf16/f8e4m3/f8e5m2 each).  VEC = 16 bytes of the
    wider type per thread, at most 8 (one vector load and store), a scalar tail past n // VEC * VEC; grid
    ceil(n / VEC) threads as ``flat_grid`` rows.  Widening (f16/bf16 -> f32, f8 -> anything) is exact;
    f16 <-> bf16 and every other narrowing rounds once (through f32, exact for all of them).  Non-finite:
    NaN stays NaN, +-inf stay +-inf, -0 stays -0, finite values past U's largest round to +-inf as IEEE
    does (f32 -> f16 from 65520 on); into f8 they saturate to its largest (infinities too).
    Subnormal results are kept (interpreter, lavapipe, CUDA); a device that flushes them gives a
    zero of the same sign.
    """
    i = (program_id(0) + program_id(1) * grid_size(0)) * VEC
    if i + VEC <= n:
        out.store(i, _convert(x.load(i, width=VEC), T, U))
    elif i < n:
        for k in range(VEC):
            if i + k < n:
                out[i + k] = _convert(x[i + k], T, U)


@func
def _convert(v, SRC, DST):
    """v (of SRC) as DST; f16 <-> bf16 through f32, exact for both, so still one rounding (and the Metal
    target rejects a direct half <-> bfloat conversion: a workaround, reported)."""
    if SRC is DST:
        r = v
    else:
        r = il.cast(f32(v), DST)  # il.: this module's own cast() is the host function
    return r


@planned
def cast(x: Any, dtype: Any, out: Any = None, backend: str | None = None) -> Any:
    """``x`` converted to ``dtype`` (an Iron dtype, its name "f32", "f16", "bf16", or a numpy / torch dtype),
    rounded to nearest even; a new array like ``x`` unless ``out`` (of x's shape and ``dtype``) is given."""
    return _cast(x, dtype, out, backend, "cast")


def _cast(x: Any, dtype: Any, out: Any, backend: str | None, fn: str) -> Any:
    src = _host.check_float(x, "x", _host.CAST_FLOATS)
    dst = _host.float_dtype(dtype, fn, _host.CAST_FLOATS)
    n = _host.size_of(x)
    if n > MAX_ELEMENTS:
        raise LaunchError(f"x: {n} elements; the kernel indexes at most {MAX_ELEMENTS}")
    out = _host.output(fn, out, x, _host.shape_of(x), dst, {"x": x}, in_place=("x",))
    if n:
        vw = vector_for(src, dst)
        cast_kernel.variant(T=src, U=dst, VEC=vw).launch(x, out, n, grid=flat_grid(_host.ceil_div(n, vw)),
                                                         group=(GROUP, 1), backend=backend)
    return out


@planned
def copy(x: Any, out: Any = None, backend: str | None = None) -> Any:
    """A copy of ``x`` (f32/f16/bf16), 16 bytes per thread; into ``out`` when given."""
    return _cast(x, _host.check_float(x, "x", _host.CAST_FLOATS), out, backend, "copy")


__all__ = ["F8_PAIRS", "PAIRS", "cast", "cast_kernel", "copy", "vector_for"]
