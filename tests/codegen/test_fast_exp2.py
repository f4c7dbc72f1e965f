"""``fast_exp2``: exp2 whose results under f32's smallest normal may be 0 (docs/language.md).  Its meaning (the
evaluator and constant folding flush them), and its CUDA form: the one MUFU.EX2, where exp2f adds a compare and two
multiplies per value.  The corpus case ``fast_exp2`` runs it on every backend against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import In, Tensor, f32, kernel
from iron.core import dtypes as D
from iron.core.eval import eval_pure
from iron.core.types import ScalarType
from iron.lang import exp2, fast_exp2, program_id

TINY = 2.0 ** -126


def test_the_evaluator_flushes_results_under_the_smallest_normal_and_keeps_the_rest():
    x = np.array([-150.0, -127.0, -126.5, -126.0, -125.0, 0.0, 3.5, 127.0, 200.0, -np.inf, np.inf, np.nan],
                 np.float32)
    got = eval_pure("fast_exp2", {}, [x], ScalarType(D.f32))
    plain = eval_pure("exp2", {}, [x], ScalarType(D.f32))
    tiny = plain < TINY
    assert tiny.tolist()[:3] == [True, True, True] and plain[1] > 0  # exp2 keeps the denormals
    assert np.array_equal(got[~tiny], plain[~tiny], equal_nan=True)
    assert (got[tiny] == 0).all() and not np.signbit(got[tiny]).any()
    assert got[3] == np.float32(TINY) and got[-3] == 0 and got[-2] == np.inf and np.isnan(got[-1])
    f64 = eval_pure("fast_exp2", {}, [np.array([-1000.0, -1074.0])], ScalarType(D.f64))
    assert (f64 > 0).all()  # in f64 nothing is flushed


@kernel
def folded(o: Tensor[f32]):
    o[0] = fast_exp2(-130.0)
    o[1] = exp2(-130.0)
    o[2] = fast_exp2(-126.0)


def test_constant_folding_flushes_as_the_evaluator():
    o = np.full(3, np.nan, np.float32)
    folded.launch(o, grid=(1,), group=(1,), backend="interp")
    assert o[0] == 0 and o[1] == np.float32(2.0 ** -130) and o[2] == np.float32(TINY)


@kernel
def powers(x: In[f32], o: Tensor[f32], fast: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        o[i] = exp2(x[i])
        fast[i] = fast_exp2(x[i])


def test_cuda_emits_one_ex2_per_value_and_the_other_targets_exp2(require_toolchain):
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import nvrtc, sass

    compiled = powers.variant().compiled("cuda")
    source = emit_kernel(compiled, "cuda").source
    assert source.count("ex2.approx.ftz.f32") == 1 and "exp2f(" in source
    for target, text in (("hip", "exp2f("), ("spirv", "exp2("), ("metal", "exp2(")):
        assert emit_kernel(powers.variant().compiled(target), target).source.count(text) == 2, target
    require_toolchain("nvrtc")
    built = nvrtc.build(source, arch="sm_90")
    if sass.nvdisasm() is None:
        pytest.skip(f"nvdisasm is not installed: {sass.INSTALL}")
    ops = [i.opcode for i in sass.instructions(sass.disassemble(built.binary))]
    # exp2f: FSETP (x < -126?), FMUL (x / 2), MUFU.EX2, FMUL (r * r); fast_exp2: MUFU.EX2 alone
    assert sum(op.startswith("MUFU.EX2") for op in ops) == 2
    assert sum(op.startswith("FSETP") for op in ops) == 1 and sum(op.startswith("FMUL") for op in ops) == 2


def test_a_fragment_takes_it_element_by_element():
    from iron.lang import frag_acc, frag_store, simd_group_id

    @iron.kernel
    def frag(o: Tensor[f32]):
        acc = frag_acc(f32, 16, 16, value=-130.0)
        frag_store(o, simd_group_id() * 256, 16, fast_exp2(acc))

    o = np.full(256, np.nan, np.float32)
    frag.launch(o, grid=(32,), group=(32,), backend="interp")
    assert (o == 0).all()
