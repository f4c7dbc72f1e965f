"""The wait for the previous grid (the ``pdl`` option, docs/cuda.md "Programmatic dependent launch"): with the option
on every CUDA kernel starts with griddepcontrol.wait then launch_dependents (for sm_90+ only), says so
(``waits_upstream``, which the runtime needs before it chains a launch) and compiles for sm_90a and sm_80; off, and
on every other target, the source has neither.  The compile driver keys the source on the option."""

from __future__ import annotations

import pytest

from iron import In, Tensor, config, f32, kernel
from iron.codegen.compiler import CompileOptions, compile as compile_kernel
from iron.codegen.emit import emit_kernel
from iron.codegen.targets import profile
from iron.lang import program_id

WAIT = 'asm volatile("griddepcontrol.wait;" ::: "memory");'
LAUNCH = 'asm volatile("griddepcontrol.launch_dependents;" ::: "memory");'


@kernel
def double(x: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = 2.0 * x[i]


@pytest.fixture
def pdl():
    with config.scoped("pdl", True):
        yield


@pytest.fixture
def no_pdl():
    with config.scoped("pdl", False):
        yield


def test_with_the_option_cuda_kernels_wait_first(pdl):
    em = emit_kernel(double.variant().compiled("cuda"), "cuda")
    assert em.waits_upstream
    body = em.source.split(") {", 1)[1].strip().splitlines()
    assert [ln.strip() for ln in body[:4]] == ["#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900", WAIT, LAUNCH,
                                               "#endif"], "the wait comes before any statement of the kernel"


@pytest.mark.parametrize("target", ["hip", "metal", "spirv"])
def test_other_targets_never_wait(pdl, target):
    em = emit_kernel(double.variant().compiled(target), target)
    assert not em.waits_upstream and "griddepcontrol" not in em.source


def test_without_the_option_nothing_is_emitted(no_pdl):
    em = emit_kernel(double.variant().compiled("cuda"), "cuda")
    assert not em.waits_upstream and "griddepcontrol" not in em.source


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_wait_compiles(pdl, arch, require_toolchain):
    require_toolchain("nvrtc")
    from iron.codegen.toolchains import nvrtc

    em = emit_kernel(double.variant().compiled("cuda"), "cuda", profile("cuda", arch.rstrip("a")))
    art = nvrtc.compile_cuda(em.source, arch=arch)
    assert art.report["kernels"], "ptxas reported no kernel"


def test_the_source_stage_follows_the_option():
    ir = double.variant().compiled("cuda")
    opts = CompileOptions(optimised=True, stop="source")
    with config.scoped("pdl", False):
        plain = compile_kernel(ir, "cuda", opts)
    with config.scoped("pdl", True):
        waiting = compile_kernel(ir, "cuda", opts)
    assert not plain.waits_upstream and waiting.waits_upstream and WAIT in waiting.source
