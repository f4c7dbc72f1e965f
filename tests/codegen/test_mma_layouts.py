"""Every MMA strategy's fragment layouts, checked against the vendors' own formulas and examples.

Each layout is checked three ways: structurally (every element held exactly
``replication`` times, ``element`` and ``owner`` inverse), entry by entry
against the ISA's formula written here the way the document states it
(independently of the bit-field encoding in iron.codegen.mma), and at a few
literal entries worked out by hand from the documents.  A mutation test
shows that the formula comparison catches a layout with two lanes swapped,
which the structural checks alone cannot.
"""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen import mma
from iron.codegen.mma import (ROLES, BitFieldLayout, MmaLayoutError, OpaqueLayoutError, StripedLayout,
                              TableLayout, register_words, role_dims, strategy_for)
from iron.core import dtypes as D
from iron.core.errors import IronError
from iron.core.types import MMA_SHAPES

WITH_LAYOUTS = [s for s in mma.STRATEGIES.values() if s.has_lane_layout]


def _layouts():
    """(strategy, combo, role, lane width, layout) for every layout a strategy serves."""
    for strategy in WITH_LAYOUTS:
        widths = (strategy.lane_width,) if strategy.lane_width else (8, 32, 64)
        for combo in strategy.combos:
            for role in ROLES:
                dtype = combo.acc_dtype if role == "acc" else combo.in_dtype
                for width in widths:
                    yield pytest.param(strategy, combo, role, width,
                                       strategy.layout(role, combo.shape, dtype, lane_width=width),
                                       id=f"{strategy.name}-{combo}-{role}-w{width}".replace(" ", "_"))


LAYOUTS = list(_layouts())


# ---------------------------------------------------------------- structure

@pytest.mark.parametrize(("strategy", "combo", "role", "width", "layout"), LAYOUTS)
def test_every_element_is_held_exactly_replication_times(strategy, combo, role, width, layout):
    layout.check()
    assert (layout.rows, layout.cols) == role_dims(role, combo.shape)
    assert layout.lane_width == width
    table = layout.to_table()
    assert table.shape == (width, layout.registers_per_lane, 2)
    counts = np.zeros((layout.rows, layout.cols), dtype=int)
    np.add.at(counts, (table[..., 0], table[..., 1]), 1)
    assert (counts == layout.replication).all()
    expected_replication = 2 if strategy.name == "amd_wmma_rdna3" and role != "acc" else 1
    assert layout.replication == expected_replication


@pytest.mark.parametrize(("strategy", "combo", "role", "width", "layout"), LAYOUTS)
def test_element_and_owner_are_inverse(strategy, combo, role, width, layout):
    for lane in range(layout.lane_width):
        for reg in range(layout.registers_per_lane):
            row, col = layout.element(lane, reg)
            assert (lane, reg) in layout.owners(row, col)
            assert layout.element(*layout.owner(row, col)) == (row, col)
    for row in range(layout.rows):
        for col in range(layout.cols):
            owners = layout.owners(row, col)
            assert len(owners) == layout.replication
            assert layout.owner(row, col) == owners[0] == min(owners)
            assert all(layout.element(*o) == (row, col) for o in owners)
    owners = layout.owner_table()
    assert all(layout.owner(r, c) == tuple(owners[r, c]) for r in range(layout.rows) for c in range(layout.cols))


@pytest.mark.parametrize(("strategy", "combo", "role", "width", "layout"), LAYOUTS)
def test_table_form_is_the_same_layout(strategy, combo, role, width, layout):
    """to_table() round-trips through an explicit TableLayout with the same answers both ways."""
    table = TableLayout.from_array(layout.rows, layout.cols, layout.to_table())
    table.check()
    assert (table.lane_width, table.registers_per_lane) == (layout.lane_width, layout.registers_per_lane)
    for lane in range(0, layout.lane_width, 3):
        for reg in range(layout.registers_per_lane):
            assert table.element(lane, reg) == layout.element(lane, reg)
    assert (table.owner_table() == layout.owner_table()).all()


