"""Clusters: groups that receive each other's multicast tile copies and arrive on each other's barriers run on
the interpreter as on a GPU, what would go wrong where the groups drift apart is a located error, CUDA sm_90
emits clusters, multicast TMA and remote arrivals (compiled by NVRTC), and every other target runs a cluster of
one group and refuses larger ones at compile time."""

import re

import numpy as np
import pytest
from lang_support import assert_located, where

from iron import In, Tensor, f32, kernel, variants
from iron.codegen.capabilities import check_emitted_launch
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import profile
from iron.codegen.toolchains import check_source
from iron.core.errors import IronCompileError, LaunchError, UnsupportedOnTarget, UnsupportedSyntaxError
from iron.lang import (async_barriers, barrier_arrive, barrier_wait, cluster_groups, cluster_sync, copy_tile, group_id,
                       shared, thread_id, warp_roles)
from iron.runtime.interp.faults import InterpError

HERE = __file__
ROWS, COLS = 16, 32  # the tile every group of a cluster needs: ROWS x COLS f32, rows of 128 bytes
STEPS, S = 5, 2  # more tiles than ring slots: a slot is refilled while peers may still read it
THREADS = 64  # a producer role and a consumer role of 32


@kernel(variants(C=[1, 2, 4], MISUSE=["none", "own_release", "no_first_sync", "no_last_sync", "missing_piece"]))
def cluster_ring(a: In[f32], out: Tensor[f32], m: int):
    """The groups of a cluster share tile k of ``a`` (rows k * ROWS ..): group rank r copies its ROWS / C rows
    and multicasts them to every group of the cluster; each group's consumers read the whole tile (mirrored),
    add it into ``out`` rows of their group, and release the slot to every group of the cluster (each group's
    ``empty`` barrier hears from every group it copies into).  The misuses: release only the own group's slot,
    omit the first or the last cluster_sync, or leave one group's piece out."""
    full = async_barriers(S, 1)
    empty = async_barriers(S, (THREADS // 2) * (1 if MISUSE == "own_release" else C))
    ring = shared(f32, S * ROWS * COLS)
    rank = cluster_groups(C)
    role = warp_roles((THREADS // 2, THREADS // 2))
    if MISUSE != "no_first_sync":
        cluster_sync()
    t = thread_id(0)
    piece = ROWS // C
    if role == 0:
        if t == 0:
            for k in range(STEPS):
                s = k % S
                barrier_wait(empty, s, ((k // S) & 1) ^ 1)
                if MISUSE != "missing_piece" or rank == 0:
                    copy_tile(ring, s * ROWS * COLS + rank * piece * COLS, a, (m, COLS), (k * ROWS + rank * piece, 0),
                              (piece, COLS), full, s, layout="rows", multicast=True)
                barrier_arrive(full, s, bytes=ROWS * COLS * 4)
    else:
        j = t - THREADS // 2
        for k in range(STEPS):
            s = k % S
            barrier_wait(full, s, (k // S) & 1)
            for r in range(ROWS):
                e = (group_id(0) * ROWS + r) * COLS + j
                out[e] = out[e] + ring[s * ROWS * COLS + (ROWS - 1 - r) * COLS + COLS - 1 - j] * f32(k + 1)
            if MISUSE == "own_release":
                barrier_arrive(empty, s)
            else:
                for q in range(C):
                    barrier_arrive(empty, s, rank=q)
    if MISUSE != "no_last_sync":
        cluster_sync()


def _run(c: int, misuse: str = "none", groups: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(c)
    a = rng.standard_normal((STEPS * ROWS, COLS)).astype(np.float32)
    out = np.zeros((groups * ROWS, COLS), np.float32)
    cluster_ring.variant(C=c, MISUSE=misuse).launch(a, out, STEPS * ROWS, grid=(groups * THREADS,), group=(THREADS,),
                                                     backend="interp")
    return a, out


def _want(a: np.ndarray, groups: int) -> np.ndarray:
    """The sums in the kernel's order, each step rounded to f32 as the kernel rounds it."""
    tiles = a.reshape(STEPS, ROWS, COLS)[:, ::-1, ::-1]
    one = np.zeros((ROWS, COLS), np.float32)
    for k in range(STEPS):
        one = one + tiles[k] * np.float32(k + 1)
    return np.tile(one, (groups, 1))


@pytest.mark.parametrize("c", [1, 2, 4])
def test_every_group_of_a_cluster_gets_the_whole_tile_from_its_pieces(c) -> None:
    a, out = _run(c)
    np.testing.assert_array_equal(out, _want(a, 4))


@pytest.mark.parametrize("misuse, message, marker", [
    # Each group's empty barrier hears only from its own consumers: a peer refills a slot its readers may hold.
    ("own_release", r"group 0 copies into element 0 of 'ring' of group 1 again without waiting on an arrival of "
                    r"group 1's threads", "copy_tile(ring, s"),
    ("no_first_sync", r"reaches group 1 of its cluster before any cluster_sync\(\)", "copy_tile(ring, s"),
    ("no_last_sync", r"group 0 ends while another group of its cluster may still arrive on barrier \d of 'empty'",
     "rank=q"),
    ("missing_piece", r"waits on barrier 0 of 'full' for a phase of parity 0, but phase 0 is still in progress "
                      r"\(1 of 1 arrivals, 1024 bytes outstanding\)", "barrier_wait(full"),
])
def test_what_would_fail_on_a_gpu_is_a_located_error(misuse, message, marker) -> None:
    with pytest.raises(InterpError, match=message) as info:
        _run(2, misuse)
    assert (info.value.loc.file, info.value.loc.line) == (HERE, where(HERE, marker)[0])


def test_the_groups_along_axis_0_fill_whole_clusters() -> None:
    with pytest.raises(InterpError, match=r"clusters of 4 groups along axis 0, but the launch has 2 groups there"):
        _run(4, groups=2)
    emitted = emit_kernel(_legal(cluster_ring.variant(C=2, MISUSE="none"), "cuda"), "cuda", profile("cuda", "sm_90"))
    assert emitted.cluster_size == 2
    check_emitted_launch(emitted, (4 * THREADS,), (THREADS,))
    with pytest.raises(LaunchError, match=r"clusters of 2 groups along axis 0, but the launch has 3 groups there"):
        check_emitted_launch(emitted, (3 * THREADS,), (THREADS,))


@kernel(variants(CASE=["twice", "under_if", "size", "no_cluster_sync", "no_cluster_rank", "no_cluster_multicast",
                       "rank_bytes", "rank_range"]))
def misuse(a: In[f32], out: Tensor[f32]):
    bars = async_barriers(1, 1)
    ring = shared(f32, ROWS * COLS)
    t = thread_id(0)
    if CASE == "no_cluster_sync":
        cluster_sync()  # no_cluster_sync
    if CASE == "no_cluster_rank":
        barrier_arrive(bars, 0, rank=0)  # no_cluster_rank
    if CASE == "no_cluster_multicast":
        copy_tile(ring, 0, a, (ROWS, COLS), (0, 0), (ROWS, COLS), bars, 0, multicast=True)  # no_cluster_multicast
    if CASE == "under_if":
        if t < 5:
            cluster_groups(2)  # under_if
    if CASE == "size":
        cluster_groups(3)  # size
    cluster_groups(2)
    if CASE == "twice":
        cluster_groups(2)  # twice
    if CASE == "rank_bytes":
        barrier_arrive(bars, 0, bytes=16, rank=1)  # rank_bytes
    if CASE == "rank_range":
        barrier_arrive(bars, 0, rank=2)  # rank_range
    out[t] = ring[t]


@pytest.mark.parametrize("case, cls, message, at", [
    ("twice", UnsupportedSyntaxError, "a kernel joins its groups into clusters once", "cluster_groups"),
    ("under_if", UnsupportedSyntaxError, r"cluster_groups\(\) inside a helper or under run-time control flow",
     "cluster_groups"),
    ("size", IronCompileError, r"cluster_groups\(\) joins 1, 2, 4, 8 groups into a cluster, got 3", "3"),
    ("no_cluster_sync", IronCompileError, r"cluster_sync\(\) meets the groups of this group's cluster, but the kernel "
                                          r"has no clusters", "cluster_sync"),
    ("no_cluster_rank", IronCompileError, r"barrier_arrive\(\.\.\., rank=\) arrives on another group of the cluster, "
                                          r"but the kernel has no clusters", "0)"),
    ("no_cluster_multicast", IronCompileError, r"copies into every group of the cluster, but the kernel has no "
                                               r"clusters", "True"),
    ("rank_bytes", IronCompileError, r"barrier_arrive\(\.\.\., rank=\) announces no bytes", "16"),
    ("rank_range", IronCompileError, r"rank 2 of a cluster of 2 groups", "2)"),
])
def test_misuse_is_a_located_compile_error(case, cls, message, at) -> None:
    with pytest.raises(cls, match=message) as info:
        misuse.variant(CASE=case).ir()
    assert_located(info.value, HERE, f"# {case}", at=at)


def _legal(k, target: str):
    return run_pipeline(k.ir, PassContext(target=target))


def test_cuda_sm90_emits_the_cluster_multicast_and_remote_arrivals(require_toolchain) -> None:
    src = emit_kernel(_legal(cluster_ring.variant(C=2, MISUSE="none"), "cuda"), "cuda", profile("cuda", "sm_90")).source
    assert re.search(r'__global__ void __cluster_dims__\(2, 1, 1\) __launch_bounds__\(64\) ', src), src
    assert "mov.u32 %0, %%cluster_ctarank;" in src
    assert re.search(r'mbarrier::complete_tx::bytes"\n\s*"\.multicast::cluster "\n.*\[%4\], %5;"\n'
                     r'.*"h"\(\(unsigned short\)3\)', src), src
    assert "mapa.shared::cluster.u32 ra, %0, %1" in src
    assert "mbarrier.arrive.shared::cluster.b64 _, [ra]" in src
    assert src.count("barrier.cluster.arrive.release;\\nbarrier.cluster.wait.acquire;") == 2
    require_toolchain("nvrtc")
    check_source("cuda", src)


@kernel(variants(C=[1, 2]))
def in_order(a: In[f32], out: Tensor[f32], m: int):
    """cluster_ring's steps in program order (every thread waits where every thread runs, as targets without
    asynchronous barriers need): a cluster of C groups, each copying its piece of every tile to all of them."""
    full = async_barriers(1, 1)
    empty = async_barriers(1, 32 * C)
    ring = shared(f32, ROWS * COLS)
    rank = cluster_groups(C)
    cluster_sync()
    t = thread_id(0)
    piece = ROWS // C
    for k in range(STEPS):
        barrier_wait(empty, 0, (k & 1) ^ 1)
        if t == 0:
            copy_tile(ring, rank * piece * COLS, a, (m, COLS), (k * ROWS + rank * piece, 0), (piece, COLS), full, 0,
                      layout="rows", multicast=True)
            barrier_arrive(full, 0, bytes=ROWS * COLS * 4)
        barrier_wait(full, 0, k & 1)
        for r in range(ROWS):
            e = (group_id(0) * ROWS + r) * COLS + t
            out[e] = out[e] + ring[(ROWS - 1 - r) * COLS + COLS - 1 - t] * f32(k + 1)
        for q in range(C):
            barrier_arrive(empty, 0, rank=q)
    cluster_sync()


@pytest.mark.parametrize("c", [1, 2])
def test_in_program_order_too(c) -> None:
    rng = np.random.default_rng(c)
    a = rng.standard_normal((STEPS * ROWS, COLS)).astype(np.float32)
    out = np.zeros((4 * ROWS, COLS), np.float32)
    in_order.variant(C=c).launch(a, out, STEPS * ROWS, grid=(4 * 32,), group=(32,), backend="interp")
    np.testing.assert_array_equal(out, _want(a, 4))


@pytest.mark.parametrize("target, arch", [("cuda", "sm_80"), ("hip", None), ("spirv", None), ("metal", None)])
def test_without_clusters_a_cluster_of_one_group_runs_and_more_are_refused(target, arch, require_toolchain) -> None:
    prof = profile(target, arch) if arch else None
    with pytest.raises(UnsupportedOnTarget, match=r"cluster_groups\(2\): clusters of groups exist on NVIDIA Hopper"):
        emit_kernel(_legal(in_order.variant(C=2), target), target, prof)
    src = emit_kernel(_legal(in_order.variant(C=1), target), target, prof).source
    assert not re.search(r"__cluster_dims__|multicast|mapa|barrier\.cluster|cluster_ctarank", src)
    require_toolchain(target if target != "cuda" else "nvrtc")
    check_source(target, src)


def test_sm90_without_a_cluster_emits_plain_copies_and_arrivals() -> None:
    src = emit_kernel(_legal(cluster_ring.variant(C=1, MISUSE="none"), "cuda"), "cuda", profile("cuda", "sm_90")).source
    assert not re.search(r"__cluster_dims__|multicast|mapa|barrier\.cluster|cluster_ctarank", src)
    assert "cp.async.bulk.tensor.2d" in src
