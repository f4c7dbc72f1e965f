"""Every corpus kernel, emitted for every target, compiled by that target's real toolchain.

CUDA through NVRTC (sm_90), HIP through hipcc/hipRTC (gfx90a), GLSL through
glslc then spirv-val, MSL through clang++-19 against the Metal shim; kernels
with matrix fragments included (emit/fragments.py).  A missing toolchain skips
its tests (fails in CI).
"""

import pytest
from corpus import binding_label
from emit_testing import TARGETS, corpus_points, optimized

from iron.codegen.emit import emit_kernel
from iron.codegen.backends import get_target
from iron.codegen.toolchains import check_source

POINTS = corpus_points()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case_name,binding", POINTS, ids=[f"{n}[{binding_label(b)}]" for n, b in POINTS])
def test_corpus_kernel_compiles(case_name, binding, target, require_toolchain):
    kernel = optimized(case_name, binding, target)
    require_toolchain(get_target(target).toolchain)
    check_source(target, emit_kernel(kernel, target).source)
