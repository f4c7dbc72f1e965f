"""The corpus kernels whose code depends on the architecture, compiled for the other ones we claim.

Subgroup and fragment kernels change with the lane width and the matrix unit: wave32 RDNA2
(gfx1030) instead of wave64 CDNA2 (gfx90a), and sm_80 (mma.sync, no Hopper features) instead of
sm_90.  test_compile_corpus.py covers every kernel on the default architectures.
"""

import pytest
from corpus import binding_label, case_named
from emit_testing import corpus_points, has_fragments, optimized

from iron.codegen.emit import emit_kernel
from iron.codegen.targets import profile


def _arch_dependent():
    points = []
    for name, binding in corpus_points():
        kernel = optimized(name, binding, "cuda")
        if case_named(name).subgroup or has_fragments(kernel):
            points.append((name, binding))
    return points


POINTS = _arch_dependent()


def test_the_selection_is_not_empty():
    assert len(POINTS) >= 10


@pytest.mark.parametrize("case_name,binding", POINTS, ids=[f"{n}[{binding_label(b)}]" for n, b in POINTS])
def test_compiles_for_gfx1030_wave32(case_name, binding, require_toolchain):
    require_toolchain("hip")
    from iron.codegen.toolchains import hip

    em = emit_kernel(optimized(case_name, binding, "hip"), "hip", profile("hip", "gfx1030"))
    art = hip.compile_hip(em.source, arch="gfx1030")
    assert all(k["wavefront_size"] == 32 for k in art.report["kernels"].values())


@pytest.mark.parametrize("case_name,binding", POINTS, ids=[f"{n}[{binding_label(b)}]" for n, b in POINTS])
def test_compiles_for_sm_80(case_name, binding, require_toolchain):
    require_toolchain("nvrtc")
    from iron.codegen.toolchains import nvrtc

    em = emit_kernel(optimized(case_name, binding, "cuda"), "cuda", profile("cuda", "sm_80"))
    art = nvrtc.compile_cuda(em.source, arch="sm_80")
    assert art.report["kernels"], "ptxas reported no kernel"
