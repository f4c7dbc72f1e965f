"""Atomics: applied in order of the linear grid index, returning the old values."""

from __future__ import annotations

import numpy as np
import pytest

from iron.core import dtypes as D
from iron.core.builder import tensor
from iron.core.eval import np_dtype
from iron.runtime.interp import run

from interp_kernels import KernelBuilder

rng = np.random.default_rng(5)


def atomic_kernel(opcode: str, dt: D.DType, masked_lanes_mod: int = 0):
    """``old[i] = opcode(t, slot[i], (cmp[i],) v[i])`` for every (or every k-th) thread."""
    params = {"t": tensor(dt), "slot": tensor(D.i32, True), "v": tensor(dt, True), "old": tensor(dt)}
    if opcode == "atomic_cas":
        params["cmp"] = tensor(dt, True)
    kb = KernelBuilder(opcode, **params)
    i = kb.gid()
    block = kb.b.block
    if masked_lanes_mod:
        block = kb.b.if_(kb.op("eq", kb.op("rem", i, kb.i32(masked_lanes_mod)), kb.i32(0))).regions[0]
    with kb.b.at(block):
        operands = [kb.p["t"], kb.op("load", kb.p["slot"], i)]
        if opcode == "atomic_cas":
            operands.append(kb.op("load", kb.p["cmp"], i))
        operands.append(kb.op("load", kb.p["v"], i))
        kb.op("store", kb.p["old"], i, kb.op(opcode, *operands))
    return kb.kernel


def run_atomic(opcode, t, slot, v, cmp=None, group=64, masked_lanes_mod=0):
    old = np.zeros(len(v), dtype=t.dtype)
    args = [t, slot.astype(np.int32), v, old] + ([cmp] if cmp is not None else [])
    run(atomic_kernel(opcode, D.from_numpy(t.dtype), masked_lanes_mod), args, (len(v),), (group,))
    return old


def sequential(opcode, t, slot, v, cmp=None, active=None):
    """The oracle: apply the threads one by one in index order (numpy scalars keep the dtype's rounding)."""
    t = t.copy()
    old = np.zeros(len(v), dtype=t.dtype)
    for i in range(len(v)):
        if active is not None and not active[i]:
            continue
        s = slot[i]
        old[i] = t[s]
        if opcode == "atomic_add":
            t[s] = t.dtype.type(t[s] + v[i]) if t.dtype.kind == "f" else (t[s:s + 1] + v[i:i + 1])[0]
        elif opcode == "atomic_max":
            t[s] = np.fmax(t[s], v[i]) if t.dtype.kind == "f" else max(t[s], v[i])
        elif opcode == "atomic_min":
            t[s] = np.fmin(t[s], v[i]) if t.dtype.kind == "f" else min(t[s], v[i])
        elif opcode == "atomic_xchg":
            t[s] = v[i]
        elif opcode == "atomic_cas":
            if t[s:s + 1].view(f"u{t.itemsize}")[0] == cmp[i:i + 1].view(f"u{t.itemsize}")[0]:
                t[s] = v[i]
    return t, old


@pytest.mark.parametrize("slots", [1, 7, 3000], ids=lambda s: f"{s}-addresses")
@pytest.mark.parametrize("dt", (D.i32, D.u8, D.f32, D.f16, D.i64), ids=str)
@pytest.mark.parametrize("opcode", ("atomic_add", "atomic_max", "atomic_min", "atomic_xchg"))
def test_atomics_follow_thread_order(opcode, dt, slots):
    n = 4096
    npdt = np_dtype(dt)
    if dt.is_float:
        v = (rng.standard_normal(n) * 10).astype(npdt)
        t = (rng.standard_normal(slots) * 10).astype(npdt)
    else:
        info = np.iinfo(npdt)
        v = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=npdt)
        t = rng.integers(info.min, info.max, size=slots, endpoint=True, dtype=npdt)
    slot = rng.integers(0, slots, size=n)
    want_t, want_old = sequential(opcode, t, slot, v)
    got_old = run_atomic(opcode, t, slot, v)
    assert t.tobytes() == want_t.tobytes()
    assert got_old.tobytes() == want_old.tobytes()


