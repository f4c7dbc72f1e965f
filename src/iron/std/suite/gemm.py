"""Tests and benches of iron.std.gemm: C = act(A @ B + bias) against float64 numpy.

The oracle is ``act(A @ B + bias)`` in float64 on the exact inputs, with ``Expect(scale = |A| @ |B| +
|bias|)``: a dot product's rounding error is relative to the sum of its |terms|, and every activation
here has |act(x)| <= |x|, so the same scale bounds the error after it.  See :func:`gemm_depth` for the
rounding chain.
"""

from __future__ import annotations

import math

import numpy as np

from iron import Depth, Expect, Setup, bench, bf16, f16, f32, test_kernel

from ..gemm import (CUDA_MMA_SYNC_M16N8K16, FMA_BM, FMA_BN, FMA_THREADS, SM80_4W, SM80_WIDE, block_tile, device_traits,
                    fragment_config, gemm_fma, gemm_mma, launch_geometry, portable_small)
from ..gemm_few import SPLIT, few_geometry, gemm_few
from ..gemm_wg import WG_BM, WG_DEFAULT, WG_THREADS, gemm_wg
from ..gemm_ws import WS_DEFAULT, gemm_ws, ws_geometry


def _shape(m: int, n: int, k: int) -> dict[str, int]:
    return {"M": m, "N": n, "K": k}


# 1x1x1; one whole fragment; odd M, N, K (scalar loads of A and B, a partial K step, a partial store);
# a whole 128x128 tile and one row past it (two row tiles) with N not a multiple of 8; K < 4 and N past
# one tile (scalar A loads, two column tiles, a scalar column tail); M past a tile with K = one FMA step.
SHAPES = [_shape(1, 1, 1), _shape(16, 16, 16), _shape(33, 17, 45), _shape(128, 128, 64), _shape(130, 70, 96),
          _shape(5, 131, 3), _shape(129, 4, 8)]
# The matrix kernel on shapes the registry never draws elsewhere: N past two column tiles with whole
# 16-byte rows everywhere (every vector path), and K = 136 (five K steps, the last one partial).
MMA_EXTRA = [_shape(7, 264, 40), _shape(40, 24, 136)]
#: The other bindings (dtypes, layouts, epilogues) on the shapes that reach every tail.
SHORT = [_shape(1, 1, 1), _shape(33, 17, 45), _shape(130, 70, 96), _shape(5, 131, 3)]
#: lavapipe compiles the matrix kernel slowly (~30 s per specialisation): fewer, smaller shapes there.
VULKAN_MMA = [_shape(1, 1, 1), _shape(33, 17, 45), _shape(70, 40, 72)]

BENCH = {"interp": [_shape(64, 64, 64)], "vulkan": [_shape(512, 512, 512)],
         "*": [_shape(4096, 4096, 4096), _shape(8192, 8192, 8192)]}
MMA_BENCH = {**BENCH, "vulkan": [_shape(256, 256, 256)]}


def _flags(t, bt: bool, bias: bool, act: str) -> dict:
    return {"T": t, "BT": bt, "BIAS": bias, "ACT": act}


# Each dtype, layout, bias and activation at least once; the first list runs everywhere, the second
# (more compile time on lavapipe than it proves there) on the interpreter and the GPUs.
FMA_BINDINGS = [_flags(f32, False, False, "none"), _flags(f16, True, True, "relu"),
                _flags(bf16, False, True, "gelu_tanh")]
FMA_MORE = [_flags(f32, True, True, "silu"), _flags(f32, False, True, "gelu_tanh"), _flags(f16, False, False, "none"),
            _flags(bf16, True, False, "relu")]
MMA_BINDINGS = [_flags(f16, True, True, "gelu_tanh")]
# bf16 fragments cannot come from shared memory on SPIR-V (bf16 is stored as bits there): not on vulkan.
MMA_MORE = [_flags(f16, False, False, "none"), _flags(bf16, False, True, "silu"), _flags(bf16, True, False, "relu")]

#: The activations' own f32 roundings (relu is exact; silu: exp, add, divide, with exp a few ulp;
#: gelu_tanh: the cube, the polynomial, tanh, the products) and the bound on their slope, by which an
#: error in their argument grows (|silu'| <= 1.1, |gelu_tanh'| <= 1.13).
ACT_STEPS = {"none": 0, "relu": 0, "silu": 5, "gelu_tanh": 9}
ACT_SLOPE = {"none": 1.0, "relu": 1.0, "silu": 1.1, "gelu_tanh": 1.13}


