"""Control flow under divergence: if/else, loops with per-thread bounds, break,
continue, early return, variables, and helper calls with tuples."""

from __future__ import annotations

import numpy as np

from iron.core import dtypes as D
from iron.core.builder import Builder, tensor
from iron.core.ir import Block, Function, Param, Value
from iron.core.types import ScalarType, TupleType
from iron.runtime.interp import run

from interp_kernels import I32, KernelBuilder


def _out(n, dtype=np.int32, fill=-99):
    return np.full(n, fill, dtype=dtype)


def test_if_else_diverges_per_thread():
    kb = KernelBuilder("branches", a=tensor(D.f32, True), out=tensor(D.f32))
    i = kb.gid()
    x = kb.op("load", kb.p["a"], i)
    even = kb.op("eq", kb.op("rem", i, kb.i32(2)), kb.i32(0))
    br = kb.b.if_(even)
    with kb.b.at(br.regions[0]):
        kb.op("store", kb.p["out"], i, kb.op("mul", x, kb.const(2.0, D.f32)))
    with kb.b.at(br.regions[1]):
        kb.op("store", kb.p["out"], i, kb.op("neg", x))
    a = np.arange(100, dtype=np.float32)
    out = np.zeros(100, dtype=np.float32)
    run(kb.kernel, [a, out], (100,), (32,))
    assert out.tolist() == [2 * v if v % 2 == 0 else -v for v in range(100)]


def _accumulate_loop(kb: KernelBuilder, lo: Value, hi: Value, step: Value, body) -> Value:
    """``acc = 0; for j in range(lo, hi, step): body(j, acc)``; returns the var."""
    acc = kb.op("var", type=I32, hint="acc")
    loop = kb.b.for_(lo, hi, step, hint="j")
    with kb.b.at(loop.regions[0]):
        body(loop.regions[0].args[0], acc)
    return acc


def test_for_with_per_thread_bounds_and_vars():
    kb = KernelBuilder("triangle", out=tensor(D.i32))
    i = kb.gid()
    hi = kb.op("rem", i, kb.i32(10))

    def body(j, acc):
        kb.op("var_store", acc, kb.op("add", kb.op("var_load", acc), j))

    acc = _accumulate_loop(kb, kb.i32(0), hi, kb.i32(1), body)
    kb.op("store", kb.p["out"], i, kb.op("var_load", acc))
    out = _out(50)
    run(kb.kernel, [out], (50,), (16,))
    assert out.tolist() == [sum(range(t % 10)) for t in range(50)]


def test_for_with_a_negative_constant_step_counts_down():
    kb = KernelBuilder("down", out=tensor(D.i32))
    i = kb.gid()

    def body(j, acc):
        # acc = acc * 10 + j  records the visiting order.
        kb.op("var_store", acc, kb.op("add", kb.op("mul", kb.op("var_load", acc), kb.i32(10)), j))

    acc = _accumulate_loop(kb, i, kb.i32(0), kb.i32(-2), body)
    kb.op("store", kb.p["out"], i, kb.op("var_load", acc))
    out = _out(8)
    run(kb.kernel, [out], (8,), (8,))

    def want(t):
        v = 0
        for j in range(t, 0, -2):
            v = v * 10 + j
        return v
    assert out.tolist() == [want(t) for t in range(8)]


def test_loop_with_break_runs_each_thread_its_own_trip_count():
    # Collatz step counts: a loop left by break at different iterations.
    kb = KernelBuilder("collatz", out=tensor(D.i32))
    i = kb.gid()
    x = kb.op("var", type=I32, hint="x")
    steps = kb.op("var", type=I32, hint="steps")
    kb.op("var_store", x, kb.op("add", i, kb.i32(1)))
    loop = kb.b.loop()
    with kb.b.at(loop.regions[0]):
        xv = kb.op("var_load", x)
        done = kb.b.if_(kb.op("eq", xv, kb.i32(1)))
        with kb.b.at(done.regions[0]):
            kb.b.op("break")
        odd = kb.op("eq", kb.op("band", xv, kb.i32(1)), kb.i32(1))
        nxt = kb.op("select", odd, kb.op("add", kb.op("mul", xv, kb.i32(3)), kb.i32(1)),
                    kb.op("div", xv, kb.i32(2)))
        kb.op("var_store", x, nxt)
        kb.op("var_store", steps, kb.op("add", kb.op("var_load", steps), kb.i32(1)))
    kb.op("store", kb.p["out"], i, kb.op("var_load", steps))
    out = _out(40)
    run(kb.kernel, [out], (40,), (8,))

    def collatz(n):
        s = 0
        while n != 1:
            n = 3 * n + 1 if n % 2 else n // 2
            s += 1
        return s
    assert out.tolist() == [collatz(t + 1) for t in range(40)]


