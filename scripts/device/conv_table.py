"""iron.std.conv's host functions next to cuDNN on issue 19's shapes: kernel and call time, both outputs checked.

For the GPU machine (the H200).  Per shape (conv_tune.SHAPES): ``torch.nn.functional`` conv (cuDNN), contiguous
and channels-last (conv1d rows: ``F.conv1d`` and a channels-last (N, C, 1, L) conv2d), against
``iron.std.conv.conv2d`` on channels-last tensors (layout NHWC) and on PyTorch's layout (NCHW, or ``conv1d``).
Kernel time: CUDA-event median of ``--reps`` runs of ``--batch`` calls back to back (everything the call
launches: the NCHW path's transposes too; a launch slower than its kernels shows here), and the GPU's time alone
from the CUDA profiler (``*_gpu_us``: every kernel the call launches, per call; ``gpu_ratio_*``).  Call time:
host wall time per call over ``--count`` calls back to back, one synchronize at the end.  Iron's outputs are
checked against cuDNN's (largest |difference| over the largest |output| under 2**-7).  One JSON line per shape.

Run: ``PYTHONPATH=src python3 scripts/device/conv_table.py [--shapes ...]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

from conv_tune import SHAPES
from cuda_events import kernel_us, median_ms


def call_us(torch: Any, fn: Callable[[], Any], count: int) -> float:
    """Host wall time per call of ``fn`` over ``count`` calls back to back, one synchronize at the end."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / count * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--plan", default="", help="conv_ws.WS_PLAN entries for this run, e.g. split=1")
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F

    from iron.std import conv
    from iron.std import conv_ws as W

    for entry in filter(None, args.plan.split(",")):
        key, value = entry.split("=")
        W.WS_PLAN[key] = int(value)

    torch.backends.cudnn.benchmark = True
    gen = torch.Generator(device="cuda").manual_seed(0)
    status = 0
    for shape in args.shapes:
        n, c, h, wd, co, kh, kw, s, p, groups = SHAPES[shape]
        one_d = h == 1
        stride, pad = ((1, s), (0, p)) if one_d else ((s, s), (p, p))
        x = torch.randn(n, c, h, wd, device="cuda", dtype=torch.bfloat16, generator=gen)
        w = torch.randn(co, c // groups, kh, kw, device="cuda", dtype=torch.bfloat16, generator=gen)
        w /= (c // groups * kh * kw) ** 0.5
        b = torch.randn(co, device="cuda", dtype=torch.bfloat16, generator=gen)
        xl, wl = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
        x_nhwc, w_nhwc = xl.permute(0, 2, 3, 1), wl.permute(0, 2, 3, 1)
        if one_d:
            x1, w1 = x[:, :, 0].contiguous(), w[:, :, 0].contiguous()
            torch_calls = {"conv1d": lambda: F.conv1d(x1, w1, b, s, p, 1, groups),
                           "channels_last": lambda: F.conv2d(xl, wl, b, stride, pad, 1, groups)}
            iron_calls = {"NCL": lambda: conv.conv1d(x1, w1, b, s, p, groups=groups)}
        else:
            torch_calls = {"contiguous": lambda: F.conv2d(x, w, b, stride, pad, 1, groups),
                           "channels_last": lambda: F.conv2d(xl, wl, b, stride, pad, 1, groups)}
            iron_calls = {"NCHW": lambda: conv.conv2d(x, w, b, stride, pad, groups=groups)}
        iron_calls["NHWC"] = lambda: conv.conv2d(x_nhwc, w_nhwc, b, stride, pad, layout="NHWC", groups=groups)
        want = F.conv2d(x, w, b, stride, pad, 1, groups).float()
        row: dict[str, Any] = {"shape": shape, "dims": SHAPES[shape], "plan": dict(W.WS_PLAN)}
        for side, calls in (("torch", torch_calls), ("iron", iron_calls)):
            for name, fn in calls.items():
                got = fn()
                if side == "iron" or name == "conv1d":
                    got = got.permute(0, 3, 1, 2) if name == "NHWC" else got.reshape(want.shape)
                    err = ((got.float() - want).abs().max() / want.abs().max()).item()
                    row[f"{side}_{name}_err"] = err
                    status |= 0 if err < 2.0 ** -7 else 1
                row[f"{side}_{name}_kernel_us"] = round(median_ms(torch, fn, args.reps, batch=args.batch) * 1e3, 2)
                row[f"{side}_{name}_call_us"] = round(call_us(torch, fn, args.count), 2)
                row[f"{side}_{name}_gpu_us"] = round(kernel_us(torch, fn, 20), 2)
        best_torch = min(v for k, v in row.items() if k.startswith("torch_") and k.endswith("_kernel_us"))
        flops = 2.0 * want.numel() * (c // groups) * kh * kw
        best_gpu = min(v for k, v in row.items() if k.startswith("torch_") and k.endswith("_gpu_us"))
        for name in iron_calls:
            row[f"ratio_{name}"] = round(best_torch / row[f"iron_{name}_kernel_us"], 3)
            row[f"gpu_ratio_{name}"] = round(best_gpu / row[f"iron_{name}_gpu_us"], 3)
        row["torch_best_tflops"] = round(flops / best_torch / 1e6, 1)
        row["iron_best_tflops"] = round(flops / min(row[f"iron_{k}_kernel_us"] for k in iron_calls) / 1e6, 1)
        print(json.dumps(row), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
