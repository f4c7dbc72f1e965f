"""The uniformity (divergence) analysis of iron.core.uniformity, on IR built by hand and by the frontend."""

from __future__ import annotations

import pytest

from iron import In, Tensor, f32, func, i32, kernel
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.errors import DivergentBarrierError
from iron.core.types import ScalarType
from iron.core.uniformity import find_divergent_barriers, varying_values
from iron.lang import atomic_add, barrier, group_id, group_size, num_groups, shared, simd_sum, thread_id


@kernel
def mixed_uniformity(a: In[f32], c: Tensor[i32], n: int):
    g = group_id(0) * 2 + n
    t = thread_id(0) + 1
    same = a[g]
    different = a[t]
    old = atomic_add(c, 0, 1)
    total = simd_sum(same)
    flag = 0
    if t > 3:
        flag = 1
    steady = 0
    for k in range(num_groups(0)):
        steady += k
    c[1] = g + t + old + flag + steady + i32(same + different + total)


def _varying_hints(k) -> set[str]:
    return {v.hint for v in varying_values(k) if v.hint}


def test_values_vary_exactly_when_they_depend_on_the_thread() -> None:
    hints = _varying_hints(mixed_uniformity.ir())
    assert {"t", "different", "old", "flag"} <= hints
    assert not {"g", "same", "total", "steady", "k"} & hints


def _kernel_with_loop(barrier_after_continue: bool):
    """for k in 0..4 { if thread_id < 2 { continue }; barrier } (or the barrier before the if)."""
    k, b = new_kernel("continue_then_barrier", [("a", tensor(D.f32))])
    zero, four, one = b.const(0, D.i32), b.const(4, D.i32), b.const(1, D.i32)
    loop = b.for_(zero, four, one, hint="k")
    with b.at(loop.regions[0]):
        if not barrier_after_continue:
            b.op("barrier")
        tid = b.op("thread_id", axis=0)
        cond = b.op("lt", [tid, b.const(2, D.i32)])
        branch = b.if_(cond)
        with b.at(branch.regions[0]):
            b.op("continue")
        if barrier_after_continue:
            b.op("barrier")
    return k, branch


def test_barrier_after_a_divergent_continue_is_reported_and_before_it_is_not() -> None:
    k, branch = _kernel_with_loop(barrier_after_continue=True)
    (report,) = find_divergent_barriers(k)
    assert report.cause is branch and report.reason == "after a continue that only some threads take"
    k2, _ = _kernel_with_loop(barrier_after_continue=False)
    assert find_divergent_barriers(k2) == []


def test_uniform_early_exit_keeps_control_uniform() -> None:
    k, b = new_kernel("uniform_return", [("a", tensor(D.f32)), ("n", ScalarType(D.i32))])
    n = k.params[1].value
    cond = b.op("lt", [b.op("group_id", axis=0), n])
    branch = b.if_(cond)
    with b.at(branch.regions[0]):
        b.op("return")
    b.op("barrier")
    assert find_divergent_barriers(k) == []



# ---------------------------------------------------------------- tuples returned by helpers

@func
def _geometry(n):
    """A group-wide count beside a thread's own index: one tuple, elements of both kinds."""
    per = group_size(0) // 4
    return per, n // per, thread_id(0) % per


@kernel
def tuple_count_bounds_a_barrier_loop(x: In[f32], y: Tensor[f32], n: int):
    s = shared(f32, 64)
    per, steps, lane = _geometry(n)
    t = thread_id(0)
    for i in range(steps):
        s[t % 64] = x[i] + f32(lane)
        barrier()
        y[t] = s[(t + 1) % 64] + f32(per)
        barrier()


@kernel
def tuple_index_bounds_a_barrier_loop(x: In[f32], y: Tensor[f32], n: int):
    s = shared(f32, 64)
    per, steps, lane = _geometry(n)
    t = thread_id(0)
    for i in range(lane):
        s[t % 64] = x[i] + f32(steps)
        barrier()
        y[t] = s[(t + 1) % 64] + f32(per)


def test_a_helpers_tuple_varies_element_by_element() -> None:
    """The count from group_size stays uniform beside the thread index (it used to vary with it, and the
    barrier loop it bounds was refused); the thread index still varies, and a loop it bounds is reported."""
    k = tuple_count_bounds_a_barrier_loop.ir()
    assert find_divergent_barriers(k) == []
    hints = _varying_hints(k)
    assert "t" in hints and not {"per", "steps", "i"} & hints
    with pytest.raises(DivergentBarrierError, match="inside a loop whose bounds depend on the thread"):
        tuple_index_bounds_a_barrier_loop.ir()
