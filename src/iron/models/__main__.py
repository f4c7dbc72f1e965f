"""``python -m iron.models generate MODEL.gguf --prompt 1,2,3 [--prompt 4,5] --max-new N`` (also ``iron run
MODEL.gguf ...``): greedy decoding of a Llama GGUF file with iron.models.llama, the new token ids printed per
prompt, with progress, the time to the first tokens and the decode rate (new tokens a second after the first).
``python -m iron.models random OUT.gguf --preset tiny|llama-4l [--qtype Q4_K]``: a GGUF file of random weights to
try it on (iron.models.random_model)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from iron import LaunchError, IronError
from iron.models.random_model import PRESETS

#: Decode steps between progress lines when stderr is not a terminal (a log).
PROGRESS_EVERY = 16


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``generate`` (and ``iron run``)."""
    p.add_argument("model", help="a Llama-architecture GGUF file")
    p.add_argument("--prompt", action="append", required=True, help="comma-separated token ids (repeat: a batch)")
    p.add_argument("--max-new", type=int, default=16)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where the model runs (auto: cuda where torch sees a GPU, else the CPU)")
    p.add_argument("--backend", default=None, help="iron backend on the CPU (interp, vulkan); default: Iron's")
    p.add_argument("--dtype", choices=["auto", "f32", "f16", "bf16"], default="auto",
                   help="activations and weights (auto: bf16 on a GPU, f32 on the CPU)")
    p.add_argument("--graphs", action="store_true", help="replay each decode step as one CUDA graph (cuda)")
    p.add_argument("--top-k", type=int, default=None,
                   help="sample each token from the K most likely (0: all of them); default: greedy")
    p.add_argument("--temperature", type=float, default=1.0, help="with --top-k: softmax(logits / T)")
    p.add_argument("--seed", type=int, default=None, help="with --top-k: the uniform numbers' seed")
    p.add_argument("--check", action="store_true",
                   help="compare every step's logits with the plain PyTorch model's in f32 on the same device "
                        "(needs torch; exit 1 past the dtype's bound)")


#: --check's bound on the largest |Iron - PyTorch f32| logit over the largest |PyTorch logit|, by dtype: what the
#: tests allow (tests/models, tests/gpu/test_models_cuda.py).
CHECK_BOUNDS = {"f32": 1e-4, "f16": 1e-2, "bf16": 4e-2}


def _device(name: str) -> str:
    if name != "auto":
        return name
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def _dtype_name(name: str, device: str) -> str:
    return ("bf16" if device != "cpu" else "f32") if name == "auto" else name


def _dtype(name: str, device: str) -> Any:
    name = _dtype_name(name, device)
    if name == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return {"f32": np.float32, "f16": np.float16}[name]


