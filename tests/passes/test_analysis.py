"""iron.core.analysis: uses, constants, alignment and offsets, trip counts, escapes, memory access."""

from __future__ import annotations

import random

import numpy as np
import pytest

from iron.core import analysis as A
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.ir import Block, Function, Param, Value
from iron.core.types import VectorType

from pass_harness import I32, run_kernel


def _kernel():
    k, b = new_kernel("an", [("a", tensor(D.i32, True)), ("out", tensor(D.i32))])
    return k, b, k.params[0].value, k.params[1].value


def test_use_counts_and_users_cover_nested_regions():
    k, b, a, out = _kernel()
    pid = b.op("program_id", axis=0)
    branch = b.if_(b.op("lt", [pid, pid]))
    with b.at(branch.regions[0]):
        s = b.op("add", [pid, pid])
        b.op("store", [out, pid, s])
    after = b.op("neg", [pid])
    counts = A.use_counts(k)
    assert counts[pid] == 6 and counts[s] == 1 and counts[out] == 1 and after not in counts
    assert [op.opcode for op in A.users(k)[pid]] == ["lt", "lt", "add", "add", "store", "neg"]


def test_constants_compare_bitwise():
    k, b, a, out = _kernel()
    z, nz = b.const(0.0, D.f32), b.const(-0.0, D.f32)
    assert A.const_value(z) == 0.0 and A.is_const_equal(nz, -0.0) and not A.is_const_equal(nz, 0.0)
    assert A.constant_key(0.0) != A.constant_key(-0.0)
    assert A.constant_key(float("nan")) == A.constant_key(float("nan"))
    assert A.constant_key(True) != A.constant_key(1)
    v = b.const((2, 2, 2, 2), VectorType(D.i32, 4))
    assert A.splat_value(v) == 2
    assert A.const_value(b.op("program_id", axis=0)) is None


def test_all_ones_matches_the_builders_normal_form():
    assert A.all_ones(D.i8) == -1 and A.all_ones(D.u8) == 255 and A.all_ones(D.bool_) is True


def _tz(build):
    k, b, a, out = _kernel()
    pid = b.op("program_id", axis=0)
    v = build(b, pid)
    return A.IndexAnalysis(k).trailing_zero_bits(v)


@pytest.mark.parametrize("build, expected", [
    (lambda b, p: b.const(48, D.i32), 4),
    (lambda b, p: b.const(0, D.i32), 32),
    (lambda b, p: p, 0),
    (lambda b, p: b.op("mul", [p, b.const(12, D.i32)]), 2),
    (lambda b, p: b.op("shl", [p, b.const(35, D.i32)]), 3),  # counts are modulo 32
    (lambda b, p: b.op("add", [b.op("mul", [p, b.const(8, D.i32)]), b.const(4, D.i32)]), 2),
    (lambda b, p: b.op("band", [p, b.const(-16, D.i32)]), 4),
    (lambda b, p: b.op("shr", [b.op("mul", [p, b.const(64, D.i32)]), b.const(2, D.i32)]), 4),
    (lambda b, p: b.op("neg", [b.op("mul", [p, b.const(4, D.i32)])]), 2),
    (lambda b, p: b.op("cast", [b.op("mul", [p, b.const(4, D.i32)])], to=D.i64), 2),
    (lambda b, p: b.op("select", [b.op("lt", [p, p]), b.op("mul", [p, b.const(4, D.i32)]),
                                  b.op("mul", [p, b.const(8, D.i32)])]), 2),
    (lambda b, p: b.op("div", [b.op("mul", [p, b.const(8, D.i32)]), b.const(2, D.i32)]), 0),
])
def test_trailing_zero_bits(build, expected):
    assert _tz(build) == expected


def test_trailing_zero_facts_hold_on_random_values():
    """Every fact the analysis states must hold for the values the interpreter computes."""
    rng = random.Random(7)
    for trial in range(40):
        k, b, a, out = _kernel()
        pid = b.op("program_id", axis=0)
        x = b.op("load", [a, pid])
        pool = [pid, x, b.const(rng.choice([4, 8, 12, -16, 3]), D.i32)]
        for _ in range(6):
            opcode = rng.choice(["add", "sub", "mul", "band", "bor", "bxor", "shl", "shr", "neg", "min"])
            if opcode == "neg":
                v = b.op("neg", [rng.choice(pool)])
            elif opcode in ("shl", "shr"):
                v = b.op(opcode, [rng.choice(pool), b.const(rng.randrange(0, 40), D.i32)])
            else:
                v = b.op(opcode, [rng.choice(pool), rng.choice(pool)])
            pool.append(v)
        result = pool[-1]
        b.op("store", [out, pid, result])
        tz = A.IndexAnalysis(k).trailing_zero_bits(result)
        got = run_kernel(k, [np.array([rng.randrange(-2 ** 31, 2 ** 31) for _ in range(16)], np.int32),
                             np.zeros(16, np.int32)], 16)[1]
        mask = (1 << tz) - 1 if tz < 32 else 0xFFFFFFFF
        assert not (got.view(np.uint32) & np.uint32(mask)).any(), f"trial {trial}: claimed {tz} zero bits"