# ---------------------------------------------------------------- register counts (per the ISAs)

# 32-bit registers per lane for (strategy, role, dtype): PTX ISA 9.7.14.5.8 (a: four .f16x2, b: two .f16x2,
# c: four .f32 or two .f16x2); CDNA2 MFMA 16x16x16 (a, b: 4 halves in 2 VGPRs, acc: 4 VGPRs); RDNA3 WMMA
# (a, b: 16 halves in 8 VGPRs, acc: 8 VGPRs); Metal simdgroup_matrix 8x8 (two elements per lane).
REGISTER_WORDS = {
    ("cuda_mma_sync_m16n8k16", "a", D.f16): 4, ("cuda_mma_sync_m16n8k16", "b", D.f16): 2,
    ("cuda_mma_sync_m16n8k16", "acc", D.f32): 4, ("cuda_mma_sync_m16n8k16", "acc", D.f16): 2,
    ("amd_mfma_gfx90a", "a", D.bf16): 2, ("amd_mfma_gfx90a", "b", D.f16): 2, ("amd_mfma_gfx90a", "acc", D.f32): 4,
    ("amd_wmma_rdna3", "a", D.f16): 8, ("amd_wmma_rdna3", "b", D.bf16): 8, ("amd_wmma_rdna3", "acc", D.f32): 8,
}
SLOTS = {"cuda_mma_sync_m16n8k16": {"a": 8, "b": 4, "acc": 4}, "amd_mfma_gfx90a": {"a": 4, "b": 4, "acc": 4},
         "amd_wmma_rdna3": {"a": 16, "b": 16, "acc": 8}, "metal_simdgroup_8x8": {"a": 2, "b": 2, "acc": 2}}


@pytest.mark.parametrize(("strategy", "combo", "role", "width", "layout"), LAYOUTS)
def test_register_counts_match_the_isa(strategy, combo, role, width, layout):
    dtype = combo.acc_dtype if role == "acc" else combo.in_dtype
    if strategy.name in SLOTS:
        assert layout.registers_per_lane == SLOTS[strategy.name][role] * instructions(strategy, combo, role)
    else:  # portable: the fragment spread evenly
        assert layout.registers_per_lane == layout.rows * layout.cols // width
    if (strategy.name, role, dtype) in REGISTER_WORDS:
        assert register_words(layout, dtype) == (REGISTER_WORDS[strategy.name, role, dtype]
                                                 * instructions(strategy, combo, role))


def instructions(strategy, combo, role) -> int:
    """How many of the strategy's instructions hold ``role``'s fragment side by side: CUDA runs 16x16x16 as two
    m16n8k16 on one A (b and the accumulator twice the registers), every other combo as one instruction."""
    return combo.n // 8 if strategy.name == "cuda_mma_sync_m16n8k16" and role != "a" else 1


def test_the_register_table_covers_every_strategy_with_hardware_registers():
    assert {name for name, _, _ in REGISTER_WORDS} | {"metal_simdgroup_8x8"} == set(SLOTS)


# ---------------------------------------------------------------- the vendors' formulas, as written

def ptx_m16n8k16(role: str, lane: int, i: int) -> tuple[int, int]:
    """PTX ISA 9.7.14.5.8, "Matrix Fragments for mma.m16n8k16 with floating point type"; registers past the
    instruction's four (b, c of a 16x16x16, two instructions) are the second instruction's, 8 columns further."""
    if role != "a" and i >= 4:
        row, col = ptx_m16n8k16(role, lane, i - 4)
        return row, col + 8
    group_id, tid = lane >> 2, lane % 4
    if role == "a":
        row = group_id if (i < 2 or 4 <= i < 6) else group_id + 8
        col = tid * 2 + (i & 0x1) + (8 if i >= 4 else 0)
    elif role == "b":
        row = tid * 2 + (i & 0x1) + (8 if i >= 2 else 0)
        col = group_id
    else:
        row = group_id if i < 2 else group_id + 8
        col = tid * 2 + (i & 0x1)
    return row, col


