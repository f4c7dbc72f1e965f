"""Matrix fragments: fill, load, store and mma for every shape and layout."""

from __future__ import annotations

import numpy as np
import pytest

from iron.core import dtypes as D
from iron.core.builder import tensor
from iron.core.eval import np_dtype
from iron.core.types import MMA_SHAPES, FragmentType
from iron.runtime.interp import run

from interp_kernels import KernelBuilder, round_to, same_bits

rng = np.random.default_rng(9)


def mma_kernel(m: int, n: int, k: int, in_dt: D.DType, acc_dt: D.DType, a_layout: str, b_layout: str,
               acc_from_memory: bool):
    """Each subgroup s computes D_s = A_s @ B_s + C_s on its own (M x K), (K x N), (M x N) tiles."""
    kb = KernelBuilder("mma_tile", A=tensor(in_dt, True), B=tensor(in_dt, True), C=tensor(acc_dt, True),
                       Dout=tensor(acc_dt))
    sg = kb.op("add", kb.op("mul", kb.op("group_id", axis=0), kb.op("num_simd_groups")), kb.op("simd_group_id"))

    def tile_base(size):
        return kb.op("mul", sg, kb.i32(size))

    a_ld = k if a_layout == "row" else m
    b_ld = n if b_layout == "row" else k
    a = kb.op("frag_load", kb.p["A"], tile_base(m * k), kb.i32(a_ld), role="a", dtype=in_dt, rows=m, cols=k,
              layout=a_layout)
    b = kb.op("frag_load", kb.p["B"], tile_base(k * n), kb.i32(b_ld), role="b", dtype=in_dt, rows=k, cols=n,
              layout=b_layout)
    if acc_from_memory:
        c = kb.op("frag_load", kb.p["C"], tile_base(m * n), kb.i32(n), role="acc", dtype=acc_dt, rows=m, cols=n,
                  layout="row")
    else:
        c = kb.op("frag_fill", kb.const(0.25, acc_dt), role="acc", dtype=acc_dt, rows=m, cols=n)
    d = kb.op("mma", a, b, c)
    kb.op("frag_store", kb.p["Dout"], tile_base(m * n), kb.i32(n), d, layout="row")
    return kb.kernel


def tiles(count, rows, cols, dt):
    values = rng.standard_normal((count, rows, cols))
    return round_to(values, dt) if dt.bits == 16 else values.astype(np_dtype(dt))


