"""unroll: full unrolling of short constant loops, partial unrolling by hint, exactly preserving results."""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen.passes import unroll
from iron.codegen.pipeline import PassContext
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.types import ScalarType

from pass_harness import I32, apply_pass, check_preserves, count_ops

INT_MIN, INT_MAX = -2 ** 31, 2 ** 31 - 1


def _order_sensitive_loop(lo, hi, step, hint=None, dt=D.i32, body_extra=None):
    """out[2*pid] = fold of acc*3 + i over the loop, out[2*pid+1] = trip count.

    ``lo``/``hi`` are ints (constants) or None (read per thread from the tensors ``lo``/``hi``).
    """
    t = ScalarType(dt)
    k, b = new_kernel("ul", [("los", tensor(dt, True)), ("his", tensor(dt, True)), ("out", tensor(dt))])
    los, his, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0, hint="pid")
    lo_v = b.const(lo, dt) if lo is not None else b.op("load", [los, pid], hint="lo")
    hi_v = b.const(hi, dt) if hi is not None else b.op("load", [his, pid], hint="hi")
    acc = b.op("var", [], type=t, hint="acc")
    count = b.op("var", [], type=t, hint="count")
    loop = b.for_(lo_v, hi_v, b.const(step, dt), unroll=hint, hint="i")
    with b.at(loop.regions[0]):
        i = loop.regions[0].args[0]
        b.op("var_store", [acc, b.op("add", [b.op("mul", [b.op("var_load", [acc]), b.const(3, dt)]), i])])
        b.op("var_store", [count, b.op("add", [b.op("var_load", [count]), b.const(1, dt)])])
        if body_extra:
            body_extra(b, i)
    two_pid = b.op("mul", [b.op("cast", [pid], to=dt), b.const(2, dt)])
    b.op("store", [out, two_pid, b.op("var_load", [acc])])
    b.op("store", [out, b.op("add", [two_pid, b.const(1, dt)]), b.op("var_load", [count])])
    return k


def _run_args(los, his, dt=D.i32):
    npdt = D.numpy_dtype(dt)
    los, his = np.array(los, dtype=npdt), np.array(his, dtype=npdt)
    return [los, his, np.zeros(2 * los.size, dtype=npdt)], los.size


@pytest.mark.parametrize("lo, hi, step", [(0, 8, 1), (3, 20, 5), (10, 0, -3), (-5, 5, 2), (0, 1, 1)])
def test_constant_loops_unroll_fully(lo, hi, step):
    k = _order_sensitive_loop(lo, hi, step)
    args, n = _run_args([0] * 4, [0] * 4)
    out = check_preserves(unroll.run, k, args, n)
    assert count_ops(out, "for") == 0
    trips = len(range(lo, hi, step))
    assert count_ops(out, "var_store") == 2 * trips


def test_zero_trip_constant_loop_disappears():
    out = apply_pass(unroll.run, _order_sensitive_loop(5, 5, 1))
    assert count_ops(out, "for") == 0 and count_ops(out, "var_store") == 0


def test_trip_count_above_unroll_max_is_left_alone():
    k = _order_sensitive_loop(0, 8, 1)
    assert count_ops(apply_pass(unroll.run, k, PassContext(unroll_max=7)), "for") == 1
    assert count_ops(apply_pass(unroll.run, k, PassContext(unroll_max=8)), "for") == 0


def test_hint_one_forbids_unrolling():
    assert count_ops(apply_pass(unroll.run, _order_sensitive_loop(0, 4, 1, hint=1)), "for") == 1


def test_explicit_hint_allows_more_than_unroll_max():
    k = _order_sensitive_loop(0, 100, 1, hint=128)
    assert count_ops(apply_pass(unroll.run, k), "for") == 0


@pytest.mark.parametrize("lo, hi, step, hint", [(0, 10, 1, 4), (7, -30, -4, 3), (0, 64, 2, 8), (1, 100, 7, 2)])
def test_constant_loops_with_a_smaller_hint_unroll_partially(lo, hi, step, hint):
    k = _order_sensitive_loop(lo, hi, step, hint=hint)
    args, n = _run_args([0] * 4, [0] * 4)
    out = check_preserves(unroll.run, k, args, n)
    trips = len(range(lo, hi, step))
    loops = [op for op in out.walk() if op.opcode == "for"]
    assert len(loops) == 1 and loops[0].attrs["unroll"] == 1
    assert count_ops(loops[0].regions[0], "var_store") == 2 * hint
    assert count_ops(out, "var_store") == 2 * hint + 2 * (trips % hint)


