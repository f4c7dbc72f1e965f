"""Packed sequences against the same work dense: ``prefill_attention_varlen`` on B equal sequences of S tokens
(q (B*S, H, D)) beside ``prefill_attention`` on (B, H, S, D) and SDPA, kernel time from the CUDA profiler, outputs
checked against SDPA.  One JSON line per (S, causal).

Run on the GPU machine: ``PYTHONPATH=src:scripts/device python3 scripts/device/varlen_check.py``.
"""

from __future__ import annotations

import json

from cuda_events import kernel_us


def main() -> None:
    import torch

    from iron.std import attention as A

    b, h, d = 4, 32, 128
    for s in (1024, 4096):
        for causal in (1, 0):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            packed = [x.transpose(1, 2).reshape(b * s, h, d).contiguous() for x in (q, k, v)]
            cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device="cuda")
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
            dense = A.prefill_attention(q, k, v, causal=bool(causal))
            var = A.prefill_attention_varlen(*packed, cu, max_seqlen=s, causal=bool(causal))
            err_dense = float((dense.float() - ref.float()).abs().max())
            err_var = float((var.reshape(b, s, h, d).transpose(1, 2).float() - ref.float()).abs().max())
            times = {name: kernel_us(torch, call, 10) for name, call in (
                ("sdpa", lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))),
                ("dense", lambda: A.prefill_attention(q, k, v, causal=bool(causal), out=dense)),
                ("varlen", lambda: A.prefill_attention_varlen(*packed, cu, max_seqlen=s, causal=bool(causal),
                                                              out=var)))}
            flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
            print(json.dumps({"B": b, "H": h, "S": s, "D": d, "causal": causal, **{f"{n}_us": round(t, 2)
                              for n, t in times.items()}, "varlen_tflops": round(flops / times["varlen"] / 1e6, 1),
                              "varlen_vs_dense": round(times["dense"] / times["varlen"], 3),
                              "varlen_vs_sdpa": round(times["sdpa"] / times["varlen"], 3),
                              "max_err": [err_dense, err_var], "ok": max(err_dense, err_var) < 2 ** -6}),
                  flush=True)


if __name__ == "__main__":
    main()
