"""``frag_store`` of an f32 accumulator to an f16 / bf16 tensor: each element rounded once to nearest even (a
gemm's epilogue without an f32 staging copy).  The corpus case ``mma_narrow_store`` runs it on the interpreter,
lavapipe and the GPU and compiles it for every target; here: the interpreter's rounding against numpy's, the
refused combinations located, and what CUDA and Vulkan's cooperative matrices emit."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import iron
from lang_support import assert_located

from iron import In, T, Tensor, bf16, f16, f32, i32, kernel, variants
from iron.codegen.emit import emit_kernel
from iron.codegen.targets import profile
from iron.core.errors import IronCompileError
from iron.lang import frag_a, frag_acc, frag_b, frag_store, mma

HERE = __file__


@kernel(variants(T=[f16, bf16], WIDE=[False, True]))
def tile(a: In[T], b: In[T], c: Tensor[T], w: Tensor[f32]):
    acc = mma(frag_a(a, 0, 16, 16, 16), frag_b(b, 0, 16, 16, 16), frag_acc(f32, 16, 16))
    if WIDE:
        frag_store(w, 0, 16, acc)
    else:
        frag_store(c, 0, 16, acc)


@pytest.mark.parametrize("dt,npt", [(f16, np.float16), (bf16, ml_dtypes.bfloat16)], ids=["f16", "bf16"])
def test_the_interpreter_rounds_the_f32_accumulator_once(dt, npt) -> None:
    """The narrowed store equals the f32 store rounded by numpy (nearest even): scaled so that most sums
    fall between two representable values."""
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((16, 16)) * 3).astype(npt)
    b = (rng.standard_normal((16, 16)) * 3).astype(npt)
    narrow, wide = np.zeros((16, 16), npt), np.zeros((16, 16), np.float32)
    for flag, out in ((False, narrow), (True, wide)):
        c, w = (out, np.zeros(1, np.float32)) if not flag else (np.zeros(1, npt), out)
        tile.variant(T=dt, WIDE=flag).launch(a, b, c, w, grid=(32,), group=(32,), backend="interp")
    assert np.array_equal(narrow.view(np.uint16), wide.astype(npt).view(np.uint16))
    assert (wide != narrow.astype(np.float32)).sum() > 200  # the rounding was exercised


@kernel(variants(CASE=["int", "half_to_bf16"]))
def refused(h: In[f16], c: Tensor[i32], d: Tensor[bf16]):
    if CASE == "int":
        frag_store(c, 0, 16, frag_acc(f32, 16, 16))  # int
    else:
        frag_store(d, 0, 16, frag_acc(f16, 16, 16))  # half_to_bf16


@pytest.mark.parametrize("case,message", [("int", "fragments hold floats; 'c' holds i32"),
                                          ("half_to_bf16", "an accumulator of f16 stored to 'd' of bf16")])
def test_other_stores_are_located_errors(case, message) -> None:
    with pytest.raises(IronCompileError, match=message) as info:
        refused.variant(CASE=case).ir()
    assert_located(info.value, HERE, f"# {case}", at="c" if case == "int" else "frag_acc")
    if case == "half_to_bf16":
        assert "f32 accumulator also stores to f16 and bf16" in str(info.value)


def test_cuda_converts_each_register_rounding_and_compiles(require_toolchain) -> None:
    from iron.codegen.toolchains import nvrtc

    src = emit_kernel(tile.variant(T=bf16, WIDE=False).compiled("cuda"), "cuda").source
    assert "= __float2bfloat16_rn(acc[" in src  # a rounding conversion of each register
    require_toolchain("nvrtc")
    nvrtc.compile_cuda(src, arch="sm_80")


def test_a_cooperative_matrix_converts_before_its_store(require_toolchain) -> None:
    from iron.codegen.toolchains import spirv

    require_toolchain("spirv")
    src = emit_kernel(tile.variant(T=f16, WIDE=False).compiled("spirv"), "spirv", profile("spirv", "vulkan-nvidia"))
    assert "coopMatStore(coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(" in src.source
    if spirv.supports_extension("GL_KHR_cooperative_matrix"):
        assert "CooperativeMatrixKHR" in spirv.compile_glsl(src.source).report["capabilities"]


# ---------------------------------------------------------------- elementwise arithmetic on accumulators

@pytest.mark.parametrize("expr,message", [
    ("acc / 2.0", "'/' cannot take a fragment"),
    ("acc + frag_acc(f32, 16, 16)", "they must have one type"),
    ("acc * f64(2.0)", "without loss"),
    ("fa + 1.0", "takes accumulator fragments"),
])
def test_fragment_arithmetic_misuse_is_located(expr, message, user_module):
    module = user_module("arith_user", "from iron import kernel, f16, f32, f64, In, Tensor\n"
                                       "from iron.lang import frag_a, frag_acc, frag_store\n"
                                       "@kernel\n"
                                       "def k(a: In[f16], c: Tensor[f32]):\n"
                                       "    acc = frag_acc(f32, 16, 8)\n"
                                       "    fa = frag_a(a, 0, 16, 16, 16)\n"
                                       f"    out = {expr}\n")
    with pytest.raises(iron.KernelTypeError, match=re.escape(message)) as info:
        module.k.ir()
    assert "arith_user.py:7" in str(info.value)
