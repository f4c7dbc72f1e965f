"""Matrix fragments in emitted code (emit/fragments.py): the layout the lanes follow, slots, rounding, scratch.

The corpus fragment kernels are compiled for every target by
test_compile_corpus.py and run on lavapipe by test_vulkan_corpus.py; here:
the per-lane index expressions are exactly the interpreter's layouts (the
portable one and every matrix unit's, AMD's MFMA and WMMA included), a
fragment carried across a dynamic loop (a ``var`` slot) and a bf16
accumulator run on Vulkan, CUDA's ``mma.sync`` assembles for sm_80/sm_90,
Metal's ``simdgroup_matrix`` passes the shim, and the scratch sizing and the
bf16-as-bits refusals hold.  test_hip_matrix_units.py covers AMD's units in depth.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from emit_testing import TARGETS, optimized

from iron import In, Tensor, bf16, f16, f32, kernel
from iron.codegen.emit import emit_kernel
from iron.codegen.emit.fragments import (
    NATIVE_UNITS,
    element_exprs,
    fragment_layout,
    native_fragment_types,
    scratch_subgroups,
)
from iron.codegen.mma import STRATEGIES, FragmentLayout
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import default_profile, profile
from iron.core.errors import UnsupportedOnTarget
from iron.core.types import FragmentType
from iron.lang import frag_a, frag_acc, frag_b, frag_store, mma, simd_group_id
from iron.runtime.interp.fragments import fragment_strategy


def _evaluate(expr: str, lane: int, reg: int) -> int:
    """A C integer expression over non-negative ints, evaluated in Python (``/`` truncates)."""
    return eval(expr.replace("/", "//"), {}, {"LANE": lane, "REG": reg})


def _layouts() -> list[tuple[str, FragmentLayout]]:
    found = []
    for strategy in STRATEGIES.values():
        if not strategy.has_lane_layout:
            continue
        for rule in strategy.layouts:
            widths = (8, 32, 64) if strategy.lane_width is None else (strategy.lane_width,)
            for width in widths:
                if (rule.rows * rule.cols) % width == 0:
                    found.append((f"{strategy.name}-{rule.role}{rule.rows}x{rule.cols}-w{width}",
                                  rule.layout.resolve(width)))
    return found


LAYOUTS = _layouts()


@pytest.mark.parametrize("layout", [lay for _, lay in LAYOUTS], ids=[name for name, _ in LAYOUTS])
def test_element_expressions_are_the_layout(layout: FragmentLayout) -> None:
    row, col = element_exprs(layout, "LANE", "REG")
    table = layout.to_table()
    for lane in range(layout.lane_width):
        for reg in range(layout.registers_per_lane):
            assert (_evaluate(row, lane, reg), _evaluate(col, lane, reg)) == tuple(table[lane, reg])


def _fragment_types(k) -> set[FragmentType]:
    return {v.type for op in k.walk() for v in [op.result, *op.operands]
            if v is not None and isinstance(v.type, FragmentType)}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case_name,binding", [("mma_16x8x16", {"T": f16, "KT": 2}), ("mma_8x8x8", {"T": f32})])
def test_emitted_lanes_follow_the_interpreters_layout(case_name, binding, target) -> None:
    """Each fragment's index expressions are those of the layout the interpreter runs it by."""
    _assert_lanes_follow_the_interpreter(optimized(case_name, binding, target), default_profile(target))


@kernel
def mma_16x16x16_slot(a: In[bf16], bt: In[bf16], c: Tensor[f32], ksteps: int):
    """16x16x16 over a K the launch chooses (the accumulator in a slot), B column-major: AMD's unit size."""
    if simd_group_id() == 0:
        acc = frag_acc(f32, 16, 16, 0.5)
        for kk in range(ksteps):
            acc = mma(frag_a(a, kk * 16, 16 * ksteps, 16, 16), frag_b(bt, kk * 16, 16 * ksteps, 16, 16, "col"), acc)
        frag_store(c, 0, 16, acc)


