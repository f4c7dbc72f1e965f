"""Capability checks: a located UnsupportedOnTarget at emit time, LaunchError before dispatch."""

import dataclasses
import inspect

import pytest
from corpus import case_named
from emit_testing import optimized

from iron import In, Tensor, f16, f32, f64, i32, i64, kernel
from iron.codegen.capabilities import (
    check_kernel,
    check_emitted_launch,
    check_launch,
    shared_bytes,
)
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import PROFILES, default_profile, profile
from iron.core.errors import LaunchError, UnsupportedOnTarget
from iron.lang import atomic_add, barrier, program_id, shared


@kernel
def doubles(a: In[f64], out: Tensor[f64]):
    i = program_id(0)
    out[i] = a[i] * 2.0


@kernel
def count64(hist: Tensor[i64], ids: In[i32]):
    i = program_id(0)
    atomic_add(hist, ids[i], i64(1))


@kernel
def float_total(a: In[f32], total: Tensor[f32]):
    i = program_id(0)
    atomic_add(total, 0, a[i])


@kernel
def big_tile(a: In[f32], out: Tensor[f32]):
    tile = shared(f32, (128, 128))
    i = program_id(0)
    tile[i] = a[i]
    barrier()
    out[i] = tile[i]


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(n for n, line in enumerate(lines) if text in line)


def _lowered(k, target: str):
    return run_pipeline(k.ir(), PassContext.for_target(target))


def test_f64_on_metal_names_op_target_kernel_and_line():
    with pytest.raises(UnsupportedOnTarget) as info:
        emit_kernel(_lowered(doubles, "metal"), "metal")
    err = info.value
    assert err.kernel == "doubles" and "f64" in err.message and "metal" in err.message
    assert err.loc is not None and err.loc.file.endswith("test_capabilities.py")
    assert err.loc.line == _line_of(doubles.fn, "def doubles")  # a parameter: the kernel's own line
    assert "f64" in str(err) and "doubles" in str(err)


def test_f64_is_fine_where_the_target_has_it():
    for target in ("cuda", "hip", "spirv"):
        assert "double" in emit_kernel(_lowered(doubles, target), target).source


def test_i64_atomics_are_refused_on_metal_at_their_line():
    with pytest.raises(UnsupportedOnTarget) as info:
        emit_kernel(_lowered(count64, "metal"), "metal")
    err = info.value
    assert "atomic_add" in err.message and "i64" in err.message and err.kernel == "count64"
    assert err.loc.line == _line_of(count64.fn, "atomic_add(")


def test_float_atomic_add_needs_the_vulkan_extension():
    ir = _lowered(float_total, "spirv")
    baseline = profile("spirv", "vulkan-baseline")
    assert "atomic_float_add" not in baseline.features
    with pytest.raises(UnsupportedOnTarget) as info:
        emit_kernel(ir, "spirv", baseline)
    assert "atomic_add" in info.value.message and "VK_EXT_shader_atomic_float" in str(info.value)
    assert info.value.loc.line == _line_of(float_total.fn, "atomic_add(")
    # lavapipe has the extension: the same kernel emits there, enabling it.
    source = emit_kernel(ir, "spirv", profile("spirv", "vulkan-lavapipe")).source
    assert "#extension GL_EXT_shader_atomic_float : require" in source


def test_fragments_are_checked_against_the_subgroup_width_at_their_line():
    case = case_named("mma_8x8x8")
    ir = optimized("mma_8x8x8", dict(case.bindings[0]), "cuda")
    for prof in PROFILES.values():
        check_kernel(ir, prof)  # every real width (8, 32, 64) divides every fragment shape
    first = next(op for op in ir.walk() if op.opcode in ("frag_fill", "frag_load", "frag_store", "mma"))
    with pytest.raises(UnsupportedOnTarget) as info:
        check_kernel(ir, dataclasses.replace(profile("cuda", "sm_90"), lane_width=128))
    assert first.opcode in info.value.message and info.value.loc == first.loc


def test_shared_memory_over_the_limit_is_refused_at_the_allocation():
    ir = _lowered(big_tile, "spirv")
    assert shared_bytes(ir) == 128 * 128 * 4
    with pytest.raises(UnsupportedOnTarget) as info:
        check_kernel(ir, profile("spirv", "vulkan-lavapipe"))  # 32 KiB there; 64 KiB asked
    assert info.value.loc.line == _line_of(big_tile.fn, "shared(")
    check_kernel(ir, profile("hip", "gfx90a"))  # 64 KiB of LDS: fits exactly


@kernel
def two_tiles(a: In[f32], out: Tensor[f32]):
    tile = shared(f32, (128, 128))
    half = shared(f16, (3,))
    more = shared(f32, (4,))
    i = program_id(0)
    tile[i] = a[i]
    half[i % 3] = f16(a[i])
    more[i % 4] = a[i]
    barrier()
    out[i] = tile[i] + f32(half[i % 3]) + more[i % 4]


