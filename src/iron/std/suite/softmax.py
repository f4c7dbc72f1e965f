"""Tests and benches of :mod:`iron.std.softmax`: float64 oracles, tolerances from the rounding chain.

The register kernel is tested at 8 registers per thread (VEC * ITEMS = 8), so a group holds
``TEST_CAP`` = 2048 elements of every dtype; the shapes reach exactly that, and the online kernel's
start one past it.  The benches pick ITEMS the way the host function does.
"""

from __future__ import annotations

import math

import numpy as np

from iron import Depth, Expect, Setup, bench, bf16, f16, f32, log2_ceil, test_kernel
from iron.std import softmax as S

VECTORS = [{"T": f32, "VEC": 4}, {"T": f16, "VEC": 8}, {"T": bf16, "VEC": 8}]
#: 8 f32 registers per thread for every dtype: a 256-thread group holds 2048 elements.
REGISTER_BINDINGS = [{"T": f32, "VEC": 4, "ITEMS": 2}, {"T": f16, "VEC": 8, "ITEMS": 1},
                     {"T": bf16, "VEC": 8, "ITEMS": 1}]
TEST_CAP = 2048
#: What a SHORT_GROUP-thread group holds at 8 registers per thread.
SHORT_CAP = 8 * S.SHORT_GROUP
#: (rows, n): one element; 7; not a multiple of VEC nor of the group; more rows than the 16 groups
#: the tests launch (a group loops over rows); exactly what a group holds.
REGISTER_SHAPES = [(4, 1), (3, 7), (6, 1001), (40, 96), (3, TEST_CAP)]
#: The online kernel: any n, from one past what a group holds, with several chunks per thread.
ONLINE_SHAPES = [(3, 1), (3, 7), (40, 96), (2, TEST_CAP + 1), (3, 5000), (2, 6001)]
BENCH_SHAPES = {"interp": [(64, 1024)], "vulkan": [(512, 4096)], "*": [(16384, 4096), (4096, 16384), (4096, 1024)]}
#: Groups a test launches: fewer than its rows, so the row loop runs.
TEST_GROUPS = 16
#: Input scale: rows spread over ~15, so exp's arguments reach -15.
SCALE = 2.0
#: Row offsets, cycled over the rows: softmax ignores them, exp(x) without the max subtracted would
#: overflow (+100) or underflow (-100).
SHIFTS = (0.0, 100.0, -100.0)


