"""vectorize: aligned runs of consecutive loads/stores merge; anything unproven or order-changing stays scalar."""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen.passes import vectorize
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.errors import MisalignedAccessError
from iron.core.printer import print_kernel

from iron.runtime.interp import run

from pass_harness import apply_pass, check_preserves, count_ops, run_kernel


def _gather_kernel(dt, width, base_of, offsets=None, src_shared=False, between=None):
    """``out[base + k] = a[base + k] * 2`` for k in offsets, loads first then stores.

    ``base_of(b, pid)`` gives the base index; ``between(b, k)`` may add ops after load k.
    """
    offsets = list(range(width)) if offsets is None else offsets
    k, b = new_kernel("vec", [("a", tensor(dt, True)), ("out", tensor(dt))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0, hint="pid")
    base = base_of(b, pid)
    values = []
    for off in offsets:
        idx = b.op("add", [base, b.const(off, D.i32)]) if off else base
        values.append((idx, b.op("load", [a, idx])))
        if between:
            between(b, off)
    for idx, v in values:
        b.op("store", [out, idx, b.op("add", [v, v])])
    return k


def _times(n):
    return lambda b, pid: b.op("mul", [pid, b.const(n, D.i32)])


def _args(dt, n):
    npdt = D.numpy_dtype(dt)
    return [np.arange(n).astype(npdt), np.zeros(n, npdt)]


@pytest.mark.parametrize("dt, width", [(D.f32, 4), (D.f16, 8), (D.f64, 2), (D.i8, 8), (D.i32, 4)], ids=str)
def test_aligned_consecutive_loads_and_stores_merge_to_the_widest_width(dt, width):
    k = _gather_kernel(dt, width, _times(width))
    out = check_preserves(vectorize.run, k, _args(dt, 16 * width), 16)
    assert count_ops(out, "load") == 0 and count_ops(out, "store") == 0
    assert count_ops(out, "vload") == 1 and count_ops(out, "vstore") == 1
    vload = next(op for op in out.walk() if op.opcode == "vload")
    assert vload.attrs["width"] == width


def test_eight_f32_loads_become_two_vectors_of_four():
    k = _gather_kernel(D.f32, 8, _times(8))
    out = check_preserves(vectorize.run, k, _args(D.f32, 128), 16)
    assert [op.attrs["width"] for op in out.walk() if op.opcode == "vload"] == [4, 4]


@pytest.mark.parametrize("base_of, aligned", [
    (_times(4), True),
    (lambda b, pid: b.op("shl", [pid, b.const(2, D.i32)]), True),
    (lambda b, pid: b.op("add", [b.op("mul", [pid, b.const(8, D.i32)]), b.const(4, D.i32)]), True),
    (lambda b, pid: b.op("sub", [b.op("mul", [pid, b.const(8, D.i32)]), b.op("mul", [pid, b.const(4, D.i32)])]),
     True),
    (lambda b, pid: b.op("band", [b.op("mul", [pid, b.const(5, D.i32)]), b.const(-4, D.i32)]), True),
    (lambda b, pid: b.op("add", [b.op("mul", [pid, b.const(4, D.i32)]), b.const(2, D.i32)]), False),
    (lambda b, pid: b.op("mul", [pid, b.const(6, D.i32)]), False),
    (lambda b, pid: pid, False),
    (lambda b, pid: b.op("mul", [pid, b.op("group_size", axis=0)]), False),
])
def test_only_provably_aligned_runs_merge(base_of, aligned):
    k = _gather_kernel(D.f32, 4, base_of)
    out = apply_pass(vectorize.run, k)
    assert (count_ops(out, "vload") == 1) == aligned
    assert (count_ops(out, "vstore") == 1) == aligned


def test_a_misaligned_vector_would_be_caught_so_unproven_runs_must_stay_scalar():
    # Guard for the test above: if the pass merged base = 4*pid + 2, the interpreter would report it.
    k = _gather_kernel(D.f32, 4, lambda b, pid: b.op("add", [b.op("mul", [pid, b.const(4, D.i32)]),
                                                            b.const(2, D.i32)]))
    check_preserves(vectorize.run, k, _args(D.f32, 70), 16)
    forced = apply_pass(vectorize.run, _gather_kernel(D.f32, 4, _times(4)))
    vload = next(op for op in forced.walk() if op.opcode == "vload")
    vload.operands[1] = next(op.result for op in forced.walk() if op.opcode == "program_id")
    with pytest.raises(MisalignedAccessError):
        run_kernel(forced, _args(D.f32, 64), 16)


def test_runs_with_a_gap_or_a_duplicate_stay_scalar_where_needed():
    k = _gather_kernel(D.f32, 4, _times(8), offsets=[0, 1, 3, 4])  # no 2: no run of 4, but 0..1 is a run of 2
    out = check_preserves(vectorize.run, k, _args(D.f32, 128), 16)
    assert [op.attrs["width"] for op in out.walk() if op.opcode == "vload"] == [2]
    assert count_ops(out, "load") == 2


def test_loop_induction_variable_alignment_is_used():
    k, b = new_kernel("loopvec", [("a", tensor(D.f32, True)), ("out", tensor(D.f32)), ("n", tensor(D.i32, True))])
    a, out, n = (p.value for p in k.params)
    hi = b.op("load", [n, b.const(0, D.i32)])
    loop = b.for_(b.const(0, D.i32), hi, b.const(4, D.i32))
    with b.at(loop.regions[0]):
        i = loop.regions[0].args[0]
        vals = []
        for off in range(4):
            idx = b.op("add", [i, b.const(off, D.i32)]) if off else i
            vals.append(b.op("load", [a, idx]))
        acc = vals[0]
        for v in vals[1:]:
            acc = b.op("add", [acc, v])
        b.op("store", [out, i, acc])
    out_k = check_preserves(vectorize.run, k, [np.arange(32, dtype=np.float32), np.zeros(32, np.float32),
                                               np.array([32], np.int32)], 1)
    assert count_ops(out_k, "vload") == 1


def _loads_around_a_store(store_index):
    """Four loads a[4p+0..3] with a store to ``out`` at ``store_index(base, pid, b)`` after the second."""
    k, b = new_kernel("alias", [("a", tensor(D.f32, True)), ("out", tensor(D.f32))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0)
    base = b.op("mul", [pid, b.const(4, D.i32)])
    loads = []
    for off in range(4):
        idx = b.op("add", [base, b.const(off, D.i32)]) if off else base
        loads.append(b.op("load", [a, idx]))
        if off == 1:
            b.op("store", [out, store_index(base, pid, b), loads[0]])
    acc = loads[0]
    for v in loads[1:]:
        acc = b.op("add", [acc, v])
    b.op("store", [out, b.op("add", [pid, b.const(100, D.i32)]), acc])
    return k


def test_a_store_to_another_tensor_at_a_provably_different_offset_does_not_block():
    # out[4p+64] never is a[4p+2] or a[4p+3]: not when out and a are two buffers, not when they are
    # one (the launch-time aliasing rule leaves no third case).
    k = _loads_around_a_store(lambda base, pid, b: b.op("add", [base, b.const(64, D.i32)]))
    out_k = check_preserves(vectorize.run, k, [np.arange(64, dtype=np.float32), np.zeros(128, np.float32)], 16)
    assert [op.attrs["width"] for op in out_k.walk() if op.opcode == "vload"] == [4]


def test_a_store_to_another_tensor_at_an_unrelated_index_blocks_the_merge():
    # out[p] may be a[4p+2] when out is a: only the pairs on each side of the store merge.
    k = _loads_around_a_store(lambda base, pid, b: pid)
    out_k = check_preserves(vectorize.run, k, [np.arange(64, dtype=np.float32), np.zeros(128, np.float32)], 16)
    assert [op.attrs["width"] for op in out_k.walk() if op.opcode == "vload"] == [2, 2]


def test_the_same_array_passed_twice_shows_why_aliasing_blocks():
    # out[i] = a[i+1] written between the loads: with a and out one buffer, moving the loads up changes results.
    k, b = new_kernel("alias2", [("a", tensor(D.f32, True)), ("out", tensor(D.f32))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0)
    base = b.op("mul", [pid, b.const(4, D.i32)])
    l0 = b.op("load", [a, base])
    b.op("store", [out, b.op("add", [base, b.const(1, D.i32)]), b.op("add", [l0, l0])])
    ls = [b.op("load", [a, b.op("add", [base, b.const(o, D.i32)])]) for o in (1, 2, 3)]
    b.op("store", [out, base, b.op("add", [b.op("add", [ls[0], ls[1]]), ls[2]])])
    buf = np.arange(64, dtype=np.float32)
    expected = buf.copy()
    run(k, [expected, expected], (16,), (16,))
    got = buf.copy()
    run(apply_pass(vectorize.run, k), [got, got], (16,), (16,))
    assert np.array_equal(expected, got)


def test_accesses_to_the_same_tensor_at_other_offsets_do_not_block():
    # x[b+k] = x[b+k] + 1 unrolled: each store touches an element no later load reads.
    k, b = new_kernel("inplace", [("x", tensor(D.f32))])
    x = k.params[0].value
    pid = b.op("program_id", axis=0)
    base = b.op("mul", [pid, b.const(4, D.i32)])
    for off in range(4):
        idx = b.op("add", [base, b.const(off, D.i32)]) if off else base
        v = b.op("load", [x, idx])
        b.op("store", [x, idx, b.op("add", [v, b.const(1.0, D.f32)])])
    out = check_preserves(vectorize.run, k, [np.arange(64, dtype=np.float32)], 16)
    assert count_ops(out, "vload") == 1 and count_ops(out, "vstore") == 1


def test_store_of_an_overlapping_element_blocks():
    # x[b+1] = 7 between loads of x[b+0] and x[b+1]: the load of b+1 must see the store.
    k, b = new_kernel("overlap", [("x", tensor(D.f32)), ("out", tensor(D.f32))])
    x, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0)
    base = b.op("mul", [pid, b.const(2, D.i32)])
    idx1 = b.op("add", [base, b.const(1, D.i32)])
    v0 = b.op("load", [x, base])
    b.op("store", [x, idx1, b.const(7.0, D.f32)])
    v1 = b.op("load", [x, idx1])
    b.op("store", [out, pid, b.op("add", [v0, v1])])
    out_k = check_preserves(vectorize.run, k, [np.arange(32, dtype=np.float32), np.zeros(16, np.float32)], 16)
    assert count_ops(out_k, "vload") == 0


@pytest.mark.parametrize("separator", ["barrier", "if"])
def test_barriers_and_regions_between_accesses_split_the_run(separator):
    def between(b, off):
        if off == 1:
            if separator == "barrier":
                b.op("barrier")
            else:
                b.if_(b.op("lt", [b.block.ops[0].result, b.const(3, D.i32)]))
    k = _gather_kernel(D.f32, 4, _times(4), between=between)
    out = check_preserves(vectorize.run, k, _args(D.f32, 64), (16,), (16,))
    # Offsets 0-1 and 2-3 merge on their own side; nothing moves across the separator.
    assert [op.attrs["width"] for op in out.walk() if op.opcode == "vload"] == [2, 2]


def test_shared_memory_copies_merge_across_global_loads():
    # s[t*4+k] = a[t*4+k]: shared arrays never alias global tensors.
    k, b = new_kernel("toshared", [("a", tensor(D.f32, True)), ("out", tensor(D.f32))])
    a, out = (p.value for p in k.params)
    tid = b.op("thread_id", axis=0)
    s = b.op("shared_alloc", [], dtype=D.f32, shape=(64,))
    base = b.op("mul", [tid, b.const(4, D.i32)])
    idxs = [base] + [b.op("add", [base, b.const(o, D.i32)]) for o in (1, 2, 3)]
    for idx in idxs:
        b.op("store", [s, idx, b.op("load", [a, idx])])
    b.op("barrier")
    for idx in idxs:
        b.op("store", [out, idx, b.op("load", [s, idx])])
    out_k = check_preserves(vectorize.run, k, [np.arange(64, dtype=np.float32), np.zeros(64, np.float32)],
                            (16,), (16,))
    assert count_ops(out_k, "vload") == 2 and count_ops(out_k, "vstore") == 2


def test_bool_tensors_are_left_alone():
    k, b = new_kernel("bools", [("a", tensor(D.bool_, True)), ("out", tensor(D.bool_))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0)
    base = b.op("mul", [pid, b.const(4, D.i32)])
    for off in range(4):
        idx = b.op("add", [base, b.const(off, D.i32)]) if off else base
        b.op("store", [out, idx, b.op("load", [a, idx])])
    assert print_kernel(apply_pass(vectorize.run, k)) == print_kernel(k)


def test_index_defined_after_the_first_load_blocks_the_load_merge():
    # The offset-0 index is computed after the load of offset 1: the vload could not be placed first.
    k, b = new_kernel("late", [("a", tensor(D.f32, True)), ("out", tensor(D.f32))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0)
    base = b.op("mul", [pid, b.const(2, D.i32)])
    v1 = b.op("load", [a, b.op("add", [base, b.const(1, D.i32)])])
    idx0 = b.op("add", [base, b.const(0, D.i32)])
    v0 = b.op("load", [a, idx0])
    b.op("store", [out, pid, b.op("sub", [v0, v1])])
    out_k = check_preserves(vectorize.run, k, [np.arange(32, dtype=np.float32), np.zeros(16, np.float32)], 16)
    assert count_ops(out_k, "vload") == 0