def mfma_16x16x16(role: str, lane: int, i: int) -> tuple[int, int]:
    """AMD Matrix Instruction Calculator, v_mfma_f32_16x16x16f16 / bf16_1k register layout (A i = lane % 16,
    A k = 4 * floor(lane / 16) + 2 * GPR_num + floor(GPR_bits / 16), item i being 2 * GPR_num + half; also
    ROCm's "AMD matrix cores" lab note, whose example loads A[lane % 16][4*(lane/16) + i])."""
    if role == "a":
        return lane % 16, 4 * (lane // 16) + i
    if role == "b":
        return 4 * (lane // 16) + i, lane % 16
    return 4 * (lane // 16) + i, lane % 16


def wmma_16x16x16(role: str, lane: int, i: int) -> tuple[int, int]:
    """AMD GPUOpen, "How to accelerate AI applications on RDNA 3 using WMMA": a_frag[i] = A[lane % 16][i],
    b_frag[i] = B[i][lane % 16], c_frag[i] = C[2*i + lane / 16][lane % 16]."""
    if role == "a":
        return lane % 16, i
    if role == "b":
        return i, lane % 16
    return 2 * i + lane // 16, lane % 16


def metal_8x8(role: str, lane: int, i: int) -> tuple[int, int]:
    """Informational (not Apple-documented): MLX steel BaseMMAFrag<T, 8, 8>::get_coord."""
    qid = lane // 4
    return (qid & 4) + (lane // 2) % 4, (qid & 2) * 2 + (lane % 2) * 2 + i


FORMULAS = {"cuda_mma_sync_m16n8k16": ptx_m16n8k16, "amd_mfma_gfx90a": mfma_16x16x16,
            "amd_wmma_rdna3": wmma_16x16x16, "metal_simdgroup_8x8": metal_8x8}


def formula_mismatches(layout, formula, role: str) -> list[tuple[int, int]]:
    """The (lane, reg) slots where ``layout`` disagrees with the documented formula."""
    return [(lane, reg) for lane in range(layout.lane_width) for reg in range(layout.registers_per_lane)
            if layout.element(lane, reg) != formula(role, lane, reg)]


@pytest.mark.parametrize(("strategy", "combo", "role", "width", "layout"),
                         [p for p in LAYOUTS if p.values[0].name in FORMULAS])
def test_every_entry_matches_the_documented_formula(strategy, combo, role, width, layout):
    assert formula_mismatches(layout, FORMULAS[strategy.name], role) == []


def test_portable_layout_matches_its_formula():
    """docs/matrix-units.md: element (r, c) lives in lane (r*N + c) % W, register (r*N + c) // W."""
    for rows, cols in {role_dims(role, s) for role in ROLES for s in MMA_SHAPES}:
        for width in (8, 32, 64):
            layout = mma.PORTABLE.fragment_layout("acc", rows, cols, D.f32, width)
            assert layout == StripedLayout(rows, cols, width)
            for r in range(rows):
                for c in range(cols):
                    assert layout.owner(r, c) == ((r * cols + c) % width, (r * cols + c) // width)


# Literal entries, worked out by hand from each document (not from the code under test).
SPOT_CHECKS = [
    # PTX 9.7.14.5.8: lane 5 -> groupID 1, threadID_in_group 1.  a5: row = groupID (4 <= 5 < 6), col = 2 + 1 + 8.
    ("cuda_mma_sync_m16n8k16", (16, 8, 16), "a", D.f16, 5, 5, (1, 11)),
    # a2 of lane 0: row = groupID + 8, col = 0.
    ("cuda_mma_sync_m16n8k16", (16, 8, 16), "a", D.bf16, 0, 2, (8, 0)),
    # b3 of lane 30 (groupID 7, tid 2): row = 4 + 1 + 8 = 13, col = 7.
    ("cuda_mma_sync_m16n8k16", (16, 8, 16), "b", D.f16, 30, 3, (13, 7)),
    # 16x16x16 (two instructions): slot 6 of lane 30 is the second one's b2: row = 4 + 0 + 8 = 12, col = 8 + 7.
    ("cuda_mma_sync_m16n8k16", (16, 16, 16), "b", D.bf16, 30, 6, (12, 15)),
    # c2 of lane 9 (groupID 2, tid 1): row = 2 + 8 = 10, col = 2.
    ("cuda_mma_sync_m16n8k16", (16, 8, 16), "acc", D.f32, 9, 2, (10, 2)),
    # MFMA 16x16x16: A[5][10] is held by lane 5 + 16*2 = 37, item 2.
    ("amd_mfma_gfx90a", (16, 16, 16), "a", D.f16, 37, 2, (5, 10)),
    # D: lane 63, item 3 -> row 4*3 + 3 = 15, col 15.
    ("amd_mfma_gfx90a", (16, 16, 16), "acc", D.f32, 63, 3, (15, 15)),
    # WMMA: c_frag[3] of lane 17 -> row 2*3 + 1 = 7, col 1.
    ("amd_wmma_rdna3", (16, 16, 16), "acc", D.f32, 17, 3, (7, 1)),
    # WMMA: lane 20 mirrors lane 4; a_frag[9] = A[4][9].
    ("amd_wmma_rdna3", (16, 16, 16), "a", D.f16, 20, 9, (4, 9)),
    # Metal (informational): lane 13 -> qid 3: row 0 + 6 % 4 = 2, col 4 + 2 + 1 = 7 for element 1.
    ("metal_simdgroup_8x8", (8, 8, 8), "acc", D.f16, 13, 1, (2, 7)),
    ("metal_simdgroup_8x8", (8, 8, 8), "b", D.bf16, 31, 0, (7, 6)),
]


@pytest.mark.parametrize(("name", "shape", "role", "dtype", "lane", "reg", "expected"), SPOT_CHECKS,
                         ids=lambda v: str(v))
def test_known_entries_from_the_documents(name, shape, role, dtype, lane, reg, expected):
    layout = mma.get_strategy(name).layout(role, shape, dtype)
    assert layout.element(lane, reg) == expected
    assert (lane % (16 if name == "amd_wmma_rdna3" and role != "acc" else 64), reg) == layout.owner(*expected)


def calculator_owners(strategy: str, role: str, row: int, col: int) -> set[tuple[int, int]]:
    """Element -> every (lane, item) holding it, as the AMD Matrix Instruction Calculator computes it
    (ROCm/amd_matrix_instruction_calculator, matrix_calculator.py): gfx9 (InstCalcGfx9) for an input with
    one block, A[i][k] in lane 16 * (k // 4) + i, item k % 4, and a 16x16 f32 output D[i][j] in register
    i % 4 of lane 16 * (i // 4) + j; gfx11 (InstCalcGfx11, wave32), A[i][k] item k of lanes i and i + 16,
    D[i][j] register i // 2 of lane 16 * (i % 2) + j.  B[k][j] is A's rule with j for i."""
    if role == "acc":
        i, j = row, col
        if strategy == "amd_mfma_gfx90a":
            return {(16 * (i // 4) + j, i % 4)}
        return {(16 * (i % 2) + j, i // 2)}
    i, k = (row, col) if role == "a" else (col, row)
    if strategy == "amd_mfma_gfx90a":
        return {(16 * (k // 4) + i, k % 4)}
    return {(i, k), (i + 16, k)}


@pytest.mark.parametrize("strategy", ["amd_mfma_gfx90a", "amd_wmma_rdna3"])
@pytest.mark.parametrize("dtype", [D.f16, D.bf16], ids=str)
@pytest.mark.parametrize("role", ROLES)
def test_amd_owners_match_the_matrix_instruction_calculator(strategy, dtype, role):
    """The other direction from the formulas above: which (lane, item) holds each element."""
    layout = mma.get_strategy(strategy).layout(role, (16, 16, 16), D.f32 if role == "acc" else dtype)
    for row in range(16):
        for col in range(16):
            assert set(layout.owners(row, col)) == calculator_owners(strategy, role, row, col)


def test_wmma_operands_duplicate_lanes_0_to_15_into_16_to_31():
    """RDNA3 ISA, WMMA in wave32: lanes 16-31 must hold the same A/B values as lanes 0-15."""
    for role in ("a", "b"):
        layout = mma.AMD_WMMA_RDNA3.layout(role, (16, 16, 16), D.f16)
        table = layout.to_table()
        assert (table[:16] == table[16:]).all()
        assert layout.owners(3, 7) == ((3 if role == "a" else 7, 7 if role == "a" else 3),
                                       (19 if role == "a" else 23, 7 if role == "a" else 3))


def test_swapping_two_lanes_is_caught_by_the_formula_but_not_by_structure():
    """Mutation: a permutation keeps the layout a bijection, so only the documents' formula catches it."""
    layout = mma.CUDA_MMA_SYNC_M16N8K16.layout("a", (16, 8, 16), D.f16)
    table = layout.to_table().copy()
    table[[3, 12]] = table[[12, 3]]
    swapped = TableLayout.from_array(16, 16, table)
    swapped.check()  # still a bijection
    assert {lane for lane, _ in formula_mismatches(swapped, ptx_m16n8k16, "a")} == {3, 12}


def test_duplicated_and_missing_elements_are_rejected():
    layout = mma.AMD_MFMA_GFX90A.layout("acc", (16, 16, 16), D.f32)
    table = layout.to_table().copy()
    table[7, 1] = table[8, 1]  # lane 7 now holds lane 8's element; its own element has no owner
    with pytest.raises(MmaLayoutError, match=r"held 2 times|held 0 times"):
        TableLayout.from_array(16, 16, table).check()
    table[7, 1] = (16, 0)
    with pytest.raises(MmaLayoutError, match="outside the 16x16 fragment"):
        TableLayout.from_array(16, 16, table).check()


# ---------------------------------------------------------------- bit-field encoding and lookups

def test_bit_field_layouts_reject_malformed_bit_lists():
    with pytest.raises(MmaLayoutError, match="used twice"):
        BitFieldLayout(4, 4, 4, 4, row_bits=("l0", "l1"), col_bits=("r0", "l1"))
    with pytest.raises(MmaLayoutError, match="every register bit"):
        BitFieldLayout(4, 4, 8, 4, row_bits=("l0", "l1"), col_bits=("l2", "r0"))
    with pytest.raises(MmaLayoutError, match="needs 2 row bits"):
        BitFieldLayout(4, 4, 4, 4, row_bits=("l0",), col_bits=("r0", "r1"))
    with pytest.raises(MmaLayoutError, match="bad bit source"):
        BitFieldLayout(4, 4, 4, 4, row_bits=("l0", "x1"), col_bits=("r0", "r1"))
    with pytest.raises(MmaLayoutError, match="out of range"):
        BitFieldLayout(4, 4, 4, 4, row_bits=("l0", "l2"), col_bits=("r0", "r1"))


def test_unsupported_lookups_say_what_the_strategy_runs():
    cuda = mma.CUDA_MMA_SYNC_M16N8K16
    with pytest.raises(MmaLayoutError, match=r"no a fragment of f32 for 16x8x16.*16x8x16 f16->f32"):
        cuda.layout("a", (16, 8, 16), D.f32)
    with pytest.raises(MmaLayoutError, match="no layout for frag<b,f16,8x8>"):
        cuda.fragment_layout("b", 8, 8, D.f16)
    with pytest.raises(MmaLayoutError, match="spreads over 32 lanes, not 64"):
        cuda.layout("acc", (16, 8, 16), D.f32, lane_width=64)
    with pytest.raises(MmaLayoutError, match="does not run 8x8x8 f32->f16"):
        mma.METAL_SIMDGROUP_8x8.combo((8, 8, 8), D.f32, D.f16)
    assert mma.METAL_SIMDGROUP_8x8.combo((8, 8, 8), D.f16, D.f16).instruction.startswith("simdgroup_multiply")
    with pytest.raises(MmaLayoutError, match="needs a lane width"):
        mma.PORTABLE.fragment_layout("a", 16, 16, D.f16)
    with pytest.raises(MmaLayoutError, match="unknown fragment role"):
        role_dims("c", (16, 8, 16))


def test_vulkan_cooperative_matrices_have_no_lane_layout_and_are_narrowed_by_the_device():
    vk = mma.VULKAN_KHR_COOPERATIVE_MATRIX
    assert not vk.has_lane_layout and vk.device_queried
    with pytest.raises(OpaqueLayoutError, match="implementation-defined"):
        vk.layout("a", (16, 16, 16), D.f16)
    offered = (mma.MmaCombo(16, 16, 16, D.f16, D.f32), mma.MmaCombo(16, 8, 8, D.f16, D.f16))
    narrowed = vk.restricted_to(offered)
    assert [str(c) for c in narrowed.combos] == ["16x16x16 f16->f32"]  # 16x8x8 is no DSL shape


# ---------------------------------------------------------------- registry

@pytest.mark.parametrize(("target", "arch", "expected"), [
    ("cuda", "sm_80", "cuda_mma_sync_m16n8k16"), ("cuda", "sm_90a", "cuda_mma_sync_m16n8k16"),
    ("cuda", "sm_75", "portable"), ("cuda", None, "portable"), ("cuda", "gfx90a", "portable"),
    ("hip", "gfx90a", "amd_mfma_gfx90a"), ("hip", "gfx940", "amd_mfma_gfx90a"), ("hip", "gfx942", "amd_mfma_gfx90a"),
    ("hip", "gfx908", "portable"),
    ("hip", "gfx1100", "amd_wmma_rdna3"), ("hip", "gfx1030", "portable"),
    ("metal", None, "metal_simdgroup_8x8"), ("metal", "apple7", "metal_simdgroup_8x8"),
    ("metal", "mac2", "metal_simdgroup_8x8"), ("metal", "apple6", "portable"),
    ("spirv", None, "portable"), ("spirv", "khr_cooperative_matrix", "vulkan_khr_cooperative_matrix"),
    ("interp", None, "portable"),
])
def test_strategy_for_picks_the_matrix_unit_of_each_arch(target, arch, expected):
    assert strategy_for(target, arch).name == expected


def test_unknown_names_are_clear_errors():
    with pytest.raises(IronError, match="unknown target 'opencl'"):
        strategy_for("opencl")
    with pytest.raises(MmaLayoutError, match="unknown MMA strategy 'tpu'.*portable"):
        mma.get_strategy("tpu")


def test_every_strategy_names_its_sources_and_status():
    assert set(mma.STRATEGIES) == {"cuda_mma_sync_m16n8k16", "metal_simdgroup_8x8", "vulkan_khr_cooperative_matrix",
                                   "amd_mfma_gfx90a", "amd_wmma_rdna3", "portable"}
    for s in mma.STRATEGIES.values():
        assert s.sources and s.combos
        assert s.layout_status in ("normative", "informational", "opaque", "portable")
    assert mma.METAL_SIMDGROUP_8x8.layout_status == "informational"
    assert {s.name for s in mma.STRATEGIES.values() if s.layout_status == "normative"} == {
        "cuda_mma_sync_m16n8k16", "amd_mfma_gfx90a", "amd_wmma_rdna3"}


def test_portable_runs_every_dsl_shape_and_dtype_pair():
    """docs/ir.md: shapes 8x8x8, 16x8x16, 16x16x16; a/b f16, bf16 or f32; acc f32 or the input dtype."""
    for shape in MMA_SHAPES:
        for in_dt in (D.f16, D.bf16, D.f32):
            for acc_dt in {D.f32, in_dt}:
                assert mma.PORTABLE.supports(shape, in_dt, acc_dt)
                for role in ROLES:
                    assert mma.PORTABLE.layout(role, shape, acc_dt if role == "acc" else in_dt, 32).replication == 1
