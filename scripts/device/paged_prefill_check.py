"""Paged prefill beside the dense one: ``prefill_attention_paged`` over a shuffled pool of P-key pages (the keys of
B sequences, each a chunk of its last tokens as queries after a cached prefix, and whole prompts), against
``prefill_attention_varlen`` on the same keys packed densely where the queries are the whole sequence, and SDPA
with the bottom-right causal mask per sequence otherwise.  Kernel time from the CUDA profiler, call time back to
back; every output checked against SDPA's (largest |difference| under 2**-6).  One JSON line per shape.

Run on the GPU machine: ``PYTHONPATH=src:scripts/device python3 scripts/device/paged_prefill_check.py``.
"""

from __future__ import annotations

import json
import math

from cuda_events import call_us, kernel_us


def main() -> None:
    import torch

    from iron.std import attention as A

    h, h_kv, d = 32, 8, 128
    # (sequences, queries each, keys each, page): whole prompts (dense twin: varlen), then chunks after a prefix
    for b, nq, nk, page in ((1, 4096, 4096, 16), (4, 2048, 2048, 64), (1, 1024, 8192, 16), (8, 512, 4096, 16)):
        width = nk // page
        table = torch.randperm(b * width, device="cuda").to(torch.int32).reshape(b, width)
        k, v = (torch.randn(b, nk, h_kv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        k_pages, v_pages = (x.reshape(b * width, page, h_kv, d)[torch.argsort(table.reshape(-1))].contiguous()
                            for x in (k, v))
        q = torch.randn(b * nq, h, d, device="cuda", dtype=torch.bfloat16)
        cu = torch.arange(0, b * nq + 1, nq, device="cuda", dtype=torch.int32)
        lens = torch.full((b,), nk, device="cuda", dtype=torch.int32)
        out = torch.empty_like(q)
        calls = {"paged": lambda: A.prefill_attention_paged(q, k_pages, v_pages, table, cu, lens, max_seqlen=nq,
                                                            out=out)}
        ref = torch.empty_like(q)
        mask = torch.arange(nk, device="cuda")[None, :] <= torch.arange(nq, device="cuda")[:, None] + nk - nq

        def sdpa() -> None:
            for i in range(b):
                qi = q[i * nq:(i + 1) * nq].transpose(0, 1)[None]
                ki, vi = (x[i].transpose(0, 1)[None] for x in (k, v))
                ref[i * nq:(i + 1) * nq] = torch.nn.functional.scaled_dot_product_attention(
                    qi, ki, vi, attn_mask=None if nq == nk else mask, is_causal=nq == nk,
                    enable_gqa=True)[0].transpose(0, 1)

        calls["sdpa"] = sdpa
        if nq == nk:
            dense = torch.empty_like(q)
            kd, vd = (x.reshape(b * nk, h_kv, d) for x in (k, v))
            calls["dense"] = lambda: A.prefill_attention_varlen(q, kd, vd, cu, max_seqlen=nq, out=dense)
        for call in calls.values():
            call()
        torch.cuda.synchronize()
        err = float((out.float() - ref.float()).abs().max())
        times = {name: kernel_us(torch, call, 5) for name, call in calls.items()}
        host = dict(zip(calls, call_us(torch, list(calls.values()), 5, 3)))
        flops = 4.0 * b * h * d * (nq * nk - nq * nq / 2)
        print(json.dumps({"B": b, "q": nq, "k": nk, "P": page, "H": h, "H_kv": h_kv, "D": d,
                          **{f"{n}_us": round(t, 2) for n, t in times.items()},
                          **{f"{n}_call_us": round(t, 2) for n, t in host.items()},
                          "paged_tflops": round(flops / times["paged"] / 1e6, 1),
                          "vs_sdpa": round(times["sdpa"] / times["paged"], 3),
                          "vs_dense": round(times["dense"] / times["paged"], 3) if "dense" in times else None,
                          "max_err": err, "ok": err < 2 ** -6 and not math.isnan(err)}), flush=True)


if __name__ == "__main__":
    main()
