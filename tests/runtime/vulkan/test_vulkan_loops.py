"""lavapipe ends every loop of a SIMD vector of invocations after 65,535 passes in all: measured, launches
bound to meet it refused before they run, and the rest reported after the run by the loop guard the GLSL
carries on such a device, instead of a wrong count (src/iron/runtime/vulkan/loop_limit.py,
src/iron/codegen/emit/glsl_loops.py)."""

from __future__ import annotations

import difflib

import numpy as np
import pytest
from vulkan_shaders import HEADER, abi_for, compile_glsl, t

from iron import In, Tensor, f32, i32, kernel
from iron.codegen.abi import pack_params
from iron.codegen.emit import emit_kernel
from iron.codegen.emit.glsl_loops import LOOP_CHECK
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.toolchains import spirv as spirv_toolchain
from iron.core import dtypes as D
from iron.core.errors import LaunchError
from iron.core.hashing import kernel_hash
from iron.lang import atomic_max, program_id
from iron.codegen.cache import ArtifactCache, ArtifactStore
from iron.codegen.compiler import CompileOptions, compile
from iron.runtime.vulkan.loop_limit import loop_passes, loop_passes_at_most


@kernel
def count_const(out: Tensor[i32]):
    s = 0
    for j in range(100000):
        s += 1
    out[program_id(0)] = s


@kernel
def count_to(n: i32, out: Tensor[i32]):
    s = 0
    for j in range(n):
        s += 1
    out[program_id(0)] = s


@kernel
def count_nest(n: i32, m: i32, out: Tensor[i32]):
    s = 0
    for a in range(n):
        for j in range(m):
            s += 1
    out[program_id(0)] = s


def _ir(k):
    return run_pipeline(k.ir(), PassContext.for_target("spirv"))


def _lavapipe(device) -> None:
    if "llvmpipe" not in device.info["name"]:
        pytest.skip("the loop limit is lavapipe's")


def test_the_limit_is_measured(device):
    _lavapipe(device)
    assert device.info["loop_limit"] == 65535


def test_100000_passes_are_refused_not_cut_short(device):
    _lavapipe(device)
    out = np.zeros(1, np.int32)
    with pytest.raises(LaunchError, match="65535 passes"):
        device.launch(_ir(count_const), [out], (1,), (1,))
    with pytest.raises(LaunchError, match="at least 100001 passes"):
        device.launch(_ir(count_to), [100000, out], (1,), (1,))
    with pytest.raises(LaunchError, match="count_nest"):
        device.launch(_ir(count_nest), [1000, 1000, out], (1,), (1,))
    assert out[0] == 0  # nothing ran


def test_loops_within_the_limit_run_in_full(device):
    out = np.zeros(1, np.int32)
    device.launch(_ir(count_to), [60000, out], (1,), (1,))
    assert out[0] == 60000
    device.launch(_ir(count_nest), [200, 300, out], (1,), (1,))
    assert out[0] == 60000


def test_the_limit_is_per_invocation_not_per_loop(device):
    """Why loops are not split into nests: two loops of 50,000 in a row are cut too (lavapipe)."""
    _lavapipe(device)
    source = HEADER + """
layout(std430, set = 0, binding = 0) buffer Out { int count[]; };
layout(push_constant) uniform Params { int n; } p;
void main() {
  int s = 0;
  for (int j = 0; j < p.n; ++j) { s += 1; }
  for (int j = 0; j < p.n; ++j) { s += 1; }
  count[0] = s;
}
"""
    abi = abi_for("two_loops", [("count", t(D.i32)), ("n", D.i32)], access={"count": "write"})
    out = np.zeros(1, np.int32)
    device.run_spirv(compile_glsl(source), abi, [out], pack_params(abi, {"n": 50000}, (1,), {}), (1,), (1,))
    assert out[0] < 100000


def test_loop_passes_bound():
    assert loop_passes(_ir(count_const), {}) == 100001
    assert loop_passes(_ir(count_to), {"n": 10}) == 11
    assert loop_passes(_ir(count_nest), {"n": 3, "m": 4}) == 3 * (1 + 5) + 1
    assert loop_passes(_ir(count_to), {}) == 0  # unknown: nothing proven


# ------------------------------------------------------------ loops the launch cannot bound: the loop guard

@kernel
def count_loaded(a: In[i32], out: Tensor[i32]):
    n = a[0]
    s = 0
    for j in range(n):
        s += 1
    out[program_id(0)] = s


@kernel
def count_while(a: In[i32], out: Tensor[i32]):
    n = a[0]
    s = 0
    while s < n:
        s += 1
    out[program_id(0)] = s


@kernel
def count_by_thread(step: i32, out: Tensor[i32]):
    i = program_id(0)
    s = 0
    for j in range(i * step):
        s += 1
    out[i] = s


@kernel
def count_in_turns(n: i32, out: Tensor[i32]):
    """Thread 0 counts n in one loop, then thread 1 n in another: n passes each, 2n for a vector holding both."""
    i = program_id(0)
    s = 0
    for j in range(n * (1 - i)):
        s += 1
    for j in range(n * i):
        s += 1
    out[i] = s


