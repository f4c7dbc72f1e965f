"""Issue 21's decode table: ``iron.std.attention.decode_attention`` (its two launches) beside PyTorch's
``scaled_dot_product_attention`` over the whole cache (``enable_gqa`` for grouped heads), what a user would call
instead.  One JSON line per shape: kernel time (every kernel of one call, from the CUDA profiler), call time (host
wall time per call, back to back, one synchronize), both outputs checked against each other (largest |difference|
under 2**-7 of the largest |output|).

Shapes: B in {1, 4, 16, 64}, S in {1024, 4096, 32768}, H = 32, H_kv in {8, 32}, D = 128, bf16, every sequence
full (``--lengths ragged``: lengths spread down to a quarter of S; a mask for SDPA).
Run on the GPU machine: ``PYTHONPATH=src:scripts/device python3 scripts/device/decode_table.py``.
"""

from __future__ import annotations

import argparse
import json
import math

from cuda_events import call_us, kernel_us, kernel_us_by_name


def main() -> None:
    import torch
    import torch.nn.functional as F

    import iron
    from iron.std import attention as A

    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 4, 16, 64])
    ap.add_argument("--seqs", nargs="+", type=int, default=[1024, 4096, 32768])
    ap.add_argument("--kv-heads", nargs="+", type=int, default=[8, 32])
    ap.add_argument("--lengths", choices=["full", "ragged"], default="full")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--kernels", action="store_true", help="also each kernel's GPU time per call, both sides")
    ap.add_argument("--plan", default="", help="attention.MMA_PLAN entries for this run, e.g. SUBS=4,STAGES=2")
    ap.add_argument("--combine", default="", help="attention.COMBINE_PLAN entries for this run, e.g. tiled_from=1")
    args = ap.parse_args()
    for text, plan in ((args.plan, A.MMA_PLAN), (args.combine, A.COMBINE_PLAN)):
        for item in filter(None, text.split(",")):
            key, value = item.split("=")
            plan[key] = int(value)
    h, d = 32, 128
    for hk in args.kv_heads:
        for s in args.seqs:
            for b in args.batches:
                q = torch.randn(b, h, d, device="cuda", dtype=torch.bfloat16)
                k, v = (torch.randn(b, hk, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
                if args.lengths == "full":
                    lens = torch.full((b,), s, device="cuda", dtype=torch.int32)
                    mask = None
                else:
                    lens = torch.linspace(s, s // 4, b, device="cuda").to(torch.int32)
                    mask = (torch.arange(s, device="cuda")[None, :] < lens[:, None])[:, None, None, :]
                out = torch.empty_like(q)
                ref = {}
                scale = 1.0 / math.sqrt(d)

                def sdpa() -> None:
                    ref["o"] = F.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask, scale=scale,
                                                              enable_gqa=hk != h)[:, :, 0]

                def iron_call() -> None:
                    A.decode_attention(q, k, v, lens, scale=scale, out=out)

                iron_call()
                sdpa()
                torch.cuda.synchronize()
                err = float((out.float() - ref["o"].float()).abs().max() / ref["o"].float().abs().max())
                ours, theirs = kernel_us(torch, iron_call, args.calls), kernel_us(torch, sdpa, args.calls)
                our_call, their_call = call_us(torch, [iron_call, sdpa], args.calls, 3)
                moved = 2 * b * hk * float(lens.sum().item() / b) * d * 2
                print(json.dumps({"B": b, "S": s, "H": h, "H_kv": hk, "D": d, "lengths": args.lengths,
                                  "plan": A.MMA_PLAN if A.decode_on_matrix_units(h, hk, iron.bf16, None, (q,)) else
                                  "split", "combine": A.COMBINE_PLAN,
                                  "iron_us": round(ours, 2), "sdpa_us": round(theirs, 2),
                                  "iron_call_us": round(our_call, 2), "sdpa_call_us": round(their_call, 2),
                                  "vs_sdpa": round(theirs / ours, 3), "iron_tb_s": round(moved / ours / 1e6, 2),
                                  "max_rel_err": err, "ok": err < 2 ** -7}), flush=True)
                if args.kernels:
                    print(json.dumps({"B": b, "S": s, "H_kv": hk,
                                      "iron_kernels": kernel_us_by_name(torch, iron_call, args.calls),
                                      "sdpa_kernels": kernel_us_by_name(torch, sdpa, args.calls)}), flush=True)
                del q, k, v, out, ref
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
