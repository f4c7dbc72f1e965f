#!/usr/bin/env bash
# Whether conv_ws's ResNet rows are bound by the launch or by the kernel: event times beside the profiler's kernel
# time (iron_kernel_us) for two ResNet shapes, conv_ws and conv_wg.  About 25 seconds on a warm cache.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
cd scripts/device && export PYTHONPATH=/tmp/site:../../src:. IRON_CACHE_DIR=/tmp/iron-cache
timeout "${LIMIT:-25}" python3 conv_tune.py --reps 3 --shapes resnet_512_7 resnet_256_14 \
  --configs WS128_S4_PW8 WG128_S4_P1 2>&1 | tee "${OUT:-/tmp}/host_or_gpu.jsonl" | cut -c1-200