def gemm_depth(k: int, bias: bool, act: str) -> Depth:
    """Roundings on the longest path to C[i, j], for both kernels.

    The sum of k exact products (f16/bf16 products are exact in f32; an f32 fma rounds once) in f32:
    gemm_fma's fma chain takes k roundings in order; gemm_mma's matrix unit adds each K step's products
    in its own order (the PTX ISA leaves the order and the internal precision of mma.sync to the
    hardware) and the k / fk steps in order.  Any association of an n-term sum is within (n - 1) u
    sum |terms| (Higham, Accuracy and Stability, 4.2), so k f32 steps bound both; a unit that truncates
    instead of rounding costs at most 2u per addition, still inside the tolerance of k steps
    (rtol = 1e-6 * k / 2, about 8u per step).  Then the bias (one f32 add), the activation (its own
    roundings, and its slope times everything before), and one rounding to T.
    """
    before = k + (1 if bias else 0)
    return Depth(steps=1, f32_steps=math.ceil(ACT_SLOPE[act] * before) + ACT_STEPS[act])


def _act64(x: np.ndarray, act: str) -> np.ndarray:
    if act == "relu":
        return np.maximum(x, 0.0)
    if act == "silu":
        return x / (1.0 + np.exp(-x))
    if act == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return x


def make_oracle(bt: bool, has_bias: bool, act: str):
    """act(A @ B + bias) in float64, for the kernels' argument order (a, b, bias, c, m, n, k)."""

    def oracle(a, b, bias, c, m, n, k):
        A = a.reshape(m, k)
        B = b.reshape(n, k).T if bt else b.reshape(k, n)
        pre = A @ B
        scale = np.abs(A) @ np.abs(B)
        if has_bias:
            pre = pre + bias.reshape(1, n)
            scale = scale + np.abs(bias).reshape(1, n)
        return Expect(_act64(pre, act), scale=scale)

    return oracle


def _inputs(case, m: int, n: int, k: int) -> list:
    bt, has_bias = case["BT"], case["BIAS"]
    b = case.randn(n, k) if bt else case.randn(k, n)
    bias = case.randn(n) if has_bias else case.randn(1)  # unread without BIAS
    return [case.randn(m, k), b, bias, case.empty(m, n), m, n, k]


def _matmul_torch(a, b, bias, c, m, n, k):
    import torch

    return torch.matmul(a.view(m, k), b.view(k, n))


def _matmul_numpy(a, b, bias, c, m, n, k):
    f = np.float32
    return (a.reshape(m, k).astype(f) @ b.reshape(k, n).astype(f)).astype(c.dtype)


# ---------------------------------------------------------------- the FMA kernel

@test_kernel(gemm_fma, shapes=SHAPES, bindings=FMA_BINDINGS, name="std/gemm/fma")
@test_kernel(gemm_fma, shapes={"vulkan": [], "*": SHORT}, bindings=FMA_MORE, name="std/gemm/fma_variants")
@bench(gemm_fma, shapes=BENCH, bindings=[_flags(f32, False, False, "none")],
       reference={"cuda": _matmul_torch, "*": _matmul_numpy}, name="std/gemm/fma")
def fma_setup(case):
    m, n, k = case["M"], case["N"], case["K"]
    grid, group = launch_geometry(m, n, FMA_THREADS, (FMA_BM, FMA_BN))
    return Setup(args=_inputs(case, m, n, k), grid=grid, group=group,
                 oracle=make_oracle(case["BT"], case["BIAS"], case["ACT"]),
                 depth=gemm_depth(k, case["BIAS"], case["ACT"]), flops=2 * m * n * k)


# ---------------------------------------------------------------- the matrix kernel

def mma_binding(case) -> dict:
    """The device's configuration (fragment_config), else the small portable one (lavapipe: no unit)."""
    traits = device_traits(case.backend)
    return fragment_config(traits, case["T"], case["BT"]) or portable_small(traits.lane_width)


@test_kernel(gemm_mma, shapes={"vulkan": VULKAN_MMA, "*": SHAPES + MMA_EXTRA}, bindings=MMA_BINDINGS,
             name="std/gemm/mma")
@test_kernel(gemm_mma, shapes={"vulkan": [], "*": SHORT}, bindings=MMA_MORE,
             name="std/gemm/mma_variants")
@bench(gemm_mma, shapes=MMA_BENCH, bindings=[_flags(f16, False, False, "none")],
       reference={"cuda": _matmul_torch, "*": _matmul_numpy}, name="std/gemm/mma")
@bench(gemm_mma, shapes={**MMA_BENCH, "vulkan": []}, bindings=[_flags(bf16, False, False, "none")],
       reference={"cuda": _matmul_torch, "*": _matmul_numpy}, name="std/gemm/mma_bf16")