@pytest.mark.parametrize("shape", MMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("in_dt,acc_dt", [(D.f16, D.f32), (D.bf16, D.f32), (D.f32, D.f32), (D.f16, D.f16)],
                         ids=["f16-f32", "bf16-f32", "f32-f32", "f16-f16"])
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col"), ("row", "col")], ids="-".join)
def test_mma_equals_a_float64_matmul_rounded_once(shape, in_dt, acc_dt, layouts):
    m, n, k = shape
    width, groups, per_group = 32, 2, 2  # four subgroups, each with its own tiles
    count = groups * per_group
    a, b = tiles(count, m, k, in_dt), tiles(count, k, n, in_dt)
    c = tiles(count, m, n, acc_dt)
    stored_a = a if layouts[0] == "row" else a.transpose(0, 2, 1)
    stored_b = b if layouts[1] == "row" else b.transpose(0, 2, 1)
    out = np.zeros((count, m, n), dtype=np_dtype(acc_dt))
    kernel = mma_kernel(m, n, k, in_dt, acc_dt, *layouts, acc_from_memory=True)
    run(kernel, [np.ascontiguousarray(stored_a), np.ascontiguousarray(stored_b), c, out],
        (groups * per_group * width,), (per_group * width,), simd_width=width)
    exact = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    assert same_bits(out, round_to(exact, acc_dt))


def test_frag_fill_gives_every_element_the_value():
    m, n, k = 16, 8, 16
    a = np.zeros((1, m, k), np.float16)
    b = np.zeros((1, k, n), np.float16)
    out = np.zeros((1, m, n), np.float32)
    run(mma_kernel(m, n, k, D.f16, D.f32, "row", "row", acc_from_memory=False),
        [a, b, np.zeros((1, m, n), np.float32), out], (32,), (32,), simd_width=32)
    assert (out == 0.25).all()


@pytest.mark.parametrize("width", (8, 64))
def test_fragments_belong_to_whole_subgroups_at_every_width(width):
    m, n, k = 8, 8, 8
    count = 128 // width
    a, b, c = tiles(count, m, k, D.f32), tiles(count, k, n, D.f32), tiles(count, m, n, D.f32)
    out = np.zeros((count, m, n), np.float32)
    run(mma_kernel(m, n, k, D.f32, D.f32, "row", "row", acc_from_memory=True), [a, b, c, out], (128,), (128,),
        simd_width=width)
    exact = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    assert same_bits(out, exact.astype(np.float32))


def test_frag_store_to_shared_memory_then_read_after_a_barrier():
    kb = KernelBuilder("via_shared", out=tensor(D.f32))
    sh = kb.b.op("shared_alloc", [], hint="tile", dtype=D.f32, shape=(8, 8))
    f = kb.op("frag_fill", kb.op("cast", kb.op("group_id", axis=0), to=D.f32), role="acc", dtype=D.f32,
              rows=8, cols=8)
    kb.op("frag_store", sh, kb.i32(0), kb.i32(8), f, layout="col")
    kb.b.op("barrier")
    t = kb.tid()
    kb.op("store", kb.p["out"], kb.gid(), kb.op("load", sh, kb.op("add", t, t)))
    out = np.full(64, -1.0, np.float32)
    run(kb.kernel, [out], (64,), (32,), simd_width=32)
    assert out.tolist() == [0.0] * 32 + [1.0] * 32


def test_an_accumulator_fragment_carried_in_a_var_across_a_k_loop():
    m = n = kstep = 16
    k_total = 64
    kb = KernelBuilder("k_loop", A=tensor(D.f16, True), B=tensor(D.f16, True), C=tensor(D.f32))
    acc_type = FragmentType("acc", D.f32, m, n)
    acc = kb.op("var", type=acc_type, hint="acc")
    kb.op("var_store", acc, kb.op("frag_fill", kb.const(0.0, D.f32), role="acc", dtype=D.f32, rows=m, cols=n))
    loop = kb.b.for_(kb.i32(0), kb.i32(k_total), kb.i32(kstep), hint="kk")
    with kb.b.at(loop.regions[0]):
        kk = loop.regions[0].args[0]
        a = kb.op("frag_load", kb.p["A"], kk, kb.i32(k_total), role="a", dtype=D.f16, rows=m, cols=kstep,
                  layout="row")
        b = kb.op("frag_load", kb.p["B"], kb.op("mul", kk, kb.i32(n)), kb.i32(n), role="b", dtype=D.f16,
                  rows=kstep, cols=n, layout="row")
        kb.op("var_store", acc, kb.op("mma", a, b, kb.op("var_load", acc)))
    kb.op("frag_store", kb.p["C"], kb.i32(0), kb.i32(n), kb.op("var_load", acc), layout="row")
    a = tiles(1, m, k_total, D.f16)[0]
    b = tiles(1, k_total, n, D.f16)[0]
    out = np.zeros((m, n), np.float32)
    run(kb.kernel, [a, b, out], (32,), (32,), simd_width=32)
    want = np.zeros((m, n), np.float32)
    for k0 in range(0, k_total, kstep):  # rounded to f32 after every mma, like the kernel
        part = a[:, k0:k0 + kstep].astype(np.float64) @ b[k0:k0 + kstep].astype(np.float64)
        want = (want.astype(np.float64) + part).astype(np.float32)
    assert out.tolist() == want.tolist()