def generate(args: argparse.Namespace) -> int:
    """Run ``generate``; the exit code (2: bad arguments, 1: the model or the run failed)."""
    from iron.models.llama import Llama
    from iron.models.sampling import Sampling

    try:
        prompts = [[int(t) for t in p.split(",") if t.strip()] for p in args.prompt]
    except ValueError:
        print("error: --prompt takes comma-separated integer token ids, e.g. --prompt 1,15043,29892", file=sys.stderr)
        return 2
    device = _device(args.device)
    if args.graphs and device == "cpu":
        print("error: --graphs replays CUDA graphs: add --device cuda (on a machine with an NVIDIA GPU)",
              file=sys.stderr)
        return 2
    if args.check:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("error: --check compares with the model in PyTorch: install torch, or leave --check out",
                  file=sys.stderr)
            return 2
    marks: list[float] = []
    seen: list[np.ndarray] = []
    try:
        sampling = Sampling(args.top_k, args.temperature, args.seed) if args.top_k is not None else None
        model = Llama.from_gguf(args.model, dtype=_dtype(args.dtype, device), device=device, backend=args.backend)
        start = time.perf_counter()

        live = sys.stderr.isatty()

        def progress(step: int, tokens: list[int]) -> None:
            """One line rewritten in place on a terminal; in a log (not a terminal) a line every PROGRESS_EVERY
            steps, not a run of carriage returns."""
            marks.append(time.perf_counter())
            if live:
                print(f"\rstep {step + 1}", end="", file=sys.stderr, flush=True)
            elif (step + 1) % PROGRESS_EVERY == 0:
                print(f"step {step + 1}", file=sys.stderr, flush=True)

        new = model.generate(prompts, args.max_new, graphs=args.graphs, on_tokens=progress, sampling=sampling,
                             on_step=(lambda step, logits: seen.append(logits)) if args.check else None)
    except (LaunchError, IronError) as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    if live:
        print(file=sys.stderr)
    for p, n in zip(prompts, new):
        print(",".join(map(str, p)), "->", ",".join(map(str, n)))
    # the first tokens: the prefill's (f16 / bf16), or the step of the shortest prompt's last token (lock step)
    first = 0 if model.prefills else min(map(len, prompts)) - 1
    line = f"time to first token {(marks[first] - start) * 1e3:.1f} ms"
    if len(marks) > first + 1:
        rate = len(prompts) * (len(marks) - 1 - first) / (marks[-1] - marks[first])
        where = f"{args.backend} on the host's arrays" if device == "cpu" and args.backend else device
        line += f"; decode {rate:.1f} tokens/s (batch {len(prompts)}, {len(marks)} steps, {where})"
    print(line, file=sys.stderr)
    return _check(args, model, prompts, new, seen, device) if args.check else 0


def _check(args: argparse.Namespace, model: Any, prompts: list[list[int]], new: list[list[int]],
           seen: list[np.ndarray], device: str) -> int:
    """--check: the logits of every step against the plain PyTorch model's in f32; 1 past the dtype's bound."""
    from iron.models.gguf_file import read_llama
    from iron.models.reference import logit_error

    config, tensors = read_llama(args.model)
    error, positions = logit_error(config, tensors, prompts, new, seen, model.prefills, device)
    bound = CHECK_BOUNDS[_dtype_name(args.dtype, device)]
    verdict = "within" if error <= bound else "PAST"
    print(f"check: logits {verdict} {bound:g} of the PyTorch f32 model's at {positions} positions (largest "
          f"|difference| / largest |logit|: {error:.2e})", file=sys.stderr)
    return 0 if error <= bound else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iron.models", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    add_arguments(sub.add_parser("generate", help="greedy decoding of a Llama GGUF file"))
    rnd = sub.add_parser("random", help="write a Llama GGUF file of random weights")
    rnd.add_argument("out", help="the file to write (replaced only once the new one is whole)")
    rnd.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    rnd.add_argument("--qtype", choices=["Q8_0", "Q4_0", "Q4_K", "Q6_K"], default=None,
                     help="quantise every block projection (default: f16)")
    rnd.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.command == "random":
        return write_random_file(args)
    return generate(args)


def write_random_file(args: argparse.Namespace) -> int:
    """Write ``random``'s file next to its destination, then move it there: an interrupted run leaves no half file."""
    from pathlib import Path

    from iron.models.random_model import write_random

    out = Path(args.out)
    if not out.parent.is_dir():
        print(f"error: no folder {out.parent} to write {out.name} into", file=sys.stderr)
        return 2
    partial = out.with_name(out.name + ".partial")
    try:
        write_random(partial, PRESETS[args.preset], args.qtype, args.seed)
        partial.replace(out)
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        partial.unlink(missing_ok=True)
    config = PRESETS[args.preset]
    print(f"{out}: {args.preset} ({config.layers} blocks, hidden {config.hidden}, {config.heads} heads, "
          f"{config.kv_heads} KV heads, vocabulary {config.vocab}), {args.qtype or 'f16'}, "
          f"{out.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
