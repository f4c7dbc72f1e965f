#!/usr/bin/env bash
# The main job on this machine: set up, then run the quickstart kernels on the best backend present
# (today the CPU interpreter) against numpy, and show one kernel's IR through the pass pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python examples/quickstart.py
.venv/bin/iron inspect examples/quickstart.py:iron_exp --variant T=f16 --passes
