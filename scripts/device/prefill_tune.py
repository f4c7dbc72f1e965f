"""Attention prefill beside PyTorch's ``scaled_dot_product_attention`` (cuDNN / flash kernels): one JSON line per
shape and kernel.

For the GPU machine (the H200).  q (B, H, S, D), k and v (B, H_kv, S, D) of bf16 (or --dtype f16).  Iron runs
iron.std.attention_ws.attention_prefill_ws in each listed configuration (``WS[O]_<BK>_S<STAGES>``) and, with --old,
attention_prefill.py's mma.sync kernel; SDPA runs with ``is_causal`` (GQA through ``enable_gqa``).  Kernel time from the
CUDA profiler (median of ``--rounds`` interleaved rounds of ``--reps`` calls), call time back to back.  Every
Iron output is checked against SDPA's: the largest |difference| under 2**-6 (both round f32 sums to bf16 once,
the weights P once; a wrong block or mask shows as O(0.1) or more).

Run: ``PYTHONPATH=src python3 scripts/device/prefill_tune.py --seqs 1024 4096 --causal 1 0``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from typing import Any

from cuda_events import call_us, kernel_us

CONFIGS: dict[str, dict[str, Any]] = {
    # WSO: the softmax of block j overlapping P V of block j-1 (OVERLAP); WS: one after the other
    "WSO_128_S2": {"BK": 128, "STAGES": 2, "OVERLAP": True},
    "WS_128_S2": {"BK": 128, "STAGES": 2, "OVERLAP": False},
    "WSO_64_S2": {"BK": 64, "STAGES": 2, "OVERLAP": True},
    "WSO_64_S3": {"BK": 64, "STAGES": 3, "OVERLAP": True},
    "WSO_64_S4": {"BK": 64, "STAGES": 4, "OVERLAP": True},
    "WS_64_S4": {"BK": 64, "STAGES": 4, "OVERLAP": False},
    # WSP: the two consumer warpgroups take turns at the multipliers (PINGPONG)
    "WSP_128_S2": {"BK": 128, "STAGES": 2, "OVERLAP": False, "PINGPONG": True},
    "WSP_64_S2": {"BK": 64, "STAGES": 2, "OVERLAP": False, "PINGPONG": True},
    "WSP_64_S4": {"BK": 64, "STAGES": 4, "OVERLAP": False, "PINGPONG": True},
    # WSPP: WSP's loop in persistent groups (one a multiprocessor, each walking query tiles)
    "WSPP_128_S2": {"BK": 128, "STAGES": 2, "OVERLAP": False, "PINGPONG": True, "PERSIST": True},
}


def flops(b: int, h: int, s: int, d: int, causal: bool) -> float:
    """The two products' multiply-adds times two, halved under a causal mask (FlashAttention's count)."""
    return 4.0 * b * h * s * s * d / (2 if causal else 1)


def main() -> None:
    import torch

    from iron import bf16, f16
    from iron.std import attention as A
    from iron.std import attention_ws as W

    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", nargs="+", type=int, default=[1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--causal", nargs="+", type=int, default=[1, 0])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--configs", nargs="+", default=["WSO_128_S2"])
    ap.add_argument("--old", action="store_true", help="also attention_prefill.py's mma.sync kernel")
    ap.add_argument("--before", help="a file holding an earlier attention_ws.py (its relative imports made "
                    "absolute): its --configs run too, as before:<name>, for an A/B in one process")
    ap.add_argument("--host", action="store_true", help="also iron.std.attention.prefill_attention (the host's pick)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--check-only", action="store_true",
                    help="one launch per kernel and its check, no timing (the profiling target under ncu)")
    args = ap.parse_args()
    tdt, idt = (torch.bfloat16, bf16) if args.dtype == "bf16" else (torch.float16, f16)
    b, h, hk, d = args.batch, args.heads, args.kv_heads, args.dim
    modules = [(W, "")]
    if args.before:
        import importlib.util

        spec = importlib.util.spec_from_file_location("attention_ws_before", args.before)
        before = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
        modules.append((before, "before:"))
    for s in args.seqs:
        q = torch.randn(b, h, s, d, device="cuda", dtype=tdt)
        k = torch.randn(b, hk, s, d, device="cuda", dtype=tdt)
        v = torch.randn(b, hk, s, d, device="cuda", dtype=tdt)
        scale = 1.0 / math.sqrt(d)
        unread = torch.zeros(1, dtype=torch.int32, device="cuda")  # the kernels' cu (dense tensors: never read)
        import numpy as np

        for causal in args.causal:
            calls: dict[str, Any] = {}
            outs: dict[str, Any] = {}
            ref = {}

            def sdpa() -> None:
                ref["o"] = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal),
                                                                            enable_gqa=hk != h)

            calls["sdpa"] = sdpa
            for name, kern in ((n, m.attention_prefill_ws.variant(T=idt, D=d, **CONFIGS[n.split(":")[-1]]))
                               for m, prefix in modules for n in (prefix + c for c in args.configs)):
                out = torch.empty_like(q)
                outs[name] = out
                grid = ((s + W.FA_BQ - 1) // W.FA_BQ * W.FA_THREADS, b * h)
                if CONFIGS[name.split(":")[-1]].get("PERSIST"):
                    grid = (min((s + W.FA_BQ - 1) // W.FA_BQ * b * h, 132) * W.FA_THREADS, 1)
                cu = (unread,) if any(p.name == "cu" for p in kern.kernel.params) else ()  # older kernels: none
                pages = (unread, unread, 16, 1, 1) if any(p.name == "table" for p in kern.kernel.params) else ()
                calls[name] = (lambda kern=kern, out=out, grid=grid, cu=cu, pages=pages: kern.launch(
                    q, k, v, out, *cu, s, h, hk, b * h, b * hk, causal, np.float32(scale), *pages, grid=grid,
                    group=(W.FA_THREADS,), backend="cuda"))
            if args.old:
                out = torch.empty_like(q)
                outs["old"] = out
                kern = A.attention_prefill.variant(T=idt, D=d, BQ=64)
                calls["old"] = (lambda kern=kern, out=out: kern.launch(
                    q, k, v, out, unread, s, h, hk, causal, np.float32(scale), unread, unread, 1, 1, 1,
                    grid=((s + 63) // 64 * 128, b * h),
                    group=(128,), backend="cuda"))
            if args.host:
                out = torch.empty_like(q)
                outs["host"] = out
                calls["host"] = lambda out=out: A.prefill_attention(q, k, v, causal=bool(causal), out=out)
            for call in calls.values():
                call()
            torch.cuda.synchronize()
            errs = {name: float((out.float() - ref["o"].float()).abs().max()) for name, out in outs.items()}
            if args.check_only:
                print(json.dumps({"S": s, "causal": causal, "max_err": errs}), flush=True)
                continue
            rounds: dict[str, list[float]] = {name: [] for name in calls}
            for _ in range(args.rounds):
                for name, call in calls.items():
                    rounds[name].append(kernel_us(torch, call, args.reps))
            host = call_us(torch, list(calls.values()), max(3, args.reps), 3)
            fl = flops(b, h, s, d, bool(causal))
            ref_us = statistics.median(rounds["sdpa"])
            for (name, times), call_time in zip(rounds.items(), host):
                us = statistics.median(times)
                print(json.dumps({"kernel": name, "B": b, "H": h, "H_kv": hk, "S": s, "D": d, "causal": causal,
                                  "dtype": args.dtype, "kernel_us": round(us, 2), "call_us": round(call_time, 2),
                                  "tflops": round(fl / us / 1e6, 1), "vs_sdpa": round(ref_us / us, 3),
                                  "max_err": errs.get(name), "ok": errs.get(name, 0.0) < 2 ** -6}), flush=True)


if __name__ == "__main__":
    main()
