"""fence(): a device-scope memory fence, with the last-group pattern it exists for (every group writes its part and
counts itself in with an atomic; the group that counts last reads every part).  On the interpreter the result is
right and the opt-in global race check accepts the pattern with its fences and reports it without them; lavapipe
runs it; CUDA and HIP emit __threadfence() (NVRTC and hip-clang compile it), Vulkan memoryBarrierBuffer() on
coherent buffers (glslang and spirv-val), and Metal refuses it at compile time."""

import numpy as np
import pytest

from iron import In, Tensor, config, f32, i32, kernel, variants
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.toolchains import check_source
from iron.core.errors import UnsupportedOnTarget
from iron.lang import atomic_add, atomic_xchg, barrier, fence, group_id, num_groups, shared, thread_id
from iron.runtime.interp import GlobalMemoryRaceError

GROUP = 64


@kernel(variants(FENCED=[True, False]))
def total_in_last_group(x: In[f32], parts: Tensor[f32], count: Tensor[i32], out: Tensor[f32], n: int):
    """out[0] = sum(x): each group sums its stride of x into parts[g]; the group that counts in last adds the
    parts in order and sets count back to 0 for the next launch."""
    g = group_id(0)
    t = thread_id(0)
    sums = shared(f32, GROUP)
    last = shared(i32, 1)
    s = 0.0
    i = g * GROUP + t
    while i < n:
        s += x[i]
        i += num_groups(0) * GROUP
    sums[t] = s
    barrier()
    if t == 0:
        acc = 0.0
        for j in range(GROUP):
            acc += sums[j]
        parts[g] = acc
        if FENCED:
            fence()  # the part is visible before the count says so
        last[0] = atomic_add(count, 0, 1)
    barrier()
    if last[0] == num_groups(0) - 1 and t == 0:
        if FENCED:
            fence()  # no read of a part before the count was seen
        total = 0.0
        for j in range(num_groups(0)):
            total += parts[j]
        out[0] = total
        atomic_xchg(count, 0, 0)  # an atomic: the other groups' counts are atomics too


def _run(fenced: bool, backend: str, groups: int = 8) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(1000, dtype=np.float32) / 7
    parts, count, out = np.zeros(groups, np.float32), np.zeros(1, np.int32), np.zeros(1, np.float32)
    for _ in range(2):  # the count is back at 0 after a launch: a second one works too
        total_in_last_group.variant(FENCED=fenced).launch(x, parts, count, out, x.size, grid=(groups * GROUP,),
                                                          group=(GROUP,), backend=backend)
    want = np.float32(0)
    for g in range(groups):  # the kernel's order: each group's stride, then the parts in group order
        p = np.float32(0)
        for j in range(GROUP):
            for v in x[g * GROUP + j::groups * GROUP]:
                p = np.float32(p + v)
        want = np.float32(want + p)
    return out, np.array([want]), count


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_the_last_group_reads_every_part(backend):
    out, want, count = _run(True, backend)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert count.tolist() == [0]


@pytest.fixture
def races_on():
    config.set_option("interp_global_races", True)
    yield
    config.clear_overrides()


def test_the_global_race_check_takes_the_fences_and_reports_their_absence(races_on):
    out, want, _ = _run(True, "interp")
    np.testing.assert_allclose(out, want, rtol=1e-6)
    with pytest.raises(GlobalMemoryRaceError, match="global-memory race on 'parts'"):
        _run(False, "interp")


def _source(target: str) -> str:
    ir = run_pipeline(total_in_last_group.variant(FENCED=True).ir, PassContext(target=target))
    return emit_kernel(ir, target).source


@pytest.mark.parametrize("target,line,toolchain", [("cuda", "__threadfence();", "nvrtc"),
                                                   ("hip", "__threadfence();", "hip"),
                                                   ("spirv", "memoryBarrierBuffer();", "spirv")])
def test_each_target_emits_its_fence_and_its_compiler_takes_it(target, line, toolchain, require_toolchain):
    src = _source(target)
    assert src.count(line) == 2, src
    if target == "spirv":  # written buffers are coherent; read-only ones need not be
        assert "coherent buffer" in src and "readonly buffer" in src and "coherent readonly" not in src
    require_toolchain(toolchain)
    check_source(target, src)


def test_metal_refuses_a_fence_at_compile_time():
    with pytest.raises(UnsupportedOnTarget, match=r"fence\(\): MSL 3\.1 orders device memory only within a "
                                                  r"threadgroup .* on metal"):
        _source("metal")
