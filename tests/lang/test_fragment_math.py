"""Math on accumulator fragments beyond + - *: row reductions (``frag_row_max``, ``frag_row_sum``), float functions
(``exp(acc)``, ...), ``max`` / ``min`` element by element, masks by (row, column) (``frag_mask``), an accumulator's
columns as an A operand (``frag_acc_to_a``) and rows scaled by per-row factors (``frag_scale_rows``).  Their meaning
on the interpreter against numpy (warpgroup accumulators of any width; the 16 x 8 tiles of ``mma`` run attention's
steps in tests/corpus/fragments.py on every backend), the plan each layout's table gives the emitters (checked by
simulating it), the CUDA sm_90 form (NVRTC), and the located errors: a non-accumulator, a fragment a matrix unit
holds whole, a layout whose rows no butterfly gathers, a function fragments do not take, factors whose rows
differ."""

import ml_dtypes
import numpy as np
import pytest
from lang.lang_support import assert_located, where  # importable from tests/gpu too

import iron
from iron import In, T, Tensor, bf16, f16, f32, kernel, variants
from iron.codegen import mma as units
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import profile
from iron.codegen.toolchains import check_source
from iron.core.errors import IronCompileError, UnsupportedOnTarget
from iron.lang import (barrier, exp, frag_a, frag_acc, frag_acc_to_a, frag_b, frag_load_acc, frag_mask, frag_row_max,
                       frag_row_sum, frag_scale_rows, frag_store, mma, mma_wg, mma_wg_wait, shared, sign, simd_group_id,
                       static_range, sw128, thread_id)
from iron.runtime.interp.faults import InterpError

HERE = __file__


