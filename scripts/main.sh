#!/usr/bin/env bash
# The main job on this machine: set up, then run the quickstart kernels on the best backend present
# (Vulkan when a driver answers -- lavapipe on a CPU machine -- else the interpreter) against numpy,
# show one kernel's IR through the pass pipeline and its CUDA source, and build every target.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
backend=$(.venv/bin/python -c "from iron.runtime import best_backend; print(best_backend())")
IRON_BACKEND=$backend .venv/bin/python examples/quickstart.py
.venv/bin/iron inspect examples/quickstart.py:iron_exp --variant T=f16 --passes
.venv/bin/iron inspect examples/quickstart.py:group_sum --variant T=f16 --emit cuda --asm
.venv/bin/iron build -m examples/quickstart.py --emit all --out build/iron
