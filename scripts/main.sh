#!/usr/bin/env bash
# The main job on this machine: set up, show the devices, run `iron bench` on the best backend present
# (CUDA, else Vulkan -- lavapipe on a CPU machine -- else the interpreter), run the quickstart kernels,
# show one kernel's IR through the pass pipeline and its CUDA source, and build every target.
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
