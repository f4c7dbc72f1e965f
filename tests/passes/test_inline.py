"""inline: calls become the callee's body, nested calls too, tuples disappear, recursion is reported."""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen.passes import inline
from iron.codegen.passes.inline import RecursiveHelperError
from iron.core import dtypes as D
from iron.core.builder import Builder, new_kernel, tensor
from iron.core.ir import Block, Function, Kernel, Param, Value
from iron.core.printer import print_kernel
from iron.core.types import ScalarType, TupleType

from pass_harness import F32, I32, apply_pass, check_preserves, count_ops, run_kernel


def _function(name: str, params: list[tuple[str, ScalarType]], result_type=None) -> tuple[Function, Builder]:
    ps = [Param(n, Value(t, n)) for n, t in params]
    f = Function(name, ps, Block(), result_type)
    return f, Builder(f.body)


def _axpy_helper() -> Function:
    """``axpy(a, x, y) = a*x + y`` with a loop inside (so the body has a region)."""
    f, b = _function("axpy", [("a", F32), ("x", F32), ("y", F32)], F32)
    a, x, y = (p.value for p in f.params)
    acc = b.op("var", [], type=F32, hint="acc")
    b.op("var_store", [acc, y])
    loop = b.for_(b.const(0, D.i32), b.const(2, D.i32), b.const(1, D.i32))
    with b.at(loop.regions[0]):
        half = b.op("mul", [a, x])
        b.op("var_store", [acc, b.op("add", [b.op("var_load", [acc]), half])])
    b.op("return", [b.op("var_load", [acc])])
    return f


def _divmod_helper() -> Function:
    """``divmod(p, q) -> (p / q, p % q)``, through a tuple."""
    f, b = _function("divmod", [("p", I32), ("q", I32)], TupleType((I32, I32)))
    p, q = (prm.value for prm in f.params)
    t = b.op("tuple_make", [b.op("div", [p, q]), b.op("rem", [p, q])])
    b.op("return", [t])
    return f


def _caller() -> Kernel:
    k, b = new_kernel("caller", [("a", tensor(D.f32, True)), ("out", tensor(D.f32)), ("n", tensor(D.i32))])
    a, out, n = (p.value for p in k.params)
    k.functions["axpy"] = _axpy_helper()
    k.functions["divmod"] = _divmod_helper()
    pid = b.op("program_id", axis=0, hint="pid")
    x = b.op("load", [a, pid])
    r = b.op("call", [b.const(3.0, D.f32), x, x], callee="axpy", result_type=F32)
    r2 = b.op("call", [r, r, b.const(1.0, D.f32)], callee="axpy", result_type=F32)  # inlined twice
    b.op("store", [out, pid, r2])
    dm = b.op("call", [pid, b.const(3, D.i32)], callee="divmod", result_type=TupleType((I32, I32)))
    q = b.op("tuple_get", [dm], index=0)
    rem = b.op("tuple_get", [dm], index=1)
    b.op("store", [n, pid, b.op("add", [b.op("mul", [q, b.const(10, D.i32)]), rem])])
    return k


def test_calls_are_replaced_by_bodies_and_functions_removed():
    k = _caller()
    out = apply_pass(inline.run, k)
    assert out.functions == {}
    assert count_ops(out, "call") == 0 and count_ops(out, "return") == 0
    assert count_ops(out, "for") == 2  # one loop per inlined axpy
    assert not any(isinstance(v.type, TupleType) for op in out.walk()
                   for v in [*op.operands, *([op.result] if op.result else [])])


def test_inlining_preserves_results():
    k = _caller()
    a = np.linspace(-2, 2, 16).astype(np.float32)
    check_preserves(inline.run, k, [a, np.zeros(16, np.float32), np.zeros(16, np.int32)], 16)


def test_nested_calls_are_inlined():
    k, b = new_kernel("nested", [("out", tensor(D.f32))])
    inner, ib = _function("inner", [("v", F32)], F32)
    ib.op("return", [ib.op("mul", [inner.params[0].value, inner.params[0].value])])
    outer, ob = _function("outer", [("v", F32)], F32)
    sq = ob.op("call", [outer.params[0].value], callee="inner", result_type=F32)
    ob.op("return", [ob.op("call", [sq], callee="inner", result_type=F32)])
    k.functions.update(inner=inner, outer=outer)
    pid = b.op("program_id", axis=0)
    v = b.op("cast", [pid], to=D.f32)
    b.op("store", [k.params[0].value, pid, b.op("call", [v], callee="outer", result_type=F32)])
    out = check_preserves(inline.run, k, [np.zeros(8, np.float32)], 8)
    assert count_ops(out, "mul") == 2 and count_ops(out, "call") == 0
    res = np.zeros(8, np.float32)
    assert np.array_equal(run_kernel(out, [res], 8)[0], np.arange(8, dtype=np.float32) ** 4)


def test_helper_without_result_is_inlined():
    k, b = new_kernel("effects", [("out", tensor(D.i32))])
    f, fb = _function("put", [("i", I32)])
    f.params.insert(0, Param("t", Value(tensor(D.i32), "t")))
    fb.op("store", [f.params[0].value, f.params[1].value, f.params[1].value])
    fb.op("return", [])
    k.functions["put"] = f
    pid = b.op("program_id", axis=0)
    b.op("call", [k.params[0].value, pid], callee="put", result_type=None)
    out = check_preserves(inline.run, k, [np.zeros(8, np.int32)], 8)
    assert "store %out" in print_kernel(out)


def test_recursion_is_a_clear_error():
    k, b = new_kernel("rec", [("out", tensor(D.i32))])
    f, fb = _function("loop_forever", [("i", I32)], I32)
    fb.op("return", [fb.op("call", [f.params[0].value], callee="loop_forever", result_type=I32)])
    k.functions["loop_forever"] = f
    pid = b.op("program_id", axis=0)
    b.op("store", [k.params[0].value, pid, b.op("call", [pid], callee="loop_forever", result_type=I32)])
    with pytest.raises(RecursiveHelperError, match="loop_forever -> loop_forever"):
        inline.run(k, None)


def test_kernel_without_calls_is_unchanged_in_text():
    k = _caller()
    once = inline.run(k, None)
    assert print_kernel(inline.run(once, None)) == print_kernel(once)