def _slot_16x16x16(target: str = "hip"):
    a, bt = np.zeros(512, ml_dtypes.bfloat16), np.zeros(512, ml_dtypes.bfloat16)
    ctx = PassContext(target=target, fp_contract=None, unroll_max=64, opt_level=2, verify=True)
    return run_pipeline(mma_16x16x16_slot.lower(a, bt, np.zeros(256, np.float32), 2), ctx)


@pytest.mark.parametrize("arch,unit", [("gfx90a", "amd_mfma_gfx90a"), ("gfx940", "amd_mfma_gfx90a"),
                                       ("gfx1100", "amd_wmma_rdna3"), ("gfx1030", None)])
def test_amd_matrix_unit_lanes_follow_the_interpreters_layout(arch, unit) -> None:
    """MFMA (wave64) and WMMA (wave32, operands replicated) registers are placed as fragment_layout places them."""
    k = _slot_16x16x16()
    prof = profile("hip", arch)
    assert prof.mma_strategy == (unit if unit else None)
    assert len(native_fragment_types(k, prof)) == (3 if unit else 0)
    _assert_lanes_follow_the_interpreter(k, prof)
    if unit:  # the slot is a per-lane register array of the unit's layout, copied register by register
        slots = 4 if unit == "amd_mfma_gfx90a" else 8
        assert re.search(rf"float (\w+)\[{slots}\];\n\s*#pragma unroll {slots}\n\s*for \(int (r\w*) = 0; \2 < {slots}; "
                         rf"\+\+\2\) \{{\n"
                         rf"\s*\1\[\2\] = 0\.0f;", emit_kernel(k, "hip", prof).source)


def _assert_lanes_follow_the_interpreter(k, prof) -> None:
    target = prof.target
    native = native_fragment_types(k, prof)
    source = emit_kernel(k, target, prof).source
    types = _fragment_types(k)
    assert types
    for t in types:
        if t in native and NATIVE_UNITS[prof.mma_strategy].whole_matrix:
            assert "simdgroup_multiply_accumulate" in source  # whole matrices: no lane sees a layout
            continue
        interp = fragment_strategy(prof.mma_strategy if t in native else "portable", prof.lane_width)
        layout = interp.fragment_layout(t.role, t.rows, t.cols, t.dtype, prof.lane_width)
        # CUDA holds mma.sync's 16-bit a and b packed: word w is slots 2w and 2w+1 (loaded pair by pair
        # from global memory; shared memory goes through ldmatrix, whose plan test_ldmatrix.py checks).
        packed = target == "cuda" and t in native and t.role in ("a", "b")
        reg = r"\(2 \* r(?:_\d+)? \+ [01]\)" if packed else r"r(?:_\d+)?"
        for expr in element_exprs(layout, "LANE", "REG"):
            pattern = re.escape(expr).replace("LANE", r"lane(?:_\d+)?").replace("REG", reg)
            assert re.search(pattern, source), f"{t}: no lane computes {expr}"
        if packed:
            assert "unsigned int " in source and f"[{layout.registers_per_lane // 2}];" in source
        else:
            assert "float " in source and f"[{layout.registers_per_lane}];" in source


def test_portable_layouts_are_the_interpreters() -> None:
    for target in TARGETS:
        prof = default_profile(target)
        interp = fragment_strategy("portable", prof.lane_width)
        for t in _fragment_types(optimized("mma_16x8x16", {"T": f16, "KT": 2}, target)):
            theirs = interp.fragment_layout(t.role, t.rows, t.cols, t.dtype, prof.lane_width)
            assert np.array_equal(fragment_layout(t, prof).to_table(), theirs.to_table())


