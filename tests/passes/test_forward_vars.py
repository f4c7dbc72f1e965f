"""forward_vars: loads of local slots see the value last stored, but never across a store they cannot see."""

from __future__ import annotations

import numpy as np

from iron.codegen.passes import forward_vars
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.printer import print_kernel
from iron.core.types import VectorType

from pass_harness import I32, apply_pass, check_preserves, count_ops


def _kernel():
    k, b = new_kernel("fv", [("a", tensor(D.i32, True)), ("out", tensor(D.i32))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0, hint="pid")
    return k, b, a, out, pid


def _args(n=8):
    return [np.arange(n, dtype=np.int32) * 3 - 7, np.zeros(n, np.int32)]


def test_straight_line_loads_see_the_last_store_and_a_fresh_slot_is_zero():
    k, b, a, out, pid = _kernel()
    x = b.op("var", [], type=I32)
    first = b.op("var_load", [x])  # zero
    b.op("var_store", [x, b.op("load", [a, pid])])
    second = b.op("var_load", [x])
    b.op("var_store", [x, b.op("add", [second, first])])
    third = b.op("var_load", [x])
    b.op("store", [out, pid, b.op("mul", [third, b.op("var_load", [x])])])
    fwd = check_preserves(forward_vars.run, k, _args(), 8)
    assert count_ops(fwd, "var_load") == 0
    assert "const 0 : i32" in print_kernel(fwd)


def test_vector_slots_start_as_a_zero_vector():
    k, b, a, out, pid = _kernel()
    vt = VectorType(D.i32, 2)
    x = b.op("var", [], type=vt)
    v = b.op("var_load", [x])
    b.op("store", [out, pid, b.op("add", [b.op("vec_extract", [v], index=1), pid])])
    fwd = check_preserves(forward_vars.run, k, _args(), 8)
    assert "const [0, 0] : i32x2" in print_kernel(fwd)


def test_a_store_inside_an_if_is_not_forwarded_past_it():
    k, b, a, out, pid = _kernel()
    x = b.op("var", [], type=I32)
    b.op("var_store", [x, pid])
    branch = b.if_(b.op("lt", [pid, b.const(3, D.i32)]))
    with b.at(branch.regions[0]):
        inside = b.op("var_load", [x])  # forwarded: pid
        b.op("var_store", [x, b.op("add", [inside, b.const(100, D.i32)])])
    b.op("store", [out, pid, b.op("var_load", [x])])  # must stay a load
    fwd = check_preserves(forward_vars.run, k, _args(), 8)
    branch_op = next(op for op in fwd.walk() if op.opcode == "if")
    assert count_ops(branch_op.regions[0], "var_load") == 0
    assert count_ops(fwd, "var_load") == 1


def test_loop_bodies_do_not_see_values_their_own_stores_replace():
    k, b, a, out, pid = _kernel()
    acc = b.op("var", [], type=I32)
    fixed = b.op("var", [], type=I32)
    b.op("var_store", [fixed, b.const(5, D.i32)])
    loop = b.for_(b.const(0, D.i32), b.const(4, D.i32), b.const(1, D.i32))
    with b.at(loop.regions[0]):
        cur = b.op("var_load", [acc])  # changes each iteration: must stay
        f = b.op("var_load", [fixed])  # never stored in the loop: forwarded
        b.op("var_store", [acc, b.op("add", [cur, f])])
    b.op("store", [out, pid, b.op("var_load", [acc])])
    fwd = check_preserves(forward_vars.run, k, _args(), 8)
    body = next(op for op in fwd.walk() if op.opcode == "for").regions[0]
    assert count_ops(body, "var_load") == 1
    assert count_ops(fwd, "var_load") == 2  # the one in the loop and the one after it


def test_a_slot_declared_in_a_loop_restarts_at_zero_each_iteration():
    k, b, a, out, pid = _kernel()
    total = b.op("var", [], type=I32)
    loop = b.loop()
    with b.at(loop.regions[0]):
        tmp = b.op("var", [], type=I32)
        t0 = b.op("var_load", [tmp])
        b.op("var_store", [tmp, b.op("add", [t0, b.const(1, D.i32)])])
        b.op("var_store", [total, b.op("add", [b.op("var_load", [total]), b.op("var_load", [tmp])])])
        done = b.if_(b.op("ge", [b.op("var_load", [total]), b.const(4, D.i32)]))
        with b.at(done.regions[0]):
            b.op("break")
    b.op("store", [out, pid, b.op("var_load", [total])])
    check_preserves(forward_vars.run, k, _args(), 8)


def test_repeated_loads_without_a_store_reuse_the_first():
    k, b, a, out, pid = _kernel()
    x = b.op("var", [], type=I32)
    branch = b.if_(b.op("lt", [pid, b.const(3, D.i32)]))
    with b.at(branch.regions[0]):
        b.op("var_store", [x, pid])
    l1 = b.op("var_load", [x])
    l2 = b.op("var_load", [x])
    b.op("store", [out, pid, b.op("sub", [l1, l2])])
    fwd = check_preserves(forward_vars.run, k, _args(), 8)
    assert count_ops(fwd, "var_load") == 1


def test_input_is_untouched():
    k, b, a, out, pid = _kernel()
    x = b.op("var", [], type=I32)
    b.op("var_store", [x, pid])
    b.op("store", [out, pid, b.op("var_load", [x])])
    apply_pass(forward_vars.run, k)
    assert count_ops(k, "var_load") == 1


def test_overwritten_stores_go_but_not_when_read_in_between():
    k, b, a, out, pid = _kernel()
    x = b.op("var", [], type=I32)
    b.op("var_store", [x, b.const(1, D.i32)])  # overwritten: goes
    b.op("var_store", [x, b.const(2, D.i32)])  # read by the loop below: stays
    loop = b.for_(b.const(0, D.i32), b.const(3, D.i32), b.const(1, D.i32))
    with b.at(loop.regions[0]):
        cur = b.op("var_load", [x])  # the loop stores x, so this load is not forwarded
        b.op("store", [out, pid, cur])
        b.op("var_store", [x, b.op("add", [cur, b.const(1, D.i32)])])
    b.op("var_store", [x, b.const(3, D.i32)])  # the last store: stays
    b.op("store", [out, pid, b.op("add", [b.op("var_load", [x]), b.op("load", [out, pid])])])
    fwd = check_preserves(forward_vars.run, k, _args(), 8)
    assert [op.operands[1].owner.attrs.get("value") for op in fwd.walk() if op.opcode == "var_store"] == [2, None, 3]


def test_a_store_before_a_break_is_kept_for_the_threads_that_leave():
    k, b, a, out, pid = _kernel()
    x = b.op("var", [], type=I32)
    loop = b.loop()
    with b.at(loop.regions[0]):
        b.op("var_store", [x, b.const(1, D.i32)])  # read after the loop by the threads that break
        leave = b.if_(b.op("lt", [pid, b.const(4, D.i32)]))
        with b.at(leave.regions[0]):
            b.op("break")
        b.op("var_store", [x, b.const(2, D.i32)])
        b.op("break")
    b.op("store", [out, pid, b.op("var_load", [x])])
    fwd = check_preserves(forward_vars.run, k, _args(), 8)
    assert count_ops(fwd, "var_store") == 2
