"""Every std op beside what a PyTorch user calls instead: kernel time and call time for both, outputs checked.

For the GPU machine.  Per row, on torch CUDA tensors with no ``backend=`` (a launch follows its data):
* call time: host wall time per call over a back-to-back loop, one synchronize at the end (median of
  ``--reps`` loops after a warm-up, Iron's and torch's loops taking turns), allocation of the result
  included where the call allocates;
* kernel time: the GPU time of every kernel one call launches, from the CUDA profiler (torch.profiler's
  CUPTI trace, which sees Iron's driver-API launches too), averaged over ``--profiled`` calls;
and the largest difference between the two outputs, which must be within the row's tolerance.
Prints one JSON object: {"rows": [...], "device": ..., "torch": ...}.
Run: ``PYTHONPATH=src python3 scripts/device/std_call_table.py``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

import torch
import torch.nn.functional as F

from cuda_events import call_us, kernel_us

from iron import In, Tensor, f32, kernel
from iron.lang import program_id
from iron.std import (attention, cast, conv, elementwise, gemm, gemv, gguf, norms, quant_gemv, reduce, rope,
                      softmax, transpose)

BF = torch.bfloat16


@kernel
def scale(x: In[f32], y: Tensor[f32], a: f32):
    i = program_id(0)
    y[i] = a * x[i]


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    g = torch.Generator(device="cuda").manual_seed(0)

    def r(*shape: int, dtype: torch.dtype = BF) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", generator=g, dtype=torch.float32).to(dtype)

    table: list[tuple[str, Callable[[], Any], Callable[[], Any], float]] = []
    for n in (32, 1 << 24):
        x = r(n)
        o, t = torch.empty_like(x), torch.empty_like(x)
        table.append((f"unary exp {n} bf16 (out=)", lambda x=x, o=o: elementwise.exp(x, out=o),
                      lambda x=x, t=t: torch.exp(x, out=t), 0.05))
    a, b = r(1 << 24), r(1 << 24)
    table.append(("binary add 16M bf16", lambda: elementwise.add(a, b), lambda: torch.add(a, b), 0.05))
    for rows_, n in ((1, 4096), (4096, 4096)):
        x, w, res = r(rows_, n), r(n), r(rows_, n)
        table.append((f"rmsnorm {rows_}x{n} bf16", lambda x=x, w=w: norms.rmsnorm(x, w, 1e-6),
                      lambda x=x, w=w, n=n: F.rms_norm(x, (n,), w, 1e-6), 0.1))
        table.append((f"add_rmsnorm {rows_}x{n} bf16", lambda x=x, w=w, res=res: norms.add_rmsnorm(x, res, w, 1e-6)[0],
                      lambda x=x, w=w, res=res, n=n: F.rms_norm(x + res, (n,), w, 1e-6), 0.1))
        bias = r(n)
        table.append((f"layernorm {rows_}x{n} bf16", lambda x=x, w=w, bias=bias: norms.layernorm(x, w, bias),
                      lambda x=x, w=w, bias=bias, n=n: F.layer_norm(x, (n,), w, bias), 0.1))
    for rows_, n in ((32, 32000), (4096, 1024)):
        x = r(rows_, n)
        table.append((f"softmax {rows_}x{n} bf16", lambda x=x: softmax.softmax(x), lambda x=x: torch.softmax(x, -1),
                      0.02))
        table.append((f"sum {rows_}x{n} bf16", lambda x=x: reduce.sum(x), lambda x=x: torch.sum(x, -1), 2.0))
    x = r(4096, 4096, dtype=torch.float32)
    table.append(("cast f32->bf16 4096^2", lambda: cast.cast(x, "bf16"), lambda: x.to(BF), 0.0))
    table.append(("transpose 4096^2 f32", lambda: transpose.transpose(x), lambda: x.t().contiguous(), 0.0))
    q, pos = r(1, 32, 128), torch.arange(1, dtype=torch.int32, device="cuda")
    cos, sin = rope.rope_cache(pos, 128)

    def torch_rope():
        c = torch.cat([cos, cos], -1)[:, None, :].to(BF)
        s = torch.cat([sin, sin], -1)[:, None, :].to(BF)
        half = q.shape[-1] // 2
        rotated = torch.cat([-q[..., half:], q[..., :half]], -1)
        return q * c + rotated * s

    table.append(("rope 1x32x128 bf16 (cos/sin tables)", lambda: rope.rope(q, (cos, sin)), torch_rope, 0.05))
    A, v = r(4096, 4096), r(4096)
    table.append(("gemv 4096^2 bf16", lambda: gemv.gemv(A, v), lambda: torch.mv(A, v), 1.0))
    xs, W = r(1, 4096), r(11008, 4096)
    table.append(("gemm 1x4096 @ W(11008,4096)^T bf16", lambda: gemm.gemm(xs, W, transpose_b=True),
                  lambda: F.linear(xs, W), 1.0))
    M = r(4096, 4096)
    table.append(("gemm 4096^3 bf16", lambda: gemm.gemm(M, M), lambda: M @ M, 2.0))
    xp, Wp = r(512, 4096), r(4096, 4096)
    table.append(("gemm 512x4096 @ W(4096,4096)^T bf16", lambda: gemm.gemm(xp, Wp, transpose_b=True),
                  lambda: F.linear(xp, Wp), 2.0))
    table.append(("gemm 512x4096 @ W(11008,4096)^T bf16", lambda: gemm.gemm(xp, W, transpose_b=True),
                  lambda: F.linear(xp, W), 2.0))
    xl = r(8192, 4096)
    table.append(("gemm 8192x4096 @ W(11008,4096)^T bf16", lambda: gemm.gemm(xl, W, transpose_b=True),
                  lambda: F.linear(xl, W), 2.0))
    qd, kc, vc = r(1, 32, 128), r(1, 8, 4096, 128), r(1, 8, 4096, 128)
    lens = torch.full((1,), 4096, dtype=torch.int32, device="cuda")
    table.append(("decode_attention B=1 H=32 H_kv=8 S=4096 bf16",
                  lambda: attention.decode_attention(qd, kc, vc, lens),
                  lambda: F.scaled_dot_product_attention(qd[:, :, None], kc, vc, enable_gqa=True)[:, :, 0], 0.05))
    qp, kp, vp = r(1, 32, 1024, 128), r(1, 8, 1024, 128), r(1, 8, 1024, 128)
    table.append(("prefill_attention causal B=1 H=32 H_kv=8 S=1024 bf16",
                  lambda: attention.prefill_attention(qp, kp, vp, causal=True),
                  lambda: F.scaled_dot_product_attention(qp, kp, vp, is_causal=True, enable_gqa=True), 0.05))
    xc, wc = r(8, 64, 56, 56), r(64, 64, 3, 3)
    table.append(("conv2d N=8 C=64 56^2 3x3 bf16", lambda: conv.conv2d(xc, wc, padding=1),
                  lambda: F.conv2d(xc, wc, padding=1), 0.5))
    # The rest of the std host functions, small (where the host cost shows) and, for the reductions, wide.
    xs32, ys32, zs32 = r(32), r(32), r(32)
    o32, t32 = torch.empty_like(xs32), torch.empty_like(xs32)
    table.append(("binary add 32 bf16 (out=)", lambda: elementwise.add(xs32, ys32, out=o32),
                  lambda: torch.add(xs32, ys32, out=t32), 0.05))
    table.append(("clamp 32 bf16 (out=)", lambda: elementwise.clamp(xs32, -0.5, 0.5, out=o32),
                  lambda: torch.clamp(xs32, -0.5, 0.5, out=t32), 0.0))
    table.append(("fma 32 bf16 (out=)", lambda: elementwise.fma(xs32, ys32, zs32, out=o32),
                  lambda: torch.addcmul(zs32, xs32, ys32, out=t32), 0.05))
    cond = xs32 > 0
    table.append(("where 32 bf16", lambda: elementwise.where(cond, xs32, ys32), lambda: torch.where(cond, xs32, ys32),
                  0.0))
    table.append(("copy 32 bf16 (out=)", lambda: cast.copy(xs32, out=o32), lambda: t32.copy_(xs32), 0.0))
    x4k = r(1, 4096, dtype=torch.float32)
    table.append(("cast f32->bf16 1x4096", lambda: cast.cast(x4k, "bf16"), lambda: x4k.to(BF), 0.0))
    x64 = r(64, 64, dtype=torch.float32)
    table.append(("transpose 64^2 f32", lambda: transpose.transpose(x64), lambda: x64.t().contiguous(), 0.0))
    xw = r(32, 32000)
    table.append(("log_softmax 32x32000 bf16", lambda: softmax.log_softmax(xw), lambda: torch.log_softmax(xw, -1),
                  0.05))
    table.append(("mean 32x32000 bf16", lambda: reduce.mean(xw), lambda: torch.mean(xw, -1), 0.01))
    table.append(("max 32x32000 bf16", lambda: reduce.max(xw), lambda: torch.amax(xw, -1), 0.0))
    table.append(("argmax 32x32000 bf16", lambda: reduce.argmax(xw), lambda: torch.argmax(xw, -1).int(), 0.0))
    x1 = r(1, 32000)
    table.append(("argmax 1x32000 bf16", lambda: reduce.argmax(x1), lambda: torch.argmax(x1, -1).int(), 0.0))
    Mq, Kq = 4096, 4096
    blocks = torch.randint(-127, 128, (Mq * Kq // 32, 34), dtype=torch.int8, device="cuda").view(torch.uint8)
    scales = (torch.rand(Mq * Kq // 32, device="cuda") * 0.01 + 0.001).to(torch.float16)
    blocks[:, :2] = scales.view(torch.uint8).view(-1, 2)
    qdata = blocks.reshape(-1).contiguous()

    def torch_q8_0() -> torch.Tensor:
        b = qdata.view(-1, 34)
        return (b[:, :2].contiguous().view(torch.float16).float() * b[:, 2:].view(torch.int8).float()).to(BF).view(
            Mq, Kq)

    table.append(("dequantize Q8_0 4096^2 -> bf16", lambda: gguf.dequantize(qdata, "Q8_0", (Mq, Kq), BF),
                  torch_q8_0, 0.0))
    wq, xq = torch_q8_0(), r(Kq)
    table.append(("quant_gemv Q8_0 4096^2 (torch: mv on bf16 weights)",
                  lambda: quant_gemv.quant_gemv(qdata, "Q8_0", xq, Mq, Kq), lambda: torch.mv(wq, xq), 1.0))
    x1d, w1d = r(8, 512, 4096), r(512, 512, 3)
    table.append(("conv1d N=8 C=512 L=4096 K=3 bf16", lambda: conv.conv1d(x1d, w1d, padding=1),
                  lambda: F.conv1d(x1d, w1d, padding=1), 1.0))
    xdw, wdw = r(8, 64, 56, 56), r(64, 1, 3, 3)
    table.append(("depthwise_conv2d N=8 C=64 56^2 3x3 bf16", lambda: conv.depthwise_conv2d(xdw, wdw, padding=1),
                  lambda: F.conv2d(xdw, wdw, padding=1, groups=64), 0.1))
    xf, yf, tf = r(1024, dtype=torch.float32), torch.empty(1024, device="cuda"), torch.empty(1024, device="cuda")
    table.append(("user kernel scale[1024, 256](x, y, 2.0)", lambda: (scale[1024, 256](xf, yf, 2.0), yf)[1],
                  lambda: torch.mul(xf, 2.0, out=tf), 0.0))
    out = []
    for name, iron_call, torch_call, tol in table:
        if args.filter and args.filter not in name:
            continue
        got, want = iron_call(), torch_call()
        torch.cuda.synchronize()
        err = (got.float() - want.float()).abs().max().item()
        iron_us, torch_us = call_us(torch, [iron_call, torch_call], args.count, args.reps)
        row = {"op": name, "max_abs_diff": err, "tolerance": tol, "checked": err <= tol,
               "iron_call_us": round(iron_us, 1), "torch_call_us": round(torch_us, 1),
               "iron_kernel_us": round(kernel_us(torch, iron_call, args.profiled), 2),
               "torch_kernel_us": round(kernel_us(torch, torch_call, args.profiled), 2)}
        row["call_minus_torch_us"] = round(row["iron_call_us"] - row["torch_call_us"], 1)
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--profiled", type=int, default=20)
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows(args)},
                     indent=1))


if __name__ == "__main__":
    main()
