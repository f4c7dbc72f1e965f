"""simplify: every rewrite is exact (checked on the interpreter over hostile values), and the rules fire."""

from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import pytest

from iron.codegen.passes import dce, simplify
from iron.core import dtypes as D
from iron.core.builder import Builder, new_kernel, tensor
from iron.core.ir import Kernel, Param, Value
from iron.core.printer import print_kernel
from iron.core.types import VectorType

from pass_harness import apply_pass, assert_same_bits, count_ops, run_kernel, special_values

Expr = Callable[[Builder, Value, Value], Value]

INT_TYPES = (D.i32, D.u32, D.i8, D.u8, D.i64, D.u64, D.i16)
FLOAT_TYPES = (D.f32, D.f16, D.bf16, D.f64)
INT_BINARY = ("add", "sub", "mul", "div", "rem", "band", "bor", "bxor", "shl", "shr", "min", "max")
FLOAT_BINARY = ("add", "sub", "mul", "div", "rem", "min", "max")
COMPARES = ("eq", "ne", "lt", "le", "gt", "ge")


def _constants(dt: D.DType) -> list[Any]:
    """Constants for the right-hand side: the special values plus powers of two and shift counts."""
    if dt.is_float:
        powers = [4.0, 0.25, 2.0 ** -10, 2.0 ** 15, 2.0 ** 100, 2.0 ** 127, 2.0 ** -126, 2.0 ** -149, -0.5]
        return [float(v) for v in special_values(dt)] + powers
    return [int(v) for v in special_values(dt)] + [4, 16, 31, 32, 33, 63, 64, dt.bits - 1, dt.bits]