def test_induction_variable_alignment_comes_from_lo_and_step():
    k, b, a, out = _kernel()
    loop = b.for_(b.const(8, D.i32), b.op("load", [a, b.const(0, D.i32)]), b.const(4, D.i32))
    loop2 = b.for_(b.const(8, D.i32), b.const(100, D.i32), b.const(6, D.i32))
    ia = A.IndexAnalysis(k)
    assert ia.trailing_zero_bits(loop.regions[0].args[0]) == 2
    assert ia.trailing_zero_bits(loop2.regions[0].args[0]) == 1
    assert ia.known_multiple(loop.regions[0].args[0], 4) and not ia.known_multiple(loop.regions[0].args[0], 8)
    with pytest.raises(ValueError):
        ia.known_multiple(loop.regions[0].args[0], 6)


def test_base_and_offset():
    k, b, a, out = _kernel()
    pid = b.op("program_id", axis=0)
    ia = A.IndexAnalysis(k)
    v = b.op("sub", [b.op("add", [b.const(5, D.i32), b.op("add", [pid, b.const(3, D.i32)])]), b.const(1, D.i32)])
    assert ia.base_and_offset(v) == (pid, 7)
    assert ia.base_and_offset(b.const(9, D.i32)) == (None, 9)
    w = b.op("add", [pid, pid])
    assert ia.base_and_offset(w) == (w, 0)


@pytest.mark.parametrize("lo, hi, step, dt, expected", [
    (0, 10, 3, D.i32, 4), (10, 0, -3, D.i32, 4), (0, 0, 1, D.i32, 0), (5, 0, 1, D.i32, 0), (0, 5, -1, D.i32, 0),
    (0, 2 ** 31 - 1, 1, D.i32, 2 ** 31 - 1), (0, 2 ** 31 - 1, 2, D.i32, None), (0, 1, 0, D.i32, None),
    (250, 255, 3, D.u8, None), (250, 255, 5, D.u8, 1), (-128, 127, 1, D.i8, 255),
])
def test_constant_trip_count(lo, hi, step, dt, expected):
    assert A.constant_trip_count(lo, hi, step, dt) == expected


def test_constant_trip_values_respect_the_limit():
    assert A.constant_trip_values(0, 10, 3, D.i32, 4) == [0, 3, 6, 9]
    assert A.constant_trip_values(0, 10, 3, D.i32, 3) is None


def test_escaping_control():
    k, b, a, out = _kernel()
    outer = b.for_(b.const(0, D.i32), b.const(4, D.i32), b.const(1, D.i32))
    with b.at(outer.regions[0]):
        inner = b.loop()
        with b.at(inner.regions[0]):
            b.op("break")
    assert not A.has_escaping_control(outer.regions[0])
    with b.at(outer.regions[0]):
        branch = b.if_(b.op("lt", [b.const(0, D.i32), b.const(1, D.i32)]))
        with b.at(branch.regions[0]):
            b.op("continue")
    assert A.has_escaping_control(outer.regions[0])
    blk = Block()
    with b.at(blk):
        lp = b.loop()
        with b.at(lp.regions[0]):
            b.op("return")
    assert A.has_escaping_control(blk)


def test_aliasing_rules():
    k, b = new_kernel("al", [("a", tensor(D.f32, True)), ("b", tensor(D.f32)), ("n", I32)])
    a, bb, n = (p.value for p in k.params)
    s1 = b.op("shared_alloc", [], dtype=D.f32, shape=(4,))
    s2 = b.op("shared_alloc", [], dtype=D.f32, shape=(4,))
    assert A.may_alias(a, bb) and A.may_alias(s1, s1)
    assert not A.may_alias(a, s1) and not A.may_alias(s1, s2) and not A.may_alias(a, n)


def test_tensor_access_follows_helpers():
    k, b = new_kernel("acc", [("src", tensor(D.f32)), ("dst", tensor(D.f32)), ("both", tensor(D.f32)),
                              ("unused", tensor(D.f32)), ("count", tensor(D.i32)), ("s", I32)])
    src, dst, both, unused, count, s = (p.value for p in k.params)
    f = Function("put", [Param("t", Value(tensor(D.f32), "t")), Param("v", Value(b.const(0.0, D.f32).type, "v"))],
                 Block())
    with b.at(f.body):
        b.op("store", [f.params[0].value, b.const(0, D.i32), f.params[1].value])
        b.op("return")
    k.functions["put"] = f
    pid = b.op("program_id", axis=0)
    v = b.op("load", [src, pid])
    b.op("call", [dst, v], callee="put", result_type=None)
    b.op("store", [both, pid, b.op("load", [both, pid])])
    b.op("atomic_add", [count, pid, s])
    assert A.tensor_access(k) == {"src": "read", "dst": "write", "both": "readwrite", "unused": "read",
                                  "count": "readwrite"}
    A.infer_access(k)
    assert [p.access for p in k.params] == ["read", "write", "readwrite", "read", "readwrite", None]
