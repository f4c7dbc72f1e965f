#!/usr/bin/env bash
# The main job on this machine: set up, show the devices, run a Llama model with `iron run` (its tokens are the first
# result, within a minute of set-up), then `iron bench` on the best backend present (CUDA, else Vulkan -- lavapipe on
# a CPU machine -- else the interpreter), the quickstart kernels, one kernel's IR through the pass pipeline and its
# CUDA source, and every target built.  `iron bench` times the example benches (about 30 s on lavapipe);
# `bash scripts/main.sh --full` times every registered bench, the standard library's too (on lavapipe on a 2-core
# machine that took 33 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") full=0 ;;
  --full) full=1 ;;
  *) echo "usage: bash scripts/main.sh [--full]   (--full: every registered bench, not just the examples')" >&2
     exit 2 ;;
esac
bash scripts/setup.sh
backend=$(.venv/bin/python -c "from iron.runtime import best_backend; print(best_backend())")
.venv/bin/iron device
# A model end to end (iron.models): a Llama GGUF of random weights, then greedy decoding with `iron run`: on an
# NVIDIA GPU Llama-3-8B's block shape (4 blocks, bf16, each decode step one CUDA graph), elsewhere the tiny model;
# --check compares every step's logits with the same model in PyTorch (f32).
mkdir -p build
if [ "$backend" = cuda ]; then
  .venv/bin/python -m iron.models random build/llama-4l.gguf --preset llama-4l
  .venv/bin/iron run build/llama-4l.gguf --prompt 1,15043,29892,338 --prompt 1,450 --max-new 64 --graphs --check
else
  .venv/bin/python -m iron.models random build/llama-tiny.gguf --preset tiny
  .venv/bin/iron run build/llama-tiny.gguf --prompt 1,5,7,9 --prompt 3 --max-new 8 --backend "$backend" --check
fi
# The benches on the best backend here, each row checked against its reference.
if [ "$full" = 1 ]; then
  .venv/bin/iron bench --backend "$backend" -v
else
  .venv/bin/iron bench -m examples/benches.py --backend "$backend" -v
fi
IRON_BACKEND=$backend .venv/bin/python examples/quickstart.py
.venv/bin/iron inspect examples/quickstart.py:iron_exp --variant T=f16 --passes
.venv/bin/iron inspect examples/quickstart.py:group_sum --variant T=f16 --emit cuda --asm
.venv/bin/iron build -m examples/quickstart.py --emit all --out build/iron
