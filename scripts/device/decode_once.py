"""One ``decode_attention`` as the host plans it, for Nsight Compute (the split pass is the kernel to read).

Run on the GPU machine: ``ncu --clock-control none -k regex:attention_decode_split -c 1 --set full
python3 scripts/device/decode_once.py [B H H_kv S D [DTYPE]]`` (default: 16 32 8 4096 128 float16; the Llama-like
GQA row that runs under SDPA's speed).  ``--check-only`` (ncu_profile.sh adds it) is accepted and changes nothing.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import torch

    from iron.std import attention as A

    args = [a for a in argv if a != "--check-only"]
    b, h, h_kv, s, d = (int(a) for a in args[:5]) if args else (16, 32, 8, 4096, 128)
    dt = getattr(torch, args[5]) if len(args) > 5 else torch.float16
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, d, device="cuda", generator=gen).to(dt)
    k = torch.randn(b, h_kv, s, d, device="cuda", generator=gen).to(dt)
    v = torch.randn(b, h_kv, s, d, device="cuda", generator=gen).to(dt)
    lens = torch.full((b,), s, device="cuda", dtype=torch.int32)
    A.decode_attention(q, k, v, lens, backend="cuda")
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