def test_continue_skips_the_rest_of_the_iteration_for_those_threads():
    kb = KernelBuilder("skip", out=tensor(D.i32))
    i = kb.gid()

    def body(j, acc):
        # Thread t skips the j where (j + t) % 3 == 0.
        skip = kb.b.if_(kb.op("eq", kb.op("rem", kb.op("add", j, i), kb.i32(3)), kb.i32(0)))
        with kb.b.at(skip.regions[0]):
            kb.b.op("continue")
        kb.op("var_store", acc, kb.op("add", kb.op("var_load", acc), j))

    acc = _accumulate_loop(kb, kb.i32(0), kb.i32(10), kb.i32(1), body)
    kb.op("store", kb.p["out"], i, kb.op("var_load", acc))
    out = _out(6)
    run(kb.kernel, [out], (6,), (6,))
    assert out.tolist() == [sum(j for j in range(10) if (j + t) % 3) for t in range(6)]


def test_break_in_an_inner_loop_leaves_only_that_loop():
    kb = KernelBuilder("nested", out=tensor(D.i32))
    i = kb.gid()
    acc = kb.op("var", type=I32)
    outer = kb.b.for_(kb.i32(0), kb.i32(4), kb.i32(1))
    with kb.b.at(outer.regions[0]):
        inner = kb.b.for_(kb.i32(0), kb.i32(100), kb.i32(1))
        with kb.b.at(inner.regions[0]):
            j = inner.regions[0].args[0]
            stop = kb.b.if_(kb.op("ge", j, i))
            with kb.b.at(stop.regions[0]):
                kb.b.op("break")
            kb.op("var_store", acc, kb.op("add", kb.op("var_load", acc), kb.i32(1)))
    kb.op("store", kb.p["out"], i, kb.op("var_load", acc))
    out = _out(5)
    run(kb.kernel, [out], (5,), (5,))
    assert out.tolist() == [4 * t for t in range(5)]


def test_early_return_stops_a_thread_for_the_rest_of_the_kernel():
    kb = KernelBuilder("early", out=tensor(D.i32))
    i = kb.gid()
    loop = kb.b.for_(kb.i32(0), kb.i32(3), kb.i32(1))
    with kb.b.at(loop.regions[0]):
        j = loop.regions[0].args[0]
        # Thread t returns in iteration t % 4 (threads with t % 4 == 3 never do).
        leave = kb.b.if_(kb.op("eq", j, kb.op("rem", i, kb.i32(4))))
        with kb.b.at(leave.regions[0]):
            kb.op("store", kb.p["out"], i, kb.op("neg", j))
            kb.b.op("return")
    kb.op("store", kb.p["out"], i, kb.i32(100))
    out = _out(12)
    run(kb.kernel, [out], (12,), (4,))
    assert out.tolist() == [-(t % 4) if t % 4 < 3 else 100 for t in range(12)]


def test_var_store_in_a_branch_writes_only_active_threads():
    kb = KernelBuilder("partial_store", out=tensor(D.i32))
    i = kb.gid()
    v = kb.op("var", type=I32)
    kb.op("var_store", v, kb.i32(5))
    first = kb.op("var_load", v)
    br = kb.b.if_(kb.op("lt", i, kb.i32(3)))
    with kb.b.at(br.regions[0]):
        kb.op("var_store", v, i)
    # A value loaded before the store keeps its value (values are immutable).
    kb.op("store", kb.p["out"], i, kb.op("add", kb.op("mul", kb.op("var_load", v), kb.i32(10)), first))
    out = _out(6)
    run(kb.kernel, [out], (6,), (6,))
    assert out.tolist() == [5, 15, 25, 55, 55, 55]


