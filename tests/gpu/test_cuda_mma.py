"""mma.sync m16n8k16 fragments on a real NVIDIA GPU (sm_80+), against numpy; skips without one.

The emitter holds f16/bf16 -> f32 16x8x16 fragments in the PTX ISA's register layout and multiplies
with inline ``mma.sync``; elsewhere that code is only compiled (tests/codegen/test_emit_fragments.py).
A wrong lane layout or register packing shows up here as wrong elements.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from iron import In, T, Tensor, bf16, f16, f32, kernel, variants
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.lang import (barrier, frag_a, frag_acc, frag_b, frag_load_acc, frag_store, group_size, mma, shared,
                       simd_group_id, thread_id)


@pytest.fixture
def sm80(cuda):
    if int(cuda.arch[3:].rstrip("af")) < 80:
        pytest.skip(f"mma.sync m16n8k16 needs sm_80+, this GPU is {cuda.arch}")
    return cuda


@kernel(variants(T=[f16, bf16]))
def tile_16x8(a: In[T], b: In[T], c0: In[f32], c: Tensor[f32], ksteps: int):
    """C = C0 + A @ B for one 16x8 tile, K = 16 * ksteps (a dynamic loop: the accumulator is a slot)."""
    if simd_group_id() == 0:
        acc = frag_load_acc(c0, 0, 8, 16, 8)
        for kk in range(ksteps):
            acc = mma(frag_a(a, kk * 16, 16 * ksteps, 16, 16), frag_b(b, kk * 16 * 8, 8, 16, 8), acc)
        frag_store(c, 0, 8, acc)


@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_mma_sync_tile_matches_numpy(sm80, dtype) -> None:
    ksteps = 4
    host = np.float16 if dtype == f16 else ml_dtypes.bfloat16
    rng = np.random.default_rng(5)
    a = rng.standard_normal(16 * 16 * ksteps).astype(host)
    b = rng.standard_normal(16 * ksteps * 8).astype(host)
    c0 = rng.standard_normal(16 * 8).astype(np.float32)
    c = np.zeros(16 * 8, np.float32)
    ir = run_pipeline(tile_16x8.variant(T=dtype).lower(a, b, c0, c, ksteps), PassContext.for_target("cuda"))
    assert "mma.sync.aligned.m16n8k16" in emit_kernel(ir, "cuda").source
    sm80.launch(ir, [a, b, c0, c, ksteps], (64,), (64,))
    a64 = a.astype(np.float64).reshape(16, 16 * ksteps)
    b64 = b.astype(np.float64).reshape(16 * ksteps, 8)
    want = c0.astype(np.float64).reshape(16, 8) + a64 @ b64
    bound = (np.abs(c0).reshape(16, 8) + np.abs(a64) @ np.abs(b64)) * np.finfo(np.float32).eps * (16 * ksteps + 1)
    err = np.abs(c.reshape(16, 8) - want)
    assert np.all(err <= bound), f"worst element {np.unravel_index(np.argmax(err - bound), err.shape)}"


@kernel(variants(T=[f16, bf16], AL=["row", "col"], BL=["row", "col"]))
def through_shared(a: In[T], b: In[T], c: Tensor[f32], off: int):
    """C = A @ B for one 16x8x16 tile whose A (16x16) and B (16x8), given row-major, pass through shared
    memory at element offset ``off`` in the AL and BL layouts.  ``off`` a multiple of 8 takes ``ldmatrix``,
    else element loads."""
    a_s = shared(T, 16 * 16 + 16)
    b_s = shared(T, 16 * 16 + 16)
    for i in range(thread_id(0), 256, group_size(0)):
        if AL == "row":
            a_s[off + i] = a[i]
        else:
            a_s[off + (i % 16) * 16 + i // 16] = a[i]
        if i < 128:
            if BL == "row":
                b_s[off + i] = b[i]
            else:
                b_s[off + (i % 8) * 16 + i // 8] = b[i]
    barrier()
    if simd_group_id() == 0:
        fa = frag_a(a_s, off, 16, 16, 16, layout=AL)
        fb = frag_b(b_s, off, 8 if BL == "row" else 16, 16, 8, layout=BL)
        frag_store(c, 0, 8, mma(fa, fb, frag_acc(f32, 16, 8)))


@pytest.mark.parametrize("a_layout", ["row", "col"])
@pytest.mark.parametrize("b_layout", ["row", "col"])
@pytest.mark.parametrize("off", [0, 8, 3], ids=["aligned", "aligned8", "misaligned"])
@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_fragments_through_shared_memory_in_every_layout(sm80, dtype, a_layout, b_layout, off) -> None:
    """ldmatrix (aligned tiles, with and without .trans) and the element-load fallback give the same fragments."""
    host = np.float16 if dtype == f16 else ml_dtypes.bfloat16
    rng = np.random.default_rng(11)
    a = rng.standard_normal(256).astype(host)
    b = rng.standard_normal(128).astype(host)
    c = np.full(128, np.nan, np.float32)
    k = through_shared.variant(T=dtype, AL=a_layout, BL=b_layout)
    ir = run_pipeline(k.lower(a, b, c, off), PassContext.for_target("cuda"))
    source = emit_kernel(ir, "cuda").source
    assert source.count("asm volatile(\"ldmatrix.sync.aligned.m8n8") == 2
    sm80.launch(ir, [a, b, c, off], (64,), (64,))
    a64 = a.astype(np.float64).reshape(16, 16)
    b64 = b.astype(np.float64).reshape(16, 8)
    bound = (np.abs(a64) @ np.abs(b64)) * np.finfo(np.float32).eps * 17
    assert np.all(np.abs(c.reshape(16, 8) - a64 @ b64) <= bound)


@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
@pytest.mark.parametrize("n,major", [(64, "k"), (128, "n")])
def test_warpgroup_multiply_with_a_from_registers(cuda, dtype, n, major) -> None:
    """wgmma's register-A form reads the mma A fragment layout (tests/codegen/test_warpgroup_mma.py has the
    kernel, its interpreter run and its SASS): a wrong word order or lane layout shows here as wrong rows."""
    from codegen.test_warpgroup_mma import register_a, register_a_case

    if "wgmma" not in cuda.profile.features:
        pytest.skip(f"warpgroup multiplies need sm_90, this GPU is {cuda.arch}")
    a, b, c, want = register_a_case(dtype, n, major, seed=9)
    register_a.variant(T=dtype, N=n, MAJOR=major).launch(a, b, c, grid=(128,), group=(128,), backend="cuda")
    bound = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64) if major == "n" else
                                                     b.astype(np.float64).T)) * np.finfo(np.float32).eps * 5
    err = np.abs(c - want)
    assert np.all(err <= bound), f"worst element {np.unravel_index(np.argmax(err - bound), err.shape)}"


@pytest.mark.parametrize("pair", ["e4m3", "e5m2", "mixed"])
def test_warpgroup_multiply_of_8_bit_floats(cuda, pair) -> None:
    """wgmma's e4m3 / e5m2 forms read byte-swizzled K-major tiles (tests/codegen/test_warpgroup_mma.py has the
    kernel and its interpreter run): the products are exact, the hardware's sums keep fewer bits than f32 (about
    14), so each element stays within 2**-12 of the sum of the products' magnitudes."""
    from codegen.test_warpgroup_mma import _f8_inputs, probe_f8

    from iron import f8e4m3, f8e5m2

    if "wgmma" not in cuda.profile.features:
        pytest.skip(f"warpgroup multiplies need sm_90, this GPU is {cuda.arch}")
    ta, tb = {"e4m3": (f8e4m3, f8e4m3), "e5m2": (f8e5m2, f8e5m2), "mixed": (f8e4m3, f8e5m2)}[pair]
    a, b = _f8_inputs(ta, tb, 256, np.random.default_rng(3))
    c = np.full((64, 256), np.nan, np.float32)
    probe_f8.variant(TA=ta, TB=tb, N=256, PENDING=1).launch(a, b, c, grid=(128,), group=(128,), backend="cuda")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = np.abs(a64) @ np.abs(b64).T * 2.0 ** -12
    err = np.abs(c - a64 @ b64.T)
    assert np.all(err <= bound), f"worst element {np.unravel_index(np.argmax(err - bound), err.shape)}"


