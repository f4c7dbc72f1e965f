"""Sample arguments for every iron.torch op, on a torch device: small, valid, and shared by the CPU tests
(tests/pytorch) and the CUDA ones (tests/gpu/test_torch_ops_cuda.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def _q8(rows: int, k: int) -> np.ndarray:
    """rows x k Q8_0 weights: per block an f16 scale of 1/64, then 32 int8 values."""
    block = np.zeros(34, np.uint8)
    block[:2] = np.frombuffer(np.float16(1 / 64).tobytes(), np.uint8)
    block[2:] = np.arange(32, dtype=np.int8).view(np.uint8)
    return np.tile(block, rows * k // 32).copy()


def samples(device: str = "cpu", seed: int = 0) -> dict[str, tuple[tuple, dict[str, Any]]]:
    """op name -> (positional args, keyword args) for the functional op ``iron::<name>``."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    def pos(*shape: int) -> torch.Tensor:
        return (torch.rand(*shape, generator=g) + 0.5).to(device)

    from iron.std import elementwise

    out: dict[str, tuple[tuple, dict[str, Any]]] = {}
    for op in elementwise.UNARY_OPS:  # inputs every unary op is defined on
        out[op] = ((pos(4, 8) if op in ("sqrt", "rsqrt", "log", "log2", "log1p", "reciprocal") else r(4, 8),), {})
    for op in elementwise.BINARY_OPS:
        out[op] = ((pos(4, 8), pos(4, 8)) if op == "pow" else
                   (r(4, 8), pos(4, 8) if op in ("div", "remainder") else r(4, 8)), {})
    q8 = torch.from_numpy(_q8(2, 32)).to(device)
    out.update({
        "unary": (("gelu_tanh", r(4, 8)), {}),
        "binary": (("mul", r(4, 8), r(8)), {}),
        "clamp": ((r(4, 8), -0.5, 0.5), {}),
        "fma": ((r(4, 8), r(4, 8), r(4, 8)), {}),
        "where": ((r(4, 8) > 0, r(4, 8), r(4, 8)), {}),
        "cast": ((r(4, 8), torch.float16), {}),
        "copy": ((r(4, 8),), {}),
        "transpose": ((r(8, 4),), {}),
        **{op: ((r(8, 4),), {"axis": -1}) for op in ("sum", "mean", "max", "min", "argmax")},
        "softmax": ((r(4, 8),), {}),
        "log_softmax": ((r(4, 8),), {}),
        "layernorm": ((r(4, 8), r(8), r(8)), {"eps": 1e-5}),
        "rmsnorm": ((r(4, 8), r(8)), {}),
        "add_rmsnorm": ((r(4, 8), r(4, 8), r(8)), {}),
        "rope": ((r(3, 2, 8), torch.arange(3, dtype=torch.int32, device=device)), {}),
        "rope_cached": ((r(3, 2, 8), r(3, 4), r(3, 4)), {"layout": "interleaved"}),
        "gemv": ((r(8, 6), r(8)), {"transpose": True}),
        "gemm": ((r(8, 16), r(4, 16), r(4)), {"activation": "relu", "transpose_b": True}),
        "conv1d": ((r(1, 2, 10), r(3, 2, 3)), {"padding": 1, "stride": 2}),
        "conv2d": ((r(1, 2, 5, 5), r(3, 2, 3, 3), r(3)), {"padding": [1, 1], "stride": [2, 1]}),
        "depthwise_conv2d": ((r(1, 5, 5, 2), r(2, 1, 3, 3)), {"padding": [1, 1], "layout": "NHWC"}),
        "dequantize": ((q8, "Q8_0", [2, 32]), {"dtype": torch.float32}),
        "quant_gemv": ((q8, "Q8_0", r(32), 2, 32), {}),
        "decode_attention": ((r(1, 2, 64), r(1, 1, 4, 64), r(1, 1, 4, 64),
                              torch.tensor([3], dtype=torch.int32, device=device)), {}),
        "decode_attention_paged": ((r(1, 2, 64), r(3, 4, 1, 64), r(3, 4, 1, 64),
                                    torch.tensor([[2, 0]], dtype=torch.int32, device=device),
                                    torch.tensor([6], dtype=torch.int32, device=device)), {}),
        "prefill_attention": ((r(1, 2, 4, 64, dtype=torch.float16), r(1, 1, 4, 64, dtype=torch.float16),
                               r(1, 1, 4, 64, dtype=torch.float16)), {"causal": True}),
        "prefill_attention_varlen": ((r(7, 2, 64, dtype=torch.float16), r(7, 1, 64, dtype=torch.float16),
                                      r(7, 1, 64, dtype=torch.float16),
                                      torch.tensor([0, 3, 7], dtype=torch.int32, device=device)), {"max_seqlen": 4}),
        "prefill_attention_paged": ((r(5, 2, 64, dtype=torch.float16), r(3, 4, 1, 64, dtype=torch.float16),
                                     r(3, 4, 1, 64, dtype=torch.float16),
                                     torch.tensor([[2, 0], [1, 1]], dtype=torch.int32, device=device),
                                     torch.tensor([0, 3, 5], dtype=torch.int32, device=device),
                                     torch.tensor([6, 2], dtype=torch.int32, device=device)), {"max_seqlen": 3}),
    })
    return out