def sum_depth(per_thread: int, w: int, group: int = S.GROUP) -> int:
    """Roundings on the longest path of a group sum (softmax.group_sum after a per-thread tree).

    The tree over a thread's registers: log2(per_thread); simd_sum, whose order the device picks
    (lane order on the interpreter, a butterfly on CUDA): W - 1 bounds both; the partials of the
    group / W subgroups: a strided loop, then one more subgroup sum of at most min(NS, W) terms.
    """
    ns = -(-group // w)
    return log2_ceil(per_thread) + (w - 1) + (-(-ns // w) - 1) + (min(ns, w) - 1)


def spread(x: np.ndarray, n: int) -> int:
    """The largest max(row) - x over the input: exp's argument, whose rounding (u |x - max|) exp
    turns into a relative error of |x - max| units: one rounding step per unit."""
    rows = x.reshape(-1, n).astype(np.float64)
    return math.ceil(float((rows.max(axis=1, keepdims=True) - rows).max())) if rows.size else 0


def softmax_oracle(x: np.ndarray, n: int, log_space: bool) -> Expect:
    rows = x.reshape(-1, n)
    y = rows - rows.max(axis=1, keepdims=True)
    lse = np.log(np.exp(y).sum(axis=1, keepdims=True))
    if log_space:
        # (x - max) - log(sum): absolute errors of the order of |x - max|, |log sum| and the sum's
        # relative error (an absolute error of log sum): the scale holds all three.
        return Expect((y - lse).reshape(-1), (np.abs(y) + np.abs(lse) + 1.0).reshape(-1))
    return Expect(np.exp(y - lse).reshape(-1))


def register_depth(k: int, w: int, spread_: int, log_space: bool, group: int = S.GROUP) -> Depth:
    # exp(x - max): the subtraction's rounding becomes spread steps of exp's result, exp itself 2.
    exp_steps = spread_ + 2
    total = sum_depth(k, w, group)
    if log_space:
        # sum's relative error (exp_steps + tree) becomes log's absolute error; log 2; two subtractions.
        return Depth(steps=1, f32_steps=exp_steps + total + 2 + 2)
    # the element's exp, the sum's (each term's exp, then the tree), 1/sum and the product.
    return Depth(steps=1, f32_steps=exp_steps + (exp_steps + total) + 2)


def online_depth(n: int, vec: int, aligned: bool, w: int, spread_: int, log_space: bool) -> Depth:
    chunks = -(-n // (S.GROUP * vec)) if aligned else -(-n // S.GROUP)
    width = vec if aligned else 1
    # Per thread, sequentially per chunk: the rescale exp(m - ref) (2 + its argument's |d| steps,
    # the |d| adding up to at most the spread), the product and the add; each term's exp (2 + spread)
    # and the chunk's sum of `width` terms; then the rescale to the row max (2 + spread).
    thread = chunks * (2 + 2) + spread_ + (2 + spread_) + (width - 1) + (2 + spread_)
    total = thread + sum_depth(1, w)
    if log_space:
        return Depth(steps=1, f32_steps=total + 2 + 2)
    return Depth(steps=1, f32_steps=(spread_ + 2) + total + 2)


def _rows_setup(case, log_space: bool, online: bool, groups_cap: int, items: int | None = None,
                group: int | None = None) -> Setup:
    rows, n = case.dims
    vec = case["VEC"]
    group = group or (S.GROUP if online else case["G"])
    shifts = np.resize(np.array(SHIFTS), rows)[:, None]
    x = (case.randn(rows, n, scale=SCALE, dtype=f32).astype(np.float64) + shifts).astype(case.randn(1).dtype)
    aligned = n % vec == 0
    spread_ = spread(x, n)
    if online:
        depth = online_depth(n, vec, aligned, case.simd_width, spread_, log_space)
    else:
        depth = register_depth(vec * (items or case["ITEMS"]), case.simd_width, spread_, log_space, group)
    binding = {"ITEMS": items, "G": group} if items else {}
    return Setup(args=[x, case.empty(rows, n), rows, n, aligned], grid=min(rows, groups_cap) * group,
                 group=group, oracle=lambda x, out, rows, n, aligned: softmax_oracle(x, n, log_space),
                 depth=depth, binding=binding, flops=5 * rows * n)


@test_kernel(S.softmax_rows, shapes=REGISTER_SHAPES,
             bindings=[{**b, "LOG": False, "G": S.GROUP} for b in REGISTER_BINDINGS], name="std/softmax/softmax")
def softmax_test(case) -> Setup:
    return _rows_setup(case, False, False, TEST_GROUPS)


@test_kernel(S.softmax_rows, shapes=REGISTER_SHAPES,
             bindings=[{**b, "LOG": True, "G": S.GROUP} for b in REGISTER_BINDINGS], name="std/softmax/log_softmax")
def log_softmax_test(case) -> Setup:
    return _rows_setup(case, True, False, TEST_GROUPS)


#: Short rows in SHORT_GROUP-thread groups (8 registers per thread: 256 elements a group), both spaces.
SHORT_SHAPES = [(4, 1), (3, 7), (40, 96), (6, 255), (3, SHORT_CAP)]


@test_kernel(S.softmax_rows, shapes=SHORT_SHAPES,
             bindings=[{**b, "LOG": log, "G": S.SHORT_GROUP} for b in REGISTER_BINDINGS for log in (False, True)],
             name="std/softmax/softmax_short_rows")
def softmax_short_test(case) -> Setup:
    return _rows_setup(case, case["LOG"], False, TEST_GROUPS)


@test_kernel(S.softmax_rows_online, shapes=ONLINE_SHAPES, bindings=[{**b, "LOG": False} for b in VECTORS],
             name="std/softmax/softmax_online")
def softmax_online_test(case) -> Setup:
    return _rows_setup(case, False, True, TEST_GROUPS)


@test_kernel(S.softmax_rows_online, shapes=ONLINE_SHAPES, bindings=[{**b, "LOG": True} for b in VECTORS],
             name="std/softmax/log_softmax_online")
def log_softmax_online_test(case) -> Setup:
    return _rows_setup(case, True, True, TEST_GROUPS)


# ---------------------------------------------------------------- benches

def _torch_softmax(x, out, rows, n, aligned):
    import torch

    return torch.softmax(x.reshape(rows, n), -1)


def _torch_log_softmax(x, out, rows, n, aligned):
    import torch

    return torch.log_softmax(x.reshape(rows, n), -1)


def _numpy_softmax(x, out, rows, n, aligned, log_space: bool = False):
    y = x.reshape(rows, n).astype(np.float32)
    y = y - y.max(axis=1, keepdims=True)
    lse = np.log(np.exp(y).sum(axis=1, keepdims=True))
    return (y - lse if log_space else np.exp(y - lse)).astype(out.dtype)


def _numpy_log_softmax(x, out, rows, n, aligned):
    return _numpy_softmax(x, out, rows, n, aligned, log_space=True)


def _bench_setup(case, log_space: bool, online: bool) -> Setup:
    n = case.dims[1]
    chosen = None if online else S.register_plan(n, case["VEC"], case.simd_width)
    if not online and chosen is None:
        raise ValueError(f"a row of {n} does not fit the register kernel: bench it with the online one")
    group, items = chosen or (None, None)
    return _rows_setup(case, log_space, online, S.MAX_GROUPS, items, group)


@bench(S.softmax_rows, shapes=BENCH_SHAPES, bindings=[{**b, "LOG": False} for b in VECTORS],
       reference={"cuda": _torch_softmax, "*": _numpy_softmax}, name="std/softmax/softmax")
def softmax_bench(case) -> Setup:
    return _bench_setup(case, False, False)


@bench(S.softmax_rows, shapes=BENCH_SHAPES, bindings=[{**b, "LOG": True} for b in VECTORS],
       reference={"cuda": _torch_log_softmax, "*": _numpy_log_softmax}, name="std/softmax/log_softmax")
def log_softmax_bench(case) -> Setup:
    return _bench_setup(case, True, False)


@bench(S.softmax_rows_online, shapes=BENCH_SHAPES, bindings=[{**b, "LOG": False} for b in VECTORS],
       reference={"cuda": _torch_softmax, "*": _numpy_softmax}, name="std/softmax/softmax_online")
def softmax_online_bench(case) -> Setup:
    # The bytes model stays "x once, out once": the kernel's second read shows as a lower GB/s.
    return _bench_setup(case, False, True)
