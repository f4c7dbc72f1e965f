"""The decode's split pass on the matrix units (``attention_decode_mma``) beside the host's ``decode_attention`` as
it stands and PyTorch's ``scaled_dot_product_attention`` over the whole cache: kernel time (every kernel of one
call, from the CUDA profiler) for each ring depth and chunk length, every output checked against SDPA's (largest
|difference| under 2**-7 of the largest |output|).  One JSON line per (shape, configuration).

Run on the GPU machine: ``PYTHONPATH=src:scripts/device python3 scripts/device/decode_mma_tune.py`` (``--shapes
B,S,H_kv ...``, ``--configs SUBSxSTAGES ...``, ``--chunks``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math

from cuda_events import kernel_us


def main() -> None:
    import torch
    import torch.nn.functional as F

    import iron
    from iron.std import attention as A
    from iron.std.attention_decode import COMBINE_GROUP, attention_decode_combine, combine_grid
    from iron.std.attention_decode_mma import attention_decode_mma, decode_mma_threads

    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["16,4096,8", "1,4096,8", "4,4096,8", "64,4096,8", "16,32768,8",
                                                    "1,32768,8", "16,4096,32", "1,4096,32", "16,1024,8"])
    ap.add_argument("--configs", nargs="+", default=["4x2", "2x3", "2x4", "2x2"],
                    help="SUBSxSTAGES, p at the end: the subgroups merged in one step (PAR)")
    ap.add_argument("--chunks", nargs="+", type=int, default=[128, 256, 512, 1024, 2048, 4096])
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--before", help="a file holding an earlier attention_decode_mma.py: its kernel runs each "
                    "configuration too, as before:<name>, for an A/B in one process")
    ap.add_argument("--rounds", type=int, default=1, help="times each (configuration, kernel) pair runs, in turn")
    args = ap.parse_args()
    kernels = [("", attention_decode_mma)]
    if args.before:
        import importlib.util

        spec = importlib.util.spec_from_file_location("attention_decode_mma_before", args.before)
        before = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
        kernels.append(("before:", before.attention_decode_mma))
    h, d = 32, 128
    for spec in args.shapes:
        b, s, hk = (int(x) for x in spec.split(","))
        q = torch.randn(b, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, hk, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.full((b,), s, device="cuda", dtype=torch.int32)
        scale = 1.0 / math.sqrt(d)
        ref = F.scaled_dot_product_attention(q[:, :, None], k, v, scale=scale, enable_gqa=hk != h)[:, :, 0].float()
        top = float(ref.abs().max())
        out = torch.empty_like(q)
        base = {"B": b, "S": s, "H": h, "H_kv": hk, "D": d}

        def sdpa() -> None:
            F.scaled_dot_product_attention(q[:, :, None], k, v, scale=scale, enable_gqa=hk != h)

        def host() -> None:
            A.decode_attention(q, k, v, lens, scale=scale, out=out)

        sdpa_us = kernel_us(torch, sdpa, args.calls)
        host()
        torch.cuda.synchronize()
        err = float((out.float() - ref).abs().max()) / top
        host_us = kernel_us(torch, host, args.calls)
        print(json.dumps({**base, "config": "host", "us": round(host_us, 2), "sdpa_us": round(sdpa_us, 2),
                          "vs_sdpa": round(sdpa_us / host_us, 3), "ok": err < 2 ** -7}), flush=True)
        gr = min(h // hk, 16)
        for ch in args.chunks:
            if ch > s:
                continue
            nch = -(-s // ch)
            part_o = torch.empty(b, h, nch, d, device="cuda", dtype=torch.float32)
            part_lse = torch.empty(b, h, nch, device="cuda", dtype=torch.float32)
            for config, (tag, kern) in itertools.product(args.configs * args.rounds, kernels):
                par = config.endswith("p")
                subs, stages = (int(x) for x in config.rstrip("p").split("x"))
                direct = nch == 1 and bool(A.MMA_PLAN["DIRECT"])  # the host's choices for this chunk
                tiled = nch >= A.COMBINE_PLAN["tiled_from"]
                split = kern.variant(T=iron.bf16, D=d, SUBS=subs, STAGES=stages, PAGED=False, PAR=par, DIRECT=direct)
                combine = attention_decode_combine.variant(T=iron.bf16, TILED=tiled)
                nt = decode_mma_threads(subs)

                def ours() -> None:
                    split.launch(q, k, v, lens, part_o, part_lse, out, h, hk, s, nch, ch, gr, scale, lens, 1, 1,
                                 grid=(nch * nt, b * h // gr), group=(nt,))
                    if not direct:
                        combine.launch(part_o, part_lse, out, h, d, nch, grid=combine_grid(h, d, b, tiled),
                                       group=(COMBINE_GROUP,))

                out.zero_()
                ours()
                torch.cuda.synchronize()
                err = float((out.float() - ref).abs().max()) / top
                us = kernel_us(torch, ours, args.calls)
                moved = 2 * b * hk * s * d * 2
                name = f"{tag}MMA_W{subs}_S{stages}{'_PAR' if par else ''}_CH{ch}"
                print(json.dumps({**base, "config": name, "groups": nch * b * h // gr,
                                  "us": round(us, 2), "sdpa_us": round(sdpa_us, 2), "vs_sdpa": round(sdpa_us / us, 3),
                                  "tb_s": round(moved / us / 1e6, 2), "ok": err < 2 ** -7, "err": err}), flush=True)
        del q, k, v, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
