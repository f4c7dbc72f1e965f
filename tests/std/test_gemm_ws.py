"""iron.std.gemm_ws (warp roles, tile copies and warpgroup multiplies, CUDA sm_90): mutants of its ring, roles
and epilogue caught by the registered oracle on the interpreter, its compile (NVRTC for sm_90a: the budgets
kept, the multiplies a pipeline, nothing spilled; refused on the other targets), the shared-memory model, and
where the host may run it.  Its registered rows run in test_gemm.py."""

from pathlib import Path

import pytest
from std_testing import assert_mutant_caught, assert_rows_pass, compile_for, edited_module, mutant_rows

from iron import bf16, f16
from iron.codegen.targets import profile
from iron.core.errors import UnsupportedOnTarget
from iron.std import gemm_ws as W
from iron.std.suite import gemm as GS

BINDINGS = [{**GS._flags(f16, False, True, "relu"), "BN": 256, "STAGES": 3},
            {**GS._flags(bf16, True, False, "none"), "BN": 128, "STAGES": 4},
            {**GS._flags(bf16, False, False, "none"), "BN": 256, "STAGES": 4},
            {**GS._flags(bf16, True, True, "none"), "BN": 256, "STAGES": 4},
            {**GS._flags(bf16, True, False, "none"), "BN": 168, "STAGES": 5},
            {**GS._flags(bf16, True, False, "none"), "BN": 128, "STAGES": 4, "CLUSTER": 2},
            {**GS._flags(bf16, False, False, "none"), "BN": 256, "STAGES": 4, "CLUSTER": 2},
            {**GS._flags(bf16, True, False, "none"), "BN": 168, "STAGES": 5, "CLUSTER": 2},
            {**GS._flags(bf16, True, False, "none"), "BN": 128, "STAGES": 6, "CLUSTER": 4}]
# Whole 16-byte rows: M and N past a tile with a partial last K step; five K steps through a shorter ring.
SHAPES = [GS._shape(40, 24, 136), GS._shape(70, 136, 320)]


def mutant(tmp_path: Path, *edits: tuple[str, str]):
    return edited_module(W, tmp_path, *edits).gemm_ws


MUTANTS = {
    # the producer's first lap waits for a release nobody made: the roles hang.
    "first_lap_waits": [("((step // stages) & 1) ^ 1)", "(step // stages) & 1)")],
    # a consumer releases the slot its multiply still reads: the producer refills it under the multiply.
    "releases_running_slot": [("    if kt > 0 and lane_id() == 0:\n        release(empty, (step - 1)",
                               "    if kt > 0 and lane_id() == 0:\n        release(empty, (step)")],
    # the consumers keep a tile's last slot: a persistent group's producer waits for it forever.
    "keeps_last_slot": [("if ktiles > 0 and lane_id() == 0:", "if ktiles < 0 and lane_id() == 0:")],
    # the partial last K step is dropped.
    "drops_k_tail": [("ktiles = (k + WS_BK - 1) // WS_BK", "ktiles = k // WS_BK")],
    # subgroups 2 and 3 of a consumer warpgroup store their rows over those of 0 and 1.
    "wrong_rows": [("wg * 64 + (simd_group_id() % 4) * 16", "wg * 64 + (simd_group_id() % 2) * 16")],
    # the tiles go out without their bias.
    "missing_bias": [("acc, BIAS, ACT, turn == w, BN, True, slot)", "acc, False, ACT, turn == w, BN, True, slot)")],
    # sums staged as T where only the bias is absent: the activation is skipped on the way out.
    "narrow_with_activation": [('SB = 2 if not BIAS and ACT == "none" else 4', "SB = 2 if not BIAS else 4")],
    # two subgroups staging at once share their staging rows (WS_DEFAULT's four-stage ring stages two at a time).
    "shared_slot": [("slot = simd_group_id() % PER", "slot = simd_group_id() % (PER // 2)")],
    # the second consumer warpgroup multiplies the first one's rows of A.
    "one_a_block": [("s * a_stage + wg * BLOCK", "s * a_stage")],
}


# Clusters of two groups, each copying half of the B tile into both (129 rows: two tile rows, one pair), and of
# four (std/gemm/ws_cluster4).
CLUSTER_MUTANTS = {
    # releases reach only the own group (twice): a group refills its peer's slot while the peer may still read it.
    "releases_own_group": [("barrier_arrive(empty, slot, rank=q)", "barrier_arrive(empty, slot)")],
    # each group copies its half of B into itself alone: the other half never reaches it, and its wait hangs.
    "no_multicast": [("multicast=CLUSTER > 1", "multicast=False"), ("multicast=cluster > 1", "multicast=False")],
    # both groups copy the first half of B's rows: the second half of the tile is never loaded.
    "same_half": [("(row0 + q * piece, col)", "(row0, col)")],
    # both groups of a pair compute the first tile row of the pair (the producer's copies and the stores).
    "same_tile_row": [("return tc * cluster + rank, tn", "return tc * cluster, tn")],
}


