"""Subnormal flushing in the Vulkan tests: what a device without 32-bit ``DenormPreserve`` may return.

docs/vulkan.md ("Subnormals"): without the mode each subnormal operand or result of an f32 operation may be
a zero of the same sign, nothing else.  :func:`flush_allowed` is that rule for checking results against a
reference; :func:`simulate_flushing` makes GLSL helper text flush as such a device may, so the FTZ path runs
on lavapipe (which keeps subnormals).
"""

from __future__ import annotations

import re

import numpy as np


def same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Bit for bit equal, any NaN matching any NaN (element-wise)."""
    return ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))


def flushed(v: np.ndarray) -> np.ndarray:
    """``v`` with every subnormal of its float type replaced by a zero of its sign (what flushing does)."""
    v = np.asarray(v)
    tiny = np.isfinite(v) & (v != 0) & (np.abs(v) < np.finfo(v.dtype).tiny)
    return np.where(tiny, np.copysign(v.dtype.type(0), v), v).astype(v.dtype)


def flush_allowed(got: np.ndarray, want: np.ndarray, want_flushed_inputs: np.ndarray) -> np.ndarray:
    """Where a device without DenormPreserve may differ from the IEEE result ``want`` (element-wise): each
    result is the reference's with the subnormal operands kept or flushed (``want_flushed_inputs``: the
    reference on :func:`flushed` operands), and the result itself kept or flushed; one of those four values.
    Where neither an operand nor the result is subnormal the four are ``want``: exact.  A result of the
    smallest normal magnitude may flush too: a device may detect tininess before rounding (NVIDIA's Vulkan
    driver gives 0 for 2^-124 * 0.25 where the unrounded product is just below 2^-126)."""
    want = np.asarray(want)
    smallest_normal = np.abs(want) == np.finfo(want.dtype).tiny
    tiny_flushed = np.where(smallest_normal, np.copysign(want.dtype.type(0), want), want).astype(want.dtype)
    candidates = (want, flushed(want), tiny_flushed, want_flushed_inputs, flushed(want_flushed_inputs))
    return np.logical_or.reduce([same(got, c) for c in candidates])


#: GLSL overloads that convert like a flushing device: a subnormal f32 read or produced by a conversion is
#: a zero of its sign.
FLUSHING_CONVERSIONS = """\
float iron_ftz(float v) {
  uint u = floatBitsToUint(v);
  return (u & 0x7f800000u) == 0u ? uintBitsToFloat(u & 0x80000000u) : v;
}
double iron_ftz_double(float v) { return double(iron_ftz(v)); }
double iron_ftz_double(double v) { return v; }
double iron_ftz_double(uint v) { return double(v); }
double iron_ftz_double(int v) { return double(v); }
float iron_ftz_float(double v) { return iron_ftz(float(v)); }
float iron_ftz_float(float v) { return iron_ftz(v); }
"""


def simulate_flushing(helpers: str) -> str:
    """GLSL ``helpers`` (f32 helpers computing through double, like ``iron_div``) with every ``float(...)`` and
    ``double(...)`` conversion flushing subnormal f32 values, as on a device without 32-bit DenormPreserve;
    :data:`FLUSHING_CONVERSIONS` first.  The helpers must do no f32 arithmetic besides those conversions."""
    text = re.sub(r"\bdouble\(", "iron_ftz_double(", helpers)
    return FLUSHING_CONVERSIONS + "\n" + re.sub(r"\bfloat\(", "iron_ftz_float(", text)


def keeps_subnormals(info: dict, width: int = 32) -> bool:
    """Whether a device (its ``info``) must give subnormal results exactly for floats of ``width`` bits: it
    offers ``DenormPreserve`` for them, or it is lavapipe, which offers none but keeps them (the tests check)."""
    return width in info["denorm_preserve_widths"] or "llvmpipe" in info["name"]


def accepted(got: np.ndarray, want: np.ndarray, want_flushed_inputs: np.ndarray, exact: bool) -> np.ndarray:
    """Element-wise: ``got`` is ``want`` bit for bit (``exact``), or else one of :func:`flush_allowed`'s values."""
    return same(got, want) if exact else flush_allowed(got, want, want_flushed_inputs)
