"""iron.std.gemm_fp8 beside ``torch._scaled_mm`` (cuBLAS) on e4m3 operands: one JSON line per shape and config.

For the GPU machine (the H200).  A (M, K) and B given (N, K) of f8e4m3 (torch's float8_e4m3fn), per-tensor
scales, bf16 out.  Iron's kernel runs in each listed configuration of :data:`iron.std.gemm_fp8.gemm_fp8`
(``FOLD``: the sums of each 128-deep K step added to an f32 total, as cuBLAS does by default, ``FOLDO_*`` with
OVERLAP's two step sums taking turns; else fast accumulation) against ``_scaled_mm`` with ``use_fast_accum``
False and True.  Kernel time from the CUDA profiler (median of ``--rounds`` interleaved rounds of ``--reps``
calls), call time back to back; Iron's output is
checked against cuBLAS's promoted one (fast accumulation against cuBLAS's fast one): the largest |difference|
over the largest |output| under 2**-7 (both round f32 sums to bf16; a wrong tile shows up as O(1)).

Run: ``PYTHONPATH=src python3 scripts/device/fp8_tune.py --shapes 4096x4096x4096 512x11008x4096``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from cuda_events import call_us, kernel_us

CONFIGS: dict[str, dict[str, Any]] = {
    "FOLD_128_S5": {"BN": 128, "STAGES": 5, "FOLD": True},
    "FOLD_128_S4": {"BN": 128, "STAGES": 4, "FOLD": True},
    "FAST_256_S4": {"BN": 256, "STAGES": 4, "FOLD": False},
    "FAST_128_S5": {"BN": 128, "STAGES": 5, "FOLD": False},
    "FOLDO_128_S4": {"BN": 128, "STAGES": 4, "FOLD": True, "OVERLAP": True},
    "FOLDO_128_S5": {"BN": 128, "STAGES": 5, "FOLD": True, "OVERLAP": True},
    # 128 x 256 tiles folded by halves (two totals and one step sum); GROUPS: persistent groups over the tiles
    "FOLD_256_S4": {"BN": 256, "STAGES": 4, "FOLD": True},
    "FOLD_256_S3": {"BN": 256, "STAGES": 3, "FOLD": True},
    "FOLDP_256_S4": {"BN": 256, "STAGES": 4, "FOLD": True, "GROUPS": 132},
    "FOLDC_256_S4": {"BN": 256, "STAGES": 4, "FOLD": True, "CLUSTER": 2},
    "FASTP_256_S4": {"BN": 256, "STAGES": 4, "FOLD": False, "GROUPS": 132},
    # 128 x 192 tiles folded whole (a total and a step sum of 96 registers each)
    "FOLD_192_S5": {"BN": 192, "STAGES": 5, "FOLD": True},
    "FOLD_192_S4": {"BN": 192, "STAGES": 4, "FOLD": True},
    "FOLDP_192_S5": {"BN": 192, "STAGES": 5, "FOLD": True, "GROUPS": 132},
    "FOLDC_192_S5": {"BN": 192, "STAGES": 5, "FOLD": True, "CLUSTER": 2},
    "FOLDOC_128_S5": {"BN": 128, "STAGES": 5, "FOLD": True, "OVERLAP": True, "CLUSTER": 2},
    "FOLDOC_128_S4": {"BN": 128, "STAGES": 4, "FOLD": True, "OVERLAP": True, "CLUSTER": 2},
    # in clusters of two groups sharing (multicasting) B's panel
    "FOLDC_128_S4": {"BN": 128, "STAGES": 4, "FOLD": True, "CLUSTER": 2},
    "FOLDC_128_S5": {"BN": 128, "STAGES": 5, "FOLD": True, "CLUSTER": 2},
    "FASTC_256_S4": {"BN": 256, "STAGES": 4, "FOLD": False, "CLUSTER": 2},
    "FASTC_128_S5": {"BN": 128, "STAGES": 5, "FOLD": False, "CLUSTER": 2},
    # fast accumulation on 192 columns (where folding takes them, the host's fast accumulation folds)
    "FAST_192_S4": {"BN": 192, "STAGES": 4, "FOLD": False},
    "FASTC_192_S4": {"BN": 192, "STAGES": 4, "FOLD": False, "CLUSTER": 2},
    # in clusters of four (a 512-row output's tile column a cluster, each group reading a quarter of B's panel)
    "FASTC4_128_S5": {"BN": 128, "STAGES": 5, "FOLD": False, "CLUSTER": 4},
    "FOLDC4_128_S5": {"BN": 128, "STAGES": 5, "FOLD": True, "CLUSTER": 4},
    "FOLDC4_192_S4": {"BN": 192, "STAGES": 4, "FOLD": True, "CLUSTER": 4},
    "FASTC4_192_S4": {"BN": 192, "STAGES": 4, "FOLD": False, "CLUSTER": 4},
}


def main() -> None:
    import torch

    from iron import bf16, f8e4m3
    from iron.std import gemm_fp8 as G

    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["4096x4096x4096", "8192x8192x8192"])
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--check-only", action="store_true",
                    help="one launch per configuration, no timing (the profiling target under ncu)")
    args = ap.parse_args()
    for shape in args.shapes:
        m, n, k = (int(v) for v in shape.split("x"))
        a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
        bt = (torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn)
        sa = torch.tensor([0.375], device="cuda")
        sb = torch.tensor([1.5], device="cuda")
        outs = {name: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for name in args.configs}

        def reference(fast: bool):
            return lambda: torch._scaled_mm(a, bt.t(), scale_a=sa.view(()), scale_b=sb.view(()),
                                            out_dtype=torch.bfloat16, use_fast_accum=fast)

        def iron_call(name: str):
            binding = {key: v for key, v in CONFIGS[name].items() if key != "GROUPS"}
            kern = G.gemm_fp8.variant(T=f8e4m3, U=f8e4m3, OUT=bf16, **binding)
            grid, group = G.fp8_geometry(m, n, binding["BN"], CONFIGS[name].get("GROUPS"), binding.get("CLUSTER", 1))
            out = outs[name]
            return lambda: kern.launch(a, bt, sa, sb, out, m, n, k, grid=grid, group=group, backend="cuda")

        if args.check_only:
            for name in args.configs:
                iron_call(name)()
            torch.cuda.synchronize()
            continue
        calls = {"cublas": reference(False), "cublas_fast": reference(True),
                 **{name: iron_call(name) for name in args.configs}}
        # folding configurations against cuBLAS's promoted sums, fast ones against its fast accumulation (at K = 8192
        # the two differ by about 1% of the largest output: the hardware's narrower sums)
        want = {fast: calls["cublas_fast" if fast else "cublas"]().float() for fast in (False, True)}
        top = float(want[False].abs().max())
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                times[name].append(kernel_us(torch, call, args.reps))
        flops = 2.0 * m * n * k
        ref_us = statistics.median(times["cublas"])
        for name in calls:
            us = statistics.median(times[name])
            row = {"shape": shape, "config": name, "kernel_us": round(us, 1), "tflops": round(flops / us / 1e6, 1),
                   "ratio_vs_cublas": round(ref_us / us, 3), "rounds": [round(t, 1) for t in times[name]]}
            if name in outs:
                torch.cuda.synchronize()
                err = float((outs[name].float() - want[not CONFIGS[name]["FOLD"]]).abs().max()) / top
                row.update(rel_err=err, ok=err < 2 ** -7)
                row["call_us"], row["cublas_call_us"] = (round(x, 1) for x in
                                                         call_us(torch, [calls[name], calls["cublas"]], args.reps, 3))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