@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("name", list(CLUSTER_MUTANTS))
def test_cluster_mutant_caught(name, size, tmp_path, seed):
    kern = edited_module(W, tmp_path, *CLUSTER_MUTANTS[name]).gemm_ws
    # persistent: one cluster loops over the tiles, so the ring's slots come round again
    if size == 2:
        assert_mutant_caught("std/gemm/ws_persistent", kern, seed, shapes=[GS._shape(129, 264, 192)])
    else:  # four groups over four tile rows, each copying a quarter of B's tile
        assert_mutant_caught("std/gemm/ws_cluster4", kern, seed)


# Each slot's release barrier counted for clusters of two: in a cluster of four its phase completes on half the
# releases, so a producer could refill a slot two groups still read.
COUNTED_FOR_TWO = ("async_barriers(STAGES, RELEASES * CLUSTER)", "async_barriers(STAGES, RELEASES * min(CLUSTER, 2))")


def test_cluster4_release_count_mutant_caught(tmp_path, seed):
    assert_mutant_caught("std/gemm/ws_cluster4", mutant(tmp_path, COUNTED_FOR_TWO), seed)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_caught(name, tmp_path, seed):
    if name == "keeps_last_slot":  # a group looping over tiles: 129 x 264 in 3 groups of the 4 tiles
        assert_mutant_caught("std/gemm/ws_persistent", mutant(tmp_path, *MUTANTS[name]), seed,
                             shapes=[GS._shape(129, 264, 192)])
    elif name == "narrow_with_activation":  # the rows with an activation and no bias
        assert_mutant_caught("std/gemm/ws_variants", mutant(tmp_path, *MUTANTS[name]), seed, shapes=SHAPES[:1])
    else:
        assert_mutant_caught("std/gemm/ws", mutant(tmp_path, *MUTANTS[name]), seed, shapes=SHAPES)


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: an unedited copy passes, so a caught mutant is caught by its edit."""
    assert_rows_pass(mutant_rows("std/gemm/ws", mutant(tmp_path), seed, shapes=SHAPES), seed)


@pytest.mark.parametrize("binding", BINDINGS, ids=["nn-256", "bt-128", "nn-256-s4", "bt-256-s4-bias", "bt-168-s5",
                                               "bt-128-cluster", "nn-256-cluster", "bt-168-cluster",
                                               "bt-128-cluster4"])
def test_ptxas_keeps_the_budgets_and_the_pipeline(binding, require_toolchain):
    """For sm_90a: every thread starts at 168 registers (the launch bounds), ptxas keeps the roles' budgets
    (no C7507 note: setmaxnreg opens the role branches), the multiplies stay a pipeline (no C7515 note) and
    the 128 accumulators of m64n256 stay registers (no stack, no spills)."""
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import nvrtc

    require_toolchain("nvrtc")
    report = nvrtc.build(emit_kernel(W.gemm_ws.variant(**binding).compiled("cuda"), "cuda").source,
                         arch="sm_90").report
    assert report["arch"] == "sm_90a"
    (kernel,) = report["kernels"].values()
    assert kernel["registers"] == 168 and not report["setmaxnreg_ignored"]
    assert report["wgmma_serialized"] == {}
    assert kernel["stack_bytes"] == kernel["spill_stores"] == kernel["spill_loads"] == 0


@pytest.mark.parametrize("target", ["hip", "spirv", "metal"])
def test_refused_on_targets_without_wgmma(target):
    with pytest.raises(UnsupportedOnTarget, match="mma_wg"):
        compile_for(target, W.gemm_ws.variant(**BINDINGS[0]))


def test_shared_bytes_model_matches_the_kernel():
    from iron.codegen.capabilities import shared_bytes
    from iron.codegen.emit import emit_kernel

    for binding in BINDINGS:
        assert shared_bytes(W.gemm_ws.variant(**binding).ir) == W.ws_shared_bytes(binding)
    emitted = emit_kernel(W.gemm_ws.variant(**BINDINGS[0]).compiled("cuda"), "cuda")
    assert emitted.dynamic_shared_bytes >= W.ws_shared_bytes(BINDINGS[0])
    assert emitted.dynamic_shared_bytes <= profile("cuda", "sm_90").shared_limit
    assert all(W.ws_fits(v) for v in W.gemm_ws.variants)
    # a four-stage ring of 128 x 256 tiles leaves room for four subgroups' rows of T or two of f32, three stages
    # for four of f32
    assert W.ws_staging_subgroups(BINDINGS[2]) == 4 and W.ws_staging_subgroups(BINDINGS[3]) == 2
    assert W.ws_staging_subgroups(BINDINGS[0]) == 4 and W.ws_staged_bytes(BINDINGS[0]) == 4
    assert W.ws_staged_bytes(BINDINGS[2]) == 2 and W.ws_staged_bytes(W.WS_DEFAULT) == 4  # no flags: the larger


def test_roles_run_where_tile_copies_budgets_and_wgmma_exist():
    assert W.runs_roles(profile("cuda", "sm_90"))
    for target, arch in (("cuda", "sm_80"), ("hip", "gfx90a"), ("spirv", "vulkan-nvidia"), ("metal", "apple-m2")):
        assert not W.runs_roles(profile(target, arch))
    assert not W.runs_roles(None)
    assert W.ws_shapes_fit(24, 136, False) and W.ws_shapes_fit(17, 136, True)
    assert not W.ws_shapes_fit(24, 45, True) and not W.ws_shapes_fit(17, 136, False)


def test_the_host_picks_warp_roles_for_readable_operands_and_a_tile_by_shape():
    import types

    import numpy as np

    hopper = profile("cuda", "sm_90")
    traits = types.SimpleNamespace(profile=hopper, shared_limit=hopper.shared_limit)
    a, b = np.zeros(64, np.float16), np.zeros(64, np.float16)
    assert W.ws_chosen(traits, (4096, 4096, 4096), False, (a, b))  # 512 tiles
    assert W.ws_chosen(traits, (8192, 11008, 4096), True, (a, b))
    # Too few 128 x 256 tiles: clusters of two on the width that fills the last wave best, B given (n, k)
    assert W.ws_chosen(traits, (512, 4096, 4096), True, (a, b)) == {"BN": 128, "STAGES": 6, "CLUSTER": 2}
    assert W.ws_chosen(traits, (512, 11008, 4096), True, (a, b)) == {"BN": 168, "STAGES": 5, "CLUSTER": 2}
    assert W.ws_wave_fill(512, 11008, 168) == 1.0 and W.ws_wave_fill(512, 11008, 128) < 0.9
    assert W.ws_config(512, 4096) == {"BN": 128, "STAGES": 4}  # B given (k, n): 128 x 128 tiles, no cluster
    assert W.ws_config(4096, 4096) == W.WS_DEFAULT  # 512
    assert not W.ws_chosen(traits, (4096, 4096, 4100), True, (a, b))  # rows of K not whole 16-byte chunks
    assert not W.ws_chosen(traits, (4096, 4096, 4096), False, (a[1:], b))  # A off a 16-byte boundary
    older = profile("cuda", "sm_80")
    assert not W.ws_chosen(types.SimpleNamespace(profile=older, shared_limit=older.shared_limit),
                           (4096, 4096, 4096), False, (a, b))


def test_the_sass_main_loop_is_one_hgmma_stream_without_block_barriers(require_toolchain):
    """What the H200 runs (nvdisasm on NVRTC's CUBIN): the budgets as USETMAXREG, the copies as UTMALDG, and a
    consumer main loop of one mbarrier wait, four HGMMA 64x256x16 on one accumulator, no BAR.SYNC and no
    proxy fence (the structure docs/matrix-units.md shows)."""
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import nvrtc, sass

    require_toolchain("nvrtc")
    if sass.nvdisasm() is None:
        pytest.skip(f"nvdisasm is not installed: {sass.INSTALL}")
    launch = W.gemm_ws.variant(**GS._flags(bf16, True, False, "none"), **W.WS_DEFAULT)
    listing = sass.disassemble(nvrtc.build(emit_kernel(launch.compiled("cuda"), "cuda").source, arch="sm_90").binary)
    ops = [i.opcode for i in sass.instructions(listing)]
    assert "USETMAXREG.DEALLOC.CTAPOOL" in ops and "USETMAXREG.TRY_ALLOC.CTAPOOL" in ops
    assert ops.count("UTMALDG.2D") == 2  # A's panel and B's, in the producer's loop
    main = min((loop for loop in sass.loops(listing) if any(i.opcode.startswith("HGMMA") for i in loop)), key=len)
    multiplies = [i for i in main if i.opcode.startswith("HGMMA")]
    assert [i.opcode for i in multiplies] == ["HGMMA.64x256x16.F32.BF16"] * 4
    assert len({i.operands.split(",")[0] for i in multiplies}) == 1, "one accumulator stream"
    assert [i.opcode for i in main].count("SYNCS.PHASECHK.TRANS64.TRYWAIT") == 1
    assert not [i for i in main if i.opcode.startswith("BAR.")], "a block barrier in the main loop"
    # TMA alone writes the tiles: no proxy fence (MEMBAR + FENCE.VIEW.ASYNC) after the wait
    assert not [i for i in main if i.opcode.startswith(("MEMBAR", "FENCE"))], [i.opcode for i in main]