@iron.func
def stage(tile, src, rows):
    """``rows`` x 64 values of ``src`` (row-major) into ``tile`` at their swizzled offsets."""
    for i in range(thread_id(0), rows * 64, 128):
        tile[sw128(i // 64, i % 64)] = src[i]


@kernel(variants(N=[256, 168, 24], MASKED=[False, True]))
def rows_of_product(a: In[f16], b: In[f16], c: Tensor[f32]):
    """c (64 x N) = P - (row max of P) + (row sum of P) / 4 for P = a (64 x 64) @ b^T (b: N x 64), on the
    warpgroup's accumulators (16 rows a subgroup); MASKED: P's columns from N - 5 and past the row's index - 3
    first take -64 (a causal mask with keys 3 behind the queries and a sequence end)."""
    a_s = shared(f16, 64 * 64)
    b_s = shared(f16, N * 64)
    stage(a_s, a, 64)
    stage(b_s, b, N)
    barrier()
    p = mma_wg(a_s, 0, b_s, 0, frag_acc(f32, 16, N), k=64)
    if MASKED:
        p = frag_mask(p, -64.0, cols=N - 5, diagonal=simd_group_id() * 16 - 3)
    frag_store(c, simd_group_id() * 16 * N, N, p - frag_row_max(p) + frag_row_sum(p) * 0.25)


@kernel(variants(T=[f16, bf16], D=[64, 128], SCALE=[False, True]))
def probabilities_times_v(q: In[T], k: In[T], v: In[T], c: Tensor[f32]):
    """c (64 x D) = round_T(S) @ V for S = q @ k^T (q, k: 64 x 64; v: 64 keys x D): S from one warpgroup multiply,
    its columns then fed to four more as A from registers (attention's P @ V, as FlashAttention-3 does on Hopper:
    the accumulator's registers are already the A operand's); SCALE: each output row times its row's largest
    score (frag_scale_rows across widths: attention's rescaling)."""
    q_s = shared(T, 64 * 64)
    k_s = shared(T, 64 * 64)
    v_s = shared(T, 64 * D)
    stage(q_s, q, 64)
    stage(k_s, k, 64)
    for i in range(thread_id(0), 64 * D, 128):
        v_s[((i % D) // 64) * 4096 + sw128(i // D, (i % D) % 64)] = v[i]  # k-by-n: 64-column blocks
    barrier()
    scores = mma_wg(q_s, 0, k_s, 0, frag_acc(f32, 16, 64), k=64)
    o = frag_acc(f32, 16, D)
    for ks in static_range(4):
        o = mma_wg(frag_acc_to_a(scores, ks * 16, T), 0, v_s, 0, o, k=16, b_major="n", b_block=4096, k0=ks * 16,
                   pending=1)
    mma_wg_wait(0)
    if SCALE:
        o = frag_scale_rows(o, frag_row_max(scores))
    frag_store(c, simd_group_id() * 16 * D, D, o)


def _pv_case(dtype, d: int = 64, scale: bool = False, seed: int = 0):
    host = np.float16 if dtype == f16 else ml_dtypes.bfloat16
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((64, 64)).astype(host) for _ in range(2))
    v = rng.standard_normal((64, d)).astype(host)
    s = q.astype(np.float64) @ k.astype(np.float64).T
    want = s.astype(np.float32).astype(host).astype(np.float64) @ v.astype(np.float64)
    # a score within f32's error of a rounding boundary may round the other way: one unit of T's last place
    bound = (np.abs(s) @ np.abs(v.astype(np.float64))) * (2.0 ** -7 if dtype == bf16 else 2.0 ** -10)
    if scale:
        top = s.max(axis=1, keepdims=True)
        want, bound = want * top, bound * np.abs(top)
    return q, k, v, want, bound


@pytest.mark.parametrize("d,scale", [(64, False), (128, True)], ids=["d64", "d128-scaled"])
@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_interp_feeds_an_accumulator_back_as_a_from_registers(dtype, d, scale) -> None:
    q, k, v, want, bound = _pv_case(dtype, d, scale)
    c = np.full((64, d), np.nan, np.float32)
    probabilities_times_v.variant(T=dtype, D=d, SCALE=scale).launch(q, k, v, c, grid=(128,), group=(128,),
                                                                    backend="interp")
    assert np.all(np.abs(c - want) <= bound)


def test_cuda_sm90_moves_the_accumulators_registers_into_a(require_toolchain) -> None:
    """No shared memory between the two multiplies: the scores' registers, rounded and packed, are the A operand."""
    kern = run_pipeline(probabilities_times_v.variant(T=bf16, D=128, SCALE=True).ir, PassContext(target="cuda"))
    src = emit_kernel(kern, "cuda", profile("cuda", "sm_90")).source
    assert "through the subgroup's scratch" not in src and "mma_scratch" not in src
    require_toolchain("nvrtc")
    check_source("cuda", src)


def _operands(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((64, 64)).astype(np.float16), rng.standard_normal((n, 64)).astype(np.float16)


def _expected(a, b, masked=False):
    p = a.astype(np.float64) @ b.astype(np.float64).T
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T
    if masked:
        q, k = np.meshgrid(np.arange(64), np.arange(len(b)), indexing="ij")
        hidden = (k >= len(b) - 5) | (k - q > -3)
        p, scale = np.where(hidden, -64.0, p), np.where(hidden, 64.0, scale)
    return p - p.max(axis=1, keepdims=True) + p.sum(axis=1, keepdims=True) * 0.25, scale.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
@pytest.mark.parametrize("n", [256, 168, 24])
def test_interp_reduces_each_row_of_a_warpgroup_accumulator(n, masked) -> None:
    a, b = _operands(n)
    c = np.full((64, n), np.nan, np.float32)
    rows_of_product.variant(N=n, MASKED=masked).launch(a, b, c, grid=(128,), group=(128,), backend="interp")
    want, scale = _expected(a, b, masked)
    # products exact, each row's sum rounded once to f32 (the interpreter's exact sums)
    assert np.all(np.abs(c - want) <= 2.0 ** -22 * (scale + np.abs(want))), np.abs(c - want).max()


def test_max_takes_numbers_over_nan_and_sum_keeps_it() -> None:
    @kernel
    def rows_with_nan(x: In[f32], c: Tensor[f32]):
        acc = frag_load_acc(x, 0, 8, 16, 8)
        frag_store(c, 0, 8, frag_row_max(acc))
        frag_store(c, 128, 8, frag_row_sum(acc))

    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    x[3, 5] = np.nan
    x[7] = np.nan
    c = np.zeros(256, np.float32)
    rows_with_nan.launch(x, c, grid=(32,), group=(32,), backend="interp")
    row_max, row_sum = c[:128].reshape(16, 8), c[128:].reshape(16, 8)
    assert row_max[3, 0] == 31 and np.isnan(row_max[7]).all() and (row_max[0] == 7).all()
    assert np.isnan(row_sum[3]).all() and row_sum[0, 0] == 28


@pytest.mark.parametrize("strategy", [s for s in units.STRATEGIES.values() if s.has_lane_layout],
                         ids=lambda s: s.name)
def test_every_accumulator_layout_has_a_plan_that_sums_its_rows(strategy) -> None:
    """The plan from the layout's table, run on random data (each lane's groups, then the butterfly), gives
    every slot its row's sum."""
    shapes = sorted({(r.rows, r.cols) for r in strategy.layouts if r.role == "acc"})
    widths = (strategy.lane_width,) if strategy.lane_width else (8, 32, 64)
    rng = np.random.default_rng(1)
    for (rows, cols) in shapes:
        for width in widths:
            if (rows * cols) % width:
                continue
            dtype = next(r.dtypes[0] for r in strategy.layouts if r.role == "acc" and (r.rows, r.cols) == (rows, cols))
            layout = strategy.fragment_layout("acc", rows, cols, dtype, width)
            plan = units.row_plan(layout)
            if plan is None:  # the portable layout at widths whose rows are not lane cosets
                assert strategy.name == "portable" and cols & (cols - 1), (rows, cols, width)
                continue
            table = layout.to_table()
            m = rng.integers(-1000, 1000, (rows, cols)).astype(np.float64)  # sums exact in any order
            regs = m[table[..., 0], table[..., 1]]  # (lanes, registers)
            got = np.empty_like(regs)
            for g in plan.groups:
                v = regs[:, list(g)].sum(axis=1)
                for mask in plan.lane_masks:
                    v = v + v[np.arange(layout.lane_width) ^ mask]
                got[:, list(g)] = v[:, None]
            np.testing.assert_array_equal(got, m.sum(axis=1)[table[..., 0]])


def test_cuda_sm90_reduces_warpgroup_rows_with_two_shuffles(require_toolchain) -> None:
    """A 16 x 256 accumulator: each lane's 64 registers of a row, then lanes 1 and 2 apart (the quad)."""
    k = run_pipeline(rows_of_product.variant(N=256, MASKED=False).ir, PassContext(target="cuda"))
    src = emit_kernel(k, "cuda", profile("cuda", "sm_90")).source
    assert src.count("__shfl_xor_sync(0xffffffffu, ") == 8  # 2 rows a lane x 2 masks x (max, sum)
    require_toolchain("nvrtc")
    check_source("cuda", src)


@kernel(variants(CASE=["not_acc", "whole_matrix", "no_plan", "exp_of_a", "sign", "whole_exp", "whole_max",
                       "mask_value", "whole_mask", "to_a_cols", "scale_rows", "whole_scale"]))
def misuse(x: In[f32], c: Tensor[f32]):
    if CASE == "not_acc":
        frag_row_max(frag_a(x, 0, 16, 16, 16))  # not_acc
    elif CASE == "exp_of_a":
        exp(frag_a(x, 0, 16, 16, 16))  # exp_of_a
    elif CASE == "sign":
        sign(frag_acc(f32, 16, 8))  # sign
    elif CASE == "mask_value":
        frag_mask(frag_acc(f32, 16, 8), x[0] > 0.0)  # mask_value
    elif CASE == "scale_rows":
        frag_scale_rows(frag_acc(f32, 16, 8), frag_acc(f32, 8, 8))  # scale_rows
    elif CASE == "to_a_cols":
        frag_acc_to_a(frag_acc(f32, 16, 16), 8, f16)  # to_a_cols
    elif CASE == "no_plan":
        frag_store(c, 0, 24, frag_row_max(frag_load_acc(x, 0, 24, 16, 24)))  # no_plan
    else:
        acc = mma(frag_a(x, 0, 8, 8, 8), frag_b(x, 0, 8, 8, 8), frag_acc(f32, 8, 8))
        if CASE == "whole_matrix":
            frag_store(c, 0, 8, frag_row_sum(acc))  # whole_matrix
        elif CASE == "whole_scale":
            frag_store(c, 0, 8, frag_scale_rows(acc, acc))  # whole_scale
        elif CASE == "whole_mask":
            frag_store(c, 0, 8, frag_mask(acc, 0.0, cols=3))  # whole_mask
        elif CASE == "whole_exp":
            frag_store(c, 0, 8, exp(acc))  # whole_exp
        else:
            frag_store(c, 0, 8, max(acc, 0.0))  # whole_max


@pytest.mark.parametrize("case,message,at", [
    ("not_acc", r"frag_row_max\(\) needs an acc fragment as 'acc'", "frag_a"),
    ("exp_of_a", r"exp\(\) of a fragment .*accumulators take the float functions and abs", "frag_a"),
    ("sign", r"sign\(\) of a fragment", "frag_acc"),
    ("mask_value", r"the masked elements", "x[0] > 0.0"),
    ("to_a_cols", r"frag_acc_to_a\(\) takes 16 columns of a 16-row accumulator from column 8", "8"),
    ("scale_rows", r"frag_scale_rows\(\) scales frag<acc,f32,16x8> by the rows of frag<acc,f32,8x8>",
     "frag_acc(f32, 8"),
])
def test_a_non_accumulator_or_function_is_a_located_type_error(case, message, at) -> None:
    with pytest.raises(IronCompileError, match=message) as info:
        misuse.variant(CASE=case).ir()
    assert_located(info.value, HERE, f"# {case}", at=at)


@pytest.mark.parametrize("case,target,message,at", [
    ("whole_matrix", "metal", r"the row sum of a fragment the matrix unit holds whole \(metal_simdgroup_8x8",
     "frag_row"),
    ("no_plan", "cuda", r"the row max of a 16 x 24 fragment in this layout", "frag_row"),
    ("whole_exp", "metal", r"elementwise 'exp' on a fragment the matrix unit holds whole", "exp"),
    ("whole_max", "metal", r"elementwise 'max' on a fragment the matrix unit holds whole", "max"),
    ("whole_mask", "metal", r"masking a fragment the matrix unit holds whole", "frag_mask"),
    ("whole_scale", "metal", r"scaling the rows of a fragment the matrix unit holds whole", "frag_scale_rows"),
])
def test_what_no_lane_can_compute_is_a_located_capability_error(case, target, message, at) -> None:
    k = run_pipeline(misuse.variant(CASE=case).ir, PassContext(target=target))
    with pytest.raises(UnsupportedOnTarget, match=message) as info:
        emit_kernel(k, target)
    assert_located(info.value, HERE, f"# {case}", at=at)


def test_factors_whose_rows_differ_are_a_located_run_time_error() -> None:
    @kernel
    def uneven(x: In[f32], c: Tensor[f32]):
        acc = frag_load_acc(x, 0, 8, 16, 8)
        frag_store(c, 0, 8, frag_scale_rows(acc, acc))  # uneven

    x = np.ones((16, 8), np.float32)
    x[5, 3] = 2.0
    with pytest.raises(InterpError, match=r"row 5 of the factors holds different values .*\(1\.0 and 2\.0\)") as info:
        uneven.launch(x, np.zeros(128, np.float32), grid=(32,), group=(32,), backend="interp")
    assert (info.value.loc.file, info.value.loc.line) == (HERE, where(HERE, "# uneven")[0])


def test_the_builtins_are_kernel_only() -> None:
    with pytest.raises(iron.KernelOnlyError):
        frag_row_max(None)
