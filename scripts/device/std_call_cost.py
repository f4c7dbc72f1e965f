"""Host cost of std calls on torch CUDA tensors, beside torch's own call of the same op (issue 18's table).

For the GPU machine.  Each row: wall time per call over a back-to-back loop with one synchronize at the end
(median of ``--reps`` loops after a warm-up), Iron's std host function and torch's op, both outputs checked.
A user kernel's ``kern[grid](x, y, 2.0)`` on torch tensors is a row too.  With ``--profile`` each Iron
call is profiled (cProfile, 2000 calls) and its top functions printed by own and by cumulative time: where
a call's host time goes.  Prints one JSON object.
Run: ``PYTHONPATH=src python3 scripts/device/std_call_cost.py [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time
from typing import Any, Callable

from iron import In, Tensor, f32, kernel
from iron.lang import program_id


@kernel
def scale(x: In[f32], y: Tensor[f32], a: f32):
    i = program_id(0)
    y[i] = a * x[i]


def per_call_us(call: Callable[[], Any], count: int, reps: int, sync: Callable[[], Any]) -> float:
    for _ in range(50):
        call()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(count):
            call()
        sync()
        times.append((time.perf_counter() - t0) / count * 1e6)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    import torch

    from iron.std import attention, elementwise, gemv

    sync = torch.cuda.synchronize
    rows: dict[str, Any] = {}

    def row(name: str, iron_call: Callable[[], Any], torch_call: Callable[[], Any], got: Any, want: Any,
            tol: float) -> None:
        rows[name] = {"iron_call_us": round(per_call_us(iron_call, args.count, args.reps, sync), 1),
                      "torch_call_us": round(per_call_us(torch_call, args.count, args.reps, sync), 1)}
        err = (got.float() - want.float()).abs().max().item()
        assert err <= tol, (name, err)

    for n, dt in ((32, torch.bfloat16), (1 << 24, torch.bfloat16)):
        x = torch.randn(n, device="cuda", dtype=dt)
        o, t = torch.empty_like(x), torch.empty_like(x)
        row(f"unary exp {n} bf16", lambda: elementwise.unary("exp", x, out=o, backend="cuda"),
            lambda: torch.exp(x, out=t), o, t, 0.05)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    o, t = (torch.empty(4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    row("gemv 4096^2 bf16", lambda: gemv.gemv(a, v, out=o, backend="cuda"), lambda: torch.mv(a, v, out=t), o, t, 1.0)
    q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    kc = torch.randn(1, 8, 4096, 128, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn(1, 8, 4096, 128, device="cuda", dtype=torch.bfloat16)
    lens = torch.full((1,), 4096, device="cuda", dtype=torch.int32)
    o = torch.empty(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    qs, ks, vs = q.unsqueeze(2), kc.repeat_interleave(4, 1), vc.repeat_interleave(4, 1)
    holder = {}

    def torch_decode():
        holder["t"] = sdpa(qs, ks, vs)

    row("decode_attention B=1 H=32 H_kv=8 S=4096", lambda: attention.decode_attention(q, kc, vc, lens, out=o,
                                                                                      backend="cuda"),
        torch_decode, o, (torch_decode(), holder["t"])[1].squeeze(2), 0.05)
    xs = torch.randn(1024, device="cuda")
    ys, ts = torch.empty_like(xs), torch.empty_like(xs)
    row("kern[grid](x, y, 2.0), 1024 f32", lambda: scale[1024, 256](xs, ys, 2.0, backend="cuda"),
        lambda: torch.mul(xs, 2.0, out=ts), ys, ts, 0.0)
    # backend auto (no backend=): the launch follows the data to the GPU; the same calls, what a torch user writes
    x = torch.randn(32, device="cuda", dtype=torch.bfloat16)
    o, t = torch.empty_like(x), torch.empty_like(x)
    try:
        row("unary exp 32 bf16, no backend=", lambda: elementwise.unary("exp", x, out=o),
            lambda: torch.exp(x, out=t), o, t, 0.05)
        row("kern[grid](x, y, 2.0), 1024 f32, no backend=", lambda: scale[1024, 256](xs, ys, 2.0),
            lambda: torch.mul(xs, 2.0, out=ts), ys, ts, 0.0)
    except Exception as e:  # an Iron from before the launch followed the data
        rows["no backend="] = f"{type(e).__name__}: {e}"[:300]
    # Where a user kernel's launch spends its host time: the whole call, the device's generated launcher alone,
    # and cuLaunchKernel alone with the packed parameters (the floor any launch path pays).
    from iron import runtime

    dev = runtime.get_device("cuda")
    plan = dev._plans[id(scale.variant().compiled("cuda"))]
    drv, geo = dev._drv, plan.geometry(1024, 256)
    stream = torch.cuda.current_stream().cuda_stream
    layers = {"launcher_only_us": lambda: plan.fast((xs, ys, 2.0), 1024, 256, None),
              "cuLaunchKernel_only_us": lambda: drv.cuLaunchKernel(plan.function, *geo.blocks, *geo.threads, 0,
                                                                   stream, plan.args.params_address, 0)}
    rows["kern[grid](x, y, 2.0), 1024 f32"].update(
        {name: round(per_call_us(call, args.count, args.reps, sync), 1) for name, call in layers.items()})
    # Whether Python's cyclic collector shows in a call's cost: the same call with the collector off.
    import gc

    x = torch.randn(32, device="cuda", dtype=torch.bfloat16)
    o = torch.empty_like(x)
    with_gc = per_call_us(lambda: elementwise.unary("exp", x, out=o), args.count, args.reps, sync)
    gc.disable()
    try:
        without_gc = per_call_us(lambda: elementwise.unary("exp", x, out=o), args.count, args.reps, sync)
    finally:
        gc.enable()
    rows["unary exp 32 bf16, no backend=, collector on/off"] = {"on_us": round(with_gc, 1),
                                                                "off_us": round(without_gc, 1)}
    if args.profile:
        x = torch.randn(32, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(x)
        calls = {"unary_exp_32": lambda: elementwise.unary("exp", x, out=o, backend="cuda"),
                 "unary_exp_32_no_backend": lambda: elementwise.unary("exp", x, out=o),
                 "gemv_4096": lambda: gemv.gemv(a, v, out=o2, backend="cuda"),
                 "decode_attention": lambda: attention.decode_attention(q, kc, vc, lens, out=o3, backend="cuda"),
                 "user_kernel": lambda: scale[1024, 256](xs, ys, 2.0, backend="cuda")}
        o2 = torch.empty(4096, device="cuda", dtype=torch.bfloat16)
        o3 = torch.empty(1, 32, 128, device="cuda", dtype=torch.bfloat16)
        for name, call in calls.items():
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(2000):
                call()
            sync()
            prof.disable()
            text = io.StringIO()
            stats = pstats.Stats(prof, stream=text)
            stats.sort_stats("tottime").print_stats(25)
            stats.sort_stats("cumulative").print_stats(30)
            rows[f"profile_{name}"] = text.getvalue()
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
