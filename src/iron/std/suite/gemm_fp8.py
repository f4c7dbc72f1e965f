"""Tests and benches of iron.std.gemm_fp8: the warp-role fp8 kernel against a float64 oracle of the scaled
product (8-bit products are exact, so the oracle is the exact sum times the scales), on the interpreter and
the H200; the bench beside ``torch._scaled_mm`` (cuBLAS), both outputs checked.

Tolerance: the sums of k exact products in f32 (k roundings bound any order, the hardware's narrower sums
within a 128-deep step included: about 14 kept bits there, under f32's tolerance times 128 per step), the two
multiplies by the scales, one rounding to the output type.
"""

from __future__ import annotations

import numpy as np

from iron import Depth, Expect, Setup, bench, bf16, f16, f32, test_kernel
from iron.core import dtypes as D

from ..gemm_fp8 import FP8_DEFAULT, FP8_FAST, FP8_NARROW, fp8_geometry, fp8_groups, gemm_fp8

E4M3, E5M2 = D.f8e4m3, D.f8e5m2
#: The dequantising scales every row uses (exact in f32; their product too).
SCALES = (0.375, 1.5)


def _shape(m: int, n: int, k: int) -> dict[str, int]:
    return {"M": m, "N": n, "K": k}


# Tile copies take rows of whole 16-byte chunks (K a multiple of 16): one short row; M and N past a tile with K
# over a step and a partial one (zero-filled by the copies); a whole 128-row tile and one row past it over
# three steps (the ring wrapping at three stages), N past two 128-column tiles; five steps (OVERLAP's two pairs
# and a last step alone).
SHAPES = [_shape(1, 16, 16), _shape(40, 24, 144), _shape(129, 264, 384), _shape(40, 24, 640)]
BINDINGS = [{"T": E4M3, "U": E4M3, "OUT": bf16, **FP8_NARROW[0]},
            {"T": E4M3, "U": E5M2, "OUT": f16, "BN": 128, "STAGES": 3, "FOLD": True},
            {"T": E5M2, "U": E4M3, "OUT": bf16, **FP8_FAST},
            {"T": E4M3, "U": E4M3, "OUT": bf16, "BN": 128, "STAGES": 3, "FOLD": False},
            {"T": E4M3, "U": E4M3, "OUT": bf16, "BN": 128, "STAGES": 4, "FOLD": True, "OVERLAP": True},
            # folding 128 x 256 tiles by halves (two totals, one step sum)
            {"T": E4M3, "U": E5M2, "OUT": bf16, **FP8_DEFAULT},
            # folding 128 x 192 tiles whole (a total and a step sum of 96 registers each)
            {"T": E4M3, "U": E4M3, "OUT": f16, **FP8_NARROW[1]},
            # clusters of two groups, each copying half of B's panel into both (129 rows: one pair of tile rows)
            {"T": E4M3, "U": E4M3, "OUT": bf16, **FP8_DEFAULT, "CLUSTER": 2},
            {"T": E4M3, "U": E5M2, "OUT": bf16, **FP8_FAST, "CLUSTER": 2}]
BENCH = {"interp": [_shape(128, 128, 256)], "vulkan": [],
         "*": [_shape(4096, 4096, 4096), _shape(8192, 8192, 8192), _shape(512, 4096, 4096),
               _shape(512, 11008, 4096), _shape(8192, 11008, 4096), _shape(8192, 4096, 4096)]}


def fp8_oracle(a, b, scale_a, scale_b, c, m, n, k):
    """(scale_a * scale_b) * (A @ B^T) in float64, with its magnitude for the tolerance."""
    s = float(scale_a.reshape(-1)[0]) * float(scale_b.reshape(-1)[0])
    A, B = a.reshape(m, k), b.reshape(n, k)
    return Expect(s * (A @ B.T), scale=abs(s) * (np.abs(A) @ np.abs(B).T))


def fp8_setup(case, groups=None):
    m, n, k = case["M"], case["N"], case["K"]
    grid, group = fp8_geometry(m, n, case["BN"], groups, case.binding.get("CLUSTER", 1))
    a = case.randn(m, k, scale=4.0, dtype=case["T"])
    b = case.randn(n, k, scale=4.0, dtype=case["U"])
    scales = [np.array([s], np.float32) for s in SCALES]
    return Setup(args=[a, b, *scales, case.empty(m, n, dtype=case["OUT"]), m, n, k], grid=grid, group=group,
                 oracle=fp8_oracle, depth=Depth(steps=1, f32_steps=k + 2), flops=2 * m * n * k, matrix=True)


def _scaled_mm_torch(a, b, scale_a, scale_b, c, m, n, k):
    import torch

    return torch._scaled_mm(a.view(m, k), b.view(n, k).t(), scale_a=scale_a.view(()), scale_b=scale_b.view(()),
                            out_dtype=c.dtype)


def _scaled_mm_numpy(a, b, scale_a, scale_b, c, m, n, k):
    f = np.float32
    prod = a.reshape(m, k).astype(f) @ b.reshape(n, k).astype(f).T
    return (prod * (scale_a[0] * scale_b[0])).astype(c.dtype)


@test_kernel(gemm_fp8, shapes={"vulkan": [], "*": SHAPES}, bindings=BINDINGS, name="std/gemm_fp8/ws")
@bench(gemm_fp8, shapes=BENCH, bindings=[{"T": E4M3, "U": E4M3, "OUT": bf16, **FP8_DEFAULT}],
       reference={"cuda": _scaled_mm_torch, "*": _scaled_mm_numpy}, name="std/gemm_fp8/e4m3")
def ws_setup(case):
    """A producer and two consumer warpgroups per group, the host's groups (one per tile, or persistent ones on
    256-wide tiles)."""
    return fp8_setup(case, fp8_groups(case.binding))


# Clusters of four groups over four tile rows (400 rows, the last 16 long), each copying a quarter of B's panel
# into all; one cluster takes the two tile columns in turn.
CLUSTER4 = [{"T": E4M3, "U": E4M3, "OUT": bf16, "BN": 128, "STAGES": 3, "FOLD": False, "CLUSTER": 4},
            {"T": E4M3, "U": E5M2, "OUT": f16, "BN": 128, "STAGES": 4, "FOLD": True, "CLUSTER": 4}]


@test_kernel(gemm_fp8, shapes={"vulkan": [], "*": [_shape(400, 136, 272)]}, bindings=CLUSTER4,
             name="std/gemm_fp8/cluster4")
def cluster4_setup(case):
    return fp8_setup(case, 4)


# Persistent groups: three groups over the tiles, the ring running on across them.
@test_kernel(gemm_fp8, shapes={"vulkan": [], "*": SHAPES[1:]}, bindings=BINDINGS[:3] + BINDINGS[5:6],
             name="std/gemm_fp8/persistent")
def persistent_setup(case):
    return fp8_setup(case, 3)


__all__ = ["BINDINGS", "SHAPES", "fp8_oracle", "fp8_setup"]
