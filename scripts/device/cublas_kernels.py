"""Which kernels cuBLAS runs for a gemm shape, with their GPU time (CUDA profiler): one JSON line per shape.

For the GPU machine.  Knowing whether cuBLAS splits K, streams K or picks a tile shape for a shape
(kernel names carry it) tells what schedule Iron's gemm must match there.  ``--fp8`` times
``torch._scaled_mm`` instead (e4m3 x e4m3 -> bf16, per-tensor scales, B given (N, K)), once with cuBLAS's
periodic promotion of the sums to f32 (``use_fast_accum=False``, the default) and once without.

Run: ``python3 scripts/device/cublas_kernels.py 512x11008x4096 512x4096x4096 [--bt] [--fp8]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile


def main() -> None:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("shapes", nargs="+", help="M x N x K")
    parser.add_argument("--bt", action="store_true", help="B given (N, K), as a linear layer's weight")
    parser.add_argument("--fp8", action="store_true", help="torch._scaled_mm on e4m3 operands")
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    for shape in args.shapes:
        m, n, k = (int(v) for v in shape.split("x"))
        if args.fp8:
            for fast in (False, True):
                profile_one(shape, {"fp8": True, "use_fast_accum": fast}, scaled_mm(torch, m, n, k, fast), args.calls)
            continue
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        if not args.bt:
            b = b.t().contiguous()
        call = (lambda: a @ b.t()) if args.bt else (lambda: a @ b)
        profile_one(shape, {"bt": args.bt}, call, args.calls)


def scaled_mm(torch, m: int, n: int, k: int, fast: bool):
    """``torch._scaled_mm`` on e4m3 A (M, K) and B given (N, K) (column-major as it wants), bf16 out."""
    a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    bt = (torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn)
    sa = torch.tensor(0.5, device="cuda")
    sb = torch.tensor(0.25, device="cuda")
    return lambda: torch._scaled_mm(a, bt.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                    use_fast_accum=fast)


def profile_one(shape: str, tags: dict, call, calls: int) -> None:
    """Print the kernels ``call`` launches, each with its GPU time per call and its launch shape."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    kernels: dict[str, dict] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            row = kernels.setdefault(e.name, {"us": 0.0})
            row["us"] += e.time_range.elapsed_us() / calls
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        for event in json.load(open(trace.name)).get("traceEvents", []):
            found = kernels.get(event.get("name", ""))
            if found is not None and event.get("cat") == "kernel":
                extra = event.get("args", {})
                for key in ("grid", "block", "shared memory", "registers per thread"):
                    if key in extra:
                        found[key] = extra[key]
    print(json.dumps({"shape": shape, **tags, "kernels": kernels}))


if __name__ == "__main__":
    main()