def mma_setup(case):
    m, n, k = case["M"], case["N"], case["K"]
    binding = mma_binding(case)
    grid, group = launch_geometry(m, n, binding["THREADS"], block_tile(binding))
    return Setup(args=_inputs(case, m, n, k), grid=grid, group=group, binding=binding,
                 oracle=make_oracle(case["BT"], case["BIAS"], case["ACT"]),
                 depth=gemm_depth(k, case["BIAS"], case["ACT"]), flops=2 * m * n * k, matrix=True)


# ---------------------------------------------------------------- a tuning alternative: 8 subgroups, 128x256

@test_kernel(gemm_mma, shapes={"vulkan": [], "*": [_shape(130, 270, 96), _shape(33, 17, 45)]},
             bindings=[_flags(bf16, True, True, "relu")], name="std/gemm/mma_wide")
@bench(gemm_mma, shapes={**MMA_BENCH, "vulkan": []}, bindings=[_flags(f16, False, False, "none")],
       reference={"cuda": _matmul_torch, "*": _matmul_numpy}, name="std/gemm/mma_wide")
def mma_wide_setup(case):
    """SM80_WIDE where the device runs fragments natively (CUDA) or exactly (interp): 8 subgroups of 32."""
    m, n, k = case["M"], case["N"], case["K"]
    # 64-wide subgroups (interp only): 512 threads, K steps of 32 so each thread still loads whole chunks.
    binding = {**SM80_WIDE, "THREADS": 256} if case.simd_width <= 32 else {**SM80_WIDE, "BK": 32, "THREADS": 512}
    grid, group = launch_geometry(m, n, binding["THREADS"], block_tile(binding))
    return Setup(args=_inputs(case, m, n, k), grid=grid, group=group, binding=binding,
                 oracle=make_oracle(case["BT"], case["BIAS"], case["ACT"]),
                 depth=gemm_depth(k, case["BIAS"], case["ACT"]), flops=2 * m * n * k, matrix=True)


# ---------------------------------------------------------------- deeper pipelines: 3 or 4 K steps in flight

# A K tail copied element by element; 5 K steps of asynchronous copies (the ring wraps); N past a multiple
# of 8 (A asynchronous, B element by element).
STAGE_SHAPES = [_shape(33, 17, 45), _shape(40, 24, 136), _shape(130, 70, 96)]


@test_kernel(gemm_mma, shapes={"vulkan": [], "*": STAGE_SHAPES}, bindings=[_flags(f16, False, True, "relu"),
                                                                          _flags(bf16, True, False, "none")],
             name="std/gemm/mma_stages")
def mma_stages_setup(case):
    """A ring of 4 shared buffers of BK 16 on CUDA (46 KiB; 53 KiB, past the static 48, where B is (n, k)), of 3 on the
    interpreter's small tiles: every wait and refill of the ring, K tails included."""
    m, n, k = case["M"], case["N"], case["K"]
    if device_traits(case.backend).matrix_unit is CUDA_MMA_SYNC_M16N8K16:
        binding = {**SM80_4W, "BK": 16, "STAGES": 4, "THREADS": 128}
    else:
        binding = {**portable_small(case.simd_width), "STAGES": 3}
    grid, group = launch_geometry(m, n, binding["THREADS"], block_tile(binding))
    return Setup(args=_inputs(case, m, n, k), grid=grid, group=group, binding=binding,
                 oracle=make_oracle(case["BT"], case["BIAS"], case["ACT"]),
                 depth=gemm_depth(k, case["BIAS"], case["ACT"]), flops=2 * m * n * k, matrix=True)


# ---------------------------------------------------------------- warpgroups (mma_wg: CUDA sm_90, and the interpreter)

# Every tail of the swizzled copies and of the epilogue: one element; M, N, K all ragged (element-by-element
# copies); a whole 128 x 256 tile with K = 3 steps and one row past it; N past one BN = 128 tile with whole
# 16-byte rows (asynchronous copies, the ring wrapping at K = 5 steps).
WG_SHAPES = [_shape(1, 1, 1), _shape(33, 17, 45), _shape(129, 256, 192), _shape(70, 136, 320)]
WG_BINDINGS = [{**_flags(f16, False, False, "none"), **WG_DEFAULT},
               {**_flags(bf16, True, True, "gelu_tanh"), "BN": 128, "STAGES": 3, "PENDING": 1, "KP": 2}]
