"""iron.std.gemm's matrix kernel in several configurations next to torch.matmul (cuBLAS): one JSON line each.

For the GPU machine (the H200).  For each configuration of :data:`iron.std.gemm.gemm_mma` (FRAG, WARPS,
WT, BK, THREADS), of :data:`iron.std.gemm_wg.gemm_wg` (``WG_*``: BN, STAGES, PENDING, KP) or of
:data:`iron.std.gemm_ws.gemm_ws` (``WS_*``: BN, STAGES) and each size, the kernel and ``torch.matmul`` run on
the same bf16/f16 inputs; for both the kernel time (GPU time per call from the CUDA profiler, over ``--reps``
calls: the host's time to launch never counts; the median of ``--rounds`` timings, cuBLAS's and every
configuration's taking turns) and the call time (host wall time per call, back to back) are reported, and
Iron's output is checked against cuBLAS's: the largest |difference| over the largest |cuBLAS output| must stay
under 2**-7 (both round f32 sums of the same products once to 16 bits; a wrong tile shows up as O(1)).

Run: ``PYTHONPATH=src python3 scripts/device/gemm_tune.py --sizes 4096 8192`` (``--shapes 512x4096x4096`` for
M x N x K shapes; ``--configs WS_256_S3 ...`` for some configurations; ``--bt`` for B given (N, K)).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any, Callable

from cuda_events import call_us, kernel_us

#: name -> binding of gemm_mma: candidates for iron.std.gemm.SM80 (BENCHMARKS.md has their figures).
CONFIGS: dict[str, dict[str, Any]] = {
    # 8 subgroups of 64x32 on a 128x128 tile (the shipped SM80 until 2026-11-30), then deeper rings.
    "W8_S2": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x4", "BK": 32, "THREADS": 256, "STAGES": 2},
    "W8_S3": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x4", "BK": 32, "THREADS": 256, "STAGES": 3},
    "W8_S4": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x4", "BK": 32, "THREADS": 256, "STAGES": 4},
    # 4 subgroups of 64x64 on a 128x128 tile.
    "W4_S3": {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "4x8", "BK": 32, "THREADS": 128, "STAGES": 3},
    "W4_S4": {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "4x8", "BK": 32, "THREADS": 128, "STAGES": 4},
    # 8 subgroups of 64x64: 128x256 and 256x128 tiles (dynamic shared memory past 48 KiB).
    "WIDE_S3": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x8", "BK": 32, "THREADS": 256, "STAGES": 3},
    "WIDE_S4": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x8", "BK": 32, "THREADS": 256, "STAGES": 4},
    "TALL_S3": {"FRAG": "16x8x16", "WARPS": "4x2", "WT": "4x8", "BK": 32, "THREADS": 256, "STAGES": 3},
    "TALL_S4": {"FRAG": "16x8x16", "WARPS": "4x2", "WT": "4x8", "BK": 32, "THREADS": 256, "STAGES": 4},
    "WIDE_BK16_S4": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x8", "BK": 16, "THREADS": 256, "STAGES": 4},
    # K steps of 64: half the barriers and waits per multiply.
    "W4_BK64_S2": {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "4x8", "BK": 64, "THREADS": 128, "STAGES": 2},
    "W4_BK64_S3": {"FRAG": "16x8x16", "WARPS": "2x2", "WT": "4x8", "BK": 64, "THREADS": 128, "STAGES": 3},
    "W8_BK64_S2": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x4", "BK": 64, "THREADS": 256, "STAGES": 2},
    "W8_BK64_S3": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x4", "BK": 64, "THREADS": 256, "STAGES": 3},
    "WIDE_BK64_S3": {"FRAG": "16x8x16", "WARPS": "2x4", "WT": "4x8", "BK": 64, "THREADS": 256, "STAGES": 3},
    # gemm_wg (mma_wg, sm_90's wgmma): 128 x BN tiles, STAGES buffers, PENDING multiplies left running.
    "WG_256_S4_P1": {"BN": 256, "STAGES": 4, "PENDING": 1},
    "WG_256_S3_P1": {"BN": 256, "STAGES": 3, "PENDING": 1},
    "WG_256_S3_P0": {"BN": 256, "STAGES": 3, "PENDING": 0},
    "WG_128_S4_P1": {"BN": 128, "STAGES": 4, "PENDING": 1},
    "WG_128_S3_P1": {"BN": 128, "STAGES": 3, "PENDING": 1},
    "WG_128_S4_P0": {"BN": 128, "STAGES": 4, "PENDING": 0},
    # K steps of 128 (two swizzled panels per buffer): half the barriers per multiply.
    "WG_256_S2_P0_K2": {"BN": 256, "STAGES": 2, "PENDING": 0, "KP": 2},
    "WG_128_S3_P1_K2": {"BN": 128, "STAGES": 3, "PENDING": 1, "KP": 2},
    "WG_128_S3_P0_K2": {"BN": 128, "STAGES": 3, "PENDING": 0, "KP": 2},
    "WG_128_S2_P0_K2": {"BN": 128, "STAGES": 2, "PENDING": 0, "KP": 2},
    # gemm_ws (warp roles: a producer warpgroup issuing tile copies, two consumer warpgroups on m64nBN).
    "WS_256_S3": {"BN": 256, "STAGES": 3},
    "WS_256_S4": {"BN": 256, "STAGES": 4},
    "WS_256_S2": {"BN": 256, "STAGES": 2},
    "WS_128_S4": {"BN": 128, "STAGES": 4},
    "WS_128_S3": {"BN": 128, "STAGES": 3},
    "WS_128_S5": {"BN": 128, "STAGES": 5},
    "WS_128_S6": {"BN": 128, "STAGES": 6},
    "WS_168_S4": {"BN": 168, "STAGES": 4},
    "WS_168_S5": {"BN": 168, "STAGES": 5},
    # ... in clusters of two groups sharing (multicasting) the B tile of one tile column.
    "WSC_128_S4": {"BN": 128, "STAGES": 4, "CLUSTER": 2},
    "WSC_128_S6": {"BN": 128, "STAGES": 6, "CLUSTER": 2},
    "WSC_256_S4": {"BN": 256, "STAGES": 4, "CLUSTER": 2},
    "WSC_168_S4": {"BN": 168, "STAGES": 4, "CLUSTER": 2},
    "WSC_168_S5": {"BN": 168, "STAGES": 5, "CLUSTER": 2},
    # ... in clusters of four (512 rows: a cluster a tile column, each group reading a quarter of B's tile, so a
    # K step brings a group 20 KiB through L2 against 24 in pairs and 32 alone at 128 columns).
    "WSC4_128_S6": {"BN": 128, "STAGES": 6, "CLUSTER": 4},
    "WSC4_128_S4": {"BN": 128, "STAGES": 4, "CLUSTER": 4},
    "WSC4_168_S5": {"BN": 168, "STAGES": 5, "CLUSTER": 4},
    # ... persistent: one group per multiprocessor (GROUPS: set at run time), each looping over tiles.
    "WSP_256_S3": {"BN": 256, "STAGES": 3, "GROUPS": "sms"},
    "WSP_256_S4": {"BN": 256, "STAGES": 4, "GROUPS": "sms"},
    "WSP_128_S4": {"BN": 128, "STAGES": 4, "GROUPS": "sms"},
}


def _launcher(cfg: dict[str, Any], name: str, dt: Any, bt: bool, operands: tuple[Any, ...],
              mnk: tuple[int, int, int]) -> tuple[Callable[[], None], Any]:
    """One launch of configuration ``name`` on the operands, and the output it writes (NaN until then)."""
    import torch

    from iron.std.gemm import block_tile, gemm_mma, launch_geometry
    from iron.std.gemm_wg import WG_BM, WG_THREADS, gemm_wg
    from iron.std.gemm_ws import gemm_ws, ws_geometry

    (m, n, k), (a, b, bias) = mnk, operands
    if name.startswith("WS"):
        tile = {key: v for key, v in cfg.items() if key != "GROUPS"}
        kern = gemm_ws.variant(T=dt, BT=bt, BIAS=False, ACT="none", **tile)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        grid, group = ws_geometry(m, n, cfg["BN"], sms if "GROUPS" in cfg else None, cfg.get("CLUSTER", 1))
    elif name.startswith("WG_"):
        kern = gemm_wg.variant(T=dt, BT=bt, BIAS=False, ACT="none", **cfg)
        grid, group = launch_geometry(m, n, WG_THREADS, (WG_BM, cfg["BN"]))
    else:
        kern = gemm_mma.variant(T=dt, BT=bt, BIAS=False, ACT="none", **cfg)
        grid, group = launch_geometry(m, n, cfg["THREADS"], block_tile(cfg))
    c = torch.full((m, n), float("nan"), device="cuda", dtype=a.dtype)

    def run() -> None:
        kern.launch(a, b, bias, c, m, n, k, grid=grid, group=group, backend="cuda")

    return run, c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[4096])
    ap.add_argument("--shapes", nargs="+", default=[], help="MxNxK shapes beside the square --sizes")
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--bt", action="store_true", help="B given as (N, K), an nn.Linear weight")
    ap.add_argument("--reps", type=int, default=10, help="calls per timing")
    ap.add_argument("--rounds", type=int, default=3, help="timings per configuration, interleaved; the median")
    ap.add_argument("--check-only", action="store_true",
                    help="one checked launch per configuration, no timing (the profiling target under ncu)")
    args = ap.parse_args(argv)

    import torch

    from iron import bf16, f16

    dt, tdt = (bf16, torch.bfloat16) if args.dtype == "bf16" else (f16, torch.float16)
    gen = torch.Generator(device="cuda").manual_seed(0)
    status = 0
    shapes = [(s, s, s) for s in args.sizes] + [tuple(int(x) for x in t.split("x")) for t in args.shapes]
    for m, n, k in shapes:
        size = f"{m}x{n}x{k}"
        a = torch.randn(m, k, device="cuda", dtype=tdt, generator=gen)
        b = torch.randn((n, k) if args.bt else (k, n), device="cuda", dtype=tdt, generator=gen)
        bias = torch.zeros(1, device="cuda", dtype=tdt)
        want = torch.matmul(a, b.t() if args.bt else b)

        def ref() -> None:
            torch.matmul(a, b.t() if args.bt else b)

        flops = 2.0 * m * n * k
        runs: dict[str, tuple[Any, float, bool]] = {}  # name -> (launch, error, checked)
        for name in args.configs:
            try:
                run, out = _launcher(CONFIGS[name], name, dt, args.bt, (a, b, bias), (m, n, k))
            except Exception as e:  # a configuration without a variant for this layout: say so, time the rest
                print(json.dumps({"config": name, "size": size, "bt": args.bt, "error": str(e)[:300]}), flush=True)
                status |= 1
                continue
            run()
            torch.cuda.synchronize()
            err = ((out.float() - want.float()).abs().max() / want.float().abs().max()).item()
            runs[name] = (run, err, err < 2.0 ** -7)
            status |= 0 if err < 2.0 ** -7 else 1
            if args.check_only:
                print(json.dumps({"config": name, "size": size, "bt": args.bt, "rel_err": err, "ok": err < 2.0 ** -7}),
                      flush=True)
        if args.check_only:
            continue
        # Rounds of cuBLAS then every configuration: the clock's drift falls on all of them alike.
        times: dict[str, list[float]] = {name: [] for name in ["torch", *runs]}
        for _ in range(args.rounds):
            times["torch"].append(kernel_us(torch, ref, args.reps))
            for name, (run, _, _) in runs.items():
                times[name].append(kernel_us(torch, run, args.reps))
        ref_us = statistics.median(times["torch"])
        for name, (run, err, ok) in runs.items():
            us = statistics.median(times[name])
            iron_call, torch_call = call_us(torch, [run, ref], args.reps, 3)
            print(json.dumps({"config": name, "size": size, "dtype": args.dtype, "bt": args.bt,
                              "iron_kernel_us": round(us, 1), "torch_kernel_us": round(ref_us, 1),
                              "iron_call_us": round(iron_call, 1), "torch_call_us": round(torch_call, 1),
                              "iron_tflops": round(flops / us / 1e6, 1), "torch_tflops": round(flops / ref_us / 1e6, 1),
                              "ratio": round(ref_us / us, 3), "rounds": [round(t, 1) for t in times[name]],
                              "torch_rounds": [round(t, 1) for t in times["torch"]], "rel_err": err, "ok": ok}),
                  flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