# ---------------------------------------------------------------- CUDA mma.sync (sm_80+)

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_mma_sync_is_emitted_and_assembles(arch, dtype, require_toolchain) -> None:
    require_toolchain("nvrtc")
    from iron.codegen.toolchains import nvrtc

    k = optimized("mma_16x8x16", {"T": dtype, "KT": 2}, "cuda")
    prof = profile("cuda", arch)
    assert {(t.role, t.rows, t.cols) for t in native_fragment_types(k, prof)} == \
        {("a", 16, 16), ("b", 16, 8), ("acc", 16, 8)}
    source = emit_kernel(k, "cuda", prof).source
    assert source.count(f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype.name}.{dtype.name}.f32") == 2
    assert "scratch" not in source and "__syncwarp" not in source
    report = nvrtc.compile_cuda(source, arch=arch).report  # --ptxas-options=-v: ptxas assembled it
    assert report["arch"] == arch and report["kernels"] and report["shared_bytes"] == 0


@pytest.mark.parametrize("case_name,binding", [("mma_16x8x16", {"T": f32, "KT": 2}), ("mma_8x8x8", {"T": f16})])
def test_other_shapes_and_dtypes_stay_portable_on_cuda(case_name, binding) -> None:
    k = optimized(case_name, binding, "cuda")
    assert native_fragment_types(k, profile("cuda", "sm_90")) == frozenset()
    source = emit_kernel(k, "cuda").source
    assert "mma.sync" not in source and "__syncwarp" in source


@kernel
def shared_a_operand(a: In[f16], b: In[f16], c: Tensor[f32], c16: Tensor[f16]):
    """One ``a`` fragment type in a 16x8x16 multiply (mma.sync) and a 16x16x16 one into f16 (not): all
    portable."""
    fa = frag_a(a, 0, 16, 16, 16)
    frag_store(c, 0, 8, mma(fa, frag_b(b, 0, 8, 16, 8), frag_acc(f32, 16, 8)))
    frag_store(c16, 0, 16, mma(fa, frag_b(b, 0, 16, 16, 16), frag_acc(f16, 16, 16)))


def test_a_type_that_meets_an_unsupported_mma_keeps_every_operand_portable() -> None:
    a, b, c = np.zeros(256, np.float16), np.zeros(256, np.float16), np.zeros(128, np.float32)
    ctx = PassContext(target="cuda", fp_contract=None, unroll_max=64, opt_level=2, verify=True)
    k = run_pipeline(shared_a_operand.lower(a, b, c, np.zeros(256, np.float16)), ctx)
    assert native_fragment_types(k, profile("cuda", "sm_90")) == frozenset()
    assert "mma.sync" not in emit_kernel(k, "cuda").source


@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_cuda_runs_16x16x16_as_two_mma_sync(dtype, require_toolchain) -> None:
    """A 16x16x16 multiply into f32 on CUDA: two m16n8k16 on one A, each on its half of b and the accumulator
    (their registers 2 h, 2 h + 1 and 4 h .. 4 h + 3), as the interpreter's layout of the unit says; no scratch."""
    require_toolchain("nvrtc")
    from iron.codegen.toolchains import nvrtc

    k = _slot_16x16x16("cuda") if dtype == bf16 else optimized_slot_f16()
    prof = profile("cuda", "sm_90")
    assert {(t.role, t.rows, t.cols) for t in native_fragment_types(k, prof)} == \
        {("a", 16, 16), ("b", 16, 16), ("acc", 16, 16)}
    _assert_lanes_follow_the_interpreter(k, prof)
    source = emit_kernel(k, "cuda", prof).source
    instruction = f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype.name}.{dtype.name}.f32"
    assert source.count(instruction) == 2 and "scratch" not in source
    halves = re.findall(r'"r"\((\w+)\[(\d)\]\), "r"\((\w+)\[(\d)\]\),\s*"f"\((\w+)\[(\d)\]\)', source)
    assert [(int(b0), int(c0)) for _, b0, _, _, _, c0 in halves] == [(0, 0), (2, 4)]
    assert nvrtc.compile_cuda(source, arch="sm_90").report["kernels"]


