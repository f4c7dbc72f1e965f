"""Subgroup ops: reductions and votes over active lanes, and shuffles.

Values are viewed as (subgroups, W) lane grids (:meth:`ThreadSpace.to_lanes`);
lanes that are inactive, or that do not exist in a partial subgroup, take no
part in a reduction, and reading one through a shuffle is an error.
"""

from __future__ import annotations

import numpy as np

from ...core.dtypes import DType
from ...core.eval import np_dtype
from ...core.ir import Op
from ...core.ops import REDUCTION_OPS, SHUFFLE_OPS
from .faults import Faults
from .mask import Mask
from .threads import ThreadSpace

Array = np.ndarray



def reduce(opcode: str, x: Array, mask: Mask, dtype: DType, threads: ThreadSpace) -> Array:
    """Combine each subgroup's active lanes; every thread gets its subgroup's result."""
    lanes = threads.to_lanes(x)
    active = threads.to_lanes(mask.bits, fill=False)
    with np.errstate(all="ignore"):
        if opcode == "simd_any":
            per_group = (lanes & active).any(axis=1)
        elif opcode == "simd_all":
            per_group = (lanes | ~active).all(axis=1)
        elif opcode == "simd_sum":
            per_group = _sum(lanes, active, dtype)
        else:
            per_group = _extreme(lanes, active, dtype, largest=opcode == "simd_max")
    return per_group[threads.global_simd_group]


def _sum(lanes: Array, active: Array, dtype: DType) -> Array:
    if not dtype.is_float:
        return np.add.reduce(np.where(active, lanes, 0).astype(lanes.dtype), axis=1, dtype=lanes.dtype)
    # Floats add in lane order; f16/bf16 accumulate in f32 and round once at the end.
    work = np.float64 if dtype.bits == 64 else np.float32
    acc = np.full(lanes.shape[0], -0.0, dtype=work)  # -0.0 is the exact additive identity
    for lane in range(lanes.shape[1]):
        acc = np.where(active[:, lane], acc + lanes[:, lane].astype(work), acc)
    return acc.astype(np_dtype(dtype))


def _extreme(lanes: Array, active: Array, dtype: DType, largest: bool) -> Array:
    if dtype.is_float:
        # fmax/fmin ignore NaN, as the max/min ops do; NaN also stands in for inactive lanes.
        work = np.float64 if dtype.bits == 64 else np.float32
        vals = np.where(active, lanes.astype(work), np.nan)
        out = (np.fmax if largest else np.fmin).reduce(vals, axis=1)
        return out.astype(np_dtype(dtype))
    info = np.iinfo(lanes.dtype)
    neutral = info.min if largest else info.max
    vals = np.where(active, lanes, neutral).astype(lanes.dtype)
    return (np.maximum if largest else np.minimum).reduce(vals, axis=1)


def shuffle(op: Op, x: Array, operand: Array, mask: Mask, threads: ThreadSpace, faults: Faults,
            checks: bool) -> Array:
    """Each active thread reads ``x`` from the lane its shuffle names."""
    w = threads.simd_width
    lane = threads.lane
    arg = operand.astype(np.int64)
    if op.opcode in ("simd_shuffle", "simd_broadcast"):
        src = np.mod(arg, w)
    elif op.opcode == "simd_shuffle_xor":
        src = np.mod(lane ^ arg, w)
    else:
        src = lane - arg if op.opcode == "simd_shuffle_up" else lane + arg
        src = np.where((src < 0) | (src >= w), lane, src)  # off the end: the lane's own value
    slot = threads.global_simd_group * w + src
    if checks:
        if op.opcode == "simd_broadcast":
            _check_uniform_lane(op, src, mask, threads, faults)
        active_slots = threads.to_lanes(mask.bits, fill=False).reshape(-1)
        bad = np.flatnonzero(mask.bits & ~active_slots[slot])
        if bad.size:
            i = int(bad[0])
            raise faults.inactive_lane(op, i, int(src[i]))
    return threads.to_lanes(x).reshape(-1)[slot]


def _check_uniform_lane(op: Op, src: Array, mask: Mask, threads: ThreadSpace, faults: Faults) -> None:
    """simd_broadcast's lane must be the same for every active lane of a subgroup."""
    lanes = threads.to_lanes(src, fill=-1)
    active = threads.to_lanes(mask.bits, fill=False)
    lo = np.where(active, lanes, np.iinfo(np.int64).max).min(axis=1)
    hi = np.where(active, lanes, np.iinfo(np.int64).min).max(axis=1)
    bad = np.flatnonzero(active.any(axis=1) & (lo != hi))
    if bad.size:
        sg = int(bad[0])
        raise faults.subgroup_divergence(op, threads.first_thread_of_simd_group(sg),
                                         f"the broadcast lane differs between lanes ({lo[sg]} and {hi[sg]})")
