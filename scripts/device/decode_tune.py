"""attention decode's split pass over (heads a group, keys a team folds at once, keys a chunk), next to SDPA.

For the GPU machine (the H200): one JSON line per configuration of ``attention_decode_split`` (GQ, U, CH)
with the split pass's time, its bandwidth over the K/V bytes and the ratio to torch SDPA over the whole
cache; the chunks, combined here, are checked against SDPA's output.  Times are CUDA events around 20
back-to-back launches (cuda_events.median_ms with batch=20), so Python's launch cost stays hidden.
The sweep in BENCHMARKS.md also tried teams of 16 lanes, four heads a group and the one-key-at-a-time
fold: those prototype kernels are in this script as of commit d8d8741.
Run: ``PYTHONPATH=src python3 scripts/device/decode_tune.py``.
"""

from __future__ import annotations

import json
import math
import sys

from cuda_events import median_ms

from iron import f16, f32
from iron.std.attention import DECODE_THREADS, attention_decode_split


def main() -> int:
    import torch
    import torch.nn.functional as F

    gen = torch.Generator(device="cuda").manual_seed(0)
    # (GQ, U) per KV-head count; the host's (keys_in_flight) are (2, 2) for H/H_kv = 4 and (1, 4) for 1.
    configs = {8: [(2, 1), (2, 2), (2, 4), (1, 2), (1, 4)], 32: [(1, 1), (1, 2), (1, 4)]}
    for b, h, hkv in ((16, 32, 8), (16, 32, 32)):
        s, d = 4096, 128
        q = torch.randn(b, h, d, device="cuda", dtype=torch.float16, generator=gen)
        kc = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.float16, generator=gen)
        vc = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.float16, generator=gen)
        lens = torch.full((b,), s, device="cuda", dtype=torch.int32)
        scale = 1.0 / math.sqrt(d)
        q4 = q.view(b, h, 1, d)
        full = lambda: F.scaled_dot_product_attention(q4, kc, vc, scale=scale, enable_gqa=hkv != h)
        want_full = full().float()
        full_ms = median_ms(torch, full, 10, batch=20)
        nbytes = 2 * kc.numel() * 2
        r = h // hkv
        for gq, u in configs[hkv]:
            for ch in (512, 1024, 2048):
                nch = -(-s // ch)
                kern = attention_decode_split.variant(T=f16, VEC=8, D=d, GQ=gq, U=u)
                po = torch.full((b, h, nch, d), float("nan"), device="cuda")
                pl = torch.empty((b, h, nch), device="cuda")
                run = lambda: kern.launch(q, kc, vc, lens, po, pl, h, hkv, s, nch, ch, f32(scale), lens, 1, 1,
                                          grid=(nch * DECODE_THREADS, b * h // gq), group=(DECODE_THREADS,),
                                          backend="cuda")
                run()
                torch.cuda.synchronize()
                # combine the chunks here (base-2 LSE) and compare with SDPA over the whole cache
                w = torch.softmax(pl * math.log(2.0), dim=-1)
                got = (po * w[..., None]).sum(2)
                err = ((got - want_full.view(b, h, d)).abs().max() / want_full.abs().max()).item()
                ms = median_ms(torch, run, 10, batch=20)
                print(json.dumps({"B": b, "H": h, "Hkv": hkv, "GQ": gq, "U": u, "CH": ch,
                                  "groups": nch * b * h // gq, "iron_us": round(ms * 1e3, 1),
                                  "full_sdpa_us": round(full_ms * 1e3, 1), "iron_GBs": round(nbytes / ms / 1e6),
                                  "vs_full": round(full_ms / ms, 3), "err": err, "ok": err < 4e-3}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