@kernel
def spin(a: In[i32], out: Tensor[i32]):
    s = 0
    while a[0] > 0:
        s += 1
    out[0] = s


def _cut_or_right(device, k, args, grid, group, want) -> None:
    """Where the device has a loop limit the launch raises and leaves ``out`` (the last argument) as it was;
    elsewhere it returns ``want``."""
    out = args[-1]
    out[:] = -7
    if device.info["loop_limit"] is None:
        device.launch(_ir(k), args, grid, group)
        np.testing.assert_array_equal(out, want)
        return
    with pytest.raises(LaunchError, match=r"ran a loop past the 65,535-pass limit.*split the work over more threads"):
        device.launch(_ir(k), args, grid, group)
    assert (out == -7).all(), "results of a launch with a cut loop were copied back"


def test_a_loop_bound_loaded_from_memory_is_reported_not_cut_short(device):
    assert loop_passes(_ir(count_loaded), {}) == 0  # nothing to refuse before the launch
    _cut_or_right(device, count_loaded, [np.array([100000], np.int32), np.zeros(1, np.int32)], (1,), (1,), [100000])


def test_a_while_loop_is_reported_not_cut_short(device):
    _cut_or_right(device, count_while, [np.array([100000], np.int32), np.zeros(1, np.int32)], (1,), (1,), [100000])


def test_a_loop_bounded_by_the_thread_index_is_reported(device):
    want = np.arange(8, dtype=np.int32) * 20000  # threads 4 to 7 pass the limit
    _cut_or_right(device, count_by_thread, [20000, np.zeros(8, np.int32)], (8,), (8,), want)


def test_an_endless_loop_is_reported_not_finished(device):
    _lavapipe(device)  # elsewhere it would never end
    out = np.full(1, -7, np.int32)
    with pytest.raises(LaunchError, match="65,535-pass limit"):
        device.launch(_ir(spin), [np.array([1], np.int32), out], (1,), (1,))
    assert out[0] == -7


def test_threads_of_one_simd_vector_share_the_count(device):
    """40,001 passes each, in different loops: under the limit per thread, over it for their vector together.
    A pass counter per thread would miss it; alone in their groups, each thread counts in full."""
    _lavapipe(device)
    out = np.zeros(2, np.int32)
    device.launch(_ir(count_in_turns), [40000, out], (2,), (1,))
    np.testing.assert_array_equal(out, [40000, 40000])
    out[:] = -7
    with pytest.raises(LaunchError, match=r"seen by 2 thread\(s\)"):
        device.launch(_ir(count_in_turns), [40000, out], (2,), (2,))
    assert (out == -7).all()


def test_guarded_loops_under_the_limit_give_the_right_counts(device):
    out = np.zeros(1, np.int32)
    for k in (count_loaded, count_while):
        device.launch(_ir(k), [np.array([60000], np.int32), out], (1,), (1,))
        assert out[0] == 60000
    out = np.zeros(64, np.int32)
    device.launch(_ir(count_by_thread), [1000, out], (64,), (32,))
    np.testing.assert_array_equal(out, np.arange(64) * 1000)
    out = np.zeros(2, np.int32)
    device.launch(_ir(count_in_turns), [30000, out], (2,), (2,))  # 60,002 passes for the vector
    np.testing.assert_array_equal(out, [30000, 30000])


def test_the_check_is_conservative_only_within_2_passes_of_the_limit(device):
    _lavapipe(device)
    out = np.zeros(1, np.int32)
    device.launch(_ir(count_loaded), [np.array([65532], np.int32), out], (1,), (1,))  # 65,533 with its exit test
    assert out[0] == 65532
    with pytest.raises(LaunchError, match="65,535-pass limit"):
        device.launch(_ir(count_loaded), [np.array([65533], np.int32), out], (1,), (1,))
    with pytest.raises(LaunchError, match="65535 passes"):  # the static check draws the same line, before
        device.launch(_ir(count_to), [65533, out], (1,), (1,))
    device.launch(_ir(count_to), [65532, out], (1,), (1,))
    assert out[0] == 65532


# ------------------------------------------------------------ what the guard emits

@kernel
def float_max(x: In[f32], m: Tensor[f32]):
    atomic_max(m, 0, x[program_id(0)])


@kernel
def float_rem(x: In[f32], y: Tensor[f32]):
    i = program_id(0)
    y[i] = x[i] % 2.5


@kernel
def no_loop(x: In[f32], y: Tensor[f32]):
    i = program_id(0)
    y[i] = x[i] * 2.0