# Synchronous multiplies (PENDING 0), the shortest ring, K steps of one and two panels.
WG_MORE = [{**_flags(f16, True, True, "relu"), "BN": 256, "STAGES": 2, "PENDING": 0, "KP": 2},
           {**_flags(bf16, False, True, "silu"), "BN": 128, "STAGES": 3, "PENDING": 0, "KP": 1}]


@test_kernel(gemm_wg, shapes={"vulkan": [], "*": WG_SHAPES}, bindings=WG_BINDINGS, name="std/gemm/wg")
@test_kernel(gemm_wg, shapes={"vulkan": [], "*": WG_SHAPES[1:3]}, bindings=WG_MORE, name="std/gemm/wg_variants")
@bench(gemm_wg, shapes={**MMA_BENCH, "vulkan": []}, bindings=[{**_flags(f16, False, False, "none"), **WG_DEFAULT}],
       reference={"cuda": _matmul_torch, "*": _matmul_numpy}, name="std/gemm/wg")
@bench(gemm_wg, shapes={**MMA_BENCH, "vulkan": []}, bindings=[{**_flags(bf16, False, False, "none"), **WG_DEFAULT}],
       reference={"cuda": _matmul_torch, "*": _matmul_numpy}, name="std/gemm/wg_bf16")
def wg_setup(case):
    """Two warpgroups of four 32-lane subgroups per group (docs/std/gemm.md, "Warpgroups")."""
    m, n, k = case["M"], case["N"], case["K"]
    grid, group = launch_geometry(m, n, WG_THREADS, (WG_BM, case["BN"]))
    return Setup(args=_inputs(case, m, n, k), grid=grid, group=group,
                 oracle=make_oracle(case["BT"], case["BIAS"], case["ACT"]),
                 depth=gemm_depth(k, case["BIAS"], case["ACT"]), flops=2 * m * n * k, matrix=True)


# ---------------------------------------------------------------- warp roles (tile copies + mma_wg: CUDA sm_90)

# Tile copies take rows of whole 16-byte chunks (K and, for B given (k, n), N multiples of 8): one row; M and
# N past a tile with K over two steps and a partial one (zero-filled by the copies); a whole 128 x 256 tile
# and one row past it (the ring wrapping at three steps); N past one BN = 128 tile over five K steps.
WS_SHAPES = [_shape(1, 8, 8), _shape(40, 24, 136), _shape(129, 264, 192), _shape(70, 136, 320)]
WS_BINDINGS = [{**_flags(f16, False, False, "none"), **WS_DEFAULT},
               {**_flags(bf16, True, True, "gelu_tanh"), "BN": 128, "STAGES": 4}]
# The shortest ring on both layouts, with the other epilogues (an activation without a bias stages f32 sums
# too); WS_DEFAULT's ring with a bias, whose f32 staging leaves room for two subgroups at a time (without
# one, the sums are staged as T, four subgroups at a time).
WS_MORE = [{**_flags(f16, True, True, "relu"), "BN": 256, "STAGES": 2},
           {**_flags(bf16, False, False, "silu"), "BN": 128, "STAGES": 2},
           {**_flags(bf16, True, True, "none"), **WS_DEFAULT},
           # 168 columns (21 blocks of 8: the width that gives 512 x 11008 two whole waves on 132 multiprocessors)
           {**_flags(bf16, True, False, "none"), "BN": 168, "STAGES": 5},
           # clusters of two groups, each copying half of B's tile (its rows given (n, k), its column blocks
           # given (k, n)) into both; 129 rows leave the second group of the last pair of tile rows empty.
           {**_flags(bf16, True, True, "none"), "BN": 128, "STAGES": 4, "CLUSTER": 2},
           {**_flags(f16, False, False, "relu"), "BN": 256, "STAGES": 3, "CLUSTER": 2},
           # 168 rows of B given (n, k) in pieces of whole 8-row atoms: 88 and 80
           {**_flags(bf16, True, False, "none"), "BN": 168, "STAGES": 5, "CLUSTER": 2}]


@test_kernel(gemm_ws, shapes={"vulkan": [], "*": WS_SHAPES}, bindings=WS_BINDINGS, name="std/gemm/ws")
@test_kernel(gemm_ws, shapes={"vulkan": [], "*": WS_SHAPES[1:3]}, bindings=WS_MORE, name="std/gemm/ws_variants")
@bench(gemm_ws, shapes={**MMA_BENCH, "vulkan": []}, bindings=[{**_flags(bf16, False, False, "none"), **WS_DEFAULT}],
       reference={"cuda": _matmul_torch, "*": _matmul_numpy}, name="std/gemm/ws_bf16")
def ws_setup(case):
    """A producer and two consumer warpgroups per group, one group per output tile (docs/std/gemm.md, "Warp
    roles")."""
    return _ws_setup(case, None)


