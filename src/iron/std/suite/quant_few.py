"""Tests of iron.std.quant_few: a few rows times Q8_0 / Q4_0 weights against float64.

The oracle is ``A @ W^T`` in float64 with W gguf's own dequantisation (``gguf.quants.dequantize``, independent of
the kernel) rounded once to T, which is what the kernel multiplies (its contract: gguf.dequantize's weights);
``Expect(scale = |A| @ |W|^T)``.  Depth: the K products' f32 sums (any association is within K steps, as gemm's)
plus the SPLIT - 1 adds of the subgroups' sums, one rounding to T.
"""

from __future__ import annotations

import numpy as np

from iron import Depth, Expect, Setup, f16, test_kernel
from iron.core import dtypes as D

from ..gemm_few import SPLIT
from ..gguf import FORMATS
from ..quant_few import QTYPES, fast_bytes, quant_gemm_few
from .gguf import make_data, reference_dequantize


def _shape(m: int, n: int, k: int) -> dict[str, int]:
    return {"M": m, "N": n, "K": k}


# One block; 16 rows over two K steps of 8-byte copies (K % 128 == 0) with N past a group; rows past a pair of
# groups with K in one partial step copied byte by byte (K % 128 != 0); K = 9 blocks, a step and a partial one.
SHAPES = [_shape(1, 1, 32), _shape(16, 17, 512), _shape(3, 40, 96), _shape(5, 33, 288)]
#: The host's binding (K steps of 256 weights, 4 stages) and, within Vulkan's 32 KiB, the portable one.
HOST = {"BN": 16, "BK": 256, "STAGES": 4}
SMALL = {"BN": 16, "BK": 64, "STAGES": 3}


def _setup(case):
    m, n, k, qt = case["M"], case["N"], case["K"], case["QT"]
    data = make_data(case.rng, qt, n, k)
    nd = D.numpy_dtype(case.T)
    w = reference_dequantize(data, qt).reshape(n, k).astype(nd).astype(np.float64)
    threads = SPLIT * case.simd_width
    bn = case["BN"]

    def oracle(data_, a, c, m_, n_, k_, ldc, col0, fast):
        A = np.asarray(a, np.float64).reshape(m, k)
        return Expect(A @ w.T, scale=np.abs(A) @ np.abs(w).T)

    fast = fast_bytes(k, case["BK"], FORMATS[qt].nbytes)
    return Setup(args=[data, case.randn(m, k), case.empty(m, n), m, n, k, n, 0, fast],
                 grid=-(-n // bn) * threads, group=threads, binding={"THREADS": threads}, oracle=oracle,
                 depth=Depth(steps=1, f32_steps=k + SPLIT), flops=2 * m * n * k, matrix=True)


for _qt in QTYPES:
    # lavapipe compiles the kernel slowly (a minute or more): Q8_0 in f16 there, Q4_0 (a different unpacking
    # of the same ring) on the interpreter only.
    _vulkan = [SHAPES[2]] if _qt == "Q8_0" else []
    test_kernel(quant_gemm_few, shapes={"vulkan": _vulkan, "*": SHAPES}, dtypes=[f16],
                bindings=[{"QT": _qt, **SMALL}], name=f"std/quant_few/{_qt.lower()}_small")(_setup)
    test_kernel(quant_gemm_few, shapes={"vulkan": [], "*": SHAPES}, bindings=[{"QT": _qt, **HOST}],
                name=f"std/quant_few/{_qt.lower()}")(_setup)
