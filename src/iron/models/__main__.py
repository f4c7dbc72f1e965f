"""``python -m iron.models generate MODEL.gguf --prompt 1,2,3 [--prompt 4,5] --max-new N``: greedy decoding of a
Llama GGUF file with iron.models.llama, the new token ids printed per prompt, with time to first token and
tokens/s (every sequence's new tokens over the whole run's wall time, prompt steps included)."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from iron import LaunchError, IronError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iron.models", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="greedy decoding of a Llama GGUF file")
    gen.add_argument("model", help="a Llama-architecture GGUF file")
    gen.add_argument("--prompt", action="append", required=True, help="comma-separated token ids (repeat: a batch)")
    gen.add_argument("--max-new", type=int, default=16)
    gen.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    gen.add_argument("--backend", default=None, help="iron backend on the CPU (interp, vulkan); default: Iron's")
    gen.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    args = ap.parse_args(argv)
    from iron.models.llama import Llama

    try:
        prompts = [[int(t) for t in p.split(",") if t.strip()] for p in args.prompt]
    except ValueError:
        print("error: --prompt takes comma-separated integer token ids, e.g. --prompt 1,15043,29892", file=sys.stderr)
        return 2
    dtype = {"f32": np.float32, "f16": np.float16}.get(args.dtype)
    if dtype is None:
        import ml_dtypes

        dtype = ml_dtypes.bfloat16
    try:
        model = Llama.from_gguf(args.model, dtype=dtype, device=args.device, backend=args.backend)
        marks: list[float] = []
        start = time.perf_counter()
        first = min(map(len, prompts))

        def progress(position: int, logits: np.ndarray) -> None:
            marks.append(time.perf_counter())
            print(f"\rposition {position + 1}", end="", file=sys.stderr, flush=True)

        new = model.generate(prompts, args.max_new, on_step=progress)
    except (LaunchError, IronError) as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    print(file=sys.stderr)
    for p, n in zip(prompts, new):
        print(",".join(map(str, p)), "->", ",".join(map(str, n)))
    ttft = marks[first - 1] - start
    total = marks[-1] - start
    count = sum(map(len, new))
    print(f"time to first token {ttft * 1e3:.1f} ms; {count} new tokens in {total:.2f} s: {count / total:.1f} "
          f"tokens/s (batch {len(prompts)}, {len(marks)} steps)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