# Persistent groups: fewer groups than tiles, so each loops over tiles and the ring runs on across them (three
# groups over the 6 tiles of 129 x 264 at BN 256 and the 2 of 70 x 136 at BN 128; two over 1 x 1 and 40 x 24).
@test_kernel(gemm_ws, shapes={"vulkan": [], "*": WS_SHAPES}, bindings=WS_BINDINGS + WS_MORE,
             name="std/gemm/ws_persistent")
def ws_persistent_setup(case):
    return _ws_setup(case, 3)


# Clusters of four groups, each copying its share of B's tile into all (32 of 128 rows given (n, k); given (k, n)
# one 64-column block of 256, or of 128 the first two groups one each and the others none): 400 rows make four
# tile rows (the last 16 rows long), one cluster taking the tile columns in turn, so the ring runs on across them.
WS_CLUSTER4 = [{**_flags(bf16, True, True, "none"), "BN": 128, "STAGES": 3, "CLUSTER": 4},
               {**_flags(f16, False, False, "relu"), "BN": 256, "STAGES": 2, "CLUSTER": 4},
               {**_flags(bf16, False, True, "gelu_tanh"), "BN": 128, "STAGES": 4, "CLUSTER": 4},
               # 168 rows of B given (n, k) in pieces of whole 8-row atoms: 48, 48, 48 and 24
               {**_flags(bf16, True, False, "none"), "BN": 168, "STAGES": 5, "CLUSTER": 4}]


@test_kernel(gemm_ws, shapes={"vulkan": [], "*": [_shape(400, 136, 136)]}, bindings=WS_CLUSTER4,
             name="std/gemm/ws_cluster4")
def ws_cluster4_setup(case):
    return _ws_setup(case, 4)


def _ws_setup(case, groups):
    m, n, k = case["M"], case["N"], case["K"]
    grid, group = ws_geometry(m, n, case["BN"], groups, case.binding.get("CLUSTER", 1))
    return Setup(args=_inputs(case, m, n, k), grid=grid, group=group,
                 oracle=make_oracle(case["BT"], case["BIAS"], case["ACT"]),
                 depth=gemm_depth(k, case["BIAS"], case["ACT"]), flops=2 * m * n * k, matrix=True)


# ---------------------------------------------------------------- a few rows (gemm_few: decode steps of a batch)

# One element; one whole fragment; M < 16 with N and K ragged (element-by-element copies, a partial K step);
# 16 rows over three K steps of whole 16-byte rows with N past two groups' columns (the ring wrapping at 3
# stages); K under one chunk.
FEW_SHAPES = [_shape(1, 1, 1), _shape(16, 16, 16), _shape(3, 40, 200), _shape(16, 72, 384), _shape(5, 131, 3)]
FEW_BINDINGS = [{**_flags(f16, True, True, "gelu_tanh"), "BN": 16, "BK": 64, "STAGES": 3}]  # 19 KiB: Vulkan's 32
# bf16 (not on Vulkan: SPIR-V keeps it as bits); the widest tile over the shortest K steps and deepest ring; the
# other epilogues.
FEW_MORE = [{**_flags(bf16, True, False, "none"), "BN": 16, "BK": 128, "STAGES": 4},
            {**_flags(f16, True, True, "none"), "BN": 32, "BK": 128, "STAGES": 4},
            {**_flags(bf16, True, True, "silu"), "BN": 64, "BK": 64, "STAGES": 6},
            {**_flags(f16, True, False, "relu"), "BN": 32, "BK": 256, "STAGES": 3}]


@test_kernel(gemm_few, shapes={"vulkan": [_shape(3, 40, 200), _shape(16, 16, 16)], "*": FEW_SHAPES},
             bindings=FEW_BINDINGS, name="std/gemm/few")
@test_kernel(gemm_few, shapes={"vulkan": [], "*": FEW_SHAPES}, bindings=FEW_MORE, name="std/gemm/few_variants")
def few_setup(case):
    """SPLIT subgroups share each K step of a group's BN columns (docs/std/gemm.md, "A few rows")."""
    m, n, k = case["M"], case["N"], case["K"]
    binding = {"THREADS": SPLIT * case.simd_width}
    grid, group = few_geometry(n, {**case.binding, **binding})
    return Setup(args=_inputs(case, m, n, k), grid=grid, group=group, binding=binding,
                 oracle=make_oracle(True, case["BIAS"], case["ACT"]),
                 depth=gemm_depth(k, case["BIAS"], case["ACT"]), flops=2 * m * n * k, matrix=True)
