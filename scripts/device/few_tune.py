"""The few-row product (iron.std.gemm_few) in each of its configurations beside the warp-role tile kernel the host ran
before (gemm_ws) and torch (cuBLAS, ``x @ w.T``) on a decode step's projections: one JSON line per (shape, kernel).

For the GPU machine.  M rows (a batch of sequences) times an (N, K) bf16 weight: Llama-3-8B's stacked Q/K/V
(6144 x 4096), output (4096 x 4096), stacked gate/up (28672 x 4096), down (4096 x 14336) and an LM head (32000 x
4096).  Kernel time from the CUDA profiler over launches that take turns on rotated copies of the weight (past
twice the L2, so no launch finds its weight there), the rate it reads the weight at, and Iron's output against
cuBLAS's (largest |difference| over the largest |output|; both round f32 sums once to bf16).

    PYTHONPATH=src python3 scripts/device/few_tune.py [--rows 16 4] [--configs BN_BK_STAGES[_THREADS] ...]

(THREADS defaults to few_config's; a 64-wide panel 256 deep needs 256 threads, whose four extra subgroups only
copy.)
"""

from __future__ import annotations

import argparse
import json
import sys

from cuda_events import kernel_us

SHAPES = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (32000, 4096))


def main(argv: list[str]) -> int:
    import torch

    from iron import bf16
    from iron.std import gemm as gemm_mod
    from iron.std.gemm_few import FEW_CONFIGS, few_config, few_geometry, gemm_few
    from iron.std.gemm_ws import gemm_ws, ws_config, ws_geometry

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[16, 4])
    ap.add_argument("--configs", nargs="*", default=["_".join(map(str, c)) for c in FEW_CONFIGS])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--quant", nargs="*", default=["Q8_0", "Q4_0"], help="also quant_few on these formats")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    for n, k in SHAPES:
        copies = max(2, -(-(120 << 20) // (n * k * 2)))
        ws_ = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5 for _ in range(copies)]
        gb = n * k * 2 / 1e9
        for m in args.rows:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            want = x @ ws_[0].T
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            bias = torch.empty(1, device="cuda", dtype=torch.bfloat16)
            turn = [0]

            def weight():
                turn[0] = (turn[0] + 1) % copies
                return ws_[turn[0]]

            def error() -> float:
                return float((out.float() - want.float()).abs().max() / want.float().abs().max())

            def row(name: str, us: float, err: float | None) -> None:
                print(json.dumps({"m": m, "n": n, "k": k, "kernel": name, "us": round(us, 2),
                                  "tb_s": round(gb / us * 1e3, 3) if us else None,
                                  "error": None if err is None else float(f"{err:.2e}")}), flush=True)

            row("torch", kernel_us(torch, lambda: torch.matmul(x, weight().T, out=out), args.calls),
                None)
            gemm_mod.gemm(x, ws_[0], out=out, transpose_b=True, backend="cuda")
            row("host", kernel_us(torch, lambda: gemm_mod.gemm(x, weight(), out=out, transpose_b=True,
                                                                backend="cuda"), args.calls), error())
            ws = ws_config(m, n, True)
            grid, group = ws_geometry(m, n, ws["BN"], None, ws.get("CLUSTER", 1))
            kern = gemm_ws.variant(T=bf16, BT=True, BIAS=False, ACT="none", **ws)
            kern.launch(x, ws_[0], bias, out, m, n, k, grid=grid, group=group, backend="cuda")
            err = error()
            row("ws", kernel_us(torch, lambda: kern.launch(x, weight(), bias, out, m, n, k, grid=grid, group=group,
                                                           backend="cuda"), args.calls), err)
            for name in args.configs:
                bn, bk, stages, *threads = (int(v) for v in name.split("_"))
                cfg = {**few_config(n), "BN": bn, "BK": bk, "STAGES": stages, **{"THREADS": t for t in threads}}
                grid, group = few_geometry(n, cfg)
                try:
                    kern = gemm_few.variant(T=bf16, BIAS=False, ACT="none", **cfg)
                except Exception as e:  # noqa: BLE001 - a configuration the variant filter refuses
                    print(json.dumps({"kernel": f"few_{name}", "skipped": str(e)[:120]}), flush=True)
                    continue
                out.zero_()
                kern.launch(x, ws_[0], bias, out, m, n, k, grid=grid, group=group, backend="cuda")
                err = error()
                row(f"few_{name}", kernel_us(torch, lambda: kern.launch(x, weight(), bias, out, m, n, k, grid=grid,
                                                                        group=group, backend="cuda"), args.calls), err)
        for qtype in args.quant:
            quant_rows(torch, qtype, n, k, args.rows, args.calls)
    return 0


def random_blocks(torch, qtype: str, n: int, k: int):
    """n rows of k / 32 random blocks of ``qtype`` on the device: scales 2**-7 (f16 0x2000), random weights."""
    nbytes = 34 if qtype == "Q8_0" else 18
    blocks = torch.randint(0, 256, (n * k // 32, nbytes), dtype=torch.uint8, device="cuda")
    blocks[:, 0] = 0x00
    blocks[:, 1] = 0x20
    return blocks.reshape(-1)


def quant_rows(torch, qtype: str, n: int, k: int, rows: list[int], calls: int) -> None:
    """quant_few (the weight's bytes) beside gemm on its bf16 dequantisation (what a batch multiplied before), each
    checked against torch on that dequantisation; the rate counts the bytes each reads."""
    from iron.std import gemm as gemm_mod
    from iron.std import gguf
    from iron.std.quant_few import QFEW_CONFIGS, quant_few

    copies = max(2, -(-(120 << 20) // (n * k)))
    datas = [random_blocks(torch, qtype, n, k) for _ in range(copies)]
    w = gguf.dequantize(datas[0], qtype, (n, k), torch.bfloat16, backend="cuda")
    wf = [gguf.dequantize(d, qtype, (n, k), torch.bfloat16, backend="cuda") for d in datas]
    qgb, fgb = datas[0].numel() / 1e9, n * k * 2 / 1e9
    for m in rows:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        want = (x.float() @ w.float().T)
        out = torch.zeros(m, n, device="cuda", dtype=torch.bfloat16)
        turn = [0]

        def nxt(seq):
            turn[0] = (turn[0] + 1) % copies
            return seq[turn[0]]

        for bn, bk, stages in QFEW_CONFIGS[:-1]:  # the last is the portable tests' (Vulkan's 32 KiB)
            cfg = {"BN": bn, "BK": bk, "STAGES": stages, "THREADS": 128}
            out.zero_()
            quant_few(datas[0], qtype, x, n, out, backend="cuda", binding=cfg)
            err = float((out.float() - want).abs().max() / want.abs().max())
            us = kernel_us(torch, lambda: quant_few(nxt(datas), qtype, x, n, out, backend="cuda", binding=cfg), calls)
            print(json.dumps({"m": m, "n": n, "k": k, "kernel": f"quant_few_{qtype}_{bn}_{bk}_{stages}",
                              "us": round(us, 2), "tb_s": round(qgb / us * 1e3, 3), "error": float(f"{err:.2e}")}),
                  flush=True)
        gemm_mod.gemm(x, w, out=out, transpose_b=True, backend="cuda")
        err = float((out.float() - want).abs().max() / want.abs().max())
        us = kernel_us(torch, lambda: gemm_mod.gemm(x, nxt(wf), out=out, transpose_b=True, backend="cuda"), calls)
        print(json.dumps({"m": m, "n": n, "k": k, "kernel": f"gemm_bf16_of_{qtype}", "us": round(us, 2),
                          "tb_s": round(fgb / us * 1e3, 3), "error": float(f"{err:.2e}")}), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