@pytest.mark.parametrize("n", [168, 24])
def test_warpgroup_multiply_of_any_eight_columns(cuda, n) -> None:
    """wgmma m64nNk16 for N / 8 not a power of two: the accumulator registers are N / 8 copies of mma.sync's 16 x 8
    layout (tests/codegen/test_warpgroup_mma.py has the kernel and its interpreter run)."""
    from codegen.test_warpgroup_mma import probe

    if "wgmma" not in cuda.profile.features:
        pytest.skip(f"warpgroup multiplies need sm_90, this GPU is {cuda.arch}")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    bt = rng.standard_normal((n, 64)).astype(np.float16)
    c = np.full((64, n), np.nan, np.float32)
    probe.variant(N=n, MAJOR="k", PENDING=0, SKEW=0).launch(a, bt, c, grid=(128,), group=(128,), backend="cuda")
    want = a.astype(np.float64) @ bt.astype(np.float64).T
    bound = np.abs(a.astype(np.float64)) @ np.abs(bt.astype(np.float64)).T * np.finfo(np.float32).eps * 5
    assert np.all(np.abs(c - want) <= bound)


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
@pytest.mark.parametrize("n", [256, 168, 24])
def test_row_reductions_of_warpgroup_accumulators(cuda, n, masked) -> None:
    """frag_row_max / frag_row_sum (and frag_mask) on wgmma's accumulators: each lane's registers of a row, then the
    quad's butterfly (tests/lang/test_fragment_math.py has the kernel and its interpreter run): a wrong register group
    or shuffle mask mixes rows and shows here as O(1) errors."""
    from lang.test_fragment_math import _expected, _operands, rows_of_product

    if "wgmma" not in cuda.profile.features:
        pytest.skip(f"warpgroup multiplies need sm_90, this GPU is {cuda.arch}")
    a, b = _operands(n, seed=11)
    c = np.full((64, n), np.nan, np.float32)
    rows_of_product.variant(N=n, MASKED=masked).launch(a, b, c, grid=(128,), group=(128,), backend="cuda")
    want, scale = _expected(a, b, masked)
    # the products summed in f32 by the hardware, then each row's sum in f32 in the butterfly's order
    assert np.all(np.abs(c - want) <= np.finfo(np.float32).eps * (64 + n) * scale)


@pytest.mark.parametrize("d,scale", [(64, False), (128, True)], ids=["d64", "d128-scaled"])
@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_accumulator_fed_back_as_a_from_registers(cuda, dtype, d, scale) -> None:
    """frag_acc_to_a on wgmma's accumulator, straight into wgmma's register-A form (attention's P @ V; the kernel
    and its interpreter run are in tests/lang/test_fragment_math.py), and frag_scale_rows across widths (the
    output's rows by the scores' row maxima): a wrong register move or row pick shows as O(1) errors."""
    from lang.test_fragment_math import _pv_case, probabilities_times_v

    if "wgmma" not in cuda.profile.features:
        pytest.skip(f"warpgroup multiplies need sm_90, this GPU is {cuda.arch}")
    q, k, v, want, bound = _pv_case(dtype, d, scale, seed=4)
    c = np.full((64, d), np.nan, np.float32)
    probabilities_times_v.variant(T=dtype, D=d, SCALE=scale).launch(q, k, v, c, grid=(128,), group=(128,),
                                                                    backend="cuda")
    assert np.all(np.abs(c - want) <= bound)