def _add_sub_function() -> Function:
    """``func @addsub(x: i32, y: i32) -> (i32, i32)`` returning ``(x + y, x - y)``."""
    x, y = Value(I32, "x"), Value(I32, "y")
    body = Block()
    b = Builder(body)
    s = b.op("add", [x, y])
    d = b.op("sub", [x, y])
    tup = b.op("tuple_make", [s, d])
    b.op("return", [tup])
    return Function("addsub", [Param("x", x), Param("y", y)], body, TupleType((I32, I32)))


def test_calls_return_tuples_under_a_divergent_mask():
    kb = KernelBuilder("caller", out=tensor(D.i32))
    kb.kernel.functions["addsub"] = _add_sub_function()
    i = kb.gid()
    br = kb.b.if_(kb.op("lt", i, kb.i32(4)))
    with kb.b.at(br.regions[0]):
        r = kb.b.op("call", [i, kb.i32(10)], callee="addsub", result_type=TupleType((I32, I32)))
        s = kb.op("tuple_get", r, index=0)
        d = kb.op("tuple_get", r, index=1)
        kb.op("store", kb.p["out"], i, kb.op("mul", s, d))
    out = _out(6)
    run(kb.kernel, [out], (6,), (6,))
    assert out.tolist() == [(t + 10) * (t - 10) for t in range(4)] + [-99, -99]


def test_index_ops_follow_the_thread_numbering_of_the_ir():
    kb = KernelBuilder("ids", out=tensor(D.i32))
    names = ["program_id", "thread_id", "group_id", "group_size", "num_groups", "grid_size"]
    gx = kb.op("program_id", axis=0)
    gy = kb.op("program_id", axis=1)
    flat = kb.op("add", gx, kb.op("mul", gy, kb.i32(10)))
    base = kb.op("mul", flat, kb.i32(len(names) * 2 + 4))
    k = 0
    for name in names:
        for axis in (0, 1):
            kb.op("store", kb.p["out"], kb.op("add", base, kb.i32(k)), kb.op(name, axis=axis))
            k += 1
    for name in ("lane_id", "simd_size", "simd_group_id", "num_simd_groups"):
        kb.op("store", kb.p["out"], kb.op("add", base, kb.i32(k)), kb.op(name))
        k += 1
    grid, group = (10, 7), (4, 3)
    out = _out(10 * 7 * k)
    run(kb.kernel, [out], grid, group, simd_width=8)
    rows = out.reshape(70, k)
    for y in range(7):
        for x in range(10):
            row = rows[x + 10 * y]
            t = x % 4 + (y % 3) * 4
            assert row.tolist() == [x, y, x % 4, y % 3, x // 4, y // 3, 4, 3, 3, 3, 10, 7, t % 8, 8, t // 8, 2]


def test_calls_can_take_tensors_and_have_loops_of_their_own():
    """``func @window_sum(t, i) -> f32``: sums t[i .. i+3] in a loop of its own."""
    t_val, i_val = Value(tensor(D.f32, True), "t"), Value(I32, "i")
    body = Block()
    b = Builder(body)
    acc = b.op("var", [], type=ScalarType(D.f32))
    loop = b.for_(b.const(0, D.i32), b.const(4, D.i32), b.const(1, D.i32))
    with b.at(loop.regions[0]):
        x = b.op("load", [t_val, b.op("add", [i_val, loop.regions[0].args[0]])])
        b.op("var_store", [acc, b.op("add", [b.op("var_load", [acc]), x])])
    b.op("return", [b.op("var_load", [acc])])
    fn = Function("window_sum", [Param("t", t_val), Param("i", i_val)], body, ScalarType(D.f32))

    kb = KernelBuilder("windows", x=tensor(D.f32, True), out=tensor(D.f32))
    kb.kernel.functions["window_sum"] = fn
    i = kb.gid()
    kb.op("store", kb.p["out"], i,
          kb.b.op("call", [kb.p["x"], i], callee="window_sum", result_type=ScalarType(D.f32)))
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(13, np.float32)
    run(kb.kernel, [x, out], (13,), (8,))
    assert out.tolist() == [float(sum(range(j, j + 4))) for j in range(13)]
