"""Warp roles: a group split into a producer and a consumer role that wait on each other's barriers runs on
the interpreter as on a GPU (the two sides of the branch as fibers), a role that would hang is reported with
the other's wait, misuse is a located error, and each target emits its form (CUDA: setmaxnreg, launch bounds
and named barriers; elsewhere a role index and group barriers, where every thread reaches them)."""

import re

import numpy as np
import pytest
from lang_support import assert_located, where

from iron import In, Tensor, f32, i32, kernel, variants
from iron.codegen.capabilities import check_emitted_launch
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import profile
from iron.core.errors import IronCompileError, LaunchError, UnsupportedOnTarget, UnsupportedSyntaxError
from iron.lang import (async_barriers, barrier_arrive, barrier_wait, program_id, role_barrier, shared, thread_id,
                       warp_roles)
from iron.runtime.interp.faults import InterpError

HERE = __file__
R = 32  # threads per role
S = 2  # ring slots
STEPS = 5  # more steps than slots: the producer must wait for the consumer to release a slot


@kernel(variants(MISUSE=["none", "no_release", "both_wait", "reads_early"]))
def ring(src: In[f32], out: Tensor[f32]):
    """Role 0 fills a ring of S slots of R values, one step at a time; role 1 waits for each slot, adds
    ``(k + 1) * x`` of the mirrored element into its sum, and releases the slot."""
    full = async_barriers(S, R)
    empty = async_barriers(S, R)
    buf = shared(f32, S * R)
    role = warp_roles((R, R))
    t = thread_id(0)
    if role == 0:
        for k in range(STEPS):
            s = k % S
            barrier_wait(empty, s, ((k // S) & 1) ^ (0 if MISUSE == "both_wait" else 1))
            buf[s * R + t] = src[k * R + t]
            barrier_arrive(full, s)
    else:
        j = t - R
        acc = 0.0
        for k in range(STEPS):
            s = k % S
            if MISUSE != "reads_early":
                barrier_wait(full, s, (k // S) & 1)
            acc += f32(k + 1) * buf[s * R + R - 1 - j]
            if MISUSE == "reads_early":
                barrier_wait(full, s, (k // S) & 1)
            if MISUSE != "no_release":
                barrier_arrive(empty, s)
        out[j] = acc


def _run_ring(misuse: str) -> tuple[np.ndarray, np.ndarray]:
    src = np.arange(1, STEPS * R + 1, dtype=np.float32)
    out = np.full(R, -1, np.float32)
    ring.variant(MISUSE=misuse).launch(src, out, grid=(2 * R,), group=(2 * R,), backend="interp")
    return src, out


def test_a_producer_and_a_consumer_role_take_turns_through_the_ring() -> None:
    src, out = _run_ring("none")
    want = sum((k + 1) * src[k * R:(k + 1) * R][::-1].astype(np.float64) for k in range(STEPS))
    np.testing.assert_array_equal(out, want.astype(np.float32))


@pytest.mark.parametrize("misuse, message", [
    # The consumer never releases a slot: the producer waits for slot 0 to come back while the consumer waits
    # for its second fill.
    ("no_release", r"waits on barrier 0 of 'full' for a phase of parity 1, but phase 1 is still in progress "
                   r"\(0 of 32 arrivals.*would never return; the other branches wait too: line {LINE} on 'empty'"),
    # The producer waits for a release before its first fill, the consumer for that fill.
    ("both_wait", r"waits on barrier 0 of 'full' for a phase of parity 0, but phase 0 is still in progress.*would "
                  r"never return; the other branches wait too: line {LINE} on 'empty'"),
])
def test_roles_that_would_hang_are_reported_with_each_wait(misuse, message) -> None:
    line = where(HERE, "barrier_wait(empty")[0]
    with pytest.raises(InterpError, match=message.replace("{LINE}", str(line))) as info:
        _run_ring(misuse)
    assert "test_warp_roles.py" in str(info.value)


def test_a_consumer_reading_before_its_wait_is_a_race() -> None:
    with pytest.raises(InterpError, match=r"race on 'buf'"):
        _run_ring("reads_early")


@kernel(variants(ROLE_BARRIER=[True, False, "half"]))
def halves(src: In[f32], out: Tensor[f32]):
    """Each role reverses its own half through shared memory, meeting at its role barrier."""
    s = shared(f32, 2 * R)
    role = warp_roles((R, R))
    t = thread_id(0)
    s[t] = src[t]
    if role == 0:
        if ROLE_BARRIER == "half":
            if t < R // 2:
                role_barrier()  # half a role
        elif ROLE_BARRIER:
            role_barrier()
        out[t] = s[R - 1 - t]
    else:
        if ROLE_BARRIER:
            role_barrier()
        out[t] = s[3 * R - 1 - t]


def test_a_role_barrier_orders_its_role_and_its_absence_is_a_race() -> None:
    src = np.arange(2 * R, dtype=np.float32)
    out = np.zeros(2 * R, np.float32)
    halves.variant(ROLE_BARRIER=True).launch(src, out, grid=(2 * R,), group=(2 * R,), backend="interp")
    np.testing.assert_array_equal(out, np.concatenate([src[:R][::-1], src[R:][::-1]]))
    with pytest.raises(InterpError, match=r"race on 's'"):
        halves.variant(ROLE_BARRIER=False).launch(src, out, grid=(2 * R,), group=(2 * R,), backend="interp")
    with pytest.raises(InterpError, match=r"role_barrier\(\) is reached by thread 0 .* of role 0 but not by thread 16 .* "
                                          r"of the same role: every thread of a role must reach it") as info:
        halves.variant(ROLE_BARRIER="half").launch(src, out, grid=(2 * R,), group=(2 * R,), backend="interp")
    line = where(HERE, "# half a role")[0]
    assert (info.value.loc.line, info.value.loc.file) == (line, HERE)


@kernel
def role_ids(out: Tensor[i32]):
    role = warp_roles((R, 2 * R, R))
    out[program_id(0)] = role


def test_each_thread_gets_the_role_of_its_number_in_the_group() -> None:
    out = np.full(8 * R, -1, np.int32)
    role_ids.launch(out, grid=(8 * R,), group=(4 * R,), backend="interp")
    np.testing.assert_array_equal(out, np.tile(np.repeat([0, 1, 1, 2], R), 2))


def test_a_group_of_another_size_is_an_error() -> None:
    out = np.zeros(2 * R, np.int32)
    with pytest.raises(InterpError, match=r"warp_roles splits a group of 128 threads \(32, 64, 32\), but the "
                                          r"launch's groups have 64"):
        role_ids.launch(out, grid=(2 * R,), group=(2 * R,), backend="interp")
    # The GPU runtimes check the emitted kernel before they launch it.
    emitted = emit_kernel(_legal(role_ids, "spirv"), "spirv")
    check_emitted_launch(emitted, (4 * R,), (4 * R,))
    with pytest.raises(LaunchError, match=r"kernel 'role_ids': warp_roles splits groups of 128 threads, but the "
                                          r"launch's group \(64,\) has 64: launch groups of 128 threads"):
        check_emitted_launch(emitted, (2 * R,), (2 * R,))


@kernel(variants(CASE=["twice", "under_if", "bad_budget", "small_role", "over_file", "no_roles"]))
def misuse(out: Tensor[f32]):
    t = thread_id(0)
    if CASE == "twice":
        warp_roles((128, 256))
        warp_roles((128, 256))  # twice
    if CASE == "under_if":
        if t < 5:
            warp_roles((128, 256))  # under_if
    if CASE == "bad_budget":
        warp_roles((128, 256), registers=(44, 232))  # bad_budget
    if CASE == "small_role":
        warp_roles((64, 320), registers=(40, 168))  # small_role
    if CASE == "over_file":
        warp_roles((128, 256), registers=(40, 240))  # over_file
    if CASE == "no_roles":
        role_barrier()  # no_roles
    out[t] = 1.0


@pytest.mark.parametrize("case, cls, message", [
    ("twice", UnsupportedSyntaxError, "a kernel splits its group into warp roles once"),
    ("under_if", UnsupportedSyntaxError, r"warp_roles\(\) inside a helper or under run-time control flow"),
    ("bad_budget", IronCompileError, r"register budget is 24 to 256 registers per thread in steps of 8, got 44"),
    ("small_role", IronCompileError, r"a role with a register budget is whole warpgroups \(128 threads\), got a "
                                     r"role of 64"),
    ("over_file", IronCompileError, r"budgets take 66560 registers, but a group of 384 threads starts with 168 "
                                    r"each \(64512\)"),
    ("no_roles", IronCompileError, r"role_barrier\(\) meets the threads of the caller's role, but the kernel has "
                                   r"no roles"),
])
def test_misuse_is_a_located_compile_error(case, cls, message) -> None:
    with pytest.raises(cls, match=message) as info:
        misuse.variant(CASE=case).ir()
    assert_located(info.value, HERE, f"# {case}", at="role_barrier" if case == "no_roles" else "warp_roles")


@kernel
def budgets(src: In[f32], out: Tensor[f32]):
    """A producer warpgroup at 40 registers, two consumer warpgroups at 232: CUTLASS's and ThunderKittens'
    split of a 384-thread group."""
    s = shared(f32, 384)
    role = warp_roles((128, 256), registers=(40, 232))
    t = thread_id(0)
    s[t] = src[t]
    if role == 1:
        role_barrier()  # consumers meet
        out[t] = s[(t + 1 - 128) % 256 + 128]


def _legal(k, target: str):
    return run_pipeline(k.ir(), PassContext(target=target))


def test_cuda_sm90_sets_the_budgets_and_bounds_the_group() -> None:
    src = emit_kernel(_legal(budgets, "cuda"), "cuda", profile("cuda", "sm_90")).source
    assert "__launch_bounds__(384, 1) " in src
    # Each budget opens its role's branch: ptxas drops a budget that code after it might exceed.
    inc = r"asm volatile\(\"setmaxnreg\.inc\.sync\.aligned\.u32 232;\\n\" ::: \"memory\"\);"
    dec = r"asm volatile\(\"setmaxnreg\.dec\.sync\.aligned\.u32 40;"
    assert re.search(rf"if \(v\d+\) \{{\n\s*{inc}\n(.*\n)*?\s*\}} else \{{\n\s*{dec}", src), src
    assert re.search(r'bar\.sync %0, %1;" :: "r"\(1 \+ \(\(int\)iron_thread_index\(\) < 128 \? 0 : 1\)\), '
                     r'"r"\(\(\(int\)iron_thread_index\(\) < 128 \? 128 : 256\)\)', src)
    older = emit_kernel(_legal(budgets, "cuda"), "cuda", profile("cuda", "sm_80")).source
    assert "setmaxnreg" not in older and "__launch_bounds__(384) " in older


@pytest.mark.parametrize("target", ["hip", "spirv", "metal"])
def test_other_targets_refuse_a_role_barrier_only_some_threads_reach(target) -> None:
    with pytest.raises(UnsupportedOnTarget, match=r"role_barrier\(\).*has no named barriers") as info:
        emit_kernel(_legal(budgets, target), target)
    assert_located(info.value, HERE, "# consumers meet", at="role_barrier")


@pytest.mark.parametrize("target", ["hip", "spirv", "metal", "cuda"])
def test_every_target_computes_the_role(target) -> None:
    src = emit_kernel(_legal(role_ids, target), target).source
    assert re.search(r"< 32 \? 0 : \(.* < 96 \? 1 : 2\)\)", src), src


@pytest.mark.toolchain
def test_ptxas_gives_every_thread_the_budget_the_roles_share() -> None:
    """setmaxnreg moves registers from the count each thread starts with: ptxas must start every thread at the
    register file over the group (168 for 384 threads), which the launch bounds make it do, or a consumer's
    raise would wait for registers nobody frees."""
    from iron.codegen.toolchains import nvrtc
    from iron.core.ops import entry_registers

    if not nvrtc.available():
        pytest.skip("NVRTC is not installed")
    source = emit_kernel(_legal(budgets, "cuda"), "cuda", profile("cuda", "sm_90")).source
    arch = nvrtc.arch_for_source(source, "sm_90")
    assert arch == "sm_90a", "setmaxnreg exists on sm_90a alone"
    report = nvrtc.compile_cuda(source, arch=arch).report
    assert report["registers"] == entry_registers(384) == 168
    assert not report["warnings"] and not report["setmaxnreg_ignored"]


@kernel
def nested_role_if(src: In[f32], out: Tensor[f32]):
    """The first if on the role sits under another if: only some threads of a warpgroup would reach a budget
    there, so none is set (setmaxnreg needs the whole warpgroup)."""
    role = warp_roles((128, 256), registers=(40, 232))
    t = thread_id(0)
    if t % 2 == 0:
        if role == 1:
            out[t] = src[t]


def test_a_budget_opens_only_a_top_level_branch_on_the_role() -> None:
    src = emit_kernel(_legal(nested_role_if, "cuda"), "cuda", profile("cuda", "sm_90")).source
    assert "__launch_bounds__(384, 1) " in src and "setmaxnreg" not in src
