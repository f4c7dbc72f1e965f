"""iron.models.llama at real sizes on the GPU (issue 22): a GGUF file of random weights written with the gguf
package's writer (hidden 4096, 32 heads, 8 KV heads, MLP 14336, vocab 32000, ``--layers`` blocks), loaded by the
real loader, greedy decoding by Iron (eager and replayed from CUDA graphs) beside PyTorch eager
(``iron.models.reference.EagerLlama``: static KV cache, SDPA), the same step captured in a CUDA graph and, with
``--compile``, ``torch.compile`` of it with CUDA graphs (``mode="reduce-overhead"``, ``compiled_*``) and without
(``compiled_no_graph_*``).

Every Iron step's logits are checked against an f32 EagerLlama fed the same tokens (largest |difference| over the
largest |logit|).  One JSON line per batch size: Iron's time to first token (the packed prefill), decode tokens/s
and ms a step, torch's tokens/s, the weight bytes a step reads and the step time that reading them at
``--copy-gbs`` would take (the B=1 bound).

    PYTHONPATH=/tmp/site:src python3 scripts/device/llama_bench.py --layers 4 --batch 1 16 [--compile]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np


def weight_bytes(config, qtype: str | None) -> int:
    """Bytes of weights a decode step reads: every projection and the LM head (bf16, or the quantised blocks)."""
    c, d = config, config.head_dim
    per_block = c.hidden * (c.heads * d * 2 + c.kv_heads * d * 2) + 3 * c.hidden * c.ffn
    scale = {None: 2.0, "Q8_0": 34 / 32, "Q4_0": 18 / 32, "Q4_K": 144 / 256, "Q6_K": 210 / 256}[qtype]
    return int(c.layers * per_block * scale + c.vocab * c.hidden * 2)


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def run_iron(model, prompts: list[list[int]], max_new: int, graphs: bool = False):
    """(new tokens, every step's logits) of one run, then, from a run without the logits' copies to the host, the
    time to the first tokens (the prefill) and the seconds a decode step takes from the third on (after a CUDA
    graph's capture)."""
    logits: list[np.ndarray] = []
    new = model.generate(prompts, max_new, on_step=lambda step, out: logits.append(out), graphs=graphs)
    marks: list[float] = []
    sync(model.device)
    start = time.perf_counter()
    model.generate(prompts, max_new, graphs=graphs, on_tokens=lambda step, tokens: marks.append(time.perf_counter()))
    return new, logits, marks[0] - start, (marks[-1] - marks[2]) / (len(marks) - 3)


def profile_decode(model, prompts: list[list[int]], steps: int) -> dict:
    """Eager decode steps under the CUDA profiler: GPU time a step by kernel (the largest first, µs and share of
    the GPU time), the GPU's busy time a step against its wall time (the rest is the host's share)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from iron.std import reduce

    lens = np.array([len(p) for p in prompts], np.int32)
    cache = model.new_cache(len(prompts), int(lens.max()) + steps + 1)
    tokens = model._host(reduce.argmax(model.prefill(prompts, cache), backend=model.backend)).astype(np.int32)
    positions = lens.copy()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            logits = model.step(tokens, positions, cache)
            tokens = model._host(reduce.argmax(logits, backend=model.backend)).astype(np.int32)
            positions += 1
        wall = (time.perf_counter() - start) / steps
    return kernel_shares(prof, steps, wall, 60)


def kernel_shares(prof, steps: int, wall: float, width: int) -> dict:
    """A profile's GPU time a step by kernel (names cut to ``width``; the 12 largest, us and share of the GPU
    time), the GPU's busy time a step against the wall time ``wall`` (s) a step, and the rest as the host's share."""
    kernels: dict[str, float] = {}
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0)
        if us > 0:
            kernels[e.key[:width]] = kernels.get(e.key[:width], 0.0) + us / steps
    busy = sum(kernels.values())
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:12]
    return {"gpu_us_per_step": round(busy, 1), "wall_us_per_step": round(wall * 1e6, 1),
            "host_share": round(1 - busy / (wall * 1e6), 3),
            "kernels": [[name, round(us, 1), round(us / busy, 3)] for name, us in top]}


def profile_torch(config, tensors, batch: int, start: int, steps: int, device: str) -> dict:
    """EagerLlama's bf16 decode steps under the CUDA profiler, reported as :func:`profile_decode` reports Iron's (why
    its projections read the weights well below the copy ceiling)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from iron.models.reference import EagerLlama

    model = EagerLlama(config, tensors, batch, start + steps + 8, device=device, dtype=torch.bfloat16)
    toks = torch.ones(batch, dtype=torch.long, device=device)
    for pos in range(4):
        toks = model.step(toks, torch.full((batch,), pos, device=device)).argmax(-1)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for pos in range(start, start + steps):
            toks = model.step(toks, torch.full((batch,), pos, device=device)).argmax(-1)
            toks = torch.tensor(toks.tolist(), device=device)
        wall = (time.perf_counter() - t0) / steps
    return kernel_shares(prof, steps, wall, 80)


#: How run_torch runs EagerLlama's step: as it is, replayed from a CUDA graph captured once, torch.compile without
#: CUDA graphs (inductor's kernels, launched eagerly), and torch.compile with them ("reduce-overhead").
TORCH_MODES = ("eager", "graph", "compile", "compile_graphs")


def graphed_step(torch, model, batch: int, device: str):
    """model.step captured once into a CUDA graph (fixed token and position tensors copied into before each
    replay; the static cache mutated in place), as a user with PyTorch's own graph API would run it."""
    toks = torch.ones(batch, dtype=torch.long, device=device)
    pos = torch.zeros(batch, dtype=torch.long, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream (position 0: the prompt rewrites it)
        for _ in range(2):
            model.step(toks, pos)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model.step(toks, pos)

    def step(tokens, positions):
        toks.copy_(tokens)
        pos.copy_(positions)
        graph.replay()
        return out

    return step


def run_torch(config, tensors, batch: int, start: int, steps: int, mode: str, device: str) -> float:
    """ms per decode step of EagerLlama in bf16 run as ``mode`` (TORCH_MODES; greedy: the argmax back on the host
    each step, as Iron's)."""
    import torch

    from iron.models.reference import EagerLlama

    model = EagerLlama(config, tensors, batch, start + steps + 8, device=device, dtype=torch.bfloat16)
    step = model.step
    if mode == "graph":
        step = graphed_step(torch, model, batch, device)
    elif mode in ("compile", "compile_graphs"):
        # Fixed addresses for everything the step reads beside its inputs: the caches, mutated in place (as HF's
        # StaticCache), and the weights and RoPE tables.  Plain tensor attributes (not nn.Module parameters) are
        # otherwise graph inputs that CUDA-graph replay copies into its own buffers on every step: 2 GB a step
        # here, which is what the first compiled rows (slower than eager at B = 1) measured.
        for t in model.k + model.v + list(model.w.values()) + [model.cos, model.sin, model.keys]:
            torch._dynamo.mark_static_address(t)
        step = torch.compile(model.step, mode="reduce-overhead" if mode == "compile_graphs" else "default",
                             fullgraph=True)
    toks = torch.ones(batch, dtype=torch.long, device=device)
    for pos in range(start):  # the prompt, a position a step (warm-up; compiled: capture)
        toks = step(toks, torch.full((batch,), pos, device=device)).argmax(-1)
        toks = torch.tensor(toks.tolist(), device=device)
    sync(device)
    t0 = time.perf_counter()
    for pos in range(start, start + steps):
        toks = step(toks, torch.full((batch,), pos, device=device)).argmax(-1)
        toks = torch.tensor(toks.tolist(), device=device)
    elapsed = (time.perf_counter() - t0) / steps
    return elapsed * 1e3


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--prompt", type=int, default=64, help="longest prompt (the others shorter, down to half)")
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--qtype", choices=["Q8_0", "Q4_0", "Q4_K", "Q6_K"], default=None)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--profile", action="store_true", help="kernel shares of Iron's eager decode (CUDA profiler)")
    ap.add_argument("--tiny", action="store_true", help="a small model on the CPU interpreter (checks this script)")
    ap.add_argument("--copy-gbs", type=float, default=4300.0, help="the device's copy ceiling, GB/s")
    args = ap.parse_args(argv)
    import ml_dtypes

    from iron.models.gguf_file import read_llama
    from iron.models.llama import Llama
    from iron.models.random_model import PRESETS, write_random
    from iron.models.reference import logit_error

    config = replace(PRESETS["llama-4l"], layers=args.layers, ffn=args.ffn)
    device, backend = "cuda", "cuda"
    if args.tiny:
        config, device, backend = PRESETS["tiny"], "cpu", "interp"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "llama.gguf"
        t0 = time.perf_counter()
        write_random(path, config, args.qtype)
        written = time.perf_counter() - t0
        t0 = time.perf_counter()
        model = Llama.from_gguf(path, dtype=ml_dtypes.bfloat16, device=device, backend=backend)
        loaded = time.perf_counter() - t0
        config, tensors = read_llama(path)
        print(json.dumps({"written_s": round(written, 1), "loaded_s": round(loaded, 1),
                          "file_gb": round(path.stat().st_size / 1e9, 2)}), flush=True)
        rng = np.random.default_rng(1)
        for batch in args.batch:
            lens = np.linspace(args.prompt, args.prompt // 2, batch).astype(int) if batch > 1 else [args.prompt]
            prompts = [rng.integers(0, config.vocab, n).tolist() for n in lens]
            new, logits, ttft, step_s = run_iron(model, prompts, args.new)
            error, _ = logit_error(config, tensors, prompts, new, logits, model.prefills, device)
            row = {"layers": config.layers, "batch": batch, "qtype": args.qtype or "bf16", "prompt": args.prompt,
                   "new": args.new, "iron_ttft_ms": round(ttft * 1e3, 2), "iron_step_ms": round(step_s * 1e3, 3),
                   "iron_tokens_s": round(batch / step_s, 1), "logit_error": float(f"{error:.2e}"),
                   "weight_gb": round(weight_bytes(config, args.qtype) / 1e9, 3)}
            if device == "cuda":
                new_g, _, _, graph_s = run_iron(model, prompts, args.new, graphs=True)
                row.update({"iron_graph_step_ms": round(graph_s * 1e3, 3), "iron_graph_tokens_s":
                            round(batch / graph_s, 1), "graph_tokens_equal": new_g == new})
            row["bound_step_ms"] = round(weight_bytes(config, args.qtype) / (args.copy_gbs * 1e9) * 1e3, 3)
            eager = run_torch(config, tensors, batch, int(max(lens)), args.new, "eager", device)
            row.update({"torch_step_ms": round(eager, 3), "torch_tokens_s": round(batch / eager * 1e3, 1)})
            if device == "cuda":
                graph = run_torch(config, tensors, batch, int(max(lens)), args.new, "graph", device)
                row.update({"torch_graph_step_ms": round(graph, 3), "torch_graph_tokens_s":
                            round(batch / graph * 1e3, 1)})
            print(json.dumps(row), flush=True)
            if args.profile and device == "cuda":
                print(json.dumps({"batch": batch, "profile": profile_decode(model, prompts, 16)}), flush=True)
                print(json.dumps({"batch": batch, "torch_profile": profile_torch(
                    config, tensors, batch, int(max(lens)), 16, device)}), flush=True)
        for batch in args.batch if args.compile else ():  # last: compiling takes minutes
            graphs = run_torch(config, tensors, batch, args.prompt, args.new, "compile_graphs", device)
            plain = run_torch(config, tensors, batch, args.prompt, args.new, "compile", device)
            print(json.dumps({"batch": batch, "compiled_step_ms": round(graphs, 3),
                              "compiled_tokens_s": round(batch / graphs * 1e3, 1),
                              "compiled_no_graph_step_ms": round(plain, 3),
                              "compiled_no_graph_tokens_s": round(batch / plain * 1e3, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
