"""The interpreter refuses the launches a GPU refuses, and launches too large to hold in memory.

A kernel that passes on the interpreter must not fail, or be silently wrong, on a device: the
interpreter applies the portable launch limits (iron.runtime.launch_checks) before running.
"""

from __future__ import annotations

import numpy as np
import pytest

from iron import Tensor, f32, i32, kernel
from iron.core.errors import LaunchError
from iron.lang import barrier, group_id, program_id, shared, thread_id
from iron.runtime.interp.launch import MAX_THREADS

TILE = 16


@kernel
def tiled_matmul(a: Tensor[f32], b: Tensor[f32], c: Tensor[f32], n: int):
    """c = a @ b (n x n), 16x16 tiles staged in shared memory; the grid covers c in threads."""
    ta = shared(f32, (TILE, TILE))
    tb = shared(f32, (TILE, TILE))
    tx = thread_id(0)
    ty = thread_id(1)
    col = group_id(0) * TILE + tx
    row = group_id(1) * TILE + ty
    acc = 0.0
    for k0 in range(0, n, TILE):
        ta[ty, tx] = 0.0
        tb[ty, tx] = 0.0
        if row < n and k0 + tx < n:
            ta[ty, tx] = a[row * n + k0 + tx]
        if k0 + ty < n and col < n:
            tb[ty, tx] = b[(k0 + ty) * n + col]
        barrier()
        for k in range(TILE):
            acc += ta[ty, k] * tb[k, tx]
        barrier()
    if row < n and col < n:
        c[row * n + col] = acc


@kernel
def block_sum(x: Tensor[i32], out: Tensor[i32]):
    s = shared(i32, 128)
    t = thread_id(0)
    s[t] = 0
    if program_id(0) < x.size:
        s[t] = x[program_id(0)]
    barrier()
    if t == 0:
        total = 0
        for j in range(128):
            total += s[j]
        out[group_id(0)] = total


@kernel
def fill(out: Tensor[i32]):
    i = program_id(0)
    if i < out.size:
        out[i] = i


def test_tiled_matmul_over_whole_groups_is_right():
    rng = np.random.default_rng(0)
    n = 20
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    tiled_matmul.launch(a, b, c, n, grid=(32, 32), group=(TILE, TILE), backend="interp")
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_tiled_matmul_over_a_grid_ending_in_partial_groups_is_refused_not_wrong():
    # grid (20, 20) threads in (16, 16) groups: the edge groups' threads past the grid never run, so nobody
    # loads their part of the shared tiles; the interpreter used to return garbage there (max error 11.6).
    n = 20
    a = b = np.ones((n, n), np.float32)
    c = np.zeros((n, n), np.float32)
    with pytest.raises(LaunchError, match=r"kernel 'tiled_matmul': grid \(20, 20\) is not a multiple of the group "
                                          r"\(16, 16\), and the kernel uses barrier .*round the grid up"):
        tiled_matmul.launch(a, b, c, n, grid=(n, n), group=(TILE, TILE), backend="interp")
    assert not c.any()


def test_barrier_kernel_over_a_partial_last_group_is_refused():
    x, out = np.ones(1000, np.int32), np.zeros(8, np.int32)
    with pytest.raises(LaunchError, match=r"grid \(1000,\) is not a multiple of the group \(128,\)"):
        block_sum.launch(x, out, grid=(1000,), group=(128,), backend="interp")
    block_sum.launch(x, out, grid=(1024,), group=(128,), backend="interp")
    assert out.tolist() == [128] * 7 + [1000 - 7 * 128]


def test_kernels_without_group_wide_ops_may_end_in_a_partial_group():
    out = np.zeros(1000, np.int32)
    fill.launch(out, grid=(1000,), group=(128,), backend="interp")
    assert out.tolist() == list(range(1000))


@pytest.mark.parametrize("group,match", [
    ((2048,), r"group \(2048,\): axis 0 has 2048 threads, over the limit of 1024"),
    ((64, 32), r"group \(64, 32\) has 2048 threads, over the limit of 1024 per group"),
    ((1, 1, 128), r"group \(1, 1, 128\): axis 2 has 128 threads, over the limit of 64"),
])
def test_groups_over_the_portable_limits_are_refused(group, match):
    out = np.zeros(4096, np.int32)
    grid = tuple(g * 2 for g in group)
    with pytest.raises(LaunchError, match=match + r".*every GPU target"):
        fill.launch(out, grid=grid, group=group, backend="interp")


def test_a_launch_past_the_thread_limit_is_refused_before_allocating():
    out = np.zeros(4, np.int32)
    for grid in [(2**31,), (2**20, 2**12), (MAX_THREADS + 1,)]:
        with pytest.raises(LaunchError, match=rf"kernel 'fill': grid .* threads; the interpreter runs at most "
                                              rf"{MAX_THREADS} \(2\*\*27\) per launch.*split the work"):
            fill.launch(out, grid=grid, group=(1,) * len(grid), backend="interp")
    # Padding counts: 2**27 - 1 threads in groups of 1024 round up past the limit.
    with pytest.raises(LaunchError, match="interpreter runs at most"):
        fill.launch(out, grid=(MAX_THREADS + 1,), group=(1024,), backend="interp")