def test_cuda_shared_memory_past_48_kib_is_one_dynamic_block():
    """Static __shared__ stops at 48 KiB: past it the arrays are 16-byte aligned slices of one extern block."""
    em = emit_kernel(_lowered(two_tiles, "cuda"), "cuda")
    assert "extern __shared__ __align__(16) unsigned char iron_dynamic_shared[];" in em.source
    assert "float* const tile = reinterpret_cast<float*>(iron_dynamic_shared + 0);" in em.source
    assert "__half* const half_ = reinterpret_cast<__half*>(iron_dynamic_shared + 65536);" in em.source
    assert "float* const more = reinterpret_cast<float*>(iron_dynamic_shared + 65552);" in em.source
    assert em.dynamic_shared_bytes == 65568 and em.shared_bytes == 65568
    check_emitted_launch(em, (128,), (128,))
    small = emit_kernel(_lowered(doubles, "cuda"), "cuda")
    assert small.dynamic_shared_bytes == 0 and "extern __shared__" not in small.source
    # HIP has no opt-in: 64 KiB of LDS are static there, and one array more is refused.
    assert "extern __shared__" not in emit_kernel(_lowered(big_tile, "hip"), "hip").source
    with pytest.raises(UnsupportedOnTarget, match="over the 65536 bytes per group of hip"):
        emit_kernel(_lowered(two_tiles, "hip"), "hip")
    sm86 = profile("cuda", "sm_86")
    assert sm86.shared_limit == 99 * 1024 and profile("cuda", "sm_90").shared_limit == 227 * 1024
    with pytest.raises(LaunchError, match="over the limit of 101376 on cuda"):
        check_launch(sm86, (128,), 100 * 1024)


def test_a_partial_last_group_is_refused_for_barriers_and_fragments_only():
    barrier_kernel = emit_kernel(_lowered(big_tile, "hip"), "hip")  # 64 KiB of shared memory: fits on HIP
    assert barrier_kernel.whole_group_op.opcode == "barrier"
    line = _line_of(big_tile.fn, "barrier(")
    with pytest.raises(LaunchError, match=rf"grid \(100,\) is not a multiple .* uses barrier \(.*:{line}:"):
        check_emitted_launch(barrier_kernel, (100,), (64,))
    check_emitted_launch(barrier_kernel, (128,), (64,))
    fragments = emit_kernel(optimized("mma_16x8x16", {"T": f16, "KT": 2}, "cuda"), "cuda")
    with pytest.raises(LaunchError, match="frag_load|frag_fill|mma"):
        check_emitted_launch(fragments, (64, 3), (32, 2))
    # Subgroup reductions combine the active lanes: a tail is fine.
    partials = emit_kernel(optimized("simd_sum_atomic_partials", {"T": f32}, "cuda"), "cuda")
    assert partials.whole_group_op is None
    check_emitted_launch(partials, (100,), (64,))
    check_emitted_launch(emit_kernel(_lowered(doubles, "cuda"), "cuda"), (7,), (64,))


def test_groups_stay_within_what_a_static_mma_scratch_serves():
    """16x8x16 f32 on Metal: 384 floats per subgroup; 32 KiB hold 21 subgroups, so 672 threads."""
    emitted = emit_kernel(optimized("mma_16x8x16", {"T": f32, "KT": 2}, "metal"), "metal")
    assert emitted.max_group_threads == 21 * 32
    assert emitted.shared_bytes == 21 * 384 * 4 and f"[{21 * 384}]" in emitted.source
    check_emitted_launch(emitted, (672,), (672,))
    with pytest.raises(LaunchError, match="sized for 672"):
        check_emitted_launch(emitted, (704,), (704,))
    # Natively multiplied fragments need no scratch: the profile's own limit.
    native = emit_kernel(optimized("mma_16x8x16", {"T": f16, "KT": 2}, "cuda"), "cuda")
    assert native.max_group_threads == 1024 and native.shared_bytes == 0
    glsl = emit_kernel(optimized("mma_16x8x16", {"T": f32, "KT": 2}, "spirv"), "spirv")
    assert glsl.max_group_threads == 1024  # GLSL sizes the scratch from the pipeline's group


@pytest.mark.parametrize("group,shared,problem", [
    ((1025,), 0, "extent 1025 on axis 0"),
    ((32, 33), 0, "1056 threads"),
    ((1, 1, 65), 0, "axis 2"),
    ((256,), 227 * 1024 + 1, "shared memory"),  # sm_90 opts in to 227 KiB
    ((0,), 0, "positive"),
])
def test_check_launch_refuses_what_cuda_cannot_run(group, shared, problem):
    with pytest.raises(LaunchError, match=problem):
        check_launch(default_profile("cuda"), group, shared)


def test_check_launch_accepts_the_limits_themselves():
    check_launch(default_profile("cuda"), (1024,), 227 * 1024)
    check_launch(default_profile("cuda"), (32, 32), 0)
    with pytest.raises(LaunchError):
        check_launch(default_profile("spirv"), (256,), 32 * 1024 + 4)  # lavapipe: 32 KiB
