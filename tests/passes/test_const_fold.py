"""const_fold: constants fold exactly as the interpreter computes; constant branches and empty loops go."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iron.codegen.passes import const_fold
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.eval import PURE_ELEMENTWISE_OPS
from iron.core.printer import print_kernel
from iron.core.types import VectorType

from pass_harness import apply_pass, check_preserves, count_ops, run_kernel


def _const_kernel(dt, build):
    """``out[pid] = build(b)`` where ``build`` only uses constants."""
    k, b = new_kernel("cf", [("out", tensor(dt))])
    pid = b.op("program_id", axis=0, hint="pid")
    b.op("store", [k.params[0].value, pid, build(b)])
    return k


@pytest.mark.parametrize("dt, opcode, x, y", [
    (D.f32, "add", 0.1, 0.2), (D.f16, "mul", 3.0, 1e-4), (D.bf16, "div", 1.0, 3.0), (D.f64, "sub", 1e300, -1e300),
    (D.f32, "min", -1.0, 0.0), (D.f32, "max", math.nan, 1.0), (D.i32, "add", 2 ** 31 - 1, 1),
    (D.i32, "div", -7, 2), (D.i32, "rem", -7, 2), (D.i32, "div", 5, 0), (D.u8, "sub", 0, 1),
    (D.i32, "shl", 1, 33), (D.i16, "shr", -16, 2), (D.u32, "shr", 2 ** 31, 31), (D.f32, "pow", 2.0, 0.5),
    (D.f32, "atan2", 1.0, -1.0), (D.f32, "rem", -5.5, 2.0),
])
def test_binary_ops_fold_to_what_the_interpreter_computes(dt, opcode, x, y):
    k = _const_kernel(dt, lambda b: b.op(opcode, [b.const(x, dt), b.const(y, dt)]))
    folded = check_preserves(const_fold.run, k, [np.zeros(4, D.numpy_dtype(dt))], 4)
    assert count_ops(folded, opcode) == 0


@pytest.mark.parametrize("dt, opcode, x", [
    (D.f32, "exp", 1.0), (D.f16, "sqrt", 2.0), (D.f32, "rsqrt", 3.0), (D.f64, "erf", 0.5), (D.f32, "neg", 0.0),
    (D.i32, "neg", -2 ** 31), (D.i32, "abs", -2 ** 31), (D.u16, "bnot", 5), (D.f32, "round", 2.5),
    (D.f32, "sign", -0.0),
])
def test_unary_ops_fold(dt, opcode, x):
    k = _const_kernel(dt, lambda b: b.op(opcode, [b.const(x, dt)]))
    folded = check_preserves(const_fold.run, k, [np.zeros(4, D.numpy_dtype(dt))], 4)
    assert count_ops(folded, opcode) == 0


@pytest.mark.parametrize("src, dst, x", [(D.f32, D.i32, 3.9e10), (D.f32, D.i8, -1.5), (D.f32, D.u8, math.nan),
                                         (D.i64, D.bf16, 2 ** 62 + 2 ** 40 + 1), (D.i32, D.u8, -1),
                                         (D.f64, D.f16, 65520.0), (D.f32, D.bool_, -0.0)])
def test_casts_of_constants_fold(src, dst, x):
    k = _const_kernel(dst, lambda b: b.op("cast", [b.const(x, src)], to=dst))
    folded = check_preserves(const_fold.run, k, [np.zeros(4, D.numpy_dtype(dst))], 4)
    assert count_ops(folded, "cast") == 0


def test_fma_select_compare_and_vectors_fold():
    def build(b):
        v = b.op("vec_make", [b.const(1.5, D.f32), b.const(-2.0, D.f32)])
        w = b.op("mul", [v, b.const((2.0, 4.0), VectorType(D.f32, 2))])
        e = b.op("vec_extract", [w], index=1)
        f = b.op("fma", [e, b.const(3.0, D.f32), b.const(0.25, D.f32)])
        c = b.op("lt", [f, b.const(0.0, D.f32)])
        return b.op("select", [c, f, b.const(7.0, D.f32)])
    k = _const_kernel(D.f32, build)
    folded = check_preserves(const_fold.run, k, [np.zeros(4, np.float32)], 4)
    ops = {op.opcode for op in folded.walk()}
    assert ops == {"program_id", "const", "store"}, ops


def test_every_foldable_op_is_a_pure_elementwise_op():
    assert const_fold.FOLDABLE <= PURE_ELEMENTWISE_OPS
    assert "const" not in const_fold.FOLDABLE


def test_ops_with_a_runtime_operand_stay():
    k, b = new_kernel("rt", [("out", tensor(D.i32))])
    pid = b.op("program_id", axis=0)
    b.op("store", [k.params[0].value, pid, b.op("add", [pid, b.op("add", [b.const(1, D.i32), b.const(2, D.i32)])])])
    folded = apply_pass(const_fold.run, k)
    assert count_ops(folded, "add") == 1 and "const 3" in print_kernel(folded)


def _branch_kernel(cond_value: bool, terminator: str | None):
    """out[pid] = 1 or 2 by a constant condition; optionally the taken side ends the thread early."""
    k, b = new_kernel("br", [("out", tensor(D.i32))])
    out = k.params[0].value
    pid = b.op("program_id", axis=0)
    branch = b.if_(b.const(cond_value, D.bool_))
    with b.at(branch.regions[0]):
        b.op("store", [out, pid, b.const(1, D.i32)])
        if terminator:
            b.op(terminator)
    with b.at(branch.regions[1]):
        b.op("store", [out, pid, b.const(2, D.i32)])
    b.op("store", [out, pid, b.op("add", [b.op("load", [out, pid]), b.const(10, D.i32)])])
    return k


@pytest.mark.parametrize("cond", [True, False])
def test_constant_if_is_replaced_by_the_taken_region(cond):
    k = _branch_kernel(cond, None)
    folded = check_preserves(const_fold.run, k, [np.zeros(4, np.int32)], 4)
    assert count_ops(folded, "if") == 0
    text = print_kernel(folded)
    assert ("const 1 " in text) == cond and ("const 2 " in text) != cond


def test_constant_if_ending_in_return_drops_the_rest_of_the_block():
    k = _branch_kernel(True, "return")
    folded = check_preserves(const_fold.run, k, [np.zeros(4, np.int32)], 4)
    assert folded.body.ops[-1].opcode == "return"
    assert count_ops(folded, "load") == 0  # the code after the if could never run
    assert np.array_equal(run_kernel(folded, [np.zeros(4, np.int32)], 4)[0], np.ones(4, np.int32))


def test_constant_if_ending_in_break_inside_a_loop():
    k, b = new_kernel("brk", [("out", tensor(D.i32))])
    out = k.params[0].value
    pid = b.op("program_id", axis=0)
    loop = b.loop()
    with b.at(loop.regions[0]):
        b.op("store", [out, pid, b.op("add", [b.op("load", [out, pid]), b.const(1, D.i32)])])
        branch = b.if_(b.const(True, D.bool_))
        with b.at(branch.regions[0]):
            b.op("break")
        b.op("store", [out, pid, b.const(-1, D.i32)])
    folded = check_preserves(const_fold.run, k, [np.zeros(4, np.int32)], 4)
    assert folded.body.ops[-1].regions[0].ops[-1].opcode == "break"


@pytest.mark.parametrize("lo, hi, step, removed", [(5, 5, 1, True), (6, 5, 1, True), (0, 10, -1, True),
                                                   (5, 6, 1, False), (5, 0, -2, False)])
def test_for_with_zero_trips_is_removed(lo, hi, step, removed):
    k, b = new_kernel("zt", [("out", tensor(D.i32))])
    out = k.params[0].value
    pid = b.op("program_id", axis=0)
    loop = b.for_(b.const(lo, D.i32), b.const(hi, D.i32), b.const(step, D.i32))
    with b.at(loop.regions[0]):
        b.op("store", [out, pid, loop.regions[0].args[0]])
    folded = check_preserves(const_fold.run, k, [np.zeros(4, np.int32)], 4)
    assert (count_ops(folded, "for") == 0) == removed


def test_folding_inside_nested_regions():
    k, b = new_kernel("nest", [("out", tensor(D.i32))])
    out = k.params[0].value
    pid = b.op("program_id", axis=0)
    loop = b.for_(b.const(0, D.i32), b.const(3, D.i32), b.const(1, D.i32))
    with b.at(loop.regions[0]):
        branch = b.if_(b.op("lt", [pid, b.const(2, D.i32)]))
        with b.at(branch.regions[0]):
            b.op("store", [out, pid, b.op("mul", [b.const(6, D.i32), b.const(7, D.i32)])])
    folded = check_preserves(const_fold.run, k, [np.zeros(4, np.int32)], 4)
    assert count_ops(folded, "mul") == 0 and "const 42" in print_kernel(folded)
