"""iron.std.gemm_fp8 (8-bit float operands on warp roles, tile copies and warpgroup multiplies; CUDA sm_90): its
registered rows on the interpreter, mutants of its folding, ring and epilogue caught there, its compile (NVRTC
for sm_90a: budgets kept, multiplies a pipeline, nothing spilled; refused on the other targets), and
``scaled_mm``, the host function, on the portable path against the same oracle."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import assert_mutant_caught, assert_rows_pass, compile_for, edited_module, run_entry, suite

import iron
from iron import bf16, f16, f8e4m3, f8e5m2
from iron.core.errors import UnsupportedOnTarget
from iron.harness.tolerance import compare, derive_tolerance
from iron.std import gemm_fp8 as G
from iron.std.suite import gemm_fp8 as GS

ENTRIES = suite("gemm_fp8")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_registered_rows_pass(entry, seed):
    assert_rows_pass(run_entry(entry, "interp", seed), seed)


def mutant(tmp_path: Path, *edits: tuple[str, str]):
    return edited_module(G, tmp_path, *edits).gemm_fp8


#: The end of the by-halves path's second multiply (its high half of B's columns).
_HIGH_HALF = "F8_BK,\n                                  frag_acc(f32, 16, half), k=F8_BK)"

MUTANTS = {
    # each step's sums replace the total instead of adding to it: only the last K step survives.
    "fold_replaces": [("acc = acc + part", "acc = part")],
    # the scale of B is left out of the epilogue.
    "one_scale": [("scale = scale_a[0] * scale_b[0]", "scale = scale_a[0]")],
    # the second consumer warpgroup multiplies the first one's rows of A.
    "one_a_block": [("s * a_stage + wg * 64 * F8_BK, b_s, s * b_stage, frag_acc",
                     "s * a_stage, b_s, s * b_stage, frag_acc")],
    # the partial last K step is dropped.
    "drops_k_tail": [("ktiles = (k + F8_BK - 1) // F8_BK", "ktiles = k // F8_BK")],
    # a folding consumer releases its slot before its multiply retired: the producer refills it underneath.
    "releases_early": [("k=F8_BK, pending=0)", "k=F8_BK, pending=1)")],
    # OVERLAP: the odd step's sum added where the even one's belongs (twice, while the even one is lost)
    "overlap_wrong_turn": [("acc = acc + even  # step 2 kp's sum", "acc = acc + odd  # step 2 kp's sum")],
    # BN 256 by halves: each step's low half replaces the low total instead of adding to it
    "halves_fold_replaces": [("acc = acc + low", "acc = low")],
    # BN 256 by halves: the high half multiplies the low half's columns of B
    "halves_one_b_half": [("s * b_stage + half * F8_BK,", "s * b_stage,")],
    # BN 256 by halves: the slot released before the high half's multiplies retired
    "halves_release_early": [(_HIGH_HALF, _HIGH_HALF[:-1] + ", pending=1)")],
    # OVERLAP: an odd step count's last step left out of the total
    "overlap_drops_last": [("                    acc = acc + last\n", "")],
    # OVERLAP: the pairs' first step left running while its sum is added
    "overlap_reads_running": [("pending=1)\n                    release_behind(empty, 2 * kp",
                               "pending=2)\n                    release_behind(empty, 2 * kp")],
}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_caught(name, tmp_path, seed):
    shapes = [GS._shape(40, 24, 144), GS._shape(129, 264, 384), GS._shape(40, 24, 640)]
    assert_mutant_caught("std/gemm_fp8/ws", mutant(tmp_path, *MUTANTS[name]), seed, shapes=shapes)


def test_cluster4_release_count_mutant_caught(tmp_path, seed):
    """Release barriers counted for clusters of two: in one of four a slot's phase completes on half its releases."""
    edit = ("async_barriers(STAGES, RELEASES * CLUSTER)", "async_barriers(STAGES, RELEASES * min(CLUSTER, 2))")
    assert_mutant_caught("std/gemm_fp8/cluster4", mutant(tmp_path, edit), seed)


def test_unmutated_copy_passes(tmp_path, seed):
    from std_testing import mutant_rows

    rows = mutant_rows("std/gemm_fp8/ws", mutant(tmp_path), seed, shapes=[GS._shape(40, 24, 144)])
    assert_rows_pass(rows, seed)


@pytest.mark.parametrize("binding", GS.BINDINGS[:1] + GS.BINDINGS[2:3] + GS.BINDINGS[4:] + GS.CLUSTER4[:1],
                         ids=["fold-128", "fast-256", "overlap-128", "fold-256", "fold-192", "fold-256-cluster",
                              "fast-256-cluster", "fast-128-cluster4"])