# Per-thread (lo, hi): empty, short, long, uneven, and bounds at the ends of the i32 range.
RUNTIME_BOUNDS = [(0, 0), (0, 1), (0, 3), (0, 4), (0, 5), (2, 13), (-7, 9), (5, 2), (0, 31), (3, 3 + 16),
                  (INT_MIN, INT_MIN + 3), (INT_MIN, INT_MIN + 12), (INT_MAX - 9, INT_MAX), (INT_MAX - 1, INT_MAX),
                  (INT_MAX - 12, INT_MAX - 1), (INT_MIN + 5, INT_MIN + 6), (-100, -60)]


def _terminating(bounds, step):
    """The (lo, hi) pairs whose loop ends without its induction variable wrapping (others never end)."""
    def ends(lo, hi):
        trips = len(range(lo, hi, step))
        return trips == 0 or INT_MIN <= lo + trips * step <= INT_MAX
    return [(lo, hi) for lo, hi in bounds if ends(lo, hi)]


@pytest.mark.parametrize("step, hint", [(1, 4), (1, 2), (3, 4), (2, 8), (1, 3)])
def test_runtime_bounds_unroll_by_the_hint_exactly(step, hint):
    k = _order_sensitive_loop(None, None, step, hint=hint)
    los, his = zip(*_terminating(RUNTIME_BOUNDS, step))
    args, n = _run_args(los, his)
    out = check_preserves(unroll.run, k, args, n)
    loops = [op for op in out.walk() if op.opcode == "for"]
    assert len(loops) == 2 and all(op.attrs["unroll"] == 1 for op in loops)
    main = loops[0]
    assert count_ops(main.regions[0], "mul") == hint  # hint copies of acc*3


@pytest.mark.parametrize("hint", [2, 4])
def test_runtime_bounds_with_a_negative_step(hint):
    k = _order_sensitive_loop(None, None, -2, hint=hint)
    bounds = [(hi, lo) for lo, hi in RUNTIME_BOUNDS]  # counting down
    los, his = zip(*_terminating(bounds, -2))
    args, n = _run_args(los, his)
    out = check_preserves(unroll.run, k, args, n)
    assert count_ops(out, "for") == 2


def test_runtime_bounds_on_unsigned_and_narrow_types():
    k = _order_sensitive_loop(None, None, 1, hint=4, dt=D.u8)
    args, n = _run_args([0, 250, 3, 0, 254], [7, 255, 2, 255, 255], dt=D.u8)
    check_preserves(unroll.run, k, args, n)
    # A stride that does not fit the type leaves the loop alone.
    k = _order_sensitive_loop(None, None, 100, hint=2, dt=D.i8)
    assert count_ops(apply_pass(unroll.run, k), "for") == 1


@pytest.mark.parametrize("terminator", ["break", "continue", "return"])
def test_loops_that_leave_early_are_skipped(terminator):
    def extra(b, i):
        branch = b.if_(b.op("eq", [i, b.const(2, D.i32)]))
        with b.at(branch.regions[0]):
            b.op(terminator)
    k = _order_sensitive_loop(0, 4, 1, body_extra=extra)
    out = check_preserves(unroll.run, k, *_run_args([0] * 4, [0] * 4))
    assert count_ops(out, "for") == 1


def test_break_of_an_inner_loop_does_not_block_the_outer_one():
    def extra(b, i):
        inner = b.loop()
        with b.at(inner.regions[0]):
            b.op("break")
    k = _order_sensitive_loop(0, 4, 1, body_extra=extra)
    out = check_preserves(unroll.run, k, *_run_args([0] * 4, [0] * 4))
    assert count_ops(out, "for") == 0 and count_ops(out, "loop") == 4


def test_wrapping_constant_loop_is_left_alone():
    k = _order_sensitive_loop(0, INT_MAX, 2, hint=4)
    assert count_ops(apply_pass(unroll.run, k), "for") == 1


