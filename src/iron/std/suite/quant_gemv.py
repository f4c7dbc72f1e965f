"""Tests and benches of iron.std.quant_gemv: ``y = W x`` on GGUF-quantised W against float64.

The oracle is ``W @ x`` in float64, W being gguf's own dequantisation of the bytes the kernel reads
(``gguf.quants.dequantize``, independent of the kernels).  The error is relative to the terms the
kernel sums: ``Expect(scale = |W| @ |x|)``, and for Q4_K, whose weights are ``d sc q - dmin m``, the
two parts' magnitudes (the min part is gguf's dequantisation with d zeroed).  The depth counts the
kernel's documented order (quant_gemv.py) per output, plus the one f32 rounding gguf's W itself
carries for Q4_K (the difference) and Q6_K (the product); Q8_0 and Q4_0 weights are exact in f32.

Bench references (there is no GGUF kernel in PyTorch): on CUDA ``torch.mv`` of the weight already
dequantised to the activation dtype, which is what a user without one runs; it reads 2 bytes per
weight (f16/bf16; 4 for f32) where the kernels read 0.56 (Q4_0, Q4_K) to 1.06 (Q8_0), so the fair
figure is each side's time for the same product: GB/s are counted on the quantised bytes + x + y for
both (``Ref(GB/s)`` is thus the quantised-byte rate the reference achieves).  Its weight copies rotate
past the L2 like the kernel's inputs.  numpy's ``W @ x`` in f32 elsewhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iron import Depth, Expect, Setup, bench, log2_ceil, test_kernel
from iron.core import dtypes as D
from iron.core.dtypes import u8

from ..gguf import FORMATS
from ..quant_gemv import ALL_SCHEMES, GROUP, SPLITS, grid_for, kernel_data, split_for
from .gguf import extents, make_data, reference_dequantize

# Rows M by blocks per row B (the word kernels, which read whole words, take one row more where M B is odd):
# one row and one block; one row of six; two rows (one pair); an odd count (the last pair's
# second row clamped, not stored); pieces past one subgroup's stride (several per lane); G = 1: one
# group, so each team loops over several row pairs.  S: subgroups per pair (the host's choice, split_for,
# without it): 2 with a pair per group past the last row; 4 with several pieces per subgroup; 3 (no host
# picks it) leaves spare subgroups in a group; 8 on one group looping over pairs.
SHAPES = [{"M": 1, "B": 1}, {"M": 1, "B": 6}, {"M": 2, "B": 1}, {"M": 3, "B": 2}, {"M": 5, "B": 9}, {"M": 4, "B": 37},
          {"M": 37, "B": 3, "G": 1}, {"M": 7, "B": 5, "S": 2}, {"M": 6, "B": 37, "S": 4},
          {"M": 9, "B": 11, "S": 3}, {"M": 21, "B": 19, "G": 1, "S": 8}]
BENCH_SHAPES = {"interp": [{"M": 256, "K": 1024}], "vulkan": [{"M": 1024, "K": 4096}],
                "*": [{"M": 4096, "K": 4096}, {"M": 11008, "K": 4096}, {"M": 4096, "K": 11008}]}

#: f32 roundings inside one piece, per kernel (quant_gemv.py): Q8_0 an 8-term dot product then d (a block, 32
#: terms, for the word kernel); Q4_0 16 terms then d (the word kernel: two 16-term dots added, then d); Q4_K a
#: 32-term dot times (d sc) [2] beside a 32-term x sum times (dmin m) [2], four such terms added [3]; Q6_K 8-term
#: dots times sc [1], four added [4], times d [1].
PIECE_STEPS = {"gemv_q8_0": 8 + 1, "gemv_q8_0_words": 32 + 1, "gemv_q4_0": 16 + 1, "gemv_q4_0_words": 16 + 1 + 1,
               "gemv_q4_k": 32 + 2 + 3, "gemv_q6_k": 8 + 1 + 4 + 1}
#: Roundings in gguf's f32 W itself (the oracle's input): Q4_K's difference, Q6_K's product.
ORACLE_STEPS = {"Q8_0": 0, "Q4_0": 0, "Q4_K": 1, "Q6_K": 1}
#: Each kernel's format.
QTYPE_OF = {"gemv_q8_0": "Q8_0", "gemv_q8_0_words": "Q8_0", "gemv_q4_0": "Q4_0", "gemv_q4_0_words": "Q4_0",
            "gemv_q4_k": "Q4_K", "gemv_q6_k": "Q6_K"}


def depth(qtype: str, k: int, w: int, split: int = 1, kernel: str | None = None) -> Depth:
    """Roundings on the longest path to y[r]: the piece, the lane's adds of its pieces in order, the
    log2 W butterfly, the team's P - 1 adds of its subgroups' sums, the oracle's own W rounding; then one
    rounding to T.  ``kernel``: its name (default the host's kernel for ``qtype``)."""
    from ..quant_gemv import SCHEMES

    sc = ALL_SCHEMES[kernel] if kernel else SCHEMES[qtype]
    team = max(1, min(split, GROUP // w))
    pieces = k // FORMATS[qtype].block * sc.pieces
    chain = PIECE_STEPS[sc.kernel.name] + -(-pieces // (w * team)) + log2_ceil(w) + team - 1 + ORACLE_STEPS[qtype]
    return Depth(steps=1, f32_steps=chain)


def raw_bytes(data: Any) -> np.ndarray:
    """The bytes of a kernel's ``data`` argument (uint8, or the u32 words some kernels read: kernel_data)."""
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8)


def oracle_of(qtype: str, rows: int, k: int) -> Any:
    def oracle(data, x, y, m, kk, split):
        data = raw_bytes(data)
        W = reference_dequantize(data, qtype).astype(np.float64).reshape(rows, k)
        scale = np.abs(W) @ np.abs(x)
        if qtype == "Q4_K":  # W = P - O (P = d sc q, O = dmin m): the error follows |P| + |O|
            zeroed = np.array(data, dtype=np.uint8).reshape(-1, FORMATS[qtype].nbytes)
            zeroed[:, 0:2] = 0
            offset = reference_dequantize(zeroed, qtype).astype(np.float64).reshape(rows, k)  # = -O
            scale = (np.abs(W - offset) + np.abs(offset)) @ np.abs(x)
        return Expect(W @ x, scale=scale)

    return oracle


class MvReference:
    """``W @ x`` with W dequantised once, on the first (untimed, correctness) call, in x's dtype: torch.mv
    on the GPU (``copies`` of W rotated, so no call finds W in L2), numpy in f32 elsewhere."""

    def __init__(self, qtype: str, rows: int, k: int, torch: bool):
        self.qtype, self.rows, self.k, self.torch = qtype, rows, k, torch
        self.weights: list[Any] = []
        self.calls = 0
        self.__name__ = "mv_dequantised" if torch else "matmul_dequantised"

    def _prepare(self, data: Any, x: Any) -> None:
        host = raw_bytes(data.cpu().numpy() if self.torch else data)
        W = reference_dequantize(host, self.qtype).reshape(self.rows, self.k)
        if not self.torch:
            self.weights = [W]
            return
        import torch

        w = torch.from_numpy(W).to("cuda").to(x.dtype)
        copies = max(2, -(-(256 << 20) // (w.numel() * w.element_size())))
        self.weights = [w] + [w.clone() for _ in range(copies - 1)]

    def __call__(self, data, x, y, m, k, split):
        if not self.weights:
            self._prepare(data, x)
        W = self.weights[self.calls % len(self.weights)]
        self.calls += 1
        if self.torch:
            import torch

            return torch.mv(W, x)
        return (W @ x.astype(np.float32)).astype(y.dtype)


def _gemv_setup(name: str, even_blocks: bool = False) -> Any:
    sc = ALL_SCHEMES[name]
    qtype = QTYPE_OF[name]
    fmt = FORMATS[qtype]

    def setup(case):
        rows, k = extents(case, fmt.block)
        if even_blocks and rows * k // fmt.block % 2:  # the word kernels read whole words: an even block count
            rows += 1
        split = int(case.shape["S"]) if "S" in case.shape else split_for(rows, k, qtype, sc)
        grid = int(case.shape["G"]) * GROUP if "G" in case.shape else grid_for(rows, split, sc.rows)
        data = make_data(case.rng, qtype, rows, k)
        x = case.randn(k)
        nbytes = data.nbytes + (k + rows) * D.numpy_dtype(case.T).itemsize
        return Setup(args=[kernel_data(data, sc), x, case.empty(rows), rows, k, split], grid=grid, group=GROUP,
                     oracle=oracle_of(qtype, rows, k), depth=depth(qtype, k, case.simd_width, split, name),
                     flops=2 * rows * k, bytes_moved=nbytes,
                     reference={"cuda": MvReference(qtype, rows, k, torch=True),
                                "*": MvReference(qtype, rows, k, torch=False)})

    setup.__name__ = f"{name}_setup"
    return setup


#: Every variant a kernel's tests run, beside T: Q4_K's two orders of the same sums.
TEST_BINDINGS = {"gemv_q4_k": [{"ORDER": "pieces"}, {"ORDER": "halves"}]}

SETUPS = {}
for _name, _scheme in ALL_SCHEMES.items():
    _bench = f"std/quant_gemv/{_name.removeprefix('gemv_')}"
    _host_binding = [dict(_scheme.binding)] if _scheme.binding else None
    SETUPS[_name] = bench(_scheme.kernel, shapes=BENCH_SHAPES, bindings=_host_binding, name=_bench)(
        test_kernel(_scheme.kernel, shapes=SHAPES, bindings=TEST_BINDINGS.get(_name), name=_bench)(
            _gemv_setup(_name, _scheme.word != u8)))
# Q4_K's other order beside the host's ("halves") at the same shapes and split: "pieces" (128 registers against 80).
bench(ALL_SCHEMES["gemv_q4_k"].kernel, shapes=BENCH_SHAPES, bindings=[{"ORDER": "pieces"}],
      name="std/quant_gemv/q4_k_pieces")(_gemv_setup("gemv_q4_k", True))

# The host's split against the others at the Llama shapes (bf16; the tuning behind split_for), for the two
# block sizes: Q8_0 (34-byte blocks of 32) and Q4_K (144-byte super-blocks of 256).
SPLIT_BENCH = {"interp": [], "vulkan": [],
               "*": [{**shape, "S": s} for shape in BENCH_SHAPES["*"] for s in SPLITS]}
for _name in ("gemv_q8_0_words", "gemv_q4_k"):
    _scheme = ALL_SCHEMES[_name]
    bench(_scheme.kernel, shapes=SPLIT_BENCH, dtypes=[D.bf16],
          bindings=[dict(_scheme.binding)] if _scheme.binding else None,
          name=f"std/quant_gemv/{_name.removeprefix('gemv_')}_splits")(_gemv_setup(_name, True))