def optimized_slot_f16():
    """mma_16x16x16_slot's shape in f16 (the slot kernel is bf16)."""
    a, b = np.zeros(256, np.float16), np.zeros(256, np.float16)
    ctx = PassContext(target="cuda", fp_contract=None, unroll_max=64, opt_level=2, verify=True)
    return run_pipeline(f16_16x16x16.lower(a, b, np.zeros(256, np.float32)), ctx)


@kernel
def f16_16x16x16(a: In[f16], b: In[f16], c: Tensor[f32]):
    """One 16x16x16 f16 multiply into f32 with B row-major."""
    frag_store(c, 0, 16, mma(frag_a(a, 0, 16, 16, 16), frag_b(b, 0, 16, 16, 16), frag_acc(f32, 16, 16)))


# ---------------------------------------------------------------- Metal simdgroup_matrix (8x8x8)

@pytest.mark.parametrize("dtype", [f16, f32], ids=["f16", "f32"])
def test_metal_8x8x8_uses_simdgroup_matrices(dtype, require_toolchain) -> None:
    k = optimized("mma_8x8x8", {"T": dtype}, "metal")
    source = emit_kernel(k, "metal").source
    matrix = f"simdgroup_matrix<{'half' if dtype == f16 else 'float'}, 8, 8>"
    assert source.count(f"{matrix} ") == 4  # acc, a, b, result
    assert f"make_filled_simdgroup_matrix<{'half' if dtype == f16 else 'float'}, 8, 8>(" in source
    assert re.search(r"simdgroup_load\(fa, a \+ \w+, ulong\(8\), ulong2\(0, 0\), false\)", source)
    assert re.search(r"simdgroup_load\(fb, bt \+ \w+, ulong\(8\), ulong2\(0, 0\), true\)", source)  # col
    assert re.search(r"simdgroup_multiply_accumulate\(\w+, fa, fb, acc\)", source)
    assert "simdgroup_store(" in source and "scratch" not in source and "lane" not in source
    require_toolchain("metal")
    from iron.codegen.toolchains import metal

    metal.check_msl(source)


def test_metal_16x8x16_stays_portable() -> None:
    k = optimized("mma_16x8x16", {"T": f16, "KT": 2}, "metal")
    assert native_fragment_types(k, default_profile("metal")) == frozenset()
    source = emit_kernel(k, "metal").source
    assert "simdgroup_matrix" not in source and "simdgroup_barrier(mem_flags::mem_threadgroup);" in source


@kernel
def metal_k_loop(a: In[f16], b: In[f16], c: Tensor[f32], ksteps: int):
    """An 8x8 accumulator carried across a dynamic loop: a whole-matrix slot."""
    acc = frag_acc(f32, 8, 8)
    for kk in range(ksteps):
        acc = mma(frag_a(a, kk * 8, 8 * ksteps, 8, 8), frag_b(b, kk * 64, 8, 8, 8), acc)
    frag_store(c, 0, 8, acc)


def test_metal_fragment_slot_is_a_matrix_value(require_toolchain) -> None:
    a, b, c = np.zeros(128, np.float16), np.zeros(128, np.float16), np.zeros(64, np.float32)
    ctx = PassContext(target="metal", fp_contract=None, unroll_max=64, opt_level=2, verify=True)
    k = run_pipeline(metal_k_loop.lower(a, b, c, 2), ctx)
    assert any(op.opcode == "var" and isinstance(op.attrs["type"], FragmentType) for op in k.walk())
    source = emit_kernel(k, "metal").source
    assert re.search(r"simdgroup_matrix<float, 8, 8> (\w+) = make_filled_simdgroup_matrix<float, 8, 8>\(0\.0f\);",
                     source)
    assert re.search(r"^\s*\w+ = \w+;$", source, re.MULTILINE)  # slot copies are plain assignments
    require_toolchain("metal")
    from iron.codegen.toolchains import metal

    metal.check_msl(source)


