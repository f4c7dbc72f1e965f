"""Shared memory and barriers: a tree reduction per group, and its speed."""

from __future__ import annotations

import time

import numpy as np

from iron.core import dtypes as D
from iron.core.builder import tensor
from iron.runtime.interp import run

from interp_kernels import GROUP, KernelBuilder, reduction_kernel, tree_sum


def test_shared_memory_tree_reduction_matches_the_same_order_in_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(8 * GROUP).astype(np.float32)
    out = np.zeros(8, dtype=np.float32)
    run(reduction_kernel(), [x, out], (x.size,), (GROUP,))
    assert out.tolist() == tree_sum(x, GROUP).tolist()
    assert np.allclose(out, x.reshape(8, -1).astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


def test_shared_arrays_are_per_group_and_start_at_zero():
    kb = KernelBuilder("shared_zero", out=tensor(D.i32))
    t = kb.tid()
    sh = kb.b.op("shared_alloc", [], hint="scratch", dtype=D.i32, shape=(4, 8))
    before = kb.op("load", sh, t)
    kb.b.op("barrier")
    kb.op("store", sh, t, kb.op("add", kb.op("group_id", axis=0), kb.i32(1)))
    kb.b.op("barrier")
    after = kb.op("load", sh, kb.op("rem", kb.op("add", t, kb.i32(1)), kb.i32(32)))
    kb.op("store", kb.p["out"], kb.gid(), kb.op("add", kb.op("mul", before, kb.i32(100)), after))
    out = np.zeros(96, dtype=np.int32)
    run(kb.kernel, [out], (96,), (32,))
    assert out.tolist() == [g + 1 for g in range(3) for _ in range(32)]


def test_64k_thread_reduction_is_fast():
    rng = np.random.default_rng(4)
    n = 1 << 16
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n // GROUP, dtype=np.float32)
    k = reduction_kernel()
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        run(k, [x, out], (n,), (GROUP,))
        best = min(best, time.perf_counter() - start)
    print(f"\n64K-thread shared-memory reduction: {best * 1000:.1f} ms (best of 2)")
    assert out.tolist() == tree_sum(x, GROUP).tolist()
    assert best < 1.0