def test_ptxas_keeps_the_budgets_and_the_pipeline(binding, require_toolchain):
    """For sm_90a: 168 registers at entry, the roles' budgets kept (no C7507), the multiplies a pipeline (no
    C7515), the accumulators registers (no stack, no spills), the multiplies the 8-bit form (k32)."""
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import nvrtc

    require_toolchain("nvrtc")
    source = emit_kernel(G.gemm_fp8.variant(**binding).compiled("cuda"), "cuda").source
    kind = f"e4m3.{'e4m3' if binding['U'] == f8e4m3 else 'e5m2'}" if binding["T"] == f8e4m3 else "e5m2.e4m3"
    assert f"k32.f32.{kind}" in source
    report = nvrtc.build(source, arch="sm_90").report
    assert report["arch"] == "sm_90a"
    (kernel,) = report["kernels"].values()
    assert kernel["registers"] == 168 and kernel["spill_stores"] == 0 and kernel["stack_bytes"] == 0
    assert not report["setmaxnreg_ignored"] and report["wgmma_serialized"] == {}


@pytest.mark.parametrize("target", ["hip", "spirv", "metal"])
def test_refused_where_no_warpgroup_multiplies_run(target):
    with pytest.raises(UnsupportedOnTarget):
        compile_for(target, G.gemm_fp8.variant(**GS.BINDINGS[0]))


def test_shared_bytes_model_matches_the_kernel():
    from iron.codegen.capabilities import shared_bytes

    for binding in GS.BINDINGS:
        declared = shared_bytes(G.gemm_fp8.variant(**binding).compiled("cuda"))
        assert abs(declared - G.fp8_shared_bytes(binding)) <= 1024, binding


def _operands(rng, m, n, k, ta, tb):
    a = (rng.standard_normal((m, k)) * 4).astype(iron.core.dtypes.numpy_dtype(ta))
    b = (rng.standard_normal((n, k)) * 4).astype(iron.core.dtypes.numpy_dtype(tb))
    return a, b, np.array([0.375], np.float32), np.array([1.5], np.float32)


@pytest.mark.parametrize("ta,tb,out", [(f8e4m3, f8e4m3, bf16), (f8e5m2, f8e4m3, f16)], ids=["e4m3-bf16", "e5m2-f16"])
def test_scaled_mm_on_the_portable_path(ta, tb, out, seed):
    m, n, k = 33, 40, 70
    a, b, sa, sb = _operands(np.random.default_rng(seed), m, n, k, ta, tb)
    got = G.scaled_mm(a, b, sa, sb, out_dtype=out, backend="interp")
    assert got.shape == (m, n) and got.dtype == iron.core.dtypes.numpy_dtype(out)
    want = GS.fp8_oracle(a.astype(np.float64), b.astype(np.float64), sa, sb, None, m, n, k)
    verdict = compare(got, want, derive_tolerance(out, iron.Depth(steps=1, f32_steps=k + 2)))
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("call,message", [
    (lambda a, b, s: G.scaled_mm(a.astype(np.float32), b, s, s), "must be f8e4m3 or f8e5m2"),
    (lambda a, b, s: G.scaled_mm(a, b[:, :8], s, s), "must share K"),
    (lambda a, b, s: G.scaled_mm(a, b, np.ones(2, np.float32), s), "scale_a must be one f32 element"),
    (lambda a, b, s: G.scaled_mm(a, b, s, s, out_dtype=np.float32), "out_dtype must be bf16 or f16"),
])
def test_bad_input_is_a_launch_error(call, message):
    a = np.ones((4, 16), ml_dtypes.float8_e4m3fn)
    with pytest.raises(iron.LaunchError, match=message):
        call(a, a, np.ones(1, np.float32))


def test_the_hosts_configurations():
    assert G.fp8_config(4096, 4096, False) == G.FP8_DEFAULT and G.fp8_groups(G.FP8_DEFAULT) == G.WS_SMS
    # few 128 x 256 tiles: 128 columns fill one wave at 512 x 4096, 192 fill the last wave best at 512 x 11008
    assert G.fp8_config(512, 4096, False) == G.FP8_NARROW[0] and G.fp8_groups(G.FP8_NARROW[0]) is None
    assert G.fp8_config(512, 11008, False) == G.FP8_NARROW[1]
    assert G.fp8_config(4096, 4096, True) == G.FP8_FAST  # 512 tiles of 128 x 256
    assert G.fp8_config(512, 4096, True) == G.FP8_FAST_NARROW
    # where folding takes 192 columns, so does fast accumulation (faster there on an H100 and the H200)
    assert G.fp8_config(512, 11008, True) == G.FP8_NARROW[1]
    assert G.FP8_FAST_NARROW["CLUSTER"] == 2 and G.fp8_shared_bytes(G.FP8_FAST_NARROW) <= G.WG_SHARED_LIMIT