@kernel
def mma_k_loop(a: In[f16], b: In[f16], c: Tensor[f32], ksteps: int):
    """One 16x8 tile over a K the launch chooses: the accumulator lives in a slot across the loop."""
    if simd_group_id() == 0:
        acc = frag_acc(f32, 16, 8)
        for kk in range(ksteps):
            fa = frag_a(a, kk * 16, 16 * ksteps, 16, 16)
            fb = frag_b(b, kk * 16 * 8, 8, 16, 8)
            acc = mma(fa, fb, acc)
        frag_store(c, 0, 8, acc)


def _k_loop_inputs(ksteps: int):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(16 * 16 * ksteps).astype(np.float16)
    b = rng.standard_normal(16 * ksteps * 8).astype(np.float16)
    return a, b, np.zeros(16 * 8, np.float32)


def _k_loop_ir(target: str):
    a, b, c = _k_loop_inputs(3)
    ctx = PassContext(target=target, fp_contract=None, unroll_max=64, opt_level=2, verify=True)
    return run_pipeline(mma_k_loop.lower(a, b, c, 3), ctx)


def test_a_fragment_slot_is_a_register_array_copied_per_element() -> None:
    ir = _k_loop_ir("cuda")
    assert any(op.opcode == "var" and isinstance(op.attrs["type"], FragmentType) for op in ir.walk())
    source = emit_kernel(ir, "cuda").source
    # 16x8 over 32 lanes: 4 registers (unrolled: they stay registers), zeroed at the slot, copied in and out.
    assert re.search(r"float (\w+)\[4\];\n\s*#pragma unroll 4\n\s*for \(int (r\w*) = 0; \2 < 4; \+\+\2\) \{\n\s*"
                     r"\1\[\2\] = 0\.0f;", source)
    assert re.search(r"(\w+)\[(r\w*)\] = (\w+)\[\2\];", source)


def test_a_fragment_slot_runs_on_vulkan() -> None:
    from iron.runtime.vulkan import VulkanDevice, VulkanUnavailable

    try:
        device = VulkanDevice()
    except VulkanUnavailable as e:
        pytest.skip(f"no usable Vulkan here: {e}")
    try:
        ksteps = 3
        a, b, c = _k_loop_inputs(ksteps)
        ir = _k_loop_ir("spirv")
        device.launch(ir, [a, b, c, ksteps], (64,), (64,))
    finally:
        device.close()
    a64 = a.astype(np.float64).reshape(16, 16 * ksteps)
    b64 = b.astype(np.float64).reshape(16 * ksteps, 8)
    want = a64 @ b64
    bound = np.abs(a64) @ np.abs(b64) * np.finfo(np.float32).eps * (16 * ksteps)
    assert np.all(np.abs(c.reshape(16, 8) - want) <= bound)


@kernel
def mma_bf16_acc(a: In[bf16], b: In[bf16], c: Tensor[bf16]):
    """8x8x8 with a bf16 accumulator filled with a constant: GLSL rounds it through f32 bits."""
    if simd_group_id() == 0:
        acc = frag_acc(bf16, 8, 8, 0.5)
        acc = mma(frag_a(a, 0, 8, 8, 8), frag_b(b, 0, 8, 8, 8), acc)
        frag_store(c, 0, 8, acc)


