"""fma_contract: a*b+c fuses when the target contracts, only for single-use multiplies in the same block."""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen.passes import fma_contract
from iron.codegen.pipeline import PassContext
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.eval import fma as exact_fma
from iron.core.printer import print_kernel
from iron.core.types import VectorType

from pass_harness import apply_pass, count_ops, run_kernel

CUDA = PassContext(target="cuda")


def _three_input_kernel(dt, combine):
    k, b = new_kernel("fc", [("a", tensor(dt, True)), ("b", tensor(dt, True)), ("c", tensor(dt, True)),
                             ("out", tensor(dt))])
    a, bb, c, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0, hint="pid")
    x, y, z = (b.op("load", [t, pid]) for t in (a, bb, c))
    b.op("store", [out, pid, combine(b, x, y, z)])
    return k


def _inputs(dt, n=64, seed=0):
    rng = np.random.default_rng(seed)
    npdt = D.numpy_dtype(dt)
    return [rng.standard_normal(n).astype(npdt) for _ in range(3)] + [np.zeros(n, npdt)]


PATTERNS = {
    "mul + c": (lambda b, x, y, z: b.op("add", [b.op("mul", [x, y]), z]), lambda x, y, z: (x, y, z)),
    "c + mul": (lambda b, x, y, z: b.op("add", [z, b.op("mul", [x, y])]), lambda x, y, z: (x, y, z)),
    "mul - c": (lambda b, x, y, z: b.op("sub", [b.op("mul", [x, y]), z]), lambda x, y, z: (x, y, -z)),
    "c - mul": (lambda b, x, y, z: b.op("sub", [z, b.op("mul", [x, y])]), lambda x, y, z: (-x, y, z)),
}


@pytest.mark.parametrize("dt", [D.f32, D.f16, D.f64, D.bf16], ids=str)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_patterns_fuse_into_an_exact_fma(pattern, dt):
    build, operands = PATTERNS[pattern]
    k = _three_input_kernel(dt, build)
    fused = apply_pass(fma_contract.run, k, CUDA)
    assert count_ops(fused, "fma") == 1 and count_ops(fused, "mul") == 0
    args = _inputs(dt)
    got = run_kernel(fused, args, 64)[3]
    x, y, z = operands(*args[:3])
    assert np.array_equal(got, exact_fma(x, y, z, dt)), "the fused kernel must compute fma(a, b, c) exactly"
    unfused = run_kernel(k, args, 64)[3]
    tol = {"f64": 1e-12, "f32": 1e-5, "f16": 1e-2, "bf16": 5e-2}[dt.name]
    np.testing.assert_allclose(got.astype(np.float64), unfused.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("ctx", [PassContext(target="interp"), PassContext(target="spirv"),
                                 PassContext(target="cuda", fp_contract=False)], ids=["interp", "spirv", "cuda-off"])
def test_nothing_fuses_when_contraction_is_off(ctx):
    k = _three_input_kernel(D.f32, PATTERNS["mul + c"][0])
    assert print_kernel(apply_pass(fma_contract.run, k, ctx)) == print_kernel(k)


def test_contraction_can_be_forced_on_for_the_interpreter():
    k = _three_input_kernel(D.f32, PATTERNS["mul + c"][0])
    assert count_ops(apply_pass(fma_contract.run, k, PassContext(fp_contract=True)), "fma") == 1


def test_a_multiply_with_another_use_is_not_fused():
    def build(b, x, y, z):
        m = b.op("mul", [x, y])
        return b.op("add", [b.op("add", [m, z]), m])
    fused = apply_pass(fma_contract.run, _three_input_kernel(D.f32, build), CUDA)
    assert count_ops(fused, "fma") == 0 and count_ops(fused, "mul") == 1


def test_integer_multiply_add_is_not_fused():
    fused = apply_pass(fma_contract.run, _three_input_kernel(D.i32, PATTERNS["mul + c"][0]), CUDA)
    assert count_ops(fused, "fma") == 0


def test_both_operands_multiplies_fuse_the_first():
    def build(b, x, y, z):
        return b.op("add", [b.op("mul", [x, y]), b.op("mul", [z, z])])
    fused = apply_pass(fma_contract.run, _three_input_kernel(D.f32, build), CUDA)
    fma_op = next(op for op in fused.walk() if op.opcode == "fma")
    assert count_ops(fused, "mul") == 1
    assert fma_op.operands[2].owner.opcode == "mul"  # the second product is the addend


def test_multiply_outside_a_loop_is_not_pulled_into_it():
    k, b = new_kernel("loop", [("a", tensor(D.f32, True)), ("out", tensor(D.f32))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0)
    x = b.op("load", [a, pid])
    m = b.op("mul", [x, x])
    loop = b.for_(b.const(0, D.i32), b.const(4, D.i32), b.const(1, D.i32))
    with b.at(loop.regions[0]):
        b.op("store", [out, pid, b.op("add", [m, b.op("load", [out, pid])])])
    fused = apply_pass(fma_contract.run, k, CUDA)
    assert count_ops(fused, "fma") == 0


def test_vectors_fuse():
    vt = VectorType(D.f32, 4)

    def build(b, x, y, z):
        vx, vy, vz = (b.op("vec_make", [v, v, v, v]) for v in (x, y, z))
        s = b.op("add", [b.op("mul", [vx, vy]), vz])
        assert s.type == vt
        return b.op("vec_extract", [s], index=2)
    k = _three_input_kernel(D.f32, build)
    fused = apply_pass(fma_contract.run, k, CUDA)
    fma_op = next(op for op in fused.walk() if op.opcode == "fma")
    assert fma_op.result.type == vt
    args = _inputs(D.f32)
    assert np.array_equal(run_kernel(fused, args, 64)[3], exact_fma(*args[:3], D.f32))


def test_fusion_happens_inside_nested_regions():
    k, b = new_kernel("nest", [("a", tensor(D.f32, True)), ("out", tensor(D.f32))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0)
    branch = b.if_(b.op("lt", [pid, b.const(8, D.i32)]))
    with b.at(branch.regions[0]):
        x = b.op("load", [a, pid])
        b.op("store", [out, pid, b.op("add", [b.op("mul", [x, x]), x])])
    assert count_ops(apply_pass(fma_contract.run, k, CUDA), "fma") == 1