def test_the_guard_adds_nothing_inside_loops():
    """The guard's cost: a status buffer, the check and one call to it at the end of main, nothing in loops."""
    ir = _ir(count_nest)
    plain = emit_kernel(ir, "spirv").source.splitlines()
    guarded = emit_kernel(ir, "spirv", loop_guard=True).source.splitlines()
    ops = difflib.SequenceMatcher(a=plain, b=guarded, autojunk=False).get_opcodes()
    assert {tag for tag, *_ in ops} == {"equal", "insert"}
    inserted = [[line.strip() for line in guarded[j1:j2]] for tag, _, _, j1, j2 in ops if tag == "insert"]
    assert len(inserted) == 3 and "IronLoopStatus" in inserted[0][0]
    assert [line for line in inserted[1] if line] == [line.strip() for line in LOOP_CHECK.splitlines()]
    assert inserted[2] == ["iron_check_loops();"] and guarded[-2] == "  iron_check_loops();"


def test_the_guard_goes_where_loops_are_and_only_on_request():
    for k in (count_loaded, count_while, spin, float_max, float_rem):
        emitted = emit_kernel(_ir(k), "spirv", loop_guard=True)
        assert emitted.loop_status_binding == len(emitted.abi.tensors) and "iron_check_loops();" in emitted.source
        assert emit_kernel(_ir(k), "spirv").loop_status_binding is None
        assert "iron_check_loops" not in emit_kernel(_ir(k), "spirv").source
    emitted = emit_kernel(_ir(no_loop), "spirv", loop_guard=True)
    assert emitted.loop_status_binding is None and "iron_check_loops" not in emitted.source
    with pytest.raises(ValueError, match="loop_guard"):
        emit_kernel(_ir(count_loaded), "cuda", loop_guard=True)


def test_a_return_inside_a_loop_checks_first():
    @kernel
    def first_negative(x: In[i32], out: Tensor[i32]):
        n = x[0]
        for j in range(n):
            if x[j + 1] < 0:
                out[0] = j
                return
        out[0] = -1

    lines = [line.strip() for line in emit_kernel(_ir(first_negative), "spirv", loop_guard=True).source.splitlines()]
    at = lines.index("return;", lines.index("void main() {") + 6)  # the grid guard's return comes first
    assert lines[at - 1] == "iron_check_loops();"


def test_the_guarded_variant_has_its_own_cache_key(device, tmp_path):
    if not spirv_toolchain.available():
        pytest.skip(spirv_toolchain.unavailable_reason())
    ir = _ir(count_loaded)

    def spirv(cache: ArtifactCache, loop_guard: bool = False) -> bytes:
        options = CompileOptions(profile=device.profile, binary="spirv", loop_guard=loop_guard, optimised=True)
        return compile(ir, "spirv", options, cache=cache).binary

    first = ArtifactCache(tmp_path)
    plain, guarded = spirv(first), spirv(first, loop_guard=True)
    assert plain != guarded and first.compiles == 2
    assert len(list((tmp_path / "spirv").glob("*.spv"))) == 2
    again = ArtifactCache(tmp_path)
    assert spirv(again, loop_guard=True) == guarded and again.disk_hits == 1
    assert spirv(again) == plain and again.disk_hits == 2
    assert ArtifactStore(tmp_path / "spirv").last_build("count_loaded")["variant"] == "loop-guard"


# ------------------------------------------------------------ which launches need the guard

@kernel
def count_either(n: i32, m: i32, out: Tensor[i32]):
    s = 0
    if program_id(0) == 0:
        for j in range(n):
            s += 1
    else:
        for j in range(m):
            s += 1
    out[program_id(0)] = s


@kernel
def count_len(x: In[f32], out: Tensor[i32]):
    s = 0
    for j in range(len(x)):
        s += 1
    out[program_id(0)] = s


def test_loop_passes_at_most_bounds_the_vector():
    assert loop_passes_at_most(_ir(count_to), {"n": 10}) == 11
    assert loop_passes_at_most(_ir(count_nest), {"n": 3, "m": 4}) == 3 * (1 + 5) + 1
    assert loop_passes_at_most(_ir(count_either), {"n": 10, "m": 20}) == 11 + 21  # a vector may take both sides
    assert loop_passes(_ir(count_either), {"n": 10, "m": 20}) == 21  # one thread takes one
    assert loop_passes_at_most(_ir(count_len), {}, {"x": 7}) == 8
    assert loop_passes_at_most(_ir(no_loop), {}) == 0
    for k in (count_loaded, count_while, count_by_thread, spin, float_max, float_rem):
        assert loop_passes_at_most(_ir(k), {"step": 1}) is None
    assert loop_passes_at_most(_ir(count_to), {}) is None


def test_only_launches_that_may_meet_the_limit_run_the_guard(device):
    """Loops known at launch to stay within the limit run the plain shader: the guard costs them nothing."""
    _lavapipe(device)
    out = np.zeros(1, np.int32)
    device.launch(_ir(count_to), [1000, out], (1,), (1,))
    device.launch(_ir(count_loaded), [np.array([1000], np.int32), out], (1,), (1,))

    def variants(k) -> set[str]:
        return {"loop-guard" if guard else "" for (_, guard), (kern, _) in device._artifacts.items()
                if kernel_hash(kern) == kernel_hash(_ir(k))}

    assert variants(count_to) == {""} and variants(count_loaded) == {"loop-guard"}
