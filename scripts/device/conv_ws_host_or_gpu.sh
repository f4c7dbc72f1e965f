#!/usr/bin/env bash
# Whether conv_ws's ResNet rows are bound by the launch or by the kernel: event times beside the profiler's kernel
# time (iron_kernel_us) for two ResNet shapes, conv_ws and conv_wg.  JSON under $OUT.  About 25 seconds warm.
set -uo pipefail
source scripts/device/device_env.sh
cd scripts/device
export PYTHONPATH=/tmp/site:../../src:.
timeout "${LIMIT:-60}" python3 conv_tune.py --reps 3 --shapes resnet_512_7 resnet_256_14 \
  --configs WS128_S4_PW8 WS128_S4_PW8_R WG128_S4_P1 2>&1 | tee "$out/host_or_gpu.jsonl" | cut -c1-200
