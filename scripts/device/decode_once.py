"""One ``decode_attention`` as the host plans it, for Nsight Compute (the split pass is the kernel to read).

Run on the GPU machine: ``ncu --clock-control none -k regex:attention_decode_split -c 1 --set full
python3 scripts/device/decode_once.py [B H H_kv S D]`` (default: 16 32 8 4096 128, f16; the Llama-like GQA
row that runs under SDPA's speed).
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import torch

    from iron.std import attention as A

    b, h, h_kv, s, d = (int(a) for a in argv) if argv else (16, 32, 8, 4096, 128)
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, d, device="cuda", dtype=torch.float16, generator=gen)
    k = torch.randn(b, h_kv, s, d, device="cuda", dtype=torch.float16, generator=gen)
    v = torch.randn(b, h_kv, s, d, device="cuda", dtype=torch.float16, generator=gen)
    lens = torch.full((b,), s, device="cuda", dtype=torch.int32)
    A.decode_attention(q, k, v, lens, backend="cuda")
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