def _pairs(dt: D.DType) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of special values, as two input columns."""
    vals = special_values(dt)
    xs, ys = zip(*itertools.product(vals, vals))
    return np.array(xs, dtype=vals.dtype), np.array(ys, dtype=vals.dtype)


def _build(dt: D.DType, exprs: dict[str, Expr]) -> Kernel:
    """One output tensor per expression: ``out_j[pid] = expr_j(a[pid], c[pid])``.

    A vector result is stored lane by lane; a single expression's output is called ``out``.
    """
    k, b = new_kernel("simplify_case", [("a", tensor(dt, True)), ("c", tensor(dt, True))])
    a, c = (p.value for p in k.params)
    pid = b.op("program_id", axis=0, hint="pid")
    x = b.op("load", [a, pid], hint="x")
    y = b.op("load", [c, pid], hint="y")
    for j, expr in enumerate(exprs.values()):
        r = expr(b, x, y)
        name = "out" if len(exprs) == 1 else f"out{j}"
        out = Value(tensor(r.type.dtype), name)
        k.params.append(Param(name, out))
        if isinstance(r.type, VectorType):
            for lane in range(r.type.width):
                idx = b.op("add", [b.op("mul", [pid, b.const(r.type.width, D.i32)]), b.const(lane, D.i32)])
                b.op("store", [out, idx, b.op("vec_extract", [r], index=lane)])
        else:
            b.op("store", [out, pid, r])
    return k


def _check_exact(dt: D.DType, exprs: dict[str, Expr]) -> tuple[Kernel, Kernel]:
    """Simplify the expressions and compare every output over every pair of special values."""
    k = _build(dt, exprs)
    simplified = apply_pass(simplify.run, k)
    xs, ys = _pairs(dt)
    # Room for vector results stored lane by lane (8 lanes at most).
    outs = [np.zeros(xs.size * 8, dtype=D.numpy_dtype(p.value.type.dtype)) for p in k.params[2:]]
    expected = run_kernel(k, [xs, ys, *outs], xs.size, xs.size)[2:]
    got = run_kernel(simplified, [xs, ys, *outs], xs.size, xs.size)[2:]
    for what, e, g in zip(exprs, expected, got):
        assert_same_bits(e, g, f"{what} on {dt}")
    return k, simplified


def _binary_with_const(opcode: str, c: Any, const_left: bool) -> Expr:
    def expr(b: Builder, x: Value, y: Value) -> Value:
        cv = b.const(c, x.type)
        return b.op(opcode, [cv, x] if const_left else [x, cv])
    return expr


@pytest.mark.parametrize("dt", INT_TYPES + FLOAT_TYPES, ids=str)
def test_every_binary_op_with_every_constant_keeps_every_bit(dt):
    changed = 0
    for opcode in (FLOAT_BINARY if dt.is_float else INT_BINARY):
        exprs = {f"{opcode}({'c, x' if left else 'x, c'}) with c = {c!r}": _binary_with_const(opcode, c, left)
                 for c in _constants(dt) for left in (False, True)}
        k, s = _check_exact(dt, exprs)
        changed += count_ops(k, opcode) - count_ops(s, opcode)
    assert changed > 0, "no rule fired at all: the test would prove nothing"


def _self_and_chain_exprs(dt: D.DType) -> dict[str, Expr]:
    """Patterns on one or two operands: x op x, double negations, reassociation, compares, selects."""
    ex: dict[str, Expr] = {}
    binary = FLOAT_BINARY if dt.is_float else INT_BINARY
    for opcode in binary:
        ex[f"{opcode}(x, x)"] = lambda b, x, y, o=opcode: b.op(o, [x, x])
    for opcode in COMPARES:
        ex[f"{opcode}(x, x)"] = lambda b, x, y, o=opcode: b.op(o, [x, x])
        ex[f"not {opcode}(x, y)"] = lambda b, x, y, o=opcode: b.op("lnot", [b.op(o, [x, y])])
    ex["neg(neg x)"] = lambda b, x, y: b.op("neg", [b.op("neg", [x])])
    ex["abs(abs x)"] = lambda b, x, y: b.op("abs", [b.op("abs", [x])])
    ex["abs(neg x)"] = lambda b, x, y: b.op("abs", [b.op("neg", [x])])
    ex["neg(x - y)"] = lambda b, x, y: b.op("neg", [b.op("sub", [x, y])])
    ex["x + neg y"] = lambda b, x, y: b.op("add", [x, b.op("neg", [y])])
    ex["neg y + x"] = lambda b, x, y: b.op("add", [b.op("neg", [y]), x])
    ex["x - neg y"] = lambda b, x, y: b.op("sub", [x, b.op("neg", [y])])
    ex["select(x < y, x, x)"] = lambda b, x, y: b.op("select", [b.op("lt", [x, y]), x, x])
    ex["select(not x < y, x, y)"] = lambda b, x, y: b.op("select", [b.op("lnot", [b.op("lt", [x, y])]), x, y])
    for cond in (True, False):
        ex[f"select({cond}, x, y)"] = lambda b, x, y, c=cond: b.op("select", [b.const(c, D.bool_), x, y])
    ex["min(x, y) == min(y, x)"] = lambda b, x, y: b.op("sub", [b.op("min", [x, y]), b.op("min", [y, x])])
    for mid in D.ALL_DTYPES:
        ex[f"cast(cast(x, {mid}))"] = lambda b, x, y, m=mid: b.op("cast", [b.op("cast", [x], to=m)], to=dt)
        if mid.bits == dt.bits:
            ex[f"bitcast(bitcast(x, {mid}))"] = lambda b, x, y, m=mid: b.op("bitcast", [b.op("bitcast", [x], to=m)],
                                                                            to=dt)
    ex["cast(x, own type)"] = lambda b, x, y: b.op("cast", [x], to=dt)
    ex["vec_extract(vec_make(x, y), 1)"] = lambda b, x, y: b.op("vec_extract", [b.op("vec_make", [x, y])], index=1)
    ex["vec_make(extracts of v)"] = lambda b, x, y: _rebuilt_vector(b, x, y)
    if dt.is_float:
        ex["fma(x, 1, y)"] = lambda b, x, y: b.op("fma", [x, b.const(1.0, dt), y])
        ex["fma(1, x, y)"] = lambda b, x, y: b.op("fma", [b.const(1.0, dt), x, y])
        ex["fma(x, y, -0.0)"] = lambda b, x, y: b.op("fma", [x, y, b.const(-0.0, dt)])
        ex["fma(x, y, 0.0)"] = lambda b, x, y: b.op("fma", [x, y, b.const(0.0, dt)])
    else:
        for opcode, c1, c2 in (("add", 3, 5), ("add", -3, 3), ("sub", 3, 5), ("mul", 3, 5), ("mul", 4, 2),
                               ("shl", 3, 5), ("shl", dt.bits - 1, 1), ("shl", 1, dt.bits + 1)):
            ex[f"{opcode}({opcode}(x, {c1}), {c2})"] = (
                lambda b, x, y, o=opcode, p=c1, q=c2: b.op(o, [b.op(o, [x, b.const(p, dt)]), b.const(q, dt)]))
        ex["add(sub(x, 3), 3)"] = lambda b, x, y: b.op("add", [b.op("sub", [x, b.const(3, dt)]), b.const(3, dt)])
        for outer in ("add", "sub"):
            for inner_x, inner_y in (("add", None), (None, "sub"), ("sub", "add"), ("add", "add")):
                ex[f"{outer}({inner_x or ''}(x, 5), {inner_y or ''}(y, 7))"] = (
                    lambda b, x, y, o=outer, ix=inner_x, iy=inner_y: b.op(o, [
                        b.op(ix, [x, b.const(5, dt)]) if ix else x,
                        b.op(iy, [y, b.const(7, dt)]) if iy else y]))
        ex["(x + 3) - x"] = lambda b, x, y: b.op("sub", [b.op("add", [x, b.const(3, dt)]), x])
        ex["bnot(bnot x)"] = lambda b, x, y: b.op("bnot", [b.op("bnot", [x])])
        ex["0 - x"] = lambda b, x, y: b.op("sub", [b.const(0, dt), x])
    return ex


def _rebuilt_vector(b: Builder, x: Value, y: Value) -> Value:
    v = b.op("vec_make", [x, y])
    w = b.op("vec_make", [b.op("vec_extract", [v], index=0), b.op("vec_extract", [v], index=1)])
    return b.op("vec_extract", [w], index=0)


@pytest.mark.parametrize("dt", INT_TYPES + FLOAT_TYPES, ids=str)
def test_patterns_on_two_operands_keep_every_bit(dt):
    _check_exact(dt, _self_and_chain_exprs(dt))


def _bool_exprs() -> dict[str, Expr]:
    ex: dict[str, Expr] = {}
    for opcode in ("land", "lor", "band", "bor", "bxor", "eq", "ne"):
        for c in (True, False):
            for left in (False, True):
                ex[f"{opcode}({'c, x' if left else 'x, c'}) c={c}"] = _binary_with_const(opcode, c, left)
        ex[f"{opcode}(x, x)"] = lambda b, x, y, o=opcode: b.op(o, [x, x])
    ex["lnot(lnot x)"] = lambda b, x, y: b.op("lnot", [b.op("lnot", [x])])
    ex["select(x, true, false)"] = lambda b, x, y: b.op("select", [x, b.const(True, D.bool_), b.const(False, D.bool_)])
    ex["select(x, false, true)"] = lambda b, x, y: b.op("select", [x, b.const(False, D.bool_), b.const(True, D.bool_)])
    ex["select(x, y, y)"] = lambda b, x, y: b.op("select", [x, y, y])
    return ex


def test_bool_patterns_keep_every_bit():
    _check_exact(D.bool_, _bool_exprs())


def _simplified(dt: D.DType, expr: Expr) -> str:
    """The kernel's text after simplify and then dce (simplify leaves the ops it bypassed to dce)."""
    return print_kernel(dce.run(apply_pass(simplify.run, _build(dt, {"e": expr})), None))


