"""The interpreter's run-time checks: each planted mistake raises the right error with its details."""

from __future__ import annotations

import numpy as np
import pytest

from iron.core import dtypes as D
from iron.core.builder import tensor
from iron.core.errors import (BarrierDivergenceError, InactiveLaneError, InterpError, LaunchError,
                              MisalignedAccessError, OutOfBoundsError, SharedMemoryRaceError, SourceLoc,
                              SubgroupDivergenceError)
from iron.runtime.interp import run

from interp_kernels import KernelBuilder, reduction_kernel

LOC = SourceLoc("kernels/planted.py", 42, 8)


def test_out_of_bounds_load_names_kernel_tensor_index_thread_and_line():
    kb = KernelBuilder("shift_left", a=tensor(D.f32, True), out=tensor(D.f32))
    i = kb.gid()
    nxt = kb.op("add", i, kb.i32(1))
    with kb.b.located(LOC):
        x = kb.op("load", kb.p["a"], nxt)
    kb.op("store", kb.p["out"], i, x)
    a = np.zeros(100, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        run(kb.kernel, [a, np.zeros(100, np.float32)], (100,), (32,))
    e = info.value
    assert (e.kernel, e.tensor, e.index, e.size, e.loc) == ("shift_left", "a", 100, 100, LOC)
    assert (e.thread.global_id, e.thread.group_id, e.thread.thread_id) == ((99,), (3,), (3,))
    text = str(e)
    for part in ("kernels/planted.py:42:9", "shift_left", "'a'", "index 100", "thread 99", "group 3", "thread_id 3"):
        assert part in text, part


def test_out_of_bounds_store_to_shared_memory_names_the_shared_array():
    kb = KernelBuilder("oob_shared", out=tensor(D.i32))
    sh = kb.b.op("shared_alloc", [], hint="tile", dtype=D.i32, shape=(16,))
    t = kb.tid()
    with kb.b.located(LOC):
        kb.op("store", sh, kb.op("sub", t, kb.i32(1)), t)
    with pytest.raises(OutOfBoundsError) as info:
        run(kb.kernel, [np.zeros(4, np.int32)], (16, 2), (4, 4))
    e = info.value
    assert e.tensor == "tile" and e.index == -1 and e.thread.thread_id == (0, 0) and e.thread.group_id == (0, 0)


def test_out_of_bounds_vector_access_and_atomic():
    kb = KernelBuilder("oob_vec", a=tensor(D.f32, True), out=tensor(D.f32))
    i = kb.gid()
    with kb.b.located(LOC):
        v = kb.op("vload", kb.p["a"], kb.op("mul", i, kb.i32(4)), width=4)
    kb.op("vstore", kb.p["out"], kb.op("mul", i, kb.i32(4)), v)
    with pytest.raises(OutOfBoundsError) as info:
        run(kb.kernel, [np.zeros(30, np.float32), np.zeros(40, np.float32)], (8,), (8,))
    assert info.value.index == 28 and info.value.thread.global_id == (7,) and "elements 28..31" in str(info.value)

    kb = KernelBuilder("oob_atomic", t=tensor(D.i32))
    with kb.b.located(LOC):
        kb.op("atomic_add", kb.p["t"], kb.gid(), kb.i32(1))
    with pytest.raises(OutOfBoundsError) as info:
        run(kb.kernel, [np.zeros(5, np.int32)], (6,), (6,))
    assert info.value.index == 5 and info.value.loc == LOC


def test_misaligned_vector_load():
    kb = KernelBuilder("misaligned", a=tensor(D.f32, True), out=tensor(D.f32))
    i = kb.gid()
    base = kb.op("add", kb.op("mul", i, kb.i32(4)), kb.op("select", kb.op("eq", i, kb.i32(5)), kb.i32(2),
                                                         kb.i32(0)))
    with kb.b.located(LOC):
        v = kb.op("vload", kb.p["a"], base, width=4)
    kb.op("vstore", kb.p["out"], kb.op("mul", i, kb.i32(4)), v)
    with pytest.raises(MisalignedAccessError) as info:
        run(kb.kernel, [np.zeros(64, np.float32), np.zeros(64, np.float32)], (8,), (8,))
    e = info.value
    assert e.index == 22 and e.width == 4 and e.thread.global_id == (5,) and e.loc == LOC


def test_a_reduction_missing_its_barrier_is_a_race():
    kernel = reduction_kernel(barrier_in_loop=False)
    # Locate the loop's ops: the second load (sh[t + s]) and the store.
    loop = next(op for op in kernel.walk() if op.opcode == "loop")
    inner = next(op for op in loop.regions[0].walk() if op.opcode == "if" and op.regions[0].ops[0].opcode == "load")
    loads = [op for op in inner.regions[0].ops if op.opcode == "load"]
    other_load, store = loads[1], inner.regions[0].ops[-1]
    other_load.loc, store.loc = SourceLoc("red.py", 20), SourceLoc("red.py", 21)
    x = np.ones(512, np.float32)
    with pytest.raises(SharedMemoryRaceError) as info:
        run(kernel, [x, np.zeros(2, np.float32)], (512,), (256,))
    e = info.value
    # Iteration s=64: thread 0 reads partial[64], which thread 64 wrote in iteration s=128.
    assert (e.tensor, e.index, e.loc, e.other_loc) == ("partial", 64, SourceLoc("red.py", 20), SourceLoc("red.py", 21))
    assert e.thread.thread_id == (0,) and e.other_thread.thread_id == (64,)
    assert "read by thread 0" in str(e) and "write by thread 64" in str(e)


def test_the_same_reduction_with_checks_off_runs_without_complaint():
    out = np.zeros(2, np.float32)
    run(reduction_kernel(barrier_in_loop=False), [np.ones(512, np.float32), out], (512,), (256,), checks=False)
    assert out.dtype == np.float32


def _shared_cell_kernel(read_first: bool):
    kb = KernelBuilder("cells", out=tensor(D.i32))
    sh = kb.b.op("shared_alloc", [], hint="cell", dtype=D.i32, shape=(2,))
    t = kb.tid()
    if read_first:
        kb.op("load", sh, kb.i32(0))  # every thread reads cell 0: reads alone never race
    with kb.b.located(LOC):
        kb.op("store", sh, kb.op("rem", t, kb.i32(2)), t)
    return kb.kernel


def test_two_threads_writing_one_shared_element_race():
    with pytest.raises(SharedMemoryRaceError) as info:
        run(_shared_cell_kernel(read_first=False), [np.zeros(1, np.int32)], (8,), (8,))
    e = info.value
    assert (e.index, e.thread.thread_id, e.other_thread.thread_id, e.loc, e.other_loc) == (0, (2,), (0,), LOC, LOC)
    assert "write by thread 2" in str(e) and "write by thread 0" in str(e)


def test_a_write_after_other_threads_read_races_with_them():
    with pytest.raises(SharedMemoryRaceError) as info:
        run(_shared_cell_kernel(read_first=True), [np.zeros(1, np.int32)], (8,), (8,))
    e = info.value
    # Thread 0 writes cell 0, which threads 0..7 read: its own read is fine, thread 1's is not.
    assert (e.index, e.thread.thread_id, e.other_thread.thread_id) == (0, (0,), (1,))
    assert "write by thread 0" in str(e) and "read by thread 1" in str(e)


def test_reads_and_own_writes_do_not_race():
    kb = KernelBuilder("no_race", out=tensor(D.i32))
    sh = kb.b.op("shared_alloc", [], hint="cell", dtype=D.i32, shape=(8,))
    t = kb.tid()
    kb.op("store", sh, t, kb.op("add", kb.op("load", sh, t), kb.i32(1)))
    kb.op("store", sh, t, kb.op("add", kb.op("load", sh, t), kb.i32(1)))
    kb.op("store", kb.p["out"], kb.gid(), kb.op("load", sh, t))
    out = np.zeros(8, np.int32)
    run(kb.kernel, [out], (8,), (8,))
    assert out.tolist() == [2] * 8


def test_a_barrier_inside_a_thread_dependent_branch_is_reported():
    kb = KernelBuilder("half_barrier", out=tensor(D.i32))
    t = kb.tid()
    br = kb.b.if_(kb.op("lt", t, kb.i32(16)))
    with kb.b.at(br.regions[0]), kb.b.located(LOC):
        kb.b.op("barrier")
    with pytest.raises(BarrierDivergenceError) as info:
        run(kb.kernel, [np.zeros(1, np.int32)], (64,), (32,))
    e = info.value
    assert e.loc == LOC and e.thread.thread_id == (0,) and e.missing_thread.thread_id == (16,)
    assert "16 of the 32 threads of group 0" in str(e) and "returned" not in str(e)


def test_a_thread_that_returned_early_makes_a_later_barrier_partial():
    kb = KernelBuilder("return_then_barrier", out=tensor(D.i32))
    t = kb.tid()
    br = kb.b.if_(kb.op("eq", t, kb.i32(5)))
    with kb.b.at(br.regions[0]):
        kb.b.op("return")
    kb.b.op("barrier")
    with pytest.raises(BarrierDivergenceError) as info:
        run(kb.kernel, [np.zeros(1, np.int32)], (8,), (8,))
    assert info.value.missing_thread.thread_id == (5,) and "returned early" in str(info.value)


def test_uniform_branches_do_not_make_barriers_partial():
    kb = KernelBuilder("uniform_barrier", out=tensor(D.i32))
    br = kb.b.if_(kb.op("eq", kb.op("group_id", axis=0), kb.i32(1)))
    with kb.b.at(br.regions[0]):
        kb.b.op("barrier")
    kb.b.op("barrier")
    kb.op("store", kb.p["out"], kb.gid(), kb.i32(1))
    out = np.zeros(128, np.int32)
    run(kb.kernel, [out], (128,), (64,))
    assert out.sum() == 128
    # A grid ending in a partial group is refused for a kernel with a barrier, as on every GPU
    # (tests/interp/test_interp_launch_limits.py).
    with pytest.raises(LaunchError, match=r"grid \(100,\) is not a multiple of the group \(64,\)"):
        run(kb.kernel, [np.zeros(100, np.int32)], (100,), (64,))


def test_a_shuffle_reading_an_inactive_lane_is_reported():
    kb = KernelBuilder("bad_shuffle", out=tensor(D.i32))
    i = kb.gid()
    even = kb.b.if_(kb.op("eq", kb.op("rem", kb.op("lane_id"), kb.i32(2)), kb.i32(0)))
    with kb.b.at(even.regions[0]), kb.b.located(LOC):
        kb.op("store", kb.p["out"], i, kb.op("simd_shuffle_xor", i, kb.i32(1)))
    with pytest.raises(InactiveLaneError) as info:
        run(kb.kernel, [np.zeros(32, np.int32)], (32,), (32,), simd_width=8)
    assert isinstance(info.value, InterpError)
    assert info.value.source_lane == 1 and info.value.thread.global_id == (0,) and info.value.loc == LOC


def test_shuffling_from_a_missing_lane_past_the_grid_is_reported():
    kb = KernelBuilder("edge_shuffle", out=tensor(D.i32))
    i = kb.gid()
    kb.op("store", kb.p["out"], i, kb.op("simd_shuffle_down", i, kb.i32(1)))
    with pytest.raises(InactiveLaneError):
        run(kb.kernel, [np.zeros(30, np.int32)], (30,), (32,), simd_width=32)


def test_broadcast_with_a_lane_that_differs_between_lanes_is_reported():
    kb = KernelBuilder("bad_broadcast", out=tensor(D.i32))
    i = kb.gid()
    kb.op("store", kb.p["out"], i, kb.op("simd_broadcast", i, kb.op("lane_id")))
    with pytest.raises(SubgroupDivergenceError):
        run(kb.kernel, [np.zeros(8, np.int32)], (8,), (8,), simd_width=8)


def test_fragment_ops_need_the_whole_subgroup_and_uniform_operands():
    kb = KernelBuilder("partial_frag", out=tensor(D.f32))
    br = kb.b.if_(kb.op("lt", kb.op("lane_id"), kb.i32(16)))
    with kb.b.at(br.regions[0]), kb.b.located(LOC):
        kb.op("frag_fill", kb.const(1.0, D.f32), role="acc", dtype=D.f32, rows=8, cols=8)
    with pytest.raises(SubgroupDivergenceError) as info:
        run(kb.kernel, [np.zeros(1, np.float32)], (32,), (32,), simd_width=32)
    assert "16 of its 32 lanes" in str(info.value) and info.value.loc == LOC

    kb = KernelBuilder("varying_base", a=tensor(D.f32, True))
    kb.op("frag_load", kb.p["a"], kb.op("lane_id"), kb.i32(8), role="acc", dtype=D.f32, rows=8, cols=8,
          layout="row")
    with pytest.raises(SubgroupDivergenceError) as info:
        run(kb.kernel, [np.zeros(128, np.float32)], (32,), (32,), simd_width=32)
    assert "base index" in str(info.value)


def test_fragment_load_out_of_bounds():
    kb = KernelBuilder("frag_oob", a=tensor(D.f32, True))
    kb.op("frag_load", kb.p["a"], kb.i32(8), kb.i32(8), role="acc", dtype=D.f32, rows=8, cols=8, layout="row")
    with pytest.raises(OutOfBoundsError) as info:
        run(kb.kernel, [np.zeros(64, np.float32)], (8,), (8,), simd_width=8)
    assert info.value.index == 64


def test_unchecked_out_of_bounds_still_fails_cleanly():
    kb = KernelBuilder("unchecked", a=tensor(D.f32, True), out=tensor(D.f32))
    i = kb.gid()
    kb.op("store", kb.p["out"], i, kb.op("load", kb.p["a"], kb.op("mul", i, kb.i32(1000))))
    with pytest.raises(InterpError, match="run with checks on"):
        run(kb.kernel, [np.zeros(10, np.float32), np.zeros(10, np.float32)], (10,), (10,), checks=False)


def test_checks_default_comes_from_the_options():
    from iron import config

    try:
        config.set_option("interp_checks", False)
        out = np.zeros(2, np.float32)
        run(reduction_kernel(barrier_in_loop=False), [np.ones(512, np.float32), out], (512,), (256,))
    finally:
        config.clear_overrides()
    with pytest.raises(SharedMemoryRaceError):
        run(reduction_kernel(barrier_in_loop=False), [np.ones(512, np.float32), out], (512,), (256,))
