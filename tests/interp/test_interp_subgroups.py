"""Subgroup reductions, votes and shuffles at widths 8, 32 and 64."""

from __future__ import annotations

import numpy as np
import pytest

from iron.core import dtypes as D
from iron.core.builder import tensor
from iron.core.eval import np_dtype
from iron.runtime.interp import run

from interp_kernels import KernelBuilder, same_bits

WIDTHS = (8, 32, 64)
rng = np.random.default_rng(11)


def subgroup_kernel(opcode: str, dt: D.DType, with_operand: bool = False, only_lanes_mod: int = 0):
    """``out[i] = opcode(x[i] [, arg[i]])``, run only by threads whose lane % only_lanes_mod == 0 (if set)."""
    params = {"x": tensor(dt, True), "out": tensor(dt)}
    if with_operand:
        params["arg"] = tensor(D.i32, True)
    kb = KernelBuilder(f"sg_{opcode}", **params)
    i = kb.gid()
    block = kb.b.block
    if only_lanes_mod:
        lane = kb.op("lane_id")
        cond = kb.op("eq", kb.op("rem", lane, kb.i32(only_lanes_mod)), kb.i32(0))
        block = kb.b.if_(cond).regions[0]
    with kb.b.at(block):
        x = kb.op("load", kb.p["x"], i)
        operands = [x] + ([kb.op("load", kb.p["arg"], i)] if with_operand else [])
        kb.op("store", kb.p["out"], i, kb.op(opcode, *operands))
    return kb.kernel


def launch(kernel, args, n, group, width):
    run(kernel, args, (n,), (group,), simd_width=width)


def lanes_of(n, group, width):
    """Per thread: (subgroup key, lane) for a 1-D launch."""
    t = np.arange(n) % group
    g = np.arange(n) // group
    return g * 1000 + t // width, t % width


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dt", (D.f32, D.f16, D.bf16), ids=str)
def test_simd_sum_adds_active_lanes_in_lane_order(width, dt):
    n, group = 256, 128
    x = (rng.standard_normal(n) * 100).astype(np_dtype(dt))
    out = np.zeros(n, dtype=np_dtype(dt))
    launch(subgroup_kernel("simd_sum", dt, only_lanes_mod=3), [x, out], n, group, width)
    key, lane = lanes_of(n, group, width)
    want = out.copy()
    for k in np.unique(key):
        members = np.flatnonzero((key == k) & (lane % 3 == 0))
        acc = np.float32(-0.0)
        for m in members:  # lane order, accumulated in f32
            acc = np.float32(acc + np.float32(x[m]))
        want[members] = np.array(acc).astype(np_dtype(dt))
    assert same_bits(out, want)
    assert (out[lane % 3 != 0] == 0).all()


@pytest.mark.parametrize("width", WIDTHS)
def test_simd_sum_of_ints_wraps_and_min_max_skip_inactive_lanes(width):
    n, group = 128, 64
    x = rng.integers(-2 ** 31, 2 ** 31, size=n, dtype=np.int32)
    key, lane = lanes_of(n, group, width)
    for opcode, fold in (("simd_sum", lambda v: ((sum(int(a) for a in v) + 2 ** 31) % 2 ** 32) - 2 ** 31),
                         ("simd_max", max), ("simd_min", min)):
        out = np.zeros(n, dtype=np.int32)
        launch(subgroup_kernel(opcode, D.i32, only_lanes_mod=2), [x, out], n, group, width)
        for k in np.unique(key):
            members = np.flatnonzero((key == k) & (lane % 2 == 0))
            assert (out[members] == fold(x[members].tolist())).all(), opcode


@pytest.mark.parametrize("width", WIDTHS)
def test_float_simd_max_ignores_nan(width):
    n = width
    x = rng.standard_normal(n).astype(np.float32)
    x[::2] = np.nan
    out = np.zeros(n, dtype=np.float32)
    launch(subgroup_kernel("simd_max", D.f32), [x, out], n, n, width)
    assert (out == np.nanmax(x)).all()


