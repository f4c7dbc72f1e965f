"""What a bench row's time means: throughput, fractions of the device's ceilings, and a bottleneck verdict.

Everything here is arithmetic on numbers the timing already produced; it never touches a device, so
computing it cannot disturb a measurement (DESIGN.md: metrics strictly after timing).

Units: times in microseconds, bytes and FLOPs as counts, bandwidth in GB/s (10^9 B/s), throughput in
GFLOP/s.  The ceilings come from :mod:`.device_specs` (the datasheet) unless ``measured_peaks`` (what
``iron device --probe`` measured, see :mod:`.measured`) supplies its own.

The bottleneck verdict, in order:

1. ``latency`` when the median is under :data:`LATENCY_US` (launch and synchronisation cost dominate
   any kernel that short), or when the work would take under :data:`MIN_WORK_US` even at the device's
   peaks (so what the clock shows is latency, not throughput);
2. otherwise ``compute`` when the arithmetic intensity (FLOPs per byte) reaches the device's ridge
   point (peak FLOP/s / peak bytes/s), else ``memory``; a kernel with no FLOP model is ``memory``,
   one with no byte model ``compute``.  Where a half-precision vector peak is unknown, the f32 vector
   peak stands in for the verdict only (no listed GPU does half-precision math slower than f32), and
   %FLOP stays blank;
3. None when the ceilings needed for the comparison are unknown (the roofline columns stay blank).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.protocol import ProfileInfo
from . import device_specs

#: Below this median a kernel is latency-bound whatever it moves (a launch alone costs a few us).
LATENCY_US = 5.0
#: If the modelled work needs less than this at peak throughput, the time measured is mostly latency.
MIN_WORK_US = 1.0

_DTYPES = {"f32": "f32", "float32": "f32", "f16": "f16", "float16": "f16", "half": "f16",
           "bf16": "bf16", "bfloat16": "bf16"}


def profile(median_us: float | None, bytes_moved: int | None, flops: int | None, device_name: str | None,
            dtype: str | None = None, registers: int | None = None, occupancy: float | None = None,
            measured_peaks: Mapping[str, Any] | None = None, matrix: bool = False) -> ProfileInfo:
    """The :class:`ProfileInfo` of a kernel that took ``median_us`` to move ``bytes_moved`` and do ``flops``.

    ``dtype`` picks the FLOP ceiling (f32 vector peak when None; integer dtypes have none); ``matrix``
    compares against the matrix unit's peak instead of the vector units'.  ``measured_peaks`` (keys
    ``bandwidth_gbps``, ``f32_gflops``, ``f16_gflops``, ``bf16_gflops``, ``matrix_f16_gflops``,
    ``matrix_bf16_gflops``, optional ``created``) overrides the datasheet ceiling by ceiling.
    An unknown device (and no measured peaks) leaves every fraction and the verdict None.
    """
    base = ProfileInfo(bytes_moved=bytes_moved, flops=flops, registers=registers, occupancy=occupancy)
    if median_us is None or not median_us > 0:
        return base
    seconds = median_us * 1e-6
    gbps = bytes_moved / seconds / 1e9 if bytes_moved is not None else None
    gflops = flops / seconds / 1e9 if flops is not None else None
    intensity = flops / bytes_moved if flops is not None and bytes_moved else None
    peak_bw, peak_flops, source = ceilings(device_name, dtype, matrix, measured_peaks)
    bw_fraction = gbps * 1e9 / peak_bw if gbps is not None and peak_bw else None
    flop_fraction = gflops * 1e9 / peak_flops if gflops is not None and peak_flops else None
    return ProfileInfo(bytes_moved=bytes_moved, flops=flops, gbps=gbps, gflops=gflops, bw_fraction=bw_fraction,
                       flop_fraction=flop_fraction, intensity=intensity,
                       bottleneck=bottleneck(median_us, bytes_moved, flops, peak_bw,
                                             peak_flops or _stand_in(device_name, dtype, matrix, measured_peaks)),
                       registers=registers, occupancy=occupancy, peak_source=source)


def ceilings(device_name: str | None, dtype: str | None = None, matrix: bool = False,
             measured_peaks: Mapping[str, Any] | None = None) -> tuple[float | None, float | None, str | None]:
    """(peak bytes/s, peak FLOP/s for ``dtype``, where they come from) for the device, any of them None."""
    d = _DTYPES.get((dtype or "f32").lower())
    spec = device_specs.lookup(device_name)
    bw = spec.peak_bandwidth if spec else None
    flops = spec.peak_flops(d, matrix) if spec and d else None
    bw_from = flops_from = spec.source if spec else None
    if measured_peaks:
        probe = "measured by iron device --probe" + (f" ({measured_peaks['created']})"
                                                     if measured_peaks.get("created") else "")
        m_bw = measured_peaks.get("bandwidth_gbps")
        if m_bw:
            bw, bw_from = float(m_bw) * 1e9, probe
        key = f"matrix_{d}_gflops" if matrix else f"{d}_gflops"
        m_flops = measured_peaks.get(key) if d else None
        if m_flops:
            flops, flops_from = float(m_flops) * 1e9, probe
    if bw is None and flops is None:
        return None, None, None
    if bw_from == flops_from or flops is None:
        source = bw_from
    elif bw is None:
        source = flops_from
    else:
        source = f"bandwidth: {bw_from}; FLOP/s: {flops_from}"
    return bw, flops, source


def _stand_in(device_name: str | None, dtype: str | None, matrix: bool,
              measured_peaks: Mapping[str, Any] | None) -> float | None:
    if matrix or _DTYPES.get((dtype or "f32").lower()) not in ("f16", "bf16"):
        return None
    return ceilings(device_name, "f32", False, measured_peaks)[1]


def bottleneck(median_us: float, bytes_moved: int | None, flops: int | None, peak_bw: float | None,
               peak_flops: float | None) -> str | None:
    """"latency", "memory", "compute" or None, by the rule in this module's docstring."""
    if median_us < LATENCY_US:
        return "latency"
    t_mem = bytes_moved / peak_bw if bytes_moved and peak_bw else None
    t_cmp = flops / peak_flops if flops and peak_flops else None
    if t_mem is None and t_cmp is None:
        return None
    if bytes_moved and t_mem is None or flops and t_cmp is None:
        # The model has work on a side whose ceiling is unknown: no honest comparison.
        return None
    if max(t_mem or 0.0, t_cmp or 0.0) * 1e6 < MIN_WORK_US:
        return "latency"
    # Intensity >= ridge point  <=>  flops / peak_flops >= bytes / peak_bw.
    return "compute" if (t_cmp or 0.0) >= (t_mem or 0.0) else "memory"


def ridge_point(device_name: str | None, dtype: str | None = None, matrix: bool = False,
                measured_peaks: Mapping[str, Any] | None = None) -> float | None:
    """FLOPs per byte at which the device turns from memory-bound to compute-bound, or None if unknown."""
    bw, flops, _ = ceilings(device_name, dtype, matrix, measured_peaks)
    return flops / bw if bw and flops else None


__all__ = ["LATENCY_US", "MIN_WORK_US", "bottleneck", "ceilings", "profile", "ridge_point"]
