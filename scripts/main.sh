#!/usr/bin/env bash
# The main job on this machine: set up, show the devices, run `iron bench` on the best backend present
# (CUDA, else Vulkan -- lavapipe on a CPU machine -- else the interpreter), run the quickstart kernels,
# show one kernel's IR through the pass pipeline and its CUDA source, build every target, and run a Llama model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
backend=$(.venv/bin/python -c "from iron.runtime import best_backend; print(best_backend())")
.venv/bin/iron device
# The main job: every registered bench on the best backend here (CUDA on an NVIDIA GPU, else Vulkan --
# lavapipe on a CPU machine -- else the interpreter), each row checked against its reference.
.venv/bin/iron bench --backend "$backend" -v
IRON_BACKEND=$backend .venv/bin/python examples/quickstart.py
.venv/bin/iron inspect examples/quickstart.py:iron_exp --variant T=f16 --passes
.venv/bin/iron inspect examples/quickstart.py:group_sum --variant T=f16 --emit cuda --asm
.venv/bin/iron build -m examples/quickstart.py --emit all --out build/iron
# A model end to end (iron.models): a Llama GGUF of random weights, then greedy decoding with `iron run`: on an
# NVIDIA GPU Llama-3-8B's block shape (4 blocks, bf16, each decode step one CUDA graph), elsewhere the tiny model.
mkdir -p build
if [ "$backend" = cuda ]; then
  .venv/bin/python -m iron.models random build/llama-4l.gguf --preset llama-4l
  .venv/bin/iron run build/llama-4l.gguf --prompt 1,15043,29892,338 --prompt 1,450 --max-new 64 --graphs
else
  .venv/bin/python -m iron.models random build/llama-tiny.gguf --preset tiny
  .venv/bin/iron run build/llama-tiny.gguf --prompt 1,5,7,9 --prompt 3 --max-new 8 --backend "$backend"
fi