@pytest.mark.parametrize("width", WIDTHS)
def test_votes_consider_only_active_lanes(width):
    n, group = 2 * width, width
    x = np.zeros(n, dtype=bool)
    x[1] = True             # inactive lane (odd) in subgroup 0
    x[width + 2] = True     # active lane in subgroup 1
    for opcode, want0, want1 in (("simd_any", False, True), ("simd_all", False, False)):
        out = np.zeros(n, dtype=bool)
        launch(subgroup_kernel(opcode, D.bool_, only_lanes_mod=2), [x, out], n, group, width)
        assert (out[0:width:2] == want0).all() and (out[width::2] == want1).all(), opcode
    y = np.ones(n, dtype=bool)
    y[1] = False  # inactive lane
    out = np.zeros(n, dtype=bool)
    launch(subgroup_kernel("simd_all", D.bool_, only_lanes_mod=2), [y, out], n, group, width)
    assert out[0:width:2].all()


SHUFFLES = {
    "simd_shuffle": lambda lane, a, w: a % w,
    "simd_shuffle_xor": lambda lane, a, w: (lane ^ a) % w,
    "simd_shuffle_up": lambda lane, a, w: lane - a if 0 <= lane - a < w else lane,
    "simd_shuffle_down": lambda lane, a, w: lane + a if 0 <= lane + a < w else lane,
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("opcode", sorted(SHUFFLES))
def test_shuffles_read_the_lane_docs_ir_names(width, opcode):
    n, group = 4 * width, 2 * width
    x = rng.standard_normal(n).astype(np.float64)
    key, lane = lanes_of(n, group, width)
    if opcode == "simd_shuffle":
        arg = rng.integers(-3 * width, 3 * width, size=n).astype(np.int32)
    else:
        arg = rng.integers(0, width, size=n).astype(np.int32)
        arg[:3] = (width + 5, -2, 0)
    out = np.zeros(n, dtype=np.float64)
    launch(subgroup_kernel(opcode, D.f64, with_operand=True), [x, out, arg], n, group, width)
    base = np.arange(n) - lane
    src = np.array([SHUFFLES[opcode](int(lane[i]), int(arg[i]), width) for i in range(n)])
    assert out.tolist() == x[base + src].tolist()


@pytest.mark.parametrize("width", WIDTHS)
def test_broadcast_gives_every_lane_one_lanes_value(width):
    n = 2 * width
    x = np.arange(n, dtype=np.int64) * 3
    arg = np.full(n, 5 + width, dtype=np.int32)  # lane (5 + W) mod W = 5
    out = np.zeros(n, dtype=np.int64)
    launch(subgroup_kernel("simd_broadcast", D.i64, with_operand=True), [x, out, arg], n, n, width)
    assert out.tolist() == [15] * width + [(width + 5) * 3] * width


def test_partial_subgroups_reduce_over_the_lanes_that_exist():
    # Groups of 40 threads with W = 32: subgroup 1 of each group has 8 lanes.
    n, group = 80, 40
    x = np.arange(n, dtype=np.int32)
    out = np.zeros(n, dtype=np.int32)
    launch(subgroup_kernel("simd_sum", D.i32), [x, out], n, group, 32)
    want = [sum(range(g * 40, g * 40 + 32)) if t < 32 else sum(range(g * 40 + 32, g * 40 + 40))
            for g in range(2) for t in range(40)]
    assert out.tolist() == want


def test_default_simd_width_comes_from_the_options():
    from iron import config

    kb = KernelBuilder("width", out=tensor(D.i32))
    kb.op("store", kb.p["out"], kb.gid(), kb.op("simd_size"))
    out = np.zeros(4, dtype=np.int32)
    try:
        config.set_option("simd_width", 8)
        run(kb.kernel, [out], (4,), (4,))
        assert out.tolist() == [8] * 4
    finally:
        config.clear_overrides()
    run(kb.kernel, [out], (4,), (4,))
    assert out.tolist() == [32] * 4
