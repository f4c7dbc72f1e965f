"""Random structured kernels: every pass alone, and the whole pipeline, keep the interpreter's results bit for bit."""

from __future__ import annotations

import random

import numpy as np
import pytest

from iron.codegen.passes import PASSES
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.ir import Kernel, Value
from iron.core.types import ScalarType

from pass_harness import apply_pass, assert_same_bits, run_kernel

THREADS = 32
SLOTS = 4  # each thread owns elements pid*SLOTS .. pid*SLOTS + SLOTS-1 of every tensor
F32, I32 = ScalarType(D.f32), ScalarType(D.i32)
FLOAT_CONSTS = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, float("inf"), float("nan"), 1e-30]
INT_CONSTS = [0, 1, -1, 2, 3, 4, 7, 8, 31, 2 ** 31 - 1, -2 ** 31]
FLOAT_BINARY = ["add", "sub", "mul", "div", "min", "max"]
INT_BINARY = ["add", "sub", "mul", "div", "rem", "band", "bor", "bxor", "shl", "shr", "min", "max"]


class _Generator:
    """Builds one random kernel from a seed; values are only used where they are in scope."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.k, self.b = new_kernel(f"random_{seed}", [("a", tensor(D.f32, True)), ("ai", tensor(D.i32, True)),
                                                        ("out", tensor(D.f32)), ("outi", tensor(D.i32))])
        self.a, self.ai, self.out, self.outi = (p.value for p in self.k.params)

    def build(self) -> Kernel:
        b = self.b
        pid = b.op("program_id", axis=0, hint="pid")
        self.base = b.op("mul", [pid, b.const(SLOTS, D.i32)], hint="base")
        floats = [self._load(self.a, k) for k in range(2)]
        ints = [self._load(self.ai, k) for k in range(2)] + [pid]
        self.fslot = b.op("var", [], type=F32, hint="f")
        self.islot = b.op("var", [], type=I32, hint="i")
        self.statements(floats, ints, depth=0, count=self.rng.randint(6, 12))
        b.op("store", [self.out, self._index(SLOTS - 1), b.op("var_load", [self.fslot])])
        b.op("store", [self.outi, self._index(SLOTS - 1), b.op("var_load", [self.islot])])
        return self.k

    # ---------------------------------------------------------------- pieces
    def _index(self, k: int) -> Value:
        return self.b.op("add", [self.base, self.b.const(k, D.i32)]) if k else self.base

    def _load(self, t: Value, k: int) -> Value:
        return self.b.op("load", [t, self._index(k)])

    def _const(self, t: ScalarType) -> Value:
        pool = FLOAT_CONSTS if t == F32 else INT_CONSTS
        return self.b.const(self.rng.choice(pool), t)

    def _operand(self, pool: list[Value], t: ScalarType) -> Value:
        return self._const(t) if self.rng.random() < 0.3 else self.rng.choice(pool)

    def expression(self, floats: list[Value], ints: list[Value]) -> None:
        b, rng = self.b, self.rng
        kind = rng.choice(["float", "float", "int", "int", "cast", "select", "fma", "unary"])
        if kind == "float":
            floats.append(b.op(rng.choice(FLOAT_BINARY), [self._operand(floats, F32), self._operand(floats, F32)]))
        elif kind == "int":
            ints.append(b.op(rng.choice(INT_BINARY), [self._operand(ints, I32), self._operand(ints, I32)]))
        elif kind == "cast":
            if rng.random() < 0.5:
                floats.append(b.op("cast", [rng.choice(ints)], to=D.f32))
            else:
                ints.append(b.op("cast", [rng.choice(floats)], to=D.i32))
        elif kind == "select":
            cond = b.op(rng.choice(["lt", "eq", "ge"]), [self._operand(ints, I32), self._operand(ints, I32)])
            floats.append(b.op("select", [cond, self._operand(floats, F32), self._operand(floats, F32)]))
        elif kind == "fma":
            floats.append(b.op("fma", [self._operand(floats, F32) for _ in range(3)]))
        else:
            opcode = rng.choice(["neg", "abs"])
            if rng.random() < 0.5:
                floats.append(b.op(opcode, [rng.choice(floats)]))
            else:
                ints.append(b.op(opcode, [rng.choice(ints)]))

    def statements(self, floats: list[Value], ints: list[Value], depth: int, count: int) -> None:
        b, rng = self.b, self.rng
        for _ in range(count):
            r = rng.random()
            if r < 0.45:
                self.expression(floats, ints)
            elif r < 0.6:
                slot, pool = (self.fslot, floats) if rng.random() < 0.5 else (self.islot, ints)
                if rng.random() < 0.5:
                    b.op("var_store", [slot, rng.choice(pool)])
                else:
                    pool.append(b.op("var_load", [slot]))
            elif r < 0.72:
                k = rng.randrange(SLOTS - 1)
                if rng.random() < 0.5:
                    b.op("store", [self.out, self._index(k), rng.choice(floats)])
                else:
                    b.op("store", [self.outi, self._index(k), rng.choice(ints)])
            elif r < 0.84 and depth < 2:
                cond = b.op(rng.choice(["lt", "ne"]), [rng.choice(ints), self._operand(ints, I32)])
                branch = b.if_(cond)
                for region in branch.regions:
                    with b.at(region):
                        self.statements(list(floats), list(ints), depth + 1, rng.randint(1, 4))
            elif depth < 2:
                self._loop(floats, ints, depth)

    def _loop(self, floats: list[Value], ints: list[Value], depth: int) -> None:
        b, rng = self.b, self.rng
        hint = rng.choice([None, None, 2, 3, 4])
        step = rng.choice([1, 1, 2, -1])
        if rng.random() < 0.5:
            lo, hi = rng.randint(-3, 3), rng.randint(-3, 9)
            lo_v, hi_v = b.const(lo, D.i32), b.const(hi, D.i32)
        else:
            bound = b.op("band", [rng.choice(ints), b.const(7, D.i32)])  # 0..7: always terminates
            lo_v, hi_v = (b.const(0, D.i32), bound) if step > 0 else (bound, b.const(-1, D.i32))
        loop = b.for_(lo_v, hi_v, b.const(step, D.i32), unroll=hint)
        with b.at(loop.regions[0]):
            inner_ints = list(ints) + [loop.regions[0].args[0]]
            self.statements(list(floats), inner_ints, depth + 1, rng.randint(1, 4))
            if rng.random() < 0.2:
                exit_if = b.if_(b.op("eq", [loop.regions[0].args[0], b.const(1, D.i32)]))
                with b.at(exit_if.regions[0]):
                    b.op(rng.choice(["break", "continue"]))


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    n = THREADS * SLOTS
    a = rng.standard_normal(n).astype(np.float32)
    a[::7] = np.array([0.0, -0.0, np.inf, np.nan, -1.0], np.float32)[rng.integers(0, 5, a[::7].size)]
    ai = rng.integers(-20, 20, n).astype(np.int32)
    ai[::5] = np.array([2 ** 31 - 1, -2 ** 31, 0], np.int32)[rng.integers(0, 3, ai[::5].size)]
    return [a, ai, np.zeros(n, np.float32), np.zeros(n, np.int32)]


def _assert_same_outputs(before: Kernel, after: Kernel, seed: int, what: str) -> None:
    args = _inputs(seed)
    expected = run_kernel(before, args, THREADS, THREADS)
    got = run_kernel(after, args, THREADS, THREADS)
    for i in (2, 3):
        assert_same_bits(expected[i], got[i], f"seed {seed}, {what}, output {i}")


SEEDS = range(40)
EXACT_PASSES = [name for name in PASSES if name != "fma_contract"]


@pytest.mark.parametrize("seed", SEEDS)
def test_each_pass_alone_preserves_results(seed):
    k = _Generator(seed).build()
    for name in EXACT_PASSES:
        out = apply_pass(PASSES[name], k, PassContext(), stage=name)
        _assert_same_outputs(k, out, seed, name)


@pytest.mark.parametrize("seed", SEEDS)
def test_whole_pipeline_preserves_results(seed):
    k = _Generator(seed).build()
    for level in (0, 1, 2):
        out = run_pipeline(k, PassContext(opt_level=level, unroll_max=8))
        _assert_same_outputs(k, out, seed, f"pipeline O{level}")
    run_pipeline(k, PassContext(target="cuda"))  # contraction changes bits; it must still verify
