"""One ``quant_gemv`` as the host runs it, for Nsight Compute (random blocks of the format, bf16 x).

Run on the GPU machine: ``bash scripts/device/ncu_profile.sh DIR gemv_q4_k quant_once.py [QTYPE M K]`` (default:
Q4_K 11008 4096, the Llama MLP row).  ``--check-only`` (ncu_profile.sh adds it) is accepted and changes nothing.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import numpy as np
    import torch

    from iron.std import quant_gemv as Q
    from iron.std.gguf import row_bytes

    args = [a for a in argv if a != "--check-only"]
    qtype = args[0] if args else "Q4_K"
    m, k = (int(a) for a in args[1:3]) if len(args) > 2 else (11008, 4096)
    rng = np.random.default_rng(0)
    data = torch.from_numpy(rng.integers(0, 256, (m, row_bytes(qtype, k)), dtype=np.uint8)).cuda()
    data.view(-1, row_bytes(qtype, k) // Q.format_of(qtype).nbytes, Q.format_of(qtype).nbytes)[..., :2] = 0x3C
    x = torch.randn(k, device="cuda").to(torch.bfloat16)
    Q.quant_gemv(data, qtype, x, m, k)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
