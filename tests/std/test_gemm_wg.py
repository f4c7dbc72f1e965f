"""iron.std.gemm_wg (warpgroup multiplies, CUDA sm_90): mutants of its copies, pipeline and epilogue caught by
the registered oracle on the interpreter, its compiles (NVRTC for sm_90a; refused on the other targets),
the shared-memory model, and the host's choice of it.  Its registered rows run in test_gemm.py."""

from pathlib import Path

import pytest
from std_testing import (assert_mutant_caught, assert_rows_pass, assert_wgmma_pipeline, compile_for, edited_module,
                         mutant_rows)

from iron import bf16, f16
from iron.codegen.targets import profile
from iron.core.errors import UnsupportedOnTarget
from iron.std import gemm_wg as W
from iron.std.suite import gemm as GS

BINDINGS = [{**GS._flags(f16, False, True, "relu"), **W.WG_DEFAULT},
            {**GS._flags(bf16, True, False, "none"), "BN": 128, "STAGES": 3, "PENDING": 0, "KP": 2}]
# Ragged M, N, K (element-by-element copies); whole chunks over five K steps (the ring wraps).
TAIL = [GS._shape(33, 17, 45), GS._shape(70, 136, 320)]


def mutant(tmp_path: Path, *edits: tuple[str, str]):
    return edited_module(W, tmp_path, *edits).gemm_wg


MUTANTS = {
    # A's chunks land unswizzled: mma_wg reads them permuted.
    "a_unswizzled": [("stage_chunk(a_s, a_at + sw128(q // 8, (q % 8) * 8)",
                      "stage_chunk(a_s, a_at + (q // 8) * 64 + (q % 8) * 8")],
    # the last, partial K step is dropped.
    "drops_k_tail": [("ktiles = (k + step - 1) // step", "ktiles = k // step")],
    # the wait leaves the step about to be multiplied in flight (the interpreter lands copies at their wait).
    "early_read": [("copy_async_wait(depth - 1)", "copy_async_wait(depth)")],
    # the accumulators are read while their last multiplies still run.
    "no_final_wait": [("    mma_wg_wait(0)\n", "")],
    # subgroups 2 and 3 of a warpgroup store their rows over those of 0 and 1.
    "wrong_rows": [("row0 = bm + wg * 64 + (sg % 4) * 16", "row0 = bm + wg * 64 + (sg % 2) * 16")],
    # the first 128 columns of each tile go out without their bias.
    "missing_bias": [("store_acc(c, bias, stage, m, n, row0, bn, acc0, BIAS, ACT, wg == w)",
                      "store_acc(c, bias, stage, m, n, row0, bn, acc0, False, ACT, wg == w)")],
}
# Not among them: refilling the buffer a running multiply still reads (depth = STAGES - 1 with PENDING 1).
# The interpreter lands a copy at the wait that covers it, after that multiply has retired, so the race
# does not show there; the ring arithmetic is argued in the kernel and the rows pass on the H200.


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_caught(name, tmp_path, seed):
    """On the ragged shape (every mutant but early_read shows there), early_read on the whole-chunk one."""
    kern = mutant(tmp_path, *MUTANTS[name])
    assert_mutant_caught("std/gemm/wg", kern, seed, shapes=TAIL[1:] if name == "early_read" else TAIL[:1])


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: an unedited copy passes, so a caught mutant is caught by its edit."""
    assert_rows_pass(mutant_rows("std/gemm/wg", mutant(tmp_path), seed, shapes=TAIL), seed)


@pytest.mark.parametrize("binding", BINDINGS, ids=["nn-256-pending", "bt-128-two-panels"])
def test_compiles_for_sm90a(binding, require_toolchain):
    require_toolchain("nvrtc")
    compile_for("cuda", W.gemm_wg.variant(**binding))


@pytest.mark.parametrize("target", ["hip", "spirv", "metal"])
def test_refused_on_targets_without_wgmma(target):
    with pytest.raises(UnsupportedOnTarget, match="mma_wg"):
        compile_for(target, W.gemm_wg.variant(**BINDINGS[0]))


def test_shared_bytes_model_matches_the_kernel():
    from iron.codegen.capabilities import shared_bytes
    from iron.codegen.emit import emit_kernel

    for binding in BINDINGS:
        assert shared_bytes(W.gemm_wg.variant(**binding).ir) == W.wg_shared_bytes(binding)
    emitted = emit_kernel(W.gemm_wg.variant(**BINDINGS[0]).compiled("cuda"), "cuda")
    assert emitted.dynamic_shared_bytes == W.wg_shared_bytes(W.WG_DEFAULT) <= profile("cuda", "sm_90").shared_limit


def test_the_host_runs_warpgroups_on_hopper_alone():
    assert W.runs_warpgroups(profile("cuda", "sm_90")) and W.runs_warpgroups(profile("cuda", "sm_90a"))
    for target, arch in (("cuda", "sm_80"), ("cuda", "sm_89"), ("hip", "gfx90a"), ("spirv", "vulkan-nvidia"),
                         ("metal", "apple-m2")):
        assert not W.runs_warpgroups(profile(target, arch))
    assert not W.runs_warpgroups(None)  # the interpreter: gemm_mma, whose fragments it holds at any width


def test_only_rings_that_fit_sm90_are_variants():
    """iron build builds every variant: none may need more shared memory than a device running mma_wg has,
    and the rule removes only those (the default configuration stays)."""
    limit = profile("cuda", "sm_90").shared_limit
    assert W.WG_SHARED_LIMIT == limit
    built = W.gemm_wg.variants
    assert built and all(W.wg_shared_bytes(v) <= limit for v in built)
    assert W.wg_shared_bytes({"STAGES": 4, "KP": 2, "BN": 256}) > limit
    assert W.wg_ring_fits(W.WG_DEFAULT) and not W.wg_ring_fits({"STAGES": 4, "KP": 2, "BN": 256})


@pytest.mark.parametrize("flags", [GS._flags(f16, False, True, "relu"), GS._flags(bf16, True, False, "none")],
                         ids=["nn-bias-relu", "bt"])
def test_ptxas_keeps_the_wgmma_pipeline(flags, require_toolchain):
    """What the host ships (WG_DEFAULT) must stay a wgmma pipeline (no C7515 note).  (K steps of two panels,
    KP = 2, do serialise: "compiler-inserted WG.DP in divergent path"; they are tuning candidates only.)"""
    require_toolchain("nvrtc")
    assert_wgmma_pipeline(W.gemm_wg.variant(**flags, **W.WG_DEFAULT))
