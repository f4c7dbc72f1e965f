"""Programmatic dependent launch (the ``pdl`` option, docs/cuda.md) timed: the GPU time a chain of dependent Iron
kernels takes per kernel, from the first launch's start to the last one's end (CUDA events around the chain), with
the option as the environment sets it (run twice: ``IRON_PDL=0`` and ``IRON_PDL=1``).  One JSON line per row.

Rows: a tiny elementwise step (8K f32, each launch reading another group's element of the one before), launched
eagerly and replayed from a torch CUDA graph; and ``gemv`` 4096 x 4096 bf16 chained (y = A x, then x = A y), both
ways.  The step chain's result is checked exactly, the gemv chain's first product against torch's.

    PYTHONPATH=src python3 scripts/device/pdl_chain.py
"""

from __future__ import annotations

import json
import os

from iron import In, Tensor, config, f32, i32, kernel
from iron.lang import group_id, thread_id


@kernel
def step(src: In[f32], dst: Tensor[f32], n: i32):
    i = group_id(0) * 256 + thread_id(0)
    if i < n:
        dst[i] = src[(i + 1) % n] + 1.0


def span_us(torch, run, launches: int, reps: int = 5) -> float:
    """Median over ``reps`` of the GPU time from before ``run()``'s first kernel to after its last, per launch."""
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / launches)
    return sorted(times)[len(times) // 2]


def graphed(torch, run):
    """``run`` captured once in a torch CUDA graph; the replay."""
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        run()
    return g.replay


def main() -> None:
    import torch

    from iron.std import gemv

    mode = "pdl" if config.get("pdl") else "plain"
    n, count = 8192, 500
    a = torch.zeros(n, device="cuda")
    b = torch.zeros(n, device="cuda")

    def steps():
        for j in range(count):
            src, dst = (a, b) if j % 2 == 0 else (b, a)
            step[(n + 255) // 256 * 256, 256](src, dst, n, backend="cuda")

    a.zero_(), b.zero_()
    steps()
    exact = bool((a == count).all())  # count is even: the last launch wrote a
    print(json.dumps({"mode": mode, "row": "step_eager", "us_per_kernel": round(span_us(torch, steps, count), 3),
                      "exact": exact}), flush=True)
    replay = graphed(torch, steps)
    print(json.dumps({"mode": mode, "row": "step_graph", "us_per_kernel": round(span_us(torch, replay, count), 3)}),
          flush=True)
    m = 4096
    w = (torch.randn(m, m, device="cuda") / m ** 0.5).bfloat16()
    x = torch.randn(m, device="cuda").bfloat16()
    y = torch.empty_like(x)
    reps = 100

    def gemvs():
        for _ in range(reps // 2):
            gemv.gemv(w, x, out=y, backend="cuda")
            gemv.gemv(w, y, out=x, backend="cuda")

    x0 = x.clone()
    gemv.gemv(w, x0, out=y, backend="cuda")
    err = float((y.float() - w.float() @ x0.float()).abs().max() / (w.float() @ x0.float()).abs().max())
    print(json.dumps({"mode": mode, "row": "gemv_eager", "us_per_kernel": round(span_us(torch, gemvs, reps), 3),
                      "error": round(err, 5)}), flush=True)
    replay = graphed(torch, gemvs)
    print(json.dumps({"mode": mode, "row": "gemv_graph", "us_per_kernel": round(span_us(torch, replay, reps), 3)}),
          flush=True)
    print(json.dumps({"mode": mode, "IRON_PDL": os.environ.get("IRON_PDL")}), flush=True)


if __name__ == "__main__":
    main()
