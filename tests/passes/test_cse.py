"""cse: identical pure ops merge within dominating scopes; effects and thread-dependent ops never merge."""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen.passes import cse
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.printer import print_kernel

from pass_harness import apply_pass, check_preserves, count_ops


def _kernel(dt=D.f32):
    k, b = new_kernel("cse", [("a", tensor(dt)), ("out", tensor(dt))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0, hint="pid")
    return k, b, a, out, pid


def test_identical_pure_ops_merge_and_commutative_operands_are_normalised():
    k, b, a, out, pid = _kernel()
    x = b.op("load", [a, pid])
    y = b.op("cast", [pid], to=D.f32)
    s1 = b.op("add", [x, y])
    s2 = b.op("add", [y, x])  # same sum, operands swapped
    d1 = b.op("sub", [x, y])
    d2 = b.op("sub", [y, x])  # not commutative: must stay
    b.op("store", [out, pid, b.op("add", [b.op("mul", [s1, s2]), b.op("mul", [d1, d2])])])
    merged = check_preserves(cse.run, k, [np.arange(8, dtype=np.float32), np.zeros(8, np.float32)], 8)
    assert count_ops(merged, "sub") == 2
    assert count_ops(merged, "add") == 2  # s1 (= s2) and the final sum


def test_constants_merge_bitwise_only():
    k, b, a, out, pid = _kernel()
    x = b.op("load", [a, pid])
    zeros = [b.const(0.0, D.f32), b.const(-0.0, D.f32), b.const(0.0, D.f32)]
    nans = [b.const(float("nan"), D.f32), b.const(float("nan"), D.f32)]
    acc = x
    for c in zeros + nans:
        acc = b.op("add", [acc, c])
    b.op("store", [out, pid, acc])
    merged = apply_pass(cse.run, k)
    text = print_kernel(merged)
    assert text.count("const 0.0 ") == 1 and text.count("const -0.0 ") == 1 and text.count("const nan ") == 1
    assert count_ops(merged, "const") == 3


def test_loads_var_loads_subgroup_ops_and_atomics_never_merge():
    k, b, a, out, pid = _kernel(D.i32)
    l1 = b.op("load", [a, pid])
    b.op("store", [a, pid, b.const(5, D.i32)])
    l2 = b.op("load", [a, pid])
    slot = b.op("var", [], type=b.const(0, D.i32).type)
    b.op("var_store", [slot, l1])
    v1 = b.op("var_load", [slot])
    b.op("var_store", [slot, l2])
    v2 = b.op("var_load", [slot])
    s1 = b.op("simd_sum", [pid])
    s2 = b.op("simd_sum", [pid])
    a1 = b.op("atomic_add", [out, b.const(0, D.i32), b.const(1, D.i32)])
    a2 = b.op("atomic_add", [out, b.const(0, D.i32), b.const(1, D.i32)])
    total = v1
    for v in (v2, s1, s2, a1, a2):
        total = b.op("add", [total, v])
    b.op("store", [out, b.op("add", [pid, b.const(1, D.i32)]), total])
    merged = check_preserves(cse.run, k, [np.arange(8, dtype=np.int32), np.zeros(9, np.int32)], 8)
    for opcode, n in (("load", 2), ("var_load", 2), ("simd_sum", 2), ("atomic_add", 2)):
        assert count_ops(merged, opcode) == n, opcode


def test_op_in_enclosing_block_is_reused_inside_a_region_but_not_the_reverse():
    k, b, a, out, pid = _kernel(D.i32)
    outer = b.op("mul", [pid, pid])
    branch = b.if_(b.op("lt", [pid, b.const(4, D.i32)]))
    with b.at(branch.regions[0]):
        inner_same = b.op("mul", [pid, pid])  # dominated by `outer`: reused
        inner_new = b.op("add", [pid, pid])
        b.op("store", [out, pid, b.op("add", [inner_same, inner_new])])
    after = b.op("add", [pid, pid])  # the region's add does not dominate this one
    b.op("store", [a, pid, b.op("add", [outer, after])])
    merged = check_preserves(cse.run, k, [np.zeros(8, np.int32), np.zeros(8, np.int32)], 8)
    assert count_ops(merged, "mul") == 1
    assert count_ops(merged, "add") == 4  # pid+pid twice (region, after) and the two sums


def test_sibling_regions_do_not_share():
    k, b, a, out, pid = _kernel(D.i32)
    branch = b.if_(b.op("lt", [pid, b.const(4, D.i32)]))
    for region in branch.regions:
        with b.at(region):
            b.op("store", [out, pid, b.op("mul", [pid, b.const(3, D.i32)])])
    merged = check_preserves(cse.run, k, [np.zeros(8, np.int32), np.zeros(8, np.int32)], 8)
    assert count_ops(merged, "mul") == 2


@pytest.mark.parametrize("dt", [D.f32, D.i32])
def test_min_commutes_bit_for_bit_so_swapped_operands_merge(dt):
    """Float min is minNum with -0 < +0 (iron.core.eval), so min(x, y) and min(y, x) agree in every bit."""
    k, b, a, out, pid = _kernel(dt)
    x = b.op("load", [a, pid])
    y = b.op("cast", [pid], to=dt)
    m = b.op("add", [b.op("min", [x, y]), b.op("min", [y, x])])
    b.op("store", [out, pid, m])
    merged = apply_pass(cse.run, k)
    assert count_ops(merged, "min") == 1


def test_different_attributes_do_not_merge():
    k, b, a, out, pid = _kernel(D.i32)
    p0 = b.op("program_id", axis=0)
    p1 = b.op("program_id", axis=1)
    c1 = b.op("cast", [pid], to=D.f32)
    c2 = b.op("cast", [pid], to=D.f16)
    b.op("store", [out, pid, b.op("add", [p0, p1])])
    b.op("store", [a, pid, b.op("cast", [b.op("add", [c1, b.op("cast", [c2], to=D.f32)])], to=D.i32)])
    merged = apply_pass(cse.run, k)
    assert count_ops(merged, "program_id") == 2  # pid and p0 merge; axis 1 stays
    assert count_ops(merged, "cast") == 4