# ------------------------------------------------------------ the rules fire


@pytest.mark.parametrize("opcode, c, left", [("add", 0, True), ("add", 0, False), ("sub", 0, False),
                                              ("mul", 1, True), ("div", 1, False), ("bor", 0, False),
                                              ("bxor", 0, True), ("band", -1, False), ("shl", 0, False),
                                              ("shr", 32, False)])
def test_integer_identities_disappear(opcode, c, left):
    text = _simplified(D.i32, _binary_with_const(opcode, c, left))
    assert f" {opcode} " not in text, text
    assert "store %out, %pid, %x" in text


@pytest.mark.parametrize("opcode, c", [("mul", 1.0), ("div", 1.0), ("sub", 0.0), ("add", -0.0)])
def test_float_identities_disappear(opcode, c):
    text = _simplified(D.f32, _binary_with_const(opcode, c, False))
    assert "store %out, %pid, %x" in text, text


@pytest.mark.parametrize("opcode, c", [("add", 0.0), ("sub", -0.0), ("mul", 0.0)], ids=["x+0.0", "x-(-0.0)", "x*0.0"])
def test_inexact_float_rewrites_are_not_made(opcode, c):
    # -0.0 + 0.0 is +0.0, -0.0 - (-0.0) is +0.0, inf * 0.0 is NaN: none of these is x or 0.
    text = _simplified(D.f32, _binary_with_const(opcode, c, False))
    assert f" {opcode} " in text, text


def test_float_x_minus_x_and_x_times_zero_stay():
    assert " sub " in _simplified(D.f32, lambda b, x, y: b.op("sub", [x, x]))
    assert " mul " in _simplified(D.f32, lambda b, x, y: b.op("mul", [x, b.const(0.0, D.f32)]))
    assert " sub " not in _simplified(D.i32, lambda b, x, y: b.op("sub", [x, x]))


def test_integer_multiply_by_power_of_two_becomes_shift_and_unsigned_division_too():
    assert " shl " in _simplified(D.i32, _binary_with_const("mul", 8, False))
    assert " shr " in _simplified(D.u32, _binary_with_const("div", 8, False))
    assert " band " in _simplified(D.u32, _binary_with_const("rem", 8, False))
    # Signed division and remainder by 2**k round toward zero: no shift.
    signed_div = _simplified(D.i32, _binary_with_const("div", 8, False))
    assert " div " in signed_div and " shr " not in signed_div
    assert " rem " in _simplified(D.i32, _binary_with_const("rem", 8, False))


