"""The public surface: exports, builtins outside kernels, decorator forms, source positions of nested
kernels, and annotation errors."""

from __future__ import annotations

import numpy as np
import pytest
from lang_support import assert_located

import iron
import iron.lang
from iron import Constexpr, Tensor, f32, i32, kernel, variants
from iron.core.errors import KernelTypeError, UnsupportedSyntaxError
from iron.lang import KernelOnlyError, program_id

HERE = __file__

#: The builtins docs/language.md lists.
DOCUMENTED_BUILTINS = """
program_id thread_id group_id group_size num_groups grid_size lane_id simd_size simd_group_id num_simd_groups
load store vload vstore shared barrier copy_async copy_async_commit copy_async_wait
async_barriers barrier_arrive barrier_wait copy_async_barrier copy_tile store_tile store_tile_wait warp_roles role_barrier
cluster_groups cluster_sync fence
atomic_add atomic_max atomic_min atomic_xchg atomic_cas
exp exp2 fast_exp2 log log2 log1p expm1 sqrt rsqrt recip sin cos tan asin acos atan sinh cosh tanh erf floor
ceil round trunc abs sign isnan isinf isfinite pow atan2 min max fma select cast bitcast widen fma_f32 vec
simd_sum simd_max simd_min simd_any simd_all simd_shuffle simd_shuffle_xor simd_shuffle_up simd_shuffle_down
simd_broadcast local frag_a frag_b frag_acc frag_load_acc frag_store frag_row_max frag_row_sum frag_mask
frag_acc_to_a frag_scale_rows mma mma_wg mma_wg_wait
static_range
""".split()


def test_every_documented_builtin_is_exported_by_iron_and_iron_lang() -> None:
    for name in DOCUMENTED_BUILTINS:
        obj = getattr(iron.lang, name)
        assert isinstance(obj, iron.lang.Builtin) and getattr(iron, name) is obj, name
    assert set(iron.lang.ALL_BUILTINS) == set(DOCUMENTED_BUILTINS)
    for name in ("kernel", "func", "variants", "Tensor", "In", "Constexpr", "T", "U", "TypeVar", "f16", "bf16",
                 "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool_", "use",
                 "IronCompileError", "LaunchError", "UnknownNameError", "UnsupportedSyntaxError", "KernelTypeError",
                 "ArityError", "ReadOnlyStoreError", "SharedShapeError", "RegisterIndexError",
                 "DivergentBarrierError"):
        assert name in iron.__all__ and hasattr(iron, name), name
    assert issubclass(iron.DivergentBarrierError, iron.IronCompileError)


def test_builtins_refuse_to_run_as_python() -> None:
    with pytest.raises(KernelOnlyError, match=r"iron.exp\(\) only works inside an @iron.kernel"):
        iron.exp(1.0)
    with pytest.raises(KernelOnlyError, match="T is bound to a dtype"):
        iron.T(1.0)
    assert iron.f16(1.5) == np.float16(1.5)  # a dtype is an ordinary converter outside kernels
    assert repr(iron.program_id) == "<iron builtin program_id(axis=0)>"


def make_nested_kernel(scale: int):
    """A kernel defined in a function: indented source, a closure constant."""

    @kernel(variants(N=[1, 2]), name=f"nested_{scale}")
    def nested(a: Tensor[i32]):
        i = program_id(0)
        a[i] = i * scale + N  # noqa: F821 - N is a variant parameter
        a[i] = a[i] + undefined_in_nested  # noqa: F821

    return nested


def test_nested_kernel_keeps_real_columns_and_closure_values() -> None:
    k = make_nested_kernel(7)
    with pytest.raises(iron.UnknownNameError) as info:
        k.ir(N=2)
    assert info.value.kernel == "nested_7"
    assert_located(info.value, HERE, "undefined_in_nested  # noqa")


def test_closure_constant_folds_into_the_ir() -> None:
    k = make_nested_kernel_ok(9).ir()
    assert 9 in [op.attrs["value"] for op in k.walk() if op.opcode == "const"]


def make_nested_kernel_ok(scale: int):
    @kernel()
    def nested_ok(a: Tensor[i32]):
        a[program_id(0)] = program_id(0) * scale

    return nested_ok


def test_decorator_rejects_unsupported_signatures_at_once() -> None:
    with pytest.raises(UnsupportedSyntaxError, match=r"cannot take \*args"):
        @kernel
        def varargs(a: Tensor[f32], *rest):
            pass
    with pytest.raises(UnsupportedSyntaxError, match="needs a function defined with 'def'"):
        kernel(lambda a: None)


@kernel
def unannotated(a):
    a[0] = 1


@kernel
def bad_annotation(a: list):
    a[0] = 1


@kernel
def bad_default(a: Tensor[f32], n: int = 3):
    a[0] = f32(n)


def test_annotation_mistakes_are_located() -> None:
    with pytest.raises(KernelTypeError) as info:
        unannotated.ir()
    assert "kernel parameter 'a' has no annotation" in info.value.message
    assert_located(info.value, HERE, "def unannotated(a):", at="a)")
    with pytest.raises(KernelTypeError, match="unsupported annotation"):
        bad_annotation.ir()
    with pytest.raises(UnsupportedSyntaxError, match="only Constexpr parameters may"):
        bad_default.ir()


@kernel
def constexpr_dtype(a: Tensor[f32], D: Constexpr):  # noqa: N803
    a[0] = a[0] + f32(D(1.5))


def test_a_constexpr_may_be_a_dtype() -> None:
    a = np.zeros(1, np.float32)
    constexpr_dtype[1](a, i32)
    assert a[0] == 1.0
    constexpr_dtype[1](a, f32)
    assert a[0] == 2.5


def test_star_import_keeps_pythons_own_min_and_max() -> None:
    namespace: dict = {}
    exec("from iron import *", namespace)  # noqa: S102
    assert "min" not in namespace and "program_id" in namespace and "kernel" in namespace
    assert iron.min is iron.lang.min and isinstance(iron.max, iron.lang.Builtin)