def test_atomic_add_totals_under_heavy_contention():
    n = 1 << 16
    v = np.ones(n, dtype=np.int32)
    t = np.zeros(1, dtype=np.int32)
    old = run_atomic("atomic_add", t, np.zeros(n, dtype=np.int32), v, group=256)
    assert t[0] == n
    assert old.tolist() == list(range(n))  # each thread saw the count of the threads before it
    f = np.zeros(1, dtype=np.float32)
    fold = run_atomic("atomic_add", f, np.zeros(n, dtype=np.int32), np.full(n, 0.5, np.float32), group=256)
    assert f[0] == n * 0.5 and fold[-1] == (n - 1) * 0.5


@pytest.mark.parametrize("slots", [1, 2000], ids=lambda s: f"{s}-addresses")
def test_compare_and_swap_chains_in_thread_order(slots):
    n = 4000
    slot = np.arange(n) % slots
    t = np.zeros(slots, dtype=np.int32)
    # Thread i expects the slot to hold its rank among the slot's users: all succeed in order.
    rank = np.arange(n) // slots
    cmp = rank.astype(np.int32)
    v = (rank + 1).astype(np.int32)
    old = run_atomic("atomic_cas", t, slot, v, cmp)
    assert old.tolist() == rank.tolist()
    assert t.tolist() == [len(range(s, n, slots)) for s in range(slots)]


def test_compare_and_swap_lets_only_the_first_thread_take_a_lock():
    n = 300
    t = np.zeros(1, dtype=np.int32)
    v = np.arange(1, n + 1, dtype=np.int32)
    old = run_atomic("atomic_cas", t, np.zeros(n, np.int32), v, np.zeros(n, np.int32))
    assert t[0] == 1 and old[0] == 0 and (old[1:] == 1).all()


def test_float_compare_and_swap_compares_bits():
    t = np.array([np.nan, -0.0], dtype=np.float32)
    slot = np.array([0, 1, 1], dtype=np.int32)
    cmp = np.array([np.nan, 0.0, -0.0], dtype=np.float32)
    v = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    old = run_atomic("atomic_cas", t, slot, v, cmp)
    assert t[0] == 1.0 and t[1] == 3.0  # same NaN bits swap; +0.0 does not match -0.0
    assert np.isnan(old[0]) and old[1] == 0.0 and np.signbit(old[2])


def test_inactive_threads_do_not_apply_atomics():
    n = 64
    t = np.zeros(3, dtype=np.int32)
    slot = np.arange(n) % 3
    v = np.arange(n, dtype=np.int32)
    old = run_atomic("atomic_add", t, slot, v, masked_lanes_mod=4)
    want_t, want_old = sequential("atomic_add", np.zeros(3, np.int32), slot, v, active=np.arange(n) % 4 == 0)
    assert t.tolist() == want_t.tolist() and old.tolist() == want_old.tolist()


def test_atomic_order_is_the_linear_grid_index_in_2d():
    # Groups of 2x2 on a 4x4 grid: array order differs from x + y * 4.
    kb = KernelBuilder("order2d", t=tensor(D.i32), old=tensor(D.i32))
    x, y = kb.gid(0), kb.gid(1)
    lin = kb.op("add", x, kb.op("mul", y, kb.i32(4)))
    kb.op("store", kb.p["old"], lin, kb.op("atomic_xchg", kb.p["t"], kb.i32(0), lin))
    t = np.full(1, -1, dtype=np.int32)
    old = np.zeros(16, dtype=np.int32)
    run(kb.kernel, [t, old], (4, 4), (2, 2))
    assert old.tolist() == list(range(-1, 15)) and t[0] == 15


def test_shared_memory_histogram_with_atomics():
    kb = KernelBuilder("histogram", x=tensor(D.i32, True), hist=tensor(D.i32))
    i, t = kb.gid(), kb.tid()
    sh = kb.b.op("shared_alloc", [], hint="bins", dtype=D.i32, shape=(8,))
    kb.op("atomic_add", sh, kb.op("load", kb.p["x"], i), kb.i32(1))
    kb.b.op("barrier")
    flush = kb.b.if_(kb.op("lt", t, kb.i32(8)))
    with kb.b.at(flush.regions[0]):
        kb.op("atomic_add", kb.p["hist"], t, kb.op("load", sh, t))
    x = rng.integers(0, 8, size=1024).astype(np.int32)
    hist = np.zeros(8, dtype=np.int32)
    run(kb.kernel, [x, hist], (1024,), (128,))
    assert hist.tolist() == np.bincount(x, minlength=8).tolist()