def test_float_division_by_power_of_two_becomes_multiply_only_when_exact():
    assert " mul " in _simplified(D.f32, _binary_with_const("div", 4.0, False))
    assert " div " in _simplified(D.f32, _binary_with_const("div", 3.0, False))
    # 1 / 2**15 is subnormal but exact in f16: still a multiply.
    assert " mul " in _simplified(D.f16, _binary_with_const("div", 2.0 ** 15, False))


def test_reassociation_folds_constant_chains():
    text = _simplified(D.i32, lambda b, x, y: b.op("add", [b.op("add", [x, b.const(3, D.i32)]), b.const(4, D.i32)]))
    assert "const 7" in text and text.count(" add ") == 1
    text = _simplified(D.i32, lambda b, x, y: b.op("sub", [b.op("add", [x, b.const(3, D.i32)]), b.const(3, D.i32)]))
    assert "store %out, %pid, %x" in text


def test_min_of_float_operands_is_not_treated_as_commutative():
    # min(-0.0, 0.0) and min(0.0, -0.0) differ, so min(x, y) - min(y, x) must not fold to x - x.
    text = _simplified(D.f32, lambda b, x, y: b.op("sub", [b.op("min", [x, y]), b.op("min", [y, x])]))
    assert text.count(" min ") == 2


def test_not_of_a_float_compare_stays_but_integer_compares_invert():
    assert " lnot " in _simplified(D.f32, lambda b, x, y: b.op("lnot", [b.op("lt", [x, y])]))
    text = _simplified(D.i32, lambda b, x, y: b.op("lnot", [b.op("lt", [x, y])]))
    assert " lnot " not in text and " ge " in text


def test_vector_constants_that_are_splats_simplify():
    def expr(b: Builder, x: Value, y: Value) -> Value:
        v = b.op("vec_make", [x, y, x, y])
        one = b.const(1.0, VectorType(D.f32, 4))
        return b.op("mul", [v, one])
    text = _simplified(D.f32, expr)
    assert " mul " not in text


def test_simplify_reaches_a_fixed_point_through_chains():
    # neg(neg(neg(neg x))) needs the inner rewrite before the outer one can see it.
    def expr(b: Builder, x: Value, y: Value) -> Value:
        v = x
        for _ in range(4):
            v = b.op("neg", [v])
        return v
    k = _build(D.f32, {"e": expr})
    out = dce.run(apply_pass(simplify.run, k), None)
    assert count_ops(out, "neg") == 0
    assert print_kernel(simplify.run(out, None)) == print_kernel(out)


def test_ops_inside_regions_are_simplified():
    k, b = new_kernel("k", [("a", tensor(D.i32, True)), ("out", tensor(D.i32))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0)
    cond = b.op("lt", [pid, b.const(4, D.i32)])
    branch = b.if_(cond)
    with b.at(branch.regions[0]):
        x = b.op("load", [a, pid])
        b.op("store", [out, pid, b.op("add", [x, b.const(0, D.i32)])])
    simplified = apply_pass(simplify.run, k)
    assert count_ops(simplified, "add") == 0
    xs = np.arange(8, dtype=np.int32)
    expected = run_kernel(k, [xs, np.zeros(8, np.int32)], 8)
    got = run_kernel(simplified, [xs, np.zeros(8, np.int32)], 8)
    assert_same_bits(expected[1], got[1])


def test_compare_of_a_value_with_itself_folds_for_integers():
    text = _simplified(D.i32, lambda b, x, y: b.op("eq", [x, x]))
    assert "const true : bool" in text and " eq " not in text


@pytest.mark.parametrize("dt, opcode, c, normal", [
    (D.i32, "sub", 1, "sub 1"), (D.i32, "add", -1, "sub 1"), (D.u32, "add", 2 ** 32 - 1, "sub 1"),
    (D.i32, "add", 5, "add 5"), (D.i32, "sub", -5, "add 5"), (D.i32, "add", -2 ** 31, "add -2147483648"),
])
def test_integer_offsets_have_one_normal_form(dt, opcode, c, normal):
    text = _simplified(dt, _binary_with_const(opcode, c, False))
    want_op, want_const = normal.split()
    assert f"= {want_op} %x, %0" in text and f"%0 = const {want_const} :" in text, text


def test_constant_offsets_move_outwards_so_unrolled_indices_share_a_base():
    def expr(b: Builder, x: Value, y: Value) -> Value:
        return b.op("add", [x, b.op("add", [y, b.const(3, D.i32)])])
    text = _simplified(D.i32, expr)
    assert "= add %x, %y : i32" in text and "const 3" in text
    # (x + 3) - x no longer depends on x (the constants left are const_fold's to fold).
    text = _simplified(D.i32, lambda b, x, y: b.op("sub", [b.op("add", [x, b.const(3, D.i32)]), x]))
    assert text.count("%x") == 1 and " sub " not in text, text