def test_bf16_accumulator_rounds_to_nearest_on_vulkan() -> None:
    from iron.runtime.vulkan import VulkanDevice, VulkanUnavailable

    try:
        device = VulkanDevice()
    except VulkanUnavailable as e:
        pytest.skip(f"no usable Vulkan here: {e}")
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal(64).astype(ml_dtypes.bfloat16) for _ in range(2))
    c = np.zeros(64, ml_dtypes.bfloat16)
    ctx = PassContext(target="spirv", fp_contract=None, unroll_max=64, opt_level=2, verify=True)
    ir = run_pipeline(mma_bf16_acc.lower(a, b, c), ctx)
    try:
        device.launch(ir, [a, b, c], (64,), (64,))
    finally:
        device.close()
    a64, b64 = a.astype(np.float64).reshape(8, 8), b.astype(np.float64).reshape(8, 8)
    exact = 0.5 + a64 @ b64
    got = c.astype(np.float64).reshape(8, 8)
    # Rounded to nearest: within half a bf16 ulp of the exact sum (plus the f32 sum's own error); truncation
    # or a missing rounding step lands a full ulp away or off the bf16 grid.
    ulp = 2.0 ** (np.floor(np.log2(np.abs(exact))) - 7)
    slack = (0.5 + np.abs(a64) @ np.abs(b64)) * np.finfo(np.float32).eps * 8
    assert np.all(np.abs(got - exact) <= ulp / 2 + slack)


def test_static_scratch_serves_the_largest_group_or_what_fits() -> None:
    k16 = optimized("mma_16x8x16", {"T": f32, "KT": 2}, "cuda")
    k8 = optimized("mma_8x8x8", {"T": f32}, "metal")
    cuda, metal = profile("cuda", "sm_90"), profile("metal", "apple-m2")
    assert scratch_subgroups(k16, cuda, 0) == 32  # 384 floats x 32 subgroups = 48 KiB: exactly the limit
    assert scratch_subgroups(k16, cuda, 4) == 31
    assert scratch_subgroups(k16, metal, 0) == 32 * 1024 // (384 * 4)
    assert scratch_subgroups(k8, metal, 0) == 0  # simdgroup matrices: no scratch at all
    assert scratch_subgroups(optimized("mma_8x8x8", {"T": f32}, "hip"), profile("hip", "gfx90a"), 0) == 16
    # Arrays already past CUDA's static 48 KiB: the module goes dynamic, and the scratch comes along.
    assert scratch_subgroups(k16, cuda, 48 * 1024 - 100) == 32
    assert scratch_subgroups(k16, cuda, 227 * 1024 - 2 * 1536) == 2
    with pytest.raises(UnsupportedOnTarget, match="scratch"):
        scratch_subgroups(k16, cuda, 227 * 1024 - 100)
    with pytest.raises(UnsupportedOnTarget, match="scratch"):
        scratch_subgroups(k16, metal, 32 * 1024 - 100)


@kernel
def bf16_shared_use(a: In[bf16], b: In[bf16], c: Tensor[f32], d: Tensor[bf16]):
    """``a`` feeds a fragment and a scalar load: where bf16 is stored as bits, they cannot share it."""
    frag_store(c, 0, 8, mma(frag_a(a, 0, 8, 8, 8), frag_b(b, 0, 8, 8, 8), frag_acc(f32, 8, 8)))
    d[0] = a[1]


@pytest.mark.parametrize("target", ["hip", "spirv"])
def test_a_bf16_tensor_shared_by_fragments_and_scalars_is_refused_where_bf16_is_bits(target) -> None:
    a, b, c, d = (np.zeros(64, ml_dtypes.bfloat16), np.zeros(64, ml_dtypes.bfloat16), np.zeros(64, np.float32),
                  np.zeros(1, ml_dtypes.bfloat16))
    ctx = PassContext(target=target, fp_contract=None, unroll_max=64, opt_level=2, verify=True)
    k = run_pipeline(bf16_shared_use.lower(a, b, c, d), ctx)
    with pytest.raises(UnsupportedOnTarget, match="also accessed by 'load'") as info:
        emit_kernel(k, target)
    assert info.value.loc.line > 0 and info.value.loc.file.endswith("test_emit_fragments.py")
    emit_kernel(k, "cuda" if target == "hip" else "metal")  # native bf16 targets take it