def test_nested_loops_unroll_inside_out():
    def extra(b, i):
        inner = b.for_(b.const(0, D.i32), b.const(3, D.i32), b.const(1, D.i32))
        with b.at(inner.regions[0]):
            b.op("add", [i, inner.regions[0].args[0]])
    k = _order_sensitive_loop(0, 4, 1, body_extra=extra)
    out = check_preserves(unroll.run, k, *_run_args([0] * 4, [0] * 4))
    assert count_ops(out, "for") == 0 and count_ops(out, "add") == 4 * (2 + 3) + 1


def test_op_budget_stops_huge_full_unrolls_without_a_hint():
    def extra(b, i):
        v = i
        for _ in range(200):
            v = b.op("add", [v, i])
    k = _order_sensitive_loop(0, 60, 1, body_extra=extra)
    assert count_ops(apply_pass(unroll.run, k), "for") == 1


def test_barriers_and_shared_memory_unroll_fine():
    k, b = new_kernel("sh", [("out", tensor(D.f32))])
    out = k.params[0].value
    tid = b.op("thread_id", axis=0)
    sh = b.op("shared_alloc", [], dtype=D.f32, shape=(8,))
    loop = b.for_(b.const(0, D.i32), b.const(3, D.i32), b.const(1, D.i32))
    with b.at(loop.regions[0]):
        i = loop.regions[0].args[0]
        b.op("store", [sh, tid, b.op("cast", [b.op("add", [tid, i])], to=D.f32)])
        b.op("barrier")
        nxt = b.op("rem", [b.op("add", [tid, b.const(1, D.i32)]), b.const(8, D.i32)])
        v = b.op("load", [sh, nxt])
        b.op("barrier")
        b.op("store", [out, b.op("add", [b.op("mul", [i, b.const(8, D.i32)]), tid]), v])
    out_k = check_preserves(unroll.run, k, [np.zeros(24, np.float32)], (8,), (8,))
    assert count_ops(out_k, "barrier") == 6


def test_slots_declared_in_the_body_are_fresh_in_every_copy():
    def extra(b, i):
        tmp = b.op("var", [], type=I32)
        b.op("var_store", [tmp, b.op("add", [b.op("var_load", [tmp]), i])])
    k = _order_sensitive_loop(None, None, 1, hint=4, body_extra=extra)
    check_preserves(unroll.run, k, *_run_args([0, 1, 2], [9, 5, 2]))
    k = _order_sensitive_loop(0, 5, 1, body_extra=extra)
    out = check_preserves(unroll.run, k, *_run_args([0], [0]))
    assert count_ops(out, "var") == 2 + 5


def _long_body(b, i):
    v = i
    for _ in range(200):
        v = b.op("add", [v, i])


def test_explicit_hints_are_lowered_to_keep_the_copies_within_the_op_budget():
    k = _order_sensitive_loop(None, None, 1, hint=1024, body_extra=_long_body)
    out = check_preserves(unroll.run, k, *_run_args([0, 3, -5], [0, 400, 900]))
    main = next(op for op in out.walk() if op.opcode == "for")
    copies = count_ops(main.regions[0], "mul")  # one acc*3 per copy of the body
    body_ops = sum(1 for _ in next(op for op in k.walk() if op.opcode == "for").regions[0].walk())
    assert 2 <= copies <= unroll.HINTED_UNROLL_OP_BUDGET // body_ops
    assert sum(1 for _ in out.walk()) <= unroll.HINTED_UNROLL_OP_BUDGET + 1000


def test_nested_hints_do_not_multiply_past_the_op_budget():
    def inner(b, i):
        loop = b.for_(b.const(0, D.i32), b.const(1024, D.i32), b.const(1, D.i32), unroll=1024)
        with b.at(loop.regions[0]):
            b.op("add", [i, loop.regions[0].args[0]])
    k = _order_sensitive_loop(0, 256, 1, hint=256, body_extra=inner)
    out = apply_pass(unroll.run, k)
    assert sum(1 for _ in out.walk()) <= 2 * unroll.HINTED_UNROLL_OP_BUDGET
    assert count_ops(out, "for") >= 1  # the outer loop is unrolled partially, not a million copies
