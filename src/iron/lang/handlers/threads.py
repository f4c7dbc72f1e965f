"""Thread-index and subgroup builtins."""

from __future__ import annotations

from typing import Any

from ...core.types import ScalarType
from ..lower_call import CallArgs, handles
from ..values import RV, FValue, describe


@handles("program_id", "thread_id", "group_id", "group_size", "num_groups", "grid_size")
def index_with_axis(lw: Any, a: CallArgs) -> FValue:
    axis = lw.static_int(a["axis"], a.node_of("axis"), f"the axis of {a.name}()")
    if axis not in (0, 1, 2):
        raise lw.type_error(f"{a.name}() axis must be 0, 1 or 2, got {axis}", a.node_of("axis"))
    return lw.value(a.name, (), a.node, axis=axis)


@handles("lane_id", "simd_size", "simd_group_id", "num_simd_groups")
def index_without_axis(lw: Any, a: CallArgs) -> FValue:
    return lw.value(a.name, (), a.node)


def _scalar(lw: Any, a: CallArgs, name: str) -> RV:
    node = a.node_of(name)
    rv = lw.materialize(a[name], node)
    if not isinstance(rv.type, ScalarType):
        raise lw.type_error(f"{a.name}() works on scalars, got {describe(rv)}", node,
                            hint="apply it to each element of a vector")
    return rv


@handles("simd_sum", "simd_max", "simd_min")
def simd_reduce(lw: Any, a: CallArgs) -> FValue:
    x = _scalar(lw, a, "x")
    if x.dtype.is_bool:
        raise lw.type_error(f"{a.name}() of a bool", a.node_of("x"),
                            hint="use simd_any()/simd_all(), or reduce i32(flag)")
    return lw.value(a.name, [x.value], a.node)


@handles("simd_any", "simd_all")
def simd_vote(lw: Any, a: CallArgs) -> FValue:
    return lw.value(a.name, [lw.bool_value(a["cond"], a.node_of("cond")).value], a.node)


@handles("simd_shuffle", "simd_shuffle_xor", "simd_shuffle_up", "simd_shuffle_down", "simd_broadcast")
def simd_shuffle(lw: Any, a: CallArgs) -> FValue:
    x = _scalar(lw, a, "x")
    second = list(a.builtin.signature.parameters)[1]
    lane = lw.to_index(a[second], a.node_of(second), what=second)
    return lw.value(a.name, [x.value, lane.value], a.node)
